"""Exactly once across crashes: a process killed (-9) between "approved" and "done", or between
"ran" and "recorded", and the run resumed in a new process — through Guard.run, a LangGraph
checkpoint and an OpenAI Agents ``RunState``, on SQLite and on a real redis-server. The call is
never run a second time without a new decision, a consumed approval never runs it again, and
the audit log shows that it was in doubt."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _state_support import shared_store_url

WORKER = Path(__file__).parent / "_once_worker.py"
SRC = Path(__file__).parents[2] / "src"


@pytest.fixture(params=["sqlite", "redis"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return shared_store_url(request.param, request, tmp_path, "&timeout=30")


def worker(*argv: str, folder: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run([sys.executable, str(WORKER), *argv], capture_output=True, text=True,
                          env=env, cwd=folder, timeout=180, check=False)


def said(done: subprocess.CompletedProcess[str]) -> list[str]:
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def executions(folder: Path) -> int:
    path = folder / "executions.txt"
    return len(path.read_text(encoding="utf-8").splitlines()) if path.exists() else 0


def in_doubt_events(folder: Path) -> list[dict[str, object]]:
    """The decisions the audit log recorded with the in-doubt reason."""
    events = [json.loads(line) for line in
              (folder / "audit.jsonl").read_text(encoding="utf-8").splitlines() if line]
    return [e for e in events if e.get("type") == "decision"
            and any(r.get("code") == "in_doubt" for r in e.get("reasons", ()))]


def approve(request_id: str, url: str, folder: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-m", "callwarden", "approvals", "approve",
                           request_id, "--state", url, "--by", "carol"], capture_output=True,
                          text=True, env=env, cwd=folder, timeout=120, check=False)
    assert done.returncode == 0, done.stderr


def test_a_call_killed_after_it_ran_is_in_doubt_and_not_run_again(url: str,
                                                                   tmp_path: Path) -> None:
    killed = worker("run", url, str(tmp_path), "call-1", "--amount", "50", "--then", "die",
                    folder=tmp_path)
    assert killed.returncode == -signal.SIGKILL and executions(tmp_path) == 1
    resumed = said(worker("run", url, str(tmp_path), "call-1", "--amount", "50",
                          folder=tmp_path))
    assert resumed[0] == "pending" and resumed[2] == "in_doubt"
    assert executions(tmp_path) == 1
    assert said(worker("run", url, str(tmp_path), "call-1", "--amount", "50",
                       folder=tmp_path))[:2] == resumed[:2]  # asked again: the same request
    assert executions(tmp_path) == 1 and len(in_doubt_events(tmp_path)) == 2
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    listed = subprocess.run([sys.executable, "-m", "callwarden", "approvals", "list",
                             "--state", url], capture_output=True, text=True, env=env,
                            cwd=tmp_path, timeout=120, check=False)
    assert "IN DOUBT" in listed.stdout
    # A person who knows it did not go through approves it: it runs once more, then is done.
    approve(resumed[1], url, tmp_path)
    assert said(worker("run", url, str(tmp_path), "call-1", "--amount", "50",
                       folder=tmp_path)) == ["ran"]
    assert said(worker("run", url, str(tmp_path), "call-1", "--amount", "50",
                       folder=tmp_path)) == ["ran"]  # closed: a new attempt of a done call
    assert executions(tmp_path) == 3


def test_a_call_killed_between_approved_and_done_never_runs_on_the_old_approval(
        url: str, tmp_path: Path) -> None:
    asked = said(worker("run", url, str(tmp_path), "call-1", folder=tmp_path))
    assert asked[0] == "pending"
    approve(asked[1], url, tmp_path)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    running = subprocess.Popen([sys.executable, str(WORKER), "run", url, str(tmp_path),
                                "call-1", "--approval", asked[1], "--then", "hang"],
                               env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while executions(tmp_path) == 0:  # the tool is running: kill -9 the process now
            assert running.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        running.kill()
        running.wait(timeout=60)
    # Whoever resumes it, with the approval or without, is asked anew: it may have happened.
    with_approval = said(worker("run", url, str(tmp_path), "call-1", "--approval", asked[1],
                                folder=tmp_path))
    without = said(worker("run", url, str(tmp_path), "call-1", folder=tmp_path))
    assert with_approval[0] == "pending" and with_approval[2] == "in_doubt"
    assert without[:2] == with_approval[:2] and with_approval[1] != asked[1]
    assert executions(tmp_path) == 1 and in_doubt_events(tmp_path)


def test_langgraph_resumed_from_its_checkpoint_after_a_kill_asks_before_paying_again(
        url: str, tmp_path: Path) -> None:
    first = said(worker("langgraph", url, str(tmp_path), "first", folder=tmp_path))
    assert first[0] == "interrupt" and first[2] == "asked"
    killed = worker("langgraph", url, str(tmp_path), "approve", "--then", "die", folder=tmp_path)
    assert killed.returncode == -signal.SIGKILL and executions(tmp_path) == 1
    # The checkpoint still holds the approval the first attempt was resumed with: it must not
    # approve the call again.
    resumed = said(worker("langgraph", url, str(tmp_path), "resume", folder=tmp_path))
    assert resumed[0] == "interrupt" and resumed[2] == "in_doubt" and resumed[1] != first[1]
    again = said(worker("langgraph", url, str(tmp_path), "approve", folder=tmp_path))
    assert again[:3] == resumed[:3] and executions(tmp_path) == 1  # a plain "yes" is not one
    refused = worker("langgraph", url, str(tmp_path), "answer-no", folder=tmp_path)
    assert said(refused)[0] == "done" and "went through before the crash" in refused.stdout
    assert executions(tmp_path) == 1 and in_doubt_events(tmp_path)


def test_langgraph_runs_a_call_in_doubt_once_a_person_approves_that_request(
        url: str, tmp_path: Path) -> None:
    said(worker("langgraph", url, str(tmp_path), "first", folder=tmp_path))
    worker("langgraph", url, str(tmp_path), "approve", "--then", "die", folder=tmp_path)
    said(worker("langgraph", url, str(tmp_path), "resume", folder=tmp_path))
    assert said(worker("langgraph", url, str(tmp_path), "answer-yes", folder=tmp_path)) == \
        ["done", '"paid"']
    assert executions(tmp_path) == 2  # the second run is the person's new decision


def test_openai_agents_resumed_from_its_run_state_after_a_kill_does_not_pay_again(
        url: str, tmp_path: Path) -> None:
    assert said(worker("agents", url, str(tmp_path), "first", folder=tmp_path)) == \
        ["interrupted", "1"]
    killed = worker("agents", url, str(tmp_path), "resume", "--then", "die", folder=tmp_path)
    assert killed.returncode == -signal.SIGKILL and executions(tmp_path) == 1
    # The saved state is replayed with the SDK's approval: the call is refused to the model,
    # and a person is asked, knowing it may have gone through.
    resumed = worker("agents", url, str(tmp_path), "resume", folder=tmp_path)
    assert said(resumed)[0] == "done" and executions(tmp_path) == 1
    assert "may already have run" in resumed.stdout and "is pending" in resumed.stdout
    assert in_doubt_events(tmp_path)
