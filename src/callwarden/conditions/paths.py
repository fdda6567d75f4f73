"""Path canonicalization and the ``paths:`` rule condition.

A path argument is turned into every absolute form a tool might open: ``~`` / ``~user`` /
``$HOME`` / ``%USERPROFILE%`` expanded, percent-encoding (double and overlong UTF-8 too)
decoded, fullwidth characters NFKC-folded, ``\\`` read as ``/``, ``file://`` and Windows drive
and namespace prefixes stripped, ``.`` / ``..`` / ``//`` collapsed against the project root,
``/proc/self/root`` and ``/proc/self/cwd`` followed, and, when asked, symlinks resolved on the
real filesystem. A deny glob or root check that fails on *any* form is a hit: an attacker
only needs one reading to be the one the tool uses.

The lexical work is a pure function of the string and is cached; symlink resolution is not
cached, because a link can be created between two calls.
"""

from __future__ import annotations

import fnmatch
import itertools
import os
import re
import stat
import sys
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources
from typing import Any

from callwarden._profiles import SideEffect, ToolProfile
from callwarden.conditions.base import (
    CompileEnv,
    ConfigError,
    Hit,
    Subject,
    config_bool,
    config_str_list,
    register_condition,
)
from callwarden.exceptions import CallwardenError

__all__ = [
    "CanonicalPath",
    "GlobSet",
    "PathCanonicalizer",
    "PathMatcher",
    "canonical_path",
    "glob_intersects",
    "glob_literal_prefix",
    "glob_to_regex",
    "has_glob_chars",
    "load_sensitive_globs",
    "resolve_physical",
]

MAX_PATH_CHARS = 4096 * 4
MAX_PATHS_PER_CALL = 1024
_CACHE_SIZE = 4096
_DECODE_ROUNDS = 3

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

_PCT_RE = re.compile(r"%[0-9A-Fa-f]{2}|%u[0-9A-Fa-f]{4}")
_IIS_RE = re.compile(r"%u([0-9A-Fa-f]{4})")
# Overlong UTF-8 (``%c0%ae`` is ".") is invalid, yet some decoders accept it.
_OVERLONG_RE = re.compile(
    rb"[\xc0\xc1][\x80-\xbf]|\xe0[\x80-\x9f][\x80-\xbf]|\xf0[\x80-\x8f][\x80-\xbf][\x80-\xbf]"
)
_VAR_RE = re.compile(
    r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-=?+])[^}]*)?\}|([A-Za-z_][A-Za-z0-9_]*))"
)
_WINVAR_RE = re.compile(r"%([A-Za-z_][A-Za-z0-9_()]*)%")
_DRIVE_RE = re.compile(r"^[A-Za-z]:")
_WIN_TRAILER_RE = re.compile(r"[^/][. ]+(?:/|$)|:")


@dataclass(frozen=True, slots=True)
class CanonicalPath:
    """Every absolute form of one path argument.

    Attributes:
        raw: the argument as given.
        path: the primary canonical form (absolute, no ``.``/``..``/``//``); ``""`` on error.
        variants: every lexical form to check, ``path`` first (decoded, Windows-trimmed ...).
        joined: absolute forms before ``..`` collapsing, for resolving symlinks physically.
        is_glob: the argument contains glob characters (``*``, ``?``, ``[``).
        nocase: the argument is a Windows path, so it is matched case-insensitively.
        physical: where the path really lands after resolving symlinks (when asked), else None.
        error: why the path cannot be analysed (unresolved variable, too long ...), else None.
    """

    raw: str
    path: str
    variants: tuple[str, ...] = ()
    joined: tuple[str, ...] = ()
    is_glob: bool = False
    nocase: bool = False
    physical: tuple[str, ...] = ()
    error: str | None = None


class _Unresolved(CallwardenError, ValueError):
    pass


def _decode_once(text: str) -> str:
    if "%u" in text or "%U" in text:
        text = _IIS_RE.sub(lambda m: chr(int(m.group(1), 16)), text)
    raw = _unquote_bytes(text)
    if _OVERLONG_RE.search(raw):
        raw = _OVERLONG_RE.sub(_fold_overlong, raw)
    return raw.decode("utf-8", "surrogateescape")


def _unquote_bytes(text: str) -> bytes:
    parts = text.encode("utf-8", "surrogateescape").split(b"%")
    out = [parts[0]]
    for part in parts[1:]:
        try:
            out.append(bytes((int(part[:2], 16),)) + part[2:])
        except ValueError:
            out.append(b"%" + part)
    return b"".join(out)


def _fold_overlong(m: re.Match[bytes]) -> bytes:
    b = m.group(0)
    if len(b) == 2:
        cp = ((b[0] & 0x1F) << 6) | (b[1] & 0x3F)
    elif len(b) == 3:
        cp = ((b[0] & 0x0F) << 12) | ((b[1] & 0x3F) << 6) | (b[2] & 0x3F)
    else:
        cp = ((b[0] & 0x07) << 18) | ((b[1] & 0x3F) << 12) | ((b[2] & 0x3F) << 6) | (b[3] & 0x3F)
    return chr(cp).encode("utf-8", "surrogatepass")


