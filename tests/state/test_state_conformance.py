"""Semantics every store shares, run against memory, SQLite and a real Redis, sync and async."""

from __future__ import annotations

import math

import pytest

from callwarden.state import Counter, CounterState

T = 1_000_000.0  # a fixed "now"; windows are checked by moving it, never by sleeping


def rate(key: str = "rate", limit: float = 3, window: float | None = 10.0, **kw: object) -> Counter:
    return Counter(key, limit, window, **kw)  # type: ignore[arg-type]


async def test_calls_within_the_limit_are_not_exceeded(api) -> None:
    results = [await api.consume([rate()], now=T + i) for i in range(3)]
    assert [r[0].exceeded for r in results] == [False, False, False]


async def test_call_past_the_limit_is_exceeded(api) -> None:
    for i in range(3):
        await api.consume([rate()], now=T + i)
    [state] = await api.consume([rate()], now=T + 3)
    assert state.exceeded


async def test_used_is_the_usage_before_this_call(api) -> None:
    results = [await api.consume([rate(limit=10)], now=T + i) for i in range(4)]
    assert [r[0].used for r in results] == [0.0, 1.0, 2.0, 3.0]


async def test_exceeded_calls_are_not_counted(api) -> None:
    for i in range(5):
        await api.consume([rate()], now=T + i)
    [state] = await api.consume([rate()], now=T + 5)
    assert state.used == 3.0


async def test_event_counts_just_before_window_end(api) -> None:
    await api.consume([rate(limit=1, window=10.0)], now=T)
    [state] = await api.consume([rate(limit=1, window=10.0)], now=math.nextafter(T + 10.0, 0))
    assert (state.used, state.exceeded) == (1.0, True)


async def test_event_stops_counting_exactly_at_t_plus_window(api) -> None:
    """The boundary is exclusive: at now == t + window the event no longer counts."""
    await api.consume([rate(limit=1, window=10.0)], now=T)
    [state] = await api.consume([rate(limit=1, window=10.0)], now=T + 10.0)
    assert (state.used, state.exceeded) == (0.0, False)


async def test_window_edge_is_exact_for_inexact_floats(api) -> None:
    t, window = 0.1, 0.2  # 0.1 + 0.2 != 0.3 in binary floating point
    await api.consume([rate(limit=1, window=window)], now=t)
    [before] = await api.consume([rate(limit=1, window=window)], now=math.nextafter(t + window, 0))
    [at] = await api.consume([rate(limit=1, window=window)], now=t + window)
    assert (before.exceeded, at.exceeded) == (True, False)


async def test_sliding_window_drops_only_expired_events(api) -> None:
    for i in range(3):
        await api.consume([rate(limit=10, window=10.0)], now=T + i)
    [state] = await api.consume([rate(limit=10, window=10.0)], now=T + 11.0)
    assert state.used == 1.0  # events at T and T+1 left; T+2 still counts


async def test_event_stamped_after_now_still_counts(api) -> None:
    """A caller whose clock runs behind must not undercount another caller's usage."""
    await api.consume([rate(limit=1)], now=T + 5)
    [state] = await api.consume([rate(limit=1)], now=T)
    assert state.exceeded


async def test_counter_without_window_counts_until_it_is_idle(api) -> None:
    budget = rate("budget", limit=2, window=None)
    await api.consume([budget], now=T)
    await api.consume([budget], now=T + 1)
    [state] = await api.consume([budget], now=T + 6 * 86400)  # idle for less than 7 days
    assert (state.used, state.exceeded) == (2.0, True)


async def test_usage_is_the_sum_of_weights(api) -> None:
    spend = rate("spend", limit=100, window=60.0)
    for amount in (12.5, 30.0, 7.25):
        await api.consume([Counter(spend.key, 100, 60.0, weight=amount)], now=T)
    [state] = await api.consume([spend], now=T + 1)
    assert state.used == 49.75


async def test_weight_that_would_pass_the_limit_is_exceeded(api) -> None:
    await api.consume([rate("spend", limit=100, weight=60.0)], now=T)
    [state] = await api.consume([rate("spend", limit=100, weight=41.0)], now=T)
    assert (state.used, state.exceeded) == (60.0, True)


async def test_weight_that_reaches_the_limit_exactly_fits(api) -> None:
    await api.consume([rate("spend", limit=100, weight=60.0)], now=T)
    [state] = await api.consume([rate("spend", limit=100, weight=40.0)], now=T)
    assert not state.exceeded


async def test_fractional_weights_add_up_to_the_limit(api) -> None:
    """Three calls of 0.1 fit a limit of 0.3, although 0.1 + 0.1 + 0.1 > 0.3 in floats."""
    results = [await api.consume([rate("f", limit=0.3, weight=0.1)], now=T) for _ in range(4)]
    assert [r[0].exceeded for r in results] == [False, False, False, True]


