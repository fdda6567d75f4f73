"""Flag-aware command patterns (``rm -r *``, ``curl * | sh``) and path globs for shell rules.

A pattern is written like the command it matches. It is parsed with the program's own option
table, so ``rm -r *`` requires the canonical flag ``recursive`` and therefore matches
``rm -fr /``, ``/bin/rm -Rf /`` and ``sudo rm --recursive --force /tmp/x``. Words:

- the program: a name or glob (``mkfs`` also matches ``mkfs.ext4``, ``python`` ``python3``);
  leading wrappers (``sudo rm ...``) must wrap the command; a wrapper alone (``sudo *``)
  matches any command run under it;
- options: required (``--force`` does not match ``--force-with-lease``); a value is a glob
  (``dd of=/dev/sd*``, ``curl -d @- *``);
- operands: one glob each (``*`` stays within a path segment, ``**`` crosses ``/``); a bare
  ``*`` word matches any number of operands *and* allows extra options. Without it the
  operands must match exactly; in an allow list extra options are then refused too;
- ``a | b``: consecutive pipeline stages; ``{a,b}`` expands to several patterns;
  ``git log:*`` (Claude Code style) means ``git log *``.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from callwarden.analysis.globs import (
    GlobSet,
    check_glob,
    compile_glob,
    expand_braces,
    glob_to_regex,
    is_glob,
)
from callwarden.analysis.shell._canon import canonical_program, parse_arguments
from callwarden.analysis.shell._model import UNKNOWN_OPERAND, CommandAnalysis, SimpleCommand
from callwarden.analysis.shell._programs import WRAPPERS, program_family, spec_for
from callwarden.analysis.shell._words import brace_expand

__all__ = ["CommandRule", "PathGlobs", "PatternMatch", "ShellPatternSet", "compile_rule"]



@dataclass(frozen=True, slots=True)
class PatternMatch:
    """Which command (or pipeline) matched which pattern."""

    pattern: str
    command: SimpleCommand
    stages: tuple[SimpleCommand, ...] = ()

    @property
    def detail(self) -> str:
        """A one-line explanation for a Hit."""
        shown = " | ".join(c.text for c in self.stages) if self.stages else self.command.text
        return f"{_short(shown)!r} matches {self.pattern!r}"


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


_Test = Callable[[str], bool]


def _glob(text: str, *, ignore_case: bool = False) -> _Test:
    """A glob over one word, in the one dialect (:mod:`callwarden.analysis.globs`).

    Raises:
        ValueError: the pattern is not of the dialect (a ``GlobError``).
    """
    return compile_glob(text, ignore_case=ignore_case)


class CommandRule:
    """A compiled condition on one simple command (from a pattern or a structured rule)."""

    __slots__ = (
        "_program_test",
        "any_flags",
        "any_program",
        "args",
        "flags",
        "label",
        "line",
        "not_flags",
        "options",
        "positional",
        "prefix",
        "program_globs",
        "programs",
        "subcommands",
        "wrapper_only",
        "wrappers",
    )

    def __init__(
        self,
        *,
        label: str,
        programs: Sequence[str] = (),
        wrappers: Sequence[str] = (),
        subcommands: Sequence[str] = (),
        flags: Iterable[str] = (),
        any_flags: Iterable[str] = (),
        not_flags: Iterable[str] = (),
        options: Mapping[str, Sequence[str]] | None = None,
        positional: Sequence[str] | None = None,
        args: Sequence[str] = (),
        line: Sequence[str] = (),
        ignore_case: bool = False,
        wrapper_only: bool = False,
    ) -> None:
        self.label = label
        literal = [p for p in programs if not is_glob(p)]
        self.programs = frozenset(literal)
        self.program_globs = tuple(p for p in programs if is_glob(p))
        self.any_program = "*" in self.program_globs
        self._program_test = GlobSet(self.program_globs) if self.program_globs else None
        self.wrappers = frozenset(wrappers)
        self.wrapper_only = wrapper_only
        self.subcommands = tuple(_glob(s, ignore_case=ignore_case) for s in subcommands)
        self.flags = frozenset(flags)
        self.any_flags = frozenset(any_flags)
        self.not_flags = frozenset(not_flags)
        self.options = tuple(
            (name, tuple(_glob(v, ignore_case=ignore_case) for v in values))
            for name, values in (options or {}).items()
        )
        self.prefix = positional is None or "*" in positional
        self.positional: tuple[_Test | None, ...] | None = None if positional is None else tuple(
            None if p == "*" else _glob(p, ignore_case=ignore_case) for p in positional
        )
        self.args = GlobSet(args, ignore_case=ignore_case)
        self.line = GlobSet(line, ignore_case=ignore_case)

    @property
    def index_keys(self) -> frozenset[str] | None:
        """Program names this rule can match (None: any, check every command)."""
        if self.program_globs or not self.programs:
            return None
        return self.programs | (self.wrappers if self.wrapper_only else frozenset())

    def matches(self, cmd: SimpleCommand, home: str | None, *, strict: bool = False) -> bool:
        """Whether ``cmd`` satisfies the rule. ``strict`` refuses unlisted flags (allow lists)."""
        program = cmd.program
        if program is None:
            return False
        if self.wrapper_only:
            if not (self.wrappers & set(cmd.wrappers) or program in self.wrappers):
                return False
        else:
            if not self._program_ok(program):
                return False
            if self.wrappers and not self.wrappers <= set(cmd.wrappers):
                return False
        if self.subcommands and (cmd.subcommand is None or not any(
                g(cmd.subcommand) for g in self.subcommands)):
            return False
        flags = cmd.flags
        if self.flags and not self.flags <= flags:
            return False
        if self.any_flags and not self.any_flags & flags:
            return False
        if self.not_flags and self.not_flags & flags:
            return False
        if strict and not self.prefix and flags - self.flags:
            return False
        for name, globs in self.options:
            values = cmd.option_values(name)
            if not any(g(v) for v in values for g in globs):
                return False
        if self.positional is not None and not _match_sequence(
                self.positional, cmd.positionals, home, cmd.cwd):
            return False
        if self.args:
            operands = cmd.positionals[1:] if cmd.subcommand is not None else cmd.positionals
            test = self.args
            cwd = cmd.cwd
            if not any(test(form) for arg in operands for form in _forms(arg, home, cwd)):
                return False
        return not (self.line and not self.line(" ".join((program, *cmd.argv[1:]))))

    def _program_ok(self, program: str) -> bool:
        if program in self.programs or self.any_program:
            return True
        family = program_family(program)
        if family != program and family in self.programs:
            return True
        test = self._program_test
        return test is not None and (test(program) or test(family))


@lru_cache(maxsize=8192)
def _forms(arg: str, home: str | None, cwd: str | None = None) -> tuple[str, ...]:
    """The spellings an operand is compared under: as given, lexically normalized (``//`` and
    ``..`` folded), resolved against the working directory, ``~``-relative, and relative to the
    working directory when it names that directory or one of its parents (``$PWD`` -> ``.``)."""
    if arg == UNKNOWN_OPERAND:
        return _UNKNOWN_FORMS
    if not arg or (cwd is None and not ("/" in arg or arg[0] in "~.")):
        return (arg,)  # a bare name where the directory is unknown: only as written
    forms = [arg]
    normalized = _normalize(arg)
    if normalized != arg:
        forms.append(normalized)
    if normalized.startswith("..") and all(part == ".." for part in normalized.split("/")):
        forms.append("..")  # ``../../..`` is a parent of the project like ``..``
    if cwd and normalized[0] not in "/~":
        resolved = _normalize(cwd.rstrip("/") + "/" + normalized)
        forms.append(resolved)
    else:
        resolved = normalized
    if cwd and resolved.startswith("/"):
        base = _normalize(cwd)
        if resolved == base or base.startswith(resolved.rstrip("/") + "/"):
            # The working directory itself or one of its parents: ``.``, ``..``, ``../..``.
            forms.append("/".join([".."] * _depth_between(resolved, base)) or ".")
    if home:
        base_home = home.rstrip("/")
        for form in tuple(forms):
            if form == base_home or form.startswith(base_home + "/"):
                forms.append("~" + form[len(base_home) :])
    match = _ANY_HOME.match(resolved)
    if match is not None:
        # Rules on ``~/...`` protect every user's home, not just the configured one.
        forms.append("~" + resolved[match.end() :])
    return tuple(dict.fromkeys(forms))


_UNKNOWN_FORMS = ("/",)
_ANY_HOME = re.compile(r"^/(?:root|home/[^/]+|Users/[^/]+)(?=/|$)")


def _normalize(path: str) -> str:
    normalized = os.path.normpath(path)
    if normalized.startswith("//"):
        normalized = "/" + normalized.lstrip("/")  # ``//`` is ``/`` on Linux and macOS
    return normalized


def _depth_between(ancestor: str, path: str) -> int:
    if ancestor == path:
        return 0
    rest = path[len(ancestor.rstrip("/")) :].strip("/")
    return rest.count("/") + 1


def _match_sequence(globs: Sequence[_Test | None], values: Sequence[str],
                    home: str | None, cwd: str | None = None) -> bool:
    if not globs:
        return not values
    head = globs[0]
    if head is None:
        return any(_match_sequence(globs[1:], values[i:], home, cwd)
                   for i in range(len(values) + 1))
    if not values:
        return False
    if not any(head(form) for form in _forms(values[0], home, cwd)):
        return False
    return _match_sequence(globs[1:], values[1:], home, cwd)


class _Pipeline:
    __slots__ = ("label", "stages")

    def __init__(self, label: str, stages: Sequence[CommandRule]) -> None:
        self.label = label
        self.stages = tuple(stages)

    def find_ending(self, pipeline: Sequence[SimpleCommand], end: int,
                    home: str | None) -> PatternMatch | None:
        """Matches the stages ending at ``pipeline[end]`` (inclusive)."""
        width = len(self.stages)
        start = end - width + 1
        if start < 0:
            return None
        window = pipeline[start : end + 1]
        if all(rule.matches(cmd, home) for rule, cmd in zip(self.stages, window, strict=True)):
            return PatternMatch(self.label, window[-1], tuple(window))
        return None


def _parse_stage(words: Sequence[str], label: str) -> CommandRule:
    if not words:
        raise ValueError("empty command in pattern")
    wrappers: list[str] = []
    index = 0
    while index < len(words) - 1 and canonical_program(words[index]) in WRAPPERS and \
            words[index + 1] != "*":
        wrappers.append(canonical_program(words[index]))
        index += 1
    program = canonical_program(words[index])
    rest = list(words[index + 1 :])
    if program in WRAPPERS and rest == ["*"] and not wrappers:
        # ``sudo *``: anything run under sudo (or sudo on its own).
        return CommandRule(label=label, wrappers=[program], programs=[program],
                           positional=None, wrapper_only=True)
    if program == "*":
        return CommandRule(label=label, wrappers=wrappers, programs=["*"],
                           positional=None if rest == ["*"] or not rest else ["*"])
    spec_program = program if not is_glob(program) else ""
    flags, options, positionals, _ = parse_arguments(spec_program, rest)
    if rest and rest[-1] == "*" and "*" not in positionals:
        positionals = (*positionals, "*")  # ``nc -e *``: the star was read as -e's value
    valued: dict[str, list[str]] = {}
    bare: set[str] = set()
    for name, value in options:
        if value is None:
            bare.add(name)
        else:
            valued.setdefault(name, []).append(value)
    return CommandRule(
        label=label,
        programs=[program],
        wrappers=wrappers,
        flags=bare | (flags - set(valued)),
        options=valued,
        positional=list(positionals),
    )


def compile_rule(pattern: str) -> CommandRule | _Pipeline:
    """Compiles one pattern string (no brace expansion) into a rule or a pipeline rule."""
    text = pattern.strip()
    if text.endswith(":*"):
        text = text[:-2] + " *"
    lexer = shlex.shlex(text, posix=True, punctuation_chars="|&;")
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError as e:
        raise ValueError(f"cannot split pattern: {e}") from e
    stages: list[list[str]] = [[]]
    for token in tokens:
        if token == "|":
            stages.append([])
        elif token and set(token) <= set("|&;"):
            raise ValueError(f"only '|' may join commands in a pattern, not {token!r}")
        else:
            stages[-1].append(token)
    rules = [_parse_stage(words, pattern) for words in stages]
    return rules[0] if len(rules) == 1 else _Pipeline(pattern, rules)


class ShellPatternSet:
    """A compiled list of command patterns, indexed by program for speed.

    ``ShellPatternSet.compile(["rm -r *", "curl * | sh"]).match(analysis)`` returns the first
    :class:`PatternMatch` or None; ``allows(analysis)`` checks every command against the set
    as an allow list.
    """

    __slots__ = ("_any", "_by_program", "_pipe_any", "_pipe_by_last", "_pipelines", "patterns")

    def __init__(self, rules: Iterable[CommandRule | _Pipeline], patterns: Sequence[str]) -> None:
        self.patterns = tuple(patterns)
        self._by_program: dict[str, list[CommandRule]] = {}
        self._any: list[CommandRule] = []
        self._pipelines: list[_Pipeline] = []
        # Pipeline patterns indexed by the program of their last stage.
        self._pipe_by_last: dict[str, list[_Pipeline]] = {}
        self._pipe_any: list[_Pipeline] = []
        for rule in rules:
            if isinstance(rule, _Pipeline):
                self._pipelines.append(rule)
                keys = rule.stages[-1].index_keys
                if keys is None:
                    self._pipe_any.append(rule)
                else:
                    for key in keys:
                        self._pipe_by_last.setdefault(key, []).append(rule)
                continue
            keys = rule.index_keys
            if keys is None:
                self._any.append(rule)
            else:
                for key in keys:
                    self._by_program.setdefault(key, []).append(rule)

    @classmethod
    def compile(cls, patterns: Iterable[str]) -> ShellPatternSet:
        """Compiles pattern strings; raises ValueError naming the bad pattern."""
        rules: list[CommandRule | _Pipeline] = []
        texts: list[str] = []
        for pattern in patterns:
            if not isinstance(pattern, str) or not pattern.strip():
                raise ValueError(f"pattern must be a non-empty string, not {pattern!r}")
            texts.append(pattern)
            variants = brace_expand(pattern) if "{" in pattern else [pattern]
            for variant in variants:
                try:
                    rules.append(_relabel(compile_rule(variant), pattern))
                except ValueError as e:
                    raise ValueError(f"pattern {pattern!r}: {e}") from e
        return cls(rules, texts)

    @classmethod
    def from_rules(cls, rules: Iterable[CommandRule]) -> ShellPatternSet:
        """Builds a set from already compiled rules (structured ``rules:`` entries)."""
        listed = list(rules)
        return cls(listed, [r.label for r in listed])

    def candidates(self, cmd: SimpleCommand) -> Iterable[CommandRule]:
        """The rules that may match ``cmd`` (by program, family and wrappers)."""
        program = cmd.program
        if program is None:
            return ()
        found = list(self._by_program.get(program, ()))
        family = program_family(program)
        if family != program:
            found.extend(self._by_program.get(family, ()))
        for wrapper in cmd.wrappers:
            found.extend(r for r in self._by_program.get(wrapper, ()) if r.wrapper_only)
        found.extend(self._any)
        return found

    def match(self, analysis: CommandAnalysis) -> PatternMatch | None:
        """Returns the first command or pipeline of ``analysis`` matching a pattern."""
        home = analysis.home
        for cmd in analysis.commands:
            for rule in self.candidates(cmd):
                if rule.matches(cmd, home):
                    return PatternMatch(rule.label, cmd)
        if not self._pipelines:
            return None
        for pipeline in analysis.pipelines:
            for end, cmd in enumerate(pipeline):
                program = cmd.program
                if program is None:
                    continue
                candidates: Sequence[_Pipeline] = self._pipe_by_last.get(program, ())
                family = program_family(program)
                if family != program:
                    candidates = [*candidates, *self._pipe_by_last.get(family, ())]
                for pattern in (*candidates, *self._pipe_any):
                    found = pattern.find_ending(pipeline, end, home)
                    if found is not None:
                        return found
        return None

    def matches_command(self, cmd: SimpleCommand, home: str | None = None, *,
                        strict: bool = False) -> CommandRule | None:
        """Returns the first single-command rule matching ``cmd``, or None."""
        for rule in self.candidates(cmd):
            if rule.matches(cmd, home, strict=strict):
                return rule
        return None

    def first_not_allowed(self, analysis: CommandAnalysis) -> SimpleCommand | None:
        """As an allow list: the first command no pattern allows (None: all allowed)."""
        for cmd in analysis.commands:
            if cmd.program is None or self.matches_command(cmd, analysis.home,
                                                           strict=True) is None:
                return cmd
            if _privileged(cmd) and not any(
                    r.wrappers for r in self.candidates(cmd) if r.matches(cmd, analysis.home)):
                return cmd
        return None

    @property
    def has_pipelines(self) -> bool:
        """Whether some pattern joins commands with ``|``."""
        return bool(self._pipelines)


def _privileged(cmd: SimpleCommand) -> bool:
    from callwarden.analysis.shell._programs import PRIVILEGED_WRAPPERS

    return any(w in PRIVILEGED_WRAPPERS for w in cmd.wrappers)


def _relabel(rule: CommandRule | _Pipeline, label: str) -> CommandRule | _Pipeline:
    rule.label = label
    if isinstance(rule, _Pipeline):
        for stage in rule.stages:
            stage.label = label
    return rule


def canonical_flags(program: str, names: Iterable[str],
                    subcommand: str | None = None) -> frozenset[str]:
    """Canonical names of flags spelled in a structured rule (``r`` -> ``recursive`` for rm)."""
    spec = spec_for(program) if program and not is_glob(program) else spec_for("")
    if subcommand and spec.subcommands:
        spec = spec.subcommands.get(subcommand, spec)
    out: set[str] = set()
    for name in names:
        name = str(name)
        if name.startswith("-"):
            spelled = [name]
        elif len(name) == 1:
            spelled = ["-" + name]
        else:
            spelled = ["--" + name, "-" + name]
        canonical = next((spec.names[s] for s in spelled if s in spec.names), name.lstrip("-"))
        out.add(canonical)
    return frozenset(out)


class PathGlobs:
    """Path globs with ``!`` exclusions, matched against the paths a command reads or writes.

    The one glob dialect (:mod:`callwarden.analysis.globs`): ``*`` stays within a directory,
    ``**`` crosses directories, ``{a,b}`` gives alternatives; a glob without ``/`` matches a
    file name anywhere (``.env``), ``~/`` means the home directory (also when the analysis
    expanded it). A path that is itself a glob (``cat ~/.ssh/*``) matches when it names a
    typical file of a denied glob (its *witness*: ``~/.ssh/x`` for ``~/.ssh/**``).

    Raises:
        ValueError: a pattern is not of the dialect (a ``GlobError`` naming it).
    """

    __slots__ = ("_any", "_any_exclude", "_deny", "_exclude", "patterns")

    def __init__(self, patterns: Sequence[str], *, ignore_case: bool = False) -> None:
        self.patterns = tuple(patterns)
        deny: list[tuple[str, re.Pattern[str], tuple[str, ...]]] = []
        exclude: list[re.Pattern[str]] = []
        flags = re.DOTALL | (re.IGNORECASE if ignore_case else 0)
        for raw in patterns:
            negate = raw.startswith("!")
            glob = raw[1:] if negate else raw
            glob = glob.replace("${HOME}", "~").replace("$HOME", "~")
            if "/" not in glob.rstrip("/"):
                glob = "**/" + glob
            glob = glob.rstrip("/") or "/"
            check_glob(glob)
            regex = re.compile(glob_to_regex(glob), flags)
            if negate:
                exclude.append(regex)
            else:
                deny.append((raw, regex, tuple(_witness(alt) for alt in expand_braces(glob))))
        self._deny = tuple(deny)
        self._exclude = tuple(exclude)
        self._any = re.compile("|".join(f"(?:{r.pattern})" for _, r, _ in deny), flags) \
            if deny else None
        self._any_exclude = re.compile("|".join(f"(?:{r.pattern})" for r in exclude), flags) \
            if exclude else None

    def first(self, paths: Iterable[str], home: str | None) -> tuple[str, str] | None:
        """Returns ``(path, glob)`` for the first path matching a glob, or None."""
        if self._any is None:
            return None
        for path in paths:
            forms = _forms(path, home) if path else ()
            globbed = is_glob(path)
            if not globbed and not any(self._any.fullmatch(f) for f in forms):
                continue
            if self._any_exclude is not None and any(
                    self._any_exclude.fullmatch(f) for f in forms):
                continue
            path_regex: list[re.Pattern[str] | None] | None = None
            for raw, regex, witnesses in self._deny:
                if any(regex.fullmatch(f) for f in forms):
                    return path, raw
                if not globbed:
                    continue
                for witness in witnesses:
                    if any(x.fullmatch(witness) for x in self._exclude):
                        continue
                    if path_regex is None:
                        path_regex = [_argument_regex(f) for f in forms]
                    if any(r is not None and r.fullmatch(witness) for r in path_regex):
                        return path, raw
        return None


def _argument_regex(form: str) -> re.Pattern[str] | None:
    """A globbed path argument as a regex; None when it is not a glob of the dialect (the
    shell took it literally)."""
    try:
        check_glob(form)
    except ValueError:
        return None
    return re.compile(glob_to_regex(form), re.DOTALL)


def _witness(glob: str) -> str:
    """A concrete path the (brace-free) glob matches, to test a globbed path against it."""
    text = glob.replace("**/", "").replace("**", "x").replace("*", "x").replace("?", "x")
    return _CLASS.sub(_class_witness, text)


_CLASS = re.compile(r"\[([!^]?)(\]?[^\]]*)\]")


def _class_witness(m: re.Match[str]) -> str:
    body = m.group(2)
    if not m.group(1):
        return body[0]
    inside: list[tuple[str, str]] = []
    k = 0
    while k < len(body):
        if k + 2 < len(body) and body[k + 1] == "-":
            inside.append((body[k], body[k + 2]))
            k += 3
        else:
            inside.append((body[k], body[k]))
            k += 1
    return next(c for c in "xyz0_~" if not any(a <= c <= b for a, b in inside))
