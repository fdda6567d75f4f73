"""The recommended baseline keeps an agent's tools away from callwarden itself: its policy
(for writing), its stores, audit logs and approvals key, and the approvals commands (issue 14,
group 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from callwarden import Effect, Guard
from callwarden.exceptions import PolicyError

POLICY = """\
version: 1
extends: callwarden:recommended
state: sqlite:///state.db
approvals: {state: "sqlite:///approvals.db"}
audit:
  sinks: [{jsonl: logs/audit.jsonl}]
lists:
  contacts: {file: contacts.txt}
"""


@pytest.fixture(params=["plain", "with [brackets] and {braces}"])
def guard(request: pytest.FixtureRequest, tmp_path: Path) -> Guard:
    folder = tmp_path / request.param
    folder.mkdir()
    (folder / "contacts.txt").write_text("alice@example.com\n")
    (folder / "policy.yaml").write_text(POLICY)
    guard = Guard.from_file(folder / "policy.yaml", audit=False)
    guard.folder = folder  # type: ignore[attr-defined]
    return guard


def effect(guard: Guard, tool: str, **args: str) -> Effect:
    return guard.check(tool, args).effect


WRITES = ["policy.yaml", "contacts.txt", "state.db", "state.db-wal", "approvals.db",
          "logs/audit.jsonl", "logs/audit.jsonl.3"]
PRIVATE = ["state.db", "state.db-journal", "approvals.db-shm", "logs/audit.jsonl",
           "logs/audit.jsonl.1"]


@pytest.mark.parametrize("name", WRITES)
def test_an_agent_cannot_change_callwardens_files(guard: Guard, name: str) -> None:
    path = str(guard.folder / name)  # type: ignore[attr-defined]
    assert effect(guard, "Write", file_path=path, content="x") is Effect.DENY
    assert effect(guard, "Bash", command=f"echo x > '{path}'") is Effect.DENY


@pytest.mark.parametrize("name", PRIVATE)
def test_an_agent_cannot_read_callwardens_stores_and_logs(guard: Guard, name: str) -> None:
    path = str(guard.folder / name)  # type: ignore[attr-defined]
    assert effect(guard, "Read", file_path=path) is Effect.DENY
    assert effect(guard, "Bash", command=f"cat '{path}'") is Effect.DENY


def test_the_policy_and_its_lists_may_be_read(guard: Guard) -> None:
    folder = guard.folder  # type: ignore[attr-defined]
    assert effect(guard, "Read", file_path=str(folder / "policy.yaml")) is Effect.ALLOW
    assert effect(guard, "Bash", command=f"cat '{folder / 'contacts.txt'}'") is Effect.ALLOW


@pytest.mark.parametrize("path", ["~/.config/callwarden/approvals.key",
                                  "~/.local/state/callwarden/state.db",
                                  "project/.callwarden/state.db"])
def test_the_key_and_callwardens_folders_are_out_of_reach(guard: Guard, path: str) -> None:
    assert effect(guard, "Read", file_path=path) is Effect.DENY
    assert effect(guard, "Bash", command=f"cat {path}") is Effect.DENY


def test_a_key_file_the_policy_names_is_out_of_reach(tmp_path: Path) -> None:
    key = tmp_path / "keys" / "approver.key"
    (tmp_path / "policy.yaml").write_text(
        f"version: 1\nextends: callwarden:recommended\napprovals: {{key_file: {key}}}\n")
    guard = Guard.from_file(tmp_path / "policy.yaml", audit=False)
    assert guard.check("Bash", {"command": f"cat {key}"}).effect is Effect.DENY


@pytest.mark.parametrize("command", [
    "callwarden approvals approve 1f2e3d --by alice",
    "/opt/venv/bin/callwarden approvals deny 1f2e3d --by alice",
    "python3 -m callwarden approvals approve 1f2e3d --by alice",
    "uvx callwarden approvals approve 1f2e3d",
    "callwarden init --force",
    "sqlite3 ~/.local/state/callwarden/state.db 'update kv set value = 1'",
    "sh -c 'callwarden approvals approve 1f2e3d --by alice'",
])
def test_an_agent_cannot_run_the_approval_commands(guard: Guard, command: str) -> None:
    assert effect(guard, "Bash", command=command) is Effect.DENY


@pytest.mark.parametrize("command", ["callwarden check --policy policy.yaml --tool t",
                                     "sqlite3 app.db .tables", "ls -la", "git status"])
def test_other_commands_still_run(guard: Guard, command: str) -> None:
    assert effect(guard, "Bash", command=command) is Effect.ALLOW


def test_callwarden_files_takes_all_private_or_false(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="callwarden_files"):
        Guard.from_dict({"version": 1, "rules": [
            {"id": "x", "paths": {"callwarden_files": "some"}, "effect": "deny"}]})


def test_callwarden_folders_moved_by_the_environment_are_private(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hook workers' keys live in ``$XDG_CACHE_HOME/callwarden``; wherever that is, an
    agent's file tools can neither read nor write it."""
    cache = tmp_path / "elsewhere" / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    guard = Guard.from_dict({"version": 1, "extends": "callwarden:recommended"},
                            base_dir=tmp_path)
    key = str(cache / "callwarden" / "hooks" / "0123.key")
    assert guard.check("Read", {"file_path": key}).effect is Effect.DENY
    assert guard.check("Write", {"file_path": key, "content": "00"}).effect is Effect.DENY
    assert guard.check("Bash", {"command": f"cat {key}"}).effect is Effect.DENY
    assert guard.check("Read", {"file_path": str(tmp_path / "elsewhere" / "x")}).effect \
        is Effect.ALLOW
