"""CEL ``if:`` conditions (callwarden.conditions.cel)."""

from __future__ import annotations

import enum
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callwarden._call import ToolCall
from callwarden._profiles import default_profile
from callwarden.conditions.base import CompileEnv, ConfigError, Hit, Subject, get_condition
from callwarden.conditions.cel import CelCondition, CelError
from callwarden.policyfile.lists import NamedList

LISTS = {
    "contacts": NamedList("contacts", ["alice@example.com", "bob@example.com", "zoë@exämple.de"]),
    "payees": NamedList("payees", ["acme", "globex"]),
}
ENV = CompileEnv(lists=LISTS)


def subject(tool: str = "send_email", args: Any = None, *, memo: dict[str, Any] | None = None,
            **call: Any) -> Subject:
    made = ToolCall.create(tool, args or {}, **call)
    return Subject(made, default_profile(tool), memo or {})


def holds(expression: str, args: Any = None, *, env: CompileEnv = ENV, **kw: Any) -> bool:
    return CelCondition(expression, env)(subject(args=args, **kw)) is not None


# --- the examples from the design, each both ways ------------------------------------------

EXAMPLES = [
    ("args.amount > 100", {"args": {"amount": 150}}, {"args": {"amount": 100}}),
    ("args.recipients.all(r, r in lists.contacts)",
     {"args": {"recipients": ["alice@example.com", "bob@example.com"]}},
     {"args": {"recipients": ["alice@example.com", "mallory@evil.test"]}}),
    ('tool.startsWith("mcp__github__")', {"tool": "mcp__github__create_issue"},
     {"tool": "mcp__gitlab__create_issue"}),
    ("has(args.force) && args.force", {"args": {"force": True}}, {"args": {"path": "x"}}),
    ('context.user_request.contains("delete")',
     {"context": {"user_request": "please delete the draft"}},
     {"context": {"user_request": "please archive the draft"}}),
    ("size(args.items) > 10", {"args": {"items": list(range(11))}},
     {"args": {"items": list(range(10))}}),
]


@pytest.mark.parametrize(("expression", "true_call", "false_call"), EXAMPLES,
                         ids=[e[0] for e in EXAMPLES])
def test_example_holds_for_matching_call(expression: str, true_call: dict[str, Any],
                                         false_call: dict[str, Any]) -> None:
    assert holds(expression, **true_call)


@pytest.mark.parametrize(("expression", "true_call", "false_call"), EXAMPLES,
                         ids=[e[0] for e in EXAMPLES])
def test_example_does_not_hold_for_other_call(expression: str, true_call: dict[str, Any],
                                              false_call: dict[str, Any]) -> None:
    assert not holds(expression, **false_call)


def test_if_key_is_registered() -> None:
    assert get_condition("if") is CelCondition


def test_hit_names_the_expression() -> None:
    hit = CelCondition("args.amount > 100", ENV)(subject(args={"amount": 150}))
    assert hit == Hit(detail="if: args.amount > 100", code="condition")


# --- variables ------------------------------------------------------------------------------

def test_agent_session_and_principal_are_strings() -> None:
    assert holds('agent == "billing" && session == "s1" && principal == "alice"',
                 agent="billing", session="s1", principal="alice")


def test_missing_principal_is_null() -> None:
    assert holds("principal == null")


def test_kind_is_the_tool_profiles_kind() -> None:
    assert holds('kind == "payment"', tool="send_money")


def test_history_defaults_to_empty() -> None:
    assert holds("history.count == 0 && size(history.tools) == 0")


def test_history_comes_from_subject_memo() -> None:
    memo = {"history": {"count": 7, "tools": {"Bash": 3, "Read": 4}}}
    assert holds('history.count > 5 && "Bash" in history.tools && history.tools.Bash == 3',
                 memo=memo)


def test_history_without_matching_tool_is_false() -> None:
    memo = {"history": {"count": 1, "tools": {"Read": 1}}}
    assert not holds('"Bash" in history.tools', memo=memo)


def test_bracket_access_reads_argument() -> None:
    assert holds('args["amount"] > 100', {"amount": 101})


def test_whole_args_map_is_available() -> None:
    assert holds('size(args) == 2 && "b" in args', {"a": 1, "b": 2})


def test_int_and_double_compare() -> None:
    assert holds("args.amount > 100", {"amount": 100.5})


