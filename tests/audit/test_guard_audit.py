"""The Guard records every decision before the tool runs, and every outcome after it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from callwarden import Effect, Guard, ToolDenied
from callwarden.audit import Auditor, CallableSink
from callwarden.cli import main

POLICY = """\
version: 1
audit:
  sinks: [{{jsonl: {log}}}]
rules:
  - id: no-prod
    match: {{tool: deploy}}
    args: {{env: prod}}
"""


def events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_decision_event_is_written_before_the_tool_runs_then_its_outcome(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    (tmp_path / "p.yaml").write_text(POLICY.format(log=log))
    guard = Guard.from_file(tmp_path / "p.yaml")
    seen_before_run = []

    def deploy(env: str, token: str = "") -> str:
        guard._auditor.flush(timeout=5)
        seen_before_run.extend(e["type"] for e in events(log))
        return env

    guard.run("deploy", {"env": "dev", "token": "ghp_4N8xQ2rT6vY9bK3mZ7pL1sD5fH0jW2cE8gA4"},
              deploy)
    with pytest.raises(ToolDenied):
        guard.run("deploy", {"env": "prod"}, deploy)
    with pytest.raises(ZeroDivisionError):
        guard.run("deploy", {"env": "x"}, lambda env: 1 / 0)
    guard.close()
    recorded = events(log)
    assert seen_before_run == ["decision"]
    assert [(e["type"], e.get("effect"), e.get("status")) for e in recorded] == [
        ("decision", "allow", None), ("outcome", "allow", "ok"),
        ("decision", "deny", None),
        ("decision", "allow", None), ("outcome", "allow", "error")]
    assert "ghp_" not in log.read_text()


async def test_acheck_and_arun_record_too(tmp_path: Path) -> None:
    seen: list[dict] = []
    guard = Guard(audit=Auditor([CallableSink(seen.append)]),
                  rules=[{"id": "no", "match": {"tool": "bad"}}])
    await guard.arun("ok", {}, lambda: "fine")
    assert (await guard.acheck("bad", {})).effect is Effect.DENY
    guard.close()
    assert [e["type"] for e in seen] == ["decision", "outcome", "decision"]


def test_required_audit_that_fails_denies_and_the_tool_never_runs() -> None:
    def broken(event: dict) -> None:
        raise OSError("disk full")

    guard = Guard(audit=Auditor([CallableSink(broken)], required=True))
    ran = []
    with pytest.raises(ToolDenied) as info:
        guard.run("t", {}, lambda: ran.append(1))
    assert ran == []
    assert info.value.decision.reasons[0].code == "audit_failed"
    guard.close()


def test_optional_audit_that_fails_does_not_change_the_decision() -> None:
    def broken(event: dict) -> None:
        raise OSError("disk full")

    auditor = Auditor([CallableSink(broken)])
    guard = Guard(audit=auditor)
    assert guard.run("t", {}, lambda: "ran") == "ran"
    auditor.flush(timeout=5)
    assert auditor.stats()["errors"] >= 1
    guard.close()


def test_what_if_commands_do_not_write_into_the_live_log(tmp_path: Path, capsys) -> None:
    log = tmp_path / "audit.jsonl"
    policy = tmp_path / "p.yaml"
    policy.write_text(POLICY.format(log=log))
    live = Guard.from_file(policy)
    live.check("deploy", {"env": "prod"})
    live.close()
    before = log.read_text()
    assert main(["check", "-p", str(policy), "-t", "deploy", "-a", '{"env": "prod"}']) == 10
    assert main(["lint", str(policy)]) == 0
    main(["replay", "--policy", str(policy), str(log)])
    assert log.read_text() == before


def test_an_outcome_names_the_output_rule_and_where_it_is_written(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    (tmp_path / "p.yaml").write_text(
        f"version: 1\naudit:\n  sinks: [{{jsonl: {log}}}]\nrules:\n"
        "  - id: cap-results\n    on: output\n    max_chars: 5\n    effect: modify\n")
    guard = Guard.from_file(tmp_path / "p.yaml")
    assert guard.run("fetch", {}, lambda: "a long result") != "a long result"
    assert guard.run("fetch", {}, lambda: "ok") == "ok"
    guard.close()
    outcomes = [e for e in events(log) if e["type"] == "outcome"]
    assert [(e["status"], e.get("output_rule"), e.get("output_source")) for e in outcomes] == [
        ("output_modified", "cap-results", f"{tmp_path / 'p.yaml'}:5"), ("ok", None, None)]
