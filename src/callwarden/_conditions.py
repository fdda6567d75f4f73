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

from callwarden._matchers import CompileEnv, ConfigError, Hit, Matcher, Subject, register_condition

__all__ = ["ArgsMatcher", "compile_permission_pattern"]

# Modules that register argument-aware conditions (shell:, paths:, urls:, secrets:, if: ...).
_CONDITION_MODULES: tuple[str, ...] = ()


@register_condition("args")
class ArgsMatcher:
    """``args: {path.to.arg: pattern}``: every listed argument matches one of its patterns.

    A string pattern is a glob (``*``, ``?``, ``[...]``) matched against string values; any other
    value (number, bool, null) must be equal. A list gives alternatives.
    """

    __slots__ = ("_checks",)

    def __init__(self, config: Any, env: CompileEnv) -> None:
        if not isinstance(config, Mapping) or not config:
            raise ConfigError("must map argument names to patterns",
                              hint="e.g. args: {env: prod, branch: 'release/*'}")
        checks = []
        for name, patterns in config.items():
            values = patterns if isinstance(patterns, list) else [patterns]
            globs = [p for p in values if isinstance(p, str)]
            literals = [p for p in values if not isinstance(p, str)]
            if any(isinstance(v, Mapping | list) for v in literals):
                raise ConfigError("patterns must be strings or plain values", key=name)
            regex = re.compile("|".join(f"(?:{fnmatch.translate(g)})" for g in globs), re.S) \
                if globs else None
            checks.append((str(name).split("."), regex, tuple(literals)))
        self._checks = tuple(checks)

    def __call__(self, subject: Subject) -> Hit | None:
        details = []
        for path, regex, literals in self._checks:
            value: Any = subject.args
            for part in path:
                if not isinstance(value, Mapping) or part not in value:
                    return None
                value = value[part]
            if isinstance(value, str):
                if regex is None or regex.match(value) is None:
                    return None
            elif not any(value == lit and type(value) is type(lit) for lit in literals):
                return None
            details.append(f"args.{'.'.join(path)} matches")
        return Hit("; ".join(details), "args.matched")


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
        if pattern.endswith(":*"):
            pattern = pattern[:-2] + "*"
        regex = re.compile(fnmatch.translate(" ".join(pattern.split())), re.S)
        return _PrimaryGlob(pattern, "command", regex)
    if kind in ("file.read", "file.write"):
        expanded = os.path.expanduser(pattern)
        return _PrimaryGlob(pattern, "path", _path_glob(expanded))
    if kind == "http" and pattern.startswith("domain:"):
        host = pattern[len("domain:"):].strip().lower()
        if not host:
            raise ConfigError("domain: needs a host name", hint="e.g. WebFetch(domain:example.com)")
        return _DomainPattern(host)
    regex = re.compile(fnmatch.translate(pattern), re.S)
    return _PrimaryGlob(pattern, None, regex)


def _path_glob(pattern: str) -> re.Pattern[str]:
    # `**` crosses directories, `*` does not.
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z", re.S)


class _DomainPattern:
    __slots__ = ("_host",)

    def __init__(self, host: str) -> None:
        self._host = host

    def __call__(self, subject: Subject) -> Hit | None:
        from urllib.parse import urlsplit

        url = subject.role("url")
        if not isinstance(url, str):
            return None
        try:
            host = (urlsplit(url).hostname or "").rstrip(".")
        except ValueError:
            return Hit(f"unparseable url {url[:200]!r}", "url.invalid")
        if host == self._host or host.endswith("." + self._host):
            return Hit(f"host {host} matches domain:{self._host}", "pattern.matched")
        return None


for _module in _CONDITION_MODULES:
    importlib.import_module(_module)
