"""The command line's conveniences (issue 13, item 15): ``--version``, arguments from a file or
stdin, colour on a terminal only, and lint's closing count."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from callwarden.cli import main

POLICY = """\
version: 1
rules:
  - id: no-prod
    match: {tool: deploy}
    args: {env: prod}
    effect: deny
  - id: ops-only
    match: {tool: deploy}
    if: "context.team != 'ops'"
    effect: ask
"""
RED = "\x1b[31m"


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return path


class Terminal(io.StringIO):
    """Standard output as a terminal shows it."""

    def isatty(self) -> bool:
        return True


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_on_terminal(monkeypatch: pytest.MonkeyPatch, *argv: str) -> tuple[int, str]:
    terminal = Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    code = main(list(argv))
    return code, terminal.getvalue()


def test_version_prints_the_package_version(capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"callwarden {version('callwarden')}\n"


@pytest.mark.parametrize("command", ["check", "decide"])
def test_args_are_read_from_a_file_with_at(capsys, policy, tmp_path, command) -> None:
    (tmp_path / "args.json").write_text('{"env": "prod"}\n')
    code, out, _ = run(capsys, command, "-p", str(policy), "-t", "deploy",
                       "--args", f"@{tmp_path / 'args.json'}", "--context", '{"team": "ops"}')
    assert code == 10 and "no-prod" in out


@pytest.mark.parametrize("command", ["check", "decide"])
def test_args_are_read_from_stdin_with_a_dash(capsys, policy, monkeypatch, command) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"env": "prod"}'))
    code, out, _ = run(capsys, command, "-p", str(policy), "-t", "deploy", "--args", "-",
                       "--context", '{"team": "ops"}')
    assert code == 10 and "no-prod" in out


@pytest.mark.parametrize("command", ["check", "decide"])
def test_context_is_read_from_a_file_or_stdin(capsys, policy, tmp_path, monkeypatch,
                                              command) -> None:
    (tmp_path / "ctx.json").write_text('{"team": "ops"}')
    argv = [command, "-p", str(policy), "-t", "deploy", "-a", '{"env": "dev"}']
    assert run(capsys, *argv, "--context", f"@{tmp_path / 'ctx.json'}")[0] == 0
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"team": "dev"}'))
    assert run(capsys, *argv, "--context", "-")[0] == 11


def test_args_file_that_does_not_exist_is_a_usage_error_naming_it(capsys, policy,
                                                                  tmp_path) -> None:
    missing = tmp_path / "nope.json"
    code, out, err = run(capsys, "check", "-p", str(policy), "-t", "deploy", "-a", f"@{missing}")
    assert code == 2 and out == ""
    assert f"cannot read {missing}" in err and "Traceback" not in err


def test_args_file_that_is_not_an_object_names_the_file(capsys, policy, tmp_path) -> None:
    (tmp_path / "list.json").write_text("[1, 2]")
    code, _, err = run(capsys, "check", "-p", str(policy), "-t", "deploy",
                       "-a", f"@{tmp_path / 'list.json'}")
    assert code == 2
    assert "--args must be a JSON object" in err and str(tmp_path / "list.json") in err


def test_args_and_context_cannot_both_read_stdin(capsys, policy, monkeypatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("{}"))
    code, _, err = run(capsys, "check", "-p", str(policy), "-t", "deploy", "-a", "-",
                       "--context", "-")
    assert code == 2 and "cannot both read stdin" in err


def test_effect_line_is_coloured_on_a_terminal(policy, monkeypatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    code, out = run_on_terminal(monkeypatch, "check", "-p", str(policy), "-t", "deploy",
                                "-a", '{"env": "prod"}')
    first, _, rest = out.partition("\n")
    assert code == 10
    assert first.startswith(f"{RED}DENY") and first.endswith("\x1b[0m")
    assert "\x1b[" not in rest  # only the effect line


def test_no_color_turns_colour_off_on_a_terminal(policy, monkeypatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    _, out = run_on_terminal(monkeypatch, "check", "-p", str(policy), "-t", "deploy",
                             "-a", '{"env": "prod"}')
    assert out.startswith("DENY") and "\x1b[" not in out


def test_color_never_turns_colour_off_on_a_terminal(policy, monkeypatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    _, out = run_on_terminal(monkeypatch, "check", "-p", str(policy), "-t", "deploy",
                             "-a", '{"env": "prod"}', "--color", "never")
    assert out.startswith("DENY") and "\x1b[" not in out


def test_no_colour_when_stdout_is_not_a_terminal(capsys, policy, monkeypatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    _, out, _ = run(capsys, "check", "-p", str(policy), "-t", "deploy", "-a", '{"env": "prod"}')
    assert out.startswith("DENY") and "\x1b[" not in out


def test_color_always_colours_a_pipe_but_never_json(capsys, policy) -> None:
    _, out, _ = run(capsys, "check", "-p", str(policy), "-t", "deploy", "-a", '{"env": "prod"}',
                    "--color", "always")
    assert out.startswith(f"{RED}DENY")
    _, out, _ = run(capsys, "check", "-p", str(policy), "-t", "deploy", "-a", '{"env": "prod"}',
                    "--color", "always", "--json")
    assert "\x1b[" not in out


def test_the_installed_command_colours_a_real_terminal(policy) -> None:
    import pty

    controller, terminal = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"} | {"TERM": "xterm"}
    try:
        result = subprocess.run(
            [sys.executable, "-m", "callwarden", "check", "-p", str(policy), "-t", "deploy",
             "-a", '{"env": "prod"}'], stdout=terminal, stderr=subprocess.PIPE, env=env,
            timeout=60)
    finally:
        os.close(terminal)
    shown = b""
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # the terminal's other end is closed: all read
            break
        if not chunk:
            break
        shown += chunk
    os.close(controller)
    assert result.returncode == 10, result.stderr
    assert shown.startswith(RED.encode() + b"DENY")


def test_lint_ends_with_a_count_of_good_and_bad_files(capsys, policy, tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nrules:\n  - id: a\n    efect: deny\n")
    code, out, _ = run(capsys, "lint", str(policy), str(bad), str(policy))
    assert code == 2
    assert out.splitlines()[-1] == "2 files ok, 1 with problems"
    code, out, _ = run(capsys, "lint", str(policy))
    assert code == 0 and out.splitlines()[-1] == "1 file ok, 0 with problems"