def test_comment_in_expression_is_ignored() -> None:
    assert holds("args.amount > 100 // large payments\n", {"amount": 150})


def test_string_literal_naming_an_argument_reads_nothing() -> None:
    assert holds('args.note == "args.secret"', {"note": "args.secret"})


def test_comprehension_variable_shadowing_args_still_evaluates() -> None:
    assert holds('args.items.exists(args, args == "x")', {"items": ["a", "x"]})


# --- named lists ----------------------------------------------------------------------------

def test_literal_in_list_holds() -> None:
    assert holds('"acme" in lists.payees')


def test_argument_not_in_list_is_false() -> None:
    assert not holds("args.payee in lists.payees", {"payee": "initech"})


def test_list_size_sees_all_items() -> None:
    assert holds("size(lists.contacts) == 3")


def test_list_items_keep_order() -> None:
    assert holds('lists.payees[0] == "acme"')


def test_built_string_is_checked_against_whole_list() -> None:
    assert holds('args.user + "@example.com" in lists.contacts', {"user": "bob"})


def test_negated_membership_is_true_for_outsider() -> None:
    assert holds("!(args.to in lists.contacts)", {"to": "mallory@evil.test"})


def test_membership_inside_map_keys_is_found() -> None:
    assert holds("args.to.exists(k, k in lists.payees)", {"to": {"globex": 1}})


def test_items_of_one_list_are_found_in_another() -> None:
    env = CompileEnv(lists={"a": ["x", "y"], "b": ["y"]})
    assert holds("lists.a.exists(i, i in lists.b)", env=env)


def test_whole_lists_map_is_available() -> None:
    assert holds('"payees" in lists && size(lists) == 2')


def test_plain_sequence_in_env_works_as_list() -> None:
    env = CompileEnv(lists={"vips": ["ann", "ben"]})
    assert holds("args.who in lists.vips", {"who": "ben"}, env=env)


def test_unknown_list_is_config_error() -> None:
    with pytest.raises(ConfigError, match=r"lists\.nope") as info:
        CelCondition("args.x in lists.nope", ENV)
    assert info.value.hint and "contacts" in info.value.hint


@settings(max_examples=200, deadline=None)
@given(items=st.lists(st.text(max_size=4), max_size=6),
       probe=st.lists(st.text(max_size=4), max_size=4))
def test_narrowed_membership_equals_python_membership(items: list[str],
                                                      probe: list[str]) -> None:
    env = CompileEnv(lists={"l": NamedList("l", items)})
    narrowed = holds("args.xs.exists(x, x in lists.l)", {"xs": probe}, env=env)
    whole = holds("args.xs.exists(x, x in lists.l) && size(lists.l) >= 0", {"xs": probe},
                  env=env)
    assert narrowed == whole == any(x in items for x in probe)


# --- errors fail closed ---------------------------------------------------------------------

def test_missing_key_raises() -> None:
    with pytest.raises(CelError, match="no such key 'amount'"):
        holds("args.amount > 100", {"other": 1})


def test_missing_nested_key_raises() -> None:
    with pytest.raises(CelError, match="no such key"):
        holds("args.meta.owner == 'me'", {"meta": {}})


def test_has_guard_avoids_missing_key_error() -> None:
    assert not holds("has(args.amount) && args.amount > 100", {"other": 1})


def test_type_mismatch_raises() -> None:
    with pytest.raises(CelError, match="TypeError"):
        holds("args.name > 1", {"name": "bob"})


def test_non_bool_result_raises() -> None:
    with pytest.raises(CelError, match="not a bool"):
        holds("args.amount", {"amount": 1})


def test_null_result_raises() -> None:
    with pytest.raises(CelError, match="not a bool"):
        holds("principal")


def test_error_carries_policy_error_code_and_expression() -> None:
    with pytest.raises(CelError) as info:
        holds("args.amount > 100")
    assert info.value.code == "policy_error"
    assert info.value.expression == "args.amount > 100"


def test_division_by_zero_raises() -> None:
    with pytest.raises(CelError):
        holds("args.a / args.b > 1", {"a": 1, "b": 0})


def test_unconvertible_argument_that_is_read_raises() -> None:
    with pytest.raises(CelError):
        holds("args.lock == 1", {"lock": object()})


