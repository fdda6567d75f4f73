"""Counters with members (the calls in flight, the values of a fan-out) and their release, on
every store kind, sync and async: the same semantics everywhere."""

from __future__ import annotations

import pytest

from callwarden.state import Counter

T = 1_000_000.0  # a fixed "now"; holds are checked by moving it, never by sleeping


def held(*members: str, key: str = "k", limit: float = 3, window: float = 10.0,
         **kw: object) -> Counter:
    return Counter(key, limit, window, members=members, **kw)  # type: ignore[arg-type]


async def test_usage_is_the_members_other_calls_hold(api) -> None:
    await api.consume([held("a", "b")], now=T)
    [state] = await api.consume([held("b", "c")], now=T + 1)
    assert (state.used, state.exceeded) == (1.0, False)  # a; b is this call's own
    [after] = await api.consume([held("x")], now=T + 2, commit=False)
    assert after.used == 3.0


async def test_a_member_held_already_counts_once(api) -> None:
    await api.consume([held("a", "b", limit=2)], now=T)
    [state] = await api.consume([held("a", limit=2)], now=T + 1)
    assert (state.used, state.exceeded) == (1.0, False)


async def test_a_call_bringing_more_members_than_fit_is_refused_whole(api) -> None:
    await api.consume([held("a")], now=T)
    [state] = await api.consume([held("b", "c", "d")], now=T + 1)
    assert (state.used, state.exceeded) == (1.0, True)
    [after] = await api.consume([held("x")], now=T + 2, commit=False)
    assert after.used == 1.0  # neither b, c nor d is held


async def test_members_are_let_go_at_the_end_of_their_hold(api) -> None:
    await api.consume([held("a", limit=1)], now=T)
    [before] = await api.consume([held("b", limit=1)], now=T + 9.5, commit=False)
    [at] = await api.consume([held("b", limit=1)], now=T + 10.0, commit=False)
    assert (before.exceeded, at.exceeded) == (True, False)


async def test_holding_a_member_again_moves_its_hold_on(api) -> None:
    await api.consume([held("a")], now=T)
    await api.consume([held("a")], now=T + 5)
    [state] = await api.consume([held("x")], now=T + 12, commit=False)
    assert state.used == 1.0


async def test_a_member_is_never_held_for_less_than_it_was(api) -> None:
    """A caller whose clock runs behind must not shorten another caller's hold."""
    await api.consume([held("a")], now=T + 5)
    await api.consume([held("a")], now=T)
    [state] = await api.consume([held("x")], now=T + 12, commit=False)
    assert state.used == 1.0


async def test_a_refused_call_holds_none_of_its_members(api) -> None:
    full = Counter("full", 1, 10.0)
    await api.consume([full], now=T)
    [state, _] = await api.consume([held("a"), full], now=T)
    assert not state.exceeded
    [after] = await api.consume([held("x")], now=T, commit=False)
    assert after.used == 0.0


async def test_without_commit_nothing_is_held(api) -> None:
    await api.consume([held("a")], now=T, commit=False)
    [state] = await api.consume([held("x")], now=T, commit=False)
    assert state.used == 0.0


async def test_release_lets_a_member_go(api) -> None:
    await api.consume([held("s1", limit=1)], now=T)
    [refused] = await api.consume([held("s2", limit=1)], now=T + 1)
    await api.release([held("s1", limit=1)])
    [allowed] = await api.consume([held("s2", limit=1)], now=T + 2)
    assert (refused.exceeded, allowed.exceeded) == (True, False)


async def test_release_lets_go_only_the_members_named(api) -> None:
    await api.consume([held("a", "b", "c")], now=T)
    await api.release([held("b")])
    [state] = await api.consume([held("x")], now=T, commit=False)
    assert state.used == 2.0


async def test_release_is_idempotent_and_skips_what_is_not_held(api) -> None:
    await api.consume([held("a", "b")], now=T)
    await api.release([held("a")])
    await api.release([held("a"), held("zz"), held("q", key="never-used")])
    [state] = await api.consume([held("x")], now=T, commit=False)
    assert state.used == 1.0


async def test_a_released_key_can_be_held_again(api) -> None:
    await api.consume([held("a", limit=1)], now=T)
    await api.release([held("a", limit=1)])
    await api.consume([held("b", limit=1)], now=T)
    [state] = await api.consume([held("c", limit=1)], now=T)
    assert (state.used, state.exceeded) == (1.0, True)


async def test_reset_at_is_when_the_oldest_hold_of_another_call_ends(api) -> None:
    for i, member in enumerate("abc"):
        await api.consume([held(member)], now=T + i)
    [state] = await api.consume([held("d")], now=T + 5)
    assert (state.exceeded, state.reset_at) == (True, T + 10.0)


async def test_reset_at_waits_for_the_other_calls_members_only(api) -> None:
    """This call's own member leaving would not make room: the next one must."""
    await api.consume([held("a", limit=2)], now=T)
    await api.consume([held("b", limit=2)], now=T + 1)
    [state] = await api.consume([held("a", "c", limit=2)], now=T + 2)
    assert (state.used, state.exceeded, state.reset_at) == (1.0, True, T + 11.0)


async def test_reset_at_is_none_when_the_call_has_more_members_than_the_limit(api) -> None:
    [state] = await api.consume([held("a", "b", "c", limit=2)], now=T)
    assert (state.exceeded, state.reset_at) == (True, None)


async def test_last_at_is_when_the_newest_member_was_held(api) -> None:
    await api.consume([held("a")], now=T)
    await api.consume([held("b")], now=T + 3)
    [state] = await api.consume([held("c")], now=T + 4)
    assert state.last_at == T + 3


async def test_members_and_other_counters_count_in_one_step(api) -> None:
    budget = Counter("budget", 5, None)
    states = await api.consume([held("a", "b"), budget], now=T)
    after = await api.consume([held("x"), budget], now=T, commit=False)
    assert [s.exceeded for s in states] == [False, False]
    assert [s.used for s in after] == [2.0, 1.0]


async def test_keys_of_members_are_kept_apart(api) -> None:
    await api.consume([held("a", key="k1", limit=1)], now=T)
    [state] = await api.consume([held("b", key="k2", limit=1)], now=T)
    assert not state.exceeded


async def test_members_with_unusual_characters_are_kept_apart(api) -> None:
    await api.consume([held("a:b c/ü\n", "1", limit=2)], now=T)
    [state] = await api.consume([held("a:b c/ü", limit=2)], now=T)
    assert (state.used, state.exceeded) == (2.0, True)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"window": None}, "need a window"),
        ({"members": ("a", "a")}, "distinct"),
        ({"members": ("a", "")}, "non-empty"),
        ({"members": ["a"]}, "tuple"),
        ({"weight": 2.0}, "weight of 1"),
        ({"always": True}, "without always"),
        ({"spacing": (1.0,)}, "without always or spacing"),
    ],
)
def test_counter_rejects_members_it_cannot_count(fields: dict[str, object],
                                                 message: str) -> None:
    values: dict[str, object] = {"key": "k", "limit": 1, "window": 10.0, "members": ("a",),
                                 **fields}
    with pytest.raises(ValueError, match=message):
        Counter(**values)  # type: ignore[arg-type]
