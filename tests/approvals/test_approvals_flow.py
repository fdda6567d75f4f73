"""resolve_ask around a real Guard's decisions: approve once, bound to the call, expiring."""

from __future__ import annotations

import threading

import pytest
from _approval_support import POLICY, Clock, Tool, run_guarded

from callwarden import ApprovalRequired, Effect, Guard, ToolDenied, resolve_ask
from callwarden.approvals import (
    ApprovalPending,
    Approvals,
    Approve,
    Deny,
    Edit,
    Status,
)
from callwarden.state import MemoryStore, StoreUnavailable

STAGING = {"env": "staging", "version": "1.4"}


def pending_id(guard: Guard, approvals: Approvals, tool: str = "deploy",
               args: dict | None = None, **call: str) -> str:
    decision = guard.check(tool, args or STAGING, agent="bot", **call)
    with pytest.raises(ApprovalPending) as raised:
        resolve_ask(guard, decision, approvals=approvals)
    return raised.value.request_id


def test_ask_without_approver_raises_pending_with_the_request_id(guard, approvals) -> None:
    request_id = pending_id(guard, approvals)
    assert approvals.get(request_id).status is Status.PENDING


def test_pending_is_an_approval_required(guard, memory_approvals) -> None:
    decision = guard.check("deploy", STAGING, agent="bot")
    with pytest.raises(ApprovalRequired):
        resolve_ask(guard, decision, approvals=memory_approvals)


def test_request_records_the_call_and_why(guard, approvals, clock: Clock) -> None:
    request = approvals.get(pending_id(guard, approvals, session="s1", principal="carol"))
    assert (request.tool, request.args, request.agent, request.principal, request.session,
            request.requested_by, request.rule, request.message, request.created,
            request.expires) == ("deploy", STAGING, "bot", "carol", "s1", "bot", "ask-deploy",
                                 "Deploys need a human.", clock.now, clock.now + 600)


def test_approved_call_executes_once(guard, approvals) -> None:
    request_id = pending_id(guard, approvals)
    approvals.approve(request_id, by="alice")
    tool = Tool()
    run_guarded(guard, approvals, "deploy", STAGING, tool, agent="bot", approval_id=request_id)
    assert tool.calls == [STAGING]


def test_second_execution_with_the_same_approval_is_denied(guard, approvals) -> None:
    request_id = pending_id(guard, approvals)
    approvals.approve(request_id, by="alice")
    tool = Tool()
    run_guarded(guard, approvals, "deploy", STAGING, tool, agent="bot", approval_id=request_id)
    with pytest.raises(ToolDenied) as raised:
        run_guarded(guard, approvals, "deploy", STAGING, tool, agent="bot",
                    approval_id=request_id)
    assert (raised.value.decision.code, len(tool.calls)) == ("approval_already_used", 1)


def test_approval_for_args_a_presented_with_args_b_is_denied(guard, approvals) -> None:
    request_id = pending_id(guard, approvals)
    approvals.approve(request_id, by="alice")
    decision = guard.check("deploy", {"env": "staging", "version": "6.6.6"}, agent="bot")
    resolved = resolve_ask(guard, decision, approvals=approvals, approval_id=request_id)
    assert (resolved.effect, resolved.code) == (Effect.DENY, "approval_mismatch")


def test_mismatch_leaves_the_approval_for_its_own_call(guard, approvals) -> None:
    request_id = pending_id(guard, approvals)
    approvals.approve(request_id, by="alice")
    other = guard.check("deploy", {"env": "qa"}, agent="bot")
    resolve_ask(guard, other, approvals=approvals, approval_id=request_id)
    same = guard.check("deploy", STAGING, agent="bot")
    assert resolve_ask(guard, same, approvals=approvals, approval_id=request_id).allowed


def test_approval_from_another_session_is_denied(guard, approvals) -> None:
    request_id = pending_id(guard, approvals, session="s1")
    approvals.approve(request_id, by="alice")
    decision = guard.check("deploy", STAGING, agent="bot", session="s2")
    assert resolve_ask(guard, decision, approvals=approvals,
                       approval_id=request_id).code == "approval_mismatch"


