"""Commands that programs run for you: what ``find``, ``xargs``, awk, git and tar would run.

Pure helpers over canonical commands, and ``_Follower``, a mixin of the analyzer that hands
the command lines they yield back to it, to be analysed like any other.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from callwarden.analysis.shell._expand import _Env
from callwarden.analysis.shell._model import UNKNOWN_OPERAND, SimpleCommand
from callwarden.analysis.shell._programs import GIT_COMMAND_CONFIG, GIT_COMMAND_VARIABLES
from callwarden.analysis.shell._syntax import Field, _exec_sections

__all__ = [
    "MAX_OPERANDS",
    "awk_commands",
    "find_results",
    "git_config_commands",
    "split_input",
    "substitute",
    "tar_commands",
]

MAX_OPERANDS = 256
_MAX_ALIAS_DEPTH = 8
# find tests that select by name: results are ``start/**/name``.
_NAME_TESTS = ("name", "iname", "path", "ipath", "wholename", "iwholename")
# find options that do not narrow which files are selected.
_NOT_NARROWING = frozenset({
    "type", "xtype", "maxdepth", "mindepth", "depth", "d", "xdev", "mount", "follow", "L", "H",
    "P", "print", "print0", "ls", "delete", "exec", "execdir", "ok", "okdir", "o", "or", "a",
    "and", "not", "true", "noleaf", "ignore_readdir_race", "regextype", "daystart", "prune",
})
_FIND_OPERATORS = frozenset({"(", ")", "!", ",", ";", "+"})

_AWK_SYSTEM = re.compile(r"\bsystem\s*\(")
_AWK_LITERAL_SYSTEM = re.compile(r"\bsystem\s*\(\s*\"((?:\\.|[^\"\\])*)\"\s*\)")
_AWK_PIPE_TO = re.compile(r"(?<![|])\|&?\s*\"((?:\\.|[^\"\\])*)\"")
_AWK_PIPE_FROM = re.compile(r"\"((?:\\.|[^\"\\])*)\"\s*\|&?\s*getline")
_AWK_DYNAMIC_PIPE = re.compile(
    r"(?<![|])\|&?(?![|])\s*(?!getline\b)(?=[A-Za-z_$(])|[A-Za-z_)\]]\s*\|&?\s*getline")


def find_results(cmd: SimpleCommand) -> list[str]:
    """What ``{}`` stands for in a ``find`` command: its starting points (``find /`` lists
    ``/`` itself), ``start/**/name`` when a name test selects files, ``start/**`` when another
    test narrows the selection (``-mtime``, ``-empty``)."""
    starts = [p for p in cmd.positionals if p not in _FIND_OPERATORS][:MAX_OPERANDS] or ["."]
    names = [v for key in _NAME_TESTS for v in cmd.option_values(key) if v.strip("*")]
    if names:
        return [f"{start.rstrip('/') or '/'}/**/{name.rpartition('/')[2] or name}"
                for start in starts for name in names][:MAX_OPERANDS]
    if any(flag not in _NOT_NARROWING and not flag.isdigit() for flag in cmd.flags):
        under = [f"{start.rstrip('/')}/**" for start in starts]
        # A test such as -mtime can select a starting point itself (`find / -mtime +1` may
        # print `/`), unless -mindepth skips it or -type rules directories out; -empty selects
        # it only when there is nothing in it to lose.
        types = "".join(cmd.option_values("type"))
        skips_start = any(v.strip() not in ("", "0") for v in cmd.option_values("mindepth")) \
            or (types != "" and "d" not in types) or "empty" in cmd.flags
        return under if skips_start else [*starts, *under][:MAX_OPERANDS]
    return starts


def split_input(text: str, *, null: bool, delimiter: str | None) -> list[str]:
    """The arguments xargs makes of its input (blank-separated, NUL- or delimiter-separated)."""
    if null:
        items = text.split("\0")
    elif delimiter:
        items = text.split(delimiter)
    else:
        items = text.split()
    return [item.strip("\n") for item in items if item.strip("\n")][:MAX_OPERANDS]


