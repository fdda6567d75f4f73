"""Code that runs other code: ``sh -c``, ``bash script``, ``python -c``, ``eval``, a payload
piped to an interpreter, a script given as a process substitution.

``_Nested`` is a mixin of the analyzer (which provides the hooks): each of these commands is
recorded, and what it runs is analysed like any other command line, or recorded as *opaque*
when it cannot be known statically.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from callwarden.analysis.shell._evaluate import Out, embedded_commands
from callwarden.analysis.shell._expand import _Env
from callwarden.analysis.shell._inline import inline_effects
from callwarden.analysis.shell._model import SimpleCommand
from callwarden.analysis.shell._programs import DOWNLOADERS, INTERPRETERS
from callwarden.analysis.shell._syntax import Field, _code_flag

__all__ = ["_Nested", "_Stdin"]


class _Stdin:
    """What feeds a command's standard input; its content is computed only when asked for."""

    __slots__ = ("_payload", "_resolve", "producers", "word")

    def __init__(
        self,
        producers: Sequence[SimpleCommand | None] = (),
        payload: Out | None = None,
        word: bool = False,
        resolve: Callable[[], Out | None] | None = None,
    ) -> None:
        self.producers = producers
        self._payload = payload
        self._resolve = resolve
        self.word = word  # a here-string or here-document, not a pipe

    @property
    def payload(self) -> Out | None:
        if self._resolve is not None:
            self._payload = self._resolve()
            self._resolve = None
        return self._payload


