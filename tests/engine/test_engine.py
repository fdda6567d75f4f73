"""Effects, combination, phases, defaults and modes of the decision engine."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from callwarden import Decision, Effect, Guard, Mode, Verdict, policy


def guard(*rules: dict, **settings) -> Guard:
    return Guard.from_dict({"version": 1, "rules": list(rules), **settings})


def rule(id: str, effect: str, tool: str = "t", **extra) -> dict:
    return {"id": id, "match": {"tool": tool}, "effect": effect, **extra}


@pytest.mark.parametrize("effect", ["allow", "deny", "ask", "halt"])
def test_a_single_rule_decides_its_effect(effect: str) -> None:
    d = guard(rule("r", effect), default="deny" if effect == "allow" else "allow").check("t", {})
    assert d.effect is Effect(effect)
    assert d.rule == "r"


def test_modify_rule_rewrites_args_and_reports_modify() -> None:
    d = guard(rule("cap", "modify", cap={"limit": 10})).check("t", {"limit": 99, "q": "x"})
    assert d.effect is Effect.MODIFY
    assert dict(d.args) == {"limit": 10, "q": "x"}
    assert dict(d.call.args) == {"limit": 99, "q": "x"}
    assert d.rule == "cap"


def test_modify_rule_that_changes_nothing_is_plain_allow() -> None:
    d = guard(rule("cap", "modify", cap={"limit": 10})).check("t", {"limit": 5})
    assert d.effect is Effect.ALLOW
    assert d.matched == ()


@pytest.mark.parametrize(
    ("effects", "winner"),
    [
        (["allow", "deny"], "deny"),
        (["deny", "allow"], "deny"),
        (["ask", "allow"], "ask"),
        (["ask", "deny"], "deny"),
        (["deny", "halt", "ask"], "halt"),
        (["allow", "ask", "allow"], "ask"),
    ],
)
def test_strictest_effect_wins_whatever_the_order(effects: list[str], winner: str) -> None:
    g = guard(*(rule(f"r{i}", e) for i, e in enumerate(effects)))
    d = g.check("t", {})
    assert d.effect is Effect(winner)
    assert d.rule == f"r{effects.index(winner)}"
    assert [m.rule for m in d.matched] == [f"r{i}" for i in range(len(effects))]


def test_among_equal_effects_the_first_rule_decides() -> None:
    d = guard(rule("first", "deny"), rule("second", "deny")).check("t", {})
    assert d.rule == "first"
    assert {r.rule for r in d.reasons} == {"first", "second"}


def test_validate_rules_see_the_rewritten_args() -> None:
    g = guard(
        rule("block-big", "deny", args={"limit": 1000}),
        rule("pin", "modify", set={"limit": 1000}),
    )
    d = g.check("t", {"limit": 1})
    assert d.effect is Effect.DENY
    assert d.rule == "block-big"


def test_mutators_run_in_order_each_seeing_the_previous_rewrite() -> None:
    g = guard(rule("a", "modify", set={"x": 1}), rule("b", "modify", cap={"x": 0}))
    d = g.check("t", {})
    assert dict(d.args) == {"x": 0}


def test_denied_call_keeps_the_original_args() -> None:
    g = guard(rule("pin", "modify", set={"x": 1}), rule("no", "deny"))
    d = g.check("t", {"x": 5})
    assert d.effect is Effect.DENY
    assert dict(d.args) == {"x": 5}


@pytest.mark.parametrize("default", ["allow", "deny"])
def test_default_applies_when_no_rule_decides(default: str) -> None:
    d = guard(rule("other", "deny", tool="other"), default=default).check("t", {})
    assert d.effect is Effect(default)
    assert d.rule == "default"
    assert d.reasons[0].code == f"default_{default}"


def test_explicit_allow_beats_default_deny() -> None:
    d = guard(rule("ok", "allow"), default="deny").check("t", {})
    assert d.effect is Effect.ALLOW
    assert d.rule == "ok"


def test_default_deny_source_is_the_line_of_the_default_key() -> None:
    g = Guard.from_yaml("version: 1\ndefault: deny\n", filename="p.yaml")
    assert g.check("t", {}).source == "p.yaml:2"


def test_observe_mode_policy_lets_the_call_through_and_records_would_effect() -> None:
    d = guard(rule("no", "deny"), mode="observe").check("t", {})
    assert d.effect is Effect.ALLOW
    assert d.would_effect is Effect.DENY
    assert d.mode is Mode.OBSERVE
    assert d.matched[0].rule == "no"


def test_observe_mode_policy_does_not_rewrite_args() -> None:
    d = guard(rule("pin", "modify", set={"x": 1}), mode="observe").check("t", {"x": 5})
    assert d.effect is Effect.ALLOW
    assert dict(d.args) == {"x": 5}
    assert d.would_effect is Effect.MODIFY


def test_observe_mode_policy_ignores_default_deny_but_reports_it() -> None:
    d = guard(default="deny", mode="observe").check("t", {})
    assert d.effect is Effect.ALLOW
    assert d.would_effect is Effect.DENY


def test_a_single_observe_rule_rolls_out_without_enforcing() -> None:
    g = guard(rule("new", "deny", mode="observe"), rule("old", "ask"))
    d = g.check("t", {})
    assert d.effect is Effect.ASK
    assert d.rule == "old"
    assert d.would_effect is Effect.DENY


def test_an_enforce_rule_in_an_observe_policy_is_enforced() -> None:
    d = guard(rule("strict", "deny", mode="enforce"), mode="observe").check("t", {})
    assert d.effect is Effect.DENY


def test_enforce_mode_without_observe_rules_has_no_would_effect() -> None:
    d = guard(rule("no", "deny")).check("t", {})
    assert d.would_effect is None


def test_rules_for_other_tools_are_not_evaluated() -> None:
    calls = []

    @policy(isolated=False)
    def spy(call):
        calls.append(call.tool)

    g = Guard.from_dict({"version": 1}, policies=[spy])
    g2 = Guard.from_dict({"version": 1, "rules": [{"id": "x", "match": {"tool": "other"},
                                                   "effect": "deny"}]})
    g.check("t", {})
    assert calls == ["t"]
    assert g2.check("t", {}).matched == ()


def test_match_by_glob_kind_side_effect_and_agent() -> None:
    g = guard(
        {"id": "gh", "match": {"tool": "mcp__github__*"}, "effect": "ask"},
        {"id": "writes", "match": {"kind": "file.write"}, "effect": "deny"},
        {"id": "ext", "match": {"side_effect": "external"}, "effect": "ask"},
        {"id": "intern", "match": {"tool": "db", "agent": "intern-*"}, "effect": "deny"},
    )
    assert g.check("mcp__github__create_issue", {}).rule == "gh"
    assert g.check("mcp__gitlab__x", {}).effect is Effect.ALLOW
    assert g.check("write_file", {"path": "a"}).rule == "writes"
    assert g.check("fetch", {"url": "https://x"}).rule == "ext"
    assert g.check("db", {}, agent="intern-7").rule == "intern"
    assert g.check("db", {}, agent="admin").effect is Effect.ALLOW
    assert g.check("db", {}).effect is Effect.ALLOW


def test_kind_prefix_selects_every_subkind() -> None:
    g = guard({"id": "files", "match": {"kind": "file"}, "effect": "ask"})
    assert g.check("read_file", {}).effect is Effect.ASK
    assert g.check("write_file", {}).effect is Effect.ASK
    assert g.check("bash", {}).effect is Effect.ALLOW


def test_decision_has_id_time_and_json_form() -> None:
    import json

    d = guard(rule("no", "deny", message="Use the staging bucket.")).check("t", {"a": b"x"})
    assert isinstance(d, Decision)
    assert d.decision_id and d.elapsed > 0
    assert d.message == "Use the staging bucket."
    data = json.loads(json.dumps(d.to_dict()))
    assert data["effect"] == "deny"
    assert data["rule"] == "no"
    assert data["source"].endswith(":1") or data["source"] == "<policy>"
    assert data["call"]["args"] == {"a": "x"}


@pytest.mark.parametrize("elapsed", [0.0, 1.25e-6, 2.35e-6, 0.0123449, 1e300, float("inf"),
                                     float("nan"), -3.3e-6])
def test_the_json_form_holds_plain_values_and_elapsed_to_a_tenth_of_a_microsecond(
        elapsed: float) -> None:
    g = guard(rule("watch", "deny", mode="observe"))
    d = g.check("t", {"a": "x", "n": 7, "f": 1.5, "ok": None, "list": ["a"]})._replace(
        elapsed=elapsed)
    data = d.to_dict()
    for key, value in [("effect", "allow"), ("would_effect", "deny"), ("mode", "enforce")]:
        assert type(data[key]) is str and data[key] == value
    assert [(type(m["effect"]), m["effect"], type(m["mode"]), m["mode"])
            for m in data["matched"]] == [(str, "deny", str, "observe")]
    assert data["args"] == {"a": "x", "n": 7, "f": 1.5, "ok": None, "list": ["a"]}
    assert type(data["args"]) is dict and type(data["args"]["list"]) is list
    expected = round(elapsed * 1e6, 1)
    assert data["elapsed_us"] == expected or (expected != expected and data["elapsed_us"]
                                              != data["elapsed_us"])


def test_deny_without_message_tells_the_model_what_happened_and_what_to_do() -> None:
    d = guard(rule("no-prod", "deny", args={"env": "prod"})).check("t", {"env": "prod"})
    assert "no-prod" in d.message
    assert "Do not retry" in d.message


def test_verdict_constructors_cover_every_effect() -> None:
    assert Verdict.allow().effect is Effect.ALLOW
    assert Verdict.deny("m").message == "m"
    assert Verdict.ask().effect is Effect.ASK
    assert Verdict.halt().effect is Effect.HALT
    assert Verdict.modify({"a": 1}).args == {"a": 1}


def test_effect_strictness_order() -> None:
    order = sorted(Effect, key=lambda e: e.strictness)
    assert order[-1] is Effect.HALT
    assert Effect.DENY.strictness > Effect.ASK.strictness > Effect.ALLOW.strictness


def test_profile_requires_approval_true_always_asks() -> None:
    g = guard(tools={"t": {"requires_approval": True}})
    d = g.check("t", {})
    assert d.effect is Effect.ASK
    assert d.rule == "tools.t"


def test_profile_requires_approval_true_still_loses_to_deny() -> None:
    g = guard(rule("no", "deny"), tools={"t": {"requires_approval": True}})
    assert g.check("t", {}).effect is Effect.DENY


def test_profile_requires_approval_false_exempts_from_ask_rules() -> None:
    g = guard({"id": "ask-all", "effect": "ask"}, tools={"t": {"requires_approval": False}})
    assert g.check("t", {}).effect is Effect.ALLOW
    assert g.check("other", {}).effect is Effect.ASK


def test_profile_requires_approval_false_does_not_exempt_from_deny() -> None:
    g = guard(rule("no", "deny"), tools={"t": {"requires_approval": False}})
    assert g.check("t", {}).effect is Effect.DENY


def test_well_known_tool_names_have_default_profiles() -> None:
    g = guard()
    assert g.profile("Bash").kind == "shell"
    assert g.profile("run_shell_command").kind == "shell"
    assert g.profile("read_file").kind == "file.read"
    assert g.profile("mcp__github__x").kind == "mcp"
    assert g.profile("no_such_tool").kind == "unknown"


@pytest.mark.parametrize("tool", ["mcp__playwright__browser_navigate",
                                  "mcp__puppeteer__puppeteer_navigate",
                                  "mcp__chrome-devtools__navigate_page", "browser_navigate"])
def test_a_browser_sent_to_a_url_is_governed_as_a_fetch(tool: str) -> None:
    """Domain rules reach the browser MCP servers' navigation (it was kind ``mcp``, so
    ``WebFetch(domain:...)`` did not apply to it), and the page it shows is untrusted."""
    g = Guard.from_dict({"version": 1, "deny": ["WebFetch(domain:evil.example)"],
                         "rules": [{"id": "after-web", "match": {"tool": "send_email"},
                                    "after_untrusted": True, "effect": "ask"}]})
    assert g.profile(tool).kind == "http"
    denied = g.check(tool, {"url": "https://login.evil.example/"})
    assert (denied.effect, denied.rule) == (Effect.DENY, "deny:WebFetch(domain:evil.example)")
    shown = g.run(tool, {"url": "https://docs.example.org/"}, lambda url: "page text",
                  session="s1")
    assert shown == "page text"
    assert g.check("send_email", {"to": "a@b.example"}, session="s1").effect is Effect.ASK




@pytest.mark.parametrize(("tool", "args", "rule"), [
    ("mcp__filesystem__list_directory_with_sizes", {"path": "~/.ssh"}, "deny:Read(~/.ssh/**)"),
    ("file_search", {"dir_path": "~/.ssh", "pattern": "*"}, "deny:Read(~/.ssh/**)"),
    ("view_image", {"path": "~/.ssh/id_rsa"}, "deny:Read(~/.ssh/**)"),
    ("list_dir", {"relative_workspace_path": "~/.ssh"}, "deny:Read(~/.ssh/**)"),
    ("rename_file", {"old_path": "/tmp/x", "new_path": "/etc/hosts"}, "deny:Edit(/etc/**)"),
])
def test_file_tools_of_well_known_toolkits_are_governed_as_file_tools(
        tool: str, args: dict[str, Any], rule: str) -> None:
    """The MCP filesystem server's, LangChain's, Codex's and Cursor's names for reading a
    folder or a file and for renaming one: path rules reach them."""
    g = Guard.from_dict({"version": 1, "deny": ["Read(~/.ssh/**)", "Edit(/etc/**)"]})
    decision = g.check(tool, args)
    assert (decision.effect, decision.rule) == (Effect.DENY, rule)


@pytest.mark.parametrize("tool", ["BashOutput", "KillShell"])
def test_reading_or_stopping_a_background_shell_is_not_a_shell_command(tool: str) -> None:
    """Claude Code's BashOutput runs no command (it reads a background shell's output): as a
    shell call it had none to analyse, so any Bash(...) deny refused it, every time."""
    g = Guard.from_dict({"version": 1, "deny": ["Bash(rm -rf *)"]})
    assert g.profile(tool).kind == "unknown"
    assert g.check(tool, {"bash_id": "1", "shell_id": "1"}).effect is Effect.ALLOW
def test_policy_profiles_override_defaults_and_name_arguments() -> None:
    g = guard(tools={"runner": {"kind": "shell", "command": "cmd"}})
    p = g.profile("runner")
    assert p.kind == "shell"
    assert p.get({"cmd": "ls"}, "command") == "ls"


def _many_literal_rules() -> Guard:
    rules = [{"id": f"env-{i}", "match": {"tool": "deploy"}, "args": {"env": f"e{i}"},
              "effect": "deny" if i % 2 else "ask"} for i in range(20)]
    rules.append({"id": "glob", "match": {"tool": "deploy"}, "args": {"env": "e1*"},
                  "effect": "ask"})
    return guard(*rules)


def test_value_indexed_rules_decide_like_scanned_ones() -> None:
    g = _many_literal_rules()
    assert g.check("deploy", {"env": "e3"}).rule == "env-3"
    assert g.check("deploy", {"env": "e4"}).effect is Effect.ASK
    assert g.check("deploy", {"env": "nope"}).effect is Effect.ALLOW
    assert g.check("deploy", {"env": ["e3"]}).effect is Effect.ALLOW  # unhashable value
    assert g.check("deploy", {}).effect is Effect.ALLOW


def test_value_indexed_rules_keep_policy_order_for_attribution() -> None:
    d = _many_literal_rules().check("deploy", {"env": "e12"})
    assert [m.rule for m in d.matched] == ["env-12", "glob"]
    assert d.effect is Effect.ASK
    assert d.rule == "env-12"


def test_value_index_compares_types_exactly() -> None:
    g = guard(*({"id": f"n{i}", "match": {"tool": "t"}, "args": {"n": i}, "effect": "deny"}
                for i in range(5)))
    assert g.check("t", {"n": 3}).rule == "n3"
    assert g.check("t", {"n": "3"}).effect is Effect.ALLOW
    assert g.check("t", {"n": True}).effect is Effect.ALLOW


def test_unanalysable_input_fires_deny_rules_but_never_allow_rules() -> None:
    g = guard(
        {"id": "ok-ls", "match": {"kind": "shell"}, "shell": {"deny": ["ls *"]},
         "effect": "allow"},
        default="deny", tools={"t": {"kind": "shell"}})
    assert g.check("t", {"command": "ls -la"}).rule == "ok-ls"
    unparseable = g.check("t", {"command": "ls $(("})
    assert unparseable.effect is Effect.DENY and unparseable.rule == "default"
    deny = guard({"id": "no-rm", "match": {"kind": "shell"}, "shell": {"deny": ["rm *"]}},
                 tools={"t": {"kind": "shell"}})
    d = deny.check("t", {"command": "ls $(("})
    assert d.effect is Effect.DENY and d.reasons[0].code == "shell.parse_error"


def test_profile_requires_approval_false_never_exempts_an_on_error_ask() -> None:
    @policy
    def broken(call):
        raise RuntimeError("bug")

    g = Guard(policies=[broken], on_error="ask", tools={"t": {"requires_approval": False}})
    d = g.check("t", {})
    assert d.effect is Effect.ASK
    assert d.reasons[0].code == "policy_error"


def test_observe_mode_policy_reports_a_requires_approval_profile_as_would_ask() -> None:
    d = guard(tools={"pay": {"requires_approval": True}}, mode="observe").check("pay", {})
    assert d.effect is Effect.ALLOW
    assert d.would_effect is Effect.ASK


@pytest.mark.parametrize(("behaviour", "code"), [
    ("raise", "policy_error"), ("garbage", "policy_invalid_result"),
    ("hang", "policy_timeout")])
def test_observe_mode_policy_treats_raising_garbage_and_hanging_policies_alike(
        behaviour: str, code: str) -> None:
    release = threading.Event()

    @policy
    def failing(call):
        if behaviour == "raise":
            raise RuntimeError("bug")
        if behaviour == "hang":
            release.wait(3)
        return "garbage"

    g = Guard(policies=[failing], mode="observe", timeout="100ms")
    try:
        decisions = [g.check("t", {}), asyncio.run(g.acheck("t", {}))]
    finally:
        release.set()
    for d in decisions:
        assert d.effect is Effect.ALLOW
        assert d.would_effect is Effect.DENY
        assert d.reasons[0].code == code


def test_a_per_rule_observe_policy_that_times_out_does_not_deny(tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text("import time\ndef hangs(call):\n    time.sleep(3)\n")
    g = Guard.from_dict({"version": 1, "timeout": "100ms", "rules": [
        {"id": "trial", "use": "slow.py:hangs", "mode": "observe"}]}, base_dir=tmp_path)
    for d in [g.check("t", {}), asyncio.run(g.acheck("t", {}))]:
        assert d.effect is Effect.ALLOW
        assert d.would_effect is Effect.DENY
        assert [m.code for m in d.matched] == ["policy_timeout"]


def test_an_engine_is_immutable_once_built() -> None:
    """Settings, rules and the store are fixed at construction: a reload builds a new engine."""
    from callwarden import Guard
    from callwarden.state import MemoryStore

    engine = Guard.from_dict({"version": 1, "rules": [{"id": "r", "effect": "deny"}]}).engine
    for name, value in (("store", MemoryStore()), ("rules", ()), ("settings", None)):
        with pytest.raises(AttributeError, match="immutable"):
            setattr(engine, name, value)


def test_a_refusal_decided_again_is_the_same_decision_for_each_tool() -> None:
    from callwarden import Guard

    guard = Guard.from_dict({"version": 1, "rules": [
        {"id": "no-prod", "match": {"tool": ["deploy", "release"]}, "args": {"env": "prod"},
         "effect": "deny"},
        {"id": "ask-pay", "match": {"tool": "pay"}, "effect": "ask"}]})

    def parts(tool: str, args: dict) -> tuple:
        d = guard.check(tool, args)
        return (d.effect, d.args, d.reasons, d.rule, d.source, d.matched, d.message, d.mode,
                d.would_effect)

    for tool, args in [("deploy", {"env": "prod"}), ("release", {"env": "prod"}),
                       ("pay", {"amount": 5})]:
        first = parts(tool, args)
        assert parts(tool, args) == first and parts(tool, dict(args)) == first
    # The message names the tool called, not the one whose refusal was decided first.
    assert "'release'" in parts("release", {"env": "prod"})[6]
    assert "'deploy'" in parts("deploy", {"env": "prod"})[6]
    assert parts("deploy", {"env": "dev"})[0].value == "allow"


def test_loading_warms_the_engine_without_counting_or_calling_user_code() -> None:
    """The first engine of a loaded policy decides sample calls (what-if) at load: no limit
    counts them, and no policy of the user's sees them."""
    calls = []

    @policy(isolated=False)
    def spy(call):
        calls.append(call.tool)

    g = Guard.from_dict({"version": 1, "rules": [
        {"id": "one-bash", "match": {"tool": "Bash"}, "limit": {"calls": 1}}]})
    assert g.check("Bash", {"command": "ls"}).effect is Effect.ALLOW  # the sample did not count
    assert g.check("Bash", {"command": "ls"}).effect is Effect.DENY
    Guard.from_dict({"version": 1}, policies=[spy])
    assert calls == []
