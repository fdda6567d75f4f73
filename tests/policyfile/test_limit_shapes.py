"""The limit shapes a policy writes (calls in flight, fan-outs, backoffs): what they compile
to, and one policy error per way of writing them wrong, each naming its key and how to fix it."""

from __future__ import annotations

from typing import Any

import pytest

from callwarden import Guard, PolicyError
from callwarden.engine.limits import DEFAULT_HOLD, LimitSpec


def test_a_concurrent_limit_holds_its_slots_ten_minutes_by_default() -> None:
    spec = LimitSpec.parse({"concurrent": 3, "per": "session"})
    assert (spec.kind, spec.limit, spec.window, DEFAULT_HOLD) == ("concurrent", 3, 600, 600)
    assert LimitSpec.parse({"concurrent": 3, "hold": "90s"}).window == 90


def test_a_backoff_doubles_up_to_the_window() -> None:
    spec = LimitSpec.parse({"attempts": 8, "window": "1m", "backoff": "5s"})
    assert spec.spacing == (5, 10, 20, 40, 60)


def test_a_backoff_grows_by_its_factor_up_to_its_max() -> None:
    spec = LimitSpec.parse({"attempts": 4, "window": "1h",
                            "backoff": {"base": "1s", "factor": 3, "max": "20s"}})
    assert spec.spacing == (1, 3, 9, 20)
    assert LimitSpec.parse({"attempts": 4, "window": "1h",
                            "backoff": {"base": "2s", "factor": 1}}).spacing == (2,)


def test_a_backoff_grows_for_as_many_attempts_as_the_cap_allows() -> None:
    assert LimitSpec.parse({"attempts": 3, "window": "1d", "backoff": "1s"}).spacing == (1, 2, 4)


def test_a_fan_out_names_the_role_it_counts() -> None:
    spec = LimitSpec.parse({"distinct": "recipient", "max": 10, "window": "1h"})
    assert (spec.kind, spec.distinct, spec.limit, spec.window) == (
        "distinct", "recipient", 10, 3600)


HINTS: dict[str, tuple[dict[str, Any], str, str, str]] = {
    # name: (limit, the key the error names, its message, its hint)
    "two kinds": ({"concurrent": 3, "calls": 2}, "limit",
                  "exactly one of 'calls', 'attempts', 'sum', 'concurrent' or 'distinct'",
                  "concurrent: N (calls in flight)"),
    "concurrent with a window": ({"concurrent": 3, "window": "1m"}, "limit.window",
                                 "a concurrent limit has no window", "'hold: 10m' bounds"),
    "concurrent not whole": ({"concurrent": 2.5}, "limit.concurrent", "must be a whole number",
                             "counted one by one"),
    "concurrent negative": ({"concurrent": -1}, "limit.concurrent",
                            "must be a finite number of zero or more", "omit the rule"),
    "hold not a duration": ({"concurrent": 3, "hold": "soon"}, "limit.hold",
                            "'soon' is not a duration", ""),
    "hold too long": ({"concurrent": 3, "hold": "600w"}, "limit.hold",
                      "is longer than 10 years", "omit 'hold' for 10 minutes"),
    "hold without concurrent": ({"calls": 3, "hold": "1m"}, "limit.hold",
                                "'hold' goes with 'concurrent'", "holds its slot"),
    "fan-out without max": ({"distinct": "recipient", "window": "1h"}, "limit.distinct",
                            "'distinct' needs 'max'", "distinct: recipient, max: 10"),
    "fan-out without window": ({"distinct": "recipient", "max": 10}, "limit.distinct",
                               "a fan-out needs a window", "window: 1h"),
    "fan-out of a call field": ({"distinct": "session", "max": 3, "window": "1h"},
                                "limit.distinct", "cannot count the values of 'session'",
                                "or an argument (args.NAME)"),
    "fan-out not whole": ({"distinct": "payee", "max": 2.5, "window": "1h"}, "limit.max",
                          "must be a whole number", "counted one by one"),
    "max with calls": ({"calls": 3, "max": 5}, "limit.max", "'max' goes with 'sum' or 'distinct'",
                       "write calls: N instead"),
    "backoff without attempts": ({"calls": 3, "window": "1m", "backoff": "2s"}, "limit.backoff",
                                 "'backoff' goes with 'attempts'", "spaces the attempts"),
    "backoff without window": ({"attempts": 3, "backoff": "2s"}, "limit.backoff",
                               "a backoff needs a window", "window: 10m"),
    "backoff not a duration": ({"attempts": 3, "window": "1m", "backoff": "soon"},
                               "limit.backoff", "base: 'soon' is not a duration", ""),
    "backoff of another type": ({"attempts": 3, "window": "1m", "backoff": True},
                                "limit.backoff", "must be a duration or a mapping",
                                "backoff: {base: 2s, factor: 2, max: 1m}"),
    "backoff without base": ({"attempts": 3, "window": "1m", "backoff": {"factor": 2}},
                             "limit.backoff", "needs 'base'", "backoff: {base: 2s"),
    "backoff unknown key": ({"attempts": 3, "window": "1m",
                             "backoff": {"base": "2s", "jitter": 1}}, "limit.backoff",
                            "unknown key 'jitter'", "allowed: base, factor, max"),
    "backoff factor below 1": ({"attempts": 3, "window": "1m",
                                "backoff": {"base": "2s", "factor": 0.5}}, "limit.backoff",
                               "factor: must be a number of 1 or more", "2 doubles the wait"),
    "backoff longer than the window": ({"attempts": 3, "window": "1m", "backoff": "2m"},
                                       "limit.backoff", "base: '2m' is longer than the window",
                                       "lengthen the window"),
    "backoff max below base": ({"attempts": 3, "window": "1m",
                                "backoff": {"base": "10s", "max": "5s"}}, "limit.backoff",
                               "max: is shorter than base", ""),
}


@pytest.mark.parametrize("name", list(HINTS))
def test_a_limit_written_wrong_is_a_policy_error_saying_how_to_fix_it(name: str) -> None:
    limit, key, message, hint = HINTS[name]
    with pytest.raises(PolicyError) as error:
        Guard.from_dict({"version": 1, "rules": [{"id": "x", "limit": limit}]})
    [problem] = error.value.problems
    assert problem.key == f"rules[0].{key}"
    assert message in problem.message
    assert hint in (problem.hint or "")


def test_examples_of_a_concurrent_limit_hold_slots_within_their_case_only() -> None:
    """An earlier call without an output is still running; one with an output finished; no
    case's calls hold a slot for the next case (the policy loads only if every case passes)."""
    export = {"tool": "export"}
    guard = Guard.from_dict({"version": 1, "rules": [
        {"id": "one-export", "match": {"tool": "export"}, "limit": {"concurrent": 1},
         "examples": {
             "allow": [export, export, {**export, "earlier": [{**export, "output": "ok"}]}],
             "deny": [{**export, "earlier": [export]}, {**export, "earlier": [export]}]}}]})
    assert guard.check("export", {}).allowed
