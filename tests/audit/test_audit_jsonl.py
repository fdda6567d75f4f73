"""The JSONL sink: whole lines under kill -9, rotation without loss, threads; other sinks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from _audit_support import read_jsonl

from callwarden import Guard
from callwarden.audit import Auditor, JsonlSink, decision_event, rotated_files
from callwarden.audit import _sinks as sinks_module

SRC = Path(__file__).resolve().parents[2] / "src"

CHILD = textwrap.dedent("""
    import sys
    from callwarden import Guard
    from callwarden.audit import Auditor, JsonlSink

    guard = Guard.from_dict({"version": 1, "rules": [
        {"id": "no-rm", "match": {"tool": "bash"}, "args": {"command": "rm -rf /"},
         "effect": "deny"}]})
    # required: the decision event is on disk before the tool runs, as the guard does it
    auditor = Auditor([JsonlSink(sys.argv[1])], required=True, deadline=5.0)
    i = 0
    while True:
        decision = guard.check("bash", {"command": f"echo {i}", "pad": "x" * (i % 3000)},
                               call_id=f"call-{i}")
        auditor.decision(decision)
        print(f"call-{i}", flush=True)  # the tool "executed"
        i += 1
""")


def test_kill_9_during_a_burst_leaves_whole_lines_and_every_executed_call(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    with subprocess.Popen([sys.executable, "-c", CHILD, str(log)], stdout=subprocess.PIPE,
                          env=env, text=True) as child:
        assert child.stdout is not None
        executed = []
        for line in child.stdout:
            executed.append(line.strip())
            if len(executed) >= 300:
                break
        child.send_signal(signal.SIGKILL)
        executed += [line.strip() for line in child.stdout if line.endswith("\n")]
        child.wait()
    raw = log.read_bytes()
    assert raw.endswith(b"\n")
    events = [json.loads(line) for line in raw.splitlines()]  # no torn line: every one parses
    recorded = {e["call_id"] for e in events}
    assert set(executed) <= recorded
    assert len(executed) >= 300


def test_size_rotation_keeps_every_event(tmp_path: Path, guard: Guard) -> None:
    log = tmp_path / "audit.jsonl"
    sink = JsonlSink(log, rotate_bytes=4096)
    ids = []
    for i in range(200):
        event = decision_event(guard.check("bash", {"command": f"echo {i}"}))
        sink.write(event)
        ids.append(event["event_id"])
    sink.close()
    pieces = rotated_files(log)
    assert len(pieces) > 5
    assert all(p.stat().st_size <= 4096 for p in pieces)
    assert [e["event_id"] for p in pieces for e in read_jsonl(p)] == ids


def test_time_rotation_starts_a_new_file_each_interval(tmp_path: Path, guard: Guard,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1_700_000_000.0]
    monkeypatch.setattr(sinks_module.time, "time", lambda: now[0])
    log = tmp_path / "audit.jsonl"
    sink = JsonlSink(log, rotate_interval=3600)
    for _hour in range(3):
        for _ in range(4):
            sink.write(decision_event(guard.check("bash", {"command": "ls"})))
        now[0] += 3600
    sink.close()
    pieces = rotated_files(log)
    assert [len(read_jsonl(p)) for p in pieces] == [4, 4, 4]


def test_concurrent_writers_never_interleave_lines(tmp_path: Path, guard: Guard) -> None:
    log = tmp_path / "audit.jsonl"
    sinks = [JsonlSink(log) for _ in range(4)]  # four descriptors, like four processes
    event = decision_event(guard.check("write", {"text": "z" * 20_000}))

    def burst(sink: JsonlSink) -> None:
        for _ in range(100):
            sink.write(event)

    threads = [threading.Thread(target=burst, args=(s,)) for s in sinks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(read_jsonl(log)) == 400


def test_fsync_option_writes_the_same_lines(tmp_path: Path, guard: Guard) -> None:
    with Auditor([JsonlSink(tmp_path / "a.jsonl", fsync=True)]) as auditor:
        auditor.decision(guard.check("bash", {"command": "ls"}))
    assert read_jsonl(tmp_path / "a.jsonl")[0]["tool"] == "bash"


def test_jsonl_sink_creates_the_directory_with_private_permissions(tmp_path: Path,
                                                                   guard: Guard) -> None:
    log = tmp_path / "deep" / "er" / "audit.jsonl"
    JsonlSink(log).write(decision_event(guard.check("bash", {"command": "ls"})))
    assert log.stat().st_mode & 0o077 == 0
