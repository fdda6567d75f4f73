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


def test_test_file_with_an_unknown_case_key_is_an_error_with_a_hint(capsys, policy,
                                                                     tmp_path) -> None:
    cases = tmp_path / "t.yaml"
    cases.write_text(f"policy: {policy.name}\ncases:\n"
                     "  - {tool: deploy, arg: {env: prod}, expect: allow}\n")
    code, out, _ = run(capsys, "test", str(cases))
    assert code == 2
    assert f"{cases}:3: cases[0].arg: unknown key in a test case (did you mean 'args'?)" in out


def test_test_file_with_an_unknown_top_level_key_is_an_error(capsys, policy, tmp_path) -> None:
    cases = tmp_path / "t.yaml"
    cases.write_text(f"policy: {policy.name}\ncase:\n  - {{tool: pay, expect: ask}}\n")
    code, out, _ = run(capsys, "test", str(cases))
    assert code == 2
    assert f"{cases}:2: case: unknown key in the test file (did you mean 'cases'?)" in out


def test_test_file_that_is_not_utf8_exits_2_with_a_clear_error(capsys, tmp_path) -> None:
    cases = tmp_path / "t.yaml"
    cases.write_bytes(b"policy: p.yaml\ncases: [\xff\xfe]\n")
    code, out, _ = run(capsys, "test", str(cases))
    assert code == 2
    assert f"{cases}: test file is not UTF-8 text" in out


@pytest.mark.parametrize("value", ["[1]", "5", '"x"', "null"])
def test_check_args_that_are_not_a_json_object_are_a_usage_error(capsys, policy, value) -> None:
    code, out, err = run(capsys, "check", "-p", str(policy), "-t", "deploy", "--args", value)
    assert code == 2
    assert out == ""
    assert "--args must be a JSON object" in err


def test_check_context_that_is_not_a_json_object_is_a_usage_error_naming_context(
        capsys, policy) -> None:
    code, _, err = run(capsys, "check", "-p", str(policy), "-t", "deploy", "--context", "[1]")
    assert code == 2
    assert "--context must be a JSON object" in err and "--args" not in err


def test_check_into_a_closed_pipe_keeps_the_decision_exit_code(policy) -> None:
    import os

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader (e.g. `head -1`) is already gone
    try:
        result = subprocess.run(
            [sys.executable, "-m", "callwarden", "check", "-p", str(policy), "-t", "deploy",
             "-a", '{"env": "prod"}'], stdout=write_end, stderr=subprocess.PIPE, text=True,
            timeout=60)
    finally:
        os.close(write_end)
    assert result.returncode == 10
    assert result.stderr == ""


def test_lint_reports_every_problem_in_one_run(capsys, tmp_path) -> None:
    bad = tmp_path / "dup.yaml"
    bad.write_text("version: 1\nfoo: 1\nrules:\n  - id: a\n    match: {tool: x}\n"
                   "    effect: deny\n    effect: allow\n    examples: {deny: [{tool: x}]}\n"
                   "  - id: a\n    efect: deny\n")
    code, out, _ = run(capsys, "lint", str(bad))
    assert code == 2
    for where, what in [(2, "foo: unknown key"), (7, "duplicate key 'effect'"),
                        (9, "duplicate rule id 'a'"), (10, "did you mean 'effect'"),
                        (8, "1 inline example(s) not checked")]:
        assert any(line.startswith(f"{bad}:{where}:") and what in line
                   for line in out.splitlines()), (where, what, out)


