"""Durability and bounded memory: what survives restarts, and what expires by itself."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from _state_support import RedisServer, unique_prefix

from callwarden.state import Counter, MemoryStore, SQLiteStore
from callwarden.state._redis import RedisStore

RATE = Counter("rate", 10, 60.0)
BUDGET = Counter("budget", 10, None, weight=2.5)


def test_sqlite_counts_survive_a_new_store_object(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "state.db") as first:
        first.consume([RATE, BUDGET], now=100.0, commit=True)
    with SQLiteStore(tmp_path / "state.db") as second:
        states = second.consume([RATE, BUDGET], now=101.0, commit=False)
    assert [s.used for s in states] == [1.0, 2.5]


def test_sqlite_history_survives_a_new_store_object(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "state.db") as first:
        first.record("s1", "bash", "deny", now=100.0)
    with SQLiteStore(tmp_path / "state.db") as second:
        assert second.history("s1").tool_effects == {"bash": {"deny": 1}}


def test_redis_counts_and_history_survive_a_server_restart(
    own_redis_server: RedisServer,
) -> None:
    with RedisStore(own_redis_server.url) as store:
        store.consume([RATE, BUDGET], now=100.0, commit=True)
        store.record("s1", "bash", "deny", now=100.0)
    own_redis_server.stop()
    own_redis_server.start()
    with RedisStore(own_redis_server.url) as store:
        states = store.consume([RATE, BUDGET], now=101.0, commit=False)
        history = store.history("s1")
    assert ([s.used for s in states], history.count) == ([1.0, 2.5], 1)


def test_redis_prefixes_keep_stores_apart(redis_server: RedisServer) -> None:
    with (
        RedisStore(redis_server.url, prefix=unique_prefix()) as one,
        RedisStore(redis_server.url, prefix=unique_prefix()) as other,
    ):
        one.consume([RATE], now=100.0, commit=True)
        [state] = other.consume([RATE], now=100.0, commit=False)
    assert state.used == 0.0


def test_sqlite_prefixes_keep_stores_apart(tmp_path: Path) -> None:
    with (
        SQLiteStore(tmp_path / "state.db", prefix="one_") as one,
        SQLiteStore(tmp_path / "state.db", prefix="other_") as other,
    ):
        one.consume([RATE], now=100.0, commit=True)
        [state] = other.consume([RATE], now=100.0, commit=False)
    assert state.used == 0.0


def test_sqlite_rejects_a_prefix_that_is_not_an_identifier(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="prefix"):
        SQLiteStore(tmp_path / "state.db", prefix="x; DROP TABLE y")


def test_redis_windowed_keys_expire_with_their_window(redis_server: RedisServer) -> None:
    prefix = unique_prefix()
    with RedisStore(redis_server.url, prefix=prefix) as store:
        store.consume([RATE], now=100.0, commit=True)
        client = store._client
        ttls = [client.pttl(key) for key in store._counter_keys(RATE)]
    assert all(0 < ttl <= 61_000 for ttl in ttls)


def test_redis_drops_expired_entries_when_the_key_is_used(redis_server: RedisServer) -> None:
    prefix = unique_prefix()
    with RedisStore(redis_server.url, prefix=prefix) as store:
        for i in range(5):
            store.consume([RATE], now=100.0 + i, commit=True)
        store.consume([RATE], now=200.0, commit=True)
        assert store._client.zcard(store._counter_keys(RATE)[0]) == 1


def test_memory_store_forgets_keys_whose_usage_expired() -> None:
    store = MemoryStore(sweep_every=60.0)
    for i in range(100):
        store.consume([Counter(f"k{i}", 10, 5.0)], now=100.0, commit=True)
    store.consume([Counter("other", 10, 5.0)], now=1000.0, commit=True)
    assert list(store._series) == ["other"]


def test_memory_store_forgets_old_sessions_with_a_history_ttl() -> None:
    store = MemoryStore(history_ttl=3600.0, sweep_every=60.0)
    store.record("old", "bash", "allow", now=0.0)
    store.consume([RATE], now=10_000.0, commit=True)
    assert store.history("old").count == 0


def test_sqlite_store_deletes_keys_whose_usage_expired(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with SQLiteStore(path, sweep_every=60.0) as store:
        for i in range(100):
            store.consume([Counter(f"k{i}", 10, 5.0)], now=100.0, commit=True)
        store.consume([Counter("other", 10, 5.0)], now=1000.0, commit=True)
    db = sqlite3.connect(path)
    try:
        rows = db.execute("SELECT count(*) FROM callwarden_entries").fetchone()[0]
        keys = db.execute("SELECT key FROM callwarden_counters").fetchall()
    finally:
        db.close()
    assert (rows, keys) == (1, [("other",)])


def test_sqlite_store_forgets_old_sessions_with_a_history_ttl(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "state.db", history_ttl=3600.0) as store:
        store.record("old", "bash", "allow", now=0.0)
        store.record("new", "bash", "allow", now=10_000.0)
        assert (store.history("old").count, store.history("new").count) == (0, 1)


def test_redis_history_expires_with_a_history_ttl(redis_server: RedisServer) -> None:
    prefix = unique_prefix()
    with RedisStore(redis_server.url, prefix=prefix, history_ttl=3600.0) as store:
        store.record("s1", "bash", "allow", now=0.0)
        assert 0 < store._client.pttl(store._history_key("s1")) <= 3_600_000
