"""Cost of auditing decisions with the JSONL sink, and what each delivery mode guarantees.

Run: .venv/bin/python bench/bench_audit.py [N] [--only-guarantees]

With the 12-rule realistic policy and calls whose argument values vary (so that no cache
hides the redaction cost), prints the median of 5 runs for:
  - the decision alone (no auditor);
  - the default (``delivery: written``): check + auditor.decision(), which returns once the
    event is in the file (the caller appends it itself, one os.write), with default
    redaction and with ``Redactor.off()``;
  - lossy delivery (the caller only queues): the caller's view and sustained until every
    event is on disk (flush);
  - required (fail-closed) mode;
  - a paced agent: the median time inside check + audit when each call is followed by a
    200 µs tool, for no audit, the default and lossy delivery;
  - the writer's own work per event: decision_lines() over batches of 256 +
    JsonlSink.write_lines(), with and without redaction, and the per-event
    decision_event() + JsonlSink.write() path.
Then the guarantees, through a Guard, for each delivery mode:
  - flat out: 4 threads deciding as fast as they can for 3 s; calls that ran (allowed)
    against decision events in the log, decisions per second, calls refused;
  - kill -9 while paced: a process deciding calls 200 µs apart is killed with SIGKILL after
    ~2 s; calls that ran against decision events in the log.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from callwarden import Guard
from callwarden.audit import Auditor, JsonlSink, Redactor, decision_event, decision_lines
from callwarden.policyfile import load_policy_file

HERE = Path(__file__).parent
_NUMBERS = [a for a in sys.argv[1:] if a.isdigit()]
N = int(_NUMBERS[0]) if _NUMBERS and __name__ == "__main__" else 20_000
RUNS = 5
DELIVERIES = ("written", "queued", "lossy")
WRITTEN = "check + audit, default, written (redaction on), written when check returns"
LOSSY = "check + audit, lossy (redaction on), sustained to disk"


def varied_calls(n: int) -> list[tuple[str, dict[str, Any]]]:
    calls = []
    for i in range(n):
        calls.append([
            ("read_file", {"path": f"src/module_{i}.py"}),
            ("bash", {"command": f"ls -la build/{i} && grep -rn TODO src/part{i}"}),
            ("deploy", {"env": "staging", "build": f"b-{i}"}),
            ("fetch", {"url": f"https://api.github.com/repos/acme/app/issues/{i}",
                       "headers": {"Accept": "application/json"}}),
            ("write_file", {"path": f"notes/{i}.md", "content": f"Meeting notes {i}: ship it."}),
            ("mcp__github__list_issues", {"repo": "acme/app", "page": i}),
        ][i % 6])
    return calls


def per_call_us(fn: Any, calls: list[tuple[str, dict[str, Any]]]) -> float:
    gc.disable()
    try:
        t0 = time.perf_counter()
        for tool, args in calls:
            fn(tool, args)
        return (time.perf_counter() - t0) / len(calls) * 1e6
    finally:
        gc.enable()


def median(samples: list[float]) -> float:
    return round(statistics.median(samples), 2)


def _audited_run(check: Any, calls: list[tuple[str, dict[str, Any]]], log: Path,
                 **options: Any) -> tuple[float, float, dict[str, Any]]:
    """(caller's µs per call, µs per call until every event is in the file, stats)."""
    auditor = Auditor([JsonlSink(log)], queue_size=len(calls) + 10, **options)
    decide = auditor.decision
    gc.disable()
    t0 = time.perf_counter()
    for tool, args in calls:
        decide(check(tool, args))
    t1 = time.perf_counter()
    auditor.flush(timeout=600)
    t2 = time.perf_counter()
    gc.enable()
    stats = auditor.stats()
    auditor.close()
    assert stats["dropped"] == 0 and stats["written"] == len(calls), stats
    assert sum(1 for _ in log.open()) == len(calls)
    n = len(calls)
    return (t1 - t0) / n * 1e6, (t2 - t0) / n * 1e6, stats


def costs(results: dict[str, float], tmp: str) -> None:
    guard = Guard.from_file(HERE / "policies" / "realistic.yaml")
    calls = varied_calls(N)
    check = guard.check

    # Decision-only and audited runs are interleaved, and each run's sink cost is its audited
    # time minus the decision-only time measured just before it: this machine's speed drifts
    # between runs, and a cost taken against a baseline from another moment drifts with it.
    base_runs: list[float] = []
    variants = {
        "default, written (redaction on)": {},
        "default, written (redaction off)": {"redactor": Redactor.off()},
        "lossy (redaction on)": {"delivery": "lossy"},
        "lossy (redaction off)": {"delivery": "lossy", "redactor": Redactor.off()},
    }
    timings: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in variants}
    extra: dict[str, list[float]] = {k: [] for k in variants}

    per_call_us(check, calls)  # warm-up: the first pass fills the engine's caches
    # Run 0 is a warm-up too, not counted: the process grows its memory arenas to hold the
    # events queued between two writer batches once, as a long-running agent does.
    for run in range(RUNS + 1):
        if run:
            base_runs.append(per_call_us(check, calls))
        for label, options in variants.items():
            log = Path(tmp) / f"{label.split()[0]}-{label[-4:-1]}-{run}.jsonl"
            caller, sustained, _ = _audited_run(check, calls, log, **options)
            if run:
                timings[label][0].append(caller)
                timings[label][1].append(sustained)
                extra[label].append(sustained - base_runs[-1])
    results["decision only (no audit)"] = median(base_runs)
    for label, (caller, sustained) in timings.items():
        if label.startswith("default"):
            results[f"check + audit, {label}, written when check returns"] = median(sustained)
        else:
            results[f"check + audit, {label}, caller's view"] = median(caller)
            results[f"check + audit, {label}, sustained to disk"] = median(sustained)
    for label in variants:
        cost = statistics.median(extra[label])
        print(f"  audit cost, {label}, median of per-run costs: {cost:.2f} µs = "
              f"{cost / results['decision only (no audit)']:.2f}x the decision")

    required = []
    for run in range(RUNS):
        auditor = Auditor([JsonlSink(Path(tmp) / f"req-{run}.jsonl")], required=True,
                          deadline=1.0)
        required.append(per_call_us(lambda t, a, au=auditor: au.decision(check(t, a)),
                                    calls[: N // 4]))
        auditor.close()
    results["check + audit, required mode (redaction on)"] = median(required)

    # An agent between two decisions waits on its tool or its model. Here each call is
    # followed by a 200 µs wait (a fast tool), and only the time inside check + audit counts.
    paced_n = min(N, 2000)
    for label, options in (("no audit", None), ("default, written", {}),
                           ("lossy", {"delivery": "lossy"})):
        samples = []
        for run in range(RUNS):
            auditor = None if options is None else Auditor(
                [JsonlSink(Path(tmp) / f"paced-{label[:5]}-{run}.jsonl")], queue_size=N + 10,
                **options)
            spent = []
            for tool, args in calls[:paced_n]:
                t0 = time.perf_counter()
                decision = check(tool, args)
                if auditor is not None:
                    auditor.decision(decision)
                spent.append(time.perf_counter() - t0)
                time.sleep(200e-6)
            if auditor is not None:
                auditor.close()
            samples.append(statistics.median(spent) * 1e6)
        results[f"paced agent (200 µs tool between calls), {label}"] = median(samples)

    decisions = [check(tool, args) for tool, args in calls]
    batches = [decisions[i:i + 256] for i in range(0, N, 256)]
    for label in ("redaction on", "redaction off"):
        lines, events = [], []
        for run in range(RUNS):
            # Fresh each run: no scan cache carried over between runs.
            redactor = Redactor() if label.endswith("on") else Redactor.off()
            sink = JsonlSink(Path(tmp) / f"w-{label.split()[1]}-{run}.jsonl")
            gc.disable()
            t0 = time.perf_counter()
            for batch in batches:
                sink.write_lines(decision_lines(batch, redactor))
            t1 = time.perf_counter()
            for d in decisions:
                sink.write(decision_event(d, redactor))
            t2 = time.perf_counter()
            gc.enable()
            sink.close()
            lines.append((t1 - t0) / N * 1e6)
            events.append((t2 - t1) / N * 1e6)
        results[f"writer work per event: decision_lines + write_lines ({label})"] = \
            median(lines)
        results[f"writer work per event: decision_event + write ({label})"] = median(events)


def flat_out(tmp: str, delivery: str, required: bool = False, threads: int = 4,
             seconds: float = 3.0) -> dict[str, Any]:
    """Threads deciding as fast as they can through a Guard: calls that ran vs events."""
    log = Path(tmp) / f"flat-{delivery}-{required}-{threads}.jsonl"
    auditor = Auditor([JsonlSink(log)], delivery=delivery, required=required)
    guard = Guard.from_loaded(load_policy_file(HERE / "policies" / "realistic.yaml"),
                              audit=auditor)
    calls = varied_calls(6000)
    for tool, args in calls:  # warm-up, not audited: the engine's caches fill once
        guard.query(tool, args)
    ran: list[list[str]] = [[] for _ in range(threads)]
    refused = [0] * threads
    stop = threading.Event()

    def work(k: int) -> None:
        i, mine, check = k, ran[k], guard.check
        while not stop.is_set():
            tool, args = calls[i % len(calls)]
            i += threads
            decision = check(tool, args)
            if decision.allowed:
                mine.append(decision.decision_id)  # the tool runs now
            elif decision.code == "audit_failed":
                refused[k] += 1

    workers = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    t0 = time.perf_counter()
    for w in workers:
        w.start()
    time.sleep(seconds)
    stop.set()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - t0
    auditor.close()
    recorded = _decision_ids(log)
    executed = [i for ids in ran for i in ids]
    return {"executed": len(executed), "missing": sum(i not in recorded for i in executed),
            "refused": sum(refused), "per_second": (len(executed) + sum(refused)) / elapsed,
            "dropped": auditor.stats()["dropped"]}


def _decision_ids(log: Path) -> set[str]:
    ids = set()
    with log.open() as f:
        for line in f:
            event = json.loads(line)
            if event.get("type") == "decision":
                ids.add(event["decision_id"])
    return ids


def paced_worker(log: str, executed: str, delivery: str) -> None:
    """Run in a child process: decides calls 200 µs apart and "runs" each allowed one by
    appending its id to ``executed``, until killed."""
    auditor = Auditor([JsonlSink(log)], delivery=delivery)
    guard = Guard.from_loaded(load_policy_file(HERE / "policies" / "realistic.yaml"),
                              audit=auditor)
    fd = os.open(executed, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    calls = varied_calls(6000)
    i = 0
    while True:
        tool, args = calls[i % len(calls)]
        i += 1
        decision = guard.check(tool, args)
        if decision.allowed:
            os.write(fd, f"{decision.decision_id}\n".encode())
        time.sleep(200e-6)


def kill_paced(tmp: str, delivery: str, seconds: float = 2.0) -> dict[str, int]:
    log, executed = Path(tmp) / f"kill-{delivery}.jsonl", Path(tmp) / f"ran-{delivery}.txt"
    child = subprocess.Popen([sys.executable, __file__, "--paced-worker", str(log),
                              str(executed), delivery])
    time.sleep(seconds)
    child.send_signal(signal.SIGKILL)
    child.wait()
    ran = executed.read_text().split() if executed.exists() else []
    recorded = _decision_ids(log) if log.exists() else set()
    return {"executed": len(ran), "missing": sum(i not in recorded for i in ran)}


def guarantees(tmp: str) -> None:
    print("Flat out: 4 threads, 3 s, through Guard.check (calls that ran vs decision events)")
    flat_out(tmp, "written", seconds=1.0)  # warm-up, not counted: the process's first seconds
    for delivery, required in (("written", False), ("written", True), ("queued", False),
                               ("lossy", False)):
        r = flat_out(tmp, delivery, required)
        name = "required" if required else delivery + (" (default)" if delivery == "written"
                                                       else "")
        print(f"  {name:<18} {r['per_second']:>9,.0f} decisions/s; ran {r['executed']:>7,}, "
              f"without their decision event {r['missing']:>6,}; refused {r['refused']:,}; "
              f"dropped (counted, noted in the log) {r['dropped']:,}")
    r = flat_out(tmp, "written", threads=1)
    print(f"  written, 1 thread  {r['per_second']:>9,.0f} decisions/s; ran {r['executed']:>7,}, "
          f"without their decision event {r['missing']:>6,}")
    print("kill -9 while paced (200 µs tool between calls, killed after ~2 s)")
    for delivery in DELIVERIES:
        r = kill_paced(tmp, delivery)
        print(f"  {delivery:<18} ran {r['executed']:>7,}, without their decision event "
              f"{r['missing']:>6,}")


def main() -> None:
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        if "--only-guarantees" not in sys.argv:
            print(f"{N} decisions per run, median of {RUNS} runs, µs per decision")
            costs(results, tmp)
            width = max(len(k) for k in results)
            for k, v in results.items():
                print(f"  {k:<{width}}  {v:8.2f}")
            base = results["decision only (no audit)"]
            print(f"  decisions per second: no audit {1e6 / base:,.0f}; default, written "
                  f"{1e6 / results[WRITTEN]:,.0f}; "
                  f"lossy, sustained {1e6 / results[LOSSY]:,.0f}; "
                  f"required {1e6 / results['check + audit, required mode (redaction on)']:,.0f}")
        guarantees(tmp)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--paced-worker":
        paced_worker(*sys.argv[2:5])
    else:
        main()
