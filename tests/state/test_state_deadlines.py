"""The policy deadline bounds the store: no waiting past it, no counting after it."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from _state_support import RedisServer, SlowProxy, unique_prefix

from callwarden import Effect, Guard
from callwarden.state import Counter, MemoryStore, SQLiteStore, StoreUnavailable
from callwarden.state._redis import RedisStore

STORE_TIMEOUT = 5.0
# The store is freed this long after the call starts, well inside its own timeout: a check
# that waited on the store instead of giving up at its 100 ms deadline would then succeed.
RELEASED_AFTER = STORE_TIMEOUT / 2
FAILED_CLOSED = {"state_unavailable", "policy_timeout"}
BUDGET = {"version": 1, "timeout": "100ms", "rules": [{"id": "b", "limit": {"calls": 1}}]}


def locked(path: Path, mode: str = "EXCLUSIVE") -> sqlite3.Connection:
    blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    blocker.execute(f"BEGIN {mode}")
    return blocker


def released_later(release: Any) -> threading.Timer:
    timer = threading.Timer(RELEASED_AFTER, release)
    timer.start()
    return timer


def test_check_on_a_locked_sqlite_returns_within_the_policy_deadline(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = SQLiteStore(path, timeout=STORE_TIMEOUT)
    guard = Guard.from_dict(BUDGET, state=store)
    store.consume([], now=0.0, commit=False)  # creates the file and its tables
    blocker = locked(path)
    timer = released_later(lambda: blocker.execute("ROLLBACK"))
    try:
        d = guard.check("t", {})
    finally:
        timer.join()
        blocker.close()
    assert d.effect is Effect.DENY and d.reasons[0].code in FAILED_CLOSED
    store.close()


def test_check_on_a_frozen_redis_returns_within_the_policy_deadline(
        own_redis_server: RedisServer) -> None:
    store = RedisStore(own_redis_server.url, prefix=unique_prefix(), timeout=STORE_TIMEOUT)
    guard = Guard.from_dict(BUDGET, state=store)
    store.consume([Counter("warm", 1, None)], now=0.0, commit=False)  # opens a connection
    own_redis_server.pause()
    timer = released_later(own_redis_server.resume)
    try:
        d = guard.check("t", {})
    finally:
        timer.join()
    assert d.effect is Effect.DENY and d.reasons[0].code in FAILED_CLOSED
    # It recovers. (The frozen call's script may have run once the server resumed: the
    # documented Redis overcount window, so the budget of 1 may be used.)
    assert guard.check("t", {}).reasons[0].code not in FAILED_CLOSED
    store.close()


def test_history_read_on_a_frozen_redis_returns_within_the_policy_deadline(
        own_redis_server: RedisServer) -> None:
    store = RedisStore(own_redis_server.url, prefix=unique_prefix(), timeout=STORE_TIMEOUT)
    guard = Guard.from_dict({"version": 1, "timeout": "100ms", "rules": [
        {"id": "h", "if": "'x' in history.tools", "effect": "deny"}]}, state=store)
    store.history("warm")
    own_redis_server.pause()
    timer = released_later(own_redis_server.resume)
    try:
        d = guard.check("t", {}, session="s")
    finally:
        timer.join()
    assert d.effect is Effect.DENY and d.reasons[0].code in FAILED_CLOSED
    store.close()


@pytest.fixture
def proxy(redis_server: RedisServer) -> Any:
    slow = SlowProxy(redis_server.port)
    yield slow
    slow.close()


def _check_while(proxy: SlowProxy, guard: Guard, misbehave: Any) -> Any:
    """Checks one call while the proxy misbehaves; released after RELEASED_AFTER, so a check
    that waited on the store rather than its 100 ms deadline would see a working server."""
    misbehave()
    timer = released_later(proxy.release)
    try:
        decision = guard.check("t", {})
        released_before_it_returned = proxy.released.is_set()
    finally:
        timer.join()
    return decision, released_before_it_returned


@pytest.mark.parametrize("store_timeout", [STORE_TIMEOUT, 3600.0])
def test_a_connect_that_hangs_ends_at_the_policy_deadline(proxy: SlowProxy,
                                                          store_timeout: float) -> None:
    # ?timeout=3600 used to make every check wait half an hour for a connect.
    guard = Guard.from_dict({**BUDGET, "state": f"{proxy.url}?timeout={store_timeout:g}"
                                                  f"&prefix={unique_prefix()}"})
    d, waited = _check_while(proxy, guard, proxy.refuse_until_released)
    assert d.effect is Effect.DENY and d.reasons[0].code in FAILED_CLOSED
    assert not waited
    guard.close()


def test_a_handshake_that_stalls_ends_at_the_policy_deadline(proxy: SlowProxy) -> None:
    store = RedisStore(proxy.url, prefix=unique_prefix(), timeout=STORE_TIMEOUT)
    guard = Guard.from_dict(BUDGET, state=store)  # no connection yet: the first check opens one
    d, waited = _check_while(proxy, guard, proxy.stall)
    assert d.effect is Effect.DENY and d.reasons[0].code in FAILED_CLOSED
    assert not waited
    assert guard.check("t", {}).reasons[0].code not in FAILED_CLOSED  # it recovers
    store.close()


def test_a_reply_that_trickles_in_ends_at_the_policy_deadline(proxy: SlowProxy) -> None:
    # One byte every 50 ms never trips a 5 s read timeout: only the deadline ends the wait.
    store = RedisStore(proxy.url, prefix=unique_prefix(), timeout=STORE_TIMEOUT)
    guard = Guard.from_dict(BUDGET, state=store)
    store.consume([Counter("warm", 1, None)], now=0.0, commit=False)  # opens a connection
    d, waited = _check_while(proxy, guard, proxy.trickle)
    assert d.effect is Effect.DENY and d.reasons[0].code in FAILED_CLOSED
    assert not waited
    store.close()


async def test_consume_after_the_deadline_counts_nothing(api) -> None:
    budget = Counter("b", 5, None)
    with pytest.raises(StoreUnavailable):
        await api.consume([budget], now=1.0, deadline=time.perf_counter() - 1)
    [state] = await api.consume([budget], now=2.0, commit=False)
    assert state.used == 0.0


class _LateLock:
    """A connection whose write lock is granted only after the caller's deadline."""

    def __init__(self, db: sqlite3.Connection, clock: dict[str, float]) -> None:
        self._db = db
        self._clock = clock

    def execute(self, sql: str, *args: Any) -> Any:
        result = self._db.execute(sql, *args)
        if sql.startswith("BEGIN IMMEDIATE"):
            self._clock["now"] += 10.0  # the wait for the lock outlived the deadline
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)


