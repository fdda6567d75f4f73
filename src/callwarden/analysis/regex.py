"""RE2 patterns asked only "does it match somewhere?": one call into the engine per question.

``re2``'s ``search`` converts offsets around a match in several calls that each let go of the
interpreter lock; with several threads deciding, every one of those is a thread switch, and a
yes or no needs none of them. RE2 runs in time linear in the text whatever the pattern, which
is why patterns that see attacker-controlled text use it rather than Python's ``re``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

try:  # a declared dependency; without it callers keep their slower or coarser way
    import re2 as _re2  # type: ignore[import-untyped]
except ImportError:  # pragma: no cover
    _re2 = None

__all__ = ["RE2", "bytes_searcher", "searcher"]

RE2: Any = _re2
"""The ``re2`` module, or None when it is not installed."""


def bytes_searcher(rx: Any) -> Callable[[bytes], bool] | None:
    """For a compiled ``re2`` pattern: a function telling whether it matches somewhere in
    UTF-8 (or ASCII) bytes, calling the engine's own match once; None for another ``re2``
    build (use its public ``search``)."""
    try:
        raw, unanchored = rx._regexp, _re2._re2.RE2.Anchor.UNANCHORED
        if raw.Match(unanchored, b"", 0, 0)[0][0] not in (-1, 0):
            return None
    except Exception:
        return None
    return lambda data: raw.Match(unanchored, data, 0, len(data))[0][0] != -1


def searcher(pattern: str) -> Callable[[str], bool] | None:
    """A function telling whether ``pattern`` (RE2 syntax) matches somewhere in a string;
    None when RE2 is not installed or does not accept the pattern."""
    if _re2 is None:
        return None
    try:
        rx = _re2.compile(pattern)
    except Exception:  # re2.error, or a pattern too large for its memory budget
        return None
    raw = bytes_searcher(rx)
    if raw is None:
        return lambda text: rx.search(text) is not None
    return lambda text: raw(text.encode("utf-8", "surrogatepass"))
