"""``callwarden hook``'s warm worker: real hook processes, a real worker process, real sockets.

The first call of a policy decides in its own process and starts the worker; later calls are
answered by it, exactly as they would be decided without it; an edited policy is recompiled; a
reply not sealed with the worker's key, or none at all, leaves the call to the hook process.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _hook_support import CLI, POLICY

from callwarden.hooks._client import _parse, worker_place

# Records which process decided each call: a hook process, or the worker.
PROBE = """
import os
def record(call):
    with open(os.environ["PROBE_LOG"], "a") as f:
        f.write(f"{os.getpid()} {call.tool}\\n")
    return None
"""


def payload(tool: str, tool_input: dict[str, object], cwd: str = "/tmp") -> str:
    return json.dumps({"hook_event_name": "PreToolUse", "tool_name": tool,
                       "tool_input": tool_input, "session_id": "s1", "cwd": cwd})


class Hooks:
    """Runs ``callwarden hook claude-code`` processes with one private cache folder."""

    def __init__(self, root: Path, policy: Path, **env: str) -> None:
        self.root = root
        self.policy = policy
        self.log = root / "probe.log"
        self.env = {"PATH": "/usr/bin:/bin", "HOME": str(root), "PYTHONPATH": os.pathsep.join(
                        p for p in sys.path if p),
                    "XDG_CACHE_HOME": str(root / "cache"), "PROBE_LOG": str(self.log),
                    "CALLWARDEN_APPROVALS_KEY_FILE": str(root / "approvals.key"),
                    "CALLWARDEN_HOOK_WORKER_IDLE": "30", **env}

    def run(self, stdin: str | bytes, **env: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([str(CLI), "hook", "claude-code", "--policy", str(self.policy)],
                              input=stdin.encode() if isinstance(stdin, str) else stdin,
                              capture_output=True, timeout=60, env={**self.env, **env},
                              cwd=self.root, check=False)
        return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(),
                                           done.stderr.decode())

    def place(self) -> object:
        old = dict(os.environ)
        try:
            os.environ.clear()
            os.environ.update(self.env)
            return worker_place(str(self.policy))
        finally:
            os.environ.clear()
            os.environ.update(old)

    def socket_path(self) -> Path:
        place = self.place()
        assert place is not None
        return Path(place.socket)  # type: ignore[attr-defined]

    def wait_for_worker(self) -> int:
        """The pid of the worker once it listens."""
        path = self.socket_path()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if path.exists():
                with socket.socket(socket.AF_UNIX) as s:
                    try:
                        s.connect(str(path))
                    except OSError:
                        pass
                    else:
                        creds = s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
                        return int.from_bytes(creds[:4], sys.byteorder)
            time.sleep(0.05)
        raise AssertionError("the worker did not start")

    def deciders(self) -> list[int]:
        return [int(line.split()[0]) for line in self.log.read_text().splitlines()]


@pytest.fixture
def hooks(tmp_path: Path) -> Iterator[Hooks]:
    (tmp_path / "probe.py").write_text(PROBE)
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY + "  - {id: probe, use: 'probe.py:record'}\n")
    made = Hooks(tmp_path, policy)
    yield made
    for pid in _workers(made):
        os.kill(pid, signal.SIGTERM)


def _workers(hooks: Hooks) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"callwarden.hooks._worker" in cmd and str(hooks.policy).encode() in cmd:
                found.append(int(entry.name))
    return found


def _session(name: str, stdin: str | bytes) -> tuple[Any, Any]:
    return ('"s1"', f'"{name}"') if isinstance(stdin, str) else (b'"s1"', f'"{name}"'.encode())


CALLS: list[tuple[str, str | bytes]] = [
    ("allow", payload("read_notes", {"q": "x"})),
    ("deny", payload("delete_file", {"path": "a.txt"})),
    ("modify", payload("upload", {"file": "a", "token": "t0p"})),
    ("ask", payload("deploy", {"env": "prod"})),
    ("halt", payload("wipe", {"disk": "sda"})),
    ("not json", "{oops"),
    ("not utf-8", b'{"hook_event_name": "PreToolUse", "tool_name": "Bash", "session_id": "s1", '
                  b'"tool_input": {"command": "rm -rf \xff"}}'),
    ("other event", json.dumps({"hook_event_name": "Stop"})),
]


def test_the_worker_answers_later_calls_as_the_hook_process_would(hooks: Hooks) -> None:
    first = hooks.run(CALLS[0][1])
    assert first.returncode == 0, first.stderr
    worker = hooks.wait_for_worker()
    for name, stdin in CALLS:
        # Each in a session of its own: a halt is remembered for the rest of its session.
        warm = hooks.run(stdin.replace(*_session("warm", stdin)))
        alone = hooks.run(stdin.replace(*_session("alone", stdin)), CALLWARDEN_HOOK_WORKER="0")
        assert (warm.stdout, warm.stderr, warm.returncode) == \
               (alone.stdout, alone.stderr, alone.returncode), name
    deny = json.loads(hooks.run(CALLS[1][1]).stdout)["hookSpecificOutput"]
    assert deny["permissionDecision"] == "deny"
    assert "move them to trash" in deny["permissionDecisionReason"]
    deciders = hooks.deciders()
    # The first call decided in its own process; with the worker on, the worker decided.
    assert deciders[0] != worker
    assert deciders[1] == worker and deciders[2] != worker  # warm, then alone
    assert _workers(hooks) == [worker]  # one worker however many calls


def test_an_edited_policy_is_recompiled(hooks: Hooks) -> None:
    call = CALLS[1][1]
    hooks.run(call)
    hooks.wait_for_worker()
    assert json.loads(hooks.run(call).stdout)["hookSpecificOutput"][
        "permissionDecision"] == "deny"
    hooks.policy.write_text(POLICY.replace("effect: deny", "effect: allow") +
                            "  - {id: probe, use: 'probe.py:record'}\n")
    assert hooks.run(call).stdout.strip() == ""  # allowed now
    hooks.policy.write_text("version: 1\nrules: [{id: broken, effect: nope}]\n")
    broken = hooks.run(call)
    assert broken.returncode == 2 and "effect" in broken.stderr  # fails closed, says why


def test_workers_off_decides_alone_and_starts_none(hooks: Hooks) -> None:
    for _ in range(2):
        assert hooks.run(CALLS[1][1], CALLWARDEN_HOOK_WORKER="0").returncode == 0
    time.sleep(0.5)
    assert not hooks.socket_path().exists() and _workers(hooks) == []
    assert len(set(hooks.deciders())) == 2  # each call in a process of its own


def test_the_installed_command_reaches_the_worker_on_the_short_path(hooks: Hooks) -> None:
    """The ``callwarden`` an installer puts on PATH is the project's own script: an entry
    point's launcher imports ``re`` (and ``python -m`` imports ``runpy``) before the hook's
    warm path can start, which every tool call of a coding agent would pay."""
    assert hooks.run(CALLS[1][1]).returncode == 0
    worker = hooks.wait_for_worker()
    done = subprocess.run([sys.executable, "-X", "importtime", str(CLI), "hook", "claude-code",
                           "--policy", str(hooks.policy)], input=CALLS[1][1], text=True,
                          capture_output=True, timeout=60, env=hooks.env, cwd=hooks.root,
                          check=False)
    assert done.returncode == 0
    assert json.loads(done.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert hooks.deciders()[-1] == worker
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()
                if line.startswith("import time:")}
    assert "callwarden.hooks._client" in imported
    assert not imported & {"re", "runpy", "typing", "enum", "callwarden.engine"}


def test_an_idle_worker_exits_and_removes_its_socket(hooks: Hooks) -> None:
    hooks.env["CALLWARDEN_HOOK_WORKER_IDLE"] = "1"
    hooks.run(CALLS[0][1])
    pid = hooks.wait_for_worker()
    deadline = time.monotonic() + 30
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid)
    assert not hooks.socket_path().exists()


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return status != "Z"


FORGER = """
import json, os, socket, sys
path = sys.argv[1]
if os.path.exists(path):
    os.unlink(path)
