"""Path canonicalization: every absolute form a tool might open for one path argument.

A path argument is turned into every absolute form a tool might open: ``~`` / ``~user`` /
``$HOME`` / ``%USERPROFILE%`` expanded, percent-encoding (double and overlong UTF-8 too)
decoded, fullwidth characters NFKC-folded, ``\\`` read as ``/``, ``file://`` and Windows drive
and namespace prefixes stripped, ``.`` / ``..`` / ``//`` collapsed against the project root,
``/proc/self/root`` and ``/proc/self/cwd`` followed, and, when asked, symlinks resolved on the
real filesystem. A deny glob or root check that fails on *any* form is a hit (the ``paths:``
condition): an attacker only needs one reading to be the one the tool uses.

The lexical work is a pure function of the string and is cached; symlink resolution is not
cached, because a link can be created between two calls.
"""

from __future__ import annotations

import os
import re
import stat
import sys
import unicodedata
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources

from callwarden.analysis.globs import is_glob
from callwarden.exceptions import CallwardenError

__all__ = [
    "ANY_HOMES",
    "DRIVE_RE",
    "MAX_PATHS_PER_CALL",
    "MAX_PATH_CHARS",
    "CanonicalPath",
    "PathCanonicalizer",
    "canonical_path",
    "collapse_plain",
    "folds_case",
    "lexical_abs",
    "load_sensitive_globs",
    "resolve_physical",
]


MAX_PATH_CHARS = 4096 * 4

#: Where the filesystem folds case as a rule (APFS and NTFS as installed): the answer of
#: ``folds_case`` when it cannot tell by looking.
_FOLDING_PLATFORMS = ("darwin", "win32", "cygwin")


@lru_cache(maxsize=64)
def folds_case(directory: str) -> bool:
    """Whether the filesystem holding ``directory`` finds a name whatever its case (macOS and
    Windows as installed: there ``~/.SSH/id_rsa`` is ``~/.ssh/id_rsa``), found by looking up
    the deepest part of the path that has letters with their case swapped; where that tells
    nothing (no letters, or no such directory), what the platform does as a rule."""
    path = os.path.abspath(directory)
    while True:
        parent, name = os.path.split(path)
        if name.swapcase() != name:
            break
        if parent == path:  # no letters anywhere
            return sys.platform in _FOLDING_PLATFORMS
        path = parent
    try:
        found = os.stat(path)
    except (OSError, ValueError):
        return sys.platform in _FOLDING_PLATFORMS
    try:
        return os.path.samestat(found, os.stat(os.path.join(parent, name.swapcase())))
    except (OSError, ValueError):
        return False  # it is there, and not under its other spelling


MAX_PATHS_PER_CALL = 1024


_CACHE_SIZE = 4096


_DECODE_ROUNDS = 3


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


DRIVE_RE = re.compile(r"^[A-Za-z]:")


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
        self.root = lexical_abs(root, "/")
        self.home = lexical_abs(home, "/")
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
                joined, is_win = self.absolute(form)
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
        globbed = any(is_glob(v) for v in variants)
        return CanonicalPath(raw, variants[0], tuple(variants), tuple(joined_forms), globbed,
                             nocase)

    def _win_var(self, m: re.Match[str]) -> str:
        value = self._vars.get(m.group(1).upper())
        return m.group(0) if value is None else value

    def absolute(self, text: str) -> tuple[str, bool]:
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
        if DRIVE_RE.match(text):
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


def lexical_abs(path: str, base: str) -> str:
    path = os.path.expanduser(path) if path.startswith("~") else path
    return os.path.normpath(os.path.join(base, path)).replace("//", "/")


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
        known = _RESOLVED.get(path)
        if known is not None and _still(path, known):
            return known[0]
        real, identity, missing = _resolve_kernel(path)
        if real is not None and identity is not None:
            if len(_RESOLVED) >= _RESOLVED_KEPT:
                _RESOLVED.clear()
            _RESOLVED[path] = (real, identity, missing)
        return real
    return _resolve_walk(path, (fs_root or "").rstrip("/"))


# Where a path led, checked again cheaply before it is reused. For an existing file: the
# (device, inode) it led to, read from the same open file as the resolution (so no swap in
# between can pair them wrongly); a later call whose path still leads to that file (one stat)
# reuses the answer, and a symlink pointed elsewhere since leads to another file and is
# resolved again. For a path that does not exist yet (a file about to be written): the deepest
# existing directory the walk reached, its (device, inode), and the first missing name below
# it; while that directory is still the one the path reaches (one stat) and the name is still
# missing (one lstat), nothing below it can have become a link, so the answer holds. A path
# that went through a dangling link is not kept.
_RESOLVED: dict[str, tuple[str, tuple[int, int], tuple[str, str] | None]] = {}
_RESOLVED_KEPT = 4096


def _still(path: str, known: tuple[str, tuple[int, int], tuple[str, str] | None]) -> bool:
    """Whether a kept resolution of ``path`` still holds (see ``_RESOLVED``)."""
    _, identity, missing = known
    try:
        info = os.stat(path if missing is None else missing[0])
    except OSError:
        return False
    if (info.st_dev, info.st_ino) != identity:
        return False
    if missing is None:
        return True
    try:
        os.lstat(missing[1])
    except (FileNotFoundError, NotADirectoryError):
        return True
    except OSError:
        return False
    return False  # the missing name exists now: resolve again


def _resolve_kernel(path: str) -> tuple[str | None, tuple[int, int] | None,
                                         tuple[str, str] | None]:
    """Where ``path`` lands; the identity to keep with it (None: not kept); for a path that
    does not exist yet, the existing directory and the first missing name (see
    ``_RESOLVED``)."""
    # One open(O_PATH) lets the kernel do the whole walk (symlinks and '..' physically), and
    # /proc/self/fd tells where it ended: three syscalls however deep the path is.
    suffix = ""
    current = path
    first_missing: str | None = None
    linked = False
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
                linked = True
                parent = current.rsplit("/", 1)[0] or "/"
                current = target if target.startswith("/") else parent + "/" + target
                continue
            head, _, tail = current.rpartition("/")
            if not tail and not head:
                return None, None, None
            first_missing = current
            suffix = "/" + tail + suffix
            current = head or "/"
            continue
        except OSError:
            return None, None, None
        try:
            real = os.readlink(f"/proc/self/fd/{fd}")
            info = os.fstat(fd)
        except OSError:
            return None, None, None
        finally:
            os.close(fd)
        identity = (info.st_dev, info.st_ino)
        if not suffix:
            return real, identity, None
        real = collapse_plain(real.rstrip("/") + suffix)
        if linked or first_missing is None:
            return real, None, None
        return real, identity, (current, first_missing)
    return None, None, None


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


def collapse_plain(path: str) -> str:
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


ANY_HOMES = ("/root", "/home/*", "/Users/*", "/var/root")