class PathCanonicalizer:
    """Turns path strings into CanonicalPath objects for one root and home, with an LRU cache.

    Args:
        root: the project root; relative paths are relative to it (absolute, canonical).
        home: the home directory ``~`` and ``$HOME`` stand for.
        passwd: look ``~user`` up in the password database instead of assuming ``/home/user``.
        cache_size: how many canonicalized strings to keep.
    """

    __slots__ = ("_cache", "_cache_size", "_home_name", "_root_segs", "_vars", "home",
                 "passwd", "root")

    def __init__(self, *, root: str, home: str, passwd: bool = False,
                 cache_size: int = _CACHE_SIZE) -> None:
        self.root = _lexical_abs(root, "/")
        self.home = _lexical_abs(home, "/")
        self.passwd = passwd
        self._root_segs = [s for s in self.root.split("/") if s]
        self._home_name = self.home.rstrip("/").rsplit("/", 1)[-1] or "root"
        self._cache: dict[str, CanonicalPath] = {}
        self._cache_size = cache_size
        h = self.home
        self._vars: dict[str, str] = {
            "HOME": h, "USERPROFILE": h, "PWD": self.root, "USER": self._home_name,
            "LOGNAME": self._home_name, "XDG_CONFIG_HOME": h + "/.config",
            "XDG_DATA_HOME": h + "/.local/share", "XDG_STATE_HOME": h + "/.local/state",
            "XDG_CACHE_HOME": h + "/.cache", "TMPDIR": "/tmp", "TMP": "/tmp", "TEMP": "/tmp",
            "HOMEPATH": h, "APPDATA": h + "/AppData/Roaming",
            "LOCALAPPDATA": h + "/AppData/Local", "HOMEDRIVE": "", "SYSTEMDRIVE": "",
            "SYSTEMROOT": "/Windows", "WINDIR": "/Windows", "CD": self.root,
        }

    def __call__(self, raw: str) -> CanonicalPath:
        """Returns the canonical forms of ``raw`` (cached)."""
        cache = self._cache
        hit = cache.get(raw)
        if hit is not None:
            # Move to the end: least recently used entries leave first.
            del cache[raw]
            cache[raw] = hit
            return hit
        result = self._compute(raw)
        if len(cache) >= self._cache_size:
            del cache[next(iter(cache))]
        cache[raw] = result
        return result

    def expand_user(self, text: str) -> str:
        """Expands a leading ``~``, ``~user`` or ``~+`` (raises ValueError for ``~-``)."""
        if not text.startswith("~"):
            return text
        head, sep, rest = text[1:].partition("/")
        if head == "":
            base = self.home
        elif head == "+":
            base = self.root
        elif head == "-":
            raise _Unresolved("'~-' (the previous directory) cannot be known")
        else:
            base = self.user_home(head)
        return base.rstrip("/") + "/" + rest if sep else base

    def user_home(self, name: str) -> str:
        """Returns the home directory of user ``name``."""
        if name == self._home_name:
            return self.home
        if self.passwd:
            import pwd

            try:
                return pwd.getpwnam(name).pw_dir
            except KeyError:
                pass
        return "/root" if name == "root" else "/home/" + name

    def _compute(self, raw: str) -> CanonicalPath:
        if len(raw) > MAX_PATH_CHARS:
            return CanonicalPath(raw, "", error=f"path is longer than {MAX_PATH_CHARS} characters")
        text = raw
        if "%" in text:
            text = _WINVAR_RE.sub(self._win_var, text)
        forms = [text]
        if "%" in text:
            for _ in range(_DECODE_ROUNDS):
                decoded = _decode_once(forms[-1])
                if decoded == forms[-1]:
                    break
                forms.append(decoded)
        variants: list[str] = []
        joined_forms: list[str] = []
        nocase = False
        try:
            for form in forms:
                joined, is_win = self._absolute(form)
                nocase = nocase or is_win
                if joined not in joined_forms:
                    joined_forms.append(joined)
                for variant in self._normalized(joined):
                    if variant not in variants:
                        variants.append(variant)
        except _Unresolved as e:
            return CanonicalPath(raw, "", error=str(e))
        if not variants:
            return CanonicalPath(raw, "", error="path is empty")
        is_glob = any(has_glob_chars(v) for v in variants)
        return CanonicalPath(raw, variants[0], tuple(variants), tuple(joined_forms), is_glob,
                             nocase)

    def _win_var(self, m: re.Match[str]) -> str:
        value = self._vars.get(m.group(1).upper())
        return m.group(0) if value is None else value

    def _absolute(self, text: str) -> tuple[str, bool]:
        """One form -> an absolute, not yet normalized path, and whether it is a Windows path."""
        if "\x00" in text:
            # C-level tools stop at the first NUL.
            text = text.partition("\x00")[0]
        if not text.isascii():
            text = unicodedata.normalize("NFKC", text)
        text = text.strip("\t\n\r\x0b\x0c")
        if not text:
            raise _Unresolved("path is empty")
        if text[:5].lower() == "file:":
            text = text[5:]
            if text.startswith("//"):
                host, _, rest = text[2:].partition("/")
                if host.lower() not in ("", "localhost"):
                    rest = host + "/" + rest
                text = "/" + rest
        if "\\" in text:
            text = text.replace("\\", "/")
        windows = False
        if text.startswith(("//?/", "//./")):
            text = text[4:]
            windows = True
            if text[:4].upper() == "UNC/":
                text = "//" + text[4:]
        if _DRIVE_RE.match(text):
            windows = True
            text = "/" + text[2:].lstrip("/")
            head = text[1:7].lower()
            if head == "users/":
                # C:\Users\<name>\... is that user's home.
                name, _, rest = text[7:].partition("/")
                text = self.user_home(name) + ("/" + rest if rest else "")
        if "$" in text:
            text = self._expand_vars(text)
        if text.startswith("~"):
            text = self.expand_user(text)
        if not text.startswith("/"):
            text = self.root + "/" + text
        return text, windows

    def _expand_vars(self, text: str) -> str:
        def sub(m: re.Match[str]) -> str:
            name = m.group(1) or m.group(3)
            value = self._vars.get(name)
            if value is not None:
                return value
            start = m.start()
            if start == 0 or text[start - 1] == "/":
                raise _Unresolved(f"the variable ${name} cannot be resolved statically")
            # Mid-segment '$' is an ordinary character ("Outer$Inner.class").
            return m.group(0)

        return _VAR_RE.sub(sub, text)

    def _normalized(self, joined: str) -> list[str]:
        primary = self._collapse(joined, False)
        if _WIN_TRAILER_RE.search(primary):
            # Windows drops trailing dots and spaces and reads "name::$DATA" as "name".
            trimmed = self._collapse(joined, True)
            if trimmed != primary:
                return [primary, trimmed]
        return [primary]

    def _collapse(self, joined: str, windows_trim: bool) -> str:
        segs: list[str] = []
        for seg in joined.split("/"):
            if windows_trim and seg not in (".", ".."):
                seg = seg.partition(":")[0].rstrip(". ")
            if not seg or seg == ".":
                continue
            if seg == "..":
                if segs:
                    segs.pop()
                continue
            segs.append(seg)
            if len(segs) == 3 and segs[0] == "proc" and segs[1] in ("self", "thread-self"):
                # Magic links: /proc/self/root is "/", /proc/self/cwd is the working directory.
                if segs[2] == "root":
                    segs.clear()
                elif segs[2] == "cwd":
                    segs[:] = self._root_segs
        return "/" + "/".join(segs)


