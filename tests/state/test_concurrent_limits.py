"""``limit: {concurrent: N}``: at most N calls in flight, on every store. A call the decision
allows takes a slot; recording its outcome on any path lets it go; a caller that never
reports one frees it at the end of its ``hold``; a refused call never holds one."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
from _state_support import Clock, T

from callwarden import Effect, Guard
from callwarden._enforce import Enforcer
from callwarden.exceptions import AuditError, ToolDenied
from callwarden.state import Counter, MemoryStore, StoreUnavailable


def policy(*rules: dict[str, Any], limit: dict[str, Any] | None = None) -> dict[str, Any]:
    # A generous deadline: these tests are about counting, and a first decision on a fresh
    # Redis Cluster client can outlast the default second on a busy machine.
    slots = {"id": "in-flight", "limit": limit or {"concurrent": 2, "per": "session"}}
    return {"version": 1, "timeout": "60s", "rules": [*rules, slots]}


def guard(store: Any, *rules: dict[str, Any], clock: Any = None, **limit: Any) -> Guard:
    return Guard.from_dict(policy(*rules, limit=limit or None), state=store, clock=clock)


def in_flight(g: Guard, session: str = "s", rule: str = "in-flight") -> float:
    """The calls in flight a limit sees, read without taking a slot."""
    return next(b.used for b in g.query("t", {}, session=session).budgets if b.rule == rule)


def test_at_most_n_calls_run_at_once(store) -> None:
    g = guard(store)
    first, second, third = (g.check("t", {"n": i}, session="s") for i in range(3))
    assert (first.allowed, second.allowed, third.effect) == (True, True, Effect.DENY)
    assert third.rule == "in-flight" and third.reasons[0].code == "limit.exceeded"
    assert "2 of 2 calls in flight per session" in third.message
    assert "frees up when a running call finishes" in third.message
    assert g.check("t", {}, session="other").allowed  # per session


def test_budgets_say_what_is_in_flight_and_when_a_slot_frees_up(store) -> None:
    clock = Clock()
    g = guard(store, clock=clock, concurrent=2, per="session", hold="5m")
    assert g.check("t", {}, session="s").budgets[0][1:4] == (2.0, 1.0, 1.0)
    clock.now += 10
    g.check("t", {}, session="s")
    clock.now += 10
    over = g.check("t", {}, session="s")
    [budget] = over.budgets
    assert (budget.used, budget.remaining, budget.reset_at) == (2.0, 0.0, T + 300)
    assert "at the latest at" in over.message and "(in 4.7 min)" in over.message


def test_a_query_takes_no_slot(store) -> None:
    g = guard(store, concurrent=1)
    for _ in range(3):
        assert g.query("t", {}, session="s").allowed
    assert in_flight(g) == 0.0
    assert g.check("t", {}, session="s").allowed
    assert not g.query("t", {}, session="s").allowed


def test_running_a_tool_through_the_guard_lets_its_slot_go(store) -> None:
    g = guard(store, concurrent=1)
    inside = g.run("t", {}, lambda: g.check("t", {}, session="s").effect, session="s")
    assert inside is Effect.DENY  # the running call held the only slot
    assert in_flight(g) == 0.0 and g.check("t", {}, session="s").allowed


def test_a_tool_that_raises_lets_its_slot_go(store) -> None:
    g = guard(store, concurrent=1)

    def broken() -> None:
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        g.run("t", {}, broken, session="s")
    assert in_flight(g) == 0.0


async def test_arun_lets_the_slot_go_after_success_and_after_an_error(store) -> None:
    g = guard(store, concurrent=1)

    async def tool() -> Effect:
        return (await g.acheck("t", {}, session="s")).effect

    async def broken() -> None:
        raise RuntimeError("disk full")

    assert await g.arun("t", {}, tool, session="s") is Effect.DENY
    assert in_flight(g) == 0.0
    with pytest.raises(RuntimeError):
        await g.arun("t", {}, broken, session="s")
    assert in_flight(g) == 0.0


def test_a_tool_run_by_its_framework_lets_go_when_it_finishes(store) -> None:
    enforcer = Enforcer(guard(store, concurrent=1), framework="custom")
    decision = enforcer.check("t", {}, session="s")
    assert decision.allowed and not enforcer.check("t", {}, session="s").allowed
    enforcer.finish(decision, "done", time.perf_counter())
    assert enforcer.check("t", {}, session="s").allowed


@pytest.mark.parametrize("path", ["record_outcome", "arecord_outcome", "afinish"])
async def test_every_outcome_path_lets_the_slot_go(store, path: str) -> None:
    enforcer = Enforcer(guard(store, concurrent=1))
    decision = enforcer.check("t", {}, session="s")
    if path == "record_outcome":
        enforcer.record_outcome(decision, "error", time.perf_counter(), RuntimeError("x"))
    elif path == "arecord_outcome":
        await enforcer.arecord_outcome(decision, "error", time.perf_counter())
    else:
        await enforcer.afinish(decision, "done", time.perf_counter(), failed=True)
    assert in_flight(enforcer.guard) == 0.0


def test_an_output_blocked_lets_the_slot_go(store) -> None:
    g = guard(store, {"id": "no-keys", "on": "output", "match": {"tool": "t"},
                      "if": "args.output.contains('PRIVATE KEY')", "effect": "deny"},
              concurrent=1)
    assert "withheld" in g.run("t", {}, lambda: "BEGIN PRIVATE KEY", session="s")
    assert in_flight(g) == 0.0


def test_letting_go_twice_frees_one_slot_only(store) -> None:
    g = guard(store, concurrent=2)
    first = g.check("t", {}, session="s")
    g.check("t", {}, session="s")
    assert g.release(first) and g.release(first)
    assert in_flight(g) == 1.0


def test_a_crashed_callers_slot_frees_at_the_end_of_its_hold(store) -> None:
    """Decided, never finished: the slot is let go when its hold ends (the clock moves)."""
    clock = Clock()
    g = guard(store, clock=clock, concurrent=1, per="session", hold="10m")
    assert g.check("t", {}, session="s").allowed  # its process dies here
    clock.now = T + 599
    refused = g.check("t", {}, session="s")
    assert not refused.allowed and refused.budgets[0].reset_at == T + 600
    clock.now = T + 600
    assert g.check("t", {}, session="s").allowed


def test_the_default_hold_is_ten_minutes(store) -> None:
    clock = Clock()
    g = guard(store, clock=clock, concurrent=1)
    g.check("t", {}, session="s")
    assert g.check("t", {}, session="s").budgets[0].reset_at == T + 600


def test_a_call_refused_by_another_rule_takes_no_slot(store) -> None:
    g = guard(store, {"id": "no-rm", "match": {"tool": "rm"}, "effect": "deny"},
              {"id": "budget", "match": {"tool": "pay"}, "limit": {"calls": 0}},
              concurrent=1)
    assert g.check("rm", {}, session="s").rule == "no-rm"
    assert g.check("pay", {}, session="s").rule == "budget"
    assert in_flight(g) == 0.0


def test_a_call_over_the_limit_takes_no_slot_of_another(store) -> None:
    g = guard(store, {"id": "two-at-once", "limit": {"concurrent": 1, "per": "agent"}},
              concurrent=5)
    g.check("t", {}, session="s", agent="a")
    assert not g.check("t", {}, session="s", agent="a").allowed
    assert in_flight(g) == 1.0


def test_a_concurrent_limit_per_value_holds_a_slot_per_value(store) -> None:
    g = guard(store, concurrent=1, per="recipient")
    mail = g.check("send_email", {"to": ["a@x.example", "b@x.example"]})
    assert mail.allowed
    assert not g.check("send_email", {"to": "B@x.example"}).allowed
    g.release(mail)
    assert g.check("send_email", {"to": "b@x.example"}).allowed


async def test_concurrent_acquirers_get_exactly_the_slots(store) -> None:
    g = guard(store, concurrent=3)
    decisions = await asyncio.gather(*(g.acheck("t", {"n": i}, session="s")
                                       for i in range(100)))
    assert sum(d.allowed for d in decisions) == 3
    assert in_flight(g) == 3.0


def test_an_approved_call_takes_its_slot_when_the_approval_is_used(store) -> None:
    g = guard(store, {"id": "deploys-ask", "match": {"tool": "deploy"}, "effect": "ask"},
              concurrent=1)
    seen = []

    def approver(decision: Any) -> bool:
        seen.append(in_flight(g))  # asked: not in flight yet
        return True

    inside = g.run("deploy", {}, lambda: in_flight(g), approver=approver, session="s")
    assert (seen, inside, in_flight(g)) == ([0.0], 1.0, 0.0)


def test_a_call_refused_by_the_audit_after_taking_a_slot_lets_it_go(store) -> None:
    class Refusing:
        """An audit that is required and cannot write decisions."""

        def decision(self, decision: Any) -> None:
            raise AuditError("the disk is full")

        def outcome(self, *args: Any, **kwargs: Any) -> None:
            pass

    g = Guard.from_loaded(Guard.from_dict(policy(limit={"concurrent": 1})).loaded,
                          state=store, audit=Refusing())
    refused = g.check("t", {}, session="s")
    assert refused.effect is Effect.DENY and refused.rule == "audit"
    assert in_flight(g) == 0.0


def test_a_store_that_fails_to_let_go_never_fails_the_tool(
        store, caplog: pytest.LogCaptureFixture) -> None:
    class Stuck(MemoryStore):
        def release(self, counters: Any, *, deadline: float | None = None) -> None:
            raise StoreUnavailable("the store is gone")

    g = guard(Stuck(), concurrent=1)
    with caplog.at_level(logging.WARNING, logger="callwarden.limits"):
        assert g.run("t", {}, lambda: "result", session="s") == "result"
    assert "could not be let go" in caplog.text and "the store is gone" in caplog.text
    assert not g.check("t", {}, session="s").allowed  # held until its hold ends


def test_a_store_that_fails_to_take_a_slot_refuses_the_call() -> None:
    class Down(MemoryStore):
        def consume(self, *args: Any, **kwargs: Any) -> Any:
            raise StoreUnavailable("the store is gone")

    ran: list[bool] = []
    with pytest.raises(ToolDenied) as refused:
        guard(Down(), concurrent=3).run("t", {}, lambda: ran.append(True), session="s")
    assert refused.value.decision.reasons[0].code == "state_unavailable" and not ran


def test_slots_of_a_decision_read_back_from_json_are_let_go(store) -> None:
    from callwarden import Decision

    g = guard(store, concurrent=1, per=["session", "args.host"])
    decided = g.check("fetch", {"host": "a.example"}, session="s")
    assert g.release(Decision.from_dict(decided.to_dict()))
    assert in_flight_of(store) == 0.0


def in_flight_of(store: Any) -> float:
    [state] = store.consume([Counter("in-flight|session=s|args.host=a.example", 1, 600.0,
                                     members=("?",), shard="s")], now=time.time(), commit=False)
    return state.used


def slow_first_consume(inline: bool) -> Any:
    """A memory store whose next consume once ``late`` is set answers after the decision's
    deadline (its steps run inline, on the fast path, or through the driver)."""

    class Slow(MemoryStore):
        late = False

        def consume(self, *args: Any, **kwargs: Any) -> Any:
            states = super().consume(*args, **kwargs)
            if self.late:
                self.late = False
                time.sleep(0.3)  # past the 50 ms deadline, however fast the machine
            return states

    if inline:
        Slow.never_blocks = True
    return Slow()


@pytest.mark.parametrize("inline", [True, False])
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_call_refused_after_taking_its_slot_lets_it_go(inline: bool, mode: str) -> None:
    """The store counted the call, then the decision was past its deadline: a deny, which
    must hold no slot."""
    store = slow_first_consume(inline)
    g = Guard.from_dict({"version": 1, "timeout": "50ms", "rules": [
        {"id": "in-flight", "limit": {"concurrent": 1}}]}, state=store)
    store.late = True
    late = g.check("t", {}) if mode == "sync" else await g.acheck("t", {})
    assert late.effect is Effect.DENY and late.reasons[0].code == "policy_timeout"
    [state] = store.consume([Counter("in-flight", 1, 600.0, members=("?",))], now=time.time(),
                            commit=False)
    assert state.used == 0.0


def test_calls_of_one_framework_call_id_hold_a_slot_each(store) -> None:
    """A framework may give two calls the same id (a retry): each decision holds its own."""
    g = guard(store, concurrent=2)
    first = g.check("t", {}, session="s", call_id="toolu_1")
    g.check("t", {}, session="s", call_id="toolu_1")
    g.release(first)
    assert in_flight(g) == 1.0


def test_an_approval_to_go_over_the_limit_holds_a_slot_too(store) -> None:
    g = guard(store, {"id": "more-needs-approval", "effect": "ask",
                      "limit": {"concurrent": 1, "per": "session"}}, concurrent=5)
    g.check("t", {}, session="s")  # in flight, never finished
    over = "more-needs-approval"
    inside = g.run("t", {}, lambda: in_flight(g, rule=over), approver=lambda d: True,
                   session="s")
    assert (inside, in_flight(g, rule=over)) == (2.0, 1.0)


def test_only_a_call_a_concurrent_limit_counted_has_slots_to_let_go(store) -> None:
    g = Guard.from_dict({"version": 1, "timeout": "60s", "rules": [
        {"id": "budget", "match": {"tool": "counted"}, "limit": {"calls": 5, "per": "session"}},
        {"id": "in-flight", "match": {"tool": "held"},
         "limit": {"concurrent": 1, "per": "session"}}]}, state=store)
    counted = g.check("counted", {}, session="s")
    assert counted.budgets and g.engine.release(counted) is None
    held = g.check("held", {}, session="s")
    assert g.engine.release(held) is not None
    assert not g.check("held", {}, session="s").allowed  # its one slot is still held
    assert g.release(held) and g.check("held", {}, session="s").allowed
