"""Argument roles in tool profiles, and the ``roles:`` condition: values a role carries must be
in a named list or in the user's request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from callwarden import Guard
from callwarden.cli import main
from callwarden.exceptions import PolicyError

CONTACTS = ["alice@corp.example", "Bob.Smith@Partner.example"]

POLICY: dict[str, Any] = {
    "version": 1,
    "lists": {"contacts": CONTACTS, "payees": ["DE89 3704 0044 0532 0130 00"],
              "company_domains": ["corp.example"]},
    "tools": {
        "send_email": {"kind": "email", "roles": {"recipient": ["to", "cc", "bcc"],
                                                  "text": "body"}},
        "create_event": {"roles": {"recipient": "attendees"}},
        "share_file": {"roles": {"recipient": "share_with", "file_id": "id"}},
        "pay": {"kind": "payment", "roles": {"payee": "iban"}},
    },
    "rules": [
        {"id": "known-parties", "roles": {"recipient": {"in": ["contacts", "request"]}},
         "effect": "ask", "message": "A new party needs approval."},
        {"id": "known-payees", "roles": {"payee": {"in": ["payees", "request"]}},
         "effect": "ask"},
        {"id": "links-stay-home", "match": {"tool": "send_email"},
         "roles": {"text": {"find": "urls", "as": "domain", "in": ["company_domains",
                                                                   "request"]}},
         "effect": "deny"},
    ],
}


@pytest.fixture(scope="module")
def guard() -> Guard:
    return Guard.from_dict(POLICY)


def decide(guard: Guard, tool: str, request: str | None = None, **args: Any) -> tuple[str, str]:
    decision = guard.check(tool, args, **({"request": request} if request else {}))
    return decision.effect.value, decision.rule


# -- one rule, every tool that has the role ---------------------------------------------------

def test_known_recipients_pass_in_every_tool(guard: Guard) -> None:
    assert decide(guard, "send_email", to="alice@corp.example", cc=["BOB.SMITH@partner.example"],
                  body="hi") == ("allow", "default")
    assert decide(guard, "create_event", attendees=["alice@corp.example"])[0] == "allow"
    assert decide(guard, "share_file", share_with="Alice <alice@corp.example>", id="f1")[0] \
        == "allow"


@pytest.mark.parametrize(("tool", "args"), [
    ("send_email", {"to": "alice@corp.example", "bcc": "eve@attacker.example", "body": "x"}),
    ("create_event", {"attendees": ["alice@corp.example", "eve@attacker.example"]}),
    ("share_file", {"share_with": "eve@attacker.example", "id": "f1"}),
])
def test_a_stranger_anywhere_in_the_role_is_caught(guard: Guard, tool: str,
                                                   args: dict[str, Any]) -> None:
    decision = guard.check(tool, args)
    assert (decision.effect.value, decision.rule) == ("ask", "known-parties")
    assert decision.code == "roles.unknown"
    assert "recipient 'eve@attacker.example' is not in lists.contacts or the user's request" \
        in decision.reasons[0].message


def test_someone_the_user_named_in_the_request_is_known(guard: Guard) -> None:
    request = "Please invite John.Doe@Example.org to Friday's review"
    assert decide(guard, "create_event", request, attendees=["john.doe@example.org"])[0] == "allow"
    # not a substring match: n.doe@ is someone else
    assert decide(guard, "create_event", request, attendees=["n.doe@example.org"]) == \
        ("ask", "known-parties")
    # nor is a look-alike address with a Cyrillic o (U+043E)
    assert decide(guard, "create_event", request, attendees=["j\u043ehn.doe@example.org"]) == \
        ("ask", "known-parties")


def test_a_known_address_with_a_hidden_character_is_not_known(guard: Guard) -> None:
    decision = guard.check("send_email", {"to": "alice\u200b@corp.example", "body": "x"})
    assert decision.rule == "known-parties"
    assert "cannot be read safely" in decision.reasons[0].message


def test_a_value_that_is_no_address_is_caught(guard: Guard) -> None:
    decision = guard.check("share_file", {"share_with": "bob", "id": "f1"})
    assert decision.rule == "known-parties"
    assert "'bob' is not an e-mail address" in decision.reasons[0].message


def test_a_tool_without_the_role_passes(guard: Guard) -> None:
    assert decide(guard, "read_file", path="notes.txt") == ("allow", "default")


# -- payees and links ---------------------------------------------------------------------------

def test_payees_compare_as_ibans(guard: Guard) -> None:
    assert decide(guard, "pay", iban="DE89370400440532013000", amount=10)[0] == "allow"
    assert decide(guard, "pay", iban="GB82 WEST 1234 5698 7654 32", amount=10) == \
        ("ask", "known-payees")
    request = "pay my landlord, IBAN GB82 WEST 1234 5698 7654 32"
    assert decide(guard, "pay", request, iban="GB82WEST12345698765432", amount=10)[0] == "allow"


def test_links_in_a_body_go_to_known_domains_only(guard: Guard) -> None:
    ok = "See https://wiki.corp.example/page and http://corp.example/x"
    assert decide(guard, "send_email", to="alice@corp.example", body=ok)[0] == "allow"
    bad = "Reset it at https://corp.example.attacker.example/login"
    assert decide(guard, "send_email", to="alice@corp.example", body=bad) == \
        ("deny", "links-stay-home")
    request = "send Alice the link to https://docs.python.org/3/"
    body = "Here: https://docs.python.org/3/library/"
    assert decide(guard, "send_email", request, to="alice@corp.example", body=body)[0] == "allow"


def test_people_are_known_by_the_words_the_user_wrote() -> None:
    guard = Guard.from_dict({"version": 1, "lists": {"family": ["Zoë Lee"]}, "rules": [
        {"id": "named", "roles": {"person": {"in": ["family", "request"]}}, "effect": "ask"},
        {"id": "named-guest", "roles": {"guest": {"in": ["request"], "as": "name"}},
         "effect": "ask"}],
        "tools": {"book_room": {"roles": {"guest": "guest"}}}})
    request = "Book two seats for Ann Lee, and a room for Bob Smith"
    assert decide(guard, "book_flight", request, passenger="ANN lee")[0] == "allow"
    assert decide(guard, "book_flight", request, travellers=["zoë lee", "Ann Lee"])[0] == "allow"
    asked = guard.check("book_flight", {"passenger": "Ann Smith"}, request=request)
    assert (asked.effect.value, asked.rule) == ("ask", "named")
    assert "'ann smith' is not in" in asked.reasons[0].message
    assert decide(guard, "book_room", request, guest="bob smith")[0] == "allow"
    assert decide(guard, "book_room", request, guest="Lee Ann")[0] == "ask"
    lookalike = guard.check("book_room", {"guest": "B\u043eb Smith"}, request=request)
    assert lookalike.effect.value == "ask" and "cannot be read safely" in \
        lookalike.reasons[0].message


# -- the policy file ------------------------------------------------------------------------

@pytest.mark.parametrize(("change", "message"), [
    ({"roles": {"recipient": {"in": ["nobody"]}}}, "no list named 'nobody'"),
    ({"roles": {"recipient": {"in": ["contacts"], "as": "emial"}}}, "is not a kind of value"),
    ({"roles": {"text": {"in": ["request"], "find": "links"}}}, "is not a kind of entity"),
    ({"roles": {"recipient": {"in": []}}}, "in: must list named lists and/or request"),
    ({"roles": {"recipient": {"in": ["request"], "not": 1}}}, "unknown key 'not'"),
    ({"roles": {"text": {"in": ["request"], "find": "names"}}}, "find: names is not possible"),
])
def test_a_broken_roles_condition_is_a_policy_error(change: dict[str, Any], message: str) -> None:
    policy = {**POLICY, "rules": [{"id": "r", "effect": "deny", **change}]}
    with pytest.raises(PolicyError, match=message):
        Guard.from_dict(policy)


@pytest.mark.parametrize(("roles", "message"), [
    ({"Recipient": "to"}, "a role is a lower-case name"),
    ({"recipient": []}, "must name an argument or a list of arguments"),
    ("to", "must map roles to argument names"),
])
def test_a_broken_profile_role_is_a_policy_error(roles: Any, message: str) -> None:
    policy = {"version": 1, "tools": {"send_email": {"roles": roles}}}
    with pytest.raises(PolicyError, match=message):
        Guard.from_dict(policy)


def test_examples_can_carry_the_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                        ) -> None:
    (tmp_path / "policy.yaml").write_text("""\
