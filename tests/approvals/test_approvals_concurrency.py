"""Racing resolutions end in exactly one outcome; an approval is used exactly once."""

from __future__ import annotations

import asyncio
import multiprocessing
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from _approval_support import POLICY
from _approval_worker import CALL, consume_racing, resolve_racing
from _state_support import shared_store_url

from callwarden import Guard, aresolve_ask, resolve_ask
from callwarden.approvals import ApprovalError, Approvals, Status


def call_decision(guard: Guard):
    return guard.check(CALL["tool"], CALL["args"], agent=CALL["agent"], session=CALL["session"])


def attempt(approvals: Approvals, request_id: str, i: int) -> tuple[str, bool]:
    action = "approve" if i % 2 == 0 else "deny"
    try:
        if action == "approve":
            approvals.approve(request_id, by=f"approver{i}")
        else:
            approvals.deny(request_id, by=f"approver{i}", reason="race")
    except ApprovalError:
        return action, False
    return action, True


def test_approve_and_deny_racing_in_threads_end_in_one_outcome(guard, approvals) -> None:
    request_id = approvals.request(call_decision(guard)).id
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda i: attempt(approvals, request_id, i), range(32)))
    winners = [action for action, won in results if won]
    final = approvals.get(request_id).status
    assert len(winners) == 1
    assert final is (Status.APPROVED if winners[0] == "approve" else Status.DENIED)


async def test_approve_and_deny_racing_as_tasks_end_in_one_outcome(guard, approvals) -> None:
    request_id = (await approvals.arequest(call_decision(guard))).id

    async def one(i: int) -> bool:
        try:
            if i % 2:
                await approvals.adeny(request_id, by=f"a{i}", reason="race")
            else:
                await approvals.aapprove(request_id, by=f"a{i}")
        except ApprovalError:
            return False
        return True

    assert sum(await asyncio.gather(*(one(i) for i in range(32)))) == 1


def test_approval_consumed_by_racing_threads_runs_exactly_once(guard, approvals) -> None:
    request_id = approvals.request(call_decision(guard)).id
    approvals.approve(request_id, by="alice")
    with ThreadPoolExecutor(16) as pool:
        allowed = list(pool.map(
            lambda _: resolve_ask(guard, call_decision(guard), approvals=approvals,
                                  approval_id=request_id).allowed, range(32)))
    assert sum(allowed) == 1


async def test_approval_consumed_by_racing_tasks_runs_exactly_once(guard, approvals) -> None:
    request_id = approvals.request(call_decision(guard)).id
    approvals.approve(request_id, by="alice")
    decisions = await asyncio.gather(*(
        aresolve_ask(guard, call_decision(guard), approvals=approvals, approval_id=request_id)
        for _ in range(32)))
    assert sum(d.allowed for d in decisions) == 1


@pytest.fixture(params=["sqlite", "redis"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return shared_store_url(request.param, request, tmp_path)


def _race(target, argv_for, n: int) -> list:
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(n), context.Queue()
    workers = [context.Process(target=target, args=(*argv_for(i), barrier, results))
               for i in range(n)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert all(worker.exitcode == 0 for worker in workers)
    return [results.get(timeout=5) for _ in workers]


def test_approve_and_deny_racing_in_processes_end_in_one_outcome(shared_url: str) -> None:
    from callwarden.state import open_store

    with open_store(shared_url, timeout=30.0) as store:
        request_id = Approvals(store).request(call_decision(Guard.from_dict(POLICY))).id
    results = _race(resolve_racing, lambda i: (shared_url, request_id,
                                               "approve" if i % 2 == 0 else "deny",
                                               f"approver{i}"), 6)
    winners = [action for action, won in results if won]
    with open_store(shared_url, timeout=30.0) as store:
        final = Approvals(store).get(request_id).status
    assert len(winners) == 1
    assert final is (Status.APPROVED if winners[0] == "approve" else Status.DENIED)


def test_approval_consumed_by_racing_processes_runs_exactly_once(shared_url: str) -> None:
    from callwarden.state import open_store

    with open_store(shared_url, timeout=30.0) as store:
        approvals = Approvals(store)
        request_id = approvals.request(call_decision(Guard.from_dict(POLICY))).id
        approvals.approve(request_id, by="alice")
    assert sum(_race(consume_racing, lambda i: (shared_url, request_id), 6)) == 1
