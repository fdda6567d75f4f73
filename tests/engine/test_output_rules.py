"""Output rules (`on: output`): redact, cut, replace or halt on what a tool returned."""

from __future__ import annotations

import pytest

from callwarden import Effect, Guard, PolicyError, RunHalted

POLICY = {
    "version": 1,
    "rules": [
        {"id": "redact-secrets", "on": "output", "match": {"kind": ["shell", "file.read"]},
         "secrets": True, "effect": "modify"},
        {"id": "cut-huge", "on": "output", "max_chars": 50, "effect": "modify"},
        {"id": "no-card-numbers", "on": "output", "match": {"tool": "crm_lookup"},
         "content": {"detect": ["card_number"]}, "effect": "deny",
         "message": "The record holds card data; ask the user for what you need."},
        {"id": "stop-on-breach", "on": "output", "match": {"tool": "db_query"},
         "if": "args.output.contains('BEGIN RSA PRIVATE KEY')", "effect": "halt"},
    ],
}
SECRET = "aws_secret_access_key = 9dKq3LwZt8vB2nX7pR4sY6uA1cE5gH0jM3oQ8wT2"


@pytest.fixture
def guard() -> Guard:
    return Guard.from_dict(POLICY)


def test_secrets_in_a_result_are_redacted_before_the_model_sees_them(guard: Guard) -> None:
    out = guard.run("bash", {"command": "cat config"}, lambda command: SECRET)
    assert "9dKq3" not in out and "REDACTED" in out


def test_structured_results_are_redacted_too(guard: Guard) -> None:
    out = guard.run("read_file", {"path": "x"}, lambda path: {"lines": ["ok", SECRET]})
    assert out["lines"][0] == "ok" and "9dKq3" not in out["lines"][1]


def test_huge_output_is_cut(guard: Guard) -> None:
    out = guard.run("anything", {}, lambda: "x" * 500)
    assert out.startswith("x" * 50) and "450 more characters cut" in out


def test_denied_output_is_replaced_by_the_message(guard: Guard) -> None:
    out = guard.run("crm_lookup", {}, lambda: "card 4111 1111 1111 1111")
    assert out == "The record holds card data; ask the user for what you need."


def test_halt_on_output_stops_the_run(guard: Guard) -> None:
    with pytest.raises(RunHalted):
        guard.run("db_query", {}, lambda: "-----BEGIN RSA PRIVATE KEY-----")


async def test_arun_applies_output_rules(guard: Guard) -> None:
    async def tool(command: str) -> str:
        return SECRET

    assert "9dKq3" not in await guard.arun("bash", {"command": "x"}, tool)
    with pytest.raises(RunHalted):
        await guard.arun("db_query", {}, lambda: "BEGIN RSA PRIVATE KEY")


def test_benign_output_passes_untouched(guard: Guard) -> None:
    result = {"rows": [1, 2]}
    assert guard.run("bash", {"command": "ls"}, lambda command: result) is result


def test_check_output_for_adapters(guard: Guard) -> None:
    decision = guard.check("crm_lookup", {})
    check = guard.check_output(decision, "4111 1111 1111 1111")
    assert check is not None and check.effect is Effect.DENY and check.rule == "no-card-numbers"
    assert guard.check_output(guard.check("t", {}), "fine").effect is Effect.ALLOW
    assert Guard.from_dict({"version": 1}).check_output(decision, "x") is None


def test_output_rules_do_not_affect_the_call_decision(guard: Guard) -> None:
    assert guard.check("crm_lookup", {"q": "4111 1111 1111 1111"}).effect is Effect.ALLOW


def test_cyclic_output_is_withheld() -> None:
    g = Guard.from_dict(POLICY)
    cyclic: list = []
    cyclic.append(cyclic)
    out = g.run("anything", {}, lambda: cyclic)
    assert isinstance(out, str) and "withheld" in out