def substitute(fields: Sequence[Field], token: str, values: Sequence[str],
               why: str) -> list[Field]:
    """Replaces ``token`` (``{}``) in ``fields[1:]``: a whole-word token becomes one field per
    value; inside a word (``sh -c 'rm {}'``) the values are joined, or the word becomes dynamic
    when a value is unknown."""
    out = list(fields[:1])
    for field in fields[1:]:
        text = field[0]
        if token not in text:
            out.append(field)
        elif text == token:
            out.extend((value, "*" in value, None, None) for value in values)
        elif UNKNOWN_OPERAND in values:
            out.append((text, False, why, None))
        else:
            out.append((text.replace(token, " ".join(values)), field[1], field[2], field[3]))
    return out


def awk_commands(code: str) -> tuple[list[str], bool]:
    """Shell commands an awk program runs (``system("..")``, ``print | ".."``,
    ``".." | getline``), and whether it also runs commands built at run time."""
    found = [m.group(1) for regex in (_AWK_LITERAL_SYSTEM, _AWK_PIPE_TO, _AWK_PIPE_FROM)
             for m in regex.finditer(code)]
    found = [re.sub(r"\\(.)", r"\1", command) for command in found]
    dynamic = len(_AWK_SYSTEM.findall(code)) > len(_AWK_LITERAL_SYSTEM.findall(code)) \
        or _AWK_DYNAMIC_PIPE.search(_AWK_PIPE_TO.sub("", _AWK_PIPE_FROM.sub("", code))) is not None
    return found, dynamic


def git_config_commands(cmd: SimpleCommand) -> tuple[list[str], list[list[str]]]:
    """Shell commands set with ``git -c key=value`` (pager, editor, ``!`` aliases...), and the
    git command lines that plain aliases expand to when the alias is the subcommand run."""
    scripts: list[str] = []
    expansions: list[list[str]] = []
    for value in cmd.option_values("config"):
        key, _, command = value.partition("=")
        if not GIT_COMMAND_CONFIG.match(key):
            continue
        if key[:6].lower() == "alias.":
            if command.startswith("!"):
                scripts.append(command[1:])
            elif key[6:] == cmd.subcommand:
                expansions.append(["git", *command.split(), *cmd.positionals[1:]])
        else:
            scripts.append(command)
    return scripts, expansions


def tar_commands(cmd: SimpleCommand) -> list[str]:
    """Shell commands tar runs: ``--checkpoint-action=exec=``, ``-I``, ``--to-command``..."""
    scripts = [v[5:] for v in cmd.option_values("checkpoint-action") if v.startswith("exec=")]
    for key in ("use-compress-program", "to-command", "info-script"):
        scripts.extend(cmd.option_values(key))
    return scripts


