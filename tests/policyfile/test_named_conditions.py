"""Named ``conditions:``, and rules that use them with ``when:`` and ``unless:``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from callwarden import Guard
from callwarden.exceptions import PolicyError

POLICY: dict[str, Any] = {
    "version": 1,
    "lists": {"safe_envs": ["staging", "qa"], "team": ["alice", "bob"]},
    "conditions": {
        "safe_env": {"args": {"env": {"list": "safe_envs"}}},
        "big": {"if": "has(args.amount) && args.amount > 1000"},
        "by_team": {"if": "principal in lists.team"},
    },
    "rules": [
        {"id": "deploys-ask", "match": {"tool": "deploy"}, "unless": "safe_env",
         "effect": "ask"},
        {"id": "big-payments-by-outsiders", "match": {"tool": "pay"}, "when": "big",
         "unless": ["by_team"], "effect": "deny", "message": "Too much."},
        {"id": "big-transfers", "match": {"tool": "transfer"}, "when": ["big"],
         "args": {"currency": "EUR"}, "effect": "ask"},
        {"id": "rm-outside-tmp", "match": {"tool": "rm"},
         "unless": {"args": {"path": "/tmp/*"}}, "effect": "deny"},
    ],
}


@pytest.fixture(scope="module")
def guard() -> Guard:
    return Guard.from_dict(POLICY)


def effect(guard: Guard, tool: str, principal: str | None = None, **args: Any) -> str:
    return guard.check(tool, args, principal=principal).effect.value


def test_unless_a_named_condition(guard: Guard) -> None:
    assert effect(guard, "deploy", env="qa") == "allow"
    decision = guard.check("deploy", {"env": "prod"})
    assert (decision.effect.value, decision.rule) == ("ask", "deploys-ask")
    assert "safe_env did not hold" in decision.reasons[0].message


def test_when_and_unless_together(guard: Guard) -> None:
    assert effect(guard, "pay", "mallory", amount=5000) == "deny"
    assert effect(guard, "pay", "alice", amount=5000) == "allow"  # unless by_team
    assert effect(guard, "pay", "mallory", amount=50) == "allow"  # when big fails


def test_when_is_checked_before_the_rules_own_conditions(guard: Guard) -> None:
    # no amount: `big` does not hold, so the rule's own `args` is never reached
    assert effect(guard, "transfer", currency="EUR") == "allow"
    assert effect(guard, "transfer", currency="EUR", amount=2000) == "ask"
    assert effect(guard, "transfer", currency="USD", amount=2000) == "allow"


def test_unless_in_place(guard: Guard) -> None:
    assert effect(guard, "rm", path="/tmp/build") == "allow"
    assert effect(guard, "rm", path="/etc/passwd") == "deny"


def test_unless_any_of_several_names() -> None:
    policy = {**POLICY, "rules": [{"id": "r", "match": {"tool": "pay"}, "effect": "deny",
                                   "unless": ["by_team", "safe_env"]}]}
    guard = Guard.from_dict(policy)
    assert effect(guard, "pay", "alice") == "allow"
    assert effect(guard, "pay", "eve", env="qa") == "allow"
    decision = guard.check("pay", {"env": "prod"}, principal="eve")
    assert decision.effect.value == "deny"
    assert "neither by_team nor safe_env held" in decision.reasons[0].message


def test_a_base_policys_conditions_serve_the_policy_that_extends_it(tmp_path: Path) -> None:
    (tmp_path / "base.json").write_text(json.dumps(POLICY))
    child = {"version": 1, "extends": "base.json",
             "conditions": {"safe_env": {"args": {"env": "dev"}}},  # redefined here
             "rules": [{"id": "pays-ask", "match": {"tool": "pay"}, "when": "big",
                        "effect": "ask"}]}
    (tmp_path / "policy.yaml").write_text(json.dumps(child))
    guard = Guard.from_file(tmp_path / "policy.yaml")
    assert effect(guard, "pay", "alice", amount=5000) == "ask"
    # a name defined again replaces the base's, for the inherited rules too (as a rule with an
    # inherited id replaces it): deploys are safe in dev now, and no longer in qa
    assert effect(guard, "deploy", env="dev") == "allow"
    assert effect(guard, "deploy", env="qa") == "ask"


@pytest.mark.parametrize(("change", "message"), [
    ({"conditions": {"x": {"nope": 1}}}, "unknown key in the condition 'x'"),
    ({"conditions": {"x": {}}}, "must be a mapping of conditions"),
    ({"conditions": {"not a name": {"args": {"a": 1}}}}, "a condition's name is a word"),
    ({"conditions": ["x"]}, "must map names to conditions"),
    ({"rules": [{"id": "r", "when": "missing"}]}, "no condition named 'missing'"),
    ({"rules": [{"id": "r", "unless": ["missing"]}]}, "no condition named 'missing'"),
    ({"rules": [{"id": "r", "unless": {"efect": 1}}]}, "unknown key in unless"),
    ({"rules": [{"id": "r", "when": 3}]}, "must name a condition or a list of conditions"),
])
def test_mistakes_are_policy_errors(change: dict[str, Any], message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        Guard.from_dict({"version": 1, **change})
