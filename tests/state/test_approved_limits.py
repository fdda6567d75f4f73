"""Approved calls use budget: checked at ask time, counted when the approval is used.

Every store (memory, SQLite, a real Redis), sync and async.
"""

from __future__ import annotations

import contextlib

import pytest

from callwarden import Effect, Guard
from callwarden.approvals import ApprovalPending, Approve, Edit
from callwarden.exceptions import RunHalted, ToolDenied


def ask_with_budget(calls: int, **budget: object) -> dict:
    # A generous deadline: a first decision on a fresh Redis Cluster client can outlast the
    # default second on a busy machine (a store timeout is a deny, read here as a miscount).
    return {"version": 1, "timeout": "60s", "approvals": {}, "rules": [
        {"id": "pay-ask", "match": {"tool": "pay"}, "effect": "ask"},
        {"id": "budget", "match": {"tool": "pay"},
         "limit": {"calls": calls, "per": "session"}, **budget}]}


def approve(_request: object) -> Approve:
    return Approve(by="alice")


def run_many(guard: Guard, n: int, **kwargs: object) -> list[int]:
    ran: list[int] = []
    for i in range(n):
        with contextlib.suppress(ToolDenied):
            guard.run("pay", {"n": i}, lambda n: ran.append(n), session="s", **kwargs)
    return ran


def test_approved_calls_use_the_budget(store) -> None:
    guard = Guard.from_dict(ask_with_budget(2), state=store)
    assert run_many(guard, 5, approver=approve) == [0, 1]


async def test_approved_calls_use_the_budget_async(store) -> None:
    guard = Guard.from_dict(ask_with_budget(2), state=store)
    ran: list[int] = []
    for i in range(5):
        with contextlib.suppress(ToolDenied):
            await guard.arun("pay", {"n": i}, lambda n: ran.append(n), session="s",
                             approver=approve)
    assert ran == [0, 1]


def test_a_call_over_budget_is_denied_before_anyone_is_asked(store) -> None:
    guard = Guard.from_dict(ask_with_budget(1), state=store)
    asked: list[object] = []
    run_many(guard, 3, approver=lambda r: asked.append(r) or Approve(by="alice"))
    assert len(asked) == 1
    d = guard.check("pay", {"n": 9}, session="s")
    assert d.effect is Effect.DENY and d.rule == "budget"


def test_asking_does_not_use_budget(store) -> None:
    guard = Guard.from_dict(ask_with_budget(1), state=store)
    for i in range(3):
        assert guard.check("pay", {"n": i}, session="s").effect is Effect.ASK


def test_a_tool_that_requires_approval_uses_budget_only_once_approved(store) -> None:
    policy = {"version": 1, "timeout": "60s", "approvals": {},
              "tools": {"pay": {"kind": "payment", "requires_approval": True}},
              "rules": [{"id": "budget", "match": {"tool": "pay"},
                         "limit": {"calls": 2, "per": "session"}}]}
    guard = Guard.from_dict(policy, state=store)
    for i in range(3):  # asking counts nothing
        assert guard.check("pay", {"n": i}, session="s").effect is Effect.ASK
    assert run_many(guard, 4, approver=approve) == [0, 1]


def pause(guard: Guard, n: int) -> str:
    with pytest.raises(ApprovalPending) as paused:
        guard.run("pay", {"n": n}, lambda n: n, session="s")
    return paused.value.request_id


def test_an_approval_used_after_the_budget_ran_out_is_denied_with_the_limit_message(
        store) -> None:
    guard = Guard.from_dict(ask_with_budget(1), state=store)
    first, second = pause(guard, 1), pause(guard, 2)
    guard.approvals.approve(first, by="alice")
    guard.approvals.approve(second, by="alice")
    assert guard.run("pay", {"n": 1}, lambda n: n, session="s", approval_id=first) == 1
    with pytest.raises(ToolDenied) as denied:
        guard.run("pay", {"n": 2}, lambda n: n, session="s", approval_id=second)
    d = denied.value.decision
    assert (d.rule, d.reasons[0].code) == ("budget", "limit.exceeded")
    assert d.message.startswith("Limit 'budget' reached: 1 used of 1 calls per session")


