"""The ``paths:`` rule condition: deny globs, the shipped sensitive list, allowed roots.

Every path argument is canonicalized (:mod:`callwarden.analysis.paths`) into every absolute
form a tool might open, and the condition holds when *any* form is denied or outside the
allowed roots. Globs are the one dialect of :mod:`callwarden.analysis.globs`.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from callwarden._profiles import ARG_ROLES, SideEffect, ToolProfile
from callwarden.analysis.globs import (
    GlobTable,
    compile_glob,
    expand_braces,
    glob_intersects,
    glob_to_regex,
    is_glob,
    literal_prefix,
)
from callwarden.analysis.paths import (
    ANY_HOMES,
    DRIVE_RE,
    MAX_PATHS_PER_CALL,
    CanonicalPath,
    PathCanonicalizer,
    collapse_plain,
    folds_case,
    lexical_abs,
    load_sensitive_globs,
    resolve_physical,
)
from callwarden.conditions.base import (
    CompileEnv,
    Hit,
    Subject,
    config_bool,
    config_str_list,
    register_condition,
)
from callwarden.exceptions import ConfigError

__all__ = ["PathMatcher"]

_CACHE_SIZE = 4096


# Argument names that often hold a second path (move/copy/diff tools), besides the "path" role.
_EXTRA_PATH_ARGS = ("paths", "files", "source", "destination", "src", "dst", "dest",
                    "old_path", "new_path", "source_path", "destination_path", "target_path",
                    "include")


# Arguments that make a file-read tool a content search over the tree under its path.
_SEARCH_ARGS = ("pattern", "regex", "query")


# Arguments that may carry a patch in the apply_patch format (Codex: "command", "input").
_PATCH_ARGS = ("patch", "input", "command")


_PATCH_FILE_RE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$",
                            re.M)


# Kinds whose "source" / "target" arguments are not paths.
_NON_FILE_KINDS = frozenset({"code", "shell", "http", "email", "message", "sql", "payment",
                             "search"})


@register_condition("paths")
class PathMatcher:
    """The ``paths:`` condition: deny globs, a shipped sensitive list, allowed roots.

    Config keys: ``deny`` (globs), ``allow_roots``, ``read_roots`` (extra roots for reads
    only), ``sensitive`` (bool), ``callwarden_files`` (``all``/``true``: callwarden's own
    files as the policy names them; ``private``: all but the policy and its list files),
    ``root``, ``home``, ``case_insensitive``, ``resolve_symlinks`` (default true),
    ``fs_root``, ``glob_dotfiles``, ``passwd``, ``args`` (argument names to check besides the
    tool's path argument). Hits carry the code ``path.denied``, ``path.sensitive``,
    ``path.outside_root`` or ``path.invalid``.
    """

    __slots__ = ("_arg_set", "_args", "_cache", "_canon", "_case", "_deny", "_deny_globs",
                 "_fs_root", "_glob_dot", "_memo_head", "_read_roots", "_resolve", "_roots",
                 "_sensitive", "_sensitive_anchored", "_tree", "_tree_cache", "group_key")

    def __init__(self, config: Any, env: CompileEnv | None = None) -> None:
        env = env or CompileEnv()
        if not isinstance(config, Mapping):
            raise ConfigError("paths: expects a mapping such as {deny: ['~/.ssh/**']}")
        known = {"deny", "allow_roots", "read_roots", "sensitive", "root", "home",
                 "case_insensitive", "resolve_symlinks", "fs_root", "glob_dotfiles", "passwd",
                 "args", "callwarden_files"}
        for key in config:
            if key not in known:
                raise ConfigError(f"unknown key {key!r}", key=str(key),
                                  hint="paths: accepts " + ", ".join(sorted(known)))
        deny = config_str_list(config, "deny", example="'~/.ssh/**'")
        allow_roots = config_str_list(config, "allow_roots", example="'~/.ssh/**'")
        read_roots = config_str_list(config, "read_roots", example="'~/.ssh/**'")
        sensitive = config_bool(config, "sensitive", False)
        own = config.get("callwarden_files", False)
        if own not in (True, False, "all", "private"):
            raise ConfigError("callwarden_files must be all (or true), private or false",
                              key="callwarden_files",
                              hint="all: the policy, its lists, stores, logs and key; private: "
                                   "all but the policy and list files")
        if own:
            # callwarden's own files as the policy names them (policyfile.ownfiles).
            option = "callwarden_private_files" if own == "private" else "callwarden_files"
            deny = [*(deny or []), *env.options.get(option, ())]
        if not deny and allow_roots is None and not sensitive:
            raise ConfigError("paths: needs at least one of deny, allow_roots, sensitive or "
                              "callwarden_files",
                              hint="e.g. paths: {deny: ['~/.ssh/**'], allow_roots: ['.']}")
        self._resolve = config_bool(config, "resolve_symlinks", True)
        self._glob_dot = config_bool(config, "glob_dotfiles", False)
        root = _opt_str(config, "root") or str(env.options.get("project_root") or os.getcwd())
        root = lexical_abs(root, str(env.base_dir))
        home = _opt_str(config, "home") or str(env.options.get("home") or os.path.expanduser("~"))
        fs_root = _opt_str(config, "fs_root")
        self._fs_root = lexical_abs(fs_root, str(env.base_dir)) if fs_root else None
        # Unless the policy says, as the filesystem does: where it folds case (macOS, Windows)
        # ~/.SSH/id_rsa is ~/.ssh/id_rsa, and a deny of ~/.ssh/** must catch it.
        if "case_insensitive" in config:
            self._case = config_bool(config, "case_insensitive", False)
        else:
            self._case = folds_case(self._fs_root) if self._fs_root else \
                folds_case(root) or folds_case(home)
        # The per-call memo's key for where a path really leads is this and the path.
        self._memo_head = "callwarden.paths.physical:" + (self._fs_root or "") + ":"
        passwd = config_bool(config, "passwd", False)
        self._canon = PathCanonicalizer(root=root, home=home, passwd=passwd)
        args = config_str_list(config, "args", example="'~/.ssh/**'")
        # Extra path arguments by their order: a call's few arguments are looked up in it.
        self._args: dict[str, int] = {name: i for i, name in enumerate(
            tuple(args) if args is not None else _EXTRA_PATH_ARGS)}
        self._arg_set = frozenset(self._args)
        self._deny = self._globset(deny or [], "deny", any_home=False)
        self._sensitive = (self._globset(load_sensitive_globs(), "sensitive", any_home=True)
                           if sensitive else None)
        # The sensitive locations anchored at a directory (~/.ssh/**, /etc/shadow), without
        # the file names sensitive at any depth (*.pem, .env): see _check_form.
        self._sensitive_anchored = (
            self._globset([g for g in load_sensitive_globs()
                           if g.startswith("!") or not self._any_depth(g)],
                          "sensitive", any_home=True) if sensitive else None)
        self._roots = None if allow_roots is None else self._root_list(allow_roots, "allow_roots")
        self._read_roots = self._root_list(read_roots or [], "read_roots")
        self._cache: dict[tuple[str, bool], tuple[CanonicalPath, Hit | None]] = {}
        self._tree = _TreeGlobs(self._deny, self._sensitive, self._case)
        self._tree_cache: dict[str, Hit | None] = {}
        self._deny_globs = tuple(deny or ())
        #: The settings matchers of deny globs alone share to be checked as one (``union``);
        #: None for one that judges more than its globs (sensitive locations, allowed roots)
        #: or exempts some (``!``: an exemption would reach the others' globs too).
        self.group_key: tuple[Any, ...] | None = None
        if deny and not sensitive and allow_roots is None and read_roots is None and \
                not any(glob.startswith("!") for glob in deny):
            self.group_key = ("paths", root, home, self._fs_root, self._case, self._resolve,
                              self._glob_dot, passwd, tuple(self._args))

    @classmethod
    def union(cls, matchers: Sequence[PathMatcher]) -> PathMatcher:
        """One matcher of every deny glob of ``matchers`` (all of one ``group_key``): it finds
        nothing exactly when none of them would, so rules holding only these conditions can
        be passed over together once it has found nothing (``engine.index``)."""
        key = matchers[0].group_key
        if key is None or any(m.group_key != key for m in matchers):
            raise ValueError("only path conditions of one group_key have a union")
        _, root, home, fs_root, case, resolve, glob_dot, passwd, args = key
        config: dict[str, Any] = {
            "deny": list(matchers[0]._deny_globs), "root": root, "home": home,
            "case_insensitive": case, "resolve_symlinks": resolve, "glob_dotfiles": glob_dot,
            "passwd": passwd, "args": list(args)}
        if fs_root is not None:
            config["fs_root"] = fs_root
        union = cls(config)
        # Their globs as they compiled them (with the forms their links had then), not
        # compiled again: the union finds what they find, whatever changed on disk since.
        union._deny = GlobTable([(glob, text, False) for m in matchers
                                 for glob, text in m._deny.globs], case_insensitive=case)
        union._deny_globs = tuple(glob for m in matchers for glob in m._deny_globs)
        union._tree = _TreeGlobs(union._deny, None, case)
        return union

    # ---------------------------------------------------------------- compile helpers

    def _globset(self, globs: Sequence[str], key: str, *, any_home: bool) -> GlobTable:
        patterns: list[tuple[str, str, bool]] = []
        for i, text in enumerate(globs):
            negate = text.startswith("!")
            body = text[1:] if negate else text
            try:
                forms = self._glob_forms(body, any_home=any_home)
            except ValueError as e:
                raise ConfigError(f"{text!r}: {e}", key=f"{key}[{i}]") from e
            patterns.extend((form, text, negate) for form in forms)
        try:
            return GlobTable(patterns, case_insensitive=self._case)
        except (ValueError, re.error) as e:
            raise ConfigError(f"invalid glob: {e}", key=key) from e

    def _glob_forms(self, glob: str, *, any_home: bool) -> list[str]:
        glob = glob.strip().replace("\\", "/")
        if not glob:
            raise ValueError("empty glob")
        canon = self._canon
        if glob == "~" or glob.startswith("~/"):
            rest = glob[1:]
            bases = [canon.home, *(ANY_HOMES if any_home else ())]
            forms = [b + rest for b in bases]
        elif glob.startswith(("/", "~", "$", "%")) or DRIVE_RE.match(glob):
            forms = [canon.absolute(glob)[0]]
        elif "/" not in glob.rstrip("/") and not glob.startswith("**"):
            forms = ["/**/" + glob]
        elif glob.startswith("**"):
            forms = ["/" + glob]
        else:
            forms = [canon.root + "/" + glob]
        out: list[str] = []
        for form in forms:
            form = collapse_plain(form) if "/." in form or "//" in form else form
            out.append(form)
            if self._resolve:
                # A link target may name the real directory behind a symlinked home.
                prefix = literal_prefix(form)
                real = _resolved_at_load(prefix, self._fs_root) if prefix != "/" else None
                if real and real != prefix and not _one_process(real):
                    out.append(real.rstrip("/") + form[len(prefix):])
        return out

    def _any_depth(self, glob: str) -> bool:
        """Whether a glob names files at any depth (``*.pem``, ``.env``, ``**/.git/config``)."""
        return all(form.startswith("/**/") for form in self._glob_forms(glob, any_home=False))

    def _root_list(self, roots: Sequence[str], key: str) -> tuple[str, ...]:
        out: list[str] = []
        for i, text in enumerate(roots):
            canon = self._canon(text)
            if canon.error or canon.is_glob:
                raise ConfigError(f"{text!r} is not a usable directory: "
                                  f"{canon.error or 'globs are not allowed here'}",
                                  key=f"{key}[{i}]")
            forms = [canon.path]
            if self._resolve:
                real = _resolved_at_load(canon.path, self._fs_root)
                if real and real != canon.path:
                    forms.append(real)
            for form in forms:
                form = form.lower() if self._case else form
                out.append("/" if form == "/" else form.rstrip("/") + "/")
        return tuple(out)

    # ---------------------------------------------------------------- per call

    def __call__(self, subject: Subject) -> Hit | None:
        """Checks the tool's path argument(s) and the usual extra path arguments."""
        args = subject.call.args
        profile = subject.profile
        memo = subject.memo
        value, write, search = memo.get(_REQUEST) or _request(subject)
        if value is not None:
            hit = self.check_path(value, write=write, memo=memo) if type(value) is str \
                else self._check_value(value, write, memo, strict=True)
            if hit is not None:
                return hit
        if search is not None:
            kind, target = search
            if kind == "tree":
                hit = self.check_tree(target, memo=memo)
            else:  # a file glob: one reading of it, or (an anchored one) two
                for glob in (target,) if kind == "path" else target:
                    hit = self.check_path(glob, memo=memo)
                    if hit is not None:
                        break
            if hit is not None:
                return hit
        if profile.kind in _NON_FILE_KINDS:
            return None
        if value is None and write:
            hit = self._check_patch(args, memo)
            if hit is not None:
                return hit
        if self._arg_set.isdisjoint(args):
            return None  # no extra path argument (the common case, kept short)
        names = [name for name in args if name in self._args]
        if len(names) > 1:
            names.sort(key=self._args.__getitem__)
        for name in names:
            extra = args.get(name)
            if extra is not None and extra is not value:
                hit = self._check_value(extra, write, memo, strict=False)
                if hit is not None:
                    return hit
        return None

    def check_tree(self, raw: Any, *, memo: dict[str, Any] | None = None) -> Hit | None:
        """Checks a recursive read of ``raw`` (``grep -r``, ``tar c``, ``cp -r``, a search tool).

        A hit when a denied or sensitive location anchored at a directory lies *under* ``raw``
        (``~`` holds ``~/.ssh``, ``/etc`` holds ``/etc/shadow``). Names that are sensitive at
        any depth (``**/.env``) do not count, so searching a project stays allowed; ``raw``
        itself is not judged here (``check_path`` does that).
        """
        if not isinstance(raw, str):
            return Hit(f"path argument is a {type(raw).__name__}, not a string",
                       code="path.invalid")
        if not self._tree:
            return None
        if raw in self._tree_cache:
            lexical = self._tree_cache[raw]
        else:
            canon = self._canon(raw)
            lexical = None
            if canon.error is None:
                for form in canon.variants:
                    lexical = self._tree.hit(raw, form, self._case or canon.nocase)
                    if lexical is not None:
                        break
            if len(self._tree_cache) >= _CACHE_SIZE:
                del self._tree_cache[next(iter(self._tree_cache))]
            self._tree_cache[raw] = lexical
        if lexical is not None or not self._resolve:
            return lexical
        canon = self._canon(raw)
        for joined in canon.joined[:2]:
            src = literal_prefix(joined) if canon.is_glob else joined
            real = resolve_physical(src, self._fs_root)
            if real is None or real == src:
                continue
            real = real.rstrip("/") + joined[len(src):] if canon.is_glob else real
            hit = self._tree.hit(raw, real, self._case or canon.nocase)
            if hit is not None:
                return hit
        return None

    def _check_patch(self, args: Mapping[str, Any], memo: dict[str, Any]) -> Hit | None:
        """The files an ``apply_patch`` patch adds, updates, deletes or moves to are writes."""
        for name in _PATCH_ARGS:
            text = args.get(name)
            if isinstance(text, str) and "*** " in text:
                files = [a or b for a, b in _PATCH_FILE_RE.findall(text)]
                if files:
                    return self.check_paths(files, write=True, memo=memo)
        return None

    def check_paths(self, paths: Iterable[str], *, write: bool = False,
                    memo: dict[str, Any] | None = None) -> Hit | None:
        """Checks raw path strings (e.g. the files a shell command reads or writes).

        Args:
            paths: path strings as the tool would receive them (globs allowed).
            write: the paths are written, so ``read_roots`` do not apply.
            memo: a per-call memo (``subject.memo``) to share symlink resolutions.

        Returns:
            The first Hit, or None when every path passes.
        """
        for count, raw in enumerate(paths):
            if count >= MAX_PATHS_PER_CALL:
                return Hit(f"more than {MAX_PATHS_PER_CALL} paths in one call",
                           code="path.invalid")
            hit = self.check_path(raw, write=write, memo=memo)
            if hit is not None:
                return hit
        return None

    def check_path(self, raw: Any, *, write: bool = False,
                   memo: dict[str, Any] | None = None) -> Hit | None:
        """Checks one raw path string; a non-string is a ``path.invalid`` hit."""
        if not isinstance(raw, str):
            return Hit(f"path argument is a {type(raw).__name__}, not a string",
                       code="path.invalid")
        key = (raw, write)
        cached = self._cache.get(key)
        if cached is None:
            canon = self._canon(raw)
            cached = (canon, self._check_lexical(canon, write))
            if len(self._cache) >= _CACHE_SIZE:
                del self._cache[next(iter(self._cache))]
            self._cache[key] = cached
        canon, hit = cached
        if hit is not None or not self._resolve:
            return hit
        return self._check_physical(canon, write, memo)

    def _check_value(self, value: Any, write: bool, memo: dict[str, Any],
                     *, strict: bool) -> Hit | None:
        if isinstance(value, str):
            return self.check_path(value, write=write, memo=memo)
        if isinstance(value, list | tuple):
            items = [v for v in value if strict or isinstance(v, str)]
            return self.check_paths(items, write=write, memo=memo)
        if isinstance(value, Mapping):
            # e.g. {"path": ...} objects inside a list of edits
            for role_name in ("path", "file_path", "source", "destination"):
                if role_name in value:
                    hit = self._check_value(value[role_name], write, memo, strict=strict)
                    if hit is not None:
                        return hit
            return None
        if strict:
            return Hit(f"path argument is a {type(value).__name__}, not a string",
                       code="path.invalid")
        return None

    def _check_lexical(self, canon: CanonicalPath, write: bool) -> Hit | None:
        if canon.error is not None:
            return Hit(f"{_show(canon.raw)}: {canon.error}", code="path.invalid")
        nocase = self._case or canon.nocase
        for form in canon.variants:
            hit = self._check_form(canon.raw, form, write, nocase, canon.is_glob)
            if hit is not None:
                return hit
        return None

    def _check_physical(self, canon: CanonicalPath, write: bool,
                        memo: dict[str, Any] | None) -> Hit | None:
        nocase = self._case or canon.nocase
        joined_forms = canon.joined
        for joined in joined_forms if len(joined_forms) < 3 else joined_forms[:2]:
            src = literal_prefix(joined) if canon.is_glob else joined
            key = self._memo_head + src
            if memo is not None and key in memo:
                real = memo[key]
            else:
                real = resolve_physical(src, self._fs_root)
                if memo is not None:
                    memo[key] = real
            if real is None:
                continue
            if canon.is_glob:
                real = real.rstrip("/") + joined[len(src):]
            if real in canon.variants:
                continue
            hit = self._check_form(canon.raw, real, write, nocase, canon.is_glob)
            if hit is not None:
                return hit
        return None

    def _check_form(self, raw: str, form: str, write: bool, nocase: bool,
                    is_glob: bool) -> Hit | None:
        shown = _show(raw)
        glob = self._deny.match(form, nocase)
        if glob is None and is_glob:
            glob = self._deny.intersects(form, nocase, self._glob_dot)
        if glob is not None:
            return Hit(f"{shown} resolves to {form}, which matches the denied pattern {glob}",
                       code="path.denied")
        if self._sensitive is not None:
            glob = self._sensitive.match(form, nocase)
            if glob is None and is_glob:
                # A glob selecting every file of a directory (``tests/**``, ``src/*``) is judged
                # by the sensitive locations it reaches, not by the file types that could be
                # anywhere (a *.pem fixture): ``*.pem`` or ``config/*.key`` still are.
                table = self._sensitive if _names_files(form) else self._sensitive_anchored
                assert table is not None
                glob = table.intersects(form, nocase, self._glob_dot)
            if glob is not None:
                return Hit(f"{shown} resolves to {form}, a sensitive location ({glob})",
                           code="path.sensitive")
        if self._roots is not None:
            probe = literal_prefix(form) if is_glob else form
            probe = probe.lower() if (nocase or self._case) else probe
            probe = probe.rstrip("/") + "/"
            if not _under(probe, self._roots) and (write or not _under(probe, self._read_roots)):
                roots = ", ".join(r.rstrip("/") or "/" for r in self._roots)
                return Hit(f"{shown} resolves to {form}, outside the allowed roots ({roots})",
                           code="path.outside_root")
        return None


class _TreeGlobs:
    """The anchored deny and sensitive globs, for asking "does anything under D match?"."""

    __slots__ = ("_entries",)

    def __init__(self, deny: GlobTable, sensitive: GlobTable | None, case: bool) -> None:
        entries: list[tuple[list[str], re.Pattern[str], str, str]] = []
        for code, globset in (("path.denied", deny), ("path.sensitive", sensitive)):
            if globset is None:
                continue
            for glob, text in globset.globs:
                if glob.startswith("/**"):
                    continue  # any-depth names: every project tree holds some
                for alt in expand_braces(glob):
                    alt = alt.lower() if case else alt
                    flags = re.DOTALL | (re.IGNORECASE if case else 0)
                    entries.append((alt.split("/")[1:], re.compile(glob_to_regex(alt), flags),
                                    text, code))
        self._entries = entries

    def __bool__(self) -> bool:
        return bool(self._entries)

    def hit(self, raw: str, form: str, nocase: bool) -> Hit | None:
        probe = form.lower() if nocase else form
        segs = [s for s in probe.split("/") if s]
        literal = not is_glob(probe)
        for pat_segs, regex, text, code in self._entries:
            if _segments_below(segs, pat_segs, literal, probe):
                if regex.fullmatch(probe) or regex.fullmatch(probe.rstrip("/") + "/"):
                    continue  # the path itself: check_path's verdict (e.g. an exempt .pub)
                what = "a sensitive location" if code == "path.sensitive" else "a denied path"
                return Hit(f"{_show(raw)} resolves to {form}, a directory holding {what} "
                           f"({text}); reading it recursively reads that too", code=code)
        return None


def _segments_below(segs: list[str], pat: list[str], literal: bool, probe: str) -> bool:
    """Whether some path under the directory ``segs`` can match the glob split into ``pat``."""
    for i, seg in enumerate(segs):
        if i >= len(pat):
            return False
        p = pat[i]
        if "**" in p:
            glob = "/" + "/".join(pat)
            return glob_intersects(probe.rstrip("/") + "/**", glob)
        if literal:
            if p != seg and not (is_glob(p) and compile_glob(p)(seg)):
                return False
        elif not glob_intersects(seg, p):
            return False
    return len(pat) > len(segs)


_WILDCARD_ONLY = re.compile(r"(?:\*|\?|\[[^\]]*\])+\Z")


def _one_process(real: str) -> bool:
    """Whether a resolved path is one process's folder in procfs (``/proc/self`` and
    ``/proc/thread-self`` lead to ``/proc/PID``, ``/proc/PID/task/TID``): the process that loads
    the policy, not the agent's tool (a hook or the service decides in a process of its own),
    so a glob gets no form naming it. The glob's own form still matches the link's name, and a
    path reached through it matches ``/proc/*/...`` globs as every process's files do."""
    return real.startswith("/proc/") and real[6:].partition("/")[0].isdigit()


def _names_files(glob: str) -> bool:
    """Whether a glob's last part says which files it means (``*.pem``), not just "all"."""
    return not _WILDCARD_ONLY.match(glob.rstrip("/").rpartition("/")[2])


def _under(probe: str, roots: tuple[str, ...]) -> bool:
    return any(probe.startswith(root) for root in roots)


_REQUEST = "callwarden.paths.request"


def _request(subject: Subject) -> tuple[Any, bool, tuple[str, Any] | None]:
    """What every path condition reads of a call, worked out once per call: the path
    argument, whether the tool writes, and what a search tool reads besides its path:
    ``("path", glob)`` for a file glob, ``("tree", base)`` for a content search below it.
    ripgrep-style globs without a "/" match at any depth below the search path. A glob that
    starts at ``/`` or ``~`` is read both ways, ``("paths", (below the path, as written))``:
    ripgrep anchors ``/x`` at the search path, a Glob tool (fast-glob, Python's glob) reads
    it from the filesystem's root, and ``~/.ssh/*`` there lists the home's ``.ssh``."""
    found = subject.memo.get(_REQUEST)
    if found is None:
        profile = subject.profile
        args = subject.call.args
        value = profile.get(args, "path")
        search = None
        reads = profile.kind == "file.read"
        if reads and _may_search(profile, args):
            base = value if isinstance(value, str) and value else "."
            glob = profile.get(args, "glob")
            if isinstance(glob, str) and glob:
                rel = glob if "/" in glob.lstrip("/") else "**/" + glob.lstrip("/")
                below = base.rstrip("/") + "/" + rel
                search = ("paths", (below, glob)) if glob.startswith(("/", "~")) \
                    else ("path", below)
            elif any(isinstance(args.get(k), str) for k in _SEARCH_ARGS):
                search = ("tree", base)
        # A read tool never writes; another writes unless its side effect says it only reads.
        write = not reads and profile.side_effect not in _NO_WRITES
        found = subject.memo[_REQUEST] = (value, write, search)
    return found


# Side effects of a tool that writes nothing (a module constant: an enum member read from its
# class is a slow attribute lookup on Python 3.11).
_NO_WRITES = (SideEffect.READ, SideEffect.NONE)


def _may_search(profile: ToolProfile, args: Mapping[str, Any]) -> bool:
    """Whether a read's arguments can make it a search: one holds its glob (the names
    ``profile.get`` reads for the role) or a content-search pattern."""
    declared = profile.args.get("glob")
    if declared is not None and declared in args:
        return True
    if declared is None and not _GLOB_NAMES.isdisjoint(args):
        return True
    return not _SEARCH_NAMES.isdisjoint(args)


_GLOB_NAMES = frozenset(ARG_ROLES.get("glob", ("glob",)))
_SEARCH_NAMES = frozenset(_SEARCH_ARGS)


def _show(raw: str) -> str:
    return repr(raw if len(raw) <= 120 else raw[:117] + "...")


def _opt_str(config: Mapping[str, Any], key: str) -> str | None:
    value = config.get(key)
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"{key} must be a string (a directory)", key=key)
    return value


# Where the policy's own directories really are, as found while policies load: a policy
# names the same few (/home, /Users, ~/.ssh ...) hundreds of times, and loading is a snapshot
# of the file system anyway, so an answer a moment old is as good as a new one.
_LOAD_TIME_RESOLVED: dict[tuple[str, str | None], tuple[float, str | None]] = {}
_LOAD_TIME_VALID = 2.0  # seconds


def _resolved_at_load(path: str, fs_root: str | None) -> str | None:
    key = (path, fs_root)
    now = time.monotonic()
    found = _LOAD_TIME_RESOLVED.get(key)
    if found is not None and now - found[0] < _LOAD_TIME_VALID:
        return found[1]
    if len(_LOAD_TIME_RESOLVED) > 4096:
        _LOAD_TIME_RESOLVED.clear()
    real = resolve_physical(path, fs_root)
    _LOAD_TIME_RESOLVED[key] = (now, real)
    return real