def test_sqlite_write_granted_the_lock_after_its_deadline_counts_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import callwarden.state._sqlite as sqlite_store

    store = SQLiteStore(tmp_path / "state.db")
    budget = Counter("b", 5, 60.0)
    store.consume([budget], now=1.0, commit=False)
    clock = {"now": 100.0}
    monkeypatch.setattr(sqlite_store, "_perf", lambda: clock["now"])
    real = store._connect()
    store._conn = _LateLock(real, clock)  # type: ignore[assignment]
    with pytest.raises(StoreUnavailable, match="deadline passed"):
        store.consume([budget], now=2.0, commit=True, deadline=105.0)
    store._conn = real
    monkeypatch.undo()
    [state] = store.consume([budget], now=3.0, commit=False)
    assert state.used == 0.0
    store.close()


async def test_async_check_that_timed_out_on_a_locked_sqlite_never_uses_budget(
        tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = SQLiteStore(path, timeout=STORE_TIMEOUT)
    guard = Guard.from_dict(BUDGET, state=store)
    store.consume([], now=0.0, commit=False)
    blocker = locked(path, "IMMEDIATE")
    try:
        d = await guard.acheck("t", {})
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert d.effect is Effect.DENY and d.reasons[0].code in FAILED_CLOSED
    # The worker thread the timed-out decision left behind holds the store until it is done;
    # once it is, the budget of 1 must still be whole.
    await asyncio.to_thread(store.consume, [], now=0.0, commit=False)
    assert guard.check("t", {}).allowed
    store.close()


async def test_the_memory_store_runs_inline_on_the_async_path(monkeypatch) -> None:
    import callwarden.engine.steps as steps

    def no_timer(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a memory store step was wrapped in a task and a timer")

    monkeypatch.setattr(steps.asyncio, "wait_for", no_timer)
    guard = Guard.from_dict({"version": 1, "rules": [{"id": "b", "limit": {"calls": 2}}]})
    effects = [(await guard.acheck("t", {})).effect for _ in range(3)]
    assert effects == [Effect.ALLOW, Effect.ALLOW, Effect.DENY]


class _SlowMemory(MemoryStore):
    """A store built on the memory store whose async twin waits on I/O of its own."""

    async def aconsume(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(RELEASED_AFTER)  # answers, but long after the 100 ms deadline
        return await super().aconsume(*args, **kwargs)


async def test_a_store_that_inherits_from_memory_is_awaited_within_the_deadline() -> None:
    guard = Guard.from_dict(BUDGET, state=_SlowMemory())
    decision = await guard.acheck("t", {})  # run inline, the sync twin would allow it
    assert decision.effect is Effect.DENY and decision.reasons[0].code in FAILED_CLOSED


async def test_a_free_sqlite_store_answers_the_async_path_on_the_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import callwarden.state._sqlite as sqlite_module

    store = SQLiteStore(tmp_path / "state.db", timeout=STORE_TIMEOUT)
    guard = Guard.from_dict({"version": 1, "rules": [{"id": "b", "limit": {"calls": 2}}]},
                            state=store)
    guard.check("warm-up", {})  # the first connection is made (in a thread, when async)
    hops: list[str] = []
    real = asyncio.to_thread

    async def counted(fn: Any, *args: Any, **kwargs: Any) -> Any:
        hops.append(fn.__name__)
        return await real(fn, *args, **kwargs)

    monkeypatch.setattr(sqlite_module.asyncio, "to_thread", counted)
    effects = [(await guard.acheck("t", {})).effect for _ in range(3)]
    assert effects == [Effect.ALLOW, Effect.DENY, Effect.DENY] and hops == []
    # Another process holding the write lock: the step waits for it in a worker thread, as
    # the sync call would, and counts exactly once when the lock is released.
    patient = Guard.from_dict({"version": 1, "timeout": "30s",
                               "rules": [{"id": "c", "limit": {"calls": 1}}]}, state=store)
    blocker = locked(store._path, "IMMEDIATE")
    timer = threading.Timer(0.2, lambda: (blocker.execute("ROLLBACK"), blocker.close()))
    timer.start()
    decision = await patient.acheck("u", {})
    timer.join()
    assert decision.effect is Effect.ALLOW and hops == ["consume"]
    assert [(await guard.acheck("t", {})).effect for _ in range(1)] == [Effect.DENY]
    store.close()


async def test_acheck_on_a_frozen_redis_ends_at_the_deadline_the_pipe_keeps(
        own_redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a single server the store's pipelined connection keeps each command's deadline, so
    the decision's store step sets no timer of its own: a frozen server still costs the
    decision its 100 ms deadline, not the store's 5 s timeout."""
    import callwarden.engine.steps as steps

    store = RedisStore(own_redis_server.url, prefix=unique_prefix(), timeout=STORE_TIMEOUT)
    guard = Guard.from_dict(BUDGET, state=store)
    await store.aconsume([Counter("warm", 1, None)], now=0.0, commit=False)  # opens the pipe

    timers: list[Any] = []
    real = asyncio.timeout

    def counted(delay: Any) -> Any:
        timers.append(delay)
        return real(delay)

    monkeypatch.setattr(steps.asyncio, "timeout", counted)
    own_redis_server.pause()
    resumed = asyncio.Event()
    asyncio.get_running_loop().call_later(RELEASED_AFTER, lambda: (
        own_redis_server.resume(), resumed.set()))
    try:
        decision = await guard.acheck("t", {})
        resumed_before_it_returned = resumed.is_set()
    finally:
        await resumed.wait()
    assert decision.effect is Effect.DENY and decision.reasons[0].code in FAILED_CLOSED
    assert not resumed_before_it_returned and timers == []
    monkeypatch.undo()
    assert (await guard.acheck("t", {})).reasons[0].code not in FAILED_CLOSED  # it recovers
    await store.aclose()


class _SlowRedis(RedisStore):
    """A Redis store whose own async twin waits on something else first: no longer the
    method the store says ends its waits at the deadline."""

    async def aconsume(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(RELEASED_AFTER)
        return await super().aconsume(*args, **kwargs)


async def test_a_redis_store_subclass_overriding_a_step_is_bounded_by_the_step(
        redis_server: RedisServer) -> None:
    store = _SlowRedis(redis_server.url, prefix=unique_prefix(), timeout=STORE_TIMEOUT)
    guard = Guard.from_dict(BUDGET, state=store)
    started = time.perf_counter()
    decision = await guard.acheck("t", {})
    assert decision.effect is Effect.DENY and decision.reasons[0].code in FAILED_CLOSED
    assert time.perf_counter() - started < RELEASED_AFTER  # the step's timer ended it
    await store.aclose()
