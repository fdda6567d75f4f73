"""Failing closed: an unreachable, frozen or locked store raises StoreUnavailable, then recovers."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest
from _state_support import RedisServer, unique_prefix

from callwarden.state import Counter, SQLiteStore, StoreUnavailable
from callwarden.state._redis import RedisStore

COUNTER = [Counter("k", 100, 60.0)]
TIMEOUT = 0.2
# Generous: proves the call gives up near its timeout instead of hanging, on a loaded machine.
DEADLINE = 10 * TIMEOUT


def test_redis_down_raises_store_unavailable_within_the_deadline(
    own_redis_server: RedisServer,
) -> None:
    with RedisStore(own_redis_server.url, timeout=TIMEOUT) as store:
        store.consume(COUNTER, now=1.0, commit=True)
        own_redis_server.stop()
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match="Redis store"):
            store.consume(COUNTER, now=2.0, commit=True)
        assert time.monotonic() - started < DEADLINE


def test_redis_store_recovers_when_the_server_comes_back(own_redis_server: RedisServer) -> None:
    with RedisStore(own_redis_server.url, timeout=TIMEOUT) as store:
        store.consume(COUNTER, now=1.0, commit=True)
        own_redis_server.stop()
        with pytest.raises(StoreUnavailable):
            store.consume(COUNTER, now=2.0, commit=True)
        own_redis_server.start()
        [state] = store.consume(COUNTER, now=3.0, commit=True)
        assert state.used == 1.0  # persisted across the restart, and the store reconnected


async def test_redis_down_raises_store_unavailable_async_then_recovers(
    own_redis_server: RedisServer,
) -> None:
    store = RedisStore(own_redis_server.url, timeout=TIMEOUT)
    try:
        await store.aconsume(COUNTER, now=1.0, commit=True)
        own_redis_server.stop()
        started = time.monotonic()
        with pytest.raises(StoreUnavailable):
            await store.aconsume(COUNTER, now=2.0, commit=True)
        assert time.monotonic() - started < DEADLINE
        own_redis_server.start()
        [state] = await store.aconsume(COUNTER, now=3.0, commit=True)
        assert state.used == 1.0
    finally:
        await store.aclose()


def test_frozen_redis_raises_store_unavailable_within_the_deadline(
    own_redis_server: RedisServer,
) -> None:
    with RedisStore(own_redis_server.url, timeout=TIMEOUT) as store:
        store.consume(COUNTER, now=1.0, commit=True)
        own_redis_server.pause()
        try:
            started = time.monotonic()
            with pytest.raises(StoreUnavailable):
                store.consume(COUNTER, now=2.0, commit=True)
            assert time.monotonic() - started < DEADLINE
        finally:
            own_redis_server.resume()
        [state] = store.consume(COUNTER, now=3.0, commit=False)
        assert not state.exceeded


async def test_frozen_redis_raises_store_unavailable_async(own_redis_server: RedisServer) -> None:
    store = RedisStore(own_redis_server.url, timeout=TIMEOUT)
    try:
        await store.aconsume(COUNTER, now=1.0, commit=True)
        own_redis_server.pause()
        try:
            started = time.monotonic()
            with pytest.raises(StoreUnavailable):
                await store.aconsume(COUNTER, now=2.0, commit=True)
            assert time.monotonic() - started < DEADLINE
        finally:
            own_redis_server.resume()
        [state] = await store.aconsume(COUNTER, now=3.0, commit=False)
        assert not state.exceeded
    finally:
        await store.aclose()


def test_redis_history_down_raises_store_unavailable(own_redis_server: RedisServer) -> None:
    with RedisStore(own_redis_server.url, timeout=TIMEOUT) as store:
        own_redis_server.stop()
        with pytest.raises(StoreUnavailable):
            store.record("s", "bash", "allow", now=1.0)
        with pytest.raises(StoreUnavailable):
            store.history("s")


def test_redis_store_reloads_its_script_after_a_flush(own_redis_server: RedisServer) -> None:
    with RedisStore(own_redis_server.url) as store:
        store.consume(COUNTER, now=1.0, commit=True)
        own_redis_server.client().script_flush()
        [state] = store.consume(COUNTER, now=2.0, commit=True)
        assert state.used == 1.0


def test_redis_consume_is_one_round_trip(own_redis_server: RedisServer) -> None:
    """Each consume, with a budget and a rate counter, is one EVALSHA and nothing else."""
    counters = [Counter("budget", 1000, None), Counter("rate", 1000, 60.0)]
    admin = own_redis_server.client()
    with RedisStore(own_redis_server.url) as store:
        store.consume(counters, now=1.0, commit=True)  # loads the script, opens the connection
        before = admin.info("commandstats")
        for i in range(50):
            store.consume(counters, now=2.0 + i, commit=True)
        after = admin.info("commandstats")
    client_commands = {"cmdstat_evalsha", "cmdstat_eval", "cmdstat_script", "cmdstat_hello"}
    calls = {
        name: after[name]["calls"] - before.get(name, {"calls": 0})["calls"]
        for name in client_commands & after.keys()
    }
    assert calls == {"cmdstat_evalsha": 50} | {
        name: 0 for name in calls.keys() - {"cmdstat_evalsha"}
    }


def test_locked_sqlite_raises_store_unavailable_within_the_deadline(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with SQLiteStore(path, timeout=TIMEOUT) as store:
        store.consume(COUNTER, now=1.0, commit=True)
        blocker = sqlite3.connect(path, isolation_level=None)
        try:
            blocker.execute("BEGIN IMMEDIATE")
            started = time.monotonic()
            with pytest.raises(StoreUnavailable, match="locked"):
                store.consume(COUNTER, now=2.0, commit=True)
            assert time.monotonic() - started < DEADLINE
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()


def test_sqlite_store_recovers_when_the_lock_is_released(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with SQLiteStore(path, timeout=TIMEOUT) as store:
        store.consume(COUNTER, now=1.0, commit=True)
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        with pytest.raises(StoreUnavailable):
            store.consume(COUNTER, now=2.0, commit=True)
        blocker.execute("ROLLBACK")
        blocker.close()
        [state] = store.consume(COUNTER, now=3.0, commit=True)
        assert state.used == 1.0  # the failed call counted nothing


def test_unopenable_sqlite_path_raises_store_unavailable(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "missing" / "state.db", timeout=TIMEOUT) as store:
        with pytest.raises(StoreUnavailable, match="unable to open"):
            store.consume(COUNTER, now=1.0, commit=True)
        with pytest.raises(StoreUnavailable):
            store.history("s")


def test_sqlite_store_recovers_once_the_path_can_be_opened(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "missing" / "state.db", timeout=TIMEOUT) as store:
        with pytest.raises(StoreUnavailable):
            store.consume(COUNTER, now=1.0, commit=True)
        (tmp_path / "missing").mkdir()
        [state] = store.consume(COUNTER, now=2.0, commit=True)
        assert state == state.__class__(0.0, False, None)


async def test_locked_sqlite_raises_store_unavailable_async(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = SQLiteStore(path, timeout=TIMEOUT)
    try:
        await store.aconsume(COUNTER, now=1.0, commit=True)
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(StoreUnavailable):
                await store.arecord("s", "bash", "allow", now=2.0)
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
    finally:
        await store.aclose()


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_text_that_is_not_unicode_raises_store_unavailable(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A lone surrogate (from a broken JSON decoder, say) fails closed instead of crashing."""
    if kind == "sqlite":
        store: SQLiteStore | RedisStore = SQLiteStore(tmp_path / "state.db")
    else:
        store = RedisStore(request.getfixturevalue("redis_server").url, prefix=unique_prefix())
    with store:
        with pytest.raises(StoreUnavailable):
            store.consume([Counter("k\ud800", 1, None)], now=1.0, commit=True)
        with pytest.raises(StoreUnavailable):
            store.record("s\ud800", "bash", "allow", now=1.0)
        [state] = store.consume(COUNTER, now=2.0, commit=True)
    assert state.used == 0.0


