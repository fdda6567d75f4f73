"""``limit: {attempts: N, window: W, backoff: ...}``: a retry cap that also spaces the retries,
on every store, with an injected clock (nothing waits for real)."""

from __future__ import annotations

from typing import Any

from _state_support import Clock, T

from callwarden import Effect, Guard


def retries(store: Any, clock: Clock, backoff: Any = "2s", *rules: dict[str, Any],
            attempts: int = 5) -> Guard:
    # A generous deadline: a first decision on a fresh Redis Cluster client can be slow.
    return Guard.from_dict({"version": 1, "timeout": "60s", "rules": [*rules, {
        "id": "retry", "limit": {"attempts": attempts, "window": "10m", "backoff": backoff,
                                 "per": ["session", "tool", "args"]}}]},
        state=store, clock=clock)


def at(clock: Clock, guard: Guard, t: float, args: Any = None) -> Any:
    clock.now = T + t
    return guard.check("fetch", args or {"url": "https://x"}, session="s")


def test_a_retry_too_soon_is_refused_with_the_time_it_may_come(store) -> None:
    clock = Clock()
    g = retries(store, clock)
    assert at(clock, g, 0).allowed
    soon = at(clock, g, 1)
    assert soon.effect is Effect.DENY and soon.reasons[0].code == "limit.backoff"
    # the refused attempt counts: the next one must wait 4 s after it
    [budget] = soon.budgets
    assert (budget.used, budget.remaining, budget.reset_at) == (2.0, 3.0, T + 5)
    assert "retried too soon, attempt 2 of 5" in soon.message and "3 left" in soon.message
    assert "wait 4 s (until " in soon.message and "before the next attempt" in soon.message


def test_the_wait_doubles_with_each_attempt(store) -> None:
    clock = Clock()
    g = retries(store, clock)
    assert [at(clock, g, t).allowed for t in (0, 2, 6, 14)] == [True] * 4
    early = at(clock, g, 29.9)  # 16 s after the fourth
    # it counts, and reaches the cap: the next attempt fits when the first leaves the window
    assert not early.allowed and early.budgets[0].reset_at == T + 600


def test_waiting_as_told_is_enough(store) -> None:
    clock = Clock()
    g = retries(store, clock)
    at(clock, g, 0)
    told = at(clock, g, 0.5).budgets[0].reset_at
    assert told is not None
    assert at(clock, g, told - T).allowed


def test_a_backoff_stops_growing_at_its_max(store) -> None:
    clock = Clock()
    g = retries(store, clock, {"base": "1s", "factor": 10, "max": "5s"}, attempts=10)
    assert [at(clock, g, t).allowed for t in (0, 1, 6, 11, 16)] == [True] * 5
    assert not at(clock, g, 20).allowed


def test_other_arguments_are_another_call(store) -> None:
    clock = Clock()
    g = retries(store, clock)
    at(clock, g, 0)
    assert at(clock, g, 0.1, {"url": "https://other"}).allowed


def test_the_attempt_cap_still_caps(store) -> None:
    clock = Clock()
    g = retries(store, clock, "1s", attempts=3)
    assert [at(clock, g, t).allowed for t in (0, 1, 3)] == [True] * 3
    over = at(clock, g, 100)
    assert over.reasons[0].code == "limit.attempts" and "3 used of 3 attempts" in over.message


def test_a_query_counts_no_attempt_and_says_when_to_retry(store) -> None:
    clock = Clock()
    g = retries(store, clock)
    at(clock, g, 0)
    clock.now = T + 1
    for _ in range(3):
        queried = g.query("fetch", {"url": "https://x"}, session="s")
        assert not queried.allowed and queried.budgets[0][2:] == (1.0, 4.0, T + 2)
    assert at(clock, g, 2).allowed


def test_a_blocked_call_retried_in_a_loop_is_spaced_then_stopped(store) -> None:
    clock = Clock()
    g = retries(store, clock, "1s", {"id": "no-rm", "match": {"tool": "bash"},
                                     "args": {"command": "rm *"}}, attempts=3)

    def rm(t: float) -> Any:
        clock.now = T + t
        return g.check("bash", {"command": "rm -rf /"}, session="s")

    first, soon, later = rm(0), rm(0.5), rm(300)
    assert first.rule == "no-rm" and "retry" in {r.rule for r in soon.reasons}
    assert [r.rule for r in later.reasons] == ["no-rm"]
    assert "limit.attempts" in {r.code for r in rm(400).reasons}