async def test_weighted_events_leave_the_window_with_their_weight(api) -> None:
    await api.consume([rate("spend", limit=100, window=10.0, weight=70.0)], now=T)
    await api.consume([rate("spend", limit=100, window=10.0, weight=20.0)], now=T + 5)
    [state] = await api.consume([rate("spend", limit=100, window=10.0, weight=50.0)], now=T + 10)
    assert (state.used, state.exceeded) == (20.0, False)


async def test_zero_weight_never_counts(api) -> None:
    await api.consume([rate(limit=1, weight=0.0)], now=T)
    [state] = await api.consume([rate(limit=1)], now=T)
    assert state.used == 0.0


async def test_one_exceeded_counter_blocks_counting_the_others(api) -> None:
    """All or nothing: when any counter is exceeded, no non-always counter is counted."""
    full = rate("full", limit=1)
    await api.consume([full], now=T)
    await api.consume([rate("free", limit=10), full], now=T)
    [state] = await api.consume([rate("free", limit=10)], now=T)
    assert state.used == 0.0


async def test_every_counter_is_counted_when_none_is_exceeded(api) -> None:
    counters = [rate("a", limit=5), rate("b", limit=5, window=None, weight=2.0)]
    await api.consume(counters, now=T)
    states = await api.consume(counters, now=T, commit=False)
    assert [s.used for s in states] == [1.0, 2.0]


async def test_results_come_in_counter_order(api) -> None:
    await api.consume([rate("full", limit=1)], now=T)
    states = await api.consume([rate("ok", limit=5), rate("full", limit=1)], now=T)
    assert [s.exceeded for s in states] == [False, True]


async def test_always_counter_counts_when_another_is_exceeded(api) -> None:
    full = rate("full", limit=1)
    attempts = rate("attempts", limit=100, always=True)
    await api.consume([full], now=T)
    await api.consume([attempts, full], now=T)
    [state] = await api.consume([rate("attempts", limit=100)], now=T, commit=False)
    assert state.used == 1.0


async def test_always_counter_counts_when_itself_exceeded(api) -> None:
    attempts = rate("attempts", limit=1, always=True)
    for _ in range(3):
        await api.consume([attempts], now=T)
    [state] = await api.consume([rate("attempts", limit=1)], now=T, commit=False)
    assert state.used == 3.0


async def test_always_counter_counts_without_commit(api) -> None:
    await api.consume([rate("attempts", always=True)], now=T, commit=False)
    [state] = await api.consume([rate("attempts")], now=T, commit=False)
    assert state.used == 1.0


async def test_commit_false_counts_nothing_else(api) -> None:
    counters = [rate("a"), rate("b", window=None)]
    await api.consume(counters, now=T, commit=False)
    states = await api.consume(counters, now=T, commit=False)
    assert [s.used for s in states] == [0.0, 0.0]


async def test_commit_false_still_reports_exceeded(api) -> None:
    await api.consume([rate(limit=1)], now=T)
    [state] = await api.consume([rate(limit=1)], now=T, commit=False)
    assert state.exceeded


async def test_reset_at_is_when_the_oldest_event_leaves(api) -> None:
    for i in range(3):
        await api.consume([rate(limit=3, window=10.0)], now=T + i)
    [state] = await api.consume([rate(limit=3, window=10.0)], now=T + 5)
    assert state.reset_at == T + 10.0


async def test_reset_at_waits_for_enough_weight_to_leave(api) -> None:
    for i, amount in enumerate((10.0, 10.0, 70.0)):
        await api.consume([rate("spend", limit=100, weight=amount)], now=T + i)
    [state] = await api.consume([rate("spend", limit=100, weight=25.0)], now=T + 3)
    assert state.reset_at == T + 1 + 10.0  # 15 must leave: the first two events


async def test_reset_at_is_none_when_not_exceeded(api) -> None:
    [state] = await api.consume([rate()], now=T)
    assert state == CounterState(0.0, False, None)


async def test_reset_at_is_none_without_window(api) -> None:
    await api.consume([rate("budget", limit=1, window=None)], now=T)
    [state] = await api.consume([rate("budget", limit=1, window=None)], now=T)
    assert (state.exceeded, state.reset_at) == (True, None)


async def test_reset_at_is_none_when_weight_exceeds_the_limit_alone(api) -> None:
    [state] = await api.consume([rate("spend", limit=10, weight=11.0)], now=T)
    assert (state.exceeded, state.reset_at) == (True, None)


async def test_no_counters_give_no_states(api) -> None:
    assert await api.consume([], now=T) == []


async def test_keys_are_counted_separately(api) -> None:
    await api.consume([rate("s1", limit=1)], now=T)
    [state] = await api.consume([rate("s2", limit=1)], now=T)
    assert (state.used, state.exceeded) == (0.0, False)


async def test_same_key_twice_in_one_call_sees_usage_before_the_call(api) -> None:
    states = await api.consume([rate("k", limit=5), rate("k", limit=5)], now=T)
    [after] = await api.consume([rate("k", limit=5)], now=T, commit=False)
    assert ([s.used for s in states], after.used) == ([0.0, 0.0], 2.0)


