"""The functions CEL ``if:`` conditions call beyond CEL's own (callwarden.conditions.cel_functions)."""

from __future__ import annotations

from typing import Any

import cel
import pytest

from callwarden import Effect, Guard
from callwarden._call import ToolCall
from callwarden._profiles import default_profile
from callwarden.conditions.base import CompileEnv, ConfigError, Subject
from callwarden.conditions.cel import CelCondition, CelError
from callwarden.conditions.cel_functions import FUNCTIONS, MAX_GROWTH, STRING_BUILDERS
from callwarden.policyfile.lists import NamedList

LISTS = {
    "contacts": NamedList("contacts", ["alice@example.com", "bob@example.com"]),
    "domains": NamedList("domains", ["example.co.uk", "example.com"]),
}
ENV = CompileEnv(lists=LISTS)


def subject(args: Any) -> Subject:
    return Subject(ToolCall.create("send_email", args), default_profile("send_email"), {})


def holds(expression: str, args: Any = None) -> bool:
    return CelCondition(expression, ENV)(subject(args or {})) is not None


def gives(expression: str, s: Any, want: Any) -> bool:
    """Whether ``expression`` over ``args.s`` evaluates to ``want``."""
    return holds(f"{expression} == args.want", {"s": s, "want": want})


# --- none is the installed cel's own: ours shadow nothing -----------------------------------

@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_the_installed_cel_has_no_function_of_this_name(name: str) -> None:
    with pytest.raises(RuntimeError, match=f"Undefined variable or function: '{name}'"):
        cel.evaluate(f'{name}("a")')


def test_a_registered_function_never_replaces_a_builtin() -> None:
    """Were cel to ship one natively, its own would still run: registering ours is harmless."""
    assert cel.evaluate('size("abc")', cel.Context(functions={"size": lambda s: 99})) == 3


# --- the strings extension -------------------------------------------------------------------

@pytest.mark.parametrize(("expression", "s", "want"), [
    ("args.s.lowerAscii()", "HeLLo, ÄÖ!", "hello, ÄÖ!"),  # ASCII letters only, as in cel-go
    ("args.s.upperAscii()", "straße é-1", "STRAßE é-1"),
    ("lowerAscii(args.s)", "ABC", "abc"),  # global style works too
    ('args.s.replace("-", "+")', "a-b-c", "a+b+c"),
    ('args.s.replace("-", "+", 1)', "a-b-c", "a+b-c"),
    ('args.s.replace("-", "+", 0)', "a-b-c", "a-b-c"),
    ('args.s.replace("-", "+", -1)', "a-b-c", "a+b+c"),
    ('args.s.replace("", "+")', "ab", "+a+b+"),
    ('args.s.replace("x", "y")', "", ""),
    ('args.s.split(",")', "a,b,,c", ["a", "b", "", "c"]),
    ('args.s.split(",", 2)', "a,b,c", ["a", "b,c"]),
    ('args.s.split(",", 0)', "a,b,c", []),
    ('args.s.split(",", -1)', "a,b,c", ["a", "b", "c"]),
    ('args.s.split("")', "abc", ["a", "b", "c"]),
    ('args.s.split("", 2)', "abc", ["a", "bc"]),
    ('args.s.split(",")', "", [""]),
    ('args.s.split(", ").size()', "a, b, c", 3),
    ("args.s.trim()", "\u3000\t x y \n\u2029", "x y"),  # Unicode White_Space
    ("args.s.trim()", "\x1cx\x1c", "\x1cx\x1c"),  # not White_Space (str.strip() strips it)
    ("args.s.trim()", "\u200bx", "\u200bx"),  # zero-width space is no whitespace
])
def test_string_function_returns_what_cel_gos_strings_extension_does(expression: str, s: str,
                                                                       want: Any) -> None:
    assert gives(expression, s, want)


@pytest.mark.parametrize(("expression", "expected"), [
    ('"HeLLo World".startsWithIgnoreCase("hello")', True),
    ('"HeLLo World".startsWithIgnoreCase("world")', False),
    ('"report.PDF".endsWithIgnoreCase(".pdf")', True),
    ('"report.PDF".endsWithIgnoreCase(".doc")', False),
    ('"Please DELETE it".containsIgnoreCase("delete")', True),
    ('"Please archive it".containsIgnoreCase("delete")', False),
    ('"x".containsIgnoreCase("")', True),
    ('"ÄB".containsIgnoreCase("äb")', False),  # ASCII case folding only
    ('containsIgnoreCase("ABC", "b")', True),
])
def test_ignore_case_predicates_fold_ascii_on_both_sides(expression: str,
                                                          expected: bool) -> None:
    assert holds(expression) is expected


def test_split_result_works_with_cel_macros() -> None:
    expression = 'args.to.split(",").all(r, r.trim().lowerAscii() in lists.contacts)'
    assert holds(expression, {"to": "Alice@Example.com, BOB@example.com"})
    assert not holds(expression, {"to": "alice@example.com, mallory@evil.test"})


# --- validators --------------------------------------------------------------------------------

