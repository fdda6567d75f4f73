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
