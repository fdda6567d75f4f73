"""Bounded work and unbreakable events: no input stalls the process, every call is recorded.

A huge argument costs the redactor what its kept part costs (the string cap plus a scan
margin), so other threads keep deciding and a required audit meets its deadline. A value
that cannot be written (an int past the interpreter's digit limit, an object lying about
its class) becomes a placeholder, and the event is written anyway.
"""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any

import jsonschema
import pytest
from _audit_support import POLICY, Recorder

import callwarden.audit._redact as redact_module
from callwarden import Guard
from callwarden._call import FrozenDict, ToolCall
from callwarden.audit import (
    Auditor,
    Redactor,
    decision_event,
    decision_lines,
    load_schema,
    outcome_event,
)
from callwarden.policyfile import load_policy_text

VALIDATOR = jsonschema.Draft202012Validator(load_schema())
# The worst shape for a NAME=value search: a name that never ends, then the "=".
HOSTILE = "a" * (10 << 20) + "="


def _guard(auditor: Any = None) -> Guard:
    return Guard.from_loaded(load_policy_text(POLICY, filename="policy.yaml"), audit=auditor)


class _Measured:
    """Stands in for a compiled pattern, remembering the longest text it was asked to search."""

    def __init__(self, pattern: Any, limit: int) -> None:
        self.pattern, self.limit, self.longest = pattern, limit, 0

    def search(self, text: str, *args: Any) -> Any:
        self.longest = max(self.longest, len(text))
        if len(text) > self.limit:  # fail now rather than search 10 MiB for seconds
            raise AssertionError(f"searched {len(text)} characters")
        return self.pattern.search(text, *args)


def test_a_huge_string_is_searched_only_up_to_the_cap_and_a_margin(
        monkeypatch: pytest.MonkeyPatch) -> None:
    red = Redactor()
    limit = red.max_string + 4096
    measured = _Measured(redact_module._ASSIGNMENT, limit)
    monkeypatch.setattr(redact_module, "_ASSIGNMENT", measured)
    text = "mode=fast " + HOSTILE  # an assignment near the start: the text is searched
    out, _ = red.redact({"content": text})
    assert 0 < measured.longest <= limit
    assert out["content"].endswith(f"…[truncated {len(text) - red.max_string} chars]")


def test_a_callback_is_handed_a_bounded_head_of_a_huge_string() -> None:
    seen: list[int] = []
    red = Redactor(callback=lambda path, text: seen.append(len(text)))
    out, _ = red.redact({"content": "x" * (10 << 20)})
    assert seen and max(seen) <= red.max_string + 4096
    assert len(out["content"]) < red.max_string + 64


def test_a_10_mib_argument_is_written_cut_within_the_deadline_when_required() -> None:
    recorder = Recorder()
    # Generous: the cut argument takes milliseconds; scanning all of it took half a minute.
    auditor = Auditor([recorder], required=True, deadline=10)
    decision = _guard(auditor).check("write_file", {"path": "big.txt", "content": HOSTILE})
    auditor.close()
    assert decision.allowed, decision.reasons
    [event] = recorder.events
    assert event["decision_id"] == decision.decision_id
    assert "…[truncated " in event["args"]["content"]
    assert len(json.dumps(event)) < 64 * 1024


def test_other_threads_keep_deciding_while_10_mib_arguments_are_audited() -> None:
    auditor = Auditor([Recorder()], required=True, deadline=60)
    guard = _guard(auditor)
    target, done, stop = 2000, [0], threading.Event()

    def small_calls() -> None:
        while not stop.is_set():
            guard.check("fetch", {"url": "https://example.com"})
            done[0] += 1

    other = threading.Thread(target=small_calls)
    other.start()
    big = 0
    started = time.monotonic()
    try:
        # Big calls one after another until the other thread has made its progress; a scan
        # of the whole argument would freeze it, and this loop would meet the liveness bound.
        while done[0] < target and time.monotonic() - started < 60:
            assert guard.check("write_file", {"path": "big", "content": HOSTILE}).allowed
            big += 1
    finally:
        stop.set()
        other.join(60)
        auditor.close()
    assert done[0] >= target, f"{done[0]} small decisions while {big} big ones were audited"


