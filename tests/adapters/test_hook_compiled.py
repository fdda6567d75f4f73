"""The regular expressions a hook process compiles, kept on disk for the next one
(``callwarden.hooks._compiled``): used only when they can be trusted, never changing a decision.

Each case runs real child processes, as ``callwarden hook`` runs one per tool call: a child
compiles ``callwarden:recommended`` under ``kept_regexes`` and decides a sample of the shell and
path corpora; it reports how many patterns it built from kept code and how many it compiled.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).parents[1] / "data"

CHILD = r"""
import json, sys
import callwarden.hooks._compiled as compiled
counts = {"kept": 0, "compiled": 0}
inner = compiled._Kept.compile
def counting(self, p, flags=0):  # text patterns (bytes ones are always compiled)
    kept = (p, flags) in self.entries
    compiled_ = inner(self, p, flags)
    if type(p) is str:
        counts["kept" if kept and self.used.get((p, flags)) is self.entries.get((p, flags))
               else "compiled"] += 1
    return compiled_
compiled._Kept.compile = counting
policy, root, calls = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
with compiled.kept_regexes(policy, root):
    from callwarden import Guard
    from callwarden.hooks._base import load_policy
    guard = Guard.from_loaded(load_policy(policy, root))
decisions = [[d.effect.value, d.rule] for d in (guard.check(t, a) for t, a in calls)]
print(json.dumps({"counts": counts, "decisions": decisions}))
"""


def _calls() -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = []
    for name, column, tool, key in (("bash_destructive.tsv", 2, "Bash", "command"),
                                    ("bash_benign.tsv", 2, "Bash", "command"),
                                    ("path_traversal.tsv", 3, "Read", "file_path")):
        rows = [line.split("\t") for line in (DATA / name).read_text().splitlines()
                if line and not line.startswith("#")][1:]
        calls.extend((tool, {key: row[column]}) for row in rows[::7])
    return calls


CALLS = _calls()


class Hooks:
    def __init__(self, tmp_path: Path) -> None:
        self.cache = tmp_path / "cache"
        self.root = tmp_path / "project"
        self.root.mkdir()
        self.policy = tmp_path / "policy.yaml"
        self.policy.write_text("version: 1\nextends: callwarden:recommended\n")
        self.folder = self.cache / "callwarden" / "compiled"

    def run(self, *, cache: bool = True) -> dict[str, Any]:
        env = {**os.environ, "XDG_CACHE_HOME": str(self.cache), "HOME": str(self.root.parent)}
        if not cache:  # no private folder for it: nothing is kept or read
            env["XDG_CACHE_HOME"] = "/proc/no-such-place"
        done = subprocess.run([sys.executable, "-c", CHILD, str(self.policy), str(self.root),
                               json.dumps(CALLS)], capture_output=True, text=True, timeout=300,
                              env=env, cwd=self.root, check=False)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)  # type: ignore[no-any-return]

    def kept_file(self) -> Path:
        [found] = self.folder.glob("*.re")
        return found


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The decisions without anything kept."""
    return Hooks(tmp_path_factory.mktemp("plain")).run(cache=False)


@pytest.fixture
def hooks(tmp_path: Path) -> Hooks:
    return Hooks(tmp_path)


def test_the_next_process_builds_the_patterns_from_kept_code_and_decides_the_same(
        hooks: Hooks, plain: dict[str, Any]) -> None:
    first = hooks.run()
    assert first["counts"]["kept"] == 0 and first["counts"]["compiled"] > 100
    assert oct(hooks.kept_file().stat().st_mode & 0o777) == "0o600"
    assert oct(hooks.folder.stat().st_mode & 0o777) == "0o700"
    second = hooks.run()
    assert second["counts"]["compiled"] == 0
    assert second["counts"]["kept"] == first["counts"]["compiled"]
    assert first["decisions"] == second["decisions"] == plain["decisions"]
    assert {"deny", "allow"} <= {effect for effect, _ in plain["decisions"]}


