"""The same framework call asked twice (a re-run node, a resumed run) finds its pending request."""

from __future__ import annotations

from callwarden import Guard
from callwarden.approvals import Approvals, Status


def ask(guard: Guard, approvals: Approvals, call_id: str | None, env: str = "qa") -> str:
    return approvals.request(guard.check("deploy", {"env": env}, call_id=call_id,
                                         agent="bot")).id


def test_same_call_id_and_call_reuse_the_pending_request(guard, approvals) -> None:
    assert ask(guard, approvals, "call-1") == ask(guard, approvals, "call-1")
    assert len(approvals.list()) == 1


def test_other_args_under_the_same_call_id_are_a_new_request(guard, approvals) -> None:
    assert ask(guard, approvals, "call-1", "qa") != ask(guard, approvals, "call-1", "staging")


def test_another_call_id_is_a_new_request(guard, approvals) -> None:
    assert ask(guard, approvals, "call-1") != ask(guard, approvals, "call-2")


def test_calls_without_a_call_id_never_share_a_request(guard, approvals) -> None:
    assert ask(guard, approvals, None) != ask(guard, approvals, None)


def test_a_resolved_request_is_not_reused(guard, approvals) -> None:
    first = ask(guard, approvals, "call-1")
    approvals.deny(first, by="alice", reason="no")
    second = ask(guard, approvals, "call-1")
    assert second != first
    assert approvals.get(second).status is Status.PENDING