def test_approval_under_a_changed_policy_is_denied(guard, approvals) -> None:
    request_id = pending_id(guard, approvals)
    approvals.approve(request_id, by="alice")
    changed = Guard.from_dict({**POLICY, "name": "approvals-test-v2"})
    decision = changed.check("deploy", STAGING, agent="bot")
    resolved = resolve_ask(changed, decision, approvals=approvals, approval_id=request_id)
    assert resolved.code == "approval_mismatch" and "policy changed" in resolved.reasons[0].message


def test_expired_approval_is_denied_with_the_expiry_reason(guard, approvals, clock) -> None:
    request_id = pending_id(guard, approvals)
    approvals.approve(request_id, by="alice")
    clock.advance(601)
    decision = guard.check("deploy", STAGING, agent="bot")
    resolved = resolve_ask(guard, decision, approvals=approvals, approval_id=request_id)
    assert (resolved.effect, resolved.code) == (Effect.DENY, "approval_expired")
    assert "expired" in resolved.reasons[0].message and "expired" in resolved.message


def test_expiry_is_evaluated_on_read(guard, approvals, clock) -> None:
    request_id = pending_id(guard, approvals)
    clock.advance(601)
    assert approvals.get(request_id).status is Status.EXPIRED


def test_request_is_valid_up_to_its_expiry_instant(guard, approvals, clock) -> None:
    request_id = pending_id(guard, approvals)
    approvals.approve(request_id, by="alice")
    clock.advance(600)
    decision = guard.check("deploy", STAGING, agent="bot")
    assert resolve_ask(guard, decision, approvals=approvals, approval_id=request_id).allowed


def test_expiry_with_on_expiry_ask_makes_a_new_request(guard, store, clock) -> None:
    approvals = Approvals(store, ttl=600, on_expiry="ask", clock=clock)
    request_id = pending_id(guard, approvals)
    approvals.approve(request_id, by="alice")
    clock.advance(601)
    decision = guard.check("deploy", STAGING, agent="bot")
    with pytest.raises(ApprovalPending) as raised:
        resolve_ask(guard, decision, approvals=approvals, approval_id=request_id)
    assert raised.value.request_id != request_id
    assert approvals.get(raised.value.request_id).status is Status.PENDING


def test_denied_request_denies_with_the_reviewers_reason(guard, approvals) -> None:
    request_id = pending_id(guard, approvals)
    approvals.deny(request_id, by="alice", reason="wait for the release freeze to end")
    decision = guard.check("deploy", STAGING, agent="bot")
    resolved = resolve_ask(guard, decision, approvals=approvals, approval_id=request_id)
    assert resolved.code == "approval_denied"
    assert "release freeze" in resolved.message


def test_resuming_a_still_pending_request_is_denied(guard, approvals) -> None:
    request_id = pending_id(guard, approvals)
    decision = guard.check("deploy", STAGING, agent="bot")
    assert resolve_ask(guard, decision, approvals=approvals,
                       approval_id=request_id).code == "approval_not_approved"


def test_unknown_approval_id_is_denied(guard, memory_approvals) -> None:
    decision = guard.check("deploy", STAGING, agent="bot")
    assert resolve_ask(guard, decision, approvals=memory_approvals,
                       approval_id="nope").code == "approval_not_found"


def test_cancelled_request_cannot_be_used(guard, approvals) -> None:
    request_id = pending_id(guard, approvals)
    approvals.approve(request_id, by="alice")
    approvals.cancel(request_id)
    decision = guard.check("deploy", STAGING, agent="bot")
    assert resolve_ask(guard, decision, approvals=approvals,
                       approval_id=request_id).code == "approval_not_approved"


# -- deny wins before anyone is asked --------------------------------------------------


def test_deny_rule_wins_over_ask_and_nobody_is_asked(guard, memory_approvals) -> None:
    asked: list[object] = []
    decision = guard.check("deploy", {"env": "prod"}, agent="bot")
    resolved = resolve_ask(guard, decision, approvals=memory_approvals,
                           approver=lambda r: asked.append(r) or Approve(by="alice"))
    assert (resolved.effect, resolved.rule, asked) == (Effect.DENY, "no-prod", [])
    assert memory_approvals.list() == []