s = socket.socket(socket.AF_UNIX)
s.bind(path)
s.listen(8)
print("ready", flush=True)
held = []
while True:
    conn, _ = s.accept()
    while conn.recv(65536):
        pass
    if sys.argv[2] == "forge":  # an "allow" it cannot seal: it does not hold the key
        body = json.dumps({"stdout": "", "stderr": "", "exit": 0}).encode()
        conn.sendall(b"0" * 64 + b"\\n" + body)
        conn.close()
    else:  # "hang": keep the connection open and never answer
        held.append(conn)
"""


@pytest.mark.parametrize("mode", ["forge", "hang"])
def test_an_unsealed_or_missing_answer_leaves_the_call_to_the_hook(hooks: Hooks,
                                                                    mode: str) -> None:
    (hooks.root / "forger.py").write_text(FORGER)
    place = hooks.socket_path()
    place.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    forger = subprocess.Popen([sys.executable, str(hooks.root / "forger.py"), str(place), mode],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert forger.stdout is not None and forger.stdout.readline().strip() == "ready"
        done = hooks.run(CALLS[1][1], CALLWARDEN_HOOK_WORKER_TIMEOUT="1")
        out = json.loads(done.stdout)["hookSpecificOutput"]
        assert out["permissionDecision"] == "deny"  # decided by the hook process itself
        assert len(hooks.deciders()) == 1
        if mode == "hang":
            assert forger.wait(timeout=30) == -signal.SIGKILL  # a stuck worker is stopped
    finally:
        forger.kill()
        forger.wait()
        forger.stdout.close()  # type: ignore[union-attr]


def test_the_worker_folder_is_private(hooks: Hooks) -> None:
    hooks.run(CALLS[0][1])
    hooks.wait_for_worker()
    for folder in {hooks.socket_path().parent, Path(hooks.place().folder)}:  # type: ignore[attr-defined]
        assert folder.stat().st_mode & 0o777 == 0o700
        assert folder.stat().st_uid == os.getuid()
        mine = [p for p in folder.iterdir() if p.name.startswith(hooks.place().name)]  # type: ignore[attr-defined]
        assert mine and all(p.stat().st_mode & 0o077 == 0 for p in mine)


@pytest.mark.parametrize(("argv", "parsed"), [
    (["claude-code", "--policy", "p.yaml"], ("claude-code", "p.yaml")),
    (["-p", "p.yaml", "codex"], ("codex", "p.yaml")),
    (["gemini-cli", "--policy=p.yaml"], ("gemini-cli", "p.yaml")),
    (["claude-code"], ("claude-code", None)),
    (["claude-code", "--help"], None),
    (["nobody", "-p", "p.yaml"], None),
    (["claude-code", "-p"], None),
    ([], None),
])
def test_the_short_path_takes_only_what_it_understands(argv: list[str],
                                                        parsed: object) -> None:
    """Anything else goes to the full command line (usage errors, --help)."""
    assert _parse(argv) == parsed


def test_help_and_usage_errors_still_reach_the_full_command_line(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "CALLWARDEN_HOOK_WORKER": "1",
           "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    bad = subprocess.run([str(CLI), "hook", "nobody"], input="{}", capture_output=True,
                         text=True, env=env, timeout=60, check=False)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
    none = subprocess.run([str(CLI), "hook", "claude-code"], input=payload("ls", {}),
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    assert none.returncode == 2 and "no policy" in none.stderr


def test_limits_and_the_audit_log_span_the_hook_process_and_the_worker(tmp_path: Path) -> None:
    """A fresh guard per call: the policy's SQLite limits count every call, whichever process
    decided it, and every decision reaches the audit log."""
    (tmp_path / "probe.py").write_text(PROBE)
    policy = tmp_path / "policy.yaml"
    policy.write_text(f"""\
