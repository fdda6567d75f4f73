"""Static analysis of a bash command line: what would run, with which arguments, on which files.

The walker visits the tree-sitter syntax tree once, expanding each word as far as it is known
statically (see ``_expand``), stripping wrappers and recursing into nested scripts (``sh -c``,
``eval``, decoded payloads piped to a shell, shell calls inside ``python -c``). What cannot be
known is recorded as an *opaque* reason instead of being guessed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

from callwarden.analysis.shell import _io
from callwarden.analysis.shell._canon import canonical_program, parse_arguments
from callwarden.analysis.shell._environ import shown_variables
from callwarden.analysis.shell._evaluate import MAX_OUTPUT, Out, evaluate_program
from callwarden.analysis.shell._expand import (
    MAX_NESTING,
    MAX_VALUE,
    _Budget,
    _Env,
    _Expander,
    _TooComplex,
)
from callwarden.analysis.shell._follow import _Follower, tar_commands
from callwarden.analysis.shell._model import CommandAnalysis, SimpleCommand
from callwarden.analysis.shell._nested import _Nested, _Stdin
from callwarden.analysis.shell._parse import BRACE_MARKER, MAX_COMMAND_LENGTH, parse_script
from callwarden.analysis.shell._programs import (
    AWKS,
    INTERPRETERS,
    SHELLS,
    WRAPPERS,
    program_family,
)
from callwarden.analysis.shell._syntax import (
    Field,
    _adjacent_groups,
    _bind,
    _env_split_string,
    _glob_programs,
    _heredoc_tail,
    _stages,
    _text,
    _without_exec_sections,
    _wrapped_command,
)
from callwarden.analysis.shell._words import finalize_word

__all__ = ["analyze_uncached"]

MAX_DEPTH = 8
_STATEMENTS = frozenset({
    "program", "list", "pipeline", "command", "redirected_statement", "subshell",
    "compound_statement", "if_statement", "elif_clause", "else_clause", "while_statement",
    "for_statement", "c_style_for_statement", "case_statement", "case_item",
    "function_definition", "negated_command", "variable_assignment", "variable_assignments",
    "declaration_command", "unset_command", "test_command", "do_group",
})
_REDIRECTS = frozenset({"file_redirect", "herestring_redirect", "heredoc_redirect"})
# A command word that is only the positional parameters: unknown (``sh -c '"$@"' _ rm -rf /``).
_POSITIONAL_WORD = re.compile(r'"?\$(?:\{)?([@*]|[0-9])\}?"?')
_FEEDERS = frozenset({"xargs", "parallel"})


class _Analyzer(_Nested, _Follower, _Expander):
    __slots__ = (
        "budget",
        "commands",
        "cwd",
        "deletes",
        "empties",
        "environment",
        "functions",
        "home",
        "opaque",
        "pipelines",
        "probe",
        "reads",
        "start_cwd",
        "writes",
        "written",
    )

    def __init__(self, home: str | None, cwd: str | None, budget: _Budget | None = None) -> None:
        self.budget = budget if budget is not None else _Budget()
        self.probe = budget is not None  # a throw-away analyzer used to compute outputs
        self.home = home
        self.cwd = cwd
        self.start_cwd = cwd
        self.commands: list[SimpleCommand] = []
        self.pipelines: list[tuple[SimpleCommand, ...]] = []
        self.reads: list[str] = []
        self.writes: list[str] = []
        self.deletes: list[str] = []
        self.empties: list[str] = []
        self.environment: list[str] = []
        self.written: set[str] = set()
        self.opaque: list[str] = []
        self.functions: set[str] = set()

    # ----------------------------------------------------------------- scripts and statements

    def script(self, text: str, env: _Env, wrappers: tuple[str, ...], depth: int) -> bool:
        """Analyses a nested script; returns False when it could not be parsed."""
        if depth > MAX_DEPTH:
            self.add_opaque(f"scripts nested deeper than {MAX_DEPTH} levels")
            return True
        if len(text) > MAX_COMMAND_LENGTH:
            self.add_opaque("nested script too long to analyse")
            return True
        parsed = parse_script(text)
        if parsed.error is not None:
            self.add_opaque(f"nested script does not parse ({parsed.error})")
        if parsed.root is None:
            return False
        self.stmt(parsed.root, parsed.source, env, wrappers, depth)
        return parsed.error is None

    def scripts_in_place(self, texts: Sequence[str], wrappers: tuple[str, ...],
                         depth: int) -> None:
        """Analyses scripts one after the other, in a working directory of their own: a
        ``cd`` among them (inline code's ``os.chdir``) does not move the caller."""
        cwd = self.cwd
        for text in texts:
            self.script(text, _Env(), wrappers, depth)
        self.cwd = cwd

    def stmt(self, node: Any, src: bytes, env: _Env, wrappers: tuple[str, ...],
             depth: int, stdin: _Stdin | None = None) -> SimpleCommand | None:
        budget = self.budget
        budget.spend()
        if budget.level > MAX_NESTING:
            raise _TooComplex
        budget.level += 1
        try:
            return self.stmt_inner(node, src, env, wrappers, depth, stdin)
        finally:
            budget.level -= 1

    def stmt_inner(self, node: Any, src: bytes, env: _Env, wrappers: tuple[str, ...],
                   depth: int, stdin: _Stdin | None) -> SimpleCommand | None:
        kind = node.type
        if kind == "command":
            return self.command(node, src, env, wrappers, depth, stdin, ())
        if kind == "pipeline":
            return self.pipeline(node, src, env, wrappers, depth)
        if kind == "redirected_statement":
            return self.redirected(node, src, env, wrappers, depth, stdin)
        if kind == "variable_assignment":
            self.assign(node, src, env, depth, wrappers)
            return None
        if kind == "declaration_command" or kind == "unset_command":
            return self.declaration(node, src, env, wrappers, depth)
        if kind == "function_definition":
            return self.function(node, src, env, wrappers, depth)
        if kind == "subshell":
            env = env.copy()
        elif kind == "for_statement":
            return self.for_loop(node, src, env, wrappers, depth)
        last: SimpleCommand | None = None
        before = len(self.commands)
        for child in node.named_children:
            if child.type in _STATEMENTS:
                self.stmt(child, src, env, wrappers, depth, stdin)
            elif child.type not in ("comment", "heredoc_body"):
                self.scan(child, src, env, wrappers, depth)
        if len(self.commands) > before:
            last = self.commands[-1]
        return last

    def scan(self, node: Any, src: bytes, env: _Env, wrappers: tuple[str, ...],
             depth: int) -> None:
        """Finds and analyses substitutions nested in a non-statement node (tests, cases)."""
        stack = [node]
        while stack:
            current = stack.pop()
            if current.type in ("command_substitution", "process_substitution"):
                self.substitution(current, src, env, wrappers, depth)
            elif current.type in _STATEMENTS:
                self.stmt(current, src, env, wrappers, depth)
            else:
                stack.extend(reversed(current.named_children))

    def pipeline(self, node: Any, src: bytes, env: _Env, wrappers: tuple[str, ...],
                 depth: int) -> SimpleCommand | None:
        return self.run_stages(_stages(node), src, env, wrappers, depth)

    def run_stages(self, stages: Sequence[Any], src: bytes, env: _Env,
                   wrappers: tuple[str, ...], depth: int) -> SimpleCommand | None:
        reps: list[SimpleCommand | None] = []
        for index, stage in enumerate(stages):
            stdin = _Stdin(reps, resolve=_bind(self.stdout_of, stages, src, env, index)) \
                if index else None
            if index == 0 and stage.type == "redirected_statement":
                rep = self.redirected(stage, src, env.copy(), wrappers, depth, None,
                                      with_tail=False)
            else:
                rep = self.stmt(stage, src, env.copy(), wrappers, depth, stdin)
            reps.append(rep)
        if len(reps) > 1 and all(rep is not None for rep in reps):
            self.pipelines.append(tuple(rep for rep in reps if rep is not None))
        return reps[-1] if reps else None

    def redirected(self, node: Any, src: bytes, env: _Env, wrappers: tuple[str, ...],
                   depth: int, stdin: _Stdin | None, *,
                   with_tail: bool = True) -> SimpleCommand | None:
        body = node.child_by_field_name("body")
        redirects = [c for c in node.named_children if c.type in _REDIRECTS]
        if with_tail:
            tail = _heredoc_tail(redirects)
            if tail:  # ``cat <<EOF | bash``: the grammar hangs the pipe on the here-document
                return self.run_stages([node, *tail], src, env, wrappers, depth)
        word_stdin = self.redirect_io(redirects, src, env, wrappers, depth,
                                      empties=_prints_nothing(body, src))
        if word_stdin is not None:
            stdin = word_stdin
        if body is None:
            return None
        if body.type == "command":
            return self.command(body, src, env, wrappers, depth, stdin, ())
        return self.stmt(body, src, env, wrappers, depth, stdin)

    def redirect_io(self, redirects: Sequence[Any], src: bytes, env: _Env,
                    wrappers: tuple[str, ...], depth: int, *,
                    empties: bool = False) -> _Stdin | None:
        """Records redirection reads/writes; returns a here-string/here-doc stdin, if any.
        With ``empties`` (a command that prints nothing), ``>`` targets are emptied."""
        stdin: _Stdin | None = None
        for redirect in redirects:
            if redirect.type == "herestring_redirect":
                target = redirect.named_children[0] if redirect.named_children else None
                if target is not None:
                    text, dynamic = self.word_text(target, src, env, wrappers, depth)
                    stdin = _Stdin((), None if dynamic else Out(text + "\n"), word=True)
                continue
            if redirect.type == "heredoc_redirect":
                body = next((c for c in redirect.named_children if c.type == "heredoc_body"), None)
                start = next((c for c in redirect.named_children if c.type == "heredoc_start"), None)
                quoted = start is not None and any(q in _text(start, src) for q in "'\"\\")
                if body is not None:
                    text = _text(body, src)
                    if not quoted:
                        self.scan(body, src, env, wrappers, depth)
                    dynamic = not quoted and "$" in text
                    stdin = _Stdin((), None if dynamic else Out(text), word=True)
                for child in redirect.named_children:
                    if child.type in _REDIRECTS:
                        self.redirect_io([child], src, env, wrappers, depth)
                    elif child.type in _STATEMENTS and child.type != "pipeline":
                        self.stmt(child, src, env, wrappers, depth)  # ``cat <<EOF && ls``
                continue
            operator = ""
            targets = []
            for child in redirect.children:
                if not child.is_named:
                    operator += child.type
                elif child.type != "file_descriptor":
                    targets.append(child)
            for target in targets:
                text, _ = self.word_text(target, src, env, wrappers, depth)
                if operator in (">&", "<&", ">&-", "<&-") and (text.isdigit() or text == "-"):
                    continue
                if operator == "<" and target.type == "process_substitution":
                    stdin = self.process_stdin(_text(target, src), env)
                    continue
                if "<" in operator:
                    self.add_path(self.reads, text)
                if ">" in operator:
                    self.add_path(self.writes, text)
                    if empties and ">>" not in operator:
                        self.add_path(self.empties, text)
        return stdin

    def assign(self, node: Any, src: bytes, env: _Env, depth: int,
               wrappers: tuple[str, ...]) -> None:
        name_node = node.child_by_field_name("name")
        value_node = node.child_by_field_name("value")
        if name_node is None:
            return
        name = _text(name_node, src)
        if value_node is None:
            env.vars[name] = ""
            return
        if value_node.type == "array":
            self.scan(value_node, src, env, wrappers, depth)
            env.vars[name] = None
            return
        text, dynamic = self.word_text(value_node, src, env, wrappers, depth)
        if "+=" in _text(node, src)[: len(name) + 2]:
            old = env.vars.get(name)
            env.vars[name] = None if dynamic or old is None or len(old) + len(text) > MAX_VALUE \
                else old + text
        else:
            env.vars[name] = None if dynamic or len(text) > MAX_VALUE else text

    def declaration(self, node: Any, src: bytes, env: _Env, wrappers: tuple[str, ...],
                    depth: int) -> SimpleCommand | None:
        keyword = node.children[0].type if node.children else "declare"
        argv = [keyword]
        for child in node.named_children:
            if child.type == "variable_assignment":
                self.assign(child, src, env, depth, wrappers)
                name = child.child_by_field_name("name")
                value = env.vars.get(_text(name, src)) if name is not None else None
                argv.append(_text(child, src) if value is None else f"{_text(name, src)}={value}")
            else:
                text, _ = self.word_text(child, src, env, wrappers, depth)
                if keyword == "unset":
                    env.vars[text] = ""
                argv.append(text)
        return self.record(keyword, argv, wrappers, _text(node, src))

    def function(self, node: Any, src: bytes, env: _Env, wrappers: tuple[str, ...],
                 depth: int) -> SimpleCommand | None:
        name_node = node.child_by_field_name("name")
        body = node.child_by_field_name("body")
        name = _text(name_node, src) if name_node is not None else ""
        self.functions.add(name)
        before = len(self.commands)
        if body is not None:
            self.stmt(body, src, env.copy(), wrappers, depth)
        if any(cmd.program == name for cmd in self.commands[before:]):
            self.add_opaque(f"recursive function {name!r} (fork bomb pattern)")
        return None

    def for_loop(self, node: Any, src: bytes, env: _Env, wrappers: tuple[str, ...],
                 depth: int) -> SimpleCommand | None:
        variable = node.child_by_field_name("variable")
        for child in node.children_by_field_name("value"):
            self.scan(child, src, env, wrappers, depth)
        if variable is not None:
            env.vars[_text(variable, src)] = None
        body = node.child_by_field_name("body")
        return self.stmt(body, src, env, wrappers, depth) if body is not None else None

    # ------------------------------------------------------------------------ simple commands

    def command(self, node: Any, src: bytes, env: _Env, wrappers: tuple[str, ...], depth: int,
                stdin: _Stdin | None, extra_redirects: Sequence[Any]) -> SimpleCommand | None:
        words: list[Any] = []
        redirects: list[Any] = list(extra_redirects)
        local = env
        for child in node.named_children:
            kind = child.type
            if kind == "variable_assignment":
                if local is env:
                    local = env.copy()
                self.assign(child, src, local, depth, wrappers)
            elif kind == "command_name":
                words.append(child.named_children[0] if child.named_children else child)
            elif kind in _REDIRECTS:
                redirects.append(child)
            elif kind != "comment":
                words.append(child)
        if redirects:
            word_stdin = self.redirect_io(redirects, src, local, wrappers, depth,
                                          empties=_prints_nothing(node, src))
            if word_stdin is not None:
                stdin = word_stdin
        if not words:
            if local is not env:  # bare assignments persist in the shell
                env.vars.update(local.vars)
            return None
        positional = _POSITIONAL_WORD.fullmatch(_text(words[0], src))
        if positional is not None and positional.group(1) not in local.vars:
            self.add_opaque(f"command name comes from the positional parameters "
                            f"({_text(words[0], src)})")
        fields: list[Field] = []
        for group in _adjacent_groups(words):
            fields.extend(self.expand(group, src, local, wrappers, depth))
        text = _text(node, src).replace(BRACE_MARKER + " ", "")
        return self.run(fields, local, wrappers, depth, text, stdin)

    def run(self, fields: Sequence[Field], env: _Env, wrappers: tuple[str, ...], depth: int,
            text: str, stdin: _Stdin | None) -> SimpleCommand | None:
        """Analyses one command given its expanded fields (after wrappers were stripped)."""
        if not fields:
            return None
        word, glob, dynamic, decoded = fields[0]
        if decoded is not None:
            self.add_opaque(f"command name is decoded at run time ({decoded})")
        if dynamic is not None:
            self.add_opaque(f"command name comes from {dynamic} ({word})")
            return self.record(None, [f[0] for f in fields], wrappers, text)
        if glob:
            candidates = _glob_programs(word)
            shown = ", ".join(candidates) if candidates else "no known program"
            self.add_opaque(f"command name is a glob pattern ({word}, matching {shown})")
            if not candidates:
                return self.record(None, [f[0] for f in fields], wrappers, text)
            rep = None
            for candidate in candidates:
                rep = self.run([(candidate, False, None, None), *fields[1:]], env, wrappers, depth,
                               text, stdin)
            return rep
        program = canonical_program(word)
        if program == BRACE_MARKER:
            return self.run(fields[1:], env, wrappers, depth, text, stdin)
        if "/" in word:
            self.check_runs_written(word)
        args = [f[0] for f in fields[1:]]
        wrapper = WRAPPERS.get(program)
        if wrapper is not None:
            inner = _wrapped_command(program, wrapper, fields[1:])
            if inner is not None:
                split = _env_split_string(program, args)
                if split is not None:
                    self.script(split, env.copy(), (*wrappers, program), depth + 1)
                    return None
                if not inner and program == "xargs":
                    inner = [("echo", False, None, None)]
                if inner and program in _FEEDERS:
                    options = [f[0] for f in fields[1 : len(fields) - len(inner)]]
                    inner = self.feed(program, options, inner, stdin)
                    stdin = None
                if inner:
                    return self.run(inner, env, (*wrappers, program), depth, text, stdin)
        if program in self.functions:
            return self.record(program, [word, *args], wrappers, text)
        family = program_family(program)
        if family in SHELLS:
            return self.shell(program, word, fields, env, wrappers, depth, text, stdin)
        if program == "eval":
            self.eval_(fields[1:], env, wrappers, depth)
            return self.record(program, [word, *args], wrappers, text)
        if family in INTERPRETERS:
            return self.interpreter(program, family, word, fields, env, wrappers, depth, text,
                                    stdin)
        if family in AWKS:
            return self.awk(program, word, args, wrappers, depth, text)
        if program == "trap":
            self.trap(fields[1:], env, wrappers, depth)
        if program in ("su", "runuser") and "-c" in args:
            script = args[args.index("-c") + 1] if args.index("-c") + 1 < len(args) else ""
            self.script(script, env.copy(), (*wrappers, program), depth + 1)
        if program == "watch":
            positional = [a for a in args if not a.startswith("-")]
            if len(positional) == 1:
                self.script(positional[0], env.copy(), (*wrappers, program), depth + 1)
        cmd = self.record(program, [word, *args], wrappers, text)
        if program == "find":
            self.find(cmd, fields, env, wrappers, depth, text)
        elif program == "cd":
            self.change_dir(args)
        elif program in ("source", ".") and fields[1:]:
            self.run_script_operand(cmd, fields[1], env, wrappers, depth, shell=True)
        elif program == "git":
            self.git(cmd, env, wrappers, depth, text)
        elif program == "tar":
            for script in tar_commands(cmd):
                self.script(script, _Env(), (*wrappers, program), depth + 1)
        return cmd


    def process_stdin(self, text: str, env: _Env) -> _Stdin | None:
        """The output of a process substitution ``<(...)`` as a command's input, or None."""
        if not (text.startswith("<(") and text.endswith(")")):
            return None
        parsed = parse_script(text[2:-1])
        if parsed.root is None or parsed.error is not None:
            return _Stdin(())
        probe = _Analyzer(self.home, self.cwd, self.budget)
        probe.stmt(parsed.root, parsed.source, env.copy(), (), MAX_DEPTH)
        return _Stdin(tuple(probe.commands),
                      resolve=_bind(probe.eval_stage, parsed.root, parsed.source, env, None))

    def record(self, program: str | None, argv: Sequence[str], wrappers: tuple[str, ...],
               text: str) -> SimpleCommand:
        args = argv[1:]
        if program is None:
            cmd = SimpleCommand(None, tuple(argv), positionals=tuple(args), wrappers=wrappers,
                                text=text, cwd=self.cwd)
        else:
            own = _without_exec_sections(args) if program == "find" else args
            flags, options, positionals, subcommand = parse_arguments(program, own)
            if program == "git" and subcommand == "push" and any(
                    p.startswith("+") for p in positionals[1:]):
                # ``+refspec`` forces that ref: ``git push origin +main`` is ``--force``.
                flags = flags | {"force"}
                options = (*options, ("force", None))
            cmd = SimpleCommand(program, tuple(argv), flags, options, positionals, subcommand,
                                wrappers, text, self.cwd)
            reads, writes = _io.command_io(cmd)
            for path in reads:
                self.add_path(self.reads, path)
            for path in writes:
                self.add_path(self.writes, path)
            deletes, empties = _io.command_removals(cmd)
            for path in deletes:
                self.add_path(self.deletes, path)
            for path in empties:
                self.add_path(self.empties, path)
        self.commands.append(cmd)
        return cmd


    def change_dir(self, args: Sequence[str]) -> None:
        target = next((a for a in args if not a.startswith("-") or a == "-"), None)
        if target is None:
            self.cwd = self.home
        elif target == "-" or "$" in target:
            self.cwd = None
        else:
            self.cwd = self.normalize(target) if (self.cwd or target.startswith(("/", "~"))) \
                else None

    # ---------------------------------------------------------------------------------- words

    def substitution(self, node: Any, src: bytes, env: _Env, wrappers: tuple[str, ...],
                     depth: int) -> Out | None:
        """Analyses ``$(...)``/backticks/``<(...)``; returns their output when computable."""
        key = (src, node.start_byte, node.end_byte)
        outputs = self.budget.outputs
        if self.probe and key in outputs:
            return outputs[key]
        out = self.substitution_inner(node, src, env, wrappers, depth)
        outputs[key] = out
        return out

    def substitution_inner(self, node: Any, src: bytes, env: _Env, wrappers: tuple[str, ...],
                           depth: int) -> Out | None:
        text = _text(node, src)
        body = [c for c in node.named_children if c.type != "comment"]
        if text.startswith("`"):
            inner = text[1:-1]
            if not inner.strip():
                return Out("")
            # Backquoted text is re-parsed after its own backslash processing.
            inner = re.sub(r"\\([$`\\])", r"\1", inner)
            sub_env = env.copy()
            self.script(inner, sub_env, wrappers, depth + 1)
            parsed = parse_script(inner)
            if parsed.error is not None or parsed.root is None:
                return None
            return self.stdout_of(parsed.root.named_children, parsed.source, env)
        sub_env = env.copy()
        for child in body:
            self.stmt(child, src, sub_env, wrappers, depth)
        if node.type == "process_substitution":
            return None
        if not body or all(c.type == "command" and not _text(c, src).strip() for c in body):
            return Out("")
        return self.stdout_of(body, src, env)

    # ----------------------------------------------------------- static evaluation of output

    def stdout_of(self, nodes: Sequence[Any], src: bytes, env: _Env,
                  end: int | None = None) -> Out | None:
        """The standard output of pipeline stages ``nodes[:end]``, when statically computable."""
        out: Out | None = None
        for index, node in enumerate(nodes):
            if end is not None and index >= end:
                break
            out = self.eval_stage(node, src, env, out)
            if out is None:
                return None
        return out

    def eval_stage(self, node: Any, src: bytes, env: _Env, stdin: Out | None) -> Out | None:
        self.budget.spend()
        self.budget.level += 1
        try:
            if self.budget.level > MAX_NESTING:
                raise _TooComplex
            out = self.eval_stage_inner(node, src, env, stdin)
        finally:
            self.budget.level -= 1
        return None if out is not None and len(out.text) > MAX_OUTPUT else out

    def eval_stage_inner(self, node: Any, src: bytes, env: _Env,
                         stdin: Out | None) -> Out | None:
        kind = node.type
        if kind == "pipeline":
            return self.stdout_of(_stages(node), src, env)
        if kind == "redirected_statement":
            body = node.child_by_field_name("body")
            redirects = [c for c in node.named_children if c.type in _REDIRECTS]
            if body is None or body.type != "command":
                return None
            return self.eval_command(body, src, env, stdin, redirects)
        if kind == "command":
            return self.eval_command(node, src, env, stdin, ())
        if kind in ("program", "list", "subshell", "compound_statement"):
            pieces: list[str] = []
            decoded = False
            via = ""
            for child in node.named_children:
                if child.type == "comment":
                    continue
                piece = self.eval_stage(child, src, env, None)
                if piece is None:
                    return None
                pieces.append(piece.text)
                decoded = decoded or piece.decoded
                via = via or piece.via
            return Out("".join(pieces), decoded, via)
        return None

    def eval_command(self, node: Any, src: bytes, env: _Env, stdin: Out | None,
                     redirects: Sequence[Any]) -> Out | None:
        words: list[Any] = []
        for child in node.named_children:
            if child.type == "command_name":
                words.append(child.named_children[0] if child.named_children else child)
            elif child.type in _REDIRECTS:
                redirects = [*redirects, child]
            elif child.type not in ("comment", "variable_assignment"):
                words.append(child)
        for redirect in redirects:
            if redirect.type == "herestring_redirect" and redirect.named_children:
                parts: list[str] = []
                why: list[str] = []
                probe = _Analyzer(self.home, self.cwd, self.budget)
                probe.build(redirect.named_children[0], src, env, (), MAX_DEPTH, parts, why,
                            quoted=False, start=True, assignment=True)
                if why:
                    return None
                words_in = finalize_word("".join(parts), brace=False)
                stdin = Out((words_in[0][0] if words_in else "") + "\n")
            elif redirect.type == "heredoc_redirect":
                body = next((c for c in redirect.named_children if c.type == "heredoc_body"), None)
                if body is None:
                    return None
                stdin = Out(_text(body, src))
            else:
                return None
        probe = _Analyzer(self.home, self.cwd, self.budget)
        fields: list[Field] = []
        for group in _adjacent_groups(words):
            fields.extend(probe.expand(group, src, env, (), MAX_DEPTH))
        if not fields or any(f[2] is not None for f in fields):
            return None
        program = canonical_program(fields[0][0])
        if program == "pwd":
            return Out((self.cwd or ".") + "\n")
        return evaluate_program(program, [f[0] for f in fields[1:]], stdin)

    # -------------------------------------------------------------------------------- results

    def add_opaque(self, reason: str) -> None:
        if len(reason) > 200:
            reason = reason[:197] + "..."
        if reason not in self.opaque:
            self.opaque.append(reason)

    def normalize(self, path: str) -> str:
        if self.cwd and not path.startswith(("/", "~", "$")):
            path = self.cwd.rstrip("/") + "/" + path
        if path.startswith("~") and self.home and (len(path) == 1 or path[1] == "/"):
            path = self.home + path[1:]
        normalized = os.path.normpath(path)
        if normalized.startswith("//"):
            normalized = "/" + normalized.lstrip("/")  # ``//`` is ``/`` on Linux and macOS
        return normalized

    def add_path(self, target: list[str], path: str) -> None:
        if not path or path == "-" or path in _IGNORED_PATHS or path.startswith(
                ("/dev/fd/", "<(", ">(")):
            return  # a process substitution is a pipe, not a file
        normalized = self.normalize(path)
        if target is self.writes:
            self.written.add(normalized)
        if normalized not in target:
            target.append(normalized)

    def result(self, source: str, error: str | None) -> CommandAnalysis:
        return CommandAnalysis(
            source=source,
            commands=tuple(self.commands),
            pipelines=tuple(self.pipelines),
            reads=tuple(self.reads),
            writes=tuple(self.writes),
            deletes=tuple(self.deletes),
            empties=tuple(self.empties),
            environment=tuple(dict.fromkeys(
                [*shown_variables(self.commands, self.pipelines), *self.environment])),
            opaque=tuple(self.opaque),
            parse_error=error,
            home=self.home,
            cwd=self.start_cwd,
            programs=frozenset(c.program for c in self.commands if c.program is not None),
        )


# Commands that print nothing: redirected with ``>``, they empty the file (``: > log``).
_NO_OUTPUT: tuple[list[str], ...] = (
    [], [":"], ["true"], ["cat", "/dev/null"], ["echo", "-n"], ["printf", "''"], ["printf", '""'])


def _prints_nothing(node: Any, src: bytes) -> bool:
    """Whether a redirected statement's body prints nothing (none at all: ``> file``)."""
    if node is None:
        return True
    if node.type != "command":
        return False
    words = [_text(c, src) for c in node.named_children
             if c.type not in ("variable_assignment", "comment", *_REDIRECTS)]
    return words in _NO_OUTPUT


_IGNORED_PATHS = frozenset({"/dev/null", "/dev/stdin", "/dev/stdout", "/dev/stderr",
                            "/dev/tty", "/dev/zero", "/dev/urandom", "/dev/random"})


def analyze_uncached(command: str, home: str | None, cwd: str | None) -> CommandAnalysis:
    """Analyses ``command`` (no cache, no input checks: see ``analyze_command``)."""
    analyzer = _Analyzer(home, cwd)
    parsed = parse_script(command)
    if parsed.root is None:
        return CommandAnalysis(source=command, parse_error=parsed.error, home=home, cwd=cwd)
    try:
        analyzer.stmt(parsed.root, parsed.source, _Env(), (), 0)
    except _TooComplex:
        analyzer.add_opaque("command too complex to analyse fully")
    except RecursionError:
        return CommandAnalysis(source=command, parse_error="command nested too deeply",
                               home=home, cwd=cwd)
    return analyzer.result(command, parsed.error)