def _tamper_code(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF  # inside the last pattern's code
    path.write_bytes(bytes(data))


def _reseal(hooks: Hooks, change: Any) -> None:
    """Rewrites the kept file with ``change(header, code)`` applied and a valid seal: what
    someone holding the key could write."""
    from callwarden.hooks import _compiled

    path = hooks.kept_file()
    data = path.read_bytes()[len(_compiled._MAGIC):]
    _, _, rest = data.partition(b"\n")
    size, _, rest = rest.partition(b"\n")
    head, body = json.loads(rest[:int(size)]), bytearray(rest[int(size):])
    change(head, body)
    head_bytes = json.dumps(head, separators=(",", ":")).encode()
    key = (hooks.folder / "key").read_bytes()
    path.write_bytes(b"".join((_compiled._MAGIC, _compiled._seal(key, head_bytes, bytes(body)),
                               b"\n", str(len(head_bytes)).encode(), b"\n", head_bytes, body)))


def _invalid_program(head: dict[str, Any], body: bytearray) -> None:
    body[:] = b"\xff\xff\xff\x7f" * (len(body) // 4)  # no valid opcode anywhere


def _other_python(head: dict[str, Any], body: bytearray) -> None:
    head["build"] = ["2.7.18", 1, 4]


@pytest.mark.parametrize("spoil", ["tampered", "invalid program, sealed", "other python",
                                   "truncated", "readable by others", "a link", "not ours"])
def test_a_kept_file_that_cannot_be_trusted_is_compiled_again(
        hooks: Hooks, plain: dict[str, Any], spoil: str, tmp_path: Path) -> None:
    first = hooks.run()
    path = hooks.kept_file()
    if spoil == "tampered":
        _tamper_code(path)
    elif spoil == "invalid program, sealed":
        _reseal(hooks, _invalid_program)
    elif spoil == "other python":
        _reseal(hooks, _other_python)
    elif spoil == "truncated":
        path.write_bytes(path.read_bytes()[:1000])
    elif spoil == "readable by others":
        path.chmod(0o644)
    elif spoil == "a link":
        elsewhere = tmp_path / "elsewhere.re"
        path.rename(elsewhere)
        path.symlink_to(elsewhere)
    else:
        if os.getuid() != 0:
            pytest.fail("changing a file's owner needs root (the test machine runs as root)")
        os.chown(path, 12345, 12345)
    again = hooks.run()
    assert again["counts"]["kept"] == 0
    assert again["counts"]["compiled"] == first["counts"]["compiled"]
    assert again["decisions"] == plain["decisions"]


def test_a_key_others_can_read_turns_keeping_off(hooks: Hooks, plain: dict[str, Any]) -> None:
    hooks.run()
    (hooks.folder / "key").chmod(0o644)
    before = hooks.kept_file().read_bytes()
    again = hooks.run()
    assert again["counts"]["kept"] == 0 and again["decisions"] == plain["decisions"]
    assert hooks.kept_file().read_bytes() == before  # nothing written under that key


def test_a_folder_of_someone_elses_is_not_used(hooks: Hooks, plain: dict[str, Any]) -> None:
    if os.getuid() != 0:
        pytest.fail("changing a folder's owner needs root (the test machine runs as root)")
    hooks.folder.mkdir(parents=True)
    os.chown(hooks.folder, 12345, 12345)
    done = hooks.run()
    assert done["counts"] == {"kept": 0, "compiled": 0}  # nothing kept, not even counted
    assert done["decisions"] == plain["decisions"]
    assert list(hooks.folder.iterdir()) == []


def test_the_hook_command_keeps_and_reuses_the_policys_patterns(hooks: Hooks) -> None:
    """``callwarden hook`` deciding in its own process (workers off) uses it end to end."""
    cli = Path(sys.executable).with_name("callwarden")
    event = json.dumps({"hook_event_name": "PreToolUse", "tool_name": "Bash",
                        "tool_input": {"command": "rm -rf ~"}, "session_id": "s",
                        "cwd": str(hooks.root)})
    env = {**os.environ, "XDG_CACHE_HOME": str(hooks.cache), "CALLWARDEN_HOOK_WORKER": "0",
           "HOME": str(hooks.root.parent)}
    replies = []
    for _ in range(2):
        done = subprocess.run([str(cli), "hook", "claude-code", "--policy", str(hooks.policy)],
                              input=event, capture_output=True, text=True, timeout=300,
                              env=env, cwd=hooks.root, check=False)
        assert done.returncode == 0, done.stderr
        replies.append(json.loads(done.stdout)["hookSpecificOutput"]["permissionDecision"])
        if len(replies) == 1:
            kept = hooks.kept_file().stat().st_mtime_ns
    assert replies == ["deny", "deny"]
    assert hooks.kept_file().stat().st_mtime_ns == kept  # all found kept: nothing rewritten
