"""The in-process store: the default, and the test double for the others."""

from __future__ import annotations

import bisect
import math
import threading
import time
from collections import deque
from collections.abc import Collection, Mapping, Sequence
from time import perf_counter as _perf
from typing import Any

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
from callwarden.state._history import HistoryTally, SessionHistory

__all__ = ["MemoryStore"]

_new = tuple.__new__


class _Series:
    """The usage under one key: its total and, for a window, ``(expires_at, weight)`` entries
    oldest first (``None`` for a key counted forever, forgotten when idle since ``used``)."""

    __slots__ = ("entries", "total", "used")

    def __init__(self, windowed: bool) -> None:
        self.entries: deque[tuple[float, float]] | None = deque() if windowed else None
        self.total = 0.0
        self.used = 0.0

    def prune(self, now: float) -> None:
        entries = self.entries
        if entries and entries[0][0] <= now:
            while entries and entries[0][0] <= now:
                self.total -= entries.popleft()[1]
            if not entries:
                # Forget the rounding a running float sum picks up.
                self.total = 0.0

    def add(self, expires_at: float | None, weight: float) -> None:
        self.total += weight
        entries = self.entries
        if entries is None or expires_at is None:
            return
        if not entries or expires_at >= entries[-1][0]:
            entries.append((expires_at, weight))
        else:
            # Only when callers pass clocks that disagree; keep entries ordered.
            bisect.insort(entries, (expires_at, weight))


