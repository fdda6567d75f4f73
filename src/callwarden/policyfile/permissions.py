"""Permission strings as coding agents write them: ``Bash(git push *)``, ``Read(~/.ssh/**)``,
``WebFetch(domain:example.com)``, ``mcp__github__*``.

The tool name stands for a tool kind where coding agents have one (``Bash`` governs every
shell tool); the pattern inside the parentheses is compiled by the condition of that kind, so
it is flag-aware for shells, canonicalized for paths and host-aware for URLs.

An MCP server's name alone (``mcp__github``) governs every tool of that server, as in Claude
Code. Any other name is a tool name (or a glob of tool names) and governs that tool only. Its
pattern is read the way the tool's kind reads patterns — the kind its ``tools:`` profile
declares, else the built-in default for that name — so with ``tools: {bash: {kind: shell}}``,
``bash(rm -rf *)`` is a parsed, flag-aware shell pattern on the tool ``bash`` (it catches
``ls && rm -rf /``), not a plain-text match. A pattern on a tool whose kind has no primary
argument (``unknown``, ``mcp``, a custom kind) could never match and is an error; a pattern on
a glob of names (``mcp__fs__*(...)``) matches each tool's primary argument as text.

A name that looks like a built-in one (``Bsh``, ``bash``, ``read``, ``WebFech``: equal ignoring
case, or two edits away) is an error with "did you mean", unless ``tools:`` declares it or it
is a well-known tool name of its own (``Task``, ``sh``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from callwarden._decision import Effect
from callwarden._profiles import ToolProfile, default_profile
from callwarden.analysis.globs import GlobSet, is_glob
from callwarden.conditions.base import CompileEnv, Hit, Matcher, Subject
from callwarden.conditions.paths import PathMatcher
from callwarden.conditions.shell import ShellMatcher
from callwarden.conditions.urls import UrlMatcher
from callwarden.engine.rules import Rule, Selector
from callwarden.exceptions import ConfigError
from callwarden.policyfile.caps import PatternBudget
from callwarden.policyfile.check import Checker, Path_
from callwarden.policyfile.names import AGENT_TOOL_NAMES, resembles, tool_profile
from callwarden.policyfile.yamlsrc import Lines

__all__ = ["compile_permission_pattern", "permission_rules"]


class _PrimaryGlob:
    """Fallback for ``Tool(pattern)``: a glob over the tool's primary argument.

    With ``outside_of`` it is the complement used by ``allow`` strings: it holds when some
    value is matched by none of those globs (or is not a string)."""

    __slots__ = ("_globs", "_outside_of", "_pattern")

    def __init__(self, pattern: str, *, outside_of: Sequence[str] = ()) -> None:
        self._pattern = pattern
        self._globs = GlobSet([pattern])
        self._outside_of = GlobSet(outside_of) if outside_of else None

    def __call__(self, subject: Subject) -> Hit | None:
        value = subject.primary
        values = value if isinstance(value, tuple) else (value,)
        for v in values:
            if not isinstance(v, str):
                if self._outside_of is not None:
                    return Hit("a value that is not text", "pattern.outside")
                continue
            text = " ".join(v.split())
            if self._outside_of is not None:
                if not self._outside_of(text):
                    return Hit(f"{v[:200]!r} matches no allowed pattern", "pattern.outside")
            elif self._globs(text):
                return Hit(f"{v[:200]!r} matches {self._pattern!r}", "pattern.matched")
        return None


class _AllOf:
    """An ``allow`` permission string's condition: its own pattern matches something the
    call does, and *everything* the call does (every command, path or URL) is matched by
    this pattern or a sibling ``allow`` string of the same kind — nothing is opaque.
    ``Bash(ls *)`` then allows ``ls -la`` but not ``ls && rm -rf /``; with ``Bash(git log *)``
    beside it, ``ls && git log`` is allowed; ``Edit(src/**)`` does not allow a patch that
    also writes ``/etc/passwd``.

    Sibling strings share one ``outside`` condition (their patterns together), checked once a
    call; their own patterns are checked as one (``union``) where their kind has unions, so a
    long allow list costs about what a short one does."""

    __slots__ = ("_outside", "_own", "_pattern", "group_key")

    def __init__(self, own: Matcher, outside: _Once, pattern: str) -> None:
        self._own = own
        self._outside = outside
        self._pattern = pattern
        own_key = getattr(own, "group_key", None)
        #: Strings of one kind sharing an ``outside`` whose own patterns have a union.
        self.group_key: tuple[Any, ...] | None = None if own_key is None else (
            "allow", id(outside), type(own), own_key)

    def __call__(self, subject: Subject) -> Hit | None:
        hit = self._own(subject)
        if hit is None or self._outside(subject) is not None:
            return None
        return Hit(hit.detail, "pattern.allowed")

    @classmethod
    def union(cls, matchers: Sequence[_AllOf]) -> _AllOf:
        """One condition that holds when one of ``matchers`` (siblings of one ``group_key``)
        would: the union of their own patterns, and their shared ``outside``."""
        key = matchers[0].group_key
        if key is None or any(m.group_key != key for m in matchers):
            raise ValueError("only allow strings of one group_key have a union")
        own = type(matchers[0]._own).union([m._own for m in matchers])  # type: ignore[attr-defined]
        return cls(own, matchers[0]._outside, "")


class _Once:
    """A condition several ``allow`` strings share (their patterns together), found once per
    call: its answer is kept in the call's memo (an error is not kept: each rule meets it)."""

    __slots__ = ("_key", "_matcher")

    def __init__(self, matcher: Matcher) -> None:
        self._matcher = matcher
        self._key = f"callwarden.allow.outside:{id(self)}"  # (it lives as long as its policy)

    def __call__(self, subject: Subject) -> Hit | None:
        memo = subject.memo
        found = memo.get(self._key, _UNSEEN)
        if found is _UNSEEN:
            found = memo[self._key] = self._matcher(subject)
        return found  # type: ignore[no-any-return]


_UNSEEN: Any = object()


def compile_permission_pattern(kind: str | None, pattern: str, *, allow: bool = False,
                               outside: _Once | None = None,
                               env: CompileEnv | None = None) -> Matcher:
    """Compiles the pattern of a permission string for a tool kind.

    Shell patterns are flag-aware (``rm -rf *`` also catches ``rm -fr /``) when the shell
    analysis is available; path patterns expand ``~``; ``WebFetch(domain:x)`` matches hosts.
    For ``deny``/``ask`` strings the condition holds when *some* command, path or URL of the
    call matches. For ``allow`` strings (``allow=True``) it holds only when the pattern
    matches and *every* command, path or URL is covered by one of the patterns ``outside``
    was made of (``outside_of``: the kind's allow strings together; without it, this pattern
    alone), nothing is opaque, and a shell command writes no file but ``/dev/null``.
    ``env``: the policy's workspace (its root, home and working directory), as its rules see it.

    A path pattern that starts with one ``/`` is absolute; Claude Code reads it from the folder
    of its settings (``Edit(/src/**)``: the project's ``src``), so a ``deny`` or ``ask``
    string also holds there, below the workspace root; an ``allow`` string covers only the
    absolute path (``//`` is absolute in both).
    """
    env = env or CompileEnv()
    own = _some_matcher(kind, pattern, env, allow=allow)
    if not allow:
        return own
    if outside is None:
        outside = outside_of(kind, _by_domain(kind, pattern), (pattern,), env)
    return _AllOf(own, outside, pattern)


def _by_domain(kind: str | None, pattern: str) -> bool:
    """Whether a pattern names hosts (``WebFetch(domain:x)``) rather than a glob of text."""
    return kind == "http" and pattern.startswith("domain:")


def outside_of(kind: str | None, by_domain: bool, together: Sequence[str],
               env: CompileEnv) -> _Once:
    """The condition an ``allow`` string holds unless: something the call does is matched by
    none of ``together`` (the patterns of its kind's allow strings; ``by_domain``: hosts)."""
    if kind == "shell":
        outside: Matcher = ShellMatcher({"allow": list(together), "opaque": "hit",
                                         "parse_error": "hit",
                                         "writes": ["**", "/**", "!/dev/null"]}, env)
    elif kind in ("file.read", "file.write"):
        outside = PathMatcher({"deny": ["/**", *(f"!{p}" for p in together)]}, env)
    elif by_domain:
        hosts = [p[len("domain:"):].strip().lower() for p in together if p.startswith("domain:")]
        outside = UrlMatcher({"allow_domains": hosts, "block_private": False}, env)
    else:
        outside = _PrimaryGlob(together[0], outside_of=together)
    return _Once(outside)


def _some_matcher(kind: str | None, pattern: str, env: CompileEnv, *, allow: bool) -> Matcher:
    if kind == "shell":
        # Flag-aware and parsed: `rm -rf *` also catches `rm -fr /`, `sudo /bin/rm -R -f ~`.
        return ShellMatcher({"deny": [pattern]}, env)
    if kind in ("file.read", "file.write"):
        # Canonicalized like every path rule: `~`, `$HOME`, `..`, encodings, case, symlinks.
        text = pattern.strip()
        both = not allow and text.startswith("/") and not text.startswith("//")
        return PathMatcher({"deny": [pattern, "." + text] if both else [pattern]}, env)
    if kind == "http" and pattern.startswith("domain:"):
        host = pattern[len("domain:"):].strip().lower()
        if not host:
            raise ConfigError("domain: needs a host name", hint="e.g. WebFetch(domain:example.com)")
        return UrlMatcher({"deny_domains": [host], "block_private": False}, env)
    return _PrimaryGlob(pattern)


_PERMISSION = re.compile(r"^\s*([A-Za-z0-9_.*?\-\[\]{},!^]+)\s*(?:\((.*)\))?\s*$", re.S)


# Coding-agent tool names in permission strings stand for tool kinds, so that
# `Bash(rm -rf *)` also governs `run_shell_command`, `shell`, `bash` ...
_PERMISSION_KINDS = {
    "Bash": "shell", "Read": "file.read", "Write": "file.write", "Edit": "file.write",
    "MultiEdit": "file.write", "NotebookEdit": "file.write", "WebFetch": "http",
    "WebSearch": "search", "Glob": "file.read", "Grep": "file.read",
}


def permission_rules(raw: Any, effect_name: str, check: Checker, lines: Lines, order: int, *,
                     profiles: Mapping[str, ToolProfile] | None = None,
                     budget: PatternBudget | None = None,
                     env: CompileEnv | None = None) -> list[Rule]:
    """The rules of a ``deny:``/``ask:``/``allow:`` list of permission strings.

    ``profiles`` are the policy's ``tools:`` (a declared name is no slip, and its kind says
    how its pattern reads); ``budget`` counts the patterns compiled; ``env`` is the policy's
    (its workspace: where ``~`` and relative paths point, as for its rules).
    """
    env = env or CompileEnv()
    profiles = profiles or {}
    budget = budget or PatternBudget()
    path: Path_ = (effect_name,)
    if not isinstance(raw, list):
        check.error(path, "must be a list of tool names or permission strings",
                    'e.g. deny: ["Bash(rm -rf *)", "Read(~/.ssh/**)", "mcp__github__*"]')
        return []
    rules: list[Rule] = []
    # An allow string covers a call only together with the other allow strings of its tool:
    # `ls && git log` is allowed by Bash(ls *) and Bash(git log *) between them. That check
    # is made once for them all (``outsides``), and its patterns counted once.
    siblings: dict[str, list[str]] = {}
    outsides: dict[tuple[Any, ...], _Once] = {}
    for item in raw:
        m = _PERMISSION.match(item) if isinstance(item, str) else None
        if m is not None and m.group(2) is not None and m.group(2).strip() not in ("", "*"):
            siblings.setdefault(m.group(1), []).append(_as_meant(m.group(1), m.group(2)))
    for i, item in enumerate(raw):
        item_path = (*path, i)
        if not isinstance(item, str):
            check.error(item_path, "must be a string such as 'Bash(git push *)' or 'mcp__x__*'")
            continue
        m = _PERMISSION.match(item)
        if m is None:
            check.error(item_path, f"cannot read permission {item!r}",
                        "write ToolName, a glob like mcp__github__*, or ToolName(pattern)")
            continue
        name, pattern = m.group(1), m.group(2)
        slip = _name_slip(name, profiles)
        if slip is not None:
            check.error(item_path, *slip)
            continue
        kind = _PERMISSION_KINDS.get(name)
        whole = pattern is None or pattern.strip() in ("", "*")
        runtime = _GEMINI_CLASSES.get(name)  # ShellTool(...): the tool run_shell_command
        named = (name, runtime) if runtime else _server_tools(name) if whole else (name,)
        selector = Selector(kinds=(kind,)) if kind else Selector(tools=check.globs(
            named, item_path))
        conditions: list[tuple[str, Matcher]] = []
        if not whole:
            assert pattern is not None
            if kind is None and not is_glob(name):
                profile = tool_profile(runtime or name, profiles)
                if profile.primary_role is None:
                    check.error(item_path, f"{name}(...) has a pattern, but the tool {name!r} "
                                f"(kind {profile.kind!r}) has no argument a pattern can match",
                                _NO_PRIMARY_HINT if name in profiles else
                                f"declare its kind in tools: (e.g. tools: {{{name}: {{kind: "
                                "shell}}), or write a rule with 'args:' instead")
                    continue
                kind = profile.kind
            allowing = effect_name == "allow"
            text = _as_meant(name, pattern)
            together = (text, *(p for p in siblings.get(name, ()) if p != text))
            by_domain = _by_domain(kind, text)
            shared = (kind, by_domain, frozenset(together))
            outside = outsides.get(shared) if allowing else None
            cost = 1 + (len(together) if allowing and outside is None else 0)
            if not budget.take(cost):
                if budget.refuse():
                    check.error(item_path, f"the policy compiles more than {budget.limit:,} "
                                "patterns", budget.hint)
                continue
            try:
                if allowing and outside is None:
                    outside = outsides[shared] = outside_of(kind, by_domain, together, env)
                conditions.append(("pattern", compile_permission_pattern(
                    kind, text, allow=allowing, outside=outside, env=env)))
            except ConfigError as e:
                check.error(item_path, str(e), e.hint)
                continue
        rules.append(Rule(f"{effect_name}:{item}", effect=Effect(effect_name), selector=selector,
                          conditions=conditions, source=lines.source(item_path),
                          order=order + len(rules)))
    return rules


def _as_meant(name: str, pattern: str) -> str:
    """A permission string's pattern as the agent whose tool it names reads it: Gemini CLI
    reads its shell tool's as a prefix of whole words (run_shell_command(git) is `git` and
    every `git ...` command; `Bash(git)` is the command `git` alone)."""
    text = pattern.strip()
    if _GEMINI_CLASSES.get(name, name) == "run_shell_command" and not is_glob(text) \
            and not text.endswith(":*"):
        return text + ":*"
    return text


# Gemini CLI's configuration also names its tools by class (``excludeTools:
# ["ShellTool(rm -rf)"]``); the model calls them by these names.
_GEMINI_CLASSES = {
    "ShellTool": "run_shell_command", "ReadFileTool": "read_file", "WriteFileTool": "write_file",
    "EditTool": "replace", "GlobTool": "glob", "GrepTool": "search_file_content",
    "LSTool": "list_directory", "ReadManyFilesTool": "read_many_files",
    "WebFetchTool": "web_fetch", "WebSearchTool": "google_web_search",
    "MemoryTool": "save_memory",
}


def _server_tools(name: str) -> tuple[str, ...]:
    """The tool names a permission name covers: ``mcp__github``, an MCP server's name alone,
    is every tool of that server (``mcp__github__*``), as coding agents read it; any other
    name, itself."""
    server = name[len("mcp__"):] if name.startswith("mcp__") else ""
    if not server or "__" in server or is_glob(name):
        return (name,)
    return (name, f"{name}__*")


_NO_PRIMARY_HINT = ("a pattern matches a tool's command, path, url, recipient, amount, query or "
                    "code, as its kind says; for this kind write a rule with 'args:' instead")


def _name_slip(name: str, profiles: Mapping[str, ToolProfile]) -> tuple[str, str] | None:
    """``(message, hint)`` when a permission name looks like a slip for a built-in one."""
    if name in _PERMISSION_KINDS or name in profiles or is_glob(name):
        return None
    close = resembles(name, _PERMISSION_KINDS)
    if close is None:
        return None
    if close.lower() != name.lower() and (
            name in AGENT_TOOL_NAMES or default_profile(name).kind != "unknown"):
        return None  # a well-known tool of its own that happens to be two edits away
    kind = _PERMISSION_KINDS[close]
    return (f"unknown permission name {name!r}",
            f"did you mean '{close}'? ({close}(...) governs every {kind} tool); if {name!r} is "
            f"a tool of its own, declare it under tools: (e.g. tools: {{{name}: "
            f"{{kind: {kind}}}}})")
