"""Built-in rule conditions, and the patterns inside permission strings like ``Bash(git push *)``.

Importing this module registers every built-in condition key. The argument-aware ones live in
their own modules and register themselves when imported here.
"""

from __future__ import annotations

import fnmatch
import importlib
import os
import re
from collections.abc import Mapping
from typing import Any

from callwarden._call import FrozenDict
from callwarden._matchers import CompileEnv, ConfigError, Hit, Matcher, Subject, register_condition
from callwarden._rules import is_glob

__all__ = ["ArgsMatcher", "compile_permission_pattern"]

# Modules that register argument-aware conditions (shell:, paths:, urls:, secrets:, if: ...).
_CONDITION_MODULES: tuple[str, ...] = (
    "callwarden._paths", "callwarden._urls", "callwarden._cel", "callwarden._content",
    "callwarden.shell._matcher",
)


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
    """``max_chars: 20000``: some string argument (or tool output) is longer than this.

    The Hit carries the arguments with every such string cut to the limit, so a rule with
    ``effect: modify`` truncates instead of denying.
    """

    __slots__ = ("_limit",)

    def __init__(self, config: Any, env: CompileEnv) -> None:
        if isinstance(config, bool) or not isinstance(config, int) or config < 1:
            raise ConfigError("must be a positive number of characters", hint="e.g. max_chars: 20000")
        self._limit = config

    def __call__(self, subject: Subject) -> Hit | None:
        cut: list[str] = []
        args = _truncate(subject.call.args, self._limit, "args", cut, 0)
        if not cut:
            return None
        return Hit(f"{', '.join(cut[:5])} longer than {self._limit} characters", "size.exceeded",
                   args)


def _truncate(value: Any, limit: int, path: str, cut: list[str], depth: int) -> Any:
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        cut.append(path)
        return value[:limit] + f"… [{len(value) - limit} more characters cut by policy]"
    if depth > 64:
        return value
    if isinstance(value, Mapping):
        return {k: _truncate(v, limit, f"{path}.{k}", cut, depth + 1) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_truncate(v, limit, f"{path}[{i}]", cut, depth + 1) for i, v in enumerate(value)]
    return value


class _PrimaryGlob:
    """Fallback for ``Tool(pattern)``: a glob over the tool's primary argument."""

    __slots__ = ("_pattern", "_regex", "_role")

    def __init__(self, pattern: str, role: str | None, regex: re.Pattern[str]) -> None:
        self._pattern = pattern
        self._role = role
        self._regex = regex

    def __call__(self, subject: Subject) -> Hit | None:
        value = subject.role(self._role) if self._role else subject.primary
        values = value if isinstance(value, tuple) else (value,)
        for v in values:
            if not isinstance(v, str):
                continue
            text = os.path.expanduser(v) if self._role == "path" else " ".join(v.split())
            if self._regex.match(text):
                return Hit(f"{v[:200]!r} matches {self._pattern!r}", "pattern.matched")
        return None


def compile_permission_pattern(kind: str | None, pattern: str) -> Matcher:
    """Compiles the pattern of a permission string for a tool kind.

    Shell patterns are flag-aware (``rm -rf *`` also catches ``rm -fr /``) when the shell
    analysis is available; path patterns expand ``~``; ``WebFetch(domain:x)`` matches hosts.
    """
    if kind == "shell":
        from callwarden.shell import ShellMatcher

        # Flag-aware and parsed: `rm -rf *` also catches `rm -fr /`, `sudo /bin/rm -R -f ~`.
        return ShellMatcher({"deny": [pattern]}, CompileEnv())
    if kind in ("file.read", "file.write"):
        from callwarden._paths import PathMatcher

        # Canonicalized like every path rule: `~`, `$HOME`, `..`, encodings, case, symlinks.
        return PathMatcher({"deny": [pattern]}, CompileEnv())
    if kind == "http" and pattern.startswith("domain:"):
        from callwarden._urls import UrlMatcher

        host = pattern[len("domain:"):].strip().lower()
        if not host:
            raise ConfigError("domain: needs a host name", hint="e.g. WebFetch(domain:example.com)")
        return UrlMatcher({"deny_domains": [host], "block_private": False}, CompileEnv())
    regex = re.compile(fnmatch.translate(pattern), re.S)
    return _PrimaryGlob(pattern, None, regex)


for _module in _CONDITION_MODULES:
    importlib.import_module(_module)
