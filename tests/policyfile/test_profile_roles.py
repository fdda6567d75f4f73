"""Argument roles in tool profiles: which arguments carry recipients, payees, text ..."""

from __future__ import annotations

import pytest

from callwarden._profiles import ToolProfile, default_profile
from callwarden.exceptions import PolicyError
from callwarden.policyfile import compile_policy


def test_a_role_collects_every_argument_that_plays_it() -> None:
    profile = ToolProfile("send_email", kind="email",
                          roles={"recipient": ("to", "cc", "bcc"), "text": ("body",)})
    args = {"to": "a@x.example", "cc": ["b@x.example", "c@x.example"], "bcc": None,
            "body": "hi", "subject": "s"}
    assert profile.values(args, "recipient") == ("a@x.example", "b@x.example", "c@x.example")
    assert profile.values(args, "text") == ("hi",)  # roles: replaces the usual names


def test_without_roles_the_usual_names_play_the_role() -> None:
    profile = default_profile("send_email")
    args = {"to": "a@x.example", "cc": ["b@x.example"], "subject": "s", "body": "hi"}
    assert profile.values(args, "recipient") == ("a@x.example", "b@x.example")
    assert profile.values(args, "text") == ("hi", "s")
    assert default_profile("create_event").values({"attendees": ["a", "b"]}, "recipient") == \
        ("a", "b")
    assert default_profile("pay").values({"iban": "DE89"}, "payee") == ("DE89",)


def test_a_dotted_name_reaches_into_a_nested_argument() -> None:
    profile = ToolProfile("post", roles={"recipient": ("message.to",)})
    assert profile.values({"message": {"to": ["a", "b"]}}, "recipient") == ("a", "b")
    assert profile.values({"message": "text"}, "recipient") == ()


def test_the_policy_file_declares_roles() -> None:
    loaded = compile_policy({"version": 1, "tools": {
        "send_email": {"kind": "email", "roles": {"recipient": ["to", "cc"], "text": "body"}},
        "book": {"roles": {"traveler": "passenger_name"}}}})
    assert loaded.profiles["send_email"].roles == {"recipient": ("to", "cc"), "text": ("body",)}
    assert loaded.profiles["book"].values({"passenger_name": "Ann Lee"}, "traveler") == \
        ("Ann Lee",)


@pytest.mark.parametrize(("roles", "message"), [
    ({"Recipient": "to"}, "a role is a lower-case name"),
    ({"recipient": []}, "must name an argument or a list of arguments"),
    ({"recipient": [1]}, "must name an argument or a list of arguments"),
    ("to", "must map roles to argument names"),
])
def test_a_broken_role_is_a_policy_error(roles: object, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        compile_policy({"version": 1, "tools": {"send_email": {"roles": roles}}})