async def test_keys_with_unusual_characters_are_kept_apart(api) -> None:
    await api.consume([rate("a:b c/ü\n", limit=1)], now=T)
    [state] = await api.consume([rate("a:b c/ü", limit=1)], now=T)
    assert not state.exceeded


async def test_last_at_is_when_the_newest_event_happened(api) -> None:
    await api.consume([rate(limit=10)], now=T)
    await api.consume([rate(limit=10)], now=T + 3)
    [state] = await api.consume([rate(limit=10)], now=T + 4)
    assert state.last_at == T + 3


async def test_last_at_is_none_without_an_event_in_the_window(api) -> None:
    [first] = await api.consume([rate()], now=T)
    [later] = await api.consume([rate()], now=T + 10)
    await api.consume([rate("budget", window=None)], now=T)
    [budget] = await api.consume([rate("budget", window=None)], now=T)
    assert (first.last_at, later.last_at, budget.last_at) == (None, None, None)


def spaced(limit: float = 10, spacing: tuple[float, ...] = (2.0, 4.0), **kw: object) -> Counter:
    return Counter("retry", limit, 600.0, spacing=spacing, **kw)  # type: ignore[arg-type]


async def test_a_call_too_soon_after_the_last_is_exceeded(api) -> None:
    await api.consume([spaced()], now=T)
    [soon] = await api.consume([spaced()], now=T + 1.5)
    [spaced_enough] = await api.consume([spaced()], now=T + 2)
    assert (soon.exceeded, spaced_enough.exceeded) == (True, False)


async def test_the_wait_grows_with_the_events_and_then_stays(api) -> None:
    """spacing[n - 1] after the n-th event, its last value from then on."""
    allowed = []
    for t in (0, 2, 5.9, 6, 9.9, 10, 13.9, 14):
        [state] = await api.consume([spaced()], now=T + t)
        allowed.append(not state.exceeded)
    assert allowed == [True, True, False, True, False, True, False, True]


async def test_a_spaced_out_call_says_when_it_may_come(api) -> None:
    await api.consume([spaced()], now=T)
    await api.consume([spaced()], now=T + 2)
    [state] = await api.consume([spaced()], now=T + 3)
    assert (state.exceeded, state.reset_at, state.last_at) == (True, T + 6, T + 2)


async def test_an_attempt_too_soon_counts_and_restarts_the_wait(api) -> None:
    """An always counter counts the refused attempt: the wait starts again from it."""
    attempts = spaced(always=True)
    await api.consume([attempts], now=T)
    [state] = await api.consume([attempts], now=T + 1)
    [retry] = await api.consume([attempts], now=T + 4.5)
    assert (state.exceeded, state.reset_at) == (True, T + 5)
    assert (retry.used, retry.exceeded, retry.reset_at) == (2.0, True, T + 8.5)


async def test_a_spaced_out_call_counts_no_other_counter(api) -> None:
    budget = rate("budget", limit=10, window=None)
    await api.consume([spaced(always=True), budget], now=T)
    states = await api.consume([spaced(always=True), budget], now=T + 1)
    [after] = await api.consume([budget], now=T + 1, commit=False)
    assert [s.exceeded for s in states] == [True, False] and after.used == 1.0


@pytest.mark.parametrize(("wait", "frees"), [(300.0, T + 600), (900.0, T + 901)])
async def test_over_the_limit_and_spaced_out_frees_at_the_later_of_both(
        api, wait: float, frees: float) -> None:
    limited = spaced(limit=2, spacing=(1.0, wait))
    await api.consume([limited], now=T)
    await api.consume([limited], now=T + 1)
    [state] = await api.consume([limited], now=T + 2)
    assert (state.exceeded, state.reset_at) == (True, frees)


async def test_a_spaced_out_attempt_that_fills_the_limit_frees_with_the_limit(api) -> None:
    attempts = spaced(limit=2, spacing=(5.0,), always=True)
    await api.consume([attempts], now=T)
    [state] = await api.consume([attempts], now=T + 1)  # too soon, and it counts: 2 of 2
    assert (state.used, state.exceeded, state.reset_at) == (1.0, True, T + 600)


async def test_spacing_leaves_the_first_call_of_a_window_free(api) -> None:
    await api.consume([spaced()], now=T)
    [state] = await api.consume([spaced()], now=T + 600)
    assert (state.used, state.exceeded) == (0.0, False)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("limit", -1),
        ("limit", math.nan),
        ("window", 0),
        ("window", math.inf),
        ("weight", -0.5),
        ("weight", math.inf),
        ("key", ""),
        ("spacing", (math.inf,)),
        ("spacing", (-1.0,)),
        ("spacing", [1.0]),
    ],
)
def test_counter_rejects_invalid_values(field: str, value: object) -> None:
    fields: dict[str, object] = {"key": "k", "limit": 1, "window": 1.0, "weight": 1.0}
    fields[field] = value
    with pytest.raises(ValueError, match=field):
        Counter(**fields)  # type: ignore[arg-type]
