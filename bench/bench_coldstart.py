"""What a coding-agent hook pays per tool call: a new process, the import, the policy, one
decision; and what the first decision in a process costs against a warm one.

Run: .venv/bin/python bench/bench_coldstart.py [RUNS]   (default 20 runs of each, interleaved)

Prints medians (ms) of:
  - a bare interpreter (``python -c pass``);
  - ``callwarden hook claude-code`` (the installed command a hook configuration runs) with the
    recommended policy, a PreToolUse event on stdin, answered by the policy's warm hook worker
    (what every call after the first one takes);
  - the same as ``python -m callwarden hook claude-code`` (``-m`` imports ``runpy`` first);
  - the same deciding in its own process (``CALLWARDEN_HOOK_WORKER=0``: the first call, or
    workers turned off);
  - callguard 0.3.0's equivalent process: import, five contracts, one guarded call;
and the ratios; then, in one process, the first decision of each of five kinds of call
against the same call made again with other arguments (the warm cost), and their ratio.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 20
PY = sys.executable
EVENT = json.dumps({"hook_event_name": "PreToolUse", "tool_name": "Bash",
                    "tool_input": {"command": "ls -la src && git status"},
                    "session_id": "bench", "cwd": "/tmp"})
CALLGUARD = """
import asyncio
from callguard import CallGuard, OperationLimits, Verdict, precondition
class Sink:
    async def emit(self, event): return None
contracts = []
for key in ("env", "region", "build", "user", "mode"):
    @precondition("deploy")
    def c(envelope, _key=key):
        return Verdict.fail("no") if envelope.args.get(_key) == "prod" else Verdict.pass_()
    contracts.append(c)
guard = CallGuard(contracts=contracts, audit_sink=Sink(), limits=OperationLimits())
async def tool(**kw): return 1
asyncio.run(guard.run("deploy", {"env": "staging"}, tool))
"""
# Not the samples a loading policy warms itself with (callwarden.engine.engine._WARM_CALLS).
FIRST_CALLS = [("Bash", {"command": "ls -la src && git status"}),
               ("Read", {"file_path": "docs/guide.md"}),
               ("WebFetch", {"url": "https://docs.python.org/3/library/"}),
               ("Write", {"file_path": "out/b.txt", "content": "hello"}),
               ("Glob", {"pattern": "tests/**/*.txt"})]
FIRST = """
import json, sys, time
from callwarden import Guard
guard = Guard.from_dict({"version": 1, "extends": "callwarden:recommended"})
out = []
for tool, args in json.loads(sys.argv[1]):
    t0 = time.perf_counter(); guard.check(tool, args); t1 = time.perf_counter()
    guard.check(tool, {k: v + "1" for k, v in args.items()})
    t2 = time.perf_counter(); guard.check(tool, {k: v + "2" for k, v in args.items()})
    t3 = time.perf_counter()
    out.append((tool, (t1 - t0) * 1e6, (t3 - t2) * 1e6))
print(json.dumps(out))
"""


def timed(cmd: list[str], stdin: str | None = None, env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, input=stdin, text=True, capture_output=True, check=False, env=env)
    return (time.perf_counter() - t0) * 1000


def wait_for_worker(policy: str) -> int:
    """The pid of the policy's hook worker (started by the first hook call) once it listens."""
    from callwarden.hooks._client import worker_place

    place = worker_place(policy)
    assert place is not None, "no private folder for the worker"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with socket.socket(socket.AF_UNIX) as s:
            try:
                s.connect(place.socket)
            except OSError:
                time.sleep(0.05)
                continue
            creds = s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
            return int.from_bytes(creds[:4], sys.byteorder)
    raise SystemExit("the hook worker did not start")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        policy = Path(tmp) / "policy.yaml"
        policy.write_text("version: 1\nextends: callwarden:recommended\n")
        os.environ["XDG_CACHE_HOME"] = str(Path(tmp) / "cache")  # this run's own worker
        os.environ.pop("CALLWARDEN_HOOK_WORKER", None)
        args = ["hook", "claude-code", "--policy", str(policy)]
        hook = [str(Path(PY).with_name("callwarden")), *args]
        hook_m = [PY, "-m", "callwarden", *args]
        probe = subprocess.run(hook, input=EVENT, text=True, capture_output=True, check=False)
        worker = wait_for_worker(str(policy))
        alone = {**os.environ, "CALLWARDEN_HOOK_WORKER": "0"}
        try:
            import callguard  # noqa: F401
            has_callguard = True
        except ImportError:
            has_callguard = False
        rows = ["bare python -c pass", "callwarden hook", "python -m callwarden hook",
                "hook, own process"]
        times: dict[str, list[float]] = {row: [] for row in rows}
        if has_callguard:
            times["callguard process"] = []
        try:
            for _ in range(RUNS):  # interleaved: drift on a busy machine hits every row alike
                times["bare python -c pass"].append(timed([PY, "-c", "pass"]))
                times["callwarden hook"].append(timed(hook, EVENT))
                times["python -m callwarden hook"].append(timed(hook_m, EVENT))
                times["hook, own process"].append(timed(hook, EVENT, alone))
                if has_callguard:
                    times["callguard process"].append(timed([PY, "-c", CALLGUARD]))
        finally:
            os.kill(worker, signal.SIGTERM)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"medians of {RUNS} runs (ms); hook exit {probe.returncode}")
    for name, value in med.items():
        print(f"  {name:26} {value:8.1f}")
    bare = med["bare python -c pass"]
    for row in ("callwarden hook", "python -m callwarden hook", "hook, own process"):
        line = f"  {row:26} / bare interpreter {med[row] / bare:6.1f}x"
        if has_callguard:
            line += f"   / callguard process {med[row] / med['callguard process']:5.2f}x"
        print(line)
    runs = [json.loads(subprocess.run([PY, "-c", FIRST, json.dumps(FIRST_CALLS)], text=True,
                                      capture_output=True, check=True).stdout)
            for _ in range(5)]
    print("first decision in a new process vs warm (µs, median of 5 processes)")
    for i, (tool, _) in enumerate(FIRST_CALLS):
        first = statistics.median(r[i][1] for r in runs)
        warm = statistics.median(r[i][2] for r in runs)
        print(f"  {tool:9} first {first:9.1f}  warm {warm:8.1f}  {first / warm:6.1f}x")


if __name__ == "__main__":
    main()
