"""Rules whose only condition is a path deny list, a shell one or one argument's values are
checked as one condition per tool (a union of their globs, patterns or values) and passed over
together when it finds nothing; when it finds something, each rule judges the call itself, so decisions are
those of the rules one by one."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from callwarden import Effect, Guard
from callwarden._call import ToolCall
from callwarden.conditions.args import ArgsMatcher
from callwarden.conditions.base import Subject

SECRETS = [f"Read(~/.secret{i}/**)" for i in range(40)]


def guard(**extra: Any) -> Guard:
    policy: dict[str, Any] = {
        "version": 1, "timeout": "60s",
        "tools": {"read_file": {"kind": "file.read", "path": "path"},
                  "write_file": {"kind": "file.write", "path": "path"}},
        "deny": [*SECRETS, "Read(~/.ssh/**)", "Edit(~/.ssh/**)"],
        "ask": ["Read(~/.ssh/*.pub)"],
        **extra}
    return Guard.from_dict(policy)


def test_many_path_deny_rules_are_one_union_for_a_tool() -> None:
    g = guard()
    plan = g.engine._plan("read_file")[1]
    assert len(plan.unions) == 1
    assert len(plan.grouped) == 42 and not plan.ungrouped  # 40 + ~/.ssh deny + the ask
    assert len(plan.validators) == 42  # every rule is still the plan's (explain lists them)


def test_the_rule_whose_glob_matches_decides_as_it_would_alone() -> None:
    g = guard()
    decision = g.check("read_file", {"path": "~/.secret37/token"})
    assert decision.effect is Effect.DENY and decision.rule == "deny:Read(~/.secret37/**)"
    assert g.check("read_file", {"path": "~/.secret3/../notes.txt"}).effect is Effect.ALLOW
    assert g.check("read_file", {"path": "src/app.py"}).effect is Effect.ALLOW


def test_a_call_two_grouped_rules_match_gets_both_and_the_strictest_wins() -> None:
    decision = guard().check("read_file", {"path": "~/.ssh/id_ed25519.pub"})
    assert decision.effect is Effect.DENY
    assert {m.rule for m in decision.matched} == {"deny:Read(~/.ssh/**)",
                                                  "ask:Read(~/.ssh/*.pub)"}


def test_a_grouped_rule_in_observe_mode_still_says_what_it_would_do() -> None:
    g = guard(rules=[{"id": "watch-keys", "match": {"kind": "file.read"},
                      "paths": {"deny": ["~/.keys/**"]}, "effect": "deny",
                      "mode": "observe"}])
    assert len(g.engine._plan("read_file")[1].grouped) == 43
    decision = g.check("read_file", {"path": "~/.keys/prod"})
    assert decision.effect is Effect.ALLOW and decision.would_effect is Effect.DENY
    assert [m.rule for m in decision.matched] == ["watch-keys"]


def test_a_rule_with_another_condition_is_not_grouped() -> None:
    g = guard(rules=[{"id": "interns", "match": {"kind": "file.read"},
                      "paths": {"deny": ["~/.keys/**"]}, "args": {"mode": "raw"},
                      "effect": "deny"}])
    plan = g.engine._plan("read_file")[1]
    assert [r.id for r in plan.ungrouped] == ["interns"]
    assert g.check("read_file", {"path": "~/.keys/a", "mode": "raw"}).rule == "interns"
    assert g.check("read_file", {"path": "~/.keys/a"}).effect is Effect.ALLOW


def test_a_tool_with_one_grouped_rule_checks_it_alone() -> None:
    plan = guard().engine._plan("write_file")[1]  # Edit(~/.ssh/**) only
    assert not plan.unions and [r.id for r in plan.ungrouped] == ["deny:Edit(~/.ssh/**)"]


def test_a_union_that_raises_leaves_every_rule_to_judge_the_call() -> None:
    g = guard()
    profile, plan = g.engine._plan("read_file")

    def broken(subject: Subject) -> None:
        raise RuntimeError("boom")

    subject = Subject(ToolCall("read_file", {"path": "src/app.py"}), profile)
    assert dataclasses.replace(plan, unions=(broken,)).unioned(
        plan.validators, subject) is plan.validators
    assert plan.unioned(plan.validators, subject) == ()
    narrowed = list(plan.validators[:3])
    assert plan.unioned(narrowed, subject) == []


def shell_guard() -> Guard:
    return Guard.from_dict({
        "version": 1, "timeout": "60s",
        "tools": {"bash": {"kind": "shell", "command": "command"}},
        "deny": [*(f"Bash(tool{i} --force *)" for i in range(40)), "Bash(git push --force *)"],
        "ask": ["Bash(git push *)"]})


def decides_as_alone(g: Guard, tool: str, key: str, single: tuple[str, str],
                     both: tuple[str, set[str]], asked: str, allowed: list[str]) -> None:
    """One grouped rule's value decides by that rule; a value two match gets both (the
    strictest wins); an asked value is asked; values none match are allowed."""
    assert len(g.engine._plan(tool)[1].unions) == 1
    assert g.check(tool, {key: single[0]}).rule == single[1]
    decision = g.check(tool, {key: both[0]})
    assert decision.effect is Effect.DENY and {m.rule for m in decision.matched} == both[1]
    assert g.check(tool, {key: asked}).effect is Effect.ASK
    for value in allowed:
        assert g.check(tool, {key: value}).effect is Effect.ALLOW, value


def test_many_shell_deny_rules_are_one_union_and_decide_as_alone() -> None:
    g = shell_guard()
    decides_as_alone(g, "bash", "command", ("tool33 --force now", "deny:Bash(tool33 --force *)"),
                     ("cd repo && git push --force origin main",
                      {"deny:Bash(git push --force *)", "ask:Bash(git push *)"}),
                     "git push origin main", ["tool33 --help"])
    unparsable = g.check("bash", {"command": "echo 'unterminated"})
    assert unparsable.effect is Effect.DENY  # every rule finds it unparsable: the first decides


def args_guard() -> Guard:
    """Five rules of one argument each, as bench_core's budget rows have them."""
    rules: list[dict[str, Any]] = [
        {"id": f"rule-{k}", "match": {"tool": "deploy"}, "args": {key: value},
         "effect": effect}
        for k, (key, value, effect) in enumerate([
            ("env", "prod", "deny"), ("region", "us-gov", "deny"), ("build", "b-0", "ask"),
            ("env", "prod-*", "ask"), ("region", "cn-*", "deny")])]
    rules.append({"id": "two-args", "match": {"tool": "deploy"},
                  "args": {"env": "qa", "region": "eu"}, "effect": "deny"})
    return Guard.from_dict({"version": 1, "rules": rules})


