from __future__ import annotations

import os
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


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


# tests/envs/<name> need packages that conflict with the main environment's (e.g. mcp<2 for
# autogen-ext's MCP client): scripts/test.sh runs each in its own virtualenv, with
# CALLWARDEN_TEST_ENV=<name>; the main run leaves them to it.
_ENV = os.environ.get("CALLWARDEN_TEST_ENV")
collect_ignore_glob = [f"envs/{name}" for name in ("autogen_mcp",) if name != (_ENV or "").replace("-", "_")]