async def test_an_approval_used_after_the_budget_ran_out_is_denied_async(store) -> None:
    guard = Guard.from_dict(ask_with_budget(1), state=store)
    first, second = pause(guard, 1), pause(guard, 2)
    await guard.approvals.aapprove(first, by="alice")
    await guard.approvals.aapprove(second, by="alice")
    assert await guard.arun("pay", {"n": 1}, lambda n: n, session="s", approval_id=first) == 1
    with pytest.raises(ToolDenied) as denied:
        await guard.arun("pay", {"n": 2}, lambda n: n, session="s", approval_id=second)
    assert denied.value.decision.rule == "budget"


def test_an_approved_call_over_a_halting_limit_halts(store) -> None:
    guard = Guard.from_dict(ask_with_budget(1, effect="halt"), state=store)
    first, second = pause(guard, 1), pause(guard, 2)
    guard.approvals.approve(first, by="alice")
    guard.approvals.approve(second, by="alice")
    guard.run("pay", {"n": 1}, lambda n: n, session="s", approval_id=first)
    with pytest.raises(RunHalted):
        guard.run("pay", {"n": 2}, lambda n: n, session="s", approval_id=second)


def test_calls_allowed_by_a_remembered_grant_use_the_budget(store) -> None:
    guard = Guard.from_dict(ask_with_budget(2), state=store)
    first = pause(guard, 0)
    guard.approvals.approve(first, by="alice")
    guard.approvals.remember(first, scope="session", by="alice")
    assert run_many(guard, 5) == [0, 1]


def test_an_edited_call_that_is_asked_again_uses_the_budget(store) -> None:
    guard = Guard.from_dict(ask_with_budget(1), state=store)
    edit = lambda r: Edit(args={"n": 100}, by="alice")  # noqa: E731
    assert guard.run("pay", {"n": 1}, lambda n: n, session="s", approver=edit) == 100
    with pytest.raises(ToolDenied) as denied:
        guard.run("pay", {"n": 2}, lambda n: n, session="s", approver=edit)
    assert denied.value.decision.rule == "budget"


def test_an_approved_ask_limit_counts_the_call_it_let_over(store) -> None:
    policy = {"version": 1, "timeout": "60s", "approvals": {}, "rules": [
        {"id": "spend", "match": {"tool": "pay"}, "effect": "ask",
         "limit": {"sum": "args.amount", "max": 100, "per": "session"}},
        {"id": "hard-cap", "match": {"tool": "pay"},
         "limit": {"sum": "args.amount", "max": 150, "per": "session"}}]}
    guard = Guard.from_dict(policy, state=store)
    pay = lambda amount: guard.run("pay", {"amount": amount}, lambda amount: amount,  # noqa: E731
                                   session="s", approver=approve)
    assert pay(90) == 90                        # within both
    assert pay(40) == 40                        # over 'spend': asked, approved, counted
    with pytest.raises(ToolDenied) as denied:   # 130 + 30 > 150: the hard cap saw the 40
        pay(30)
    assert denied.value.decision.rule == "hard-cap"


def test_approved_calls_are_recorded_as_approved_in_the_history(store) -> None:
    policy = ask_with_budget(5)
    policy["rules"].append({"id": "after-pay", "match": {"tool": "mail"},
                            "if": "'pay' in history.tools", "effect": "deny"})
    guard = Guard.from_dict(policy, state=store)
    assert guard.check("mail", {}, session="s").allowed
    guard.check("pay", {"n": 0}, session="s")  # asked, never run
    assert guard.check("mail", {}, session="s").allowed
    guard.run("pay", {"n": 1}, lambda n: n, session="s", approver=approve)
    assert guard.check("mail", {}, session="s").effect is Effect.DENY
    history = store.history("s")
    assert dict(history.tool_effects["pay"]) == {"ask": 2, "approved": 1}


def test_framework_adapters_count_the_calls_they_settle(store) -> None:
    from callwarden._enforce import Enforcer

    enforcer = Enforcer(Guard.from_dict(ask_with_budget(1), state=store), framework="test",
                        approver=approve)
    first = enforcer.decide("pay", {"n": 1}, session="s")
    second = enforcer.decide("pay", {"n": 2}, session="s")
    assert first.effect.allows and (second.effect, second.rule) == (Effect.DENY, "budget")


async def test_framework_adapters_count_the_calls_they_settle_async(store) -> None:
    from callwarden._enforce import Enforcer

    enforcer = Enforcer(Guard.from_dict(ask_with_budget(1), state=store), framework="test",
                        approver=approve)
    first = await enforcer.adecide("pay", {"n": 1}, session="s")
    second = await enforcer.adecide("pay", {"n": 2}, session="s")
    assert first.effect.allows and (second.effect, second.rule) == (Effect.DENY, "budget")
