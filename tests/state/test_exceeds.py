"""When a call goes over a limit (``exceeds``), and what a budget says is left."""

from __future__ import annotations

import math

import pytest

from callwarden.engine.limits import budgets_of
from callwarden.state import Counter
from callwarden.state._base import CounterState, exceeds


@pytest.mark.parametrize(("used", "weight", "limit", "over"), [
    (0.1 + 0.1, 0.1, 0.3, False),          # 3 x 0.1 fits 0.3: the slack is relative
    (2.0, 1.0, 3.0, False), (2.0, 1.001, 3.0, True),
    (0.0, 1e-12, 0.0, False), (0.0, 1.0, 0.0, True),  # a limit below 1 has the slack of 1
    (1e12 - 0.5, 1.0, 1e12, False),        # 0.5 over 10^12 is within 10^-9 of it
    (1e12, 10_000.0, 1e12, True),
    (0.0, math.nan, 5.0, False),
])
def test_a_call_exceeds_a_limit_by_more_than_its_relative_slack(
        used: float, weight: float, limit: float, over: bool) -> None:
    assert exceeds(used, weight, limit) is over


class _Rule:
    id = "cap"


@pytest.mark.parametrize(("used", "remaining"), [(7.0, 2.0), (9.0, 0.0), (12.0, 0.0)])
def test_a_budget_says_what_is_left_and_never_less_than_nothing(used: float,
                                                               remaining: float) -> None:
    counter = Counter("k", 10.0, None, always=True)  # an attempt cap counts every call
    [budget] = budgets_of([_Rule()], [counter], [CounterState(used, used + 1 > 10, None, None)],
                          True)
    assert (budget.used, budget.remaining) == (used + 1.0, remaining)
    assert math.copysign(1.0, budget.remaining) == 1.0  # not -0.0