def test_non_ask_decisions_pass_through_unchanged(guard, memory_approvals) -> None:
    decision = guard.check("read", {"path": "x"}, agent="bot")
    assert resolve_ask(guard, decision, approvals=memory_approvals) is decision


# -- approvers -------------------------------------------------------------------------


def test_callback_approve_runs_the_call_once(guard, approvals) -> None:
    tool = Tool()
    run_guarded(guard, approvals, "deploy", STAGING, tool, agent="bot",
                approver=lambda request: Approve(comment="looks fine", by="alice"))
    [request] = approvals.list()
    assert (tool.calls, request.status, request.resolved_by, request.comment) == (
        [STAGING], Status.CONSUMED, "alice", "looks fine")


def test_callback_deny_denies_with_the_reason(guard, memory_approvals) -> None:
    decision = guard.check("deploy", STAGING, agent="bot")
    resolved = resolve_ask(guard, decision, approvals=memory_approvals,
                           approver=lambda r: Deny(reason="not today", by="alice"))
    assert (resolved.effect, resolved.code) == (Effect.DENY, "approval_denied")
    assert "not today" in resolved.message


def test_callback_returning_true_approves(guard, memory_approvals) -> None:
    def reviewer(request):
        return True

    decision = guard.check("deploy", STAGING, agent="bot")
    assert resolve_ask(guard, decision, approvals=memory_approvals, approver=reviewer).allowed


def test_async_callback_is_awaited_from_sync_code(guard, memory_approvals) -> None:
    async def reviewer(request):
        return Approve(by="alice")

    decision = guard.check("deploy", STAGING, agent="bot")
    assert resolve_ask(guard, decision, approvals=memory_approvals, approver=reviewer).allowed


def test_approver_that_raises_denies_and_cancels_the_request(guard, memory_approvals) -> None:
    def broken(request):
        raise RuntimeError("pager down")

    decision = guard.check("deploy", STAGING, agent="bot")
    resolved = resolve_ask(guard, decision, approvals=memory_approvals, approver=broken)
    [request] = memory_approvals.list()
    assert (resolved.code, request.status) == ("approver_error", Status.CANCELLED)


def test_approver_returning_garbage_denies(guard, memory_approvals) -> None:
    decision = guard.check("deploy", STAGING, agent="bot")
    resolved = resolve_ask(guard, decision, approvals=memory_approvals,
                           approver=lambda r: "yes please")
    assert resolved.code == "approver_error"


def test_callback_named_like_the_agent_cannot_approve(guard, memory_approvals) -> None:
    decision = guard.check("deploy", STAGING, agent="bot")
    resolved = resolve_ask(guard, decision, approvals=memory_approvals,
                           approver=lambda r: Approve(by="bot"))
    assert (resolved.effect, resolved.code) == (Effect.DENY, "self_approval")


# -- edits are new calls ---------------------------------------------------------------


def test_edit_changing_args_is_re_evaluated_and_a_deny_rule_catches_it(guard, approvals) -> None:
    tool = Tool()
    with pytest.raises(ToolDenied) as raised:
        run_guarded(guard, approvals, "deploy", STAGING, tool, agent="bot",
                    approver=lambda r: Edit({"env": "prod"}, by="alice"))
    assert (raised.value.decision.rule, tool.calls) == ("no-prod", [])


def test_edit_caught_by_a_deny_rule_burns_the_approval(guard, approvals) -> None:
    decision = guard.check("deploy", STAGING, agent="bot")
    resolve_ask(guard, decision, approvals=approvals,
                approver=lambda r: Edit({"env": "prod"}, by="alice"))
    [request] = approvals.list()
    assert request.status is Status.CANCELLED


def test_edit_that_renames_the_tool_is_denied(guard, approvals) -> None:
    tool = Tool()
    with pytest.raises(ToolDenied) as raised:
        run_guarded(guard, approvals, "deploy", STAGING, tool, agent="bot",
                    approver=lambda r: Edit({"path": "/"}, tool="rm_rf", by="alice"))
    assert (raised.value.decision.code, tool.calls) == ("approval_edit_renames_tool", [])