def _lexical_abs(path: str, base: str) -> str:
    path = os.path.expanduser(path) if path.startswith("~") else path
    return os.path.normpath(os.path.join(base, path)).replace("//", "/")


# --------------------------------------------------------------------------- globs
#
# A glob is compiled twice: to a regex, to match concrete paths fast, and to a small NFA, to
# decide whether two globs can match a common path (an argument that is itself a glob, such as
# `/home/dev/.kube/*`, is denied when it can reach a denied file).

_Charset = tuple[bool, frozenset[str], tuple[tuple[str, str], ...]]  # (negated, chars, ranges)
_Token = tuple[Any, ...]
_NFA = tuple[list[list[tuple[_Charset | None, int]]], int]

_CS_NOSLASH: _Charset = (True, frozenset("/"), ())
_CS_NODOT: _Charset = (True, frozenset("/."), ())
_MAX_BRACE_EXPANSIONS = 256


def has_glob_chars(text: str) -> bool:
    """True when ``text`` contains ``*``, ``?`` or ``[``."""
    return "*" in text or "?" in text or "[" in text


def glob_literal_prefix(glob: str) -> str:
    """The directory part of ``glob`` before its first wildcard (``/a/b`` for ``/a/b/*.py``)."""
    cut = len(glob)
    for ch in "*?[":
        i = glob.find(ch)
        if i != -1 and i < cut:
            cut = i
    if cut == len(glob):
        return glob
    return glob[: glob.rfind("/", 0, cut)] or "/"


def _expand_braces(pattern: str) -> list[str]:
    start = pattern.find("{")
    while start != -1:
        depth = 0
        commas: list[int] = []
        for j in range(start, len(pattern)):
            ch = pattern[j]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    if not commas:
                        break
                    bounds = [start, *commas, j]
                    head, tail = pattern[:start], pattern[j + 1:]
                    out: list[str] = []
                    for a, b in itertools.pairwise(bounds):
                        for rest in _expand_braces(head + pattern[a + 1:b] + tail):
                            out.append(rest)
                            if len(out) > _MAX_BRACE_EXPANSIONS:
                                raise ValueError("too many {a,b} alternatives")
                    return out
            elif ch == "," and depth == 1:
                commas.append(j)
        start = pattern.find("{", start + 1)
    return [pattern]


