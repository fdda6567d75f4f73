"""Collecting a policy's problems, each with its file, line, key and a fix."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from callwarden.analysis.globs import GlobError, check_glob
from callwarden.exceptions import Problem
from callwarden.policyfile.yamlsrc import Lines

__all__ = ["TOP_KEYS", "Checker", "Path_", "dotted"]

Path_ = tuple[str | int, ...]

TOP_KEYS = ("version", "name", "description", "default", "mode", "on_error", "timeout",
             "combine", "tools", "rules", "allow", "deny", "ask", "max_arg_depth", "lists", "state",
             "extends", "workspace", "audit", "approvals", "mcp", "conditions", "journal",
             "on_in_doubt")


class Checker:
    """Collects problems with their lines."""

    def __init__(self, lines: Lines) -> None:
        self.lines = lines
        self.problems: list[Problem] = []

    def error(self, path: Path_, message: str, hint: str | None = None) -> None:
        key = ".".join(str(p) if isinstance(p, str) else f"[{p}]" for p in path) or None
        if key:
            key = key.replace(".[", "[")
        self.problems.append(Problem(message, self.lines.file, self.lines.line(path), key, hint))

    def keys(self, mapping: Mapping[Any, Any], path: Path_, allowed: Sequence[str],
             what: str) -> None:
        for key in mapping:
            if key not in allowed:
                close = difflib.get_close_matches(str(key), [str(a) for a in allowed], n=1)
                hint = f"did you mean '{close[0]}'?" if close else \
                    f"allowed keys: {', '.join(sorted(str(a) for a in allowed))}"
                self.error((*path, key), f"unknown key in {what}", hint)

    def choice(self, value: Any, path: Path_, choices: Sequence[str]) -> str | None:
        if isinstance(value, str) and value in choices:
            return value
        self.error(path, f"must be one of {', '.join(choices)}, not {value!r}")
        return None

    def globs(self, values: Sequence[str], path: Path_) -> tuple[str, ...]:
        """Names or globs of the one dialect; an unreadable one is a problem at ``path``."""
        for value in values:
            try:
                check_glob(value)
            except GlobError as e:
                self.error(path, str(e), e.hint)
        return tuple(values)

    def strings(self, value: Any, path: Path_) -> tuple[str, ...]:
        """A string or a list of strings."""
        if isinstance(value, str):
            return (value,)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(value)
        self.error(path, "must be a string or a list of strings")
        return ()


def dotted(path: Path_) -> str:
    return ".".join(str(p) if isinstance(p, str) else f"[{p}]" for p in path).replace(".[", "[")
