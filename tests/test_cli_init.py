"""``callwarden init``: a starter policy anywhere, valid as written and once its example is
uncommented (issue 13, item 11)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from callwarden.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def uncomment_example(text: str) -> str:
    """What a user does: deletes the "# " in front of each line of the commented rule."""
    return re.sub(r"^  # ", "  ", text, flags=re.M)


def test_init_into_a_folder_that_does_not_exist_creates_it(capsys, tmp_path: Path) -> None:
    target = tmp_path / "nodir" / "deeper" / "p.yaml"
    code, out, err = run(capsys, "init", str(target))
    assert (code, err) == (0, "")
    assert target.is_file() and f"wrote {target}" in out


def test_init_where_the_folder_is_a_file_exits_2_with_a_message(capsys, tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("")
    code, _, err = run(capsys, "init", str(tmp_path / "taken" / "p.yaml"))
    assert code == 2 and "cannot create the folder" in err and "Traceback" not in err


def test_init_refuses_to_overwrite_an_existing_file(capsys, tmp_path: Path) -> None:
    target = tmp_path / "p.yaml"
    target.write_text("mine\n")
    code, _, err = run(capsys, "init", str(target))
    assert code == 2 and "exists" in err and target.read_text() == "mine\n"


def test_starter_file_as_written_lints_clean(capsys, tmp_path: Path) -> None:
    target = tmp_path / "p.yaml"
    assert main(["init", str(target)]) == 0
    code, out, _ = run(capsys, "lint", str(target))
    assert code == 0 and f"{target}: ok" in out


def test_starter_file_with_its_example_uncommented_lints_clean_and_tests_pass(
        capsys, tmp_path: Path) -> None:
    target = tmp_path / "p.yaml"
    assert main(["init", str(target)]) == 0
    target.write_text(uncomment_example(target.read_text()))
    assert "- id: no-prod-deploys" in target.read_text()
    code, out, _ = run(capsys, "lint", str(target))
    assert code == 0, out
    code, out, _ = run(capsys, "test", "-v", str(target))
    assert code == 0, out
    assert "no-prod-deploys" in out  # the example's own inline examples ran


def test_uncommented_example_rule_decides(capsys, tmp_path: Path) -> None:
    target = tmp_path / "p.yaml"
    assert main(["init", str(target)]) == 0
    target.write_text(uncomment_example(target.read_text()))
    code, out, _ = run(capsys, "check", "-p", str(target), "-t", "deploy", "-a", '{"env": "prod"}')
    assert code == 10 and "no-prod-deploys" in out


def test_starter_files_workspace_line_uncommented_is_valid(capsys, tmp_path: Path) -> None:
    target = tmp_path / "p.yaml"
    assert main(["init", str(target)]) == 0
    target.write_text(re.sub(r"^# workspace:", "workspace:", target.read_text(), flags=re.M))
    assert re.search(r"^workspace:", target.read_text(), re.M)
    code, out, _ = run(capsys, "lint", str(target))
    assert code == 0, out


def test_starter_files_state_line_uncommented_names_a_store_outside_the_project(
        capsys, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    target = tmp_path / "project" / "p.yaml"
    assert main(["init", str(target)]) == 0
    target.write_text(re.sub(r"^# state:", "state:", target.read_text(), flags=re.M))
    code, out, _ = run(capsys, "lint", str(target))
    assert code == 0, out
    from callwarden.policyfile.compile import load_policy_file

    state = load_policy_file(target).state
    assert state == f"sqlite:///{tmp_path / 'home' / '.local/state/callwarden/state.db'}"
