"""Where audit events go. A sink is anything with ``write(event: dict) -> None``.

``flush()`` and ``close()`` are optional. Sinks are called from the auditor's writer thread,
in order; they must not change the event. A sink that only writes the JSON text may also have
``write_lines(lines: list[str])``: when every sink of an auditor has it, the auditor hands it
the encoded events (one JSON object per string, no newline) and never builds the dicts.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import inspect
import json
import os
import stat
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TextIO, runtime_checkable

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["CallableSink", "JsonlSink", "SQLiteSink", "Sink", "StdoutSink", "encode_line",
           "rotated_files"]

_encode = json.JSONEncoder(separators=(",", ":")).encode


@runtime_checkable
class Sink(Protocol):
    """Receives audit events. ``flush()`` and ``close()`` are optional."""

    def write(self, event: dict[str, Any]) -> None:
        """Records one event; raises on failure (the auditor counts or reports it)."""


def encode_line(event: dict[str, Any]) -> str:
    """The event as one line of compact ASCII JSON, without the newline."""
    line = getattr(event, "line", None)
    return line() if callable(line) else _encode(event)


_GIL_WRITE_MAX = 64 * 1024


def _libc_write() -> Callable[[int, bytes], int] | None:
    """``write(2)`` called without letting go of the interpreter lock (ctypes.PyDLL), or None
    where there is no C library to call."""
    try:
        libc = ctypes.PyDLL(None, use_errno=True)
        write = libc.write
    except (OSError, AttributeError):  # pragma: no cover - no libc (Windows)
        return None
    write.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
    write.restype = ctypes.c_ssize_t

    def call(fd: int, data: bytes) -> int:
        while True:
            n = write(fd, data, len(data))
            if n >= 0:
                return int(n)
            code = ctypes.get_errno()
            if code != errno.EINTR:
                raise OSError(code, os.strerror(code))

    return call


_write_holding_gil = _libc_write()


class JsonlSink:
    """Appends one JSON object per line to a file, rotating by size and/or time.

    Every event is one ``os.write`` of one complete line on an ``O_APPEND`` descriptor, so a
    crash (even ``kill -9``) never leaves a torn line, and several processes may append to the
    same file. Rotation renames the file to ``<stem>.<UTC time>.<pid><suffix>`` and never
    deletes anything; ``rotated_files(path)`` lists the pieces oldest first.

    Args:
        path: the file (its directory is created).
        rotate_bytes: rotate before a write would take the file past this size.
        rotate_interval: rotate at every multiple of this many seconds (UTC aligned).
        fsync: ``fsync`` after every write (durable on power loss, slower): once per
            ``write_lines`` batch, so concurrent callers share one disk flush.
        inline: True (default) lets the auditor append from the deciding thread: a local
            append returns in microseconds, and needs no thread switch. On a network
            filesystem that may stop answering, False: the auditor's thread writes, and a
            caller waits at most the audit deadline.
    """

    def __init__(self, path: str | Path, *, rotate_bytes: int | None = None,
                 rotate_interval: float | None = None, fsync: bool = False,
                 inline: bool = True) -> None:
        self.path = Path(path)
        self.inline = inline
        self.rotate_bytes = rotate_bytes
        self.rotate_interval = rotate_interval
        self.fsync = fsync
        self._lock = threading.Lock()
        self._fd = -1
        self._retired: list[int] = []
        self._regular = False
        self._size = 0
        self._next_rotation = float("inf")

    def __repr__(self) -> str:
        return f"JsonlSink({str(self.path)!r})"

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        info = os.fstat(self._fd)
        self._size = info.st_size
        self._regular = stat.S_ISREG(info.st_mode)
        self._open_times()

    def _open_times(self) -> None:
        if self.rotate_interval:
            now = time.time()
            self._next_rotation = (now // self.rotate_interval + 1) * self.rotate_interval

    def write(self, event: dict[str, Any]) -> None:
        """Appends the event as one line (one ``os.write``)."""
        self._append((encode_line(event) + "\n").encode("ascii"), rotate=True)

    def write_many(self, events: list[dict[str, Any]]) -> None:
        """Appends several events (see ``write_lines``)."""
        self.write_lines([encode_line(e) for e in events])

    def write_lines(self, lines: list[str]) -> None:
        """Appends encoded events (JSON lines without their newline), in order.

        As few ``os.write`` calls as rotation and ``fsync`` allow, each holding whole lines
        only, so the no-torn-line guarantee is the same as for ``write``.
        """
        if self.rotate_bytes or self.rotate_interval:
            for line in lines:
                self._append((line + "\n").encode("ascii"), rotate=True, sync=False)
            if self.fsync:
                self.flush()
            return
        self._append(("\n".join(lines) + "\n").encode("ascii"), rotate=False)

    def append_line(self, line: str) -> None:
        """Appends one encoded event (without its newline) from any thread, without a lock:
        one ``os.write`` on the ``O_APPEND`` descriptor, which the kernel appends whole.
        Opening, rotating, ``fsync`` and a short write take the locked path."""
        data = (line + "\n").encode("ascii")
        fd = self._fd
        if fd < 0 or self.fsync or (self.rotate_bytes and self._size + len(data)
                                    > self.rotate_bytes) \
                or (self.rotate_interval and time.time() >= self._next_rotation):
            self._append(data, rotate=True)
            return
        written = self._write(fd, data)
        if written < len(data):  # a full disk or a size limit: finish the line under the lock
            with self._lock:
                while written < len(data):
                    written += os.write(fd, data[written:])
        # Unlocked: concurrent appends may undercount by a line, and a rotation come late.
        self._size += len(data)

    def _write(self, fd: int, data: bytes) -> int:
        # A local append takes a microsecond or two: made holding the interpreter lock, it
        # spares the hand-over of that lock to another thread and back, which costs far more
        # when several threads decide at once (os.write lets it go). Regular files only: a
        # pipe or a terminal may block. (inline: false for a network filesystem.)
        if self._regular and _write_holding_gil is not None and len(data) <= _GIL_WRITE_MAX:
            return _write_holding_gil(fd, data)
        return os.write(fd, data)

    def _append(self, data: bytes, *, rotate: bool, sync: bool = True) -> None:
        with self._lock:
            if self._fd < 0:
                self._open()
            if rotate and ((self.rotate_bytes and self._size
                            and self._size + len(data) > self.rotate_bytes)
                           or (self.rotate_interval and time.time() >= self._next_rotation)):
                self._rotate()
            written = os.write(self._fd, data)
            while written < len(data):  # only on a full disk or a size limit: keep lines whole
                written += os.write(self._fd, data[written:])
            self._size += len(data)
            if self.fsync and sync:
                os.fsync(self._fd)

    def _rotate(self) -> None:
        if not self._size:  # nothing to set aside: only move the next rotation time
            self._open_times()
            return
        # Processes rotating one file at once check and rename it holding a lock on the file
        # itself: the first renames it, the others see it gone. Without the lock, one that
        # checked before the rename would rename the next file in its turn, and the lines in
        # it would sort before older ones.
        if fcntl is not None:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            self._rename_if_current()
        finally:
            if fcntl is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        # An unlocked append (append_line) may still hold the old descriptor: it is closed
        # one rotation later, never while its number could be handed to another file.
        for fd in self._retired:
            os.close(fd)
        self._retired = [self._fd]
        self._fd = -1
        self._open()

    def _rename_if_current(self) -> None:
        try:
            same_file = os.stat(self.path).st_ino == os.fstat(self._fd).st_ino
        except FileNotFoundError:
            same_file = False
        if same_file:  # otherwise another process rotated it already: just reopen
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
            target = self.path.with_name(f"{self.path.stem}.{stamp}.{os.getpid()}{self.path.suffix}")
            n = 0
            while target.exists():
                n += 1
                target = self.path.with_name(
                    f"{self.path.stem}.{stamp}.{os.getpid()}-{n}{self.path.suffix}")
            os.rename(self.path, target)

    def flush(self) -> None:
        """Forces written lines to disk."""
        with self._lock:
            if self._fd >= 0:
                os.fsync(self._fd)

    def close(self) -> None:
        """Closes the file (the next write reopens it)."""
        with self._lock:
            self._close_files()

    def _close_files(self) -> None:
        """Closes the descriptors (the lock held)."""
        for fd in self._retired:
            os.close(fd)
        self._retired = []
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def rotated_files(path: str | Path) -> list[Path]:
    """The rotated pieces of a JSONL audit file, oldest first, then the file itself."""
    path = Path(path)
    pieces = sorted(path.parent.glob(f"{path.stem}.*Z.*{path.suffix}"))
    return [*pieces, path] if path.exists() else pieces


class StdoutSink:
    """Writes each event as one JSON line to standard output (or another text stream)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream

    def write(self, event: dict[str, Any]) -> None:
        """Prints the event line and flushes."""
        self.write_lines([encode_line(event)])

    def write_lines(self, lines: list[str]) -> None:
        """Prints encoded events, one per line, and flushes once."""
        stream = self._stream or sys.stdout  # looked up late: tests and daemons swap stdout
        stream.write("\n".join(lines) + "\n")
        stream.flush()


