"""Every approval transition is an audit event, in the guard's log and from the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from _approval_support import POLICY, Clock

from callwarden import Effect, Guard, resolve_ask
from callwarden.approvals import Approvals, Deny, Edit
from callwarden.audit import Auditor, CallableSink, load_schema
from callwarden.cli import main
from callwarden.state import MemoryStore

VALIDATOR = jsonschema.Draft202012Validator(load_schema())


class Recorder:
    """An audited guard whose events the test reads back, in order."""

    def __init__(self, clock: Clock, *, required: bool = False) -> None:
        self.events: list[dict[str, Any]] = []
        self.auditor = Auditor([CallableSink(self.events.append)], required=required)
        self.guard = Guard(rules=POLICY["rules"], audit=self.auditor, name="approvals-test",
                           approvals=Approvals(MemoryStore(), ttl=600, clock=clock))

    def approval_events(self) -> list[dict[str, Any]]:
        self.auditor.flush(timeout=5)
        found = [e for e in self.events if e["type"] == "approval"]
        for event in found:
            VALIDATOR.validate(event)
        return found

    def actions(self) -> list[str]:
        return [e["action"] for e in self.approval_events()]


@pytest.fixture
def rec(clock: Clock) -> Recorder:
    return Recorder(clock)


def ask(rec: Recorder, **args: Any) -> Any:
    return rec.guard.check("deploy", args or {"env": "qa"}, agent="bot", session="s1")


def test_request_approve_and_run_are_three_events_bound_to_their_decisions(rec) -> None:
    decision = ask(rec)
    request = rec.guard.approvals.request(decision)
    rec.guard.approvals.approve(request.id, by="alice", comment="ok for qa")
    used = resolve_ask(rec.guard, ask(rec), approval_id=request.id)
    assert used.effect is Effect.ALLOW
    requested, approved, consumed = rec.approval_events()
    assert (requested["action"], requested["decision_id"]) == ("requested", decision.decision_id)
    assert (approved["action"], approved["by"], approved["comment"]) == \
        ("approved", "alice", "ok for qa")
    assert (consumed["action"], consumed["decision_id"]) == ("consumed", used.decision_id)
    assert {e["request_id"] for e in (requested, approved, consumed)} == {request.id}
    assert requested["tool"] == "deploy" and requested["rule"] == "ask-deploy"


def test_a_denial_records_the_reviewer_and_reason(rec) -> None:
    resolve_ask(rec.guard, ask(rec), approver=lambda r: Deny("not today", by="alice"))
    assert rec.actions() == ["requested", "denied"]
    assert rec.approval_events()[1]["comment"] == "not today"


def test_a_reused_approval_is_recorded_as_refused(rec) -> None:
    rid = rec.guard.approvals.request(ask(rec)).id
    rec.guard.approvals.approve(rid, by="alice")
    resolve_ask(rec.guard, ask(rec), approval_id=rid)
    again = resolve_ask(rec.guard, ask(rec), approval_id=rid)
    assert again.effect is Effect.DENY
    assert rec.actions()[-1] == "refused"
    assert "already used" in rec.approval_events()[-1]["detail"]


def test_an_expired_approval_is_recorded_as_expired(rec, clock: Clock) -> None:
    rid = rec.guard.approvals.request(ask(rec)).id
    rec.guard.approvals.approve(rid, by="alice")
    clock.advance(601)
    assert resolve_ask(rec.guard, ask(rec), approval_id=rid).effect is Effect.DENY
    assert rec.actions()[-1] == "expired"


def test_a_cancelled_request_is_recorded(rec) -> None:
    rid = rec.guard.approvals.request(ask(rec)).id
    rec.guard.approvals.cancel(rid)
    assert rec.actions() == ["requested", "cancelled"]


def test_edited_arguments_are_recorded_redacted(rec) -> None:
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    edit = Edit({"env": "qa", "token": secret}, by="alice")
    resolve_ask(rec.guard, ask(rec), approver=lambda r: edit)
    approved = next(e for e in rec.approval_events() if e["action"] == "approved")
    assert secret not in json.dumps(rec.events)
    assert approved["edited_args"]["env"] == "qa"
    assert approved["redactions"]


def test_grants_created_and_revoked_are_recorded(rec) -> None:
    grant = rec.guard.approvals.remember(ask(rec), scope="session", by="alice", ttl=60)
    rec.guard.approvals.revoke(grant.id, by="carol")
    created, revoked = rec.approval_events()
    assert (created["action"], created["grant_id"], created["scope"], created["by"]) == \
        ("grant_created", grant.id, "session", "alice")
    assert (revoked["action"], revoked["status"], revoked["by"]) == (
        "grant_revoked", "revoked", "carol")  # who revoked it, not who granted it


def test_a_call_a_grant_lets_run_is_recorded_with_the_grant(rec) -> None:
    grant = rec.guard.approvals.remember(ask(rec), scope="session", by="alice", ttl=60)
    assert resolve_ask(rec.guard, ask(rec)).allowed
    used = [e for e in rec.approval_events() if e["action"] == "grant_used"]
    assert len(used) == 1 and used[0]["grant_id"] == grant.id and used[0]["decision_id"]
    assert rec.guard.approvals.granted(ask(rec)) is not None  # a lookup uses nothing
    assert len([e for e in rec.approval_events() if e["action"] == "grant_used"]) == 1


def test_a_required_audit_that_fails_denies_the_call(clock: Clock) -> None:
    def broken(event: dict[str, Any]) -> None:
        if event["type"] == "approval":
            raise OSError("disk full")

    guard = Guard(rules=POLICY["rules"], audit=Auditor([CallableSink(broken)], required=True),
                  approvals=Approvals(MemoryStore(), clock=clock))
    decision = guard.check("deploy", {"env": "qa"}, agent="bot")
    settled = resolve_ask(guard, decision, approver=lambda r: True)
    assert settled.effect is Effect.DENY
    assert settled.reasons[0].code == "audit_failed"


def test_the_cli_records_its_transitions_in_the_policys_audit_log(tmp_path: Path,
                                                                  capsys) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "version: 1\nrules:\n  - {id: ask-deploy, match: {tool: deploy}, effect: ask}\n"
        "approvals: {state: sqlite:///approvals.db}\naudit: [{jsonl: audit.jsonl}]\n")
    guard = Guard.from_file(policy)
    with pytest.raises(Exception, match="pending"):
        guard.run("deploy", {"env": "qa"}, lambda env: env, agent="bot")
    guard.close()
    rid = json.loads((tmp_path / "audit.jsonl").read_text().splitlines()[-1])["request_id"]
    assert main(["approvals", "approve", rid, "--by", "alice", "--policy", str(policy)]) == 0
    events = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    for event in events:
        VALIDATOR.validate(event)
    assert [e.get("action") for e in events if e["type"] == "approval"] == \
        ["requested", "approved"]
    assert events[-1]["by"] == "alice"
