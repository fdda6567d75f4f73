"""No secret from the corpus survives into any sink, in arguments or in context."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _audit_support import DATA

from callwarden import Guard
from callwarden.audit import Auditor, CallableSink, JsonlSink, SQLiteSink, StdoutSink

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
