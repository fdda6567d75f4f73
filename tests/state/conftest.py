"""Fixtures for the state stores: a real redis-server (and the session's Redis Cluster, see
tests/conftest.py), and one store of each kind per test."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from _state_support import Api, RedisServer, unique_prefix

from callwarden.state import MemoryStore, SQLiteStore, StateStore
from callwarden.state._redis import RedisStore

STORE_KINDS = ["memory", "sqlite", "redis", "redis-cluster"]


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One redis-server for the whole test session; tests isolate themselves by key prefix."""
    with tempfile.TemporaryDirectory(prefix="callwarden-redis-") as directory:
        server = RedisServer(Path(directory))
        server.start()
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture
def own_redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of this test's own, free to be stopped, frozen and restarted."""
    directory = tmp_path / "redis"
    directory.mkdir()
    server = RedisServer(directory)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def make_store(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> StateStore:
    if kind == "memory":
        return MemoryStore()
    if kind == "sqlite":
        return SQLiteStore(tmp_path / "state.db")
    # The session's redis-server, or its Redis Cluster (tests/conftest.py).
    url = request.getfixturevalue("redis_server" if kind == "redis" else "redis_cluster").url
    # A generous deadline: these tests are about atomicity, and a loaded CI machine can take
    # longer than the default 0.5 s to open 64 pooled connections at once (with two busy loops
    # beside the suite, one connect once outlasted 2.5 s). The failure tests build their own
    # stores with short deadlines.
    return RedisStore(url, prefix=unique_prefix(), timeout=30.0)


@pytest.fixture(params=STORE_KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StateStore]:
    """A fresh store of each kind; closed in the test's event loop."""
    instance = make_store(request.param, request, tmp_path)
    try:
        yield instance
    finally:
        await instance.aclose()


@pytest.fixture(params=["sync", "async"])
def api(request: pytest.FixtureRequest, store: StateStore) -> Api:
    """The store under test, called the sync or the async way."""
    return Api(store, request.param)
