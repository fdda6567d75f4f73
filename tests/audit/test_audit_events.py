"""Audit events: the shipped schema, what each event holds, redaction and size bounds."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from _audit_support import CALLS

from callwarden import Guard
from callwarden.audit import (
    OUTCOME_STATUSES,
    Redactor,
    decision_event,
    load_schema,
    outcome_event,
)

VALIDATOR = jsonschema.Draft202012Validator(load_schema())


def test_shipped_schema_is_a_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(load_schema())


@pytest.mark.parametrize(("tool", "args", "session"), CALLS)
def test_decision_events_validate_against_the_schema(guard: Guard, tool: str,
                                                     args: dict[str, Any], session: str) -> None:
    VALIDATOR.validate(decision_event(guard.check(tool, args, session=session)))


@pytest.mark.parametrize("status", OUTCOME_STATUSES)
def test_outcome_events_validate_against_the_schema(guard: Guard, status: str) -> None:
    decision = guard.check("bash", {"command": "ls"})
    VALIDATOR.validate(outcome_event(decision, status, 0.25, "boom" if status == "error" else None))


def test_invalid_call_event_validates(guard: Guard) -> None:
    VALIDATOR.validate(decision_event(guard.check("bash", "not json")))


def test_schema_rejects_an_unknown_field_and_another_version(guard: Guard) -> None:
    event = dict(decision_event(guard.check("bash", {"command": "ls"})))
    assert not VALIDATOR.is_valid({**event, "surprise": 1})
    assert not VALIDATOR.is_valid({**event, "schema_version": 2})


def test_decision_event_carries_attribution_and_call_fields(guard: Guard) -> None:
    decision = guard.check("deploy", {"env": "prod"}, agent="ops-bot", session="s9",
                           principal="alice", framework="langgraph")
    event = decision_event(decision)
    assert event["type"] == "decision" and event["schema_version"] == 1
    assert (event["decision_id"], event["effect"], event["rule"]) == \
        (decision.decision_id, "deny", "no-prod")
    assert event["source"] == "policy.yaml:10"
    assert event["matched"][0]["rule"] == "no-prod"
    assert (event["agent"], event["session"], event["principal"], event["framework"]) == \
        ("ops-bot", "s9", "alice", "langgraph")
    assert event["policy"] == decision.policy and event["policy"].startswith("base@")
    assert event["time"].endswith("Z")


def test_effective_args_only_when_the_decision_modified_them(guard: Guard) -> None:
    modified = decision_event(guard.check("search", {"q": "x", "limit": 500}))
    plain = decision_event(guard.check("search", {"q": "x", "limit": 5}))
    assert modified["args"]["limit"] == 500 and modified["effective_args"]["limit"] == 20
    assert "effective_args" not in plain


def test_observe_mode_rule_records_the_would_effect(guard: Guard) -> None:
    event = decision_event(guard.check("fetch", {"url": "https://x.io", "method": "DELETE"}))
    assert (event["effect"], event["would_effect"]) == ("allow", "deny")
    assert event["matched"][0]["mode"] == "observe"


def test_outcome_event_records_status_duration_and_redacted_error(guard: Guard) -> None:
    decision = guard.check("bash", {"command": "ls"})
    event = outcome_event(decision, "error", 0.0123,
                          "auth failed for key AKIAZ7VRSQ5TJN2XOHNB")
    assert (event["status"], event["duration_ms"]) == ("error", 12.3)
    assert "AKIAZ7VRSQ5TJN2XOHNB" not in json.dumps(event)
    assert event["redactions"] == [{"path": "error", "detector": "aws_access_key_id"}]


def test_outcome_rejects_an_unknown_status(guard: Guard) -> None:
    with pytest.raises(ValueError, match="status must be one of"):
        outcome_event(guard.check("bash", {"command": "ls"}), "exploded", 0.1)


def test_redaction_records_path_and_detector_never_the_value(guard: Guard) -> None:
    decision = guard.check("fetch", {"url": "https://x.io", "body": {"note": "AKIAZ7VRSQ5TJN2XOHNB"}})
    event = decision_event(decision)
    assert event["args"]["body"]["note"] == "[REDACTED:aws_access_key_id]"
    assert event["redactions"] == [{"path": "args.body.note", "detector": "aws_access_key_id"}]


@pytest.mark.parametrize("key", ["password", "Authorization", "X-Api-Key", "client_secret",
                                 "SESSION_TOKEN", "cookie", "db_passwd", "privateKey"])
def test_sensitive_key_names_are_redacted_whole(guard: Guard, key: str) -> None:
    event = decision_event(guard.check("fetch", {"url": "https://x.io", "headers": {key: "v4lue"}}))
    assert event["args"]["headers"][key] == "[REDACTED:sensitive_key]"
    assert {"path": f"args.headers{'.' + key if key.isidentifier() else json.dumps([key])}",
            "detector": "sensitive_key"} in event["redactions"]


def test_numbers_under_sensitive_looking_keys_are_kept(guard: Guard) -> None:
    event = decision_event(guard.check("llm", {"max_tokens": 256}))
    assert event["args"]["max_tokens"] == 256


def test_context_is_redacted_like_arguments(guard: Guard) -> None:
    event = decision_event(guard.check("bash", {"command": "ls"},
                                       context={"api_key": "abc123", "note": "fine"}))
    assert event["context"] == {"api_key": "[REDACTED:sensitive_key]", "note": "fine"}


def test_user_patterns_and_callback_redact(guard: Guard) -> None:
    def scrub(path: str, text: str) -> str | None:
        return text.replace("alice", "[user]") if "alice" in text else None

    redactor = Redactor(patterns={"ticket": r"TCK-[0-9]{6}"}, callback=scrub)
    event = decision_event(guard.check("note", {"text": "TCK-123456 for alice"}), redactor)
    assert event["args"]["text"] == "[REDACTED:ticket] for [user]"
    assert [r["detector"] for r in event["redactions"]] == ["ticket", "callback"]


def test_long_strings_are_cut_with_a_marker(guard: Guard) -> None:
    event = decision_event(guard.check("write", {"text": "x" * 10_000}),
                           Redactor(max_string=100))
    assert event["args"]["text"] == "x" * 100 + "…[truncated 9900 chars]"


def test_a_secret_across_the_cut_is_still_redacted(guard: Guard) -> None:
    text = "x" * 90 + " AKIAZ7VRSQ5TJN2XOHNB"
    event = decision_event(guard.check("write", {"text": text}), Redactor(max_string=100))
    assert "AKIAZ7VRSQ5TJN2" not in json.dumps(event)


def test_whole_event_is_bounded_by_max_bytes_and_still_valid(guard: Guard) -> None:
    args = {f"k{i}": "y" * 3000 for i in range(200)}
    event = decision_event(guard.check("write", args, context={"blob": "z" * 50_000}),
                           Redactor(max_bytes=8192))
    assert len(json.dumps(event)) <= 8192
    assert event["truncated"]
    VALIDATOR.validate(event)


def test_unserializable_argument_values_become_text(guard: Guard) -> None:
    event = decision_event(guard.check("py", {"obj": object(), "f": float("nan"), "b": b"\xff"}))
    json.dumps(event, allow_nan=False)
    assert event["args"]["f"] == "nan"


def test_redaction_off_keeps_values_but_still_bounds_size(guard: Guard) -> None:
    event = decision_event(guard.check("x", {"password": "p", "t": "q" * 5000}),
                           Redactor.off(max_string=20))
    assert event["args"]["password"] == "p"
    assert event["args"]["t"].startswith("q" * 20 + "…")


@pytest.mark.parametrize(("tool", "args", "session"), CALLS)
def test_the_assembled_line_is_the_events_own_json(guard: Guard, tool: str,
                                                   args: dict[str, Any], session: str) -> None:
    """The JSONL line is built from cached parts; it must say exactly what the event says."""
    event = decision_event(guard.check(tool, args, session=session, agent="a", context={"k": 1}))
    line = event.line()
    assert json.loads(line) == event
    assert list(json.loads(line)) == list(event)
    assert line.isascii()


def test_events_sharing_a_verdict_part_are_independent_when_truncated(guard: Guard) -> None:
    """Events of the same outcome share their rule parts; shrinking one leaves the other."""
    tight = Redactor(max_bytes=600)
    whole = decision_event(guard.check("bash", {"command": "rm -rf /"}), tight)
    reasons = json.dumps(whole["reasons"])
    decision_event(guard.check("bash", {"command": "rm -rf / " + "x" * 5000}), tight)
    assert json.dumps(whole["reasons"]) == reasons
