"""Budgets that say what is left: every decision carries, for each limit that applied, what it
has used and has left, and when an exceeded one frees up; a what-if query reads them without
counting; on every store."""

from __future__ import annotations

import time
from typing import Any

from callwarden import Decision, Effect, Guard


def guard(store: Any, *rules: dict[str, Any]) -> Guard:
    # A generous deadline: a first decision on a fresh Redis Cluster client can be slow on a
    # busy machine.
    return Guard.from_dict({"version": 1, "timeout": "60s", "rules": list(rules)}, state=store)


def left(decision: Decision) -> dict[str, tuple[float, float]]:
    return {b.rule: (b.used, b.remaining) for b in decision.budgets}


def test_each_decision_says_what_its_limits_have_left(store) -> None:
    g = guard(store, {"id": "calls", "limit": {"calls": 2, "window": "1h", "per": "session"}},
              {"id": "spend", "match": {"tool": "pay"},
               "limit": {"sum": "args.amount", "max": 100, "per": "session"}})
    first = g.check("pay", {"amount": 30}, session="s")
    assert left(first) == {"calls": (1, 1), "spend": (30, 70)}
    assert left(g.check("read", {}, session="s")) == {"calls": (2, 0)}
    over = g.check("pay", {"amount": 30}, session="s")
    assert over.effect is Effect.DENY and over.rule == "calls"
    # nothing counted for the refused call; the exceeded limit says when it frees up
    assert left(over) == {"calls": (2, 0), "spend": (30, 70)}
    calls = next(b for b in over.budgets if b.rule == "calls")
    assert calls.reset_at is not None and time.time() < calls.reset_at <= time.time() + 3600
    assert next(b for b in over.budgets if b.rule == "spend").reset_at is None
    assert "2 used of 2 calls" in over.message and "frees up" in over.message


def test_a_what_if_query_reads_the_budgets_without_counting(store) -> None:
    g = guard(store, {"id": "calls", "limit": {"calls": 3, "per": "session"}})
    g.check("t", {}, session="s")
    for _ in range(3):
        assert left(g.query("t", {}, session="s")) == {"calls": (1, 2)}
    assert left(g.check("t", {}, session="s")) == {"calls": (2, 1)}


def test_attempt_caps_count_every_attempt(store) -> None:
    g = guard(store, {"id": "no-loops", "limit": {"attempts": 2, "per": ["session", "args"]}},
              {"id": "no-rm", "match": {"tool": "rm"}, "effect": "deny"})
    assert left(g.check("rm", {"path": "x"}, session="s")) == {"no-loops": (1, 1)}
    assert left(g.check("rm", {"path": "x"}, session="s")) == {"no-loops": (2, 0)}


def test_a_limit_per_value_reports_its_tightest_value(store) -> None:
    g = guard(store, {"id": "per-recipient", "limit": {"calls": 2, "per": "recipient"}})
    g.check("send_email", {"to": "a@x.example"})
    both = g.check("send_email", {"to": ["a@x.example", "b@x.example"]})
    assert both.allowed and left(both) == {"per-recipient": (2, 0)}


def test_the_service_answer_and_a_decision_read_back_carry_them(store) -> None:
    g = guard(store, {"id": "calls", "limit": {"calls": 5, "per": "session"}})
    decision = g.check("t", {}, session="s")
    data = decision.to_dict()
    assert data["budgets"] == [{"rule": "calls", "limit": 5.0, "used": 1.0, "remaining": 4.0,
                                "reset_at": None}]
    assert Decision.from_dict(data).budgets == decision.budgets
    assert Decision.from_dict({**data, "budgets": [{"rule": "x"}, "junk"]}).budgets == ()
