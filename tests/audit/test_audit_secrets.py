"""No secret from the corpus survives into any sink: in arguments, in context, as a key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _audit_support import DATA

from callwarden import Guard
from callwarden.audit import (
    Auditor,
    CallableSink,
    JsonlSink,
    Redactor,
    SQLiteSink,
    StdoutSink,
    decision_event,
    decision_lines,
)

_ROWS = [json.loads(line) for line in (DATA / "secrets.jsonl").read_text().splitlines()]
POSITIVES = [r for r in _ROWS if r["kind"] == "positive"]
SAMPLE = POSITIVES[::6]  # every sixth positive: ~40 rows across all providers and templates


def _needles(row: dict[str, Any]) -> list[str]:
    secret = row.get("secret") or row["sample"]
    return [secret] if len(secret) >= 8 else []


def test_sample_is_about_forty_rows() -> None:
    assert 35 <= len(SAMPLE) <= 45


def test_no_sampled_secret_survives_into_any_sink(tmp_path: Path, guard: Guard,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[str] = []
    sinks = [JsonlSink(tmp_path / "a.jsonl"), StdoutSink(), SQLiteSink(tmp_path / "a.db"),
             CallableSink(lambda e: seen.append(json.dumps(e)))]
    with Auditor(sinks) as auditor:
        for row in SAMPLE:
            sample = row["sample"]
            decision = guard.check(
                "fetch", {"url": "https://api.example.com", "body": sample,
                          "nested": {"lines": ["first", sample]}},
                context={"user_request": f"please use {sample}"})
            auditor.decision(decision)
            auditor.outcome(decision, "error", 0.1, f"upstream said: {sample}")
    written = {
        "jsonl": (tmp_path / "a.jsonl").read_text(),
        "stdout": capsys.readouterr().out,
        "sqlite": (tmp_path / "a.db").read_bytes().decode("latin-1"),
        "callable": "\n".join(seen),
    }
    leaks = [(row["rule_id"], name) for row in SAMPLE for needle in _needles(row)
             for name, text in written.items() if needle in text]
    assert leaks == [], leaks
    assert written["jsonl"].count("\n") == 2 * len(SAMPLE)


def _caught_as_values() -> list[dict[str, Any]]:
    """The corpus rows whose secret the redactor removes when it is a plain value."""
    red = Redactor()
    rows = []
    for row in POSITIVES:
        secret = row.get("secret") or row["sample"]
        if len(secret) >= 8 and secret not in json.dumps(red.redact({"v": secret})[0]):
            rows.append(row)
    return rows


CAUGHT = _caught_as_values()


def test_most_corpus_secrets_are_caught_as_values() -> None:
    assert len(CAUGHT) >= 90


@pytest.mark.parametrize("row", CAUGHT, ids=lambda r: r["rule_id"])
def test_a_corpus_secret_used_as_a_key_never_reaches_the_event(guard: Guard,
                                                               row: dict[str, Any]) -> None:
    secret = row.get("secret") or row["sample"]
    decision = guard.check("fetch", {"url": "https://api.example.com", secret: "value",
                                     "nested": {secret: {"inner": 1}, "other": [{secret: 2}]}})
    lines = [decision_event(decision).line(), decision_lines([decision])[0]]
    assert [secret in line for line in lines] == [False, False]
    event = json.loads(lines[0])
    assert len(event["args"]) == 3 and len(event["args"]["nested"]) == 2  # keys all kept


def test_two_secret_keys_redacted_alike_are_both_kept() -> None:
    first = "ghp_R4nd0mT0k3nV4lu3Xy9Zw8Qp7Lm6Kj5Hg4Fd"
    second = first.replace("R4nd", "Q7zx")
    out, found = Redactor().redact({first: 1, second: 2})
    assert sorted(out.values()) == [1, 2]
    assert first not in json.dumps([out, found]) and second not in json.dumps([out, found])


@pytest.mark.parametrize("text", [
    'PASSWORD=""s3cr3tP4ss99""',
    "PASSWORD=''s3cr3tP4ss99''",
    'api_token=""a8f3k2m9x7q1w5e3r8t6""',
    "password=abc\x0bs3cr3tP4ss99",
    "password=abc\x1cs3cr3tP4ss99",
    "password=\x1cs3cr3tP4ss99",
    "password=\x0bs3cr3tP4ss99",
    "password=abc\x00s3cr3tP4ss99",
    "API_TOKEN=a8f3k2m9\x1fs3cr3tP4ss99",
    "client_secret:\x0cs3cr3tP4ss99",
    "password\x0b= s3cr3tP4ss99",
    "secret=abc\x85s3cr3tP4ss99",
    "secret=abc\u2028s3cr3tP4ss99",
], ids=["doubled-double-quotes", "doubled-single-quotes", "doubled-quotes-token", "vt-inside",
        "fs-inside", "fs-before", "vt-before", "nul-inside", "us-inside", "ff-before",
        "vt-before-equals", "nel-inside", "line-separator-inside"])
def test_an_assigned_value_with_odd_quotes_or_control_characters_is_redacted_whole(
        text: str) -> None:
    for line in (decision_event(_decision({"note": text})).line(),
                 decision_lines([_decision({"note": text})])[0]):
        assert "s3cr3tP4ss99" not in line and "a8f3k2m9" not in line, line


def _decision(args: dict[str, Any]) -> Any:
    from _audit_support import make_guard

    return make_guard().check("fetch", {"url": "https://example.com", **args})
