"""Limit rules: missing amounts, counter keys, reset times, state URLs and bad values."""

from __future__ import annotations

import time

import pytest
from _state_support import Clock, T

from callwarden import Effect, Guard, PolicyError
from callwarden._call import snapshot
from callwarden.engine.limits import LimitSpec
from callwarden.state import Counter, SQLiteStore


def limited(*rules: dict, **settings: object) -> dict:
    # A generous deadline unless a test sets one: a first decision on a fresh Redis Cluster
    # client can outlast the default second on a busy machine (a deny that reads as a miscount).
    return {"version": 1, "rules": list(rules), "timeout": "60s", **settings}


SPEND = limited({"id": "spend", "match": {"tool": "pay"},
                 "limit": {"sum": "args.amount", "max": 100, "per": "principal"}})


# -- a spend budget without the amount -------------------------------------------------------


def test_spend_budget_denies_a_call_without_the_amount(store) -> None:
    guard = Guard.from_dict(SPEND, state=store)
    d = guard.check("pay", {}, principal="p")
    assert d.effect is Effect.DENY and d.rule == "spend"
    assert d.reasons[0].code == "policy_error"
    assert "args.amount is missing" in d.reasons[0].message


def test_spend_budget_counts_nothing_for_a_call_without_the_amount(store) -> None:
    guard = Guard.from_dict(SPEND, state=store)
    guard.check("pay", {"to": "x"}, principal="p")
    assert guard.check("pay", {"amount": 100}, principal="p").allowed


# -- counter keys ----------------------------------------------------------------------------


def key(per: list[str], **fields: str | None) -> str:
    spec = LimitSpec.parse({"calls": 1, "per": per})
    call = snapshot("t", {}, "id", fields.get("agent"), fields.get("session"),
                    fields.get("principal"), None, None)
    return spec.counter("r", call).key


def test_counter_keys_of_values_holding_separators_never_collide() -> None:
    assert key(["session", "agent"], session="s|agent=x") != key(
        ["session", "agent"], session="s", agent="x|agent=")


def test_an_unset_field_and_an_empty_one_count_apart() -> None:
    assert key(["session"], session=None) != key(["session"], session="")


def test_a_percent_sign_in_a_value_cannot_forge_an_escape() -> None:
    assert key(["session"], session="a%7Cb") != key(["session"], session="a|b")


def test_a_per_session_counter_is_kept_with_its_session() -> None:
    """Its shard is the session (a Redis Cluster keeps it in the session history's slot); a
    counter not per session, or of a call without one, is kept by its own key."""
    def shard(per: list[str], **fields: str | None) -> str | None:
        spec = LimitSpec.parse({"calls": 5, "per": per})
        call = snapshot("t", {}, "id", fields.get("agent"), fields.get("session"),
                        fields.get("principal"), None, None)
        return spec.counter("r", call).shard

    assert shard(["session", "tool"], session="s1") == "s1"
    assert shard(["agent"], session="s1", agent="a") is None
    assert shard(["session"], session=None) is None
    assert shard([], session="s1") is None


def test_sessions_whose_names_hold_separators_have_budgets_of_their_own(store) -> None:
    guard = Guard.from_dict(limited({"id": "b", "limit": {"calls": 1, "per": ["session", "agent"]}}),
                            state=store)
    assert guard.check("t", {}, session="s|agent=x").allowed
    assert guard.check("t", {}, session="s", agent="x|agent=").allowed
    assert not guard.check("t", {}, session="s", agent="x|agent=").allowed


# -- when an attempt cap frees up ------------------------------------------------------------


async def test_attempt_cap_reset_time_counts_the_attempt_just_made(api) -> None:
    attempts = Counter("loop", 3, 600.0, always=True)
    for t in range(3):
        await api.consume([attempts], now=T + t)
    [state] = await api.consume([attempts], now=T + 3)
    # The denied attempt at T+3 counts too: 4 in the window, the second must leave.
    assert state.exceeded and state.reset_at == T + 601


