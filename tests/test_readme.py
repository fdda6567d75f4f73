"""The README's examples work exactly as written."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from callwarden import Guard
from callwarden.cli import main

README = (Path(__file__).parent.parent / "README.md").read_text()
BLOCKS = re.findall(r"```(\w+)([^\n]*)\n(.*?)```", README, re.S)


def blocks(lang: str) -> list[tuple[str, str]]:
    return [(info.strip(), body) for kind, info, body in BLOCKS if kind == lang]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, body in blocks("yaml"):
        if name:
            (tmp_path / name).write_text(body)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_readme_has_the_named_policy_block() -> None:
    assert [n for n, _ in blocks("yaml") if n] == ["policy.yaml"]


# Sections whose example runs in its adapter's own README test instead: the framework lives in
# an environment of its own (CrewAI, Semantic Kernel: tests/envs), warns on import (LlamaIndex),
# or reads its tools' source code (smolagents' @tool).
OWN_TEST = ("CrewAI", "Semantic Kernel", "LlamaIndex", "smolagents")


def _section_of(body: str) -> str:
    before = README[:README.index(body)]
    return before.rsplit("\n## ", 1)[-1].split("\n", 1)[0]


PYTHON = [body for _, body in blocks("python") if _section_of(body) not in OWN_TEST]


def test_the_sections_left_to_their_own_tests_have_one() -> None:
    tests = Path(__file__).parent
    for title in OWN_TEST:
        assert any(f'ReadmeSection("{title}")' in f.read_text()
                   for f in tests.rglob("test_*.py")), title


@pytest.mark.parametrize("index", range(len(PYTHON)))
def test_python_blocks_run(workdir: Path, index: int) -> None:
    exec(compile(PYTHON[index], f"README.md python block {index}", "exec"), {})


def test_policy_reference_block_loads_and_its_examples_pass(workdir: Path) -> None:
    reference = next(body for name, body in blocks("yaml") if "version: 1" in body and not name
                     and "rules:" in body)
    (workdir / "reference.yaml").write_text(reference)
    guard = Guard.from_file(workdir / "reference.yaml")
    assert guard.check("send_money", {}).effect == "ask"
    assert main(["test", str(workdir / "reference.yaml")]) == 0


def test_test_file_block_passes(workdir: Path, capsys) -> None:
    body = next(body for name, body in blocks("yaml") if body.startswith("policy: policy.yaml"))
    (workdir / "policy_test.yaml").write_text(body)
    assert main(["test", "policy_test.yaml"]) == 0
    assert capsys.readouterr().out.strip().endswith("2 passed, 0 failed")


def test_check_command_denies(workdir: Path, capsys) -> None:
    line = next(body for _, body in blocks("bash") if body.startswith("callwarden check"))
    argv = shlex.split(line)[1:]
    assert main(argv) == 10
    assert capsys.readouterr().out.startswith("DENY")


def test_lint_error_example_is_what_lint_prints(workdir: Path, capsys) -> None:
    expected = next(body for kind, _, body in BLOCKS if kind == "text").strip()
    (workdir / "policy.yaml").write_text(
        "version: 1\n\n\n\nrules:\n  - id: a\n    efect: deny\n")
    assert main(["lint", "policy.yaml"]) == 2
    out = capsys.readouterr().out
    assert expected in out


def test_limits_block_loads_and_limits(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(workdir))  # its store is under ~, outside the project
    body = next(body for name, body in blocks("yaml") if body.startswith("state:"))
    (workdir / "limits.yaml").write_text("version: 1\n" + body)
    guard = Guard.from_file(workdir / "limits.yaml")
    assert [guard.check("fetch", {"n": i}, agent="a").allowed for i in range(11)].count(True) == 10
    assert [guard.check("x", {}, session="r").effect for _ in range(6)][-1] == "halt"
    assert guard.check("pay", {"amount": 2000}, principal="p").effect == "ask"
    guard.check("web_fetch", {"url": "https://x"}, session="s")
    assert guard.check("send_email", {}, session="s").effect == "ask"
    retried = [guard.check("fetch", {"url": "https://y"}, agent="b") for _ in range(2)]
    assert retried[0].allowed and retried[1].reasons[0].code == "limit.backoff"
    exports = [guard.check("export", {"n": i}, session="e") for i in range(4)]
    assert [d.allowed for d in exports] == [True, True, True, False]
    guard.release(exports[0])
    assert guard.check("export", {"n": 5}, session="e").allowed
    to = [f"p{i}@x.example" for i in range(11)]
    assert guard.check("send_email", {"to": to[:10]}, session="m").allowed
    assert guard.check("send_email", {"to": to[10:]}, session="m").effect == "deny"
    assert (workdir / ".local/state/callwarden/state.db").exists()
    guard.engine.store.close()


def test_output_rules_block_loads_and_cuts_a_long_list(workdir: Path) -> None:
    body = next(body for name, body in blocks("yaml") if "on: output" in body and not name)
    guard = Guard.from_yaml("version: 1\n" + body)
    out = guard.run("read_file", {"path": "x"}, lambda path: ["y" * 50] * 10000)
    assert out[-1] == "… 9,600 more items cut by policy"


def test_mcp_gateway_block_denies_deletes_and_redacts_results() -> None:
    body = next(body for name, body in blocks("yaml") if "mcp__files__delete_*" in body)
    guard = Guard.from_yaml("version: 1\n" + body)
    assert guard.check("mcp__files__delete_file", {"path": "a"}).effect == "deny"
    meta = {"name": "delete_file", "arguments": {"path": "a"}}
    assert guard.check("mcp__hub__call_tool", meta).effect == "deny"
    assert guard.check("mcp__hub__call_tool", {**meta, "name": "read_file"}).effect == "allow"
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    shown = guard.run("mcp__files__read_file", {"path": "a"}, lambda path: f"key {token}")
    assert token not in shown and "REDACTED" in shown
