"""Replay, explain and summary, through the Python API and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _audit_support import CALLS, POLICY, TIGHTENED, read_jsonl

from callwarden import Guard
from callwarden.audit import Auditor, JsonlSink
from callwarden.cli import main
from callwarden.review import explain_event, find_decision, replay, summarize
from callwarden.review.replay import parse_transition


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    """A log of CALLS decided by POLICY, with an outcome after every allowed call."""
    (tmp_path / "policy.yaml").write_text(POLICY)
    (tmp_path / "tight.yaml").write_text(TIGHTENED)
    guard = Guard.from_file(tmp_path / "policy.yaml")
    log = tmp_path / "audit.jsonl"
    with Auditor([JsonlSink(log)]) as auditor:
        for tool, args, session in CALLS:
            decision = guard.check(tool, args, session=session, agent="bot")
            auditor.decision(decision)
            if decision.allowed:
                auditor.outcome(decision, "ok", 0.002)
    return log


def test_replay_with_the_unchanged_policy_reports_zero_changes(recorded: Path) -> None:
    report = replay(recorded.parent / "policy.yaml", recorded)
    assert (report.decisions, report.changed, report.rule_changed) == (len(CALLS), 0, 0)
    assert report.transitions == {}


def test_replay_with_a_tightened_policy_reports_exactly_the_expected_transitions(
        recorded: Path) -> None:
    report = replay(recorded.parent / "tight.yaml", recorded)
    assert report.transitions == {"allow->deny": 3}
    assert report.by_rule == {"no-prod": 2, "fetch-budget": 1}
    changed = [(c.tool, c.args, c.session) for c in report.changes]
    assert changed == [("deploy", {"env": "staging"}, "s1"),
                       ("fetch", {"url": "https://example.com/c", "method": "GET"}, "s1"),
                       ("deploy", {"env": "staging"}, "s2")]
    assert report.changes[0].new_source.endswith("tight.yaml:10")


def test_replay_keeps_only_the_first_changes_but_counts_all(recorded: Path) -> None:
    report = replay(recorded.parent / "tight.yaml", recorded, show=1)
    assert report.changed == 3 and len(report.changes) == 1


def test_replay_skips_and_counts_unreadable_lines(recorded: Path) -> None:
    with recorded.open("a") as f:
        f.write('{"type": "decision", "tool": \n')
        f.write("not json at all\n")
    report = replay(recorded.parent / "policy.yaml", recorded)
    assert (report.corrupt, report.changed, report.decisions) == (2, 0, len(CALLS))


def test_replay_counts_calls_with_redacted_arguments(tmp_path: Path, recorded: Path) -> None:
    guard = Guard.from_file(recorded.parent / "policy.yaml")
    log = tmp_path / "secret.jsonl"
    with Auditor([JsonlSink(log)]) as auditor:
        auditor.decision(guard.check("fetch", {"url": "https://x.io", "token": "abc"}))
    report = replay(recorded.parent / "policy.yaml", log)
    assert report.redacted == 1 and report.changed == 0


@pytest.mark.parametrize(("spec", "parsed"), [
    ("allow-to-deny", ("allow", "deny")), ("*-to-halt", ("*", "halt")), ("any", ("*", "*")),
    ("deny->allow", ("deny", "allow")),
])
def test_transition_specs_parse(spec: str, parsed: tuple[str, str]) -> None:
    assert parse_transition(spec) == parsed


def test_unknown_transition_spec_is_refused() -> None:
    with pytest.raises(ValueError, match="allow-to-deny"):
        parse_transition("allow-to-maybe")


def test_cli_replay_fails_on_a_listed_transition(recorded: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["replay", "--policy", str(recorded.parent / "tight.yaml"), str(recorded),
                 "--fail-on", "deny-to-allow,allow-to-deny"])
    out = capsys.readouterr().out
    assert code == 1
    assert "allow → deny         3" in out and "FAIL: allow-to-deny occurred" in out


def test_cli_replay_passes_when_no_listed_transition_occurs(recorded: Path) -> None:
    assert main(["replay", "--policy", str(recorded.parent / "tight.yaml"), str(recorded),
                 "--fail-on", "deny-to-allow"]) == 0


def test_cli_replay_json_report(recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["replay", "--policy", str(recorded.parent / "tight.yaml"), str(recorded), "--json",
          "--show", "2"])
    report = json.loads(capsys.readouterr().out)
    assert report["transitions"] == {"allow->deny": 3} and len(report["changes"]) == 2


def test_cli_replay_progress_goes_to_stderr(recorded: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    main(["replay", "--policy", str(recorded.parent / "policy.yaml"), str(recorded),
          "--progress"])
    captured = capsys.readouterr()
    assert "100.0%" in captured.err and "100.0%" not in captured.out


def test_cli_replay_reads_rotated_pieces_in_order(tmp_path: Path, recorded: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    guard = Guard.from_file(recorded.parent / "policy.yaml")
    log = tmp_path / "rot" / "audit.jsonl"
    with Auditor([JsonlSink(log, rotate_bytes=1500)]) as auditor:
        for tool, args, session in CALLS:
            auditor.decision(guard.check(tool, args, session=session))
    main(["replay", "--policy", str(recorded.parent / "tight.yaml"), str(log), "--rotated",
          "--json"])
    report = json.loads(capsys.readouterr().out)
    assert report["decisions"] == len(CALLS) and report["transitions"] == {"allow->deny": 3}


def test_cli_replay_missing_log_is_a_usage_error(tmp_path: Path, recorded: Path) -> None:
    assert main(["replay", "--policy", str(recorded.parent / "policy.yaml"),
                 str(tmp_path / "nope.jsonl")]) == 2


# -- explain ------------------------------------------------------------------------------


def test_explain_prints_the_recorded_rule_source_reasons_and_outcome(recorded: Path) -> None:
    events = read_jsonl(recorded)
    denied = next(e for e in events if e.get("rule") == "no-prod")
    event, outcomes = find_decision(denied["decision_id"], [recorded])
    assert event == denied and outcomes == []
    text = explain_event(event, outcomes)
    assert text.startswith("DENY  deploy  by rule 'no-prod' (")
    assert "→ no-prod (" in text and "[args.matched]" in text
    assert "message: Deploy to staging instead." in text


def test_explain_shows_the_would_effect_of_an_observed_rule(recorded: Path) -> None:
    observed = next(e for e in read_jsonl(recorded) if e.get("would_effect"))
    text = explain_event(observed)
    assert "would be: deny in enforce mode" in text and "watch-fetch" in text


def test_cli_explain_with_policy_lists_every_rule_considered(
        recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deleted = next(e for e in read_jsonl(recorded) if e["type"] == "decision"
                   and e["tool"] == "fetch" and e["args"]["method"] == "DELETE")
    code = main(["explain", deleted["decision_id"], str(recorded), "--policy",
                 str(recorded.parent / "tight.yaml")])
    out = capsys.readouterr().out
    assert code == 0
    assert "✓ watch-fetch (" in out and "matched: deny, observe" in out
    assert "✗ no-prod" not in out  # it does not select fetch
    assert "rules considered (2 of" in out and "✗ fetch-budget (" in out
    assert "outcome: ok in 2.0 ms" in out


def test_cli_explain_names_a_rule_that_did_not_match(
        recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    get = next(e for e in read_jsonl(recorded) if e["type"] == "decision"
               and e["tool"] == "fetch" and e["args"]["method"] == "GET")
    main(["explain", get["decision_id"], str(recorded), "--policy",
          str(recorded.parent / "policy.yaml")])
    assert "✗ watch-fetch (" in capsys.readouterr().out


def test_cli_explain_unknown_decision_exits_1(recorded: Path) -> None:
    assert main(["explain", "nope", str(recorded)]) == 1


# -- summary ------------------------------------------------------------------------------


def test_summary_counts_effects_tools_rules_agents_and_latency(recorded: Path) -> None:
    summary = summarize(recorded)
    assert (summary.decisions, summary.outcomes) == (len(CALLS), 8)
    assert summary.effects == {"allow": 7, "deny": 2, "modify": 1}
    assert summary.tools["fetch"] == 4 and summary.rules["no-prod"] == 1
    assert summary.agents == {"bot": len(CALLS)}
    assert summary.would_effects == {"deny": 1}
    p50, p99 = summary.latency_us.percentile(50), summary.latency_us.percentile(99)
    assert p50 is not None and p99 is not None and 0 < p50 <= p99 <= summary.latency_us.max


def test_cli_audit_summary_prints_tables_and_top_denied_calls(
        recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "summary", str(recorded)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{len(CALLS)} decisions, 8 outcomes")
    assert "by effect:" in out and "by deciding rule:" in out and "by agent:" in out
    assert '1  deploy {"env":"prod"}  [no-prod]' in out
    assert "decision latency (µs): p50" in out


def test_cli_audit_summary_json(recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["audit", "summary", str(recorded), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["effects"] == {"allow": 7, "deny": 2, "modify": 1}
    assert set(data["latency_us"]) == {"p50", "p90", "p99", "max"}


# -- logs that hold nothing to replay or summarize (issue 13, item 12) ----------------------


def _log(tmp_path: Path, text: str, name: str = "given.jsonl") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


NOT_AUDIT = [
    ("empty", "", "is empty"),
    ("blank lines", "\n\n  \n", "is empty"),
    ("not json", "version: 1\nrules: []\n", "is not a JSONL audit log"),
    ("json, no decisions", '{"type": "outcome", "status": "ok"}\n{"level": "info"}\n',
     "holds no decision events"),
]


@pytest.mark.parametrize(("text", "says"), [(t, s) for _, t, s in NOT_AUDIT],
                         ids=[i for i, _, _ in NOT_AUDIT])
def test_cli_replay_fail_on_any_of_a_log_without_decisions_exits_2_saying_why(
        recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
        says: str) -> None:
    log = _log(tmp_path, text)
    code = main(["replay", "--policy", str(recorded.parent / "policy.yaml"), str(log),
                 "--fail-on", "any"])
    err = capsys.readouterr().err
    assert code == 2
    assert f"error: {log} {says}" in err


def test_cli_replay_of_a_good_log_and_an_empty_one_exits_2_naming_the_empty_one(
        recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = _log(tmp_path, "", "empty.jsonl")
    code = main(["replay", "--policy", str(recorded.parent / "policy.yaml"), str(recorded),
                 str(empty)])
    assert code == 2 and f"{empty} is empty" in capsys.readouterr().err


def test_cli_replay_reads_a_just_rotated_empty_log_with_its_pieces(
        tmp_path: Path, recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    guard = Guard.from_file(recorded.parent / "policy.yaml")
    log = tmp_path / "rot" / "audit.jsonl"
    with Auditor([JsonlSink(log, rotate_bytes=1500)]) as auditor:
        for tool, args, session in CALLS:
            auditor.decision(guard.check(tool, args, session=session))
    log.write_text("")  # rotated a moment ago: the events are all in the pieces
    assert main(["replay", "--policy", str(recorded.parent / "policy.yaml"), str(log),
                 "--rotated", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["decisions"] > 0


def test_replay_api_refuses_a_log_without_decisions(recorded: Path, tmp_path: Path) -> None:
    from callwarden.exceptions import CallwardenError
    from callwarden.review.reader import AuditLogError

    with pytest.raises(AuditLogError, match="holds no decision events") as raised:
        replay(recorded.parent / "policy.yaml", _log(tmp_path, '{"type": "outcome"}\n'))
    assert isinstance(raised.value, CallwardenError)


def test_replay_counts_against_a_store_of_its_own_not_the_policys(
        recorded: Path, tmp_path: Path) -> None:
    """Replaying must not spend the live budgets of the store the policy names."""
    store = tmp_path / "live.db"
    budget = tmp_path / "budget.yaml"
    budget.write_text(TIGHTENED + f"state: sqlite:///{store}\n")
    report = replay(budget, recorded)
    assert report.transitions == {"allow->deny": 3}
    live = Guard.from_file(budget)
    # s1 made three fetches in the log: had the replay counted them here, this one is denied.
    assert live.check("fetch", {"url": "https://example.com/x"}, session="s1").allowed
    live.close()


# -- progress (issue 13, item 15) -----------------------------------------------------------


def test_progress_shows_rate_events_per_second_and_eta() -> None:
    import io

    from callwarden.cli.review import _progress_printer

    now = [100.0]
    stream = io.StringIO()
    show = _progress_printer(stream, clock=lambda: now[0])
    now[0] = 102.0
    show(50_000_000, 200_000_000, 40_000)  # a quarter in 2 s: 6 s to go
    line = stream.getvalue()
    assert " 25.0%" in line and "25.0 MB/s" in line and "20,000 events/s" in line
    assert "ETA 0:06" in line
    now[0] = 108.0
    show(200_000_000, 200_000_000, 160_000)
    assert stream.getvalue().endswith("done in 0:08\n")


def test_cli_replay_progress_reports_events_per_second(
        recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["replay", "--policy", str(recorded.parent / "policy.yaml"), str(recorded),
          "--progress"])
    err = capsys.readouterr().err
    assert "events/s" in err and "done in " in err


# -- summary: durations, empty logs (issue 13, item 13) ---------------------------------------


def _outcomes(tmp_path: Path, seconds: list[float]) -> Path:
    guard = Guard.from_yaml("version: 1\n")
    log = tmp_path / "durations.jsonl"
    with Auditor([JsonlSink(log)]) as auditor:
        for duration in seconds:
            decision = guard.check("read_file", {"path": "x"})
            auditor.decision(decision)
            auditor.outcome(decision, "ok", duration)
    return log


def test_summary_of_tool_durations_below_one_ms_is_not_the_maximum(tmp_path: Path) -> None:
    durations_ms = [0.01 * i for i in range(1, 101)]  # 0.01 .. 1.0 ms
    summary = summarize(_outcomes(tmp_path, [d / 1000 for d in durations_ms]))
    p50, p90, p99 = (summary.duration_ms.percentile(p) for p in (50, 90, 99))
    assert p50 == pytest.approx(0.50, rel=0.02)
    assert p90 == pytest.approx(0.90, rel=0.02)
    assert p99 == pytest.approx(0.99, rel=0.02)
    assert summary.duration_ms.max == pytest.approx(1.0)


@pytest.mark.parametrize("scale", [1e-4, 0.5, 1.0, 3.0, 1e3, 1e6])
def test_latency_histogram_percentiles_are_within_2_percent_at_any_scale(scale: float) -> None:
    from callwarden.review.summary import LatencyHistogram

    values = [scale * (1 + i / 10) for i in range(1000)]  # spans two orders of magnitude
    histogram = LatencyHistogram()
    for v in values:
        histogram.add(v)
    for p in (1, 50, 90, 99, 100):
        exact = sorted(values)[max(0, -(-p * len(values) // 100) - 1)]
        assert histogram.percentile(p) == pytest.approx(exact, rel=0.02), p


def test_latency_histogram_counts_zeros_as_zero() -> None:
    from callwarden.review.summary import LatencyHistogram

    histogram = LatencyHistogram()
    for v in (0.0, 0.0, 0.0, 5.0):
        histogram.add(v)
    assert (histogram.percentile(50), histogram.percentile(100)) == (0.0, 5.0)


def test_cli_audit_summary_prints_sub_millisecond_durations(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _outcomes(tmp_path, [0.0001, 0.0002, 0.0003, 0.0004, 0.05])
    assert main(["audit", "summary", str(log)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines()
                if x.startswith("tool duration (ms)"))
    shown = dict(zip(line.split()[3::2], map(float, line.split()[4::2]), strict=True))
    assert shown["p50"] == pytest.approx(0.3, rel=0.02)
    assert shown["p90"] == pytest.approx(50, rel=0.02) and shown["max"] == 50


@pytest.mark.parametrize(("text", "says"), [(t, s) for _, t, s in NOT_AUDIT[:3]] + [
    ('{"level": "info"}\n', "holds no decision or outcome events")],
    ids=[i for i, _, _ in NOT_AUDIT[:3]] + ["json, no audit events"])
def test_cli_audit_summary_of_a_log_without_audit_events_exits_2_saying_why(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, says: str) -> None:
    log = _log(tmp_path, text)
    assert main(["audit", "summary", str(log)]) == 2
    captured = capsys.readouterr()
    assert f"error: {log} {says}" in captured.err and "None" not in captured.out


def test_summary_of_no_events_says_so_plainly() -> None:
    from callwarden.review import summarize_events

    text = summarize_events([]).format()
    assert text == "no audit events: 0 decisions, 0 outcomes" and "None" not in text


def test_summary_without_recorded_times_prints_no_none(tmp_path: Path) -> None:
    from callwarden.review import summarize_events

    text = summarize_events([{"type": "decision", "effect": "allow", "tool": "x"}]).format()
    assert text.startswith("1 decisions, 0 outcomes\n") and "None" not in text


@pytest.mark.parametrize("value", [282.8, 241.5, 0.0123456, 99999.9])
def test_a_percentile_never_passes_the_largest_or_smallest_value(value: float) -> None:
    from callwarden.review.summary import LatencyHistogram

    histogram = LatencyHistogram()
    histogram.add(value)
    assert histogram.percentile(99) == histogram.percentile(1) == value


def test_replayed_calls_let_their_slots_go_at_their_recorded_outcome(tmp_path: Path) -> None:
    """A concurrent limit of 1: ten exports one after the other, each with its outcome, all
    fit; one that never recorded an outcome still holds its slot for the next."""
    policy = tmp_path / "policy.yaml"
    policy.write_text("version: 1\nrules:\n  - id: one-export\n    match: {tool: export}\n"
                      "    limit: {concurrent: 1}\n")
    guard = Guard.from_file(policy)
    log = tmp_path / "audit.jsonl"
    with Auditor([JsonlSink(log)]) as auditor:
        for i in range(10):
            decision = guard.check("export", {"n": i})
            auditor.decision(decision)
            if i != 7:  # the eighth never finished (its process died)
                auditor.outcome(decision, "ok", 0.001)
                guard.release(decision)
            else:
                guard.release(decision)  # live, its hold ended before the next one came
    report = replay(policy, log)
    assert (report.decisions, report.changed) == (10, 2)
    assert report.transitions == {"allow->deny": 2}
