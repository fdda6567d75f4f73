"""The CEL fast path (conditions/cel_native.py) against the bindings: for every generated
expression it evaluates, it gives exactly what the bindings give; what it is unsure of, it
leaves to them; and a policy decides the same whichever path ran."""

from __future__ import annotations

from typing import Any

import cel
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from callwarden import Guard
from callwarden._call import freeze
from callwarden.conditions.cel import _tokenize
from callwarden.conditions.cel_functions import FUNCTIONS
from callwarden.conditions.cel_native import StringSet, Unsure, compile_native

ENV: dict[str, Any] = {
    "args": freeze({"to": "Ann@X.example", "amount": 420, "price": 12.5, "zero": 0.0,
                    "flag": True, "none": None, "tags": ["a", "b", "A"], "nums": [1, 2, 3],
                    "mixed": [1, "1", 1.0], "nested": {"k": "v", "n": 3},
                    "iban": "GB82 WEST 1234 5698 7654 32", "empty": "", "big": 2 ** 62,
                    "word": "Straße ünï"}),
    "tool": "send_email",
    "request": {"text": "mail ann@x.example", "emails": ["ann@x.example"]},
}
LISTS = {"contacts": ["ann@x.example", "bob@y.example"], "codes": [1, 2]}
ATOMS = ["args.to", "args.amount", "args.price", "args.zero", "args.flag", "args.none",
         "args.tags", "args.nums", "args.mixed", "args.nested", "args.nested.k", "args.nested.n",
         "args.missing", "args.tags[0]", "args.tags[5]", "args.nums[1]", "args.nested['k']",
         "args.empty", "args.big", "args.word", "args.iban", "tool", "request.emails",
         "request.text", "lists.contacts", "lists.codes", "1", "0", "-3", "420", "420.0",
         "12.5", "-0.5", "'a'", "'A'", "''", "'send_email'", "\"ann@x.example\"", "true",
         "false", "null", "[1, 2]", "['a', 'b']", "[]", "'\\u00df'", "r'\\d'"]
CALLS = ["has(args.to)", "has(args.missing)", "has(args.nested.k)", "has(args.nested.z)",
         "size(args.tags)", "size(args.word)", "args.word.size()", "size(args.nested)",
         "args.to.lowerAscii()", "args.to.upperAscii()", "args.to.contains('@')",
         "args.to.startsWith('Ann')", "args.to.endsWith('.example')",
         "args.to.containsIgnoreCase('ann@')", "iban_valid(args.iban)", "luhn_valid(args.to)",
         "email_domain(args.to)", "registrable_domain(args.to)", "args.word.trim()",
         "args.tags.exists(t, t == 'a')", "args.tags.all(t, t.size() == 1)",
         "args.nums.exists(n, n > 2)", "args.nums.all(n, n > 1)", "args.mixed.exists(m, m == 1)",
         "args.to.split('@')", "args.to.matches('^A')", "args.amount.contains('a')",
         "args.to.lowerAscii() in lists.contacts", "args.to in request.emails"]
RELOPS = ["==", "!=", "<", "<=", ">", ">=", "in"]

atom = st.sampled_from(ATOMS + CALLS)


def _combine(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(children, st.sampled_from(RELOPS), children).map(" ".join),
        st.tuples(children, st.sampled_from(["&&", "||"]), children).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"),
        children.map(lambda c: f"!({c})"),
        st.tuples(children, children, children).map(lambda t: f"({t[0]} ? {t[1]} : {t[2]})"),
    )


expressions = st.recursive(atom, _combine, max_leaves=6)


def native_of(expression: str) -> Any:
    tokens = _tokenize(expression)
    return None if tokens is None else compile_native(tokens, FUNCTIONS, cel.evaluate)


def both(expression: str) -> tuple[Any, Any]:
    """(what the bindings give, what the fast path gives): a value, or the exception."""
    context = cel.Context(functions=dict(FUNCTIONS))
    context.update({**ENV, "lists": LISTS})
    try:
        bound: Any = cel.compile(expression).execute(context)
    except Exception as e:
        bound = e
    native = native_of(expression)
    try:
        fast: Any = native({**ENV, "lists": {"contacts": StringSet(LISTS["contacts"]),
                                             "codes": tuple(LISTS["codes"])}})
    except Exception as e:
        fast = e
    return bound, fast


