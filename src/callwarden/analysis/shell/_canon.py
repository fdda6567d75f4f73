"""Canonical program names and option parsing (``-rf`` = ``-r -f`` = ``--recursive --force``)."""

from __future__ import annotations

from collections.abc import Sequence

from callwarden.analysis.shell._programs import DEFAULT_SPEC, OptionSpec, spec_for

__all__ = ["ParsedArgs", "canonical_program", "parse_arguments"]

_TAR_LETTERS = frozenset("cxtrudzjJvfCTkpPOa")

ParsedArgs = tuple[frozenset[str], tuple[tuple[str, str | None], ...], tuple[str, ...], str | None]


def canonical_program(word: str) -> str:
    """The canonical name of a program word: its basename (``/usr/bin/rm`` -> ``rm``)."""
    if "/" in word:
        word = word.rstrip("/").rpartition("/")[2]
    return word


def parse_arguments(program: str, args: Sequence[str]) -> ParsedArgs:
    """Splits ``args`` into (flags, options, positionals, subcommand) using the program's table."""
    spec = spec_for(program)
    flags: set[str] = set()
    options: list[tuple[str, str | None]] = []
    positionals: list[str] = []
    subcommand: str | None = None
    active = spec
    if program == "tar" and args and args[0][:1] not in ("-", "") and set(args[0]) <= _TAR_LETTERS:
        args = ["-" + args[0], *args[1:]]  # old-style bundled options: ``tar czf out.tgz``
    n = len(args)
    i = 0
    options_done = False
    while i < n:
        arg = args[i]
        i += 1
        if options_done or len(arg) < 2 or arg[0] != "-" or (
            active.dash_positional is not None
            and arg not in active.names
            and active.dash_positional.match(arg)
        ):
            if active.keyvalue and not options_done and "=" in arg:
                key, _, value = arg.partition("=")
                flags.add(key)
                options.append((key, value))
                continue
            positionals.append(arg)
            if subcommand is None and active.subcommands is not None:
                subcommand = arg
                sub = active.subcommands.get(arg)
                if sub is not None:
                    active = sub
                elif not active.merge_parent:
                    active = DEFAULT_SPEC
            continue
        if arg == "--":
            options_done = True
            continue
        if arg[1] == "-" or (active.single_dash_long and _is_long(active, arg)):
            i = _long(active, arg, args, i, flags, options)
            continue
        i = _cluster(active, arg[1:], args, i, flags, options)
    return frozenset(flags), tuple(options), tuple(positionals), subcommand


def _is_long(spec: OptionSpec, arg: str) -> bool:
    name = arg.partition("=")[0]
    if name in spec.names:
        return True
    # An unknown single-dash word is a cluster only if every letter is a known short option.
    return not all(f"-{ch}" in spec.names for ch in arg[1:])


def _long(
    spec: OptionSpec,
    arg: str,
    args: Sequence[str],
    i: int,
    flags: set[str],
    options: list[tuple[str, str | None]],
) -> int:
    name, eq, value = arg.partition("=")
    canonical = spec.canonical(name)
    flags.add(canonical)
    if eq:
        options.append((canonical, value))
    elif canonical in spec.values and i < len(args):
        options.append((canonical, args[i]))
        i += 1
    else:
        options.append((canonical, None))
    return i


def _cluster(
    spec: OptionSpec,
    body: str,
    args: Sequence[str],
    i: int,
    flags: set[str],
    options: list[tuple[str, str | None]],
) -> int:
    if body.isdigit():  # ``tail -20``, ``kill -9``, ``nice -10``
        flags.add(body)
        options.append((body, None))
        return i
    j = 0
    size = len(body)
    while j < size:
        spelled = "-" + body[j]
        canonical = spec.canonical(spelled)
        rest = body[j + 1 :]
        if canonical in spec.values or (spelled not in spec.names and rest.isdigit() and rest):
            flags.add(canonical)
            if rest:
                options.append((canonical, rest))
            elif i < len(args):
                options.append((canonical, args[i]))
                i += 1
            else:
                options.append((canonical, None))
            return i
        flags.add(canonical)
        options.append((canonical, None))
        j += 1
    return i
