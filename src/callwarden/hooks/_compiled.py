"""Compiled regular expressions kept on disk for ``callwarden hook`` deciding in its own process.

A hook process that decides by itself (a policy's first call, or ``CALLWARDEN_HOOK_WORKER=0``)
compiles the policy, and most of that is Python's ``re`` compiling the policy's regular
expressions: parsing each pattern and generating the code of its matching engine, a list of
integers. This keeps that code, per policy file, in
``$XDG_CACHE_HOME/callwarden/compiled/NAME.re`` and hands it back to ``re`` in the next such
process: the same pattern objects, built without parsing or generating anything.

It is never trusted:

- the folder is the user's and nobody else's (mode 0700), the file is a regular file of the
  user's that nobody else can read or write, and it is sealed with a keyed BLAKE2b under a
  key kept beside it (``key``, mode 0600; ``callwarden:recommended`` denies an agent's tools
  callwarden's per-user folders). A file that fails any check, was written by another Python,
  or cannot be read is ignored, and written again;
- an entry is found by the exact text and flags of the pattern being compiled, and the
  regular-expression engine validates the code it is given (``_sre.compile`` refuses an
  invalid program); anything off and the pattern is compiled as usual;
- the file is written to a temporary file in the folder and renamed over the old one.

So it never changes a decision: each pattern is built from the code ``re`` itself generated
for exactly that pattern, or compiled. Nothing here is pickled.
"""

from __future__ import annotations

import _sre  # type: ignore[import-not-found]
import array
import contextlib
import hashlib
import json
import os
import re
import secrets
import stat
import sys
from collections.abc import Iterator
from re import _compiler, _parser  # type: ignore[attr-defined]
from typing import Any

from callwarden.hooks._client import _private_folder

__all__ = ["kept_regexes"]

_MAGIC = b"callwarden-regex/1\n"
_MAX_FILE = 64 * 1024 * 1024  # bytes; a bigger file is not read (nor written)
_CODE = "I" if array.array("I").itemsize == _sre.CODESIZE else None
# What the code depends on besides the pattern: the interpreter (its `re`) and the engine.
_BUILD = [sys.version, _sre.MAGIC, _sre.CODESIZE]

# (pattern, flags) -> (final flags, code, groups, groupindex, indexgroup)
_Entry = tuple[int, Any, int, dict[str, int], tuple[str | None, ...]]


class _Kept:
    """The kept code of one policy's patterns: those read from its file, and those this
    process compiled (written back when there are any)."""

    def __init__(self, path: str, key: bytes, entries: dict[tuple[str, int], _Entry]) -> None:
        self.path, self.key, self.entries = path, key, entries
        self.used: dict[tuple[str, int], _Entry] = {}
        self.new = 0

    def compile(self, p: Any, flags: int = 0) -> Any:
        """``re._compiler.compile`` with the kept code used (see the module docstring)."""
        if type(p) is not str or flags & re.DEBUG:
            return _ORIGINAL(p, flags)
        key = (p, flags)
        found = self.entries.get(key)
        if found is not None:
            final, code, groups, groupindex, indexgroup = found
            try:
                compiled = _sre.compile(p, final, code.tolist(), groups, groupindex, indexgroup)
            except Exception:  # an invalid program, or another engine: compile it
                compiled = None
            if compiled is not None:
                self.used[key] = found
                return compiled
        try:
            entry = _generate(p, flags)
            compiled = _sre.compile(p, *entry)
        except Exception:  # whatever `re` says about the pattern, it says it itself
            return _ORIGINAL(p, flags)
        self.used[key] = entry
        self.new += 1
        return compiled

    def save(self) -> None:
        """Writes the patterns this process used, when it compiled any, atomically."""
        if not self.new or _CODE is None:
            return
        header: list[list[Any]] = []
        code = array.array(_CODE)
        for (pattern, flags), (final, program, groups, groupindex, indexgroup) in \
                self.used.items():
            header.append([pattern, flags, final, groups, groupindex, list(indexgroup),
                           len(code), len(program)])
            code.extend(program)
        head = json.dumps({"build": _BUILD, "entries": header}, separators=(",", ":")).encode()
        body = code.tobytes()
        if len(head) + len(body) > _MAX_FILE:
            return
        data = b"".join((_MAGIC, _seal(self.key, head, body), b"\n", str(len(head)).encode(),
                         b"\n", head, body))
        folder = os.path.dirname(self.path)
        temporary = os.path.join(folder, f".{os.path.basename(self.path)}.{secrets.token_hex(6)}")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise


_ORIGINAL = _compiler.compile


def _generate(pattern: str, flags: int) -> _Entry:
    """What ``re._compiler.compile`` hands the engine for ``pattern``: (final flags, code,
    groups, groupindex, indexgroup)."""
    parsed = _parser.parse(pattern, flags)
    code = _compiler._code(parsed, flags)
    groupindex = dict(parsed.state.groupdict)
    indexgroup: list[str | None] = [None] * parsed.state.groups
    for name, index in groupindex.items():
        indexgroup[index] = name
    return (flags | parsed.state.flags, [int(c) for c in code], parsed.state.groups - 1,
            groupindex, tuple(indexgroup))


def _seal(key: bytes, head: bytes, body: bytes) -> bytes:
    mac = hashlib.blake2b(key=key, digest_size=32)
    mac.update(len(head).to_bytes(8, "big"))
    mac.update(head)
    mac.update(body)
    return mac.hexdigest().encode()


def _private_file(fd: int) -> bool:
    """A regular file of this user's that nobody else may read or write."""
    info = os.fstat(fd)
    return stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid() \
        and not info.st_mode & 0o077


def _key(folder: str) -> bytes | None:
    """The folder's sealing key, made on first use; None when it cannot be trusted."""
    path = os.path.join(folder, "key")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(32))
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        if not _private_file(f.fileno()):
            return None
        key = f.read(64)
    return key if len(key) == 32 else None


def _read(path: str, key: bytes) -> dict[tuple[str, int], _Entry]:
    """The entries of a kept file; empty when there is none or it fails any check."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return {}
    with os.fdopen(fd, "rb") as f:
        if not _private_file(f.fileno()) or os.fstat(f.fileno()).st_size > _MAX_FILE:
            return {}
        data = f.read()
    if not data.startswith(_MAGIC) or _CODE is None:
        return {}
    seal, _, rest = data[len(_MAGIC):].partition(b"\n")
    size, _, rest = rest.partition(b"\n")
    if not size.isdigit() or int(size) > len(rest):
        return {}
    head, body = rest[:int(size)], rest[int(size):]
    if not secrets.compare_digest(seal, _seal(key, head, body)):
        return {}
    document = json.loads(head)
    if document.get("build") != _BUILD:
        return {}
    code = array.array(_CODE)
    code.frombytes(body)
    entries: dict[tuple[str, int], _Entry] = {}
    for pattern, flags, final, groups, groupindex, indexgroup, start, count in \
            document["entries"]:
        if not (isinstance(pattern, str) and isinstance(groupindex, dict)
                and 0 <= start <= start + count <= len(code)):
            return {}
        entries[pattern, flags] = (final, code[start:start + count], groups, groupindex,
                                   tuple(indexgroup))
    return entries


def _open(policy: str, folder: str | None) -> _Kept | None:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    kept = os.path.join(base, "callwarden", "compiled")
    if not _private_folder(kept):
        return None
    key = _key(kept)
    if key is None:
        return None
    # The patterns depend on the policy and on the folder it is decided in (its root).
    where = os.path.abspath(folder or os.getcwd())
    name = hashlib.blake2b(repr((os.path.abspath(policy), where, sys.version)).encode(),
                           digest_size=12).hexdigest()
    path = os.path.join(kept, name + ".re")
    try:
        entries = _read(path, key)
    except Exception:  # unreadable, not JSON, not of this shape: written again
        entries = {}
    return _Kept(path, key, entries)


@contextlib.contextmanager
def kept_regexes(policy: str, folder: str | None = None, *, keep: bool = True
                 ) -> Iterator[None]:
    """While inside, ``re`` builds the patterns it compiles from the code kept for
    ``policy`` (a policy file's path) decided in ``folder`` (its root; the working directory
    by default); on leaving, with ``keep``, the code of those it had to compile is kept (a
    process that imported callwarden before entering keeps only part of what the next hook
    process needs: it reads and does not write). Nothing here fails the caller: without a
    private folder it does nothing."""
    try:
        kept = _open(policy, folder)
    except Exception:
        kept = None
    if kept is None:
        yield
        return
    _compiler.compile = kept.compile
    try:
        yield
    finally:
        if _compiler.compile == kept.compile:
            _compiler.compile = _ORIGINAL
        if keep:
            with contextlib.suppress(Exception):
                kept.save()
