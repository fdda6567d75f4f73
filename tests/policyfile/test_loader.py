"""Policy-file errors name the file, line and key, and say how to fix it.

Each fixture in fixtures/policies/ holds one failure mode; its first line says what to expect:
``# expect: line=N [key=K] | message fragment``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from callwarden import Effect, Guard, PolicyError

POLICIES = Path(__file__).parents[1] / "fixtures" / "policies"
sys.path.insert(0, str(Path(__file__).parents[1] / "fixtures" / "providers"))
_EXPECT = re.compile(r"# expect: line=(\d+)(?: key=(\S+))? \| (.+)")


def _expectation(path: Path) -> tuple[int, str | None, str]:
    m = _EXPECT.match(path.read_text().splitlines()[0])
    assert m, f"{path.name} has no '# expect:' header"
    return int(m.group(1)), m.group(2), m.group(3).strip()


@pytest.mark.parametrize("path", sorted(POLICIES.glob("*.yaml")), ids=lambda p: p.stem)
def test_each_broken_policy_reports_file_line_key_and_message(path: Path) -> None:
    line, key, fragment = _expectation(path)
    with pytest.raises(PolicyError) as info:
        Guard.from_file(path)
    matching = [p for p in info.value.problems if fragment in p.message + " " + (p.hint or "")]
    assert matching, f"no problem mentions {fragment!r}: {info.value.problems}"
    problem = matching[0]
    assert problem.file == str(path)
    assert problem.line == line
    if key is not None:
        assert problem.key == key
    assert f"{path}:{line}" in str(info.value)


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("version: 1\ndefault: maybe\nrules:\n  - id: a\n    effect: nope\n"
                      "  - id: b\n    colour: red\n")
    with pytest.raises(PolicyError) as info:
        Guard.from_file(policy)
    assert [p.line for p in info.value.problems] == [2, 5, 7]


def test_missing_file_is_a_policy_error_naming_the_path(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read policy file"):
        Guard.from_file(tmp_path / "nope.yaml")


def test_binary_file_is_a_policy_error(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(PolicyError):
        Guard.from_file(policy)


def test_the_sketch_keys_load(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("""
version: 1
name: sketch
default: allow
mode: enforce
on_error: deny
timeout: 200ms
tools:
  bash:       {kind: shell, command: command}
  read_file:  {kind: file.read, path: path}
  fetch:      {kind: http, url: url}
  send_money: {kind: payment, requires_approval: true}
rules:
  - id: deploys
    description: no prod deploys
    match: {tool: deploy, agent: ["*"]}
    args: {env: prod}
    effect: deny
    message: Deploy to staging.
    mode: enforce
    on_error: deny
    examples:
      deny: [{tool: deploy, args: {env: prod}}]
      allow: [{tool: deploy, args: {env: dev}}]
