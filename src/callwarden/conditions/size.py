"""The ``max_chars:`` condition: an argument (or a tool's output) bigger than a limit, and
the cut that keeps its shape so a ``modify`` rule truncates instead of denying."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from callwarden.conditions.base import CompileEnv, Hit, Subject, register_condition
from callwarden.exceptions import ConfigError

__all__ = ["MaxChars"]


@register_condition("max_chars")
class MaxChars:
    """``max_chars: 20000``: an argument's value (or the tool's output) is bigger than this.

    Size is counted across the whole value: the characters of every string (and bytes) in it,
    dictionary keys included, the digits of numbers, and at least one per item, so a list of
    ten thousand short strings or a dict of five thousand keys is as big as one long string.
    Each argument is measured on its own; on an output rule the whole output is one value.

    The Hit carries the arguments with each oversized value cut to the limit, keeping its shape
    (a list stays a list, a dict a dict) and leaving a marker that says what was cut, so a rule
    with ``effect: modify`` truncates instead of denying.
    """

    __slots__ = ("_limit",)

    def __init__(self, config: Any, env: CompileEnv) -> None:
        if isinstance(config, bool) or not isinstance(config, int) or config < 1:
            raise ConfigError("must be a positive number of characters", hint="e.g. max_chars: 20000")
        self._limit = config

    def __call__(self, subject: Subject) -> Hit | None:
        limit = self._limit
        args = subject.call.args
        # Measure first, stopping as soon as the limit is passed: calls under the limit (the
        # usual case) allocate nothing.
        over = [k for k, v in args.items() if _size(v, limit, 0) > limit]
        if not over:
            return None
        cut: list[str] = []
        new = dict(args)
        for k in over:
            new[k] = _Cutter(limit, cut).take(args[k], f"args.{k}", 0)
        return Hit(f"{', '.join(cut[:5])} bigger than {limit} characters", "size.exceeded", new)


def _cost(value: Any) -> int:
    """Characters a scalar counts for: its length for text, its digits for numbers, else 1."""
    kind = type(value)
    if kind is str or kind is bytes:
        return max(1, len(value))
    if kind is int:
        # str() of a huge int is slow (and refused past 4300 digits): estimate from the bits.
        return int(value.bit_length()) * 3 // 10 + 1
    if kind is float:
        return len(repr(value))
    return 1


def _size(value: Any, limit: int, depth: int) -> int:
    """The size of ``value``, or some number above ``limit`` once it is known to exceed it."""
    if depth > _MAX_DEPTH:
        return 1
    if isinstance(value, Mapping):
        total = 0
        for k, v in value.items():
            total += len(k) + _size(v, limit - total - len(k), depth + 1)
            if total > limit:
                break
        return max(1, total)
    if isinstance(value, tuple | list):
        total = 0
        for v in value:
            total += _size(v, limit - total, depth + 1)
            if total > limit:
                break
        return max(1, total)
    return _cost(value)


_MAX_DEPTH = 64


def _count(n: int, noun: str) -> str:
    return f"{n:,} more {noun}{'' if n == 1 else 's'}"


class _Cutter:
    """Copies a value while spending a budget of characters, noting the paths it cut."""

    __slots__ = ("budget", "paths")

    def __init__(self, budget: int, paths: list[str]) -> None:
        self.budget = budget
        self.paths = paths

    def take(self, value: Any, path: str, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            return value
        if isinstance(value, Mapping):
            out: dict[str, Any] = {}
            keys = list(value)
            for i, k in enumerate(keys):
                if self.budget <= 0:
                    self.paths.append(path)
                    out["…"] = f"{_count(len(keys) - i, 'key')} cut by policy"
                    break
                self.budget -= len(k)
                out[k] = self.take(value[k], f"{path}.{k}", depth + 1)
            return out
        if isinstance(value, tuple | list):
            items: list[Any] = []
            for i, v in enumerate(value):
                if self.budget <= 0:
                    self.paths.append(path)
                    items.append(f"… {_count(len(value) - i, 'item')} cut by policy")
                    break
                items.append(self.take(v, f"{path}[{i}]", depth + 1))
            return items
        kind = type(value)
        if (kind is str or kind is bytes) and len(value) > max(self.budget, 0):
            keep = max(self.budget, 0)
            self.budget = 0
            self.paths.append(path)
            marker = f"… [{len(value) - keep:,} more characters cut by policy]"
            return value[:keep] + (marker if kind is str else marker.encode())
        self.budget -= _cost(value)
        return value
