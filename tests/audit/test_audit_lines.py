"""The line path of the audit log: payloads screened in one pass and written as encoded.

``decision_lines`` / ``outcome_line`` must write exactly what ``decision_event`` /
``outcome_event`` write, and the screen must never let through a payload the redaction walk
would have changed.
"""

from __future__ import annotations

import base64
import enum
import json
import math
from pathlib import Path
from typing import Any

import pytest
from _audit_support import DATA, make_guard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import callwarden.audit._redact as redact_module
from callwarden import Decision, Guard, Opaque
from callwarden.analysis.detectors import SECRETS, Detector, DetectorSet, select_detectors
from callwarden.audit import (
    Auditor,
    CallableSink,
    JsonlSink,
    Redactor,
    StdoutSink,
    decision_event,
    decision_lines,
    outcome_event,
    outcome_line,
)
from callwarden.audit._events import decision_line

_ROWS = [json.loads(line) for line in (DATA / "secrets.jsonl").read_text().splitlines()]
POSITIVES = [r for r in _ROWS if r["kind"] == "positive"]


def _same(line: str, other: str) -> bool:
    a, b = json.loads(line), json.loads(other)
    a.pop("event_id"), b.pop("event_id")
    return a == b


def _decide(guard: Guard, tool: str, args: Any, **context: Any) -> Decision:
    return guard.check(tool, args, context=context or None)


def _nested(depth: int) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = [value]
    return value


class Color(str, enum.Enum):  # noqa: UP042 - a mixin, whose str() is not its value
    RED = "red-value"


PAYLOADS: dict[str, Any] = {
    "flat": {"path": "src/app.py"},
    "nested": {"url": "https://api.github.com/repos/acme/app", "headers": {"Accept": "x/y"}},
    "command": {"command": "ls -la build && grep -rn TODO src/part1"},
    "unicode": {"text": "héllo wörld ✓"},
    "zero width": {"text": "AKIA\u200bZ7VRSQ5TJN2XOHNB"},
    "secret in value": {"body": "key: AKIAZ7VRSQ5TJN2XOHNB"},
    "sensitive key": {"api_key": "hunter2hunter2", "Client-Secret": "abc"},
    "assignment in text": {"env": "DB_PASSWORD=correct-horse-battery"},
    "json in text": {"body": json.dumps({"client_secret": "s3cr3t-value-123"})},
    "newline and quotes": {"content": 'line one\n"quoted" \\ back\tslash'},
    "long string": {"content": "x" * 10_000},
    "many items": {"items": list(range(1500))},
    "deep": {"a": _nested(40)},
    "bytes": {"blob": b"\x00\x01binary"},
    "opaque": {"thing": Opaque(object())},
    "nan": {"ratio": math.nan},
    "big int": {"card": 4111111111111111},
    "str enum": {"color": Color.RED},
    "base64 secret": {"b": base64.b64encode(b"token AKIAZ7VRSQ5TJN2XOHNB here").decode()},
    "url password": {"dsn": "postgres://admin:s3cretPass99@db.internal:5432/app"},
}


@pytest.mark.parametrize("name", list(PAYLOADS))
@pytest.mark.parametrize("redactor", [Redactor(), Redactor.off()], ids=["on", "off"])
def test_decision_lines_write_what_decision_event_writes(name: str, redactor: Redactor) -> None:
    guard = make_guard()
    decision = _decide(guard, "tool", PAYLOADS[name], user_request="please")
    [line] = decision_lines([decision], redactor)
    assert _same(line, decision_event(decision, redactor).line())


@pytest.mark.parametrize("name", list(PAYLOADS))
@pytest.mark.parametrize("redactor", [Redactor(), Redactor.off()], ids=["on", "off"])
def test_a_callers_own_line_is_what_decision_event_writes(name: str, redactor: Redactor) -> None:
    decision = _decide(make_guard(), "tool", PAYLOADS[name], user_request="please")
    assert _same(decision_line(decision, redactor), decision_event(decision, redactor).line())


def test_decision_lines_keep_order_and_rewritten_arguments(guard: Guard) -> None:
    decisions = [_decide(guard, "search", {"q": "audit", "limit": 500}),
                 _decide(guard, "deploy", {"env": "prod"}),
                 _decide(guard, "fetch", {"body": "AKIAZ7VRSQ5TJN2XOHNB"})]
    lines = decision_lines(decisions)
    assert [json.loads(x)["decision_id"] for x in lines] == [d.decision_id for d in decisions]
    first = json.loads(lines[0])
    assert first["effective_args"] == {"q": "audit", "limit": 20}
    assert _same(lines[0], decision_event(decisions[0]).line())
    assert "AKIAZ7VRSQ5TJN2XOHNB" not in lines[2]


def test_an_event_over_max_bytes_is_bounded_on_the_line_path(guard: Guard) -> None:
    red = Redactor(max_string=100_000, max_bytes=2048)
    decision = _decide(guard, "tool", {"content": "y" * 5000})
    [line] = decision_lines([decision], red)
    assert len(line) <= 2048
    assert json.loads(line)["truncated"]