version: 1
state: sqlite:///{tmp_path / 'state.db'}
audit: {{sinks: [{{jsonl: {tmp_path / 'audit.jsonl'}}}]}}
rules:
  - {{id: three-reads, match: {{tool: read_notes}}, limit: {{calls: 3, per: session}}}}
  - {{id: probe, use: 'probe.py:record'}}
""")
    hooks = Hooks(tmp_path, policy)
    try:
        call = CALLS[0][1]
        assert hooks.run(call).stdout.strip() == ""  # 1: decided by the hook process
        worker = hooks.wait_for_worker()
        assert hooks.run(call).stdout.strip() == ""  # 2 and 3: by the worker
        assert hooks.run(call).stdout.strip() == ""
        fourth = json.loads(hooks.run(call).stdout)["hookSpecificOutput"]
        assert fourth["permissionDecision"] == "deny"
        assert hooks.deciders()[1:] == [worker] * 3
        events = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
        decisions = [(e["effect"], e["rule"]) for e in events if e["type"] == "decision"]
        assert decisions == [("allow", "default")] * 3 + [("deny", "three-reads")]
    finally:
        for pid in _workers(hooks):
            os.kill(pid, signal.SIGTERM)


def test_a_hook_whose_working_directory_is_gone_still_fails_closed(hooks: Hooks) -> None:
    """The short path needs the working directory (the worker's request names it); without
    one the call is decided in the hook process, which cannot resolve its paths either and
    blocks it with the reason (exit 2) instead of crashing with an exit code the agent would
    read as "no opinion"."""
    gone = hooks.root / "gone"
    done = subprocess.run(
        ["sh", "-c", f'mkdir "{gone}" && cd "{gone}" && rmdir "{gone}" && exec '
                     f'"{CLI}" hook claude-code --policy "{hooks.policy}"'],
        input=CALLS[1][1], capture_output=True, text=True, timeout=60, env=hooks.env,
        check=False)
    assert done.returncode == 2 and done.stderr.strip().endswith("blocked"), done.stderr


def test_the_worker_compiles_stale_bytecode_in_a_process_of_its_own(tmp_path: Path) -> None:
    """What a hook process imports is compiled once, not in every process (an editable
    install, or PYTHONDONTWRITEBYTECODE, leaves no bytecode behind)."""
    from callwarden.hooks._worker import compile_bytecode, stale_bytecode

    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "a.py").write_text("x = 1\n")
    (package / "sub" / "b.py").write_text("y = 2\n")
    assert sorted(Path(p).name for p in stale_bytecode(str(package))) == ["a.py", "b.py"]
    process = compile_bytecode(str(package))
    assert process is not None and process.wait(timeout=120) == 0
    assert stale_bytecode(str(package)) == [] and compile_bytecode(str(package)) is None
    later = time.time() + 10
    os.utime(package / "a.py", (later, later))  # edited since: stale again
    assert [Path(p).name for p in stale_bytecode(str(package))] == ["a.py"]
