"""The ``shell:`` rule condition: command deny/allow lists, structured rules, file access."""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from callwarden.analysis.detectors import DetectorSet
from callwarden.analysis.globs import GlobError, compile_glob, is_glob
from callwarden.analysis.paths import lexical_abs
from callwarden.analysis.shell._analysis import analyze_command
from callwarden.analysis.shell._model import CommandAnalysis, SimpleCommand
from callwarden.analysis.shell._parse import INSTALL_HINT, parser_available
from callwarden.analysis.shell._pattern import (
    CommandRule,
    PathGlobs,
    ShellPatternSet,
    canonical_flags,
)
from callwarden.conditions.base import (
    CompileEnv,
    ConfigError,
    Hit,
    Subject,
    config_str_list,
    register_condition,
)
from callwarden.conditions.paths import PathMatcher
from callwarden.conditions.urls import UrlMatcher

__all__ = ["ShellMatcher", "shell_analysis"]

_MEMO_KEY = "shell.analysis"
_HIT_VALUES = frozenset({"deny", "ask", "halt", "hit", "true", "yes"})
_PASS_VALUES = frozenset({"allow", "ignore", "false", "no", "none"})
_RULE_KEYS = frozenset({"program", "subcommand", "wrappers", "flags", "any_flags", "not_flags",
                        "args", "options", "line", "ignore_case", "id"})
_CONFIG_KEYS = ("deny", "allow", "rules", "reads", "writes", "read_paths", "write_paths",
                "urls", "secrets", "uploads", "deletes_outside", "empties", "reveals_env",
                "opaque", "parse_error", "home", "cwd")
# What a condition of deny patterns may say besides them and still be checked with others.
_GROUPABLE = frozenset({"deny", "parse_error", "opaque", "home", "cwd"})
# Programs that talk to a host named in their arguments.
_NETWORK = frozenset({"curl", "wget", "http", "https", "xh", "xhs", "aria2c", "nc", "ncat",
                      "netcat", "telnet", "socat"})
_HOST_FIRST = frozenset({"nc", "ncat", "netcat", "telnet"})
# Options whose value is sent to the host; ``@file`` / ``<file`` values send a file.
_SENT = ("data", "json", "form", "post-data", "body-data", "header", "user", "cookie",
         "oauth2-bearer")