def same(bound: Any, fast: Any) -> bool:
    if isinstance(fast, list | tuple) and isinstance(bound, list | tuple):
        return list(fast) == list(bound)
    return type(fast) is type(bound) and fast == bound


@settings(max_examples=3000, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(expressions)
def test_the_fast_path_gives_what_the_bindings_give_or_leaves_it_to_them(expression: str
                                                                         ) -> None:
    try:
        cel.compile(expression)
    except Exception:
        return  # not CEL: a policy with it does not load
    if native_of(expression) is None:
        return  # left to the bindings whole
    bound, fast = both(expression)
    if not isinstance(fast, bool):
        return  # unsure at run time, or no bool: the condition asks the bindings
    assert not isinstance(bound, Exception), (expression, fast, bound)
    assert same(bound, fast), (expression, fast, bound)


@pytest.mark.parametrize("expression", [
    "has(args.amount) && args.amount > 1000",
    "has(args.iban) && !iban_valid(args.iban)",
    "args.to.lowerAscii() in lists.contacts || args.to in request.emails",
    "args.tags.exists(t, t.startsWith('a')) ? tool == 'send_email' : false",
    "!(registrable_domain(args.to) in lists.contacts)",
    "args.nested.n >= 3 && args.price < 13",
])
def test_what_policies_write_runs_on_the_fast_path(expression: str) -> None:
    assert native_of(expression) is not None
    bound, fast = both(expression)
    assert same(bound, fast) and isinstance(fast, bool), (bound, fast)


@pytest.mark.parametrize("expression", [
    "args.amount + 1 > 2",            # arithmetic
    "{'a': 1}.a == 1",                # a map literal
    "args.tags.map(t, t == 'a')[0]",  # another macro
    "1u == 1u",                       # unsigned
    "b'x' == b'x'",                   # bytes
    "int(args.price) == 12",          # a conversion
    ".args.to == 'x'",                # a leading dot
])
def test_what_it_does_not_know_is_left_to_the_bindings(expression: str) -> None:
    assert native_of(expression) is None


@pytest.mark.parametrize("expression", [
    "args.missing == 1",       # no such key: the bindings' error
    "args.amount == 420.0",    # an int and a double
    "args.mixed.all(m, m == 1)",   # a string and an int
    "args.none < 1",
    "args.amount.lowerAscii() == 'a'",  # a function refusing its arguments
])
def test_what_it_is_unsure_of_at_run_time_is_left_to_the_bindings(expression: str) -> None:
    native = native_of(expression)
    assert native is not None
    with pytest.raises(Unsure):
        native({**ENV, "lists": {}})


def test_patterns_compiled_once_run_on_the_fast_path_too() -> None:
    from callwarden.conditions.base import CompileEnv
    from callwarden.conditions.cel import CelCondition

    condition = CelCondition("args.cmd.matches('^rm +-') && !args.cmd.contains('--dry-run')",
                             CompileEnv())
    assert condition._native is not None
    guard = Guard.from_dict({"version": 1, "rules": [{"id": "rm", "effect": "deny",
                                                       "if": condition.expression}]})
    assert guard.check("bash", {"cmd": "rm  -rf x"}).effect.value == "deny"
    assert guard.check("bash", {"cmd": "rm -rf x --dry-run"}).allowed
    assert guard.check("bash", {"cmd": "ls"}).allowed


def test_a_policy_decides_the_same_on_either_path() -> None:
    """Errors keep the bindings' messages: the fast path never decides them."""
    guard = Guard.from_dict({"version": 1, "lists": {"contacts": ["ann@x.example"]}, "rules": [
        {"id": "big", "if": "has(args.amount) && args.amount > 1000", "effect": "ask"},
        {"id": "stranger", "if": "has(args.to) && !(args.to.lowerAscii() in lists.contacts)",
         "effect": "deny"},
        {"id": "typo", "match": {"tool": "typo"}, "if": "args.nope > 1", "effect": "deny"}]})
    assert guard.check("pay", {"amount": 1500}).effect.value == "ask"
    assert guard.check("pay", {"amount": 1500.5}).effect.value == "ask"
    assert guard.check("pay", {"amount": 10}).allowed
    assert guard.check("mail", {"to": "ANN@x.example"}).allowed
    assert guard.check("mail", {"to": "eve@x.example"}).effect.value == "deny"
    failed = guard.check("typo", {})
    assert failed.effect.value == "deny" and failed.reasons[0].code == "policy_error"
    assert "no such key 'nope'" in failed.reasons[0].message