@pytest.mark.parametrize("redactor", [Redactor(), Redactor.off()], ids=["on", "off"])
def test_outcome_line_writes_what_outcome_event_writes(guard: Guard, redactor: Redactor) -> None:
    decision = _decide(guard, "bash", {"command": "ls"})
    assert _same(outcome_line(decision, "ok", 0.25, None, redactor, at=1.5),
                 outcome_event(decision, "ok", 0.25, None, redactor, at=1.5).line())
    failed = outcome_line(decision, "error", 0.25, "said AKIAZ7VRSQ5TJN2XOHNB", redactor, at=2.0)
    assert _same(failed, outcome_event(decision, "error", 0.25, "said AKIAZ7VRSQ5TJN2XOHNB",
                                       redactor, at=2.0).line())


def test_outcome_line_refuses_an_unknown_status(guard: Guard) -> None:
    with pytest.raises(ValueError, match="status must be one of"):
        outcome_line(_decide(guard, "bash", {"command": "ls"}), "done", 0.1)


# -- the screen -------------------------------------------------------------------------------

@pytest.mark.parametrize("args", [
    {"path": "src/app.py"},
    {"file_path": "/home/dev/project/README.md", "content": "def f():\n    return 1\n"},
    {"url": "https://api.github.com/repos/acme/app/issues/3",
     "headers": {"Accept": "application/json"}},
    {"command": "ls -la build/1 && grep -rn TODO src/part1"},
    {"query": "the token is in the vault", "page": 2},
    {"repo": "acme/app", "keys": ["a", "b"], "author": "dev"},
])
def test_the_screen_lets_ordinary_payloads_through(args: dict[str, Any]) -> None:
    red = Redactor()
    text = red.plain_json(args)
    assert text is not None
    assert red.screen([text]) == [False]


@pytest.mark.parametrize("args", [
    {"api_key": "x"}, {"Client-Secret": "x"}, {"x": {"AUTHORIZATION": "Bearer abc"}},
    {"env": "DB_PASSWORD=hunter2"}, {"cmd": "curl --token abcdef"},
    {"body": '{"client_secret": "s"}'}, {"u": "redis://:pw@host"},
    {"b": base64.b64encode(b"AKIAZ7VRSQ5TJN2XOHNB").decode()}, {"t": "caf\u00e9"},
    {"k": "AKIAZ7VRSQ5TJN2XOHNB"}, {"s": "-----BEGIN OPENSSH PRIVATE KEY-----"},
])
def test_the_screen_flags_what_redaction_looks_at(args: dict[str, Any]) -> None:
    red = Redactor()
    assert red.screen([red.plain_json(args)]) == [True]  # type: ignore[list-item]


def test_the_screen_flags_only_the_payload_that_needs_it() -> None:
    red = Redactor()
    texts = [red.plain_json({"path": f"src/{i}.py"}) for i in range(5)]
    texts[3] = red.plain_json({"token": "abc"})
    assert red.screen(texts) == [False, False, False, True, False]  # type: ignore[arg-type]


@pytest.mark.parametrize("row", POSITIVES, ids=lambda r: r["rule_id"])
def test_the_screen_flags_every_corpus_secret(row: dict[str, Any]) -> None:
    red = Redactor()
    for args in ({"body": row["sample"]}, {"body": row.get("secret") or row["sample"]},
                 {"list": ["x", f"see {row['sample']}"]}):
        text = red.plain_json(args)
        if text is not None and red.redact(args)[1]:
            assert red.screen([text]) == [True], args


