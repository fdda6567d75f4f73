"""The callwarden command line: decisions explained, documented exit codes, lint and test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from callwarden.cli import main

POLICY = """\
version: 1
tools:
  bash: {kind: shell, command: command}
rules:
  - id: no-prod
    match: {tool: deploy}
    args: {env: prod}
    effect: deny
    message: Deploy to staging.
    examples:
      deny: [{tool: deploy, args: {env: prod}}]
      allow: [{tool: deploy, args: {env: dev}}]
  - id: pay
    match: {tool: pay}
    effect: ask
  - id: stop
    match: {tool: drop}
    effect: halt
  - id: cap
    match: {tool: search}
    effect: modify
    cap: {limit: 10}
  - id: interns
    match: {tool: deploy, agent: intern}
    effect: ask
"""


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(("tool", "args", "code", "effect"), [
    ("deploy", {"env": "dev"}, 0, "ALLOW"),
    ("search", {"limit": 50}, 0, "MODIFY"),
    ("deploy", {"env": "prod"}, 10, "DENY"),
    ("pay", {}, 11, "ASK"),
    ("drop", {}, 12, "HALT"),
])
def test_check_exit_codes(capsys, policy, tool, args, code, effect) -> None:
    exit_code, out, _ = run(capsys, "check", "--policy", str(policy), "--tool", tool,
                            "--args", json.dumps(args))
    assert exit_code == code
    assert out.startswith(effect)


def test_check_explains_rule_line_and_other_matches(capsys, policy) -> None:
    _, out, _ = run(capsys, "check", "-p", str(policy), "-t", "deploy", "-a", '{"env": "prod"}',
                    "--agent", "intern")
    assert f"by rule 'no-prod' ({policy}:5)" in out
    assert "Deploy to staging." in out
    assert f"interns ({policy}:23): ask" in out


def test_check_json_output(capsys, policy) -> None:
    code, out, _ = run(capsys, "check", "-p", str(policy), "-t", "search", "-a", '{"limit": 99}',
                       "--json")
    data = json.loads(out)
    assert code == 0
    assert data["effect"] == "modify"
    assert data["args"] == {"limit": 10}
    assert data["source"] == f"{policy}:19"


@pytest.mark.parametrize("argv", [
    ["check", "-p", "POLICY", "-t", "x", "-a", "{bad json"],
    ["check", "-p", "POLICY"],
    ["check", "-p", "MISSING", "-t", "x"],
    ["frobnicate"],
])
def test_usage_and_policy_errors_exit_2(capsys, policy, tmp_path, argv) -> None:
    argv = [a.replace("POLICY", str(policy)).replace("MISSING", str(tmp_path / "no.yaml"))
            for a in argv]
    with pytest.raises(SystemExit) as info:
        raise SystemExit(main(argv))
    assert info.value.code == 2


def test_check_with_a_broken_policy_exits_2_with_the_line(capsys, tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nrules:\n  - id: a\n    efect: deny\n")
    code, _, err = run(capsys, "check", "-p", str(bad), "-t", "x")
    assert code == 2
    assert f"{bad}:4" in err and "did you mean 'effect'" in err


def test_lint_ok_and_broken(capsys, policy, tmp_path) -> None:
    code, out, _ = run(capsys, "lint", str(policy))
    assert code == 0 and "ok (5 rules)" in out
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\ndefault: maybe\nrules:\n  - id: a\n    effect: nope\n")
    code, out, _ = run(capsys, "lint", str(bad))
    assert code == 2
    assert f"{bad}:2" in out and f"{bad}:5" in out


def test_test_runs_inline_examples(capsys, policy) -> None:
    code, out, _ = run(capsys, "test", str(policy))
    assert code == 0
    assert out.strip().endswith("2 passed, 0 failed")


def test_test_runs_separate_test_files_and_reports_failures(capsys, policy, tmp_path) -> None:
    cases = tmp_path / "policy_test.yaml"
    cases.write_text(f"""\
policy: {policy.name}
cases:
  - {{name: prod blocked, tool: deploy, args: {{env: prod}}, expect: deny, rule: no-prod}}
  - {{name: search capped, tool: search, args: {{limit: 99}}, expect: modify,
      args_after: {{limit: 10}}}}
  - {{name: wrong on purpose, tool: pay, args: {{}}, expect: allow}}
""")
    code, out, _ = run(capsys, "test", str(cases))
    assert code == 1
    assert "FAIL" in out and "wrong on purpose: expected allow, got ask" in out
    assert out.strip().endswith("2 passed, 1 failed")


def test_test_with_a_malformed_test_file_exits_2(capsys, tmp_path) -> None:
    cases = tmp_path / "t.yaml"
    cases.write_text("cases: []\n")
    code, _, _ = run(capsys, "test", str(cases))
    assert code == 2


def test_demo_runs_the_bundled_policy(capsys) -> None:
    code, out, _ = run(capsys, "demo")
    assert code == 0
    assert "DENY" in out and "ASK" in out and "HALT" in out and "OK" in out


def test_installed_entry_point_runs(policy) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "callwarden", "check", "-p", str(policy), "-t", "drop"],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 12
    assert result.stdout.startswith("HALT")