class _Nested:
    """Runs what shells, interpreters and ``eval`` run, for the analyzer."""

    __slots__ = ()

    pipelines: list[tuple[SimpleCommand, ...]]
    written: set[str]
    environment: list[str]

    def add_opaque(self, reason: str) -> None:
        raise NotImplementedError

    def script(self, text: str, env: _Env, wrappers: tuple[str, ...], depth: int) -> bool:
        raise NotImplementedError

    def scripts_in_place(self, texts: Sequence[str], wrappers: tuple[str, ...],
                         depth: int) -> None:
        raise NotImplementedError

    def record(self, program: str | None, argv: Sequence[str], wrappers: tuple[str, ...],
               text: str) -> SimpleCommand:
        raise NotImplementedError

    def normalize(self, path: str) -> str:
        raise NotImplementedError

    def process_stdin(self, text: str, env: _Env) -> _Stdin | None:
        raise NotImplementedError


    def run_script_operand(self, cmd: SimpleCommand, field: Field, env: _Env,
                           wrappers: tuple[str, ...], depth: int, *, shell: bool,
                           family: str = "") -> bool:
        """A script given as an operand: ``<(curl ...)`` is piped code (a pipeline
        ``curl ... | bash``); a file written earlier in the command line (a download) is
        opaque. Returns whether it was piped."""
        piped = self.process_stdin(field[0], env)
        if piped is not None:
            program = cmd.program or ""
            self.stdin_payload(program, piped, env, (*wrappers, program), depth, shell=shell,
                               family=family)
            producers = [p for p in piped.producers if p is not None]
            if producers:
                self.pipelines.append((*producers, cmd))
            return True
        if field[2] is None:
            self.check_runs_written(field[0])
        return False

    def shell(self, program: str, word: str, fields: Sequence[Field], env: _Env,
              wrappers: tuple[str, ...], depth: int, text: str,
              stdin: _Stdin | None) -> SimpleCommand | None:
        rest = fields[1:]
        index = 0
        command_string = False
        while index < len(rest):
            arg = rest[index][0]
            if arg == "--" or not arg.startswith(("-", "+")) or len(arg) < 2:
                if arg == "--":
                    index += 1
                break
            if arg in ("-o", "+o", "--rcfile", "--init-file"):
                index += 1
            elif not arg.startswith("--") and "c" in arg[1:]:
                command_string = True
            index += 1
        operands = rest[index:]
        inner = (*wrappers, program)
        if command_string:
            if not operands:
                self.add_opaque(f"{program} -c without a script")
            else:
                script, _, dynamic, decoded = operands[0]
                if decoded is not None:
                    self.add_opaque(f"{program} -c runs decoded text ({decoded})")
                if dynamic is not None:
                    self.add_opaque(f"{program} -c runs a script built from {dynamic}")
                else:
                    self.script(script, _positional_env(operands[1:]), inner, depth + 1)
            return None
        cmd = self.record(program, [word, *(f[0] for f in rest)], wrappers, text)
        reads_stdin = not operands or any(f[0] == "-s" for f in rest[:index])
        if operands and not reads_stdin:
            self.run_script_operand(cmd, operands[0], env, wrappers, depth, shell=True)
            return cmd  # runs a script file, recorded as a read by _io
        if stdin is not None:
            self.stdin_payload(program, stdin, env, inner, depth, shell=True)
        return cmd

    def interpreter(self, program: str, family: str, word: str, fields: Sequence[Field],
                    env: _Env, wrappers: tuple[str, ...], depth: int, text: str,
                    stdin: _Stdin | None) -> SimpleCommand | None:
        cmd = self.record(program, [word] + [f[0] for f in fields[1:]], wrappers, text)
        code_options = INTERPRETERS[family]
        codes = [v for key, v in cmd.options if key in code_options and v is not None]
        if family == "deno" and cmd.subcommand == "eval" and len(cmd.positionals) > 1:
            codes.append(cmd.positionals[1])
        if codes:
            how = f"{program} {_code_flag(cmd, code_options)}"
            for code in codes:
                self.inline_code(family, program, code, how, wrappers, depth)
        elif (not cmd.positionals or cmd.positionals[0] == "-") and stdin is not None:
            self.stdin_payload(program, stdin, env, (*wrappers, program), depth, shell=False,
                               family=family)
        elif cmd.positionals and not _io_inline(cmd):
            script = next((f for f in fields[1:] if f[0] == cmd.positionals[0]), None)
            if script is not None:
                self.run_script_operand(cmd, script, env, wrappers, depth, shell=False,
                                        family=family)
        return cmd

    def inline_code(self, family: str, program: str, code: str, how: str,
                    wrappers: tuple[str, ...], depth: int) -> None:
        """Code run by an interpreter (``python -c``, code piped to ``node``): what it runs
        and does to files is analysed as the equivalent shell commands (``_inline``), the
        environment variables it reads are recorded, and what cannot be told is opaque."""
        inner = (*wrappers, program)
        effects = inline_effects(family, code)
        if effects is None:  # a language not analysed: only its shell calls are followed
            self.add_opaque(f"inline {family} code ({how})")
            for command in embedded_commands(family, code):
                self.script(command, _Env(), inner, depth + 1)
            return
        for reason in effects.opaque:
            self.add_opaque(f"inline {family} code ({how}): {reason}")
        self.environment.extend(effects.env)
        self.scripts_in_place(effects.commands, inner, depth + 1)

    def stdin_payload(self, program: str, stdin: _Stdin, env: _Env, wrappers: tuple[str, ...],
                      depth: int, *, shell: bool, family: str = "") -> None:
        producers = [p.program for p in stdin.producers if p is not None]
        downloaded = [p for p in producers if p in DOWNLOADERS]
        payload = stdin.payload
        if downloaded:
            self.add_opaque(f"downloaded content piped to {program} ({downloaded[0]})")
        elif payload is None:
            source = producers[0] if producers else ("a here-document" if stdin.word else "?")
            self.add_opaque(f"{program} runs code read from {source}")
        elif payload.decoded:
            self.add_opaque(f"decoded payload ({payload.via}) piped to {program}")
        if payload is None:
            return
        if shell:
            self.script(payload.text, _Env(), wrappers, depth + 1)
        else:
            self.inline_code(family, program, payload.text, f"piped to {program}",
                             wrappers[:-1], depth)

    def eval_(self, fields: Sequence[Field], env: _Env, wrappers: tuple[str, ...],
              depth: int) -> None:
        decoded = [f[3] for f in fields if f[3] is not None]
        if decoded:
            self.add_opaque(f"eval of decoded text ({decoded[0]})")
        dynamic = [f[2] for f in fields if f[2] is not None]
        if dynamic:
            self.add_opaque(f"eval of text built from {dynamic[0]}")
            return
        script = " ".join(f[0] for f in fields)
        self.script(script, env, (*wrappers, "eval"), depth + 1)

    def check_runs_written(self, word: str) -> None:
        path = self.normalize(word)
        if path in self.written:
            self.add_opaque(f"runs a file written earlier in the command ({word})")


def _positional_env(operands: Sequence[Field]) -> _Env:
    """Variables of ``sh -c script $0 $1 ...``: the operands after the script."""
    env = _Env()
    values = [None if f[2] is not None else f[0] for f in operands]
    for index, value in enumerate(values[:10]):
        env.vars[str(index)] = value
    rest = values[1:]
    env.vars["#"] = str(len(rest))
    joined = None if None in rest else " ".join(v or "" for v in rest)
    env.vars["@"] = joined
    env.vars["*"] = joined
    return env


def _io_inline(cmd: SimpleCommand) -> bool:
    return any(key in ("command", "e", "eval", "print", "r", "module") for key, _ in cmd.options)
