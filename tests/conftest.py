from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
STATE_TESTS = Path(__file__).parent / "state"  # the real Redis helpers live there


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture(autouse=True, scope="session")
def _approvals_key(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The approvals key of the test run (not the user's): set in the environment, so the
    processes the tests start seal and check approval records with the same key."""
    os.environ.setdefault("CALLWARDEN_APPROVALS_KEY_FILE",
                          str(tmp_path_factory.mktemp("approvals-key") / "approvals.key"))
    # `callwarden hook` processes the tests start decide by themselves, unless a test asks for
    # the warm worker (tests/adapters/test_hook_worker.py), so that none is left behind.
    os.environ.setdefault("CALLWARDEN_HOOK_WORKER", "0")


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One real 3-master Redis Cluster for the test session (tests/state/_cluster_support.py),
    for the state-store and the service tests alike; tests isolate themselves by key prefix."""
    if str(STATE_TESTS) not in sys.path:
        sys.path.insert(0, str(STATE_TESTS))
    from _cluster_support import RedisCluster  # needs redis: only when a test asks for it

    cluster = RedisCluster(tmp_path_factory.mktemp("redis-cluster"))
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


# tests/envs/<name> need packages that conflict with the main environment's (e.g. mcp<2 for
# autogen-ext's MCP client): scripts/test.sh runs each in its own virtualenv, with
# CALLWARDEN_TEST_ENV=<name>; the main run leaves them to it.
_ENV = os.environ.get("CALLWARDEN_TEST_ENV")
_ENVS = ("autogen_mcp", "crewai", "semantic_kernel")
collect_ignore_glob = [f"envs/{name}" for name in _ENVS if name != (_ENV or "").replace("-", "_")]
