"""Fixtures for the approval tests: a guard with ask and deny rules, stores of each kind, a clock."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

# The real redis-server helper lives with the state-store tests, the running service's with
# the service's (tests through callwarden serve).
sys.path.insert(0, str(Path(__file__).parent.parent / "state"))
sys.path.insert(0, str(Path(__file__).parent.parent / "serve"))

from _approval_support import POLICY, Clock
from _state_support import RedisServer, unique_prefix

from callwarden import Guard
from callwarden.approvals import Approvals
from callwarden.state import MemoryStore, SQLiteStore, StateStore
from callwarden.state._redis import RedisStore


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One real redis-server for the session; tests isolate themselves by key prefix."""
    with tempfile.TemporaryDirectory(prefix="callwarden-approvals-redis-") as directory:
        server = RedisServer(Path(directory))
        server.start()
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StateStore]:
    """A fresh store of each kind."""
    if request.param == "memory":
        instance: StateStore = MemoryStore()
    elif request.param == "sqlite":
        instance = SQLiteStore(tmp_path / "state.db")
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        instance = RedisStore(server.url, prefix=unique_prefix(), timeout=5.0)  # see tests/state
    try:
        yield instance
    finally:
        await instance.aclose()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def approvals(store: StateStore, clock: Clock) -> Approvals:
    """Approvals in each kind of store, on a clock the test moves."""
    return Approvals(store, ttl=600, clock=clock)


@pytest.fixture
def memory_approvals(clock: Clock) -> Approvals:
    """Approvals in memory, for tests about logic rather than storage."""
    return Approvals(MemoryStore(), ttl=600, clock=clock)


@pytest.fixture
def guard() -> Guard:
    """deploy asks; deploy to prod is denied; delete_* asks; rm is denied outright."""
    return Guard.from_dict(POLICY)
