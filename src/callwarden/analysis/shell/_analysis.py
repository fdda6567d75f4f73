"""``analyze_command``: input checks and a bounded cache in front of the analyzer."""

from __future__ import annotations

import shlex
from functools import lru_cache
from typing import Any

from callwarden.analysis.shell._analyze import analyze_uncached
from callwarden.analysis.shell._model import CommandAnalysis
from callwarden.analysis.shell._parse import MAX_COMMAND_LENGTH

__all__ = ["analyze_command", "clear_cache"]

CACHE_SIZE = 4096


@lru_cache(maxsize=CACHE_SIZE)
def _cached(command: str, home: str | None, cwd: str | None) -> CommandAnalysis:
    return analyze_uncached(command, home, cwd)


def analyze_command(command: Any, *, home: str | None = None,
                    cwd: str | None = None) -> CommandAnalysis:
    """Analyses a shell command line statically; never raises, never runs anything.

    Args:
        command: the command line. A list or tuple of strings is read as argv (joined with
            shell quoting); bytes are decoded as UTF-8; anything else, or a command longer
            than 64 KiB, gives an analysis whose ``parse_error`` says why.
        home: what ``~`` and ``$HOME`` expand to (None: they are kept as ``~``).
        cwd: the directory relative paths in ``reads``/``writes`` are resolved against.

    Returns:
        The analysis, from a bounded LRU cache keyed by the arguments when seen before.
    """
    if type(command) is not str:
        converted = _coerce(command)
        if isinstance(converted, CommandAnalysis):
            return converted
        command = converted
    if len(command) > MAX_COMMAND_LENGTH:
        return CommandAnalysis(
            source=command[:200],
            parse_error=f"command too long ({len(command)} characters, limit {MAX_COMMAND_LENGTH})",
            home=home, cwd=cwd,
        )
    try:
        return _cached(command, home, cwd)
    except TypeError:  # unhashable home/cwd
        return CommandAnalysis(source=command[:200], parse_error="home and cwd must be strings")


def _coerce(command: Any) -> str | CommandAnalysis:
    if isinstance(command, str):
        return str(command)
    if isinstance(command, bytes | bytearray):
        try:
            return bytes(command).decode("utf-8")
        except UnicodeDecodeError:
            return CommandAnalysis(source="", parse_error="command is not valid UTF-8")
    if isinstance(command, list | tuple) and command and all(isinstance(a, str) for a in command):
        if sum(len(a) for a in command) > MAX_COMMAND_LENGTH:
            return CommandAnalysis(source="", parse_error="command too long")
        return shlex.join(command)
    if command is None:
        return CommandAnalysis(source="", parse_error="no command given")
    return CommandAnalysis(source="", parse_error=f"command is a {type(command).__name__}, "
                                                  "not a string")


def clear_cache() -> None:
    """Empties the analysis cache (for benchmarks and tests)."""
    _cached.cache_clear()


def cache_info() -> Any:
    """Hits, misses and size of the analysis cache."""
    return _cached.cache_info()