def _tokenize(glob: str) -> list[_Token]:
    tokens: list[_Token] = []
    i, n = 0, len(glob)
    while i < n:
        ch = glob[i]
        if ch == "*":
            j = i
            while j < n and glob[j] == "*":
                j += 1
            whole = j - i >= 2 and (i == 0 or glob[i - 1] == "/") and (j == n or glob[j] == "/")
            tokens.append(("**",) if whole else ("*",))
            i = j
        elif ch == "?":
            tokens.append(("?",))
            i += 1
        elif ch == "[":
            j = i + 1
            negated = j < n and glob[j] in "!^"
            if negated:
                j += 1
            close = glob.find("]", j + 1 if j < n and glob[j] == "]" else j)
            if close == -1:
                tokens.append(("l", ch))
                i += 1
                continue
            body = glob[j:close]
            chars: set[str] = set()
            ranges: list[tuple[str, str]] = []
            k = 0
            while k < len(body):
                if k + 2 < len(body) and body[k + 1] == "-":
                    ranges.append((body[k], body[k + 2]))
                    k += 3
                else:
                    chars.add(body[k])
                    k += 1
            tokens.append(("[", negated, frozenset(chars), tuple(ranges)))
            i = close + 1
        else:
            tokens.append(("l", ch))
            i += 1
    return tokens


def _class_regex(token: _Token) -> str:
    _, negated, chars, ranges = token
    parts = [re.escape(c) for c in sorted(chars)]
    parts += [f"{re.escape(a)}-{re.escape(b)}" for a, b in ranges]
    if negated:
        return "[^/" + "".join(parts) + "]"
    return "(?!/)[" + "".join(parts) + "]"


def _glob_atoms(glob: str) -> list[list[str]]:
    """Regex atoms of each ``{a,b}`` alternative of a glob (one atom per glob token)."""
    out: list[list[str]] = []
    for alt in _expand_braces(glob):
        tokens = _tokenize(alt)
        parts: list[str] = []
        k = 0
        while k < len(tokens):
            token = tokens[k]
            kind = token[0]
            if kind == "l":
                parts.append(re.escape(token[1]))
            elif kind == "?":
                parts.append("[^/]")
            elif kind == "*":
                parts.append("[^/]*")
            elif kind == "[":
                parts.append(_class_regex(token))
            elif k + 1 < len(tokens):
                parts.append("(?:.*/)?")
                k += 1
            else:
                if parts and parts[-1] == "/":
                    parts.pop()
                parts.append("(?:/.*)?")
            k += 1
        out.append(parts)
    return out


def glob_to_regex(glob: str) -> str:
    """Translates one glob into a regex for ``fullmatch``.

    ``*`` and ``?`` stay within a segment; a whole-segment ``**`` spans any number of
    segments, including none, so ``/a/**`` also matches ``/a`` itself.
    """
    out = ["".join(atoms) for atoms in _glob_atoms(glob)]
    return out[0] if len(out) == 1 else "(?:" + "|".join(out) + ")"


def _trie_regex(entries: Iterable[tuple[list[str], int]]) -> str:
    """One regex for many globs, their common prefixes shared, so that a path is compared
    with each distinct next character once instead of once per glob. The empty group
    ``(?P<gN>)`` at the end of glob N tells which one matched (``match.lastgroup``)."""
    trie: dict[str, Any] = {}
    for atoms, index in entries:
        node = trie
        for atom in atoms:
            node = node.setdefault(atom, {})
        node.setdefault("", index)

    def emit(node: dict[str, Any]) -> str:
        parts = [f"(?P<g{child}>)" if atom == "" else atom + emit(child)
                 for atom, child in node.items()]
        return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"

    return emit(trie) if trie else r"(?!)"


