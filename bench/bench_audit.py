"""Cost of auditing decisions with the JSONL sink, against deciding with no audit at all.

Run: .venv/bin/python bench/bench_audit.py [N]

With the 12-rule realistic policy and calls whose argument values vary (so that no cache
hides the redaction cost), prints the median of 5 runs for:
  - the decision alone (no auditor);
  - caller cost: check + auditor.decision() as the calling thread sees it (the event is
    queued; building, redaction and the write happen on the writer thread);
  - sustained cost: the same, timed until every event is on disk (flush) — what a process
    deciding flat out pays in total, GIL included — with default redaction and with
    ``Redactor.off()``;
  - required (fail-closed) mode: check + a synchronous, confirmed write;
  - a paced agent: the median time inside check + audit when each call is followed by a
    200 µs tool (the writer thread works in the gap), against the same without audit;
  - the writer's own work per event: decision_lines() over batches of 256 +
    JsonlSink.write_lines(), with and without redaction (the auditor's path when every sink
    takes lines), and the older per-event decision_event() + JsonlSink.write() path.
"""

from __future__ import annotations

import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from callwarden import Guard
from callwarden.audit import Auditor, JsonlSink, Redactor, decision_event, decision_lines

HERE = Path(__file__).parent
N = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
RUNS = 5


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


def main() -> None:
    guard = Guard.from_file(HERE / "policies" / "realistic.yaml")
    calls = varied_calls(N)
    check = guard.check
    results: dict[str, float] = {}

    # Decision-only and audited runs are interleaved, and each run's sink cost is its audited
    # time minus the decision-only time measured just before it: this machine's speed drifts
    # between runs, and a cost taken against a baseline from another moment drifts with it.
    base_runs: list[float] = []
    costs: dict[str, list[float]] = {"redaction on": [], "redaction off": []}
    timings: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in costs}

    per_call_us(check, calls)  # warm-up: the first pass fills the engine's caches
    with tempfile.TemporaryDirectory() as tmp:
        # Run 0 is a warm-up too, not counted: the process grows its memory arenas to hold
        # the events queued between two writer batches once, as a long-running agent does.
        for run in range(RUNS + 1):
            if run:
                base_runs.append(per_call_us(check, calls))
            for label, redactor in (("redaction on", None), ("redaction off", Redactor.off())):
                log = Path(tmp) / f"{label.split()[1]}-{run}.jsonl"
                auditor = Auditor([JsonlSink(log)], redactor=redactor, queue_size=N + 10)

                def audited(tool: str, args: dict[str, Any], auditor: Auditor = auditor) -> None:
                    auditor.decision(check(tool, args))

                gc.disable()
                t0 = time.perf_counter()
                for tool, args in calls:
                    audited(tool, args)
                t1 = time.perf_counter()
                auditor.flush(timeout=600)
                t2 = time.perf_counter()
                gc.enable()
                stats = auditor.stats()
                auditor.close()
                assert stats["dropped"] == 0 and stats["written"] == N, stats
                assert sum(1 for _ in log.open()) == N
                if not run:
                    continue
                timings[label][0].append((t1 - t0) / N * 1e6)
                timings[label][1].append((t2 - t0) / N * 1e6)
                costs[label].append((t2 - t0) / N * 1e6 - base_runs[-1])
        results["decision only (no audit)"] = median(base_runs)
        for label, (caller, sustained) in timings.items():
            results[f"check + audit, caller's view ({label})"] = median(caller)
            results[f"check + audit, sustained to disk ({label})"] = median(sustained)

        # An agent between two decisions waits on its tool or its model: the writer thread
        # works in that gap. Here each call is followed by a 200 µs wait (a fast tool), and
        # only the time inside check + auditor.decision() is counted.
        paced_n = min(N, 2000)
        for label, audit_on in (("no audit", False), ("audit, redaction on", True)):
            samples = []
            for run in range(RUNS):
                auditor = Auditor([JsonlSink(Path(tmp) / f"paced-{audit_on}-{run}.jsonl")],
                                  queue_size=N + 10) if audit_on else None
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

        required = []
        for run in range(RUNS):
            auditor = Auditor([JsonlSink(Path(tmp) / f"req-{run}.jsonl")], required=True,
                              deadline=1.0)
            required.append(per_call_us(lambda t, a, au=auditor: au.decision(check(t, a)),
                                        calls[: N // 4]))
            auditor.close()
        results["check + audit, required mode (redaction on)"] = median(required)

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

    width = max(len(k) for k in results)
    print(f"{N} decisions per run, median of {RUNS} runs, µs per decision")
    for k, v in results.items():
        print(f"  {k:<{width}}  {v:8.2f}")
    base = results["decision only (no audit)"]
    for label in ("redaction on", "redaction off"):
        sink_cost = statistics.median(costs[label])
        print(f"  JSONL sink cost, sustained ({label}), median of per-run costs: "
              f"{sink_cost:.2f} µs = {sink_cost / base:.2f}x the decision (per run: "
              f"{', '.join(f'{c / b:.2f}x' for c, b in zip(costs[label], base_runs, strict=True))})")
    paced = (results["paced agent (200 µs tool between calls), audit, redaction on"]
             - results["paced agent (200 µs tool between calls), no audit"])
    print(f"  JSONL sink cost on a paced agent's call path (median): {paced:.2f} µs = "
          f"{paced / results['paced agent (200 µs tool between calls), no audit']:.2f}x the "
          "decision")
    print(f"  decisions per second: no audit {1e6 / base:,.0f}; audited (sustained, redaction "
          f"on) {1e6 / results['check + audit, sustained to disk (redaction on)']:,.0f}; "
          f"redaction off {1e6 / results['check + audit, sustained to disk (redaction off)']:,.0f}")


if __name__ == "__main__":
    main()
