"""Guard.run / arun resolve `ask` decisions through the approvals service."""

from __future__ import annotations

from pathlib import Path

import pytest

from callwarden import ApprovalPending, Approve, Deny, Edit, Guard, ToolDenied

POLICY = {"version": 1, "rules": [
    {"id": "deploys-need-approval", "match": {"tool": "deploy"}, "effect": "ask"},
    {"id": "never-prod", "match": {"tool": "deploy"}, "args": {"env": "prod"}, "effect": "deny"},
]}


def deploy(env: str) -> str:
    return f"deployed {env}"


def test_approver_callback_approves_and_the_call_runs_once() -> None:
    guard = Guard.from_dict(POLICY)
    assert guard.run("deploy", {"env": "staging"}, deploy, agent="bot",
                     approver=lambda request: Approve(by="alice")) == "deployed staging"


def test_reviewer_denial_reaches_the_caller() -> None:
    guard = Guard.from_dict(POLICY)
    with pytest.raises(ToolDenied, match="not today"):
        guard.run("deploy", {"env": "staging"}, deploy, agent="bot",
                  approver=lambda request: Deny(reason="not today", by="alice"))


def test_an_edit_is_a_new_call_and_deny_rules_still_apply() -> None:
    guard = Guard.from_dict(POLICY)
    with pytest.raises(ToolDenied):
        guard.run("deploy", {"env": "staging"}, deploy, agent="bot",
                  approver=lambda request: Edit({"env": "prod"}, by="alice"))


def test_pause_then_resume_with_the_approval_id_runs_exactly_once() -> None:
    guard = Guard.from_dict(POLICY)
    with pytest.raises(ApprovalPending) as info:
        guard.run("deploy", {"env": "staging"}, deploy, agent="bot")
    request_id = info.value.request_id
    guard.approvals.approve(request_id, by="alice")
    assert guard.run("deploy", {"env": "staging"}, deploy, agent="bot",
                     approval_id=request_id) == "deployed staging"
    with pytest.raises(ToolDenied):
        guard.run("deploy", {"env": "staging"}, deploy, agent="bot", approval_id=request_id)
    with pytest.raises(ToolDenied):
        guard.run("deploy", {"env": "other"}, deploy, agent="bot", approval_id=request_id)


async def test_arun_with_an_async_approver() -> None:
    guard = Guard.from_dict(POLICY)

    async def approver(request):
        return Approve(by="alice")

    assert await guard.arun("deploy", {"env": "staging"}, deploy, agent="bot",
                            approver=approver) == "deployed staging"


def test_policy_file_approvals_section_and_state(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(
        "version: 1\nstate: sqlite:///state.db\n"
        "approvals: {ttl: 10m, approvers: [alice]}\n"
        "rules:\n  - {id: ask-deploys, match: {tool: deploy}, effect: ask}\n")
    guard = Guard.from_file(tmp_path / "p.yaml")
    with pytest.raises(ApprovalPending) as info:
        guard.run("deploy", {"env": "staging"}, deploy, agent="bot")
    restarted = Guard.from_file(tmp_path / "p.yaml")
    assert [r.id for r in restarted.approvals.list()] == [info.value.request_id]
    guard.close()
    restarted.close()
