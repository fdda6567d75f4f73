"""``limit: {distinct: ROLE, max: N, window: W}``: a fan-out, at most N distinct values of a
role or argument within the window, on every store, with an injected clock."""

from __future__ import annotations

from typing import Any

from _state_support import Clock, T

from callwarden import Effect, Guard


def fanout(store: Any, *rules: dict[str, Any], clock: Any = None, **limit: Any) -> Guard:
    spec = {"distinct": "recipient", "max": 3, "window": "1h", "per": "session", **limit}
    # A generous deadline: a first decision on a fresh Redis Cluster client can be slow.
    return Guard.from_dict({"version": 1, "timeout": "60s", "rules": [
        *rules, {"id": "fan-out", "match": {"tool": "send_email"}, "limit": spec}]},
        state=store, clock=clock)


def mail(g: Guard, *to: str, session: str = "s", **fields: Any) -> Any:
    return g.check("send_email", {"to": list(to), "body": "hi"}, session=session, **fields)


def left(decision: Any) -> tuple[float, float]:
    [budget] = decision.budgets
    return budget.used, budget.remaining


def test_at_most_n_distinct_recipients(store) -> None:
    g = fanout(store)
    assert left(mail(g, "a@x.example", "b@x.example")) == (2, 1)
    assert left(mail(g, "a@x.example")) == (2, 1)  # seen already: it counts once
    over = mail(g, "c@x.example", "d@x.example")
    assert over.effect is Effect.DENY and over.reasons[0].code == "limit.exceeded"
    assert "2 other recipient values used of 3 per session within 1 h" in over.message
    assert "this call names 2 (1 left)" in over.message
    assert mail(g, "c@x.example").allowed  # the refused mail counted neither
    assert not mail(g, "d@x.example").allowed
    assert mail(g, "d@x.example", session="other").allowed


def test_values_compare_as_the_role_compares_them(store) -> None:
    g = fanout(store, max=1)
    assert mail(g, "Bob@X.example").allowed
    assert mail(g, "bob@x.example", "BOB@x.EXAMPLE").allowed


def test_values_leave_the_window_and_say_when(store) -> None:
    clock = Clock()
    g = fanout(store, clock=clock, max=2)
    mail(g, "a@x.example")
    clock.now += 600
    mail(g, "b@x.example")
    clock.now += 60
    over = mail(g, "c@x.example")
    assert over.budgets[0].reset_at == T + 3600 and "frees up at" in over.message
    clock.now = T + 3600
    assert mail(g, "c@x.example").allowed


def test_sending_again_keeps_a_value_in_the_window(store) -> None:
    clock = Clock()
    g = fanout(store, clock=clock, max=1)
    mail(g, "a@x.example")
    clock.now += 3000
    mail(g, "a@x.example")
    clock.now = T + 3600 + 1
    assert not mail(g, "b@x.example").allowed


def test_a_call_naming_more_values_than_allowed_never_fits(store) -> None:
    g = fanout(store, max=2)
    over = mail(g, "a@x.example", "b@x.example", "c@x.example")
    assert not over.allowed and over.budgets[0].reset_at is None
    assert "it never fits" in over.message and "Name fewer recipient values" in over.message


def test_a_call_without_a_value_is_not_counted(store) -> None:
    g = fanout(store, max=1)
    assert g.check("send_email", {"body": "draft"}, session="s").allowed
    assert mail(g, "a@x.example").allowed


def test_a_query_counts_no_value(store) -> None:
    g = fanout(store, max=1)
    for _ in range(3):
        assert g.query("send_email", {"to": ["a@x.example"]}, session="s").allowed
    assert mail(g, "b@x.example").allowed


def test_a_call_refused_by_another_rule_counts_no_value(store) -> None:
    g = fanout(store, {"id": "no-interns", "match": {"tool": "send_email", "agent": "intern"}},
               max=1)
    assert mail(g, "x@x.example", agent="intern").rule == "no-interns"
    assert mail(g, "a@x.example").allowed


def test_a_fan_out_of_an_argument(store) -> None:
    g = Guard.from_dict({"version": 1, "timeout": "60s", "rules": [
        {"id": "hosts", "limit": {"distinct": "args.host", "max": 2, "window": "10m",
                                  "per": "agent"}}]}, state=store)
    hosts = [g.check("fetch", {"host": h}, agent="a").allowed for h in "abac"]
    assert hosts == [True, True, True, False]


def test_an_approved_mail_counts_its_recipients_when_the_approval_is_used(store) -> None:
    g = fanout(store, {"id": "mail-asks", "match": {"tool": "send_email"}, "effect": "ask"},
               max=2)
    sent = g.run("send_email", {"to": ["a@x.example", "b@x.example"]}, lambda to: to,
                 approver=lambda d: True, session="s")
    assert sent == ["a@x.example", "b@x.example"]
    assert not g.query("send_email", {"to": ["c@x.example"]}, session="s").allowed