def test_unconvertible_argument_that_is_not_read_is_ignored() -> None:
    assert holds("args.amount > 100", {"amount": 150, "lock": object()})


def test_decimal_argument_compares_as_number() -> None:
    assert holds("args.amount > 100", {"amount": Decimal("150.25")})


def test_enum_argument_compares_as_its_value() -> None:
    class Color(enum.Enum):
        RED = "red"

    assert holds('args.color == "red"', {"color": Color.RED})


NOT_ORDERED = [float("nan"), float("inf"), -float("inf"), Decimal("NaN")]
ORDERINGS = ["args.amount > 100", "!(args.amount <= 100)", "args.amount * 2 > 200",
             "args.amounts.exists(a, a > 100)", "args.amount - args.fee < 0"]


@pytest.mark.parametrize("value", NOT_ORDERED, ids=repr)
@pytest.mark.parametrize("expression", ORDERINGS)
def test_a_value_no_order_holds_for_is_an_error_where_the_expression_orders(
        expression: str, value: Any) -> None:
    """NaN > 100 and NaN <= 100 are both false: a deny rule's threshold would let it pass."""
    with pytest.raises(CelError, match="NaN or an infinity"):
        holds(expression, {"amount": value, "amounts": [5, value], "fee": 1})


def test_a_nan_that_an_ordering_expression_does_not_read_changes_nothing() -> None:
    assert holds("args.amount > 100", {"amount": 150, "note": float("nan")})
    assert not holds("args.amount > 100", {"amount": 50, "note": float("nan")})


def test_a_nan_compared_for_equality_is_no_error() -> None:
    assert not holds("args.amount == 100", {"amount": float("nan")})


def test_a_nan_amount_in_json_arguments_is_denied_by_a_threshold_rule() -> None:
    from callwarden import Guard

    guard = Guard.from_dict({"version": 1, "rules": [
        {"id": "big", "match": {"tool": "pay"}, "if": "args.amount > 100", "effect": "deny"}]})
    decision = guard.check("pay", '{"amount": NaN}')  # Python's JSON reader takes NaN
    assert decision.effect == "deny" and decision.rule == "big"
    assert decision.reasons[0].code == "policy_error"


# --- compile-time errors --------------------------------------------------------------------

def test_syntax_error_is_config_error_with_cel_message() -> None:
    with pytest.raises(ConfigError, match=r"invalid CEL expression.*Syntax error") as info:
        CelCondition("args.amount >", ENV)
    assert info.value.hint and "args.amount > 100" in info.value.hint


@pytest.mark.parametrize("config", [None, 42, True, "", "   ", ["args.x"]])
def test_non_string_or_empty_config_is_config_error(config: Any) -> None:
    with pytest.raises(ConfigError, match="must be a CEL expression string"):
        CelCondition(config, ENV)


def test_unknown_variable_is_config_error() -> None:
    with pytest.raises(ConfigError, match=r"unknown variable.*arg\b") as info:
        CelCondition("arg.amount > 100", ENV)
    assert info.value.hint and "args" in info.value.hint


def test_comprehension_variable_is_not_unknown() -> None:
    assert holds("args.xs.all(x, x > 0)", {"xs": [1, 2]})


def test_type_names_are_not_unknown_variables() -> None:
    assert holds("type(args.n) == int", {"n": 1})


# --- Unicode and size -----------------------------------------------------------------------

def test_unicode_string_comparison() -> None:
    assert holds('args.city == "Zürich" && args.note.startsWith("日本")',
                 {"city": "Zürich", "note": "日本語のメモ"})


def test_unicode_item_in_list() -> None:
    assert holds("args.to in lists.contacts", {"to": "zoë@exämple.de"})


def test_unicode_escape_in_literal_matches_list_item() -> None:
    assert holds('"zo\\u00eb@ex\\u00e4mple.de" in lists.contacts')


def test_large_args_read_one_key() -> None:
    rows = [{"id": i, "name": f"row {i}"} for i in range(20_000)]
    assert holds("args.amount > 100", {"amount": 150, "rows": rows})


def test_large_args_read_whole_list() -> None:
    rows = [{"id": i, "name": f"row {i}"} for i in range(20_000)]
    assert holds('size(args.rows) == 20000 && args.rows[19999].name == "row 19999"',
                 {"rows": rows})