class SQLiteSink:
    """Stores events in an SQLite table (stdlib ``sqlite3``, WAL mode), one row per event.

    Columns: ``event_id``, ``type``, ``time``, ``decision_id``, ``tool``, ``effect``, ``rule``,
    ``agent``, ``session``, ``event`` (the JSON). Query it with any SQLite client.
    """

    _COLUMNS = ("event_id", "type", "time", "decision_id", "tool", "effect", "rule", "agent",
                "session")

    def __init__(self, path: str | Path, *, table: str = "audit_events",
                 timeout: float = 5.0) -> None:
        if not table.isidentifier():
            raise ValueError(f"table name must be an identifier, not {table!r}")
        self.path = Path(path)
        self.table = table
        self.timeout = timeout
        self._conn: Any = None
        self._lock = threading.Lock()

    def _connect(self) -> Any:
        import sqlite3

        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=self.timeout, check_same_thread=False,
                               isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        cols = ", ".join(f"{c} TEXT" for c in self._COLUMNS[1:])
        conn.execute(f"CREATE TABLE IF NOT EXISTS {self.table} "
                     f"(event_id TEXT PRIMARY KEY, {cols}, event TEXT NOT NULL)")
        conn.execute(f"CREATE INDEX IF NOT EXISTS {self.table}_decision "
                     f"ON {self.table} (decision_id)")
        return conn

    def write(self, event: dict[str, Any]) -> None:
        """Inserts the event (autocommit)."""
        row = (*(event.get(c) for c in self._COLUMNS), encode_line(event))
        with self._lock:
            if self._conn is None:
                self._conn = self._connect()
            self._conn.execute(
                f"INSERT OR REPLACE INTO {self.table} VALUES ({', '.join('?' * len(row))})", row)

    def write_many(self, events: list[dict[str, Any]]) -> None:
        """Inserts several events in one transaction (one commit for a batch)."""
        rows = [(*(event.get(c) for c in self._COLUMNS), encode_line(event)) for event in events]
        with self._lock:
            if self._conn is None:
                self._conn = self._connect()
            conn = self._conn
            conn.execute("BEGIN")
            try:
                conn.executemany(f"INSERT OR REPLACE INTO {self.table} VALUES "
                                 f"({', '.join('?' * len(rows[0]))})", rows)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def close(self) -> None:
        """Closes the connection."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


class CallableSink:
    """Hands each event to a function ``fn(event)``; an async function is run to completion."""

    def __init__(self, fn: Callable[[dict[str, Any]], Any]) -> None:
        self.fn = fn

    def __repr__(self) -> str:
        return f"CallableSink({getattr(self.fn, '__qualname__', self.fn)!r})"

    def write(self, event: dict[str, Any]) -> None:
        """Calls the function; raises what it raises."""
        result = self.fn(event)
        if inspect.isawaitable(result):
            asyncio.run(_await(result))


async def _await(awaitable: Any) -> Any:
    return await awaitable