def test_rules_of_one_argument_each_are_one_union_and_decide_as_alone() -> None:
    g = args_guard()
    plan = g.engine._plan("deploy")[1]
    assert len(plan.unions) == 1 and [r.id for r in plan.ungrouped] == ["two-args"]
    assert g.check("deploy", {"env": "staging", "region": "eu", "build": "b-7"}).allowed
    assert g.check("deploy", {"env": "prod"}).rule == "rule-0"
    both = g.check("deploy", {"env": "prod-2", "region": "cn-north"})
    assert both.effect is Effect.DENY and both.rule == "rule-4"
    assert {m.rule for m in both.matched} == {"rule-3", "rule-4"}
    assert g.check("deploy", {"build": "b-0"}).effect is Effect.ASK
    assert g.check("deploy", {"env": "qa", "region": "eu"}).rule == "two-args"
    assert g.check("deploy", {"env": ["prod"], "region": 7}).allowed  # no literal equals a list


def test_rules_whose_union_cannot_be_made_are_checked_one_by_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(cls: type, matchers: Any) -> Any:
        raise ValueError("no union")

    monkeypatch.setattr(ArgsMatcher, "union", classmethod(refuse))
    g = args_guard()
    plan = g.engine._plan("deploy")[1]
    assert not plan.unions and len(plan.ungrouped) == 6
    assert g.check("deploy", {"env": "prod-2"}).rule == "rule-3"
    assert g.check("deploy", {"env": "staging"}).allowed


def test_many_domain_deny_rules_are_one_union_and_decide_as_alone() -> None:
    g = Guard.from_dict({
        "version": 1, "timeout": "60s",
        "deny": [*(f"WebFetch(domain:bad{i}.example)" for i in range(40)),
                 "WebFetch(domain:*.evil.org)"],
        "ask": ["WebFetch(domain:docs.evil.org)", "WebFetch(domain:ask.example)"]})
    plan = g.engine._plan("WebFetch")[1]
    assert len(plan.grouped) == 43 and not plan.ungrouped
    decides_as_alone(g, "WebFetch", "url", ("https://www.bad33.example/x",
                                            "deny:WebFetch(domain:bad33.example)"),
                     ("https://docs.evil.org/", {"deny:WebFetch(domain:*.evil.org)",
                                                 "ask:WebFetch(domain:docs.evil.org)"}),
                     "https://ask.example/", ["https://docs.python.org/3/",
                                              "https://bad3.example.com/"])
    # What every rule refuses alike (no URL, not a URL): each judges it, the first decides.
    assert g.check("WebFetch", {"prompt": "x"}).rule == "deny:WebFetch(domain:bad0.example)"


def test_a_tools_allow_strings_are_one_union_sharing_one_check_of_what_is_covered() -> None:
    g = Guard.from_dict({
        "version": 1, "timeout": "60s", "default": "deny",
        "allow": [*(f"Bash(tool{i} --flag *)" for i in range(40)), "Bash(git log *)"]})
    plan = g.engine._plan("Bash")[1]
    assert len(plan.unions) == 1 and len(plan.grouped) == 41 and not plan.ungrouped
    assert g.check("Bash", {"command": "tool9 --flag a"}).rule == "allow:Bash(tool9 --flag *)"
    both = g.check("Bash", {"command": "git log -1 && tool9 --flag a"})
    assert both.effect is Effect.ALLOW
    assert {m.rule for m in both.matched} == {"allow:Bash(git log *)",
                                              "allow:Bash(tool9 --flag *)"}
    for refused in ("tool9 --flag a && rm -rf ~", "tool9 --help", "git status",
                    "tool9 --flag a > ~/.bashrc", "tool9 --flag $(curl evil)"):
        assert g.check("Bash", {"command": refused}).effect is Effect.DENY, refused
