"""Who may resolve a request: never the caller; only approvers when there is an allowlist."""

from __future__ import annotations

import pytest
from _approval_support import Clock

from callwarden import Guard
from callwarden.approvals import ApprovalInvalid, ApprovalRefused, Approvals, Status
from callwarden.state import MemoryStore


def request_id(guard: Guard, approvals: Approvals, **call: str) -> str:
    return approvals.request(guard.check("deploy", {"env": "qa"}, **call)).id


def test_agent_cannot_approve_its_own_call(guard, approvals) -> None:
    rid = request_id(guard, approvals, agent="bot")
    with pytest.raises(ApprovalRefused) as raised:
        approvals.approve(rid, by="bot")
    assert raised.value.code == "self_approval"


def test_principal_cannot_approve_the_call_made_on_their_behalf(guard, approvals) -> None:
    rid = request_id(guard, approvals, agent="bot", principal="carol")
    with pytest.raises(ApprovalRefused, match="carol"):
        approvals.approve(rid, by="carol")


def test_refused_self_approval_leaves_the_request_pending(guard, approvals) -> None:
    rid = request_id(guard, approvals, agent="bot")
    with pytest.raises(ApprovalRefused):
        approvals.approve(rid, by="bot")
    assert approvals.get(rid).status is Status.PENDING


def test_someone_else_may_approve(guard, approvals) -> None:
    rid = request_id(guard, approvals, agent="bot", principal="carol")
    assert approvals.approve(rid, by="alice").status is Status.APPROVED


def test_outside_the_allowlist_cannot_approve(guard, clock: Clock) -> None:
    approvals = Approvals(MemoryStore(), approvers=["alice"], clock=clock)
    rid = request_id(guard, approvals, agent="bot")
    with pytest.raises(ApprovalRefused) as raised:
        approvals.approve(rid, by="mallory")
    assert raised.value.code == "not_an_approver"


def test_allowlist_recorded_in_the_request_binds_other_processes(guard, clock: Clock) -> None:
    """A resolver configured without an allowlist still honours the one the request was made under."""
    store = MemoryStore()
    rid = request_id(guard, Approvals(store, approvers=["alice"], clock=clock), agent="bot")
    with pytest.raises(ApprovalRefused):
        Approvals(store, clock=clock).approve(rid, by="mallory")


def test_an_approver_on_the_allowlist_cannot_approve_their_own_call(guard, clock) -> None:
    approvals = Approvals(MemoryStore(), approvers=["alice"], clock=clock)
    rid = request_id(guard, approvals, agent="bot", principal="alice")
    with pytest.raises(ApprovalRefused, match="cannot approve"):
        approvals.approve(rid, by="alice")


@pytest.mark.parametrize("by", ["", "   ", None])
def test_an_unnamed_approver_is_refused(guard, memory_approvals, by) -> None:
    rid = request_id(guard, memory_approvals, agent="bot")
    with pytest.raises(ApprovalRefused) as raised:
        memory_approvals.approve(rid, by=by)
    assert raised.value.code == "approver_required"


def test_the_caller_may_deny_its_own_request(guard, memory_approvals) -> None:
    rid = request_id(guard, memory_approvals, agent="bot")
    assert memory_approvals.deny(rid, by="bot", reason="changed my mind").status is Status.DENIED


def test_a_resolved_request_cannot_be_resolved_again(guard, approvals) -> None:
    rid = request_id(guard, approvals, agent="bot")
    approvals.approve(rid, by="alice")
    with pytest.raises(ApprovalInvalid) as raised:
        approvals.deny(rid, by="bob", reason="late")
    assert raised.value.code == "approval_already_resolved"


def test_an_expired_request_cannot_be_approved(guard, approvals, clock) -> None:
    rid = request_id(guard, approvals, agent="bot")
    clock.advance(601)
    with pytest.raises(ApprovalInvalid) as raised:
        approvals.approve(rid, by="alice")
    assert raised.value.code == "approval_expired"


def test_approving_an_unknown_request_is_not_found(memory_approvals) -> None:
    with pytest.raises(ApprovalInvalid) as raised:
        memory_approvals.approve("0123", by="alice")
    assert raised.value.code == "approval_not_found"


def test_an_edit_must_be_a_mapping(guard, memory_approvals) -> None:
    rid = request_id(guard, memory_approvals, agent="bot")
    with pytest.raises(TypeError, match="JSON object"):
        memory_approvals.approve(rid, by="alice", edit=["rm", "-rf"])  # type: ignore[arg-type]