async def test_an_attempt_at_the_reset_time_is_allowed(api) -> None:
    attempts = Counter("loop", 3, 600.0, always=True)
    for t in range(4):
        [state] = await api.consume([attempts], now=T + t)
    assert state.reset_at is not None
    [at_reset] = await api.consume([attempts], now=state.reset_at, commit=False)
    assert not at_reset.exceeded


def test_attempt_cap_message_names_the_time_a_retry_is_allowed(store) -> None:
    clock = Clock()
    guard = Guard.from_dict(limited({"id": "loop", "limit": {
        "attempts": 3, "window": "10m", "per": "session"}}), state=store, clock=clock)
    for t in range(4):
        clock.now = T + t
        d = guard.check("t", {}, session="s")
    assert d.effect is Effect.DENY
    assert time.strftime("%H:%M:%S UTC", time.gmtime(T + 601)) in d.message
    clock.now = T + 601
    assert guard.check("t", {}, session="s").allowed


# -- state URLs from Python ------------------------------------------------------------------


def test_from_dict_opens_a_state_url(tmp_path) -> None:
    guard = Guard.from_dict(limited({"id": "b", "limit": {"calls": 1}}),
                            state=f"sqlite:///{tmp_path / 'state.db'}")
    assert isinstance(guard.engine.store, SQLiteStore)
    assert guard.check("t", {}).allowed and not guard.check("t", {}).allowed
    guard.close()


def test_a_bad_state_url_in_from_dict_is_a_policy_error() -> None:
    with pytest.raises(PolicyError, match="state: cannot open the state store"):
        Guard.from_dict(limited({"id": "b", "limit": {"calls": 1}}), state="nosuch://x")


def test_a_bad_state_url_in_guard_is_a_policy_error() -> None:
    with pytest.raises(PolicyError, match="state: cannot open the state store"):
        Guard(rules=[{"id": "b", "limit": {"calls": 1}}], state="sqlite://host/x.db")


def test_a_state_that_is_no_store_is_a_policy_error() -> None:
    with pytest.raises(PolicyError, match="must be a StateStore or a store URL"):
        Guard.from_dict(limited({"id": "b", "limit": {"calls": 1}}), state=42)


# -- values that would deny every call -------------------------------------------------------


@pytest.mark.parametrize(("limit", "fragment"), [
    ("{calls: .inf}", "rules[0].limit.calls: must be a finite number"),
    ("{calls: .nan}", "rules[0].limit.calls: must be a finite number"),
    ("{attempts: .inf}", "rules[0].limit.attempts: must be a finite number"),
    ("{sum: args.amount, max: .inf}", "rules[0].limit.max: must be a finite number"),
    ("{calls: 5, window: .inf}", "rules[0].limit.window: must be a finite duration"),
    ("{calls: 5, window: .nan}", "rules[0].limit.window: must be a finite duration"),
    ("{calls: 5, window: 99999999999999d}", "rules[0].limit.window: '99999999999999d' is "
                                            "longer than 10 years"),
])
def test_infinite_or_huge_limit_values_are_load_errors_naming_line_and_key(limit, fragment):
    text = f"version: 1\nrules:\n  - id: x\n    limit: {limit}\n"
    with pytest.raises(PolicyError) as info:
        Guard.from_yaml(text, filename="p.yaml")
    assert f"p.yaml:4: {fragment}" in str(info.value)


def test_a_ten_year_window_loads() -> None:
    Guard.from_dict(limited({"id": "x", "limit": {"calls": 5, "window": "3650d"}}))


# -- history: what ran -----------------------------------------------------------------------


def test_a_denied_call_is_an_attempt_not_a_call_that_ran(store) -> None:
    guard = Guard.from_dict(limited(
        {"id": "no-fetch", "match": {"tool": "web_fetch"}, "effect": "deny"},
        {"id": "mail-after-fetch", "match": {"tool": "send_email"},
         "if": "'web_fetch' in history.tools", "effect": "ask"},
        {"id": "retries", "match": {"tool": "send_email"},
         "if": "'web_fetch' in history.attempts", "effect": "deny", "message": "m"}),
        state=store)
    guard.check("web_fetch", {"url": "https://x"}, session="s")
    d = guard.check("send_email", {}, session="s")
    assert {m.rule for m in d.matched} == {"retries"}  # tried, but it never ran
