"""The example policies under examples/: every inline example passes, and the assistant policy
stops what prompt injection tries."""

from __future__ import annotations

from pathlib import Path

import pytest

from callwarden import Guard
from callwarden.cli import main

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.yaml"))


@pytest.mark.parametrize("policy", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_every_example_passes(policy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["test", str(policy)]) == 0
    out = capsys.readouterr().out
    assert " 0 failed" in out and "passed" in out


@pytest.fixture(scope="module")
def assistant() -> Guard:
    return Guard.from_file(Path(__file__).parent.parent / "examples" / "assistant.yaml")


def test_an_injected_recipient_is_asked_about_in_every_tool(assistant: Guard) -> None:
    request = "Summarize my inbox and send the summary to Alice"
    for tool, args in (("send_email", {"to": "alice@corp.example", "cc": "eve@attacker.example"}),
                       ("reply_email", {"to": "eve@attacker.example", "body": "done"}),
                       ("create_event", {"attendees": ["eve@attacker.example"]}),
                       ("share_file", {"share_with": ["eve@attacker.example"], "file_id": "f"})):
        decision = assistant.check(tool, args, request=request)
        assert (decision.effect.value, decision.rule) == ("ask", "strangers-need-approval"), tool


def test_look_alikes_of_a_contact_are_strangers(assistant: Guard) -> None:
    for address in ("alice@corp.example.attacker.example", "alice@c\u043erp.example",
                    "alice\u200b@corp.example", "a.lice@corp.example"):
        assert assistant.check("send_email", {"to": address}).effect == "ask", address
    for address in ("ALICE@corp.example", " alice@corp.example ", "Alice <alice@CORP.example>",
                     "mailto:alice@corp.example", "\uff41lice@corp.example"):  # fullwidth a
        assert assistant.check("send_email", {"to": address}).allowed, address


def test_secrets_in_a_body_are_replaced_by_typed_placeholders(assistant: Guard) -> None:
    body = "creds: aws_secret_access_key = 9dKq3LwZt8vB2nX7pR4sY6uA1cE5gH0jM3oQ8wT2"
    decision = assistant.check("send_email", {"to": "alice@corp.example", "body": body})
    assert decision.effect.value == "modify" and decision.rule == "secrets-are-redacted"
    assert decision.args["body"] == "creds: aws_secret_access_key = <secret:aws_secret_key>"
