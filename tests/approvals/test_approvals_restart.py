"""A pending request survives the guard's process: made in one process, approved from a second
through the CLI, used in a third (SQLite and a real redis-server)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _state_support import shared_store_url

WORKER = Path(__file__).parent / "_approval_worker.py"
SRC = Path(__file__).parents[2] / "src"


def run(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=120, check=False)


@pytest.fixture(params=["sqlite", "redis"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return shared_store_url(request.param, request, tmp_path)


def make_request(url: str, cwd: Path) -> str:
    made = run(str(WORKER), "request", url, cwd=cwd)
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


def test_request_made_in_one_process_is_listed_from_another(url: str, tmp_path: Path) -> None:
    request_id = make_request(url, tmp_path)
    listed = run("-m", "callwarden", "approvals", "list", "--state", url, cwd=tmp_path)
    assert request_id in listed.stdout and "pending" in listed.stdout


def test_approved_from_the_cli_then_used_once_in_a_third_process(url: str,
                                                                tmp_path: Path) -> None:
    request_id = make_request(url, tmp_path)
    approved = run("-m", "callwarden", "approvals", "approve", request_id, "--state", url,
                   "--by", "alice", cwd=tmp_path)
    assert approved.returncode == 0, approved.stderr
    marker = tmp_path / "executions.txt"
    first = run(str(WORKER), "resume", url, request_id, str(marker), cwd=tmp_path)
    second = run(str(WORKER), "resume", url, request_id, str(marker), cwd=tmp_path)
    assert (first.stdout.split(), second.stdout.split()) == (
        ["allow", "approved"], ["deny", "approval_already_used"])
    assert marker.read_text().splitlines() == ["[('env', 'staging'), ('version', '2.0')]"]


def test_denied_from_the_cli_is_denied_in_the_resumed_process(url: str, tmp_path: Path) -> None:
    request_id = make_request(url, tmp_path)
    denied = run("-m", "callwarden", "approvals", "deny", request_id, "--state", url,
                 "--reason", "not during the freeze", "--by", "alice", cwd=tmp_path)
    assert denied.returncode == 0, denied.stderr
    marker = tmp_path / "executions.txt"
    resumed = run(str(WORKER), "resume", url, request_id, str(marker), cwd=tmp_path)
    assert resumed.stdout.split() == ["deny", "approval_denied"] and not marker.exists()


def test_edit_from_the_cli_runs_the_edited_call(url: str, tmp_path: Path) -> None:
    request_id = make_request(url, tmp_path)
    approved = run("-m", "callwarden", "approvals", "approve", request_id, "--state", url,
                   "--by", "alice", "--edit", '{"env": "qa", "version": "2.0"}', cwd=tmp_path)
    assert approved.returncode == 0, approved.stderr
    marker = tmp_path / "executions.txt"
    resumed = run(str(WORKER), "resume", url, request_id, str(marker), cwd=tmp_path)
    assert resumed.stdout.split() == ["modify", "approved_with_edit"]
    assert marker.read_text().splitlines() == ["[('env', 'qa'), ('version', '2.0')]"]


def test_cli_refuses_the_agent_approving_its_own_request(url: str, tmp_path: Path) -> None:
    request_id = make_request(url, tmp_path)
    refused = run("-m", "callwarden", "approvals", "approve", request_id, "--state", url,
                  "--by", "bot", cwd=tmp_path)
    assert refused.returncode == 1 and "self_approval" in refused.stderr
