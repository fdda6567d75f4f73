"""The async twins: same semantics, and waiting never blocks the event loop."""

from __future__ import annotations

import asyncio

import pytest
from _approval_support import Tool

from callwarden import Effect, aresolve_ask
from callwarden.approvals import (
    ApprovalInvalid,
    ApprovalPending,
    ApprovalRefused,
    Approve,
    Deny,
    Edit,
    Status,
)

STAGING = {"env": "staging"}


async def test_arequest_aapprove_aconsume(guard, approvals) -> None:
    decision = guard.check("deploy", STAGING, agent="bot")
    request = await approvals.arequest(decision)
    await approvals.aapprove(request.id, by="alice")
    used = await approvals.aconsume(request.id, decision)
    assert used.status is Status.CONSUMED
    with pytest.raises(ApprovalInvalid) as raised:
        await approvals.aconsume(request.id, decision)
    assert raised.value.code == "approval_already_used"


async def test_aconsume_refuses_other_args(guard, approvals) -> None:
    request = await approvals.arequest(guard.check("deploy", STAGING, agent="bot"))
    await approvals.aapprove(request.id, by="alice")
    with pytest.raises(ApprovalInvalid) as raised:
        await approvals.aconsume(request.id, guard.check("deploy", {"env": "qa"}, agent="bot"))
    assert raised.value.code == "approval_mismatch"


async def test_aapprove_refuses_self_approval(guard, approvals) -> None:
    request = await approvals.arequest(guard.check("deploy", STAGING, agent="bot"))
    with pytest.raises(ApprovalRefused):
        await approvals.aapprove(request.id, by="bot")


async def test_adeny_acancel_aget_alist(guard, approvals) -> None:
    first = await approvals.arequest(guard.check("deploy", STAGING, agent="bot"))
    second = await approvals.arequest(guard.check("deploy", {"env": "qa"}, agent="bot"))
    await approvals.adeny(first.id, by="alice", reason="no")
    await approvals.acancel(second.id)
    assert ((await approvals.aget(first.id)).status,
            {r.id: r.status for r in await approvals.alist()}) == (
        Status.DENIED, {first.id: Status.DENIED, second.id: Status.CANCELLED})


async def test_async_callback_approver(guard, approvals) -> None:
    async def reviewer(request):
        await asyncio.sleep(0)
        return Approve(by="alice")

    decision = await guard.acheck("deploy", STAGING, agent="bot")
    assert (await aresolve_ask(guard, decision, approvals=approvals, approver=reviewer)).allowed


async def test_sync_callback_approver_from_async_code(guard, approvals) -> None:
    decision = await guard.acheck("deploy", STAGING, agent="bot")
    resolved = await aresolve_ask(guard, decision, approvals=approvals,
                                  approver=lambda r: Deny("no", by="alice"))
    assert resolved.code == "approval_denied"


async def test_async_edit_is_re_evaluated(guard, approvals) -> None:
    async def reviewer(request):
        return Edit({"env": "prod"}, by="alice")

    decision = await guard.acheck("deploy", STAGING, agent="bot")
    resolved = await aresolve_ask(guard, decision, approvals=approvals, approver=reviewer)
    assert (resolved.effect, resolved.rule) == (Effect.DENY, "no-prod")


async def test_async_pending_raises_with_the_request_id(guard, approvals) -> None:
    decision = await guard.acheck("deploy", STAGING, agent="bot")
    with pytest.raises(ApprovalPending) as raised:
        await aresolve_ask(guard, decision, approvals=approvals)
    assert (await approvals.aget(raised.value.request_id)).status is Status.PENDING


async def test_async_wait_lets_other_tasks_resolve_it(guard, approvals) -> None:
    """The reviewer runs on the same event loop: a blocking wait would never let it in."""
    decision = await guard.acheck("deploy", STAGING, agent="bot")

    async def reviewer() -> None:
        while not await approvals.alist(Status.PENDING):
            await asyncio.sleep(0.01)
        [request] = await approvals.alist(Status.PENDING)
        await approvals.aapprove(request.id, by="alice")

    resolved, _ = await asyncio.gather(
        aresolve_ask(guard, decision, approvals=approvals, wait=30), reviewer())
    assert resolved.allowed


async def test_await_returns_pending_on_timeout(guard, approvals) -> None:
    request = await approvals.arequest(guard.check("deploy", STAGING, agent="bot"))
    assert (await approvals.await_(request.id, 0.05)).status is Status.PENDING


async def test_async_grants(guard, approvals) -> None:
    decision = guard.check("deploy", STAGING, agent="bot", session="s1")
    grant = await approvals.aremember(decision, scope="session", by="alice")
    assert (await approvals.agranted(decision)) == grant
    assert (await approvals.arevoke(grant.id, by="carol")).revoked_by == "carol"
    assert (await approvals.agranted(decision), await approvals.agrants()) == (None, [])


async def test_async_approve_and_remember(guard, approvals) -> None:
    request = await approvals.arequest(guard.check("deploy", STAGING, agent="bot",
                                                   session="s1"))
    approved, grant = await approvals.aapprove_and_remember(request.id, scope="session",
                                                            by="alice", exact=True)
    assert approved.status is Status.APPROVED and grant is not None
    assert grant.args == STAGING


async def test_async_resume_runs_once(guard, approvals) -> None:
    decision = await guard.acheck("deploy", STAGING, agent="bot")
    request = await approvals.arequest(decision)
    await approvals.aapprove(request.id, by="alice")
    tool = Tool()
    for _ in range(2):
        again = await guard.acheck("deploy", STAGING, agent="bot")
        resolved = await aresolve_ask(guard, again, approvals=approvals, approval_id=request.id)
        if resolved.allowed:
            tool(**resolved.args)
    assert tool.calls == [STAGING]