@pytest.mark.parametrize(("rule", "fragment"), [
    ({"id": "x", "on": "output", "effect": "ask"}, "cannot ask"),
    ({"id": "x", "on": "later"}, "must be 'call' or 'output'"),
    ({"id": "x", "on": "output", "limit": {"calls": 1}}, "not available on output rules"),
    ({"id": "x", "max_chars": 0, "effect": "modify"}, "positive number"),
])
def test_bad_output_rules_are_policy_errors(rule, fragment) -> None:
    with pytest.raises(PolicyError, match=fragment):
        Guard.from_dict({"version": 1, "rules": [rule]})


CAP = {"version": 1, "rules": [{"id": "cap", "on": "output", "max_chars": 100, "effect": "modify"}]}


def test_output_cap_bounds_a_list_of_short_strings() -> None:
    out = Guard.from_dict(CAP).run("t", {}, lambda: ["y" * 50] * 10000)
    assert out == ["y" * 50, "y" * 50, "… 9,998 more items cut by policy"]


def test_output_cap_bounds_the_keys_of_a_dict() -> None:
    out = Guard.from_dict(CAP).run("t", {}, lambda: {f"key{i}": "v" for i in range(5000)})
    assert isinstance(out, dict) and len(out) < 40
    assert out["…"].endswith("more keys cut by policy")


def test_output_cap_counts_characters_across_nested_strings_and_keys() -> None:
    out = Guard.from_dict(CAP).run("t", {}, lambda: {"a": ["x" * 80], "b": "z" * 80})
    assert out["a"] == ["x" * 80] and out["b"].startswith("z" * 18 + "…")
    assert "62 more characters cut by policy" in out["b"]


def test_output_cap_bounds_a_list_of_numbers() -> None:
    out = Guard.from_dict(CAP).run("t", {}, lambda: list(range(100000)))
    assert len(out) < 100 and out[-1].endswith("more items cut by policy")


def test_output_under_the_cap_is_returned_unchanged() -> None:
    result = ["y" * 40, {"k": 1}]
    assert Guard.from_dict(CAP).run("t", {}, lambda: result) is result


def test_adapters_apply_the_total_output_cap() -> None:
    from callwarden.adapters import Enforcer

    enforcer = Enforcer(CAP, framework="test")
    shown, halt = enforcer.run(enforcer.check("t", {}), lambda: ["y" * 50] * 10000)
    assert not halt and len(shown) == 3


def test_argument_cap_is_per_argument_total() -> None:
    guard = Guard.from_dict({"version": 1, "default": "allow", "rules": [
        {"id": "cap", "max_chars": 10, "effect": "modify"}]})
    args = guard.check("t", {"path": "a.txt", "lines": ["a" * 8, "b" * 8, "c"]}).args
    assert args["path"] == "a.txt"
    assert args["lines"] == ("a" * 8, "bb… [6 more characters cut by policy]",
                             "… 1 more item cut by policy")


TEXT_RULE = {"version": 1, "rules": [
    {"id": "no-confidential", "on": "output", "args": {"output": "*CONFIDENTIAL*"},
     "effect": "deny", "message": "That output is confidential."}]}


@pytest.mark.parametrize("result", [
    "memo: CONFIDENTIAL",
    {"content": [{"type": "text", "text": "memo: CONFIDENTIAL"}], "structuredContent": {}},
    {"structuredContent": {"memo": {"body": ["CONFIDENTIAL"]}}},
    ["intro", b"CONFIDENTIAL bytes"],
], ids=["text", "mcp-text-block", "nested-structured", "list-with-bytes"])
def test_a_text_rule_sees_every_representation_of_a_result(result: object) -> None:
    guard = Guard.from_dict(TEXT_RULE)
    assert guard.run("t", {}, lambda: result) == "That output is confidential."


def test_a_structured_result_without_the_text_passes_untouched() -> None:
    result = {"content": [{"type": "text", "text": "memo: public"}]}
    assert Guard.from_dict(TEXT_RULE).run("t", {}, lambda: result) == result

