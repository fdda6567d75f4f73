"""Limits per value of a role or an argument (``per: [session, recipient]``, ``args.currency``):
values compared as entities, a call with several counted under each, exact under concurrency on
every store."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from callwarden import Effect, Guard, PolicyError

MAIL = {"send_email": {"kind": "email", "roles": {"recipient": ["to", "cc"]}}}


def policy(limit: dict[str, Any], tools: dict[str, Any] | None = None, **rule: Any) -> dict:
    # A generous deadline: a first decision on a fresh Redis Cluster client can outlast the
    # default second on a busy machine (a store timeout is a deny, read here as a miscount).
    return {"version": 1, "tools": tools or MAIL, "timeout": "60s",
            "rules": [{"id": "per-value", "limit": limit, "message": "Enough for today.", **rule}]}


def test_each_recipient_has_a_budget_of_its_own_however_it_is_written(store) -> None:
    guard = Guard.from_dict(policy({"calls": 2, "window": "1h", "per": ["session", "recipient"]}),
                            state=store)
    for to in ("bob@x.example", "Bob@X.example", "mailto:bob@x.example"):
        decision = guard.check("send_email", {"to": to}, session="s")
    assert decision.effect is Effect.DENY and decision.rule == "per-value"
    assert "per session and recipient" in decision.reasons[0].message
    assert guard.check("send_email", {"to": "carol@x.example"}, session="s").allowed
    assert guard.check("send_email", {"to": "bob@x.example"}, session="other").allowed


def test_a_call_with_several_values_counts_under_each_and_says_so_once(store) -> None:
    guard = Guard.from_dict(policy({"calls": 1, "per": "recipient"}), state=store)
    assert guard.check("send_email", {"to": "a@x.example", "cc": ["b@x.example"]}).allowed
    both = guard.check("send_email", {"to": "b@x.example", "cc": "a@x.example"})
    assert both.effect is Effect.DENY and [r.rule for r in both.reasons] == ["per-value"]
    assert guard.check("send_email", {"to": "c@x.example"}).allowed
    # one value over the limit refuses the whole call, and nothing of it is counted
    assert not guard.check("send_email", {"to": "d@x.example", "cc": "a@x.example"}).allowed
    assert guard.check("send_email", {"to": "d@x.example"}).allowed


def test_payees_compare_as_ibans(store) -> None:
    guard = Guard.from_dict(policy({"calls": 2, "window": "1d", "per": "payee"},
                                   tools={"transfer": {"kind": "payment"}}), state=store)
    assert guard.check("transfer", {"iban": "DE89 3704 0044 0532 0130 00", "amount": 1}).allowed
    assert guard.check("transfer", {"iban": "de89370400440532013000", "amount": 1}).allowed
    assert not guard.check("transfer", {"iban": "DE89370400440532013000", "amount": 1}).allowed
    assert guard.check("transfer", {"iban": "GB82WEST12345698765432", "amount": 1}).allowed


def test_a_spend_budget_per_argument_value(store) -> None:
    guard = Guard.from_dict(policy({"sum": "args.amount", "max": 100, "per": "args.currency"}),
                            state=store)
    assert guard.check("pay", {"amount": 80, "currency": "EUR"}).allowed
    assert guard.check("pay", {"amount": 80, "currency": "USD"}).allowed
    over = guard.check("pay", {"amount": 30, "currency": "EUR"})
    assert over.effect is Effect.DENY and "per args.currency" in over.reasons[0].message
    assert guard.check("pay", {"amount": 20, "currency": "EUR"}).allowed


def test_a_role_a_profile_declares_counts_per_value(store) -> None:
    tools = {"post": {"roles": {"channel": "room"}}}
    guard = Guard.from_dict(policy({"calls": 1, "per": "roles.channel"}, tools=tools),
                            state=store)
    assert guard.check("post", {"room": "#ops", "text": "a"}).allowed
    assert not guard.check("post", {"room": "#ops", "text": "b"}).allowed
    assert guard.check("post", {"room": "#dev", "text": "c"}).allowed


def test_calls_without_the_value_share_one_counter_of_their_own(store) -> None:
    guard = Guard.from_dict(policy({"calls": 1, "per": "recipient"}), state=store)
    assert guard.check("send_email", {"body": "no one"}).allowed
    assert not guard.check("send_email", {"body": "still no one"}).allowed
    assert guard.check("send_email", {"to": "a@x.example"}).allowed


def test_a_call_holding_too_many_values_is_refused_and_counts_nothing(store) -> None:
    guard = Guard.from_dict(policy({"calls": 1, "per": "recipient"}), state=store)
    crowd = [f"p{i}@x.example" for i in range(65)]
    refused = guard.check("send_email", {"to": crowd})
    assert refused.effect is Effect.DENY and refused.reasons[0].code == "policy_error"
    assert "too many values" in refused.reasons[0].message
    assert guard.check("send_email", {"to": crowd[:64]}).allowed


def test_a_per_value_budget_is_exact_under_concurrency(store) -> None:
    guard = Guard.from_dict(policy({"calls": 5, "per": ["session", "recipient"]}),
                            state=store)

    def send(i: int) -> bool:
        to = "bob@x.example" if i % 2 else "BOB@x.example"
        return guard.check("send_email", {"to": to}, session="s").allowed

    with ThreadPoolExecutor(8) as pool:
        allowed = sum(pool.map(send, range(24)))
    assert allowed == 5


@pytest.mark.parametrize("per", ["sesion", "args.", "roles.", 3])
def test_what_cannot_be_counted_per_is_a_policy_error(per: Any) -> None:
    with pytest.raises(PolicyError, match="cannot count per") as error:
        Guard.from_dict(policy({"calls": 1, "per": ["session", per]}))
    assert "a role (recipient, payee, roles.NAME) or an argument (args.NAME)" in str(error.value)
