"""Built-in rule conditions, and the patterns inside permission strings like ``Bash(git push *)``.

Importing this module registers every built-in condition key. The argument-aware ones live in
their own modules and register themselves when imported here.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from callwarden._call import FrozenDict
from callwarden.conditions.base import CompileEnv, Hit, Matcher, Subject, register_condition
from callwarden.engine.rules import is_glob
from callwarden.exceptions import ConfigError

__all__ = ["ArgsMatcher", "compile_permission_pattern"]


_MISSING = object()


@register_condition("args")
class ArgsMatcher:
    """``args: {path.to.arg: pattern}``: every listed argument matches one of its patterns.

    A string pattern with ``*``, ``?`` or ``[...]`` is a glob over string values; any other
    value must be equal (same type). A list gives alternatives. Rules whose only condition is
    one argument with literal values are indexed by that value (see ``index_key``).
    """

    __slots__ = ("_checks", "_single", "_single_hit", "index_key")

    def __init__(self, config: Any, env: CompileEnv) -> None:
        if not isinstance(config, Mapping) or not config:
            raise ConfigError("must map argument names to patterns",
                              hint="e.g. args: {env: prod, branch: 'release/*'}")
        checks = []
        for name, patterns in config.items():
            values = patterns if isinstance(patterns, list) else [patterns]
            if not values or any(isinstance(v, Mapping | list) for v in values):
                raise ConfigError("patterns must be strings or plain values", key=name)
            globs = [p for p in values if isinstance(p, str) and is_glob(p)]
            exact = frozenset((type(v), v) for v in values if not (isinstance(v, str) and is_glob(v)))
            regex = re.compile("|".join(f"(?:{fnmatch.translate(g)})" for g in globs), re.S) \
                if globs else None
            checks.append((tuple(str(name).split(".")), exact, regex))
        self._checks = tuple(checks)
        only = checks[0] if len(checks) == 1 else None
        self._single = (only[0][0], only[1], only[2]) if only and len(only[0]) == 1 else None
        self._single_hit = Hit(f"args.{only[0][0]} matches", "args.matched") if self._single \
            and only else None
        #: (argument name, literal values) when this matcher is one top-level argument compared
        #: with literals: the engine then finds the rule by the argument's value.
        self.index_key: tuple[str, frozenset[Any]] | None = (
            (only[0][0], frozenset(v for _, v in only[1]))
            if only is not None and len(only[0]) == 1 and only[2] is None else None)

    def __call__(self, subject: Subject) -> Hit | None:
        args = subject.call.args
        if self._single is not None:  # one top-level argument: the common case, kept short
            name, exact, regex = self._single
            arg = args.get(name, _MISSING)
            if arg is _MISSING:
                return None
            try:
                found = (type(arg), arg) in exact
            except TypeError:
                found = False
            if found or (regex is not None and type(arg) is str and regex.match(arg)):
                return self._single_hit
            return None
        for path, exact, regex in self._checks:
            value: Any = args
            for part in path:
                if type(value) is not FrozenDict or part not in value:
                    return None
                value = value[part]
            try:
                found = (type(value), value) in exact
            except TypeError:  # unhashable value (a list or mapping): only globs could match
                found = False
            if not found and (regex is None or type(value) is not str
                              or regex.match(value) is None):
                return None
        if len(self._checks) == 1:
            return Hit(f"args.{'.'.join(self._checks[0][0])} matches", "args.matched")
        return Hit("; ".join(f"args.{'.'.join(p)} matches" for p, _, _ in self._checks),
                   "args.matched")


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


class _PrimaryGlob:
    """Fallback for ``Tool(pattern)``: a glob over the tool's primary argument.

    With ``outside_of`` it is the complement used by ``allow`` strings: it holds when some
    value is matched by none of those globs (or is not a string)."""

    __slots__ = ("_outside_of", "_pattern", "_regex", "_role")

    def __init__(self, pattern: str, role: str | None, regex: re.Pattern[str], *,
                 outside_of: tuple[re.Pattern[str], ...] = ()) -> None:
        self._pattern = pattern
        self._role = role
        self._regex = regex
        self._outside_of = outside_of

    def __call__(self, subject: Subject) -> Hit | None:
        value = subject.role(self._role) if self._role else subject.primary
        values = value if isinstance(value, tuple) else (value,)
        for v in values:
            if not isinstance(v, str):
                if self._outside_of:
                    return Hit("a value that is not text", "pattern.outside")
                continue
            text = os.path.expanduser(v) if self._role == "path" else " ".join(v.split())
            if self._outside_of:
                if not any(r.match(text) for r in self._outside_of):
                    return Hit(f"{v[:200]!r} matches no allowed pattern", "pattern.outside")
            elif self._regex.match(text):
                return Hit(f"{v[:200]!r} matches {self._pattern!r}", "pattern.matched")
        return None


class _AllOf:
    """An ``allow`` permission string's condition: its own pattern matches something the
    call does, and *everything* the call does (every command, path or URL) is matched by
    this pattern or a sibling ``allow`` string of the same kind — nothing is opaque.
    ``Bash(ls *)`` then allows ``ls -la`` but not ``ls && rm -rf /``; with ``Bash(git log *)``
    beside it, ``ls && git log`` is allowed; ``Edit(src/**)`` does not allow a patch that
    also writes ``/etc/passwd``."""

    __slots__ = ("_outside", "_own", "_pattern")

    def __init__(self, own: Matcher, outside: Matcher, pattern: str) -> None:
        self._own = own
        self._outside = outside
        self._pattern = pattern

    def __call__(self, subject: Subject) -> Hit | None:
        hit = self._own(subject)
        if hit is None or self._outside(subject) is not None:
            return None
        return Hit(hit.detail, "pattern.allowed")


def compile_permission_pattern(kind: str | None, pattern: str, *, allow: bool = False,
                               siblings: Sequence[str] = ()) -> Matcher:
    """Compiles the pattern of a permission string for a tool kind.

    Shell patterns are flag-aware (``rm -rf *`` also catches ``rm -fr /``) when the shell
    analysis is available; path patterns expand ``~``; ``WebFetch(domain:x)`` matches hosts.
    For ``deny``/``ask`` strings the condition holds when *some* command, path or URL of the
    call matches. For ``allow`` strings (``allow=True``) it holds only when the pattern
    matches and *every* command, path or URL is covered by it or by one of ``siblings`` (the
    other ``allow`` patterns of the same kind), nothing is opaque, and a shell command
    writes no file but ``/dev/null``.
    """
    own = _some_matcher(kind, pattern)
    if not allow:
        return own
    together = [pattern, *(p for p in siblings if p != pattern)]
    if kind == "shell":
        from callwarden.conditions.shell import ShellMatcher

        outside: Matcher = ShellMatcher({"allow": together, "opaque": "hit", "parse_error": "hit",
                                         "writes": ["**", "/**", "!/dev/null"]}, CompileEnv())
    elif kind in ("file.read", "file.write"):
        from callwarden.conditions.paths import PathMatcher

        outside = PathMatcher({"deny": ["/**", *(f"!{p}" for p in together)]}, CompileEnv())
    elif kind == "http" and pattern.startswith("domain:"):
        from callwarden.conditions.urls import UrlMatcher

        hosts = [p[len("domain:"):].strip().lower() for p in together if p.startswith("domain:")]
        outside = UrlMatcher({"allow_domains": hosts, "block_private": False}, CompileEnv())
    else:
        regexes = [re.compile(fnmatch.translate(p), re.S) for p in together]
        outside = _PrimaryGlob(pattern, None, regexes[0], outside_of=tuple(regexes))
    return _AllOf(own, outside, pattern)


def _some_matcher(kind: str | None, pattern: str) -> Matcher:
    if kind == "shell":
        from callwarden.conditions.shell import ShellMatcher

        # Flag-aware and parsed: `rm -rf *` also catches `rm -fr /`, `sudo /bin/rm -R -f ~`.
        return ShellMatcher({"deny": [pattern]}, CompileEnv())
    if kind in ("file.read", "file.write"):
        from callwarden.conditions.paths import PathMatcher

        # Canonicalized like every path rule: `~`, `$HOME`, `..`, encodings, case, symlinks.
        return PathMatcher({"deny": [pattern]}, CompileEnv())
    if kind == "http" and pattern.startswith("domain:"):
        from callwarden.conditions.urls import UrlMatcher

        host = pattern[len("domain:"):].strip().lower()
        if not host:
            raise ConfigError("domain: needs a host name", hint="e.g. WebFetch(domain:example.com)")
        return UrlMatcher({"deny_domains": [host], "block_private": False}, CompileEnv())
    return _PrimaryGlob(pattern, None, re.compile(fnmatch.translate(pattern), re.S))

