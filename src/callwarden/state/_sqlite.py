"""The SQLite store: shared by the processes of one host, and kept across restarts."""

from __future__ import annotations

import asyncio
import math
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from time import perf_counter as _perf
from typing import Any, TypeVar

from callwarden.exceptions import CallwardenError
from callwarden.state._base import (
    DEFAULT_IDLE_TTL,
    Counter,
    CounterState,
    HistoryEntry,
    StateStore,
    StoredValue,
    StoreUnavailable,
    check_key,
    check_ttl,
    check_version,
    decode_value,
    encode_value,
    exceeds,
    reset_time,
    spaced_out,
    spaced_reset,
)
from callwarden.state._history import SessionHistory

__all__ = ["SQLiteStore"]

_T = TypeVar("_T")
_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,40}")

# {p} is the table prefix. Windowed usage is one row per event in `entries` plus a running
# total in `counters` (whose expires_at is its newest entry's); a key without a window is only
# its `counters` row, whose expires_at is its last use plus the idle TTL (NULL: never). A
# counter with members is one row per member in `members`.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS {p}entries (
    key TEXT NOT NULL, expires_at REAL NOT NULL, weight REAL NOT NULL);
CREATE INDEX IF NOT EXISTS {p}entries_key ON {p}entries (key, expires_at);
CREATE TABLE IF NOT EXISTS {p}counters (
    key TEXT PRIMARY KEY, total REAL NOT NULL, entries INTEGER NOT NULL, expires_at REAL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS {p}counters_expiry ON {p}counters (expires_at);
CREATE TABLE IF NOT EXISTS {p}members (
    key TEXT NOT NULL, member TEXT NOT NULL, expires_at REAL NOT NULL,
    PRIMARY KEY (key, member)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS {p}members_expiry ON {p}members (expires_at);
CREATE TABLE IF NOT EXISTS {p}sessions (
    session TEXT PRIMARY KEY, count INTEGER NOT NULL,
    first_time REAL, last_time REAL, last_tool TEXT
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS {p}sessions_last ON {p}sessions (last_time);
CREATE TABLE IF NOT EXISTS {p}session_tools (
    session TEXT NOT NULL, tool TEXT NOT NULL, effect TEXT NOT NULL,
    count INTEGER NOT NULL, last_time REAL,
    PRIMARY KEY (session, tool, effect)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS {p}kv (
    key TEXT PRIMARY KEY, value TEXT NOT NULL, version INTEGER NOT NULL, expires_at REAL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS {p}kv_expiry ON {p}kv (expires_at);
"""


class SQLiteStore(StateStore):
    """Counters and history in one SQLite file (WAL mode), for several processes on one host.

    Each :meth:`consume` is one ``BEGIN IMMEDIATE`` transaction, so concurrent processes count
    exactly. A database that stays locked or cannot be opened raises
    :class:`StoreUnavailable` once ``timeout`` (or the caller's deadline, if sooner) has
    passed; the next call tries again. The deadline is checked again once the write lock is
    held: a call whose deadline passed while it waited rolls back and counts nothing.

    Args:
        path: The database file (created if missing), or ``":memory:"``.
        prefix: Prefix of the table names, letters, digits and ``_``.
        timeout: Seconds to wait for another process's lock before failing.
        history_ttl: Forget a session's history this many seconds after its last call
            (``None``: never).
        idle_ttl: Forget a counter without a window this many seconds after its last use
            (``None``: never).
        sweep_every: Seconds between deletions of keys whose usage has all expired.
    """

    __slots__ = (
        "_busy_ms",
        "_conn",
        "_fast",
        "_history_ttl",
        "_idle_ttl",
        "_kv_sweep",
        "_lock",
        "_next_sweep",
        "_path",
        "_prefix",
        "_sql",
        "_sweep_every",
        "_timeout",
    )

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        prefix: str = "callwarden_",
        timeout: float = 2.0,
        history_ttl: float | None = DEFAULT_IDLE_TTL,
        idle_ttl: float | None = DEFAULT_IDLE_TTL,
        sweep_every: float = 60.0,
    ) -> None:
        if not _PREFIX.fullmatch(prefix):
            raise ValueError(
                f"SQLite table prefix must be letters, digits and '_' (at most 41), got {prefix!r}"
            )
        self._path = os.fspath(path)
        self._prefix = prefix
        self._timeout = timeout
        self._history_ttl = history_ttl
        self._idle_ttl = idle_ttl
        self._busy_ms = int(timeout * 1000)  # the connection's busy_timeout right now
        self._sweep_every = sweep_every
        self._next_sweep: float | None = None
        self._kv_sweep = 0.0
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        # A second connection that never waits for a lock (busy_timeout 0): the async twins
        # try it on the event loop first, and go to a worker thread only when it is busy.
        self._fast: sqlite3.Connection | None = None
        self._sql = _Statements(prefix)

    # -- counters -----------------------------------------------------------------------

    def consume(
        self, counters: Sequence[Counter], *, now: float, commit: bool,
        deadline: float | None = None, record: HistoryEntry | None = None,
    ) -> list[CounterState]:
        """See :meth:`StateStore.consume`."""
        return self._run(lambda db: self._consume(db, counters, now, commit, record), deadline)

    async def aconsume(
        self, counters: Sequence[Counter], *, now: float, commit: bool,
        deadline: float | None = None, record: HistoryEntry | None = None,
    ) -> list[CounterState]:
        """See :meth:`StateStore.consume`. On the loop when the store is free (see ``_twin``),
        else in a worker thread, which writes nothing once the deadline has passed (the
        caller may have given up on it)."""
        return await self._twin(self.consume, counters, now=now, commit=commit,
                                deadline=deadline, record=record)

    def _consume(
        self, db: sqlite3.Connection, counters: Sequence[Counter], now: float, commit: bool,
        record: HistoryEntry | None,
    ) -> list[CounterState]:
        sql = self._sql
        self._maybe_sweep(db, now)
        idle = None if self._idle_ttl is None else now + self._idle_ttl
        used: list[float] = []
        lasts: list[float | None] = []
        held: list[list[tuple[str, float]]] = []  # per counter with members: its members
        for counter in counters:
            last_at = None
            if counter.members:
                assert counter.window is not None  # members need a window
                db.execute(sql.prune_members, (counter.key, now))
                rows = db.execute(sql.members, (counter.key,)).fetchall()
                held.append(rows)
                mine = counter.members
                used.append(float(sum(member not in mine for member, _ in rows)))
                lasts.append(max(e for _, e in rows) - counter.window if rows else None)
                continue
            held.append([])
            if counter.window is not None:
                pruned = [w for (w,) in db.execute(sql.prune, (counter.key, now))]
                if pruned:
                    db.execute(sql.unprune, (math.fsum(pruned), len(pruned), counter.key))
                row = db.execute(sql.usage, (counter.key,)).fetchone()
                if row is not None and row[1] > 0:  # expires_at: the newest entry's
                    last_at = row[2] - counter.window
            else:
                # Reading a counter without a window is a use: it restarts its idle time.
                row = db.execute(sql.touch, (idle, counter.key)).fetchone()
            used.append(0.0 if row is None else float(row[0]))
            lasts.append(last_at)
        exceeded = [exceeds(u, c.cost, c.limit) or spaced_out(c, u, last, now)
                    for c, u, last in zip(counters, used, lasts, strict=True)]
        allowed = commit and not any(exceeded)
        added = []
        for counter in counters:
            if counter.members:
                added.append(allowed)
                if allowed:
                    expires_at = now + counter.window  # type: ignore[operator]
                    db.executemany(sql.hold, [(counter.key, member, expires_at)
                                              for member in counter.members])
                continue
            add = bool(counter.weight) and (allowed or counter.always)
            added.append(add)
            if add:
                if counter.window is None:
                    db.execute(sql.add_total, (counter.key, counter.weight, idle))
                else:
                    expires_at = now + counter.window
                    db.execute(sql.add_entry, (counter.key, expires_at, counter.weight))
                    db.execute(sql.add_windowed, (counter.key, counter.weight, expires_at))
        states = []
        for counter, u, hit, add, last_at, rows in zip(counters, used, exceeded, added, lasts,
                                                        held, strict=True):
            reset_at = None
            if not hit:
                pass
            elif counter.members:
                # Only the other calls' members can make room: this call's own are its own.
                others = sorted(e for member, e in rows if member not in counter.members)
                reset_at = reset_time(((e, 1.0) for e in others), u, counter.cost,
                                      counter.limit)
            else:
                total = u + counter.weight if add else u
                if counter.window is not None and exceeds(total, counter.weight, counter.limit):
                    # Read after this call's writes: an attempt counted just now delays it too.
                    entries = db.execute(sql.oldest, (counter.key,))
                    reset_at = reset_time(entries, total, counter.weight, counter.limit)
                if counter.spacing:
                    reset_at = spaced_reset(counter, u, reset_at, last_at, now, add)
            states.append(CounterState(u, hit, reset_at, last_at))
        if record is not None:
            self._record(db, record.session, record.tool, record.effect_for(exceeded), now)
        return states

    def _maybe_sweep(self, db: sqlite3.Connection, now: float) -> None:
        """Deletes what has expired, every ``sweep_every`` seconds, inside the caller's write."""
        if self._next_sweep is not None and now < self._next_sweep:
            return
        self._next_sweep = now + self._sweep_every
        db.execute(self._sql.sweep_entries, (now,))
        db.execute(self._sql.sweep_counters, (now,))
        db.execute(self._sql.sweep_members, (now,))
        if self._idle_ttl is not None:
            # Counters written before idle expiry existed (expires_at NULL) get one now.
            db.execute(self._sql.date_forever, (now + self._idle_ttl,))
        if self._history_ttl is not None:
            cutoff = now - self._history_ttl
            db.execute(self._sql.forget_pairs, (cutoff,))
            db.execute(self._sql.forget_sessions, (cutoff,))

    def release(self, counters: Sequence[Counter], *, deadline: float | None = None) -> None:
        """See :meth:`StateStore.release`. One transaction."""
        rows = [(c.key, member) for c in counters for member in c.members]
        if rows:
            self._run(lambda db: db.executemany(self._sql.release, rows), deadline)

    async def arelease(self, counters: Sequence[Counter], *,
                       deadline: float | None = None) -> None:
        """See :meth:`StateStore.release`. See ``_twin``: on the loop when free."""
        await self._twin(self.release, counters, deadline=deadline)

    # -- history ------------------------------------------------------------------------

    def record(self, session: str, tool: str, effect: str, *, now: float,
               deadline: float | None = None) -> None:
        """See :meth:`StateStore.record`."""

        def write(db: sqlite3.Connection) -> None:
            self._record(db, session, tool, effect, now)
            self._maybe_sweep(db, now)

        self._run(write, deadline)

    def _record(self, db: sqlite3.Connection, session: str, tool: str, effect: str,
                now: float) -> None:
        db.execute(self._sql.record_session, (session, now, now, tool))
        db.execute(self._sql.record_pair, (session, tool, effect, now))

    async def arecord(self, session: str, tool: str, effect: str, *, now: float,
                      deadline: float | None = None) -> None:
        """See :meth:`StateStore.record`. See ``_twin``: on the loop when free."""
        await self._twin(self.record, session, tool, effect, now=now, deadline=deadline)

    def history(self, session: str, *, deadline: float | None = None,
                tools: Collection[str] | None = None) -> SessionHistory:
        """See :meth:`StateStore.history`."""
        names = None if tools is None else sorted(set(tools))

        def read(db: sqlite3.Connection) -> SessionHistory:
            row = db.execute(self._sql.session, (session,)).fetchone()
            if row is None:
                return SessionHistory(session)
            if names is None:
                pairs = db.execute(self._sql.pairs, (session,)).fetchall()
            else:  # one lookup of the primary key per tool, however many the session used
                pairs = []
                for start in range(0, len(names), _IN_CHUNK):
                    chunk = names[start:start + _IN_CHUNK]
                    pairs += db.execute(self._sql.pairs_of(len(chunk)),
                                        (session, *chunk)).fetchall()
            last_by_tool: dict[str, float] = {}
            for tool, _effect, _n, last in pairs:
                if tool not in last_by_tool or last > last_by_tool[tool]:
                    last_by_tool[tool] = last
            return SessionHistory.from_pairs(
                session,
                ((t, e, n) for t, e, n, _ in pairs),
                count=row[0],
                first_time=row[1],
                last_time=row[2],
                last_tool=row[3],
                last_time_by_tool=last_by_tool,
            )

        return self._run(read, deadline, write=False)

    async def ahistory(self, session: str, *, deadline: float | None = None,
                       tools: Collection[str] | None = None) -> SessionHistory:
        """See :meth:`StateStore.history`. See ``_twin``: on the loop when free."""
        return await self._twin(self.history, session, deadline=deadline, tools=tools)

    # -- key-value records ----------------------------------------------------------------

    def get(self, key: str) -> StoredValue | None:
        """See :meth:`StateStore.get`."""
        check_key(key)
        row = self._run(
            lambda db: db.execute(self._sql.kv_get, (key, time.time())).fetchone(), None,
            write=False
        )
        return None if row is None else StoredValue(key, decode_value(row[0]), row[1], row[2])

    async def aget(self, key: str) -> StoredValue | None:
        """See :meth:`StateStore.get`. See ``_twin``: on the loop when free."""
        return await self._twin(self.get, key)

    def get_changed(self, key: str, known: StoredValue | None) -> StoredValue | None:
        """See :meth:`StateStore.get_changed`: an unchanged record's value is neither read
        nor decoded."""
        check_key(key)
        version, expires = (known.version, known.expires_at) if known is not None \
            and known.key == key else (None, None)
        row = self._run(lambda db: db.execute(self._sql.kv_changed, (
            key, time.time(), version, expires)).fetchone(), None, write=False)
        if row is None:
            return None
        if row[0] is None:
            assert known is not None  # the value is left out only when it is known's
            return known
        return StoredValue(key, decode_value(row[0]), row[1], row[2])

    async def aget_changed(self, key: str, known: StoredValue | None) -> StoredValue | None:
        """See :meth:`StateStore.get_changed`. See ``_twin``: on the loop when free."""
        return await self._twin(self.get_changed, key, known)

    def put(self, key: str, value: Mapping[str, Any], *, ttl: float | None) -> int:
        """See :meth:`StateStore.put`. One ``BEGIN IMMEDIATE`` transaction."""
        check_key(key)
        check_ttl(ttl)
        text = encode_value(value)

        def write(db: sqlite3.Connection) -> int:
            now = time.time()
            row = db.execute(self._sql.kv_version, (key, now)).fetchone()
            version = 1 if row is None else row[0] + 1
            self._kv_write(db, key, text, version, now, ttl)
            return version

        return self._run(write, None)

    async def aput(self, key: str, value: Mapping[str, Any], *, ttl: float | None) -> int:
        """See :meth:`StateStore.put`. See ``_twin``: on the loop when free."""
        return await self._twin(self.put, key, value, ttl=ttl)

    def compare_and_set(
        self, key: str, expected_version: int | None, value: Mapping[str, Any], *,
        ttl: float | None,
    ) -> bool:
        """See :meth:`StateStore.compare_and_set`. One ``BEGIN IMMEDIATE`` transaction, so
        writers in other processes wait for it."""
        check_key(key)
        check_ttl(ttl)
        check_version(expected_version)
        text = encode_value(value)

        def write(db: sqlite3.Connection) -> bool:
            now = time.time()
            row = db.execute(self._sql.kv_version, (key, now)).fetchone()
            current = None if row is None else row[0]
            if current != expected_version:
                return False
            self._kv_write(db, key, text, 1 if current is None else current + 1, now, ttl)
            return True

        return self._run(write, None)

    async def acompare_and_set(
        self, key: str, expected_version: int | None, value: Mapping[str, Any], *,
        ttl: float | None,
    ) -> bool:
        """See :meth:`StateStore.compare_and_set`. See ``_twin``: on the loop when free."""
        return await self._twin(self.compare_and_set, key, expected_version, value, ttl=ttl)

    def delete(self, key: str) -> bool:
        """See :meth:`StateStore.delete`."""
        check_key(key)

        def write(db: sqlite3.Connection) -> bool:
            rows = db.execute(self._sql.kv_delete, (key,)).fetchall()
            return any(e is None or e > time.time() for (e,) in rows)

        return self._run(write, None)

    async def adelete(self, key: str) -> bool:
        """See :meth:`StateStore.delete`. See ``_twin``: on the loop when free."""
        return await self._twin(self.delete, key)

    def scan(self, prefix: str) -> list[StoredValue]:
        """See :meth:`StateStore.scan`."""
        rows = self._run(
            lambda db: db.execute(self._sql.kv_scan, (prefix, time.time())).fetchall(), None,
            write=False,
        )
        return [StoredValue(k, decode_value(v), n, e) for k, v, n, e in rows]

    async def ascan(self, prefix: str) -> list[StoredValue]:
        """See :meth:`StateStore.scan`. See ``_twin``: on the loop when free."""
        return await self._twin(self.scan, prefix)

    def _kv_write(self, db: sqlite3.Connection, key: str, text: str, version: int, now: float,
                  ttl: float | None) -> None:
        db.execute(self._sql.kv_upsert, (key, text, version, None if ttl is None else now + ttl))
        if now >= self._kv_sweep:
            self._kv_sweep = now + self._sweep_every
            db.execute(self._sql.kv_sweep, (now,))

    # -- plumbing -----------------------------------------------------------------------

    def close(self) -> None:
        """Closes the database connections."""
        with self._lock:
            self._drop()

    async def _twin(self, method: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """An async twin: ``method`` done on the event loop when the store is free at once
        (no other thread of this process in it, no other process holding the write lock: a
        few tens of µs, nothing to wait for), else in a worker thread, where it waits as the
        sync call does. A thread hop costs more than the work it would move."""
        token = _INLINE.set(True)
        try:
            return method(*args, **kwargs)
        except _Busy:
            pass
        finally:
            _INLINE.reset(token)
        return await asyncio.to_thread(method, *args, **kwargs)

    def _run(self, work: Callable[[sqlite3.Connection], _T], deadline: float | None, *,
             write: bool = True) -> _T:
        inline = _INLINE.get()
        if inline:
            if not self._lock.acquire(blocking=False):
                raise _Busy
        elif deadline is None:
            self._lock.acquire()
        elif not self._lock.acquire(timeout=max(deadline - _perf(), 0.0)):
            raise StoreUnavailable(f"SQLite store {self._path!r} is busy past the deadline")
        try:
            if inline:
                db = self._connect_fast()
            else:
                db = self._connect()
                self._bound_wait(db, deadline)
            with _transaction(db, "IMMEDIATE" if write else "DEFERRED"):
                if deadline is not None and write and _perf() > deadline:
                    # The caller gave up while this waited for the lock: count nothing.
                    raise _LateError
                return work(db)
        except _LateError:
            raise StoreUnavailable(
                f"SQLite store {self._path!r}: the deadline passed while waiting for the lock"
            ) from None
        except sqlite3.Error as exc:
            if inline and _busy(exc):
                raise _Busy from None  # another process writes: wait for it in a thread
            # Reopen on the next call: whatever went wrong may not be transient in this
            # connection (a deleted file, a full disk), and reopening is cheap.
            self._drop()
            raise StoreUnavailable(f"SQLite store {self._path!r} failed: {exc}") from exc
        except UnicodeEncodeError as exc:
            # A key or name with lone surrogates cannot be stored: fail closed, loudly.
            raise StoreUnavailable(f"SQLite store cannot store this text: {exc}") from exc
        finally:
            self._lock.release()

    def _bound_wait(self, db: sqlite3.Connection, deadline: float | None) -> None:
        """Waits for other processes' locks no longer than the deadline allows."""
        wait_ms = int(self._timeout * 1000)
        if deadline is not None:
            remaining = int((deadline - _perf()) * 1000)
            if remaining < wait_ms:
                # Rounded down to 10 ms steps, so that calls with similar deadlines share the
                # setting: a PRAGMA per call would cost more than the rest of the decision.
                wait_ms = max(0, remaining - remaining % 10 if remaining >= 100 else remaining)
        if wait_ms != self._busy_ms:
            db.execute(f"PRAGMA busy_timeout = {wait_ms}")
            self._busy_ms = wait_ms

    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        folder = os.path.dirname(os.path.abspath(self._path))
        if folder.startswith(state_home()) and not os.path.isdir(folder):
            # callwarden's own per-user folder is made (private); any other missing folder is
            # a mistyped path, and the store is unavailable rather than silently new.
            os.makedirs(folder, mode=0o700, exist_ok=True)
        db = sqlite3.connect(
            self._path, timeout=self._timeout, isolation_level=None, check_same_thread=False
        )
        try:
            self._busy_ms = int(self._timeout * 1000)
            db.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
            _enable_wal(db, self._timeout)
            db.execute("PRAGMA synchronous = NORMAL")
            with _transaction(db, "IMMEDIATE"):
                for statement in _SCHEMA.format(p=self._prefix).split(";"):
                    if statement.strip():
                        db.execute(statement)
        except BaseException:
            db.close()
            raise
        self._conn = db
        return db

    def _connect_fast(self) -> sqlite3.Connection:
        if self._fast is not None:
            return self._fast
        if self._conn is None:
            raise _Busy  # the first connection may wait for WAL and the schema: in a thread
        db = sqlite3.connect(self._path, timeout=0, isolation_level=None,
                             check_same_thread=False)
        try:
            db.execute("PRAGMA busy_timeout = 0")
            db.execute("PRAGMA synchronous = NORMAL")
        except BaseException:
            db.close()
            raise
        self._fast = db
        return db

    def _drop(self) -> None:
        for conn in (self._conn, self._fast):
            if conn is not None:
                with suppress(sqlite3.Error):
                    conn.close()
        self._conn = self._fast = None


class _LateError(CallwardenError):
    """The deadline passed while the transaction waited for the write lock."""


class _Busy(CallwardenError):  # a signal between two methods, never seen outside
    """An inline attempt found the store busy: do it in a worker thread instead."""


# Set while an async twin tries its work on the event loop (see SQLiteStore._twin).
_INLINE: ContextVar[bool] = ContextVar("callwarden_sqlite_inline", default=False)


def _busy(exc: sqlite3.Error) -> bool:
    """Whether SQLite refused because another connection holds a lock."""
    text = str(exc)
    return "locked" in text or "busy" in text


def state_home() -> str:
    """callwarden's per-user state folder: ``$XDG_STATE_HOME/callwarden``, by default
    ``~/.local/state/callwarden``; outside any project an agent works in."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local",
                                                            "state")
    return os.path.join(os.path.abspath(base), "callwarden")


def _enable_wal(db: sqlite3.Connection, timeout: float) -> None:
    """Switches to WAL, retrying: the switch needs an exclusive lock and SQLite does not wait
    for it through the busy handler, so processes opening a new file together can collide."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if db.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.005)


@contextmanager
def _transaction(db: sqlite3.Connection, mode: str) -> Iterator[None]:
    db.execute(f"BEGIN {mode}")
    try:
        yield
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


_IN_CHUNK = 500  # tools per query: well under SQLite's limit on bound parameters


class _Statements:
    """The SQL of one table prefix, formatted once."""

    __slots__ = (
        "_pairs_of",
        "_prefix",
        "add_entry",
        "add_total",
        "add_windowed",
        "date_forever",
        "forget_pairs",
        "forget_sessions",
        "hold",
        "kv_changed",
        "kv_delete",
        "kv_get",
        "kv_scan",
        "kv_sweep",
        "kv_upsert",
        "kv_version",
        "members",
        "oldest",
        "pairs",
        "prune",
        "prune_members",
        "record_pair",
        "record_session",
        "release",
        "session",
        "sweep_counters",
        "sweep_entries",
        "sweep_members",
        "touch",
        "unprune",
        "usage",
    )

    def __init__(self, p: str) -> None:
        self.prune = f"DELETE FROM {p}entries WHERE key = ? AND expires_at <= ? RETURNING weight"
        self.unprune = (
            f"UPDATE {p}counters SET total = CASE WHEN entries - ?2 <= 0 THEN 0.0"
            f" ELSE total - ?1 END, entries = entries - ?2 WHERE key = ?3"
        )
        self.usage = f"SELECT total, entries, expires_at FROM {p}counters WHERE key = ?"
        self.prune_members = f"DELETE FROM {p}members WHERE key = ? AND expires_at <= ?"
        self.members = f"SELECT member, expires_at FROM {p}members WHERE key = ?"
        self.hold = (
            f"INSERT INTO {p}members (key, member, expires_at) VALUES (?1, ?2, ?3)"
            f" ON CONFLICT (key, member) DO UPDATE SET expires_at = max(expires_at, ?3)"
        )
        self.release = f"DELETE FROM {p}members WHERE key = ? AND member = ?"
        self.sweep_members = f"DELETE FROM {p}members WHERE expires_at <= ?"
        self.oldest = f"SELECT expires_at, weight FROM {p}entries WHERE key = ? ORDER BY expires_at"
        self.add_entry = f"INSERT INTO {p}entries (key, expires_at, weight) VALUES (?, ?, ?)"
        self.add_windowed = (
            f"INSERT INTO {p}counters (key, total, entries, expires_at) VALUES (?1, ?2, 1, ?3)"
            f" ON CONFLICT (key) DO UPDATE SET total = total + ?2, entries = entries + 1,"
            f" expires_at = max(expires_at, ?3)"
        )
        self.add_total = (
            f"INSERT INTO {p}counters (key, total, entries, expires_at) VALUES (?1, ?2, 0, ?3)"
            f" ON CONFLICT (key) DO UPDATE SET total = total + ?2, expires_at = ?3"
        )
        self.touch = f"UPDATE {p}counters SET expires_at = ?1 WHERE key = ?2 RETURNING total"
        self.date_forever = (
            f"UPDATE {p}counters SET expires_at = ? WHERE expires_at IS NULL AND entries = 0"
        )
        self.sweep_entries = (
            f"DELETE FROM {p}entries WHERE key IN"
            f" (SELECT key FROM {p}counters WHERE expires_at <= ?)"
        )
        self.sweep_counters = f"DELETE FROM {p}counters WHERE expires_at <= ?"
        self.record_session = (
            f"INSERT INTO {p}sessions (session, count, first_time, last_time, last_tool)"
            f" VALUES (?1, 1, ?2, ?3, ?4) ON CONFLICT (session) DO UPDATE SET"
            f" count = count + 1, last_time = ?3, last_tool = ?4"
        )
        self.record_pair = (
            f"INSERT INTO {p}session_tools (session, tool, effect, count, last_time)"
            f" VALUES (?1, ?2, ?3, 1, ?4) ON CONFLICT (session, tool, effect) DO UPDATE SET"
            f" count = count + 1, last_time = ?4"
        )
        self.session = (
            f"SELECT count, first_time, last_time, last_tool FROM {p}sessions WHERE session = ?"
        )
        self.pairs = (
            f"SELECT tool, effect, count, last_time FROM {p}session_tools WHERE session = ?"
        )
        self._prefix = p
        self._pairs_of: dict[int, str] = {}
        self.forget_pairs = (
            f"DELETE FROM {p}session_tools WHERE session IN"
            f" (SELECT session FROM {p}sessions WHERE last_time <= ?)"
        )
        self.forget_sessions = f"DELETE FROM {p}sessions WHERE last_time <= ?"
        live = "(expires_at IS NULL OR expires_at > ?2)"
        self.kv_get = f"SELECT value, version, expires_at FROM {p}kv WHERE key = ?1 AND {live}"
        self.kv_changed = (
            f"SELECT CASE WHEN version IS ?3 AND expires_at IS ?4 THEN NULL ELSE value END,"
            f" version, expires_at FROM {p}kv WHERE key = ?1 AND {live}"
        )
        self.kv_version = f"SELECT version FROM {p}kv WHERE key = ?1 AND {live}"
        self.kv_upsert = (
            f"INSERT INTO {p}kv (key, value, version, expires_at) VALUES (?1, ?2, ?3, ?4)"
            f" ON CONFLICT (key) DO UPDATE SET value = ?2, version = ?3, expires_at = ?4"
        )
        self.kv_delete = f"DELETE FROM {p}kv WHERE key = ? RETURNING expires_at"
        self.kv_scan = (
            f"SELECT key, value, version, expires_at FROM {p}kv WHERE key >= ?1"
            f" AND substr(key, 1, length(?1)) = ?1 AND {live} ORDER BY key"
        )
        self.kv_sweep = f"DELETE FROM {p}kv WHERE expires_at <= ?"


    def pairs_of(self, n: int) -> str:
        """The pairs of ``n`` tools of one session (``session``, then the ``n`` names)."""
        sql = self._pairs_of.get(n)
        if sql is None:
            sql = self._pairs_of[n] = (
                f"SELECT tool, effect, count, last_time FROM {self._prefix}session_tools"
                f" WHERE session = ? AND tool IN ({', '.join('?' * n)})")
        return sql