_SENT_FILES = ("upload-file", "post-file", "body-file")
_HOSTISH = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[\w.-]*[.:][\w.:-]*|localhost)(?:[/?#].*)?\Z")
_DYNAMIC = re.compile(r"\$(?:[A-Za-z_]|\{|\()|`")
# A path known only at run time: a variable or substitution left in it, or xargs input.
_UNKNOWN_PATH = re.compile(r"\$|`|\x00")
# A path segment that selects every entry of its directory (``*``, ``.*``, ``*.*``, ``[!.]*``);
# ``**`` is what find selects below a directory (see CommandAnalysis.deletes).
_WILD_SEGMENT = re.compile(r"(?!.*\*\*)(?:\*|\?|\.|\[[^\]]*\])+\Z")


def shell_analysis(subject: Subject, *, home: str | None = None,
                   cwd: str | None = None) -> CommandAnalysis:
    """The analysis of the call's shell command, computed once per call (``subject.memo``).

    The command is the argument playing the ``command`` role. A list of strings (``["bash",
    "-lc", "..."]``) is read as argv; anything else that is not a string yields an analysis
    whose ``parse_error`` says why. The command runs where the ``cwd`` role says when the
    tool has one (Codex's ``workdir``, Gemini CLI's ``dir_path``): below ``cwd`` when it is
    relative, as after a ``cd`` to it.
    """
    key = _MEMO_KEY if home is None and cwd is None else f"{_MEMO_KEY}|{home}|{cwd}"
    memo = subject.memo
    cached = memo.get(key)
    if cached is None:
        workdir = subject.role("cwd")
        if workdir is None or type(workdir) is str:
            cached = analyze_command(subject.role("command"), home=home, cwd=_working_dir(
                workdir, home, cwd) if workdir else cwd)
        else:
            kind = "list" if isinstance(workdir, tuple) else type(workdir).__name__
            cached = CommandAnalysis(source="", home=home, cwd=cwd, parse_error=(
                f"the working directory is a {kind}, not a string"))
        memo[key] = cached
    return cached


def _working_dir(workdir: str, home: str | None, cwd: str | None) -> str:
    """The directory a command runs in when its tool names ``workdir`` (taken as written: the
    tool passes it to the process, no shell expands it)."""
    if home and (workdir == "~" or workdir.startswith("~/")):
        workdir = home + workdir[1:]
    if cwd and not workdir.startswith(("/", "~")):
        workdir = cwd.rstrip("/") + "/" + workdir
    normalized = posixpath.normpath(workdir)
    return "/" + normalized.lstrip("/") if normalized.startswith("//") else normalized


@register_condition("shell")
class ShellMatcher:
    """The ``shell:`` condition: holds when the call's command breaks the configured policy.

    Config (every key optional, at least one of the first five)::

        shell:
          deny: ["rm -r *", "mkfs *", "git push --force *", "curl * | {sh,bash}"]
          allow: ["git log *", "ls *"]     # a command matching none of these is a hit
          rules:                           # structured rules, for what patterns cannot say
            - {program: rm, flags: [r], args: ["/", "~", "..", "/*"]}
            - {program: git, subcommand: clean, flags: [f], not_flags: [dry-run]}
            - {program: psql, options: {c: ["*drop database*"]}, ignore_case: true}
          reads: ["~/.ssh/id_*", "!~/.ssh/*.pub", "**/.env"]   # files it must not read
          writes: ["~/.bashrc", "/etc/**", "/dev/tcp/**"]      # files it must not write
          read_paths: {sensitive: true}      # a paths: condition for every file it reads
          urls: {block_private: true}        # a urls: condition for hosts curl/wget/nc reach
          secrets: true                      # secrets in a network command's arguments
          uploads: ask        # curl/wget sending a file (-d @f, -T f) or $VARIABLE to a host
          write_paths: {deny: ["/usr/**"]}   # ... and for every file it writes
          deletes_outside: [".", "/tmp"]     # deleting or emptying anything not inside these
          empties: {allow: ["**/*.log"]}     # emptying a file these globs do not name
          reveals_env: ["*TOKEN*", "*SECRET*"]  # printing these variables, or the environment
          opaque: deny        # deny/ask/hit: what cannot be known statically is a hit
          parse_error: deny   # default: a command that cannot be parsed is a hit
          home: /home/dev     # what ~ and $HOME mean (default: left as ~)
          cwd: /home/dev/app  # where relative paths start (default: left relative)

    Patterns are flag-aware (see ``callwarden.analysis.shell.ShellPatternSet``): ``rm -r *`` catches
    ``rm -fr /``, ``/bin/rm -Rf /`` and ``sudo rm --recursive --force /tmp/x``. Every simple
    command is checked, including those nested in ``sh -c``, ``eval``, ``$(...)``, ``xargs``,
    ``find -exec``, wrappers and decoded payloads. Structured rules take ``program`` (name,
    glob or list) and optionally ``subcommand``, ``wrappers``, ``flags`` (all required),
    ``any_flags``, ``not_flags``, ``args`` (some operand matches a glob), ``options``
    (option -> value globs), ``line`` (globs over the whole command line), ``ignore_case``
    and ``id``. ``read_paths`` / ``write_paths`` take the config of the ``paths:`` condition
    and apply it to the files the command reads / writes (operands and redirections) with the
    same canonicalization as file tools (``~``, ``..``, case, symlinks, globs); a read also
    counts as a recursive read of everything below it (``grep -r x ~`` reads ``~/.ssh``).
    ``urls`` (a ``urls:`` config), ``secrets`` (``true`` or a ``secrets:`` config) and
    ``uploads`` apply to network programs (``curl``, ``wget``, ``nc`` ...): the URLs and hosts
    they reach, secrets in their arguments, and files or environment values they send
    (codes ``shell.url``, ``shell.secret``, ``shell.upload``).

    ``deletes_outside`` lists directories (``.`` is the workspace root, ``~`` the home): a
    command that deletes a path (``rm`` with or without ``-r``, ``find -delete``,
    ``rsync --delete``, ``shutil.rmtree`` in ``python -c`` ...) or empties a file that is not
    strictly inside one of them is a hit (``shell.deletes_outside``); so is a path known only
    at run time (``rm -rf "$DIR"``). ``/`` and the home directory are never such a directory
    (a workspace root there protects nothing). A glob whose last part selects everything
    (``build/*``) deletes its directory. ``empties`` (``true`` or ``{allow: [globs]}``) is a
    hit when a file the globs do not name is emptied in place (``truncate -s 0``, ``> f``,
    ``cp /dev/null f``: ``shell.empties``). ``reveals_env`` lists variable-name globs
    (case-insensitive): printing such a variable (``echo $GITHUB_TOKEN``, ``printenv X``,
    ``os.environ['X']`` in inline code) or the whole environment (``env``, ``export -p``) is
    a hit (``shell.reveals_env``); a listing filtered by ``grep TEXT`` is one when TEXT and
    a glob's name overlap (``env | grep -i token``, not ``env | grep -i python``). Other hit
    codes: ``shell.denied``, ``shell.not_allowed``, ``shell.opaque``, ``shell.parse_error``.
    """

    __slots__ = ("_allow", "_cwd", "_delete_roots", "_deny", "_empties", "_env", "_home",
                 "_home_dir", "_opaque", "_parse_error", "_read_paths", "_reads", "_root",
                 "_rules", "_secrets", "_uploads", "_urls", "_write_paths", "_writes",
                 "group_key")

    def __init__(self, config: Any, env: CompileEnv | None = None) -> None:
        env = env or CompileEnv()
        if not isinstance(config, Mapping):
            raise ConfigError("shell: expects a mapping such as {deny: ['rm -r *']}",
                              hint="e.g. shell: {deny: ['rm -r *', 'curl * | sh'], opaque: ask}")
        for key in config:
            if key not in _CONFIG_KEYS:
                raise ConfigError(f"unknown key {key!r}", key=str(key),
                                  hint="shell: accepts " + ", ".join(_CONFIG_KEYS))
        self._deny = _patterns(config, "deny")
        self._allow = _patterns(config, "allow")
        if self._allow is not None and self._allow.has_pipelines:
            raise ConfigError("allow patterns describe one command each, not pipelines",
                              key="allow", hint="list each command of the pipeline on its own")
        self._rules = _rules(config.get("rules"))
        self._reads = _paths(config, "reads")
        self._writes = _paths(config, "writes")
        self._read_paths = _files(config, "read_paths", env)
        self._write_paths = _files(config, "write_paths", env)
        self._urls = None if config.get("urls") is None else UrlMatcher(config["urls"], env)
        self._secrets = _secrets(config.get("secrets"))
        self._uploads = _switch(config, "uploads", default=False)
        self._opaque = _switch(config, "opaque", default=False)
        self._parse_error = _switch(config, "parse_error", default=True)
        self._home = _opt_str(config, "home", env.options.get("home"))
        self._cwd = _opt_str(config, "cwd", env.options.get("cwd"))
        # Where relative paths land when the policy names no working directory: the workspace
        # root (the process's directory when the policy has no ``workspace:``), as for paths:.
        self._root = lexical_abs(self._cwd or str(env.options.get("project_root") or os.getcwd()),
                                 str(env.base_dir))
        self._home_dir = self._home or os.path.expanduser("~")
        self._delete_roots = self._roots(config, "deletes_outside")
        self._empties = _empties(config)
        self._env = _env_names(config)
        if not any((self._deny, self._allow, self._rules, self._reads, self._writes,
                    self._read_paths, self._write_paths, self._urls, self._secrets,
                    self._uploads, self._delete_roots is not None, self._empties, self._env,
                    self._opaque)):
            raise ConfigError("shell: needs at least one of deny, allow, rules, reads, writes, "
                              "read_paths, write_paths, deletes_outside, empties, reveals_env "
                              "or opaque", hint="e.g. shell: {deny: ['rm -r *']}")
        if not parser_available():
            raise ConfigError("shell: cannot load the bash grammar", hint=INSTALL_HINT)
        #: The settings conditions of deny patterns alone share to be checked as one
        #: (``union``, as ``PathMatcher.group_key``); None for one that judges more.
        self.group_key: tuple[Any, ...] | None = None
        if self._deny is not None and _GROUPABLE.issuperset(config):
            self.group_key = ("shell", self._home, self._cwd, self._parse_error, self._opaque)

    @classmethod
    def union(cls, matchers: Sequence[ShellMatcher]) -> ShellMatcher:
        """One condition of every deny pattern of ``matchers`` (all of one ``group_key``): it
        finds nothing exactly when none of them would (a pattern set matches when one of its
        patterns matches a command; the switches are theirs)."""
        key = matchers[0].group_key
        if key is None or any(m.group_key != key for m in matchers):
            raise ValueError("only shell conditions of one group_key have a union")
        _, home, cwd, parse_error, opaque = key
        config: dict[str, Any] = {
            "deny": [p for m in matchers if m._deny is not None for p in m._deny.patterns],
            "parse_error": parse_error, "opaque": opaque}
        if home is not None:
            config["home"] = home
        if cwd is not None:
            config["cwd"] = cwd
        return cls(config)

    def _roots(self, config: Mapping[str, Any], key: str) -> tuple[str, ...] | None:
        values = config_str_list(config, key, nonempty=True, example="'.', /tmp")
        if values is None:
            return None
        roots = []
        for value in values:
            if is_glob(value) or "$" in value:
                raise ConfigError(f"{value!r} is not a directory (globs and variables are not "
                                  "allowed here)", key=key, hint=f"e.g. {key}: ['.', /tmp]")
            root = self._absolute(value)
            # "/" or the home directory as the workspace (an agent started there) would make
            # every delete a delete inside it: they are never roots to delete under.
            if root not in ("/", posixpath.normpath(self._home_dir)):
                roots.append(root)
        return tuple(roots)

    def _absolute(self, path: str) -> str:
        """A path of the analysis (or config) made absolute: ``~`` is the home directory,
        a relative path starts at the workspace root."""
        if path == "~" or path.startswith("~/"):
            path = self._home_dir + path[1:]
        return posixpath.normpath(posixpath.join(self._root, path)).replace("//", "/")

    def __call__(self, subject: Subject) -> Hit | None:
        """Returns a Hit when the call's command is denied, not allowed, opaque or unparseable."""
        return self.check(shell_analysis(subject, home=self._home, cwd=self._cwd))

    def check(self, analysis: CommandAnalysis) -> Hit | None:
        """Applies the condition to an analysis (what ``__call__`` does after analysing)."""
        if analysis.parse_error is not None and self._parse_error:
            return Hit(f"command cannot be analysed: {analysis.parse_error}",
                       code="shell.parse_error")
        if self._deny is not None:
            found = self._deny.match(analysis)
            if found is not None:
                return Hit(found.detail, code="shell.denied")
        if self._rules is not None:
            found = self._rules.match(analysis)
            if found is not None:
                return Hit(found.detail, code="shell.denied")
        if self._reads is not None:
            path = self._reads.first(analysis.reads, analysis.home)
            if path is not None:
                return Hit(f"reads {path[0]!r} (matches {path[1]!r})", code="shell.denied")
        if self._writes is not None:
            path = self._writes.first(analysis.writes, analysis.home)
            if path is not None:
                return Hit(f"writes {path[0]!r} (matches {path[1]!r})", code="shell.denied")
        if self._read_paths is not None or self._write_paths is not None:
            hit = _check_files(self._read_paths, self._write_paths, analysis)
            if hit is not None:
                return hit
        if self._urls is not None or self._secrets is not None or self._uploads:
            hit = self._check_network(analysis)
            if hit is not None:
                return hit
        if self._delete_roots is not None:
            hit = self._check_deletes(self._delete_roots, analysis)
            if hit is not None:
                return hit
        if self._empties is not None:
            for raw in analysis.empties:
                if not self._empties(self._absolute(raw), analysis.home or self._home_dir):
                    return Hit(f"empties {_shown(raw)}, destroying its content",
                               code="shell.empties")
        if self._env is not None:
            for name in analysis.environment:
                why = self._env(name)
                if why is not None:
                    return Hit(f"shows {why}", code="shell.reveals_env")
        if self._allow is not None:
            cmd = self._allow.first_not_allowed(analysis)
            if cmd is not None:
                shown = " ".join(cmd.text.split())[:160]
                return Hit(f"{shown!r} is not in the allow list", code="shell.not_allowed")
        if self._opaque and analysis.opaque:
            return Hit("cannot be known statically: " + "; ".join(analysis.opaque[:3]),
                       code="shell.opaque")
        return None

    def _check_network(self, analysis: CommandAnalysis) -> Hit | None:
        for cmd in analysis.commands:
            if cmd.program not in _NETWORK:
                continue
            if self._urls is not None:
                for target in _targets(cmd):
                    hit = self._urls.check_url(target)
                    if hit is not None:
                        return Hit(f"{cmd.program}: {hit.detail}", code="shell.url")
            if self._secrets is not None:
                found = self._secrets.scan("\n".join(cmd.argv[1:]))
                if found:
                    return Hit(f"{cmd.program} sends {found.summary()}", code="shell.secret")
            if self._uploads:
                sent = _uploaded(cmd)
                if sent is not None:
                    return Hit(f"{cmd.program} sends {sent} to another host",
                               code="shell.upload")
        return None


    def _check_deletes(self, roots: tuple[str, ...], analysis: CommandAnalysis) -> Hit | None:
        for raw in (*analysis.deletes, *analysis.empties):
            if _UNKNOWN_PATH.search(raw):
                return Hit(f"deletes or empties {_shown(raw)}, a path known only at run time",
                           code="shell.deletes_outside")
            path = self._absolute(raw)
            if not any(_strictly_inside(path, root) for root in roots):
                where = ", ".join(roots) or "the workspace (here / or the home directory)"
                shown = _shown(raw) if path == raw else f"{_shown(raw)} ({path})"
                return Hit(f"deletes or empties {shown}, which is not inside {where}",
                           code="shell.deletes_outside")
        return None


def _strictly_inside(path: str, root: str) -> bool:
    """Whether every path ``path`` (a glob maybe) can name lies strictly below ``root``; a
    last part selecting every entry (``dir/*``) stands for its directory."""
    segments = [s for s in path.split("/") if s]
    while segments and _WILD_SEGMENT.match(segments[-1]):
        segments.pop()
    base = [s for s in root.split("/") if s]
    if len(segments) <= len(base):
        return False
    return all(seg == part and not is_glob(seg) for seg, part in zip(segments, base, strict=False))


def _shown(raw: str) -> str:
    text = raw.replace("\x00unknown", "<input>")
    return repr(text if len(text) <= 120 else text[:117] + "...")


def _empties(config: Mapping[str, Any]) -> Callable[[str, str | None], bool] | None:
    """``empties: true`` (every emptied file is a hit) or ``{allow: [globs]}``; returns a test
    saying whether an emptied file is allowed."""
    value = config.get("empties")
    if value is None or value is False:
        return None
    if value is True:
        return lambda path, home: False
    if not isinstance(value, Mapping) or set(value) - {"allow"}:
        raise ConfigError("empties: expects true or {allow: [globs]}", key="empties",
                          hint="e.g. empties: {allow: ['**/*.log', '/tmp/**']}")
    globs = _paths(value, "allow")
    if globs is None:
        return lambda path, home: False
    return lambda path, home: globs.first([path], home) is not None


def _env_names(config: Mapping[str, Any]) -> Callable[[str], str | None] | None:
    """``reveals_env: [name globs]``: returns a test giving why a shown variable is a hit."""
    values = config_str_list(config, "reveals_env", nonempty=True,
                             example="'*TOKEN*', '*SECRET*'")
    if values is None:
        return None
    try:
        tests = [compile_glob(v.upper()) for v in values]
    except GlobError as e:
        raise ConfigError(f"invalid glob in reveals_env: {e}", key="reveals_env",
                          hint=e.hint) from e
    # The literal words of the globs: a grep filter overlapping one may show such a variable.
    words = [w for w in (re.sub(r"[*?]|\[[^\]]*\]|[{}]", " ", v.upper()).replace(",", " ")
                         for v in values) for w in w.split()]
    words = [w.strip("_") for w in words if w.strip("_")]

    def check(name: str) -> str | None:
        if name == "*":
            return "the whole environment"
        if len(name) > 2 and name.startswith("*") and name.endswith("*"):
            text = name[1:-1].upper().strip("_")
            if not text or any(text in w or w in text for w in words) \
                    or any(t(text) for t in tests):
                return f"environment variables matching {name[1:-1]!r}"
            return None
        return f"the variable {name}" if any(t(name.upper()) for t in tests) else None

    return check


def _files(config: Mapping[str, Any], key: str, env: CompileEnv) -> PathMatcher | None:
    value = config.get(key)
    if value is None:
        return None
    try:
        return PathMatcher(value, env)
    except ConfigError as e:
        raise ConfigError(f"{key}: {e}", key=key,
                          hint=f"e.g. {key}: {{sensitive: true, case_insensitive: true}}") from e


def _check_files(reads: PathMatcher | None, writes: PathMatcher | None,
                 analysis: CommandAnalysis) -> Hit | None:
    memo: dict[str, Any] = {}
    if reads is not None:
        for raw in analysis.reads:
            hit = reads.check_path(raw, memo=memo) or reads.check_tree(raw, memo=memo)
            if hit is not None:
                return Hit(f"reads {hit.detail}", code="shell.denied")
    if writes is not None:
        hit = writes.check_paths(analysis.writes, write=True, memo=memo)
        if hit is not None:
            return Hit(f"writes {hit.detail}", code="shell.denied")
    return None


def _targets(cmd: SimpleCommand) -> list[str]:
    """The URLs a network command reaches (a bare ``host/path`` is read as curl does)."""
    words = list(cmd.option_values("url"))
    positionals = [p for p in cmd.positionals if not _DYNAMIC.search(p)]
    words.extend(positionals[:1] if cmd.program in _HOST_FIRST else positionals)
    out: list[str] = []
    for word in words:
        if "://" in word:
            out.append(word)
        elif _HOSTISH.match(word) and not word.isdigit():
            out.append("http://" + word)
    return out


def _uploaded(cmd: SimpleCommand) -> str | None:
    """What a network command sends from the machine: a file, or a value from the environment."""
    for name in _SENT_FILES:
        for value in cmd.option_values(name):
            if value != "-":
                return f"the file {value!r}"
    for name in _SENT:
        for value in cmd.option_values(name):
            if _DYNAMIC.search(value):
                return f"a value from the environment ({value[:60]!r})"
            at = value.find("@") if name in ("data", "json") else value.find("=@")
            if (at == 0 or (name == "form" and at > 0)) and value[at:].lstrip("=@") not in ("-", ""):
                return f"the file {value[at:].lstrip('=@')!r}"
            if name == "form" and "=<" in value:
                return f"the file {value.split('=<', 1)[1]!r}"
    for word in cmd.positionals:
        if _DYNAMIC.search(word):
            return f"a value from the environment ({word[:60]!r})"
    return None


def _secrets(value: Any) -> DetectorSet | None:
    if value is None or value is False:
        return None
    from callwarden.conditions.content import SecretsMatcher  # the secrets: condition's own config

    try:
        return SecretsMatcher(value, CompileEnv())._detectors
    except ConfigError as e:
        raise ConfigError(f"secrets: {e}", key="secrets",
                          hint="e.g. secrets: true, or secrets: {detectors: [github, aws]}") from e


def _opt_str(config: Mapping[str, Any], key: str, default: Any) -> str | None:
    value = config.get(key, default)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{key} must be a path string", key=key)
    return value


def _switch(config: Mapping[str, Any], key: str, *, default: bool) -> bool:
    value = config.get(key)
    if value is None:
        return default
    text = str(value).lower()
    if value is True or text in _HIT_VALUES:
        return True
    if value is False or text in _PASS_VALUES:
        return False
    raise ConfigError(f"{key}: expected deny, ask, allow, true or false, not {value!r}", key=key,
                      hint=f"e.g. {key}: deny  (treat it as a hit) or {key}: allow")




def _patterns(config: Mapping[str, Any], key: str) -> ShellPatternSet | None:
    values = config_str_list(config, key, nonempty=True)
    if values is None:
        return None
    try:
        return ShellPatternSet.compile(values)
    except ValueError as e:
        raise ConfigError(str(e), key=key,
                          hint="patterns look like commands: 'rm -r *', 'curl * | sh'") from e


def _paths(config: Mapping[str, Any], key: str) -> PathGlobs | None:
    values = config_str_list(config, key, nonempty=True)
    if values is None:
        return None
    try:
        return PathGlobs(values)
    except GlobError as e:
        raise ConfigError(f"invalid glob in {key}: {e}", key=key, hint=e.hint) from e


def _rules(value: Any) -> ShellPatternSet | None:
    if value is None:
        return None
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise ConfigError("rules must be a list of mappings", key="rules",
                          hint="e.g. rules: [{program: rm, flags: [r], args: ['/']}]")
    return ShellPatternSet.from_rules(compile_structured(r, i) for i, r in enumerate(value))


def _names(rule: Mapping[str, Any], key: str, where: str) -> list[str]:
    value = rule.get(key)
    if value is None:
        return []
    if isinstance(value, str | int):
        value = [value]
    if not isinstance(value, Sequence) or not all(isinstance(v, str | int) for v in value):
        raise ConfigError(f"{key} must be a string or a list of strings", key=where)
    return [str(v) for v in value]


def compile_structured(rule: Any, index: int = 0) -> CommandRule:
    """Compiles one structured rule mapping (see ShellMatcher) into a CommandRule."""
    where = f"rules[{index}]"
    if not isinstance(rule, Mapping):
        raise ConfigError("each rule must be a mapping", key=where,
                          hint="e.g. {program: rm, flags: [r], args: ['/']}")
    unknown = set(rule) - _RULE_KEYS
    if unknown:
        raise ConfigError(f"unknown key {sorted(unknown)[0]!r}", key=where,
                          hint="rules accept " + ", ".join(sorted(_RULE_KEYS)))
    programs = _names(rule, "program", where)
    if not programs:
        raise ConfigError("a rule needs a program (a name, glob or list)", key=where)
    first = programs[0]
    subcommands = _names(rule, "subcommand", where)
    sub = subcommands[0] if len(subcommands) == 1 else None
    options: dict[str, list[str]] = {}
    raw_options = rule.get("options") or {}
    if not isinstance(raw_options, Mapping):
        raise ConfigError("options must map option names to value globs", key=where)
    for name, values in raw_options.items():
        (canonical,) = canonical_flags(first, [str(name)], sub)
        options[canonical] = _names({"v": values}, "v", where)
    label = str(rule.get("id") or _describe_rule(rule))
    return CommandRule(
        label=label,
        programs=programs,
        wrappers=_names(rule, "wrappers", where),
        subcommands=subcommands,
        flags=canonical_flags(first, _names(rule, "flags", where), sub),
        any_flags=canonical_flags(first, _names(rule, "any_flags", where), sub),
        not_flags=canonical_flags(first, _names(rule, "not_flags", where), sub),
        options=options,
        args=_names(rule, "args", where),
        line=_names(rule, "line", where),
        ignore_case=bool(rule.get("ignore_case", False)),
    )


def _describe_rule(rule: Mapping[str, Any]) -> str:
    parts = []
    for key in ("program", "subcommand", "flags", "any_flags", "args", "options", "line"):
        if key in rule:
            parts.append(f"{key}={rule[key]}")
    text = "rule(" + ", ".join(parts) + ")"
    return text if len(text) <= 120 else text[:117] + "..."