def test_large_list_membership() -> None:
    env = CompileEnv(lists={"big": NamedList("big", (f"u{i}" for i in range(100_000)))})
    assert holds("args.to in lists.big && !(args.cc in lists.big)",
                 {"to": "u99999", "cc": "v1"}, env=env)


# --- cost: nested loops over large arguments are refused, not run -----------------------------

NESTED = "args.items.exists(x, args.items.exists(y, x == y + 1000000))"


def test_nested_loops_over_a_large_list_are_refused_before_they_run() -> None:
    condition = CelCondition(NESTED, ENV)
    with pytest.raises(CelError, match=r"not evaluated: its loops nest 2 deep .* 10,000 items"):
        condition(subject(args={"items": list(range(10_000))}))


def test_nested_loops_over_a_small_list_still_run() -> None:
    assert not holds(NESTED, {"items": list(range(100))})
    assert holds("args.a.exists(x, args.a.exists(y, x == y + 1))", {"a": list(range(100))})


def test_a_linear_search_inside_a_loop_counts_as_a_loop() -> None:
    expression = "args.a.all(x, x in args.b)"
    with pytest.raises(CelError, match="nest 2 deep"):
        CelCondition(expression, ENV)(subject(args={"a": list(range(1000)), "b": [0]}))
    assert holds(expression, {"a": [1, 2], "b": [1, 2, 3]})


def test_a_single_loop_over_a_large_list_runs() -> None:
    assert holds("args.items.exists(x, x == 9999)", {"items": list(range(10_000))})


def test_membership_in_a_named_list_is_narrowed_before_the_cost_is_counted() -> None:
    big = NamedList("contacts", [f"user{i}@example.com" for i in range(100_000)])
    env = CompileEnv(lists={"contacts": big})
    recipients = ["user1@example.com", "user2@example.com"]
    assert holds("args.to.all(r, r in lists.contacts)", {"to": recipients}, env=env)


@pytest.mark.parametrize(("expression", "depth"), [
    ("args.amount > 100", 0),
    ("args.x in [1, 2]", 1),
    ("args.a.exists(x, x > 1)", 1),
    ("args.a.exists(x, x + 1 > 2)", 1),
    ('args.a.map(x, x + "s").size() > 0', 1),
    ("args.a.map(x, args.b + args.c)", 2),
    ("args.a.exists(x, args.b.all(y, y in args.c))", 3),
    ("args.a.exists(x, x > 1) && args.b.all(y, y > 1)", 1),
    ('args.m.filter(k, k.startsWith("a")).exists_one(k, k == "ab")', 1),
])
def test_loop_depth_counts_nesting_not_occurrences(expression: str, depth: int) -> None:
    assert CelCondition(expression, ENV)._loops == depth


def test_a_whole_number_sent_as_a_float_is_the_same_number() -> None:
    # JSON has one number type: a model may send 1500.0 where the policy author thought 1500.
    assert holds("args.amount * 2 > 1000", {"amount": 1500.0})
    assert not holds("args.amount * 2 > 1000", {"amount": 400.0})
    assert holds("args.amount > 1000", {"amount": 1500.5})


# --- matches() with a literal pattern: compiled once, the same answers ----------------------

MATCHES = [
    ("^[a-z0-9.]+@example\\.com$", ["ann@example.com", "ann@example.org", "x@example.com.evil"]),
    ("ubb", ["hubba", "HUBBA", ""]),  # a search, not a full match
    ("(?i)^drop\\s+table", ["DROP TABLE x", "drop\ttable", "dropped"]),  # \s keeps the built-in
    ("^.{3}$", ["abc", "zoë", "日本語", "abcd"]),  # one character, however many bytes
    ("(?i)straße", ["STRASSE", "Straße", "STRAẞE"]),
    ("a|b+c", ["bbbc", "xyz", "a"]),
    ("^$", ["", "x"]),
    ("^\\d{3}-\\d+$", ["123-4", "١٢٣-٤", "12-3", "abc-1"]),  # \d: every decimal digit, as in CEL
    ("^[^\\D]+$", ["123", "١٢٣", "12a"]),
    ("\\\\d", ["\\d", "5"]),  # an escaped backslash, then the letter d
    ("\\bcat\\b", ["a cat here", "concatenate", "é cat é"]),  # \b: the built-in's
]