class _Follower:
    """Follows the commands other programs run, for the analyzer (which provides the hooks)."""

    __slots__ = ()

    def add_opaque(self, reason: str) -> None:
        raise NotImplementedError

    def script(self, text: str, env: _Env, wrappers: tuple[str, ...], depth: int) -> bool:
        raise NotImplementedError

    def run(self, fields: Sequence[Field], env: _Env, wrappers: tuple[str, ...], depth: int,
            text: str, stdin: Any) -> SimpleCommand | None:
        raise NotImplementedError

    def record(self, program: str | None, argv: Sequence[str], wrappers: tuple[str, ...],
               text: str) -> SimpleCommand:
        raise NotImplementedError

    def feed(self, program: str, options: Sequence[str], inner: list[Field],
             stdin: Any) -> list[Field]:
        """The command xargs/parallel runs, with the arguments it reads (from stdin or
        ``:::``) in place: ``{}``/``-I`` replaced, else appended; unknown input is one
        unknown operand, which path rules treat as possibly any path."""
        replace: str | None = "{}" if program == "parallel" else None
        null = delimiter = None
        for index, option in enumerate(options):
            value = options[index + 1] if index + 1 < len(options) else None
            if option == "-I":
                replace = value
            elif option.startswith("-I") or option.startswith("--replace="):
                replace = option.partition("=")[2] if option.startswith("--") else option[2:]
            elif option in ("-i", "--replace"):
                replace = "{}"
            elif option in ("-0", "--null"):
                null = True
            elif option in ("-d", "--delimiter"):
                delimiter = value
        words = [f[0] for f in inner]
        if program == "parallel" and ":::" in words:
            at = words.index(":::")
            operands: list[str] | None = [w for w in words[at + 1 :] if w not in (":::", "::::")]
            inner = inner[:at]
        else:
            operands = self.input_arguments(stdin, null=bool(null), delimiter=delimiter)
        if operands is None:
            operands = [UNKNOWN_OPERAND]
        if not operands or not inner:
            return inner
        if replace and any(replace in f[0] for f in inner[1:]):
            return substitute(inner, replace, operands, f"the input of {program}")
        return [*inner, *((o, False, None, None) for o in operands)]

    def input_arguments(self, stdin: Any, *, null: bool,
                        delimiter: str | None) -> list[str] | None:
        """The arguments xargs reads from ``stdin``, or None when they cannot be known."""
        if stdin is None:
            return None
        producer = stdin.producers[-1] if stdin.producers and not stdin.word else None
        if producer is not None and producer.program == "find":
            return find_results(producer)
        payload = stdin.payload
        if payload is None:
            return None
        return split_input(payload.text, null=null, delimiter=delimiter)

    def find(self, cmd: SimpleCommand, fields: Sequence[Field], env: _Env,
             wrappers: tuple[str, ...], depth: int, text: str) -> None:
        """``find -exec``/``-delete``: the command run on ``{}`` (the files found) is analysed
        like any command, and ``-delete`` like ``rm -r`` of them."""
        results = find_results(cmd)
        inner = (*wrappers, "find")
        for section in _exec_sections(fields[1:]):
            self.run(substitute(section, "{}", results, "the files find selects"), env, inner,
                     depth, text, None)
        if "delete" in cmd.flags:
            self.record("rm", ["rm", "-r", "-f", "--", *results], inner, text)

    def awk(self, program: str, word: str, args: Sequence[str], wrappers: tuple[str, ...],
            depth: int, text: str) -> SimpleCommand:
        cmd = self.record(program, [word, *args], wrappers, text)
        codes = list(cmd.option_values("source"))
        if not codes and not cmd.option_values("file") and cmd.positionals:
            codes.append(cmd.positionals[0])
        for code in codes:
            commands, dynamic = awk_commands(code)
            if dynamic:
                self.add_opaque(f"{program} runs a command built at run time")
            for command in commands:
                self.script(command, _Env(), (*wrappers, program), depth + 1)
        return cmd

    def trap(self, fields: Sequence[Field], env: _Env, wrappers: tuple[str, ...],
             depth: int) -> None:
        rest = [f for f in fields if f[0] not in ("--",)]
        if not rest or rest[0][0].startswith("-") or len(rest) < 2:
            return  # ``trap -p``, ``trap -l``, ``trap SIG`` (reset)
        script, _, dynamic, _ = rest[0]
        if dynamic is not None:
            self.add_opaque(f"trap runs a command built from {dynamic}")
        else:
            self.script(script, env.copy(), (*wrappers, "trap"), depth + 1)

    def git(self, cmd: SimpleCommand, env: _Env, wrappers: tuple[str, ...], depth: int,
            text: str) -> None:
        """Commands git runs for you: ``-c core.pager=...``, ``!`` aliases, ``GIT_PAGER``..."""
        inner = (*wrappers, "git")
        scripts, expansions = git_config_commands(cmd)
        for name in GIT_COMMAND_VARIABLES:
            if name in env.vars:
                value = env.vars[name]
                if value is None:
                    self.add_opaque(f"git runs ${name}, set at run time")
                else:
                    scripts.append(value)
        for script in scripts:
            self.script(script, _Env(), inner, depth + 1)
        if depth < _MAX_ALIAS_DEPTH:
            for argv in expansions:
                self.run([(w, False, None, None) for w in argv], env, wrappers, depth + 1, text,
                         None)