async def test_text_that_is_not_unicode_fails_alone_on_the_pipelined_redis(
        redis_server: RedisServer) -> None:
    """Over the pipelined connection, a consume that cannot be written fails closed alone:
    the consumes sent in the same turn still get their own replies."""
    store = RedisStore(redis_server.url, prefix=unique_prefix())
    try:
        good = [Counter("fine", 5, None)]
        results = await asyncio.gather(
            store.aconsume(good, now=1.0, commit=True),
            store.aconsume([Counter("k\ud800", 1, None)], now=1.0, commit=True),
            store.aconsume(good, now=1.0, commit=True), return_exceptions=True)
        assert isinstance(results[1], StoreUnavailable)
        assert [r[0].used for r in (results[0], results[2])] == [0.0, 1.0], results
        [state] = await store.aconsume(good, now=2.0, commit=True)
        assert state.used == 2.0
    finally:
        await store.aclose()


def test_callwardens_own_state_folder_is_made_private(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    path = tmp_path / "state" / "callwarden" / "state.db"
    with SQLiteStore(path, timeout=TIMEOUT) as store:
        store.consume(COUNTER, now=1.0, commit=True)
    assert path.exists()
    assert (path.parent.stat().st_mode & 0o777) == 0o700


SLOT = [Counter("slots", 3, 600.0, members=("call-1",))]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_releasing_on_a_redis_that_is_down_raises_store_unavailable(
    own_redis_server: RedisServer, mode: str,
) -> None:
    store = RedisStore(own_redis_server.url, timeout=TIMEOUT)
    try:
        store.consume(SLOT, now=1.0, commit=True)
        own_redis_server.stop()
        with pytest.raises(StoreUnavailable, match="Redis store"):
            if mode == "sync":
                store.release(SLOT)
            else:
                await store.arelease(SLOT)
    finally:
        await store.aclose()


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_release_past_its_deadline_raises_and_lets_nothing_go(store, mode: str) -> None:
    store.consume(SLOT, now=1.0, commit=True)
    late = time.perf_counter() - 1.0
    with pytest.raises(StoreUnavailable):
        if mode == "sync":
            store.release(SLOT, deadline=late)
        else:
            await store.arelease(SLOT, deadline=late)
    [state] = store.consume([Counter("slots", 3, 600.0, members=("other",))], now=2.0,
                            commit=False)
    assert state.used == 1.0