class MemoryStore(StateStore):
    """Counters and history in this process's memory, safe across threads and tasks.

    Expired entries are dropped when their key is next used, and every ``sweep_every`` seconds
    (of the ``now`` callers pass) for keys nobody uses any more, so memory stays bounded by
    the usage inside the windows.

    Args:
        history_ttl: Forget a session's history this many seconds after its last call
            (``None``: keep it while the process lives).
        idle_ttl: Forget a counter without a window this many seconds after its last use
            (``None``: keep it while the process lives).
        sweep_every: Seconds between sweeps of unused keys.
    """

    never_blocks = True  # a lock held for microseconds: the async twins run inline

    __slots__ = (
        "_history",
        "_history_ttl",
        "_idle_ttl",
        "_kv",
        "_kv_sweep",
        "_lock",
        "_members",
        "_next_sweep",
        "_series",
        "_sweep_every",
    )

    def __init__(self, *, history_ttl: float | None = DEFAULT_IDLE_TTL,
                 idle_ttl: float | None = DEFAULT_IDLE_TTL, sweep_every: float = 60.0) -> None:
        self._lock = threading.Lock()
        self._series: dict[str, _Series] = {}
        self._members: dict[str, dict[str, float]] = {}  # key -> {member: expires_at}
        self._history: dict[str, HistoryTally] = {}
        self._history_ttl = history_ttl
        self._idle_ttl = idle_ttl
        self._sweep_every = sweep_every
        self._next_sweep: float | None = None
        # key -> (JSON text, version, expires_at): text, so that readers get fresh copies.
        self._kv: dict[str, tuple[str, int, float | None]] = {}
        self._kv_sweep = 0.0

    def consume(
        self, counters: Sequence[Counter], *, now: float, commit: bool,
        deadline: float | None = None, record: HistoryEntry | None = None,
    ) -> list[CounterState]:
        """See :meth:`StateStore.consume`."""
        with self._lock:
            if deadline is not None and _perf() > deadline:
                raise StoreUnavailable("the deadline passed before the store was reached")
            self._maybe_sweep(now)
            found = []
            allowed = commit
            for counter in counters:
                peeked = self._peek_members(counter, now) if counter.members \
                    else self._peek(counter, now)
                if peeked[2]:
                    allowed = False
                found.append(peeked)
            states = []
            for counter, (series, used, hit, last_at) in zip(counters, found, strict=True):
                if counter.members:
                    if allowed:
                        self._hold(counter, now)
                    states.append(_member_state(counter, series, used, hit, last_at))
                    continue
                added = bool(counter.weight) and (allowed or counter.always)
                if added:
                    if series is None:  # unused before this call (or by an earlier counter)
                        series = self._series.get(counter.key)
                    if series is None:
                        series = self._series[counter.key] = _Series(counter.window is not None)
                        series.used = now
                    series.add(None if counter.window is None else now + counter.window,
                               counter.weight)
                states.append(_state(counter, series, used, hit, last_at, now, added))
            if record is not None:
                self._record(record.session, record.tool,
                             record.effect_for([hit for _, _, hit, _ in found]), now)
            return states

    def _peek(self, counter: Counter, now: float) -> tuple[Any, float, bool, float | None]:
        """A counter's series (None when unused), its usage before this call, whether this
        call would exceed it, and when its newest event happened."""
        series = self._series.get(counter.key)
        if series is None:
            return None, 0.0, exceeds(0.0, counter.weight, counter.limit), None
        entries = series.entries
        if entries:
            series.prune(now)
        series.used = now
        last_at = entries[-1][0] - counter.window if entries and counter.window else None
        total = series.total
        return series, total, exceeds(total, counter.weight, counter.limit) or (
            bool(counter.spacing) and spaced_out(counter, total, last_at, now)), last_at

    def _peek_members(self, counter: Counter, now: float
                      ) -> tuple[Any, float, bool, float | None]:
        """A member counter's members (None when it holds none), how many other calls hold,
        whether this call would exceed it, and when its newest member was held."""
        held = self._members.get(counter.key)
        if held is not None:
            _prune_members(held, now)
            if not held:
                del self._members[counter.key]
                held = None
        if held is None:
            return None, 0.0, exceeds(0.0, counter.cost, counter.limit), None
        used = float(len(held) - sum(member in held for member in counter.members))
        assert counter.window is not None  # members need a window
        return held, used, exceeds(used, counter.cost, counter.limit), \
            max(held.values()) - counter.window

    def _hold(self, counter: Counter, now: float) -> None:
        """Holds the counter's members until ``now + window`` (never earlier than they were)."""
        held = self._members.get(counter.key)
        if held is None:
            held = self._members[counter.key] = {}
        assert counter.window is not None
        expires_at = now + counter.window
        for member in counter.members:
            if held.get(member, -math.inf) < expires_at:
                held[member] = expires_at

    def release(self, counters: Sequence[Counter], *, deadline: float | None = None) -> None:
        """See :meth:`StateStore.release`."""
        with self._lock:
            if deadline is not None and _perf() > deadline:
                raise StoreUnavailable("the deadline passed before the store was reached")
            for counter in counters:
                held = self._members.get(counter.key)
                if held is None:
                    continue
                for member in counter.members:
                    held.pop(member, None)
                if not held:
                    del self._members[counter.key]

    async def arelease(self, counters: Sequence[Counter], *,
                       deadline: float | None = None) -> None:
        """See :meth:`StateStore.release`. Runs inline."""
        self.release(counters, deadline=deadline)

    async def aconsume(
        self, counters: Sequence[Counter], *, now: float, commit: bool,
        deadline: float | None = None, record: HistoryEntry | None = None,
    ) -> list[CounterState]:
        """See :meth:`StateStore.consume`. Runs inline: the lock is held for microseconds."""
        return self.consume(counters, now=now, commit=commit, deadline=deadline, record=record)

    def record(self, session: str, tool: str, effect: str, *, now: float,
               deadline: float | None = None) -> None:
        """See :meth:`StateStore.record`."""
        with self._lock:
            if deadline is not None and _perf() > deadline:
                raise StoreUnavailable("the deadline passed before the store was reached")
            self._maybe_sweep(now)
            self._record(session, tool, effect, now)

    def _record(self, session: str, tool: str, effect: str, now: float) -> None:
        tally = self._history.get(session)
        if tally is None:
            tally = self._history[session] = HistoryTally()
        tally.add(tool, effect, now)

    async def arecord(self, session: str, tool: str, effect: str, *, now: float,
                      deadline: float | None = None) -> None:
        """See :meth:`StateStore.record`."""
        self.record(session, tool, effect, now=now, deadline=deadline)

    def history(self, session: str, *, deadline: float | None = None,
                tools: Collection[str] | None = None) -> SessionHistory:
        """See :meth:`StateStore.history`."""
        with self._lock:
            tally = self._history.get(session)
            return SessionHistory(session) if tally is None else tally.snapshot(session, tools)

    async def ahistory(self, session: str, *, deadline: float | None = None,
                       tools: Collection[str] | None = None) -> SessionHistory:
        """See :meth:`StateStore.history`."""
        return self.history(session, tools=tools)

    # -- key-value records ----------------------------------------------------------------

    def get(self, key: str) -> StoredValue | None:
        """See :meth:`StateStore.get`."""
        check_key(key)
        with self._lock:
            found = self._live(key, time.time())
        return None if found is None else StoredValue(key, decode_value(found[0]), *found[1:])

    async def aget(self, key: str) -> StoredValue | None:
        """See :meth:`StateStore.get`."""
        return self.get(key)

    def get_changed(self, key: str, known: StoredValue | None) -> StoredValue | None:
        """See :meth:`StateStore.get_changed`: an unchanged record is not decoded."""
        if type(key) is not str or not key:
            check_key(key)
        # One dict lookup needs no lock (a write replaces the entry whole); an expired entry
        # is dropped under it.
        found = self._kv.get(key)
        if found is None:
            return None
        if found[2] is not None and found[2] <= time.time():
            with self._lock:
                found = self._live(key, time.time())
            if found is None:
                return None
        if known is not None and known.version == found[1] and known.key == key \
                and known.expires_at == found[2]:
            return known
        return StoredValue(key, decode_value(found[0]), *found[1:])

    async def aget_changed(self, key: str, known: StoredValue | None) -> StoredValue | None:
        """See :meth:`StateStore.get_changed`."""
        return self.get_changed(key, known)

    def put(self, key: str, value: Mapping[str, Any], *, ttl: float | None) -> int:
        """See :meth:`StateStore.put`."""
        check_key(key)
        check_ttl(ttl)
        text = encode_value(value)
        with self._lock:
            now = time.time()
            found = self._live(key, now)
            version = 1 if found is None else found[1] + 1
            self._write(key, text, version, now, ttl)
            return version

    async def aput(self, key: str, value: Mapping[str, Any], *, ttl: float | None) -> int:
        """See :meth:`StateStore.put`."""
        return self.put(key, value, ttl=ttl)

    def compare_and_set(
        self, key: str, expected_version: int | None, value: Mapping[str, Any], *,
        ttl: float | None,
    ) -> bool:
        """See :meth:`StateStore.compare_and_set`."""
        check_key(key)
        check_ttl(ttl)
        check_version(expected_version)
        text = encode_value(value)
        with self._lock:
            now = time.time()
            found = self._live(key, now)
            current = None if found is None else found[1]
            if current != expected_version:
                return False
            self._write(key, text, 1 if current is None else current + 1, now, ttl)
            return True

    async def acompare_and_set(
        self, key: str, expected_version: int | None, value: Mapping[str, Any], *,
        ttl: float | None,
    ) -> bool:
        """See :meth:`StateStore.compare_and_set`."""
        return self.compare_and_set(key, expected_version, value, ttl=ttl)

    def delete(self, key: str) -> bool:
        """See :meth:`StateStore.delete`."""
        check_key(key)
        with self._lock:
            found = self._live(key, time.time())
            self._kv.pop(key, None)
            return found is not None

    async def adelete(self, key: str) -> bool:
        """See :meth:`StateStore.delete`."""
        return self.delete(key)

    def scan(self, prefix: str) -> list[StoredValue]:
        """See :meth:`StateStore.scan`."""
        with self._lock:
            now = time.time()
            rows = [
                (key, found)
                for key in sorted(k for k in self._kv if k.startswith(prefix))
                if (found := self._live(key, now)) is not None
            ]
        return [StoredValue(key, decode_value(text), version, expires_at)
                for key, (text, version, expires_at) in rows]

    async def ascan(self, prefix: str) -> list[StoredValue]:
        """See :meth:`StateStore.scan`."""
        return self.scan(prefix)

    def _live(self, key: str, now: float) -> tuple[str, int, float | None] | None:
        found = self._kv.get(key)
        if found is not None and found[2] is not None and found[2] <= now:
            del self._kv[key]
            return None
        return found

    def _write(self, key: str, text: str, version: int, now: float, ttl: float | None) -> None:
        self._kv[key] = (text, version, None if ttl is None else now + ttl)
        if now >= self._kv_sweep:
            self._kv_sweep = now + self._sweep_every
            for other in [k for k, (_, _, e) in self._kv.items() if e is not None and e <= now]:
                del self._kv[other]

    def close(self) -> None:
        """Drops all state."""
        with self._lock:
            self._series.clear()
            self._members.clear()
            self._history.clear()
            self._kv.clear()

    def _maybe_sweep(self, now: float) -> None:
        if self._next_sweep is None or now >= self._next_sweep:
            self._sweep(now)

    def _sweep(self, now: float) -> None:
        self._next_sweep = now + self._sweep_every
        idle_cutoff = None if self._idle_ttl is None else now - self._idle_ttl
        for key, series in list(self._series.items()):
            if series.entries is not None:
                series.prune(now)
                if not series.entries:
                    del self._series[key]
            elif idle_cutoff is not None and series.used <= idle_cutoff:
                del self._series[key]
        for key, held in list(self._members.items()):
            _prune_members(held, now)
            if not held:
                del self._members[key]
        if self._history_ttl is not None:
            cutoff = now - self._history_ttl
            for session, tally in list(self._history.items()):
                if tally.last_time is not None and tally.last_time <= cutoff:
                    del self._history[session]


