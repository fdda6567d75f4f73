"""User policies that hang cost their own thread, never the decision, the process or the
other policies."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from callwarden import Effect, Guard, Verdict, policy
from callwarden.engine.workers import Stuck, Workers

RELEASE = threading.Event()


@pytest.fixture(autouse=True)
def _release_hung_policies():
    RELEASE.clear()
    yield
    RELEASE.set()  # let this test's stuck threads end


@policy
def hangs(call):
    if call.tool == "hang":
        RELEASE.wait(120)
    return None


@policy
def allows_ok(call):
    return Verdict.allow() if call.tool == "ok" else None


def test_a_hung_policy_does_not_starve_the_others() -> None:
    """Once 32 hung calls pinned the shared pool and every later Python policy was denied."""
    hung = Guard(policies=[hangs], timeout="100ms")
    for _ in range(40):
        assert hung.check("hang", {}).code == "policy_timeout"
    other = Guard(policies=[allows_ok], default="deny", timeout="5s")
    decision = other.check("ok", {})
    assert decision.effect is Effect.ALLOW, decision.reasons


def test_a_hung_rule_does_not_deny_calls_it_does_not_select(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    guard = Guard.from_dict({"version": 1, "default": "deny", "timeout": "100ms", "rules": [
        {"id": "slow", "match": {"tool": "hang"}, "use": "test_workers:hangs"},
        {"id": "fine", "match": {"tool": "ok"}, "use": "test_workers:allows_ok"}]})
    for _ in range(20):
        assert guard.check("hang", {}).code == "policy_timeout"
    assert guard.check("ok", {}).effect is Effect.ALLOW


def test_a_rule_that_keeps_hanging_is_refused_without_taking_a_thread() -> None:
    workers = Workers(max_stuck=2)
    futures = [workers.submit("rule", RELEASE.wait, 120) for _ in range(2)]
    for future in futures:
        workers.overran("rule", future)
    with pytest.raises(Stuck):
        workers.submit("rule", RELEASE.wait, 120)
    assert workers.submit("other", lambda: 42).result(timeout=30) == 42
    RELEASE.set()
    for future in futures:
        future.result(timeout=30)
    assert workers.submit("rule", lambda: "again").result(timeout=30) == "again"


def test_the_refusal_of_a_stuck_rule_names_it() -> None:
    guard = Guard(policies=[hangs], timeout="50ms")
    codes = [guard.check("hang", {}) for _ in range(4)]
    assert all(d.effect is Effect.DENY and d.code == "policy_timeout" for d in codes)
    assert "still running past their deadline" in codes[-1].reasons[0].message


class _Exit(BaseException):
    pass


@policy
def raises_base(call):
    if call.tool == "exit":
        raise SystemExit(3)
    raise _Exit("custom")


@pytest.mark.parametrize("tool", ["exit", "custom"])
def test_a_policy_raising_a_base_exception_is_a_policy_error(tool: str) -> None:
    decision = Guard(policies=[raises_base]).check(tool, {})
    assert decision.effect is Effect.DENY and decision.code == "policy_error"


@pytest.mark.parametrize("tool", ["exit", "custom"])
async def test_an_async_policy_raising_a_base_exception_is_a_policy_error(tool: str) -> None:
    @policy
    async def araises(call):
        if call.tool == "exit":
            raise SystemExit(3)
        raise _Exit("custom")

    decision = await Guard(policies=[araises]).acheck(tool, {})
    assert decision.effect is Effect.DENY and decision.code == "policy_error"


async def test_acheck_of_a_hung_sync_policy_answers_at_the_deadline() -> None:
    guard = Guard(policies=[hangs], timeout="100ms")
    results = await asyncio.gather(*(guard.acheck("hang", {}) for _ in range(10)))
    assert {d.code for d in results} == {"policy_timeout"}
    other = Guard(policies=[allows_ok], default="deny", timeout="5s")
    assert (await other.acheck("ok", {})).effect is Effect.ALLOW


SLEEPER = """\
import time
from callwarden import policy

@policy
def sleeps(call):
    time.sleep(60)
"""


@pytest.mark.parametrize("command", ["check", "decide"])
def test_the_cli_does_not_wait_for_a_hung_policy(tmp_path: Path, command: str) -> None:
    """A rule sleeping 60 s once kept `callwarden check` alive for the whole sleep."""
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    (tmp_path / "p.yaml").write_text("version: 1\ntimeout: 200ms\nrules:\n"
                                     "  - {id: slow, use: 'sleeper.py:sleeps'}\n")
    done = subprocess.run([sys.executable, "-m", "callwarden", command, "-p",
                           str(tmp_path / "p.yaml"), "-t", "x"],
                          capture_output=True, text=True, timeout=45)
    assert done.returncode == 10, done.stderr
    assert "policy_timeout" in done.stdout


def test_a_hook_does_not_wait_for_a_hung_policy(tmp_path: Path) -> None:
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    (tmp_path / "p.yaml").write_text("version: 1\ntimeout: 200ms\nrules:\n"
                                     "  - {id: slow, use: 'sleeper.py:sleeps'}\n")
    payload = '{"hook_event_name": "PreToolUse", "tool_name": "Bash", ' \
              '"tool_input": {"command": "ls"}}'
    done = subprocess.run([sys.executable, "-m", "callwarden", "hook", "claude-code", "-p",
                           str(tmp_path / "p.yaml")], input=payload, capture_output=True,
                          text=True, timeout=45)
    assert done.returncode == 0 and '"permissionDecision": "deny"' in done.stdout, done
