"""A what-if changes nothing (``guard.query``, ``callwarden check``); a real decision from the
command line (``callwarden decide``, the path ``callwarden hook`` takes) counts and records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from callwarden import Effect, Guard
from callwarden.cli import main

LIMITED = {
    "version": 1,
    "rules": [
        {"id": "budget", "match": {"tool": "fetch"}, "limit": {"calls": 3, "per": "session"}},
        {"id": "loops", "match": {"tool": "rm"}, "limit": {"attempts": 2, "per": "session"},
         "effect": "halt"},
        {"id": "no-rm", "match": {"tool": "rm"}, "effect": "deny"},
        {"id": "after-fetch", "match": {"tool": "mail"}, "if": "'fetch' in history.tools",
         "effect": "ask"},
    ],
}

POLICY = """\
version: 1
state: sqlite:///state.db
audit: [{jsonl: audit.jsonl}]
rules:
  - id: budget
    match: {tool: fetch}
    limit: {calls: 3, per: session}
  - id: loops
    match: {tool: rm}
    limit: {attempts: 5, per: session}
    effect: halt
  - id: no-rm
    match: {tool: rm}
    effect: deny
"""


def test_query_reads_a_budget_but_never_counts() -> None:
    guard = Guard.from_dict(LIMITED)
    for _ in range(10):
        assert guard.query("fetch", {}, session="s").effect is Effect.ALLOW
    for _ in range(3):
        assert guard.check("fetch", {}, session="s").effect is Effect.ALLOW
    assert guard.query("fetch", {}, session="s").effect is Effect.DENY  # sees the spent budget


def test_query_counts_no_attempt() -> None:
    guard = Guard.from_dict(LIMITED)
    for _ in range(6):
        assert guard.query("rm", {}, session="s").effect is Effect.DENY  # never the halt
    assert guard.check("rm", {}, session="s").effect is Effect.DENY
    assert guard.check("rm", {}, session="s").effect is Effect.DENY
    assert guard.check("rm", {}, session="s").effect is Effect.HALT


def test_query_records_no_history() -> None:
    guard = Guard.from_dict(LIMITED)
    guard.query("fetch", {}, session="s")
    assert guard.query("mail", {}, session="s").effect is Effect.ALLOW
    guard.check("fetch", {}, session="s")
    assert guard.query("mail", {}, session="s").effect is Effect.ASK


async def test_aquery_counts_nothing_either() -> None:
    guard = Guard.from_dict(LIMITED)
    for _ in range(5):
        assert (await guard.aquery("fetch", {}, session="s")).effect is Effect.ALLOW
    assert (await guard.acheck("fetch", {}, session="s")).effect is Effect.ALLOW


def test_query_is_not_audited(tmp_path: Path) -> None:
    from callwarden.audit import Auditor, JsonlSink

    log = tmp_path / "a.jsonl"
    with Auditor([JsonlSink(log)]) as auditor:
        guard = Guard(rules=LIMITED["rules"], audit=auditor)
        guard.query("fetch", {}, session="s")
        guard.check("fetch", {}, session="s")
    assert [json.loads(line)["type"] for line in log.read_text().splitlines()] == ["decision"]


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "policy.yaml").write_text(POLICY)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _run(*argv: str) -> int:
    return main(list(argv))


def test_cli_check_never_consumes_a_limit(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Once a fourth `check` was denied and a sixth halted: a what-if must count nothing."""
    for _ in range(8):
        assert _run("check", "-p", "policy.yaml", "-t", "fetch", "--session", "s") == 0
    for _ in range(8):
        assert _run("check", "-p", "policy.yaml", "-t", "rm", "--session", "s") == 10
    assert not (folder / "audit.jsonl").exists() or not (folder / "audit.jsonl").read_text()


def test_cli_decide_counts_and_audits(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    codes = [_run("decide", "-p", "policy.yaml", "-t", "fetch", "--session", "s")
             for _ in range(4)]
    assert codes == [0, 0, 0, 10]
    events = [json.loads(line) for line in (folder / "audit.jsonl").read_text().splitlines()]
    assert [e["effect"] for e in events] == ["allow", "allow", "allow", "deny"]
    assert events[-1]["rule"] == "budget"
    # the what-if sees what the real decisions spent, and changes nothing
    assert _run("check", "-p", "policy.yaml", "-t", "fetch", "--session", "s") == 10
    assert len((folder / "audit.jsonl").read_text().splitlines()) == 4


def test_cli_decide_and_the_hook_share_one_store(folder: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    import io

    from callwarden.hooks import run_hook

    for _ in range(2):
        assert _run("decide", "-p", "policy.yaml", "-t", "fetch", "--session", "s") == 0
    payload = {"hook_event_name": "BeforeTool", "tool_name": "fetch", "tool_input": {},
               "session_id": "s", "cwd": str(folder)}
    out = io.StringIO()
    assert run_hook("gemini-cli", str(folder / "policy.yaml"), io.StringIO(json.dumps(payload)),
                    out, io.StringIO()) == 0
    assert json.loads(out.getvalue()) == {}  # the third: allowed
    assert _run("decide", "-p", "policy.yaml", "-t", "fetch", "--session", "s") == 10
    frameworks = [json.loads(line).get("framework")
                  for line in (folder / "audit.jsonl").read_text().splitlines()]
    assert frameworks == [None, None, "gemini-cli", None]