@pytest.mark.parametrize(("s", "expected"), [
    ("4111 1111 1111 1111", True),
    ("4111-1111-1111-1111", True),
    ("4111111111111111", True),
    ("79927398713", True),
    ("4111111111111112", False),
    ("4111 1111 1111 111a", False),
    ("", False),
    ("0", False),  # one digit is no number with a check digit
    ("\u0664\u0661\u0661\u0661", False),  # Arabic-Indic digits are not ASCII digits
])
def test_luhn_valid(s: str, expected: bool) -> None:
    assert holds("luhn_valid(args.s)", {"s": s}) is expected
    assert holds("args.s.luhn_valid()", {"s": s}) is expected


@pytest.mark.parametrize(("s", "expected"), [
    ("GB82 WEST 1234 5698 7654 32", True),
    ("GB82WEST12345698765432", True),
    ("gb82 west 1234 5698 7654 32", True),
    ("DE89 3704 0044 0532 0130 00", True),
    ("GB82 WEST 1234 5698 7654 33", False),  # mod-97 fails
    ("GB82 WEST 1234 5698 7654", False),  # too short for GB
    ("XX82WEST12345698765432", False),  # no such country
    ("GB82-WEST-1234-5698-7654-32", False),
    ("", False),
])
def test_iban_valid(s: str, expected: bool) -> None:
    assert holds("iban_valid(args.s)", {"s": s}) is expected


@pytest.mark.parametrize(("s", "want"), [
    ("Bob@Mail.Example.COM", "mail.example.com"),
    ("ann@bücher.de", "xn--bcher-kva.de"),
    ("mailto:x@Y.org", "y.org"),
    ("<Ann@Example.org>", "example.org"),
    ("not an address", ""),
    ("a@localhost", ""),
    ("x@[10.0.0.1]", ""),
    ("bob@example.com\u200b", ""),  # an invisible character: no address
    ("x@faß.de", ""),  # an IDNA deviation: two domains to two readers
    ("https://example.com/", ""),
])
def test_email_domain(s: str, want: str) -> None:
    assert gives("email_domain(args.s)", s, want)


@pytest.mark.parametrize(("s", "want"), [
    ("docs.example.co.uk", "example.co.uk"),
    ("a.b.example.com", "example.com"),
    ("localhost", ""),
    ("Mail.Example.COM.", "example.com"),
    ("https://user@Docs.Example.co.uk:8443/x?y=1", "example.co.uk"),
    ("docs.example.co.uk/path", "example.co.uk"),
    ("ssh://git@git.example.com:22/repo", "example.com"),
    ("bob@mail.example.com", "example.com"),
    ("alice.github.io", "alice.github.io"),  # the private section of the suffix list
    ("co.uk", ""),
    ("10.0.0.1", ""),
    ("http://[::1]/", ""),
    ("", ""),
])
def test_registrable_domain(s: str, want: str) -> None:
    assert gives("registrable_domain(args.s)", s, want)


def test_registrable_domain_of_a_recipient_in_a_list_of_domains() -> None:
    expression = "registrable_domain(args.to) in lists.domains"
    assert holds(expression, {"to": "Ann@Mail.Example.com"})
    assert not holds(expression, {"to": "ann@example.net"})


# --- errors: a wrong argument type is an evaluation error, never a crash -----------------------

@pytest.mark.parametrize(("expression", "args", "name"), [
    ("luhn_valid(1)", {}, "luhn_valid"),
    ("luhn_valid(args.card)", {"card": 4111111111111111}, "luhn_valid"),
    ("iban_valid(null)", {}, "iban_valid"),
    ("email_domain(true)", {}, "email_domain"),
    ("registrable_domain(args.hosts)", {"hosts": ["a.example.com"]}, "registrable_domain"),
    ("args.n.lowerAscii() == 'x'", {"n": 5}, "lowerAscii"),
    ("args.s.replace('a', 1) == 'x'", {"s": "a"}, "replace"),
    ("args.s.replace('a', 'b', 1.0) == 'x'", {"s": "a"}, "replace"),
    ("args.s.split(',', true) == []", {"s": "a"}, "split"),
    ("args.s.trim('x') == 'x'", {"s": "a"}, "trim"),
    ("args.s.containsIgnoreCase() ", {"s": "a"}, "containsIgnoreCase"),
])
def test_wrong_argument_types_are_an_evaluation_error(capfd: pytest.CaptureFixture[str],
                                                       expression: str, args: dict[str, Any],
                                                       name: str) -> None:
    condition = CelCondition(expression, ENV)
    with pytest.raises(CelError, match=f"{name}\\(\\) called with arguments of the wrong type"):
        condition(subject(args))
    assert capfd.readouterr().err == ""  # the bindings print nothing