def test_allowed_edit_runs_the_edited_args_once(guard, approvals) -> None:
    tool = Tool()
    run_guarded(guard, approvals, "deploy", STAGING, tool, agent="bot",
                approver=lambda r: Edit({"env": "qa", "version": "1.4"}, by="alice"))
    [request] = approvals.list()
    assert (tool.calls, request.status) == ([{"env": "qa", "version": "1.4"}], Status.CONSUMED)


def test_ask_on_the_edited_call_is_satisfied_by_the_edit(guard, memory_approvals) -> None:
    decision = guard.check("deploy", STAGING, agent="bot")
    resolved = resolve_ask(guard, decision, approvals=memory_approvals,
                           approver=lambda r: Edit({"env": "qa"}, by="alice"))
    assert (resolved.effect, dict(resolved.args)) == (Effect.MODIFY, {"env": "qa"})


def test_out_of_band_edit_runs_the_edited_call_on_resume(guard, approvals) -> None:
    request_id = pending_id(guard, approvals)
    approvals.approve(request_id, by="alice", edit={"env": "qa"})
    tool = Tool()
    run_guarded(guard, approvals, "deploy", STAGING, tool, agent="bot", approval_id=request_id)
    assert tool.calls == [{"env": "qa"}]


def test_out_of_band_edit_to_a_denied_call_is_denied_on_resume(guard, approvals) -> None:
    request_id = pending_id(guard, approvals)
    approvals.approve(request_id, by="alice", edit={"env": "prod"})
    decision = guard.check("deploy", STAGING, agent="bot")
    resolved = resolve_ask(guard, decision, approvals=approvals, approval_id=request_id)
    assert (resolved.effect, resolved.rule) == (Effect.DENY, "no-prod")


# -- out of band -----------------------------------------------------------------------


def test_wait_returns_once_someone_approves_from_elsewhere(guard, approvals) -> None:
    decision = guard.check("deploy", STAGING, agent="bot")

    def reviewer() -> None:
        while not approvals.list(Status.PENDING):
            threading.Event().wait(0.01)
        approvals.approve(approvals.list(Status.PENDING)[0].id, by="alice")

    thread = threading.Thread(target=reviewer)
    thread.start()
    resolved = resolve_ask(guard, decision, approvals=approvals, wait=30)
    thread.join()
    assert resolved.allowed


def test_wait_that_times_out_raises_pending(guard, memory_approvals) -> None:
    decision = guard.check("deploy", STAGING, agent="bot")
    with pytest.raises(ApprovalPending) as raised:
        resolve_ask(guard, decision, approvals=memory_approvals, wait=0.05)
    assert memory_approvals.get(raised.value.request_id).status is Status.PENDING


def test_wait_ends_in_a_deny_when_someone_denies(guard, approvals) -> None:
    decision = guard.check("deploy", STAGING, agent="bot")

    def reviewer() -> None:
        while not approvals.list(Status.PENDING):
            threading.Event().wait(0.01)
        approvals.deny(approvals.list(Status.PENDING)[0].id, by="alice", reason="no")

    thread = threading.Thread(target=reviewer)
    thread.start()
    resolved = resolve_ask(guard, decision, approvals=approvals, wait=30)
    thread.join()
    assert resolved.code == "approval_denied"


# -- failing closed --------------------------------------------------------------------


class BrokenStore(MemoryStore):
    def get(self, key: str):  # type: ignore[override]
        raise StoreUnavailable("disk on fire")


def test_unavailable_store_denies(guard) -> None:
    approvals = Approvals(BrokenStore())
    decision = guard.check("deploy", STAGING, agent="bot")
    resolved = resolve_ask(guard, decision, approvals=approvals)
    assert (resolved.effect, resolved.code) == (Effect.DENY, "approval_store_unavailable")


def test_guard_approvals_attribute_is_used_by_default(guard, memory_approvals) -> None:
    guard.approvals = memory_approvals  # type: ignore[attr-defined]
    decision = guard.check("deploy", STAGING, agent="bot")
    with pytest.raises(ApprovalPending):
        resolve_ask(guard, decision)
