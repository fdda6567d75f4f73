"""What every framework adapter shares: a guard from whatever the user passed, and the one
enforcement path it translates to and from."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from callwarden import _enforce
from callwarden._guard import Guard

__all__ = ["Enforcer", "as_guard", "enforcer"]


def as_guard(source: Any) -> Guard:
    """Returns a :class:`Guard` for a guard, a policy file path, or a policy dict.

    Raises:
        TypeError: ``source`` is none of those.
        PolicyError: the policy file or dict is broken (with every problem listed).
    """
    if isinstance(source, Guard):
        return source
    if isinstance(source, str | os.PathLike):
        return Guard.from_file(os.fspath(source))
    if isinstance(source, Mapping):
        return Guard.from_dict(source)
    raise TypeError(f"expected a callwarden.Guard, a policy file path or a policy dict, "
                    f"got {type(source).__name__}")


class Enforcer(_enforce.Enforcer):
    """The one enforcement path (see :class:`callwarden._enforce.Enforcer`), built from a
    :class:`Guard`, a policy file path or a policy dict."""

    __slots__ = ()

    def __init__(self, guard: Any, *, framework: str | None = None, **options: Any) -> None:
        super().__init__(as_guard(guard), framework=framework, **options)


def enforcer(source: Any, *, framework: str, **options: Any) -> _enforce.Enforcer:
    """The enforcement path for a framework: ``source`` is an enforcer (used as it is), a
    :class:`Guard`, a policy file path or a policy dict; ``options`` are the enforcer's
    (``approver``, ``wait``, ``agent``, ``principal``, ``session``)."""
    if isinstance(source, _enforce.Enforcer):
        return source
    return Enforcer(source, framework=framework, **options)