def test_a_wrong_argument_type_denies_through_the_policy_error_path() -> None:
    guard = Guard.from_dict({"version": 1, "rules": [
        {"id": "cards", "match": {"tool": "pay"}, "if": "luhn_valid(args.card)",
         "effect": "deny"}]})
    assert guard.check("pay", {"card": "4111 1111 1111 1111"}).effect is Effect.DENY
    assert guard.check("pay", {"card": "1234"}).allowed
    decision = guard.check("pay", {"card": 4111111111111111})
    assert decision.effect is Effect.DENY
    assert [r.code for r in decision.reasons] == ["policy_error"]
    assert "luhn_valid() called with arguments of the wrong type" in decision.reasons[0].message


def test_replace_refuses_to_build_a_huge_string() -> None:
    condition = CelCondition('args.s.replace("", args.s).size() > 0', ENV)
    assert condition(subject({"s": "ab"})) is not None
    with pytest.raises(CelError, match="replace\\(\\) would build a string more than"):
        condition(subject({"s": "a" * 2048}))  # 2048 * 2049 characters
    # Shrinking or slightly growing a big string is fine.
    assert holds('args.s.replace("\\r\\n", "\\n").size() > 0', {"s": "x\r\n" * MAX_GROWTH})


def test_nested_loops_over_a_long_split_string_are_refused_before_they_run() -> None:
    condition = CelCondition(
        'args.s.split("").exists(a, args.s.split("").exists(b, a == b + "x"))', ENV)
    assert condition(subject({"s": "a" * 10})) is None
    with pytest.raises(CelError, match=r"not evaluated: .* a string of 5,000 characters"):
        condition(subject({"s": "a" * 5000}))


def test_one_split_inside_a_loop_costs_its_length_once() -> None:
    """A 5,000-character list of names checked against a 10-item list is 50,000 steps: it runs."""
    names = ",".join(f"user{i:04}" for i in range(555))
    assert len(names) > 4000
    assert not holds('args.s.split(",").exists(n, n in args.banned)',
                     {"s": names, "banned": [f"x{i}" for i in range(10)]})


# --- the compile-time analysis ----------------------------------------------------------------

def test_a_lower_cased_argument_still_finds_a_contact_in_a_narrowed_list() -> None:
    """lowerAscii builds a string the call does not hold: the list must be passed whole."""
    expression = "args.to.lowerAscii() in lists.contacts"
    assert holds(expression, {"to": "ALICE@EXAMPLE.COM"})
    assert not holds(expression, {"to": "MALLORY@EXAMPLE.COM"})
    assert not holds("args.to in lists.contacts", {"to": "ALICE@EXAMPLE.COM"})


@pytest.mark.parametrize("expression", [
    "args.to.lowerAscii() in lists.contacts",
    "args.to.upperAscii() in lists.contacts",
    "args.to.replace('X', 'x') in lists.contacts",
    "args.to.split(',')[0] in lists.contacts",
    "args.to.trim() in lists.contacts",
    "email_domain(args.to) in lists.domains",
    "registrable_domain(args.to) in lists.domains",
])
def test_a_function_that_builds_strings_disables_list_narrowing(expression: str) -> None:
    assert CelCondition(expression, ENV)._member_lists == ()


@pytest.mark.parametrize("expression", [
    "args.to in lists.contacts && args.to.containsIgnoreCase('@example')",
    "args.to in lists.contacts && args.to.startsWithIgnoreCase('B')",
    "args.to in lists.contacts && args.to.endsWithIgnoreCase('.COM')",
    "args.to in lists.contacts && !luhn_valid(args.card) && !iban_valid(args.card)",
])
def test_a_predicate_keeps_list_narrowing(expression: str) -> None:
    condition = CelCondition(expression, ENV)
    assert [name for name, _, _ in condition._member_lists] == ["contacts"]
    assert condition(subject({"to": "bob@example.com", "card": "1"})) is not None


def test_the_builders_and_the_predicates_are_told_apart() -> None:
    builders = {"lowerAscii", "upperAscii", "replace", "split", "trim", "email_domain",
                "registrable_domain"}
    assert builders == STRING_BUILDERS


def test_only_the_functions_an_expression_calls_are_registered_when_it_compiles() -> None:
    assert set(CelCondition("args.s.trim() == 'x' && luhn_valid(args.c)", ENV)._functions) \
        == {"trim", "luhn_valid"}
    # An expression that calls none runs with a plain dict, as before.
    assert CelCondition("args.amount > 100", ENV)._functions == {}


def test_a_function_argument_is_no_comprehension_variable() -> None:
    """``s.replace(x, ...)`` binds nothing: an unknown name in it is a load error."""
    with pytest.raises(ConfigError, match="unknown variable\\(s\\) nope"):
        CelCondition('args.s.replace(nope, "x") == ""', ENV)
    assert holds('args.s.replace(tool, "x") == "x!"', {"s": "send_email!"})


def test_functions_answer_right_in_many_threads() -> None:
    import concurrent.futures

    condition = CelCondition("args.to.lowerAscii().endsWith('@example.com')", ENV)
    values = [f"U{i}@EXAMPLE.COM" if i % 3 else f"u{i}@evil.test" for i in range(3000)]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda v: condition(subject({"to": v})) is not None, values))
    assert answers == [v.lower().endswith("@example.com") for v in values]