def test_console_script_imports_a_use_module_next_to_the_policy(tmp_path) -> None:
    folder = tmp_path / "policy"
    folder.mkdir()
    (folder / "cw_console_rules.py").write_text(
        "from callwarden import Verdict\n\ndef halt_all(call, ctx):\n"
        "    return Verdict.halt('stop')\n")
    (folder / "p.yaml").write_text("version: 1\nrules:\n  - id: h\n"
                                   "    use: cw_console_rules:halt_all\n")
    script = Path(sys.executable).parent / "callwarden"
    result = subprocess.run([str(script), "check", "-p", str(folder / "p.yaml"), "-t", "x"],
                            capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert result.returncode == 12, result.stderr


BASE = """\
version: 1
rules:
  - id: no-prod
    match: {tool: deploy}
    args: {env: prod}
    effect: deny
    examples:
      deny: [{tool: deploy, args: {env: prod}}]
      allow: [{tool: deploy, args: {env: dev}}]
"""


def _child(tmp_path: Path, body: str = "") -> Path:
    (tmp_path / "base.yaml").write_text(BASE)
    child = tmp_path / "child.yaml"
    child.write_text("version: 1\nextends: base.yaml\n" + body)
    return child


def test_test_after_init_runs_the_baselines_examples(capsys, tmp_path) -> None:
    target = tmp_path / "policy.yaml"
    assert main(["init", str(target)]) == 0
    code, out, _ = run(capsys, "test", str(target))
    passed, failed = out.strip().splitlines()[-1].split(", ")
    assert code == 0 and failed == "0 failed" and int(passed.split()[0]) > 10


def test_init_suggests_the_test_command(capsys, tmp_path) -> None:
    target = tmp_path / "policy.yaml"
    _, out, _ = run(capsys, "init", str(target))
    assert f"callwarden test {target}" in out


def test_inherited_examples_are_reported_with_the_base_file_and_line(capsys, tmp_path) -> None:
    code, out, _ = run(capsys, "test", "-v", str(_child(tmp_path)))
    assert code == 0 and out.strip().endswith("2 passed, 0 failed")
    assert f"PASS {tmp_path / 'base.yaml'}:8 " in out
    assert f"PASS {tmp_path / 'base.yaml'}:9 " in out


def test_inherited_example_broken_by_the_extending_policy_fails(capsys, tmp_path) -> None:
    child = _child(tmp_path, "rules:\n  - id: no-deploys\n    match: {tool: deploy}\n"
                             "    effect: deny\n")
    code, out, _ = run(capsys, "test", str(child))
    assert code == 1 and out.strip().endswith("1 passed, 1 failed")
    assert f"FAIL {tmp_path / 'base.yaml'}:9 " in out


def test_examples_of_a_redefined_inherited_rule_are_skipped(capsys, tmp_path) -> None:
    child = _child(tmp_path, "rules:\n  - id: no-prod\n    match: {tool: deploy}\n"
                             "    effect: ask\n")
    code, out, _ = run(capsys, "test", str(child))
    assert code == 0 and out.strip().endswith("0 passed, 0 failed")


def test_inherited_allow_example_passes_when_only_the_default_deny_refuses(capsys,
                                                                          tmp_path) -> None:
    code, out, _ = run(capsys, "test", str(_child(tmp_path, "default: deny\n")))
    assert code == 0 and out.strip().endswith("2 passed, 0 failed")


def test_own_allow_example_still_fails_under_the_default_deny(capsys, tmp_path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(BASE.replace("version: 1\n", "version: 1\ndefault: deny\n"))
    code, out, _ = run(capsys, "test", str(path))
    assert code == 1 and out.strip().endswith("1 passed, 1 failed")


def test_lint_imports_no_code_a_policy_names_unless_asked(capsys, tmp_path) -> None:
    marker = tmp_path / "imported"
    (tmp_path / "sideeffect.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n\n"
        "class NoProd:\n    def evaluate(self, call):\n        return None\n")
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text("version: 1\nrules:\n  - id: custom\n    use: sideeffect.py:NoProd\n")
    code, out, _ = run(capsys, "lint", str(policy_file))
    assert code == 0 and "ok (1 rules)" in out and "note:" in out
    assert not marker.exists()
    code, out, _ = run(capsys, "lint", "--providers", str(policy_file))
    assert code == 0 and "note:" not in out
    assert marker.exists()
