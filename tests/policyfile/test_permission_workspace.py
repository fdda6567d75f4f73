"""Permission strings see the policy's workspace (its root and home) as its rules do, and a
path that starts with one ``/`` is also read from the project, as Claude Code reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from callwarden import Guard


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project and a home of its own, with the process elsewhere."""
    for folder in ("proj/secrets", "proj/config", "proj/src", "home/.ssh", "elsewhere"):
        (tmp_path / folder).mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "elsewhere")
    return tmp_path


def load(workspace: Path, body: str) -> Guard:
    policy = workspace / "proj" / "policy.yaml"
    policy.write_text("version: 1\nworkspace: {root: ., home: ../home}\n" + body)
    return Guard.from_file(policy)


def read(guard: Guard, path: Path | str) -> str:
    return guard.check("Read", {"file_path": str(path)}).effect.value


def edit(guard: Guard, path: Path | str) -> str:
    return guard.check("Edit", {"file_path": str(path), "old_string": "a",
                                "new_string": "b"}).effect.value


def test_a_home_pattern_denies_the_workspace_home(workspace: Path) -> None:
    guard = load(workspace, 'deny: ["Read(~/.ssh/**)"]\n')
    assert read(guard, workspace / "home/.ssh/id_rsa") == "deny"
    assert read(guard, "~/.ssh/id_rsa") == "deny"


def test_a_relative_pattern_denies_below_the_workspace_root(workspace: Path) -> None:
    guard = load(workspace, 'deny: ["Read(./secrets/**)"]\n')
    assert read(guard, workspace / "proj/secrets/key") == "deny"
    assert read(guard, "secrets/key") == "deny"
    assert read(guard, workspace / "elsewhere/secrets/key") == "allow"


def test_a_shell_pattern_reads_home_as_the_workspace_does(workspace: Path) -> None:
    guard = load(workspace, 'deny: ["Bash(cat ~/.ssh/*)"]\n')
    command = f"cat {workspace / 'home/.ssh/id_rsa'}"
    assert guard.check("Bash", {"command": command}).effect.value == "deny"


def test_an_allow_string_covers_below_the_workspace_root(workspace: Path) -> None:
    guard = load(workspace, 'default: deny\nallow: ["Read(./src/**)"]\n')
    assert read(guard, workspace / "proj/src/app.py") == "allow"
    assert read(guard, workspace / "elsewhere/src/app.py") == "deny"


def test_a_deny_from_one_slash_holds_in_the_project_and_from_the_root(workspace: Path) -> None:
    """Claude Code reads Edit(/config/**) from its settings' folder; read absolutely too."""
    guard = load(workspace, 'deny: ["Edit(/config/**)"]\nask: ["Read(/secrets/**)"]\n')
    assert edit(guard, workspace / "proj/config/app.yml") == "deny"
    assert edit(guard, "/config/app.yml") == "deny"
    assert edit(guard, workspace / "elsewhere/config/app.yml") == "allow"
    assert read(guard, workspace / "proj/secrets/key") == "ask"


def test_two_slashes_are_absolute_only(workspace: Path) -> None:
    guard = load(workspace, 'deny: ["Edit(//config/**)"]\n')
    assert edit(guard, "/config/app.yml") == "deny"
    assert edit(guard, workspace / "proj/config/app.yml") == "allow"


def test_an_allow_from_one_slash_covers_only_the_absolute_path(workspace: Path) -> None:
    """Allowing both readings would allow more than either meant."""
    guard = load(workspace, 'default: deny\nallow: ["Read(/config/**)"]\n')
    assert read(guard, "/config/app.yml") == "allow"
    assert read(guard, workspace / "proj/config/app.yml") == "deny"


def test_an_inherited_policy_uses_the_same_workspace(workspace: Path) -> None:
    (workspace / "proj" / "base.yaml").write_text('version: 1\ndeny: ["Read(~/.ssh/**)"]\n')
    guard = load(workspace, "extends: [base.yaml]\n")
    assert read(guard, workspace / "home/.ssh/id_rsa") == "deny"
