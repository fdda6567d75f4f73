"""Replay and summary throughput on a generated audit log.

Run: .venv/bin/python bench/bench_replay.py [EVENTS]   (default 200,000 decision events)

Records EVENTS decisions of the 12-rule realistic policy (varied arguments, six tools, 50
sessions) to a JSONL file, then prints the median of 3 runs, in events per second, of:
  - replay with the unchanged policy (0 changes expected),
  - replay with a tightened policy (every staging deploy flips to deny),
  - ``audit summary``;
and the peak resident memory, which stays flat whatever the log's size (streaming).
"""

from __future__ import annotations

import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from callwarden import Guard
from callwarden.audit import JsonlSink, Redactor, decision_event
from callwarden.review import replay, summarize

HERE = Path(__file__).parent
N = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
sys.path.insert(0, str(HERE))
from bench_audit import varied_calls  # noqa: E402


def main() -> None:
    policy = HERE / "policies" / "realistic.yaml"
    with tempfile.TemporaryDirectory() as tmp:
        tight = Path(tmp) / "tight.yaml"
        tight.write_text(policy.read_text().replace("args: {env: prod}",
                                                    "args: {env: [prod, staging]}"))
        log = Path(tmp) / "audit.jsonl"
        guard = Guard.from_file(policy)
        sink, redactor = JsonlSink(log), Redactor()
        calls = varied_calls(6000)
        t0 = time.perf_counter()
        for i in range(N):
            tool, args = calls[i % len(calls)]
            sink.write(decision_event(guard.check(tool, args, session=f"s{i % 50}"), redactor))
        sink.close()
        size = log.stat().st_size
        print(f"generated {N:,} events ({size / 1e6:.0f} MB) in {time.perf_counter() - t0:.1f} s")

        results: dict[str, float] = {}
        for label, target in (("replay, unchanged policy", policy),
                              ("replay, tightened policy", tight)):
            rates = []
            for _ in range(3):
                t0 = time.perf_counter()
                report = replay(target, log)
                rates.append(N / (time.perf_counter() - t0))
            results[label] = statistics.median(rates)
            print(f"  {label}: {report.changed:,} changed {dict(report.transitions)}")
        rates = []
        for _ in range(3):
            t0 = time.perf_counter()
            summary = summarize(log)
            rates.append(N / (time.perf_counter() - t0))
        results["audit summary"] = statistics.median(rates)
        assert summary.decisions == N
        for label, rate in results.items():
            print(f"  {label:<28} {rate:>10,.0f} events/s")
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"  peak RSS of this process: {peak:.0f} MB (log: {size / 1e6:.0f} MB)")


if __name__ == "__main__":
    main()