@pytest.mark.parametrize(("pattern", "values"), MATCHES, ids=[m[0] for m in MATCHES])
def test_matches_with_a_literal_pattern_answers_as_cels_own(pattern: str,
                                                            values: list[str]) -> None:
    import cel

    literal = "'" + pattern.replace("\\", "\\\\") + "'"
    condition = CelCondition(f"args.s.matches({literal})", ENV)
    for value in values:
        expected = cel.evaluate(f"s.matches({literal})", {"s": value})
        assert (condition(subject(args={"s": value})) is not None) is expected, value


def test_matches_with_a_literal_pattern_compiles_it_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import re2

    compiled: list[str] = []
    real = re2.compile
    monkeypatch.setattr(re2, "compile", lambda p, *a: compiled.append(p) or real(p, *a))
    condition = CelCondition("args.to.matches('@example\\\\.com$') && "
                             "!args.to.matches('^admin@')", ENV)
    assert sorted(compiled) == ["@example\\.com$", "^admin@"]
    answers = [condition(subject(args={"to": to})) is not None
               for to in ("ann@example.com", "admin@example.com", "ann@evil.test") * 50]
    assert answers == [True, False, False] * 50
    assert len(compiled) == 2


def test_matches_of_a_value_that_is_not_a_string_is_an_error() -> None:
    condition = CelCondition("args.to.matches('^a')", ENV)
    with pytest.raises(CelError, match="matches\\(\\) of a value that is not a string"):
        condition(subject(args={"to": 5}))


def test_matches_with_a_pattern_built_at_run_time_still_works() -> None:
    assert holds("args.s.matches(args.p)", {"s": "hubba", "p": "^hu"})
    assert not holds("args.s.matches(args.p)", {"s": "hubba", "p": "^ub"})


def test_matches_inside_a_string_literal_is_not_rewritten() -> None:
    assert holds("args.s == \".matches('x')\"", {"s": ".matches('x')"})


def test_matches_with_a_literal_pattern_answers_right_in_many_threads() -> None:
    import concurrent.futures

    condition = CelCondition("args.to.matches('@example\\\\.com$')", ENV)
    values = [f"u{i}@example.com" if i % 3 else f"u{i}@evil.test" for i in range(3000)]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda v: condition(subject(args={"to": v})) is not None,
                                values))
    assert answers == [v.endswith("@example.com") for v in values]


@pytest.mark.parametrize(("pattern", "compiled_as"), [
    ("^\\\\d+$", ["^\\p{Nd}+$"]),  # \d is every decimal digit in CEL: written out for RE2
    ("^\\\\w+$", []),  # \w has no RE2 spelling: the built-in keeps it
    ("(?-u:\\\\d)", []),
])
def test_what_is_compiled_once_means_what_cel_means(monkeypatch: pytest.MonkeyPatch,
                                                    pattern: str,
                                                    compiled_as: list[str]) -> None:
    import re2

    compiled: list[str] = []
    real = re2.compile
    monkeypatch.setattr(re2, "compile", lambda p, *a: compiled.append(p) or real(p, *a))
    CelCondition(f"args.s.matches('{pattern}')", ENV)
    assert compiled == compiled_as


@pytest.mark.parametrize(("expression", "tools"), [
    ("'web_fetch' in history.tools", {"web_fetch"}),
    ("history.tools['bash'] >= 3 && history.count > 2", {"bash"}),
    ("has(history.attempts.pay) && history.tool_effects['pay']['deny'] > 0", {"pay"}),
    ("history.last_time_by_tool['x'] > 1.0 || ('y' in history.tools)", {"x", "y"}),
    ("history.count > 3 && history.last_tool == 'bash'", set()),
    ("history.tools.exists(t, t == 'x')", None),
    ("history.effects['deny'] > 1", None),
    ("size(history.tools) > 3", None),
    ("args.tool in history.tools", None),
    ("'a' + 'x' in history.tools", None),  # the key is 'ax'
    ("history['tools']['x'] > 0", {"x"}),
    ("[1].exists(history, history > 0) && 'x' in history.tools", None),  # a shadowed name
])
def test_the_tools_a_history_condition_reads(expression: str, tools: set[str] | None) -> None:
    found = CelCondition(expression, ENV).history_tools
    assert found == (None if tools is None else frozenset(tools))