def _glob_nfa(glob: str, dot_rule: bool) -> _NFA:
    trans: list[list[tuple[_Charset | None, int]]] = [[]]

    def new() -> int:
        trans.append([])
        return len(trans) - 1

    start_states = []
    accepts = []
    for alt in _expand_braces(glob):
        tokens = _tokenize(alt)
        cur = new()
        start_states.append(cur)
        seg_start = True
        before_slash: int | None = None
        k = 0
        while k < len(tokens):
            token = tokens[k]
            kind = token[0]
            first = _CS_NODOT if dot_rule and seg_start else _CS_NOSLASH
            if kind == "l":
                nxt = new()
                trans[cur].append(((False, frozenset(token[1]), ()), nxt))
                if token[1] == "/":
                    before_slash = cur
                cur, seg_start = nxt, token[1] == "/"
            elif kind in ("?", "["):
                nxt = new()
                if kind == "[":
                    negated, chars = token[1], token[2]
                    cs: _Charset = (negated, chars | {"/"} if negated else chars - {"/"},
                                    token[3])
                else:
                    cs = first
                trans[cur].append((cs, nxt))
                cur, seg_start = nxt, False
            elif kind == "*":
                loop, end = new(), new()
                trans[cur] += [(None, end), (first, loop)]
                trans[loop] += [(_CS_NOSLASH, loop), (None, end)]
                cur, seg_start = end, False
            else:
                seg_first = _CS_NODOT if dot_rule else _CS_NOSLASH
                loop, end = new(), new()
                slash: _Charset = (False, frozenset("/"), ())
                trans[cur].append((seg_first, loop))
                trans[loop] += [(_CS_NOSLASH, loop), (slash, cur)]
                if k + 1 < len(tokens):
                    trans[cur].append((None, end))
                    k += 1
                    seg_start = True
                else:
                    trans[loop].append((None, end))
                    if before_slash is not None:
                        trans[before_slash].append((None, end))
                cur = end
            k += 1
        accepts.append(cur)
    accept = new()
    trans[0] += [(None, s) for s in start_states]
    for a in accepts:
        trans[a].append((None, accept))
    return trans, accept


def _cs_has(cs: _Charset, ch: str) -> bool:
    negated, chars, ranges = cs
    inside = ch in chars or any(a <= ch <= b for a, b in ranges)
    return inside != negated


def _cs_meet(a: _Charset, b: _Charset) -> bool:
    if a[0] and b[0]:
        return True  # two complements of finite sets always share a character
    if a[0]:
        a, b = b, a
    if any(_cs_has(b, ch) for ch in a[1]):
        return True
    for lo, hi in a[2]:
        if ord(hi) - ord(lo) > 512:
            return True
        if any(_cs_has(b, chr(c)) for c in range(ord(lo), ord(hi) + 1)):
            return True
    return False


def _nfa_intersect(left: _NFA, right: _NFA) -> bool:
    ta, acc_a = left
    tb, acc_b = right
    seen: set[tuple[int, int]] = set()
    stack = [(0, 0)]
    while stack:
        pair = stack.pop()
        if pair in seen:
            continue
        seen.add(pair)
        sa, sb = pair
        if sa == acc_a and sb == acc_b:
            return True
        out_a, out_b = ta[sa], tb[sb]
        for cs, t in out_a:
            if cs is None:
                stack.append((t, sb))
        for cs, t in out_b:
            if cs is None:
                stack.append((sa, t))
        for ca, t1 in out_a:
            if ca is None:
                continue
            for cb, t2 in out_b:
                if cb is not None and _cs_meet(ca, cb):
                    stack.append((t1, t2))
    return False


def glob_intersects(left: str, right: str, *, dotfiles: bool = True) -> bool:
    """True when some path matches both globs.

    Args:
        left: the glob a tool was given (an argument).
        right: a policy glob.
        dotfiles: whether wildcards in ``left`` match names starting with ``.`` (shells and
            glob libraries skip them by default; a policy glob always matches them).
    """
    return _nfa_intersect(_glob_nfa(left, not dotfiles), _glob_nfa(right, False))


class GlobSet:
    """A compiled set of absolute globs, with ``!`` exemptions, matched in one pass.

    Args:
        patterns: ``(absolute glob, text to report, is_exemption)`` triples.
        case_insensitive: fold case for every match.
    """

    __slots__ = ("_basenames", "_basenames_lower", "_case", "_exempt", "_nfas", "_patterns",
                 "_regex", "_regex_nocase", "_texts")

    def __init__(self, patterns: Iterable[tuple[str, str, bool]], *,
                 case_insensitive: bool = False) -> None:
        self._case = case_insensitive
        self._basenames: dict[str, str] = {}
        self._basenames_lower: dict[str, str] = {}
        self._patterns: list[tuple[str, str]] = []
        exempt: list[str] = []
        texts: list[str] = []
        entries: list[tuple[list[str], int]] = []
        for glob, text, negate in patterns:
            if negate:
                exempt.append(glob_to_regex(glob))
                continue
            self._patterns.append((glob, text))
            name = glob[4:] if glob.startswith("/**/") else None
            if name and "/" not in name and not has_glob_chars(name) and "{" not in name:
                # "**/name" is a dict lookup on the last segment, not a regex scan.
                self._basenames.setdefault(name.lower() if case_insensitive else name, text)
                self._basenames_lower.setdefault(name.lower(), text)
                continue
            entries.extend((atoms, len(texts)) for atoms in _glob_atoms(glob))
            texts.append(text)
        self._texts = texts
        source = _trie_regex(entries)
        flags = re.IGNORECASE | re.DOTALL if case_insensitive else re.DOTALL
        self._regex = re.compile(source, flags)
        self._regex_nocase = (self._regex if case_insensitive
                              else re.compile(source, re.IGNORECASE | re.DOTALL))
        exempt_src = "|".join(exempt)
        self._exempt = (re.compile(exempt_src, flags) if exempt else None,
                        re.compile(exempt_src, re.IGNORECASE | re.DOTALL) if exempt else None)
        self._nfas: dict[bool, list[tuple[_NFA, str]]] = {}

    def match(self, path: str, nocase: bool = False) -> str | None:
        """Returns the text of a glob matching ``path`` (absolute, canonical), or None."""
        nocase = nocase or self._case
        text: str | None = None
        if self._basenames:
            base = path[path.rfind("/") + 1:]
            text = (self._basenames_lower.get(base.lower()) if nocase
                    else self._basenames.get(base))
        if text is None:
            m = (self._regex_nocase if nocase else self._regex).fullmatch(path)
            if m is None:
                return None
            text = self._texts[int((m.lastgroup or "g0")[1:])]
        exempt = self._exempt[1 if nocase else 0]
        if exempt is not None and exempt.fullmatch(path):
            return None
        return text

    def intersects(self, glob: str, nocase: bool = False, dotfiles: bool = False) -> str | None:
        """Returns the text of a glob that can match a path ``glob`` also matches, or None."""
        nocase = nocase or self._case
        nfas = self._nfas.get(nocase)
        if nfas is None:
            nfas = [(_glob_nfa(g.lower() if nocase else g, False), t) for g, t in self._patterns]
            self._nfas[nocase] = nfas
        mine = _glob_nfa(glob.lower() if nocase else glob, not dotfiles)
        for nfa, text in nfas:
            if _nfa_intersect(mine, nfa):
                return text
        return None