def test_no_corpus_secret_survives_the_line_path(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    guard = make_guard()
    with Auditor([JsonlSink(tmp_path / "a.jsonl"), StdoutSink()]) as auditor:
        for row in POSITIVES:
            decision = guard.check("fetch", {"url": "https://api.example.com",
                                             "body": row["sample"]},
                                   context={"user_request": f"use {row['sample']}"})
            auditor.decision(decision)
    written = (tmp_path / "a.jsonl").read_text() + capsys.readouterr().out
    leaks = [row["rule_id"] for row in POSITIVES
             if len(secret := row.get("secret") or row["sample"]) >= 8 and secret in written]
    assert leaks == []


def test_without_re2_every_payload_takes_the_redaction_walk(
        monkeypatch: pytest.MonkeyPatch, guard: Guard) -> None:
    monkeypatch.setattr(redact_module, "_re2", None)
    red = Redactor()
    assert red.screen([red.plain_json({"path": "a.py"})]) == [True]  # type: ignore[list-item]
    [line] = decision_lines([_decide(guard, "t", {"k": "AKIAZ7VRSQ5TJN2XOHNB"})], red)
    assert "AKIAZ7VRSQ5TJN2XOHNB" not in line


def test_a_screen_re2_cannot_compile_sends_every_payload_to_the_walk(
        monkeypatch: pytest.MonkeyPatch) -> None:
    re2 = redact_module._re2

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise re2.error("pattern too large")

    monkeypatch.setattr(re2, "compile", refuse)
    red = Redactor()
    assert red.screen([red.plain_json({"path": "a.py"})]) == [True]  # type: ignore[list-item]
    assert red.screen([red.plain_json({"k": "AKIAZ7VRSQ5TJN2XOHNB"})]) == [True]  # type: ignore[list-item]


def test_a_callback_sees_every_string_on_the_line_path(guard: Guard) -> None:
    seen: list[str] = []
    red = Redactor(callback=lambda path, text: seen.append(path) or None)
    assert red.plain_json({"path": "a.py"}) is None
    decision_lines([_decide(guard, "t", {"path": "src/app.py"})], red)
    assert "args.path" in seen


def test_a_detector_without_keywords_or_screen_turns_screening_off() -> None:
    custom = DetectorSet([*SECRETS, Detector.custom("ticket", r"TICKET-\d+")])
    assert custom.json_screen is None
    red = Redactor(detectors=custom)
    assert red.screen([red.plain_json({"a": "b"})]) == [True]  # type: ignore[list-item]
    assert select_detectors(["secret"]).json_screen is not None


# Fragments that detectors, key names and their JSON escapes react to, and their neighbours.
_FRAGMENTS = st.sampled_from([
    *(r["sample"] for r in _ROWS[::3]), *(r.get("secret") or "" for r in POSITIVES[::5]),
    "AKIA", "ghp_", "sk-", "xox", "eyJ", "://", "user:", "@host", "=", ":", " ", "\n", "\t",
    '"', "'", "\\", "-", "_", "--", "token", "Token", "PASS", "pw", "key", "api", "secret",
    "auth", "Authorization", "Bearer ", "client", "id", "access", "path", "\u200b", "\uff21",
    "é", "QUtJQVo3VlJTUTVUSk4yWE9ITkI=", "4111 1111 1111 1111", "a" * 20, "0123456789abcdef",
])
_TEXT = st.lists(_FRAGMENTS | st.text(max_size=8), max_size=8).map("".join)
_KEYS = st.sampled_from(["path", "body", "apiKey", "x-token", "note", "client_id", "env"]) | _TEXT
_VALUES = st.recursive(
    _TEXT | st.integers() | st.booleans() | st.none(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=8)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(_KEYS, _VALUES, max_size=4))
def test_a_payload_the_screen_lets_through_has_nothing_to_redact(args: dict[str, Any]) -> None:
    red = Redactor()
    text = red.plain_json(args)
    if text is None or red.screen([text])[0]:
        return
    redacted, found = red.redact(args)
    assert found == []
    assert json.loads(text) == redacted


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(_KEYS, _VALUES, max_size=4))
def test_decision_lines_match_decision_event_on_generated_payloads(args: dict[str, Any]) -> None:
    guard = make_guard()
    decision = guard.check("tool", args)
    [line] = decision_lines([decision])
    assert _same(line, decision_event(decision).line())
    assert _same(decision_line(decision), line)


# -- the auditor ------------------------------------------------------------------------------

def test_line_sinks_get_what_event_sinks_get_in_the_same_order(tmp_path: Path) -> None:
    guard = make_guard()
    events: list[dict[str, Any]] = []
    # A generous deadline: 401 events, each waited for, on a machine that may be busy.
    line_auditor = Auditor([JsonlSink(tmp_path / "lines.jsonl")], deadline=60.0)
    event_auditor = Auditor([CallableSink(events.append)], deadline=60.0)
    decisions = [_decide(guard, "bash", {"command": f"ls {i}"}) for i in range(300)]
    decisions.append(_decide(guard, "fetch", {"body": "AKIAZ7VRSQ5TJN2XOHNB"}))
    for auditor in (line_auditor, event_auditor):
        for i, decision in enumerate(decisions):
            auditor.decision(decision)
            if i % 3 == 0:
                auditor.outcome(decision, "ok", 0.01)
        auditor.close()
    lines = (tmp_path / "lines.jsonl").read_text().splitlines()
    assert len(lines) == len(events) == len(decisions) + 101
    for line, event in zip(lines, events, strict=True):
        if event["type"] == "outcome":  # stamped when recorded, by each auditor
            line = json.dumps({**json.loads(line), "time": event["time"]})
        assert _same(line, json.dumps(event))
    assert line_auditor.stats()["written"] == len(lines)


def test_stdout_sink_writes_each_line_once(capsys: pytest.CaptureFixture[str]) -> None:
    StdoutSink().write_lines(['{"a":1}', '{"b":2}'])
    assert capsys.readouterr().out == '{"a":1}\n{"b":2}\n'


def test_jsonl_write_lines_rotates_without_splitting_a_line(tmp_path: Path) -> None:
    sink = JsonlSink(tmp_path / "a.jsonl", rotate_bytes=300)
    lines = [json.dumps({"n": i, "pad": "p" * 40}) for i in range(40)]
    sink.write_lines(lines)
    sink.close()
    pieces = sorted(tmp_path.glob("a*.jsonl"))
    assert len(pieces) > 1
    got = [json.loads(x)["n"] for p in pieces for x in p.read_text().splitlines()]
    assert sorted(got) == list(range(40))