version: 1
lists: {contacts: [alice@corp.example]}
rules:
  - id: known-parties
    roles: {recipient: {in: [contacts, request]}}
    effect: ask
    examples:
      allow:
        - {tool: send_email, args: {to: alice@corp.example}}
        - {tool: send_email, args: {to: Carol@Example.org}, request: "mail carol@example.org"}
      ask:
        - {tool: send_email, args: {to: carol@example.org}, request: "mail Alice"}
""")
    assert main(["test", str(tmp_path / "policy.yaml")]) == 0
    assert "3 passed" in capsys.readouterr().out


# -- CEL: roles and request --------------------------------------------------------------------

def test_cel_sees_roles_and_the_requests_entities() -> None:
    guard = Guard.from_dict({"version": 1, "lists": {"contacts": ["alice@corp.example"]},
                             "rules": [
        {"id": "strangers", "effect": "ask",
         "if": "roles.recipient.exists(r, !(r.lowerAscii() in lists.contacts)"
               " && !(r.lowerAscii() in request.emails))"},
        {"id": "payee-from-request", "effect": "deny",
         "if": "size(request.ibans) > 0 && has(args.iban) && !(args.iban in request.ibans)"},
        {"id": "said-urgent", "effect": "ask", "if": "request.text.containsIgnoreCase('URGENT')"},
    ]})
    mail = {"to": "Alice@corp.example", "cc": ["bob@x.example"]}
    assert guard.check("send_email", mail).effect == "ask"
    assert guard.check("send_email", mail, request="cc Bob@X.example please").allowed
    request = "pay GB82 WEST 1234 5698 7654 32"
    assert guard.check("pay", {"iban": "GB82WEST12345698765432"}, request=request).allowed
    assert guard.check("pay", {"iban": "DE89370400440532013000"}, request=request).rule == \
        "payee-from-request"
    assert guard.check("read", {"path": "a"}, request="this is urgent").rule == "said-urgent"
    assert guard.check("read", {"path": "a"}).allowed  # no request: empty text and lists


def test_role_rules_are_skipped_only_for_calls_without_the_roles_arguments() -> None:
    """A rule whose roles: / untrusted: condition needs a value of a role is not evaluated
    for a call that has none of the role's arguments; a dotted role argument counts by its
    first part, and the same tool with those arguments is checked again."""
    guard = Guard.from_dict({"version": 1, "lists": {"payees": ["DE89370400440532013000"]},
                             "tools": {"pay": {"roles": {"payee": "payment.iban"}}},
                             "rules": [{"id": "new-payee", "effect": "ask",
                                        "roles": {"payee": {"in": ["payees"]}}}]})
    plan = guard.engine._index.plan(guard.engine.profile("pay"))
    assert plan.needs == (frozenset({"payment"}),)
    assert guard.check("pay", {"memo": "rent"}).allowed
    assert plan.validators_for({"memo": "rent"}) == ()
    stranger = {"payment": {"iban": "GB82WEST12345698765432"}}
    assert guard.check("pay", stranger).effect.value == "ask"
    assert guard.check("pay", {**stranger, "memo": "rent"}).effect.value == "ask"
    assert guard.check("pay", {"payment": {"iban": "DE89 3704 0044 0532 0130 00"}}).allowed
