"""Which environment variables a command shows: ``echo $TOKEN``, ``printenv HOME``, ``env``.

A listing of the whole environment piped to ``grep TEXT`` shows only the variables whose
line holds TEXT: it is reported as ``*TEXT*`` instead of ``*`` (``env | grep -i python``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from callwarden.analysis.shell._model import SimpleCommand

__all__ = ["shown_variables"]

# Programs that write their arguments to standard output.
_PRINTERS = frozenset({"echo", "printf", "print"})
_VARIABLE = re.compile(r"\$\{?[#!]?([A-Za-z_][A-Za-z0-9_]*)")
_FILTERS = frozenset({"grep", "egrep", "fgrep", "rg", "ag"})
_LITERAL = re.compile(r"[A-Za-z0-9_=.-]+\Z")
_DECLARE_LISTING = re.compile(r"-[pxr]+\Z")


def shown_variables(commands: Iterable[SimpleCommand],
                    pipelines: Sequence[tuple[SimpleCommand, ...]]) -> list[str]:
    """The environment variables ``commands`` print: names, ``*`` or ``*TEXT*`` (see
    ``CommandAnalysis.environment``)."""
    following = {id(stages[i]): stages[i + 1] for stages in pipelines
                 for i in range(len(stages) - 1)}
    out: list[str] = []
    for cmd in commands:
        if lists_environment(cmd):
            consumer = following.get(id(cmd))
            out.extend(_filtered(consumer) if consumer is not None else ["*"])
        out.extend(printed_variables(cmd))
    return out


def lists_environment(cmd: SimpleCommand) -> bool:
    """Whether a command prints every environment (or shell) variable with its value."""
    program = cmd.program
    args = cmd.argv[1:]
    if program == "env":
        return True  # with a command to run, env is a wrapper and is never recorded
    if program == "printenv":
        return not cmd.positionals
    if program == "set":
        return not args
    if program == "export":
        return all(a == "-p" for a in args)
    if program in ("declare", "typeset"):
        return all(_DECLARE_LISTING.match(a) for a in args)
    if program == "compgen":
        return bool(cmd.flags & {"v", "e"}) or any(
            v in ("variable", "export") for v in cmd.option_values("action"))
    return False


def printed_variables(cmd: SimpleCommand) -> list[str]:
    """Variables a command prints by name: ``echo "$A $B"``, ``printenv A``, ``declare -p A``."""
    program = cmd.program
    if program in _PRINTERS:
        return [m.group(1) for arg in cmd.argv[1:] for m in _VARIABLE.finditer(arg)]
    if program == "printenv":
        return list(cmd.positionals)
    if program in ("declare", "typeset", "export") and any(
            _DECLARE_LISTING.match(a) for a in cmd.argv[1:]):
        return [p.partition("=")[0] for p in cmd.positionals]
    return []


def _filtered(consumer: SimpleCommand) -> list[str]:
    """What a listing piped into ``consumer`` shows: ``*TEXT*`` per grep pattern, else ``*``."""
    if consumer.program not in _FILTERS:
        return ["*"]
    flags = consumer.flags
    if flags & {"count", "quiet", "files-with-matches"}:
        return []
    if flags & {"invert-match"} or consumer.option_values("file"):
        return ["*"]
    patterns = list(consumer.option_values("regexp")) or list(consumer.positionals[:1])
    if not patterns:
        return ["*"]
    extended = consumer.program == "egrep" or bool(flags & {"extended-regexp", "perl-regexp"})
    out: list[str] = []
    for pattern in patterns:
        pieces = pattern.split("|") if extended else pattern.split("\\|")
        for piece in pieces:
            piece = piece.removeprefix("^").removesuffix("$")
            if not _LITERAL.match(piece):
                return ["*"]
            out.append(f"*{piece}*")
    return out