deny: ["Bash(rm -rf *)", "Read(~/.ssh/**)", "mcp__github__delete_*"]
ask: ["Bash(git push *)"]
allow: ["Read"]
""")
    g = Guard.from_file(policy)
    assert g.engine.settings.timeout == pytest.approx(0.2)
    assert g.check("send_money", {}).effect is Effect.ASK
    assert g.check("mcp__github__delete_repo", {}).effect is Effect.DENY
    assert g.check("run_shell_command", {"command": "rm -rf  build"}).effect is Effect.DENY
    assert g.check("bash", {"command": "git push origin main"}).effect is Effect.ASK
    d = g.check("read_file", {"path": "~/.ssh/id_rsa"})
    assert d.effect is Effect.DENY
    assert d.source == f"{policy}:25"


def test_empty_rules_and_null_sections_are_fine() -> None:
    g = Guard.from_yaml("version: 1\nrules:\ntools:\n")
    assert g.check("t", {}).effect is Effect.ALLOW


def test_from_dict_and_from_file_agree(tmp_path: Path) -> None:
    text = "version: 1\nrules:\n  - id: x\n    match: {tool: t}\n    effect: ask\n"
    (tmp_path / "p.yaml").write_text(text)
    a = Guard.from_file(tmp_path / "p.yaml").check("t", {})
    b = Guard.from_dict({"version": 1, "rules": [{"id": "x", "match": {"tool": "t"},
                                                  "effect": "ask"}]}).check("t", {})
    assert a.effect is b.effect is Effect.ASK


def test_policy_version_label_changes_with_content() -> None:
    a = Guard.from_yaml("version: 1\n").engine.settings.name
    b = Guard.from_yaml("version: 1\ndefault: deny\n").engine.settings.name
    assert a != b


def test_examples_can_be_skipped_at_load(tmp_path: Path) -> None:
    Guard.from_file(POLICIES / "failing_example.yaml", check_examples=False)


def test_on_key_reads_as_a_string_not_a_yaml_boolean() -> None:
    g = Guard.from_yaml("version: 1\nrules:\n  - id: cut\n    on: output\n    max_chars: 5\n"
                        "    effect: modify\n")
    assert g.engine.rules[0].phase == "output"


def test_yes_no_on_off_values_stay_strings() -> None:
    from callwarden.policyfile.yamlsrc import load_yaml

    data, _ = load_yaml("a: yes\nb: no\nc: on\nd: off\ne: true\nf: False\n", None)
    assert data == {"a": "yes", "b": "no", "c": "on", "d": "off", "e": True, "f": False}


@pytest.mark.parametrize("path", sorted(
    [*(Path(__file__).parents[2] / "src" / "callwarden").glob("*/*.yaml"),
     *(Path(__file__).parents[2] / "bench" / "policies").glob("*.yaml")]),
    ids=lambda p: p.name)
def test_shipped_policies_load_and_their_examples_pass(path: Path) -> None:
    Guard.from_file(path)


def test_anchors_reused_a_few_times_still_load() -> None:
    g = Guard.from_yaml("version: 1\nrules:\n  - id: a\n    match: &t {tool: [x, y]}\n"
                        "  - id: b\n    match: *t\n    effect: ask\n")
    assert [r.id for r in g.engine.rules] == ["a", "b"]


def test_duplicate_key_does_not_hide_other_problems(tmp_path: Path) -> None:
    policy = tmp_path / "dup.yaml"
    policy.write_text("version: 1\nfoo: 1\nrules:\n  - id: a\n    effect: deny\n"
                      "    effect: allow\n  - id: b\n    efect: deny\n")
    with pytest.raises(PolicyError) as info:
        Guard.from_file(policy)
    assert sorted(p.line for p in info.value.problems) == [2, 6, 8]


def test_inline_examples_skipped_because_of_other_errors_say_so(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("version: 1\nrules:\n  - id: a\n    match: {tool: x}\n    examples:\n"
                      "      allow: [{tool: x}]\n  - id: b\n    effect: nope\n")
    with pytest.raises(PolicyError) as info:
        Guard.from_file(policy)
    note = info.value.problems[-1]
    assert "1 inline example(s) not checked" in note.message
    assert note.line == 6


def test_use_imports_a_module_next_to_the_policy_file(tmp_path: Path) -> None:
    (tmp_path / "cw_next_to_policy.py").write_text(
        "from callwarden import Verdict\n\ndef no_prod(call, ctx):\n"
        "    return Verdict.deny('no') if call.args.get('env') == 'prod' else None\n")
    policy = tmp_path / "p.yaml"
    policy.write_text("version: 1\nrules:\n  - id: p\n    use: cw_next_to_policy:no_prod\n")
    before = list(sys.path)
    g = Guard.from_file(policy)
    assert g.check("deploy", {"env": "prod"}).effect is Effect.DENY
    assert sys.path == before


def test_use_of_an_unknown_module_hints_at_file_py_and_pythonpath(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("version: 1\nrules:\n  - id: p\n    use: cw_nowhere_xyz:fn\n")
    with pytest.raises(PolicyError) as info:
        Guard.from_file(policy)
    hint = info.value.problems[0].hint or ""
    assert "file.py:Name" in hint and "PYTHONPATH" in hint
