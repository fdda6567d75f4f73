"""What a coding-agent hook pays per tool call: a new process, the import, the policy, one
decision; and what the first decision in a process costs against a warm one.

Run: .venv/bin/python bench/bench_coldstart.py [RUNS]   (default 20 runs of each, interleaved)

Prints medians (ms) of:
  - a bare interpreter (``python -c pass``);
  - ``callwarden hook claude-code`` with the recommended policy, a PreToolUse event on stdin;
  - callguard 0.3.0's equivalent process: import, five contracts, one guarded call;
and the ratios; then, in one process, the first decision of each of five kinds of call
against the same call made again with other arguments (the warm cost), and their ratio.
"""

from __future__ import annotations

import json
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
FIRST_CALLS = [("Bash", {"command": "ls -la src && git status"}),
               ("Read", {"file_path": "src/app.py"}),
               ("WebFetch", {"url": "https://example.com/docs"}),
               ("Write", {"file_path": "notes/a.md", "content": "hello"}),
               ("Glob", {"pattern": "src/**/*.py"})]
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


def timed(cmd: list[str], stdin: str | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, input=stdin, text=True, capture_output=True, check=False)
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        policy = Path(tmp) / "policy.yaml"
        policy.write_text("version: 1\nextends: callwarden:recommended\n")
        hook = [PY, "-m", "callwarden", "hook", "claude-code", "--policy", str(policy)]
        probe = subprocess.run(hook, input=EVENT, text=True, capture_output=True, check=False)
        try:
            import callguard  # noqa: F401
            has_callguard = True
        except ImportError:
            has_callguard = False
        times: dict[str, list[float]] = {"bare python -c pass": [], "callwarden hook": []}
        if has_callguard:
            times["callguard process"] = []
        for _ in range(RUNS):  # interleaved: drift on a busy machine hits every row alike
            times["bare python -c pass"].append(timed([PY, "-c", "pass"]))
            times["callwarden hook"].append(timed(hook, EVENT))
            if has_callguard:
                times["callguard process"].append(timed([PY, "-c", CALLGUARD]))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"medians of {RUNS} runs (ms); hook exit {probe.returncode}")
    for name, value in med.items():
        print(f"  {name:24} {value:8.1f}")
    print(f"  hook / bare interpreter {med['callwarden hook'] / med['bare python -c pass']:6.1f}x")
    if has_callguard:
        print(f"  hook / callguard process {med['callwarden hook'] / med['callguard process']:5.1f}x")
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