# --------------------------------------------------------------------------- symlinks

_O_PATH = getattr(os, "O_PATH", 0)
_FAST_RESOLVE = bool(_O_PATH) and sys.platform.startswith("linux") and os.path.isdir(
    "/proc/self/fd")
_MAX_LINKS = 40


def resolve_physical(path: str, fs_root: str | None = None) -> str | None:
    """Returns where ``path`` really lands after following every symlink, or None if unknown.

    Missing trailing components are kept as written (a file about to be created), so the
    result is defined for new files too. ``fs_root`` makes the walk treat that directory as
    ``/`` (a container's root filesystem, a test fixture); absolute link targets stay inside it.
    """
    if fs_root is None and _FAST_RESOLVE:
        return _resolve_kernel(path)
    return _resolve_walk(path, (fs_root or "").rstrip("/"))


def _resolve_kernel(path: str) -> str | None:
    # One open(O_PATH) lets the kernel do the whole walk (symlinks and '..' physically), and
    # /proc/self/fd tells where it ended: three syscalls however deep the path is.
    suffix = ""
    current = path
    for _ in range(_MAX_LINKS + 256):
        try:
            fd = os.open(current, _O_PATH | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            try:
                target = os.readlink(current)
            except OSError:
                target = None
            if target is not None:
                # A dangling link: writing to it creates the target.
                parent = current.rsplit("/", 1)[0] or "/"
                current = target if target.startswith("/") else parent + "/" + target
                continue
            head, _, tail = current.rpartition("/")
            if not tail and not head:
                return None
            suffix = "/" + tail + suffix
            current = head or "/"
            continue
        except OSError:
            return None
        try:
            real = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return None
        finally:
            os.close(fd)
        if not suffix:
            return real
        return _collapse_plain(real.rstrip("/") + suffix)
    return None


def _resolve_walk(path: str, fs_root: str) -> str | None:
    pending = [s for s in reversed(path.split("/")) if s]
    stack: list[str] = []
    links = 0
    missing = False
    while pending:
        seg = pending.pop()
        if seg == ".":
            continue
        if seg == "..":
            if stack:
                stack.pop()
            continue
        if missing:
            stack.append(seg)
            continue
        real = fs_root + "/" + "/".join([*stack, seg])
        try:
            mode = os.lstat(real).st_mode
        except OSError:
            missing = True
            stack.append(seg)
            continue
        if stat.S_ISLNK(mode):
            links += 1
            if links > _MAX_LINKS:
                return None
            try:
                target = os.readlink(real)
            except OSError:
                return None
            if target.startswith("/"):
                stack = []
            pending.extend(s for s in reversed(target.split("/")) if s)
            continue
        stack.append(seg)
    return "/" + "/".join(stack)


def _collapse_plain(path: str) -> str:
    segs: list[str] = []
    for seg in path.split("/"):
        if not seg or seg == ".":
            continue
        if seg == "..":
            if segs:
                segs.pop()
            continue
        segs.append(seg)
    return "/" + "/".join(segs)


# --------------------------------------------------------------------------- public helpers


@lru_cache(maxsize=32)
def _canonicalizer(root: str, home: str) -> PathCanonicalizer:
    return PathCanonicalizer(root=root, home=home)


def canonical_path(raw: str, *, root: str | None = None, home: str | None = None,
                   resolve_symlinks: bool = False, case_insensitive: bool = False,
                   fs_root: str | None = None) -> CanonicalPath:
    """Canonicalizes one path string (cached per root and home).

    Args:
        raw: the path as a tool would receive it.
        root: the project root relative paths are relative to (default: the working directory).
        home: what ``~`` and ``$HOME`` mean (default: ``$HOME``).
        resolve_symlinks: also fill ``physical`` by following symlinks on the filesystem.
        case_insensitive: fold every form to lower case (a case-insensitive filesystem).
        fs_root: resolve symlinks as if this directory were ``/``.
    """
    canon = _canonicalizer(root or os.getcwd(), home or os.path.expanduser("~"))(raw)
    if canon.error is None and resolve_symlinks:
        phys = tuple(p for p in (resolve_physical(j, fs_root) for j in canon.joined) if p)
        canon = replace(canon, physical=phys)
    if case_insensitive and canon.error is None:
        canon = replace(canon, path=canon.path.lower(),
                        variants=tuple(v.lower() for v in canon.variants),
                        physical=tuple(p.lower() for p in canon.physical))
    return canon


def load_sensitive_globs() -> list[str]:
    """Returns the shipped sensitive-path globs (``!`` lines are exemptions)."""
    text = resources.files("callwarden").joinpath("data/sensitive_paths.txt").read_text("utf-8")
    return [s for s in (line.strip() for line in text.splitlines()) if s and not s.startswith("#")]


# --------------------------------------------------------------------------- the condition

_ANY_HOMES = ("/root", "/home/*", "/Users/*", "/var/root")


@register_condition("paths")
class PathMatcher:
    """The ``paths:`` condition: deny globs, a shipped sensitive list, allowed roots.

    Config keys: ``deny`` (globs), ``allow_roots``, ``read_roots`` (extra roots for reads
    only), ``sensitive`` (bool), ``root``, ``home``, ``case_insensitive``, ``resolve_symlinks``
    (default true), ``fs_root``, ``glob_dotfiles``, ``passwd``, ``args`` (argument names to check
    besides the tool's path argument). Hits carry the code ``path.denied``, ``path.sensitive``,
    ``path.outside_root`` or ``path.invalid``.
    """

    __slots__ = ("_args", "_cache", "_canon", "_case", "_deny", "_fs_root", "_glob_dot",
                 "_read_roots", "_resolve", "_roots", "_sensitive", "_tree", "_tree_cache")

    def __init__(self, config: Any, env: CompileEnv | None = None) -> None:
        env = env or CompileEnv()
        if not isinstance(config, Mapping):
            raise ConfigError("paths: expects a mapping such as {deny: ['~/.ssh/**']}")
        known = {"deny", "allow_roots", "read_roots", "sensitive", "root", "home",
                 "case_insensitive", "resolve_symlinks", "fs_root", "glob_dotfiles", "passwd",
                 "args"}
        for key in config:
            if key not in known:
                raise ConfigError(f"unknown key {key!r}", key=str(key),
                                  hint="paths: accepts " + ", ".join(sorted(known)))
        deny = config_str_list(config, "deny", example="'~/.ssh/**'")
        allow_roots = config_str_list(config, "allow_roots", example="'~/.ssh/**'")
        read_roots = config_str_list(config, "read_roots", example="'~/.ssh/**'")
        sensitive = config_bool(config, "sensitive", False)
        if not deny and allow_roots is None and not sensitive:
            raise ConfigError("paths: needs at least one of deny, allow_roots or sensitive",
                              hint="e.g. paths: {deny: ['~/.ssh/**'], allow_roots: ['.']}")
        self._case = config_bool(config, "case_insensitive", False)
        self._resolve = config_bool(config, "resolve_symlinks", True)
        self._glob_dot = config_bool(config, "glob_dotfiles", False)
        root = _opt_str(config, "root") or str(env.options.get("project_root") or os.getcwd())
        root = _lexical_abs(root, str(env.base_dir))
        home = _opt_str(config, "home") or str(env.options.get("home") or os.path.expanduser("~"))
        fs_root = _opt_str(config, "fs_root")
        self._fs_root = _lexical_abs(fs_root, str(env.base_dir)) if fs_root else None
        self._canon = PathCanonicalizer(root=root, home=home,
                                        passwd=config_bool(config, "passwd", False))
        args = config_str_list(config, "args", example="'~/.ssh/**'")
        self._args: tuple[str, ...] = tuple(args) if args is not None else _EXTRA_PATH_ARGS
        self._deny = self._globset(deny or [], "deny", any_home=False)
        self._sensitive = (self._globset(load_sensitive_globs(), "sensitive", any_home=True)
                           if sensitive else None)
        self._roots = None if allow_roots is None else self._root_list(allow_roots, "allow_roots")
        self._read_roots = self._root_list(read_roots or [], "read_roots")
        self._cache: dict[tuple[str, bool], tuple[CanonicalPath, Hit | None]] = {}
        self._tree = _TreeGlobs(self._deny, self._sensitive, self._case)
        self._tree_cache: dict[str, Hit | None] = {}

    # ---------------------------------------------------------------- compile helpers

    def _globset(self, globs: Sequence[str], key: str, *, any_home: bool) -> GlobSet:
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
            return GlobSet(patterns, case_insensitive=self._case)
        except (ValueError, re.error) as e:
            raise ConfigError(f"invalid glob: {e}", key=key) from e

    def _glob_forms(self, glob: str, *, any_home: bool) -> list[str]:
        glob = glob.strip().replace("\\", "/")
        if not glob:
            raise ValueError("empty glob")
        canon = self._canon
        if glob == "~" or glob.startswith("~/"):
            rest = glob[1:]
            bases = [canon.home, *(_ANY_HOMES if any_home else ())]
            forms = [b + rest for b in bases]
        elif glob.startswith(("/", "~", "$", "%")) or _DRIVE_RE.match(glob):
            forms = [canon._absolute(glob)[0]]
        elif "/" not in glob.rstrip("/") and not glob.startswith("**"):
            forms = ["/**/" + glob]
        elif glob.startswith("**"):
            forms = ["/" + glob]
        else:
            forms = [canon.root + "/" + glob]
        out: list[str] = []
        for form in forms:
            form = _collapse_plain(form) if "/." in form or "//" in form else form
            out.append(form)
            if self._resolve:
                # A link target may name the real directory behind a symlinked home.
                prefix = glob_literal_prefix(form)
                real = resolve_physical(prefix, self._fs_root) if prefix != "/" else None
                if real and real != prefix:
                    out.append(real.rstrip("/") + form[len(prefix):])
        return out

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
                real = resolve_physical(canon.path, self._fs_root)
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
        write = _is_write(profile)
        value = subject.role("path")
        if value is not None:
            hit = self._check_value(value, write, subject.memo, strict=True)
            if hit is not None:
                return hit
        if profile.kind == "file.read":
            hit = self._check_search(args, profile, value, subject.memo)
            if hit is not None:
                return hit
        if profile.kind in _NON_FILE_KINDS:
            return None
        if value is None and write:
            hit = self._check_patch(args, subject.memo)
            if hit is not None:
                return hit
        for name in self._args:
            extra = args.get(name)
            if extra is not None and extra is not value:
                hit = self._check_value(extra, write, subject.memo, strict=False)
                if hit is not None:
                    return hit
        return None

    def _check_search(self, args: Mapping[str, Any], profile: ToolProfile, value: Any,
                      memo: dict[str, Any]) -> Hit | None:
        """A search tool reads every file under its path that its file glob selects."""
        base = value if isinstance(value, str) and value else "."
        glob = profile.get(args, "glob")
        if isinstance(glob, str) and glob:
            # ripgrep-style globs without a "/" match at any depth below the search path.
            rel = glob if "/" in glob.lstrip("/") else "**/" + glob.lstrip("/")
            return self.check_path(base.rstrip("/") + "/" + rel, memo=memo)
        if any(isinstance(args.get(k), str) for k in _SEARCH_ARGS):
            return self.check_tree(base, memo=memo)
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
            src = glob_literal_prefix(joined) if canon.is_glob else joined
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
        for joined in canon.joined[:2]:
            src = glob_literal_prefix(joined) if canon.is_glob else joined
            key = "callwarden.paths.physical:" + (self._fs_root or "") + ":" + src
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
                glob = self._sensitive.intersects(form, nocase, self._glob_dot)
            if glob is not None:
                return Hit(f"{shown} resolves to {form}, a sensitive location ({glob})",
                           code="path.sensitive")
        if self._roots is not None:
            probe = glob_literal_prefix(form) if is_glob else form
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

    def __init__(self, deny: GlobSet, sensitive: GlobSet | None, case: bool) -> None:
        entries: list[tuple[list[str], re.Pattern[str], str, str]] = []
        for code, globset in (("path.denied", deny), ("path.sensitive", sensitive)):
            if globset is None:
                continue
            for glob, text in globset._patterns:
                if glob.startswith("/**"):
                    continue  # any-depth names: every project tree holds some
                for alt in _expand_braces(glob):
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
        literal = not has_glob_chars(probe)
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
            if p != seg and not (has_glob_chars(p) and fnmatch.fnmatchcase(seg, p)):
                return False
        elif not glob_intersects(seg, p):
            return False
    return len(pat) > len(segs)


def _under(probe: str, roots: tuple[str, ...]) -> bool:
    return any(probe.startswith(root) for root in roots)


def _is_write(profile: ToolProfile) -> bool:
    if profile.kind == "file.read":
        return False
    return profile.side_effect not in (SideEffect.READ, SideEffect.NONE)


def _show(raw: str) -> str:
    return repr(raw if len(raw) <= 120 else raw[:117] + "...")




def _opt_str(config: Mapping[str, Any], key: str) -> str | None:
    value = config.get(key)
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"{key} must be a string (a directory)", key=key)
    return value

