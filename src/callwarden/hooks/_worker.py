"""The hook worker: one policy kept compiled for ``callwarden hook`` (see ``_client``).

``python -m callwarden.hooks._worker FOLDER NAME SOCKETS POLICY CWD`` — started by a hook process, in
a session of its own. It takes the place's lock (another worker already there: it exits),
compiles the policy for ``CWD``, writes a fresh reply key, then listens on ``NAME.sock`` and
answers one call at a time, each exactly as ``callwarden hook`` would in a process of its own:
a new guard on the compiled policy, the decision, the guard closed (audit flushed). It exits
after ``$CALLWARDEN_HOOK_WORKER_IDLE`` seconds without a call, and on SIGTERM.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import signal
import socket
import sys
import time
from collections import OrderedDict
from typing import Any

from callwarden.hooks._client import (
    IDLE_ENV,
    MAX_INPUT,
    WorkerPlace,
    decode_request,
    encode_reply,
    reply_mac,
    seconds,
    text_stream,
)

__all__ = ["Compiled", "compile_bytecode", "serve", "stale_bytecode"]

_DEFAULT_IDLE = 600.0
_READ_TIMEOUT = 5.0
_MAX_REQUEST = MAX_INPUT + 65536
_KEPT = 16  # compiled policies kept, one per working directory
_SETTLED_NS = 2_000_000_000  # files changed more recently are read again on the next call


class Compiled:
    """The policy compiled per working directory, recompiled when a file it was read from
    changes. A broken policy is not kept (each call reports it, as without a worker), nor one
    read from a file changed in the last seconds: it may have been read while being written,
    and a later change within the same clock tick would go unseen."""

    def __init__(self, limit: int = _KEPT) -> None:
        self._kept: OrderedDict[tuple[str, str], tuple[Any, tuple[Any, ...]]] = OrderedDict()
        self._limit = limit

    def load(self, path: str, cwd: str | None) -> Any:
        from callwarden.hooks._base import load_policy

        where = cwd if cwd and os.path.isdir(cwd) else os.getcwd()
        key = (path, where)
        kept = self._kept.get(key)
        if kept is not None and kept[1] == _stamp(kept[0].files):
            self._kept.move_to_end(key)
            return kept[0]
        self._kept.pop(key, None)
        from callwarden.hooks._compiled import kept_regexes

        # Read as the hook process that started this worker wrote them.
        with kept_regexes(path, where, keep=False):
            loaded = load_policy(path, where)
        stamp = _stamp(loaded.files)
        settled = time.time_ns() - _SETTLED_NS
        if all(entry is not None and entry[1] < settled for entry in stamp):
            self._kept[key] = (loaded, stamp)
            while len(self._kept) > self._limit:
                self._kept.popitem(last=False)
        return loaded


def stale_bytecode(package: str) -> list[str]:
    """The modules of ``package`` (a folder) whose bytecode is missing or older than their
    source: each hook process that imports them compiles them again, in memory (an editable
    install has none, and with PYTHONDONTWRITEBYTECODE set nothing writes it)."""
    import importlib.util

    stale = []
    for folder, _, names in os.walk(package):
        for name in names:
            if not name.endswith(".py"):
                continue
            source = os.path.join(folder, name)
            try:
                cached = os.stat(importlib.util.cache_from_source(source)).st_mtime
                fresh = cached >= os.stat(source).st_mtime
            except OSError:
                fresh = False
            if not fresh:
                stale.append(source)
    return stale


def compile_bytecode(package: str | None = None) -> Any:
    """Compiles callwarden's own stale bytecode in a process of its own (another core, and no
    wait for the calls this worker answers), so that the hook processes after it import
    callwarden compiled; returns the process, or None when nothing is stale. A folder that
    cannot be written is left as it is."""
    import subprocess

    import callwarden

    folder = package or os.path.dirname(callwarden.__file__)
    if not stale_bytecode(folder):
        return None
    with contextlib.suppress(OSError):
        return subprocess.Popen([sys.executable, "-m", "compileall", "-q", folder],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    return None


def _stamp(files: tuple[str, ...]) -> tuple[Any, ...]:
    out: list[Any] = []
    for name in files:
        try:
            info = os.stat(name)
            out.append((info.st_ino, info.st_mtime_ns, info.st_size))
        except OSError:
            out.append(None)
    return tuple(out)


def serve(place: WorkerPlace, policy: str, cwd: str, idle: float) -> None:
    """Runs the worker until it has been idle for ``idle`` seconds."""
    lock = os.open(place.lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return  # a worker is already there
    compiled = Compiled()
    with contextlib.suppress(Exception):  # a broken policy: each call reports it
        compiled.load(policy, cwd)  # warm before the first call arrives
    compile_bytecode()
    key = secrets.token_bytes(32)
    _write_private(place.key, key.hex())
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    temp = os.path.join(place.sockets, f".{place.name}.{secrets.token_hex(4)}.sock")
    listener.bind(temp)
    os.chmod(temp, 0o600)
    os.replace(temp, place.socket)
    mine = os.stat(place.socket).st_ino
    listener.listen(64)
    listener.settimeout(idle)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while True:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                return
            with conn:
                _answer(conn, key, policy, compiled)
    finally:
        with contextlib.suppress(OSError):
            if os.stat(place.socket).st_ino == mine:  # not yet replaced by a newer worker
                os.unlink(place.socket)
        listener.close()


def _answer(conn: socket.socket, key: bytes, policy: str, compiled: Compiled) -> None:
    try:
        conn.settimeout(_READ_TIMEOUT)
        request = _read(conn)
        if request is None:
            return
        conn.sendall(reply_mac(key, request, body := _reply(request, policy, compiled)) +
                     b"\n" + body)
    except OSError:
        pass  # the hook went away or stalled: it decides by itself


def _read(conn: socket.socket) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > _MAX_REQUEST:
            return None
        chunks.append(chunk)


def _reply(request: bytes, policy: str, compiled: Compiled) -> bytes:
    """The hook reply to one request, or ``fallback NUL why`` for the hook to decide."""
    from callwarden.hooks._base import decide_hook, dialect

    fields = decode_request(request)
    if fields is None or fields[1] != policy:
        return b"fallback\0not a request for this worker"
    agent, _, cwd, encoding, errors, raw = fields
    try:
        speaker = dialect(agent)
        stream = text_stream(raw, encoding, errors)
        with contextlib.chdir(cwd):  # where the hook process runs, as if it decided itself
            reply = decide_hook(speaker, policy, stream, load=compiled.load)
    except (LookupError, OSError, ValueError) as e:
        return b"fallback\0" + str(e).encode(errors="replace")
    return encode_reply(reply.stdout, reply.stderr, reply.exit_code)


def _write_private(path: str, text: str) -> None:
    temp = f"{path}.{secrets.token_hex(4)}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(temp, path)


if __name__ == "__main__":
    folder, name, sockets, policy_path, start_cwd = sys.argv[1:6]
    serve(WorkerPlace(folder, name, sockets), policy_path, start_cwd, seconds(IDLE_ENV, _DEFAULT_IDLE))