def _state(counter: Counter, series: _Series | None, used: float, hit: bool,
           last_at: float | None, now: float, added: bool) -> CounterState:
    if not hit:  # the usual case: built without the named tuple's __new__ (a Python call)
        return _new(CounterState, (used, False, None, last_at))
    reset_at = None
    if series is not None and series.entries is not None \
            and exceeds(series.total, counter.weight, counter.limit):
        # Read after this call's writes: an attempt counted just now delays the reset too.
        reset_at = reset_time(series.entries, series.total, counter.weight, counter.limit)
    if counter.spacing:
        reset_at = spaced_reset(counter, used, reset_at, last_at, now, added)
    return CounterState(used, True, reset_at, last_at)


def _member_state(counter: Counter, held: dict[str, float] | None, used: float, hit: bool,
                  last_at: float | None) -> CounterState:
    if not hit:
        return CounterState(used, False, None, last_at)
    # Only the other calls' members can make room: this call's own count as its own.
    others = sorted(e for m, e in (held or {}).items() if m not in counter.members)
    return CounterState(used, True, reset_time(((e, 1.0) for e in others), used,
                                               counter.cost, counter.limit), last_at)


def _prune_members(held: dict[str, float], now: float) -> None:
    for member in [m for m, expires_at in held.items() if expires_at <= now]:
        del held[member]
