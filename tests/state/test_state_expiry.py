"""Nothing a store keeps lives forever: idle counters and histories expire, refreshed on use."""

from __future__ import annotations

from pathlib import Path

import pytest
from _state_support import RedisServer, unique_prefix

from callwarden.state import (
    Counter,
    HistoryEntry,
    MemoryStore,
    SQLiteStore,
    StateStore,
    open_store,
)
from callwarden.state._redis import RedisStore

T = 1_000_000.0
DAY = 86400.0
WEEK = 7 * DAY


def budget(limit: float = 5) -> Counter:
    return Counter("budget", limit, None)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_counter_without_window_is_forgotten_after_a_week_idle(kind, tmp_path) -> None:
    store: StateStore = MemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "s.db")
    store.consume([budget()], now=T, commit=True)
    [state] = store.consume([budget()], now=T + WEEK + 61, commit=False)
    assert state.used == 0.0
    store.close()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_checking_a_counter_restarts_its_idle_time(kind, tmp_path) -> None:
    store: StateStore = MemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "s.db")
    store.consume([budget()], now=T, commit=True)
    store.consume([budget()], now=T + 6 * DAY, commit=False)
    [state] = store.consume([budget()], now=T + 12 * DAY, commit=False)
    assert state.used == 1.0
    store.close()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_session_history_is_forgotten_after_a_week_idle(kind, tmp_path) -> None:
    store: StateStore = MemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "s.db")
    store.record("s", "bash", "allow", now=T)
    store.record("other", "bash", "allow", now=T + WEEK + 61)  # a later write sweeps
    assert store.history("s").count == 0
    store.close()


def test_idle_ttl_is_configurable_by_url(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 's.db'}?idle_ttl=60")
    store.consume([budget()], now=T, commit=True)
    [state] = store.consume([budget()], now=T + 121, commit=False)
    assert state.used == 0.0
    store.close()


def test_idle_ttl_none_keeps_counters_forever(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 's.db'}?idle_ttl=none")
    store.consume([budget()], now=T, commit=True)
    [state] = store.consume([budget()], now=T + 10**9, commit=False)
    assert state.used == 1.0
    store.close()


def test_a_bad_ttl_option_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="idle_ttl"):
        open_store(f"sqlite:///{tmp_path / 's.db'}?idle_ttl=-1")


def _pttl(server: RedisServer, key: str) -> int:
    return int(server.client().pttl(key))


def test_redis_budget_without_window_expires_after_its_idle_ttl(
        redis_server: RedisServer) -> None:
    prefix = unique_prefix()
    with RedisStore(redis_server.url, prefix=prefix) as store:
        store.consume([budget()], now=T, commit=True)
        assert 0 < _pttl(redis_server, store._counter_keys(budget())[0]) <= WEEK * 1000


def test_redis_session_history_expires_after_its_ttl(redis_server: RedisServer) -> None:
    prefix = unique_prefix()
    with RedisStore(redis_server.url, prefix=prefix) as store:
        store.consume([], now=T, commit=True, record=HistoryEntry("s", "bash", "allow"))
        store.record("r", "bash", "allow", now=T)
        assert 0 < _pttl(redis_server, store._history_key("s")) <= WEEK * 1000
        assert 0 < _pttl(redis_server, store._history_key("r")) <= WEEK * 1000


def test_redis_checking_a_budget_refreshes_its_idle_ttl(redis_server: RedisServer) -> None:
    prefix = unique_prefix()
    with RedisStore(redis_server.url, prefix=prefix, idle_ttl=60) as store:
        key = store._counter_keys(budget())[0]
        store.consume([budget()], now=T, commit=True)
        redis_server.client().pexpire(key, 1000)
        store.consume([budget()], now=T, commit=False)
        assert _pttl(redis_server, key) > 1000


def test_redis_ttls_are_configurable_by_url(redis_server: RedisServer) -> None:
    prefix = unique_prefix()
    store = open_store(f"{redis_server.url}?prefix={prefix}&idle_ttl=60&history_ttl=30")
    with store:
        store.consume([budget()], now=T, commit=True, record=HistoryEntry("s", "t", "allow"))
        assert isinstance(store, RedisStore)
        assert 0 < _pttl(redis_server, store._counter_keys(budget())[0]) <= 60_000
        assert 0 < _pttl(redis_server, store._history_key("s")) <= 30_000


def slots(*members: str) -> Counter:
    return Counter("slots", 5, 600.0, members=members)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_members_whose_hold_ended_are_swept(kind, tmp_path) -> None:
    store: StateStore = MemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "s.db")
    store.consume([slots("a", "b")], now=T, commit=True)
    store.consume([budget()], now=T + 600 + 61, commit=True)  # a later write sweeps
    if isinstance(store, MemoryStore):
        assert store._members == {}
    else:
        db = store._connect()
        assert db.execute("SELECT count(*) FROM callwarden_members").fetchone() == (0,)
    store.close()


def test_redis_members_expire_with_their_newest_hold(redis_server: RedisServer) -> None:
    with RedisStore(redis_server.url, prefix=unique_prefix()) as store:
        key = store._counter_keys(slots("a"))[0]
        store.consume([slots("a")], now=T, commit=True)
        store.consume([slots("b")], now=T + 300, commit=True)
        # the newest hold's 600 s from the call that made it, plus a second's margin
        assert 590_000 < _pttl(redis_server, key) <= 601_000