def test_a_huge_mapping_key_is_cut_in_the_event_and_its_paths() -> None:
    key = "k" * (1 << 20)
    out, found = Redactor().redact({key: {"password": "hunter2hunter2"}})
    [(cut, value)] = out.items()
    assert len(cut) < 5000 and value == {"password": "[REDACTED:sensitive_key]"}
    assert [len(f["path"]) < 200 for f in found] == [True]


# -- values that cannot be written --------------------------------------------------------


class _ClaimsToBeStr:
    """An object whose ``__class__`` says ``str``: ``isinstance(x, str)`` is True."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return str


class _BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no")


def _with_args(args: dict[str, Any]) -> Any:
    """A decision on a call whose arguments were never snapshotted (built directly)."""
    decision = _guard().check("fetch", {"url": "https://example.com"})
    return decision._replace(call=ToolCall("fetch", FrozenDict(args)), args=FrozenDict(args))


def test_an_int_past_the_digit_limit_is_recorded_as_a_placeholder() -> None:
    recorder = Recorder()
    with Auditor([recorder]) as auditor:
        decision = _guard(auditor).check("fetch", {"url": "https://e.com", "n": 10 ** 5000})
    [event] = recorder.events
    assert event["decision_id"] == decision.decision_id
    assert event["args"]["n"] == "<int of about 5001 digits, not recorded>"
    VALIDATOR.validate(event)


@pytest.mark.parametrize(("value", "recorded"), [
    (_ClaimsToBeStr(), r"<\S*_ClaimsToBeStr object at 0x\w+>"),
    ([_ClaimsToBeStr()], r"\['<\S*_ClaimsToBeStr object at 0x\w+>'\]"),
    (_BadRepr(), r"<unrecordable _BadRepr: RuntimeError>"),
    ({"deep": _BadRepr()}, r"\{'deep': '<unrecordable _BadRepr: RuntimeError>'\}"),
    (10 ** 5000, r"<int of about 5001 digits, not recorded>"),
    (-(10 ** 4400), r"<int of about 4401 digits, not recorded>"),
], ids=["lying-class", "lying-class-in-list", "bad-repr", "bad-repr-nested", "huge-int",
        "huge-negative-int"])
def test_a_value_that_cannot_be_written_becomes_text_or_a_placeholder(
        value: Any, recorded: str) -> None:
    decision = _with_args({"url": "https://example.com", "odd": value})
    for line in (decision_event(decision, Redactor()).line(), decision_lines([decision])[0]):
        event = json.loads(line)
        assert event["args"]["url"] == "https://example.com"
        odd = event["args"]["odd"]
        assert re.fullmatch(recorded, odd if isinstance(odd, str) else repr(odd)), odd
        VALIDATOR.validate(event)


def test_an_unreadable_decision_still_yields_a_valid_event_naming_what_is_missing() -> None:
    decision = _with_args({"url": "https://example.com"})._replace(elapsed="soon")
    event = decision_event(decision)
    assert event["truncated"] == ["elapsed_us"]
    assert event["decision_id"] == decision.decision_id
    VALIDATOR.validate(json.loads(event.line()))
    outcome = outcome_event(decision._replace(call=None), "error", 0.5, "boom")
    assert outcome["type"] == "outcome" and outcome["error"] == "boom"
    VALIDATOR.validate(json.loads(outcome.line()))


def test_the_auditor_writes_an_event_when_the_event_builder_fails(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import callwarden.audit._events as events_module

    def broken(*args: Any) -> Any:
        raise RuntimeError("builder bug")

    monkeypatch.setattr(events_module, "_decision_event", broken)
    monkeypatch.setattr(events_module, "_decision_lines", broken)
    recorder = Recorder()
    with Auditor([recorder]) as auditor:
        decision = _guard(auditor).check("fetch", {"url": "https://example.com"})
    [event] = recorder.events
    assert event["decision_id"] == decision.decision_id and "truncated" in event
    VALIDATOR.validate(event)
