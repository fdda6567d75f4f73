"""Cost per event of a tamper-evident audit log: the plain JSONL sink, the chained one, and
the chained and signed one, measured in one run.

Run: .venv/bin/python bench/bench_audit_chain.py [N]

Each variant writes the same N decision events (built once, redacted, as the auditor hands
them over) to a fresh file, one ``append_line`` per event as the Guard's default delivery does,
then closes the sink (the chained sinks seal there; rotation at 1 MB seals too). Prints, for
each, the median of 7 runs: events per second and microseconds per event, and what the
chain and the signature add over the plain sink; then the cost of one seal (signed and not)
and of verifying the log. Also through a Guard: check + audit per call, for the three sinks.
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
from callwarden.audit import (
    Auditor,
    ChainedJsonlSink,
    JsonlSink,
    Redactor,
    log_files,
    verify_logs,
)
from callwarden.audit._chain import generate_signing_key, load_signing_key
from callwarden.audit._events import decision_lines

_NUMBERS = [a for a in sys.argv[1:] if a.isdigit()]
N = int(_NUMBERS[0]) if _NUMBERS else 20_000
RUNS = 7
ROTATE = 1 << 20


def _lines(n: int) -> list[str]:
    guard = Guard(rules=[{"id": "no-prod", "match": {"tool": "deploy"}, "args": {"env": "prod"}}])
    decisions = [guard.check("bash", {"command": f"ls -la build/{i} && grep -rn TODO src/{i}"},
                             session=f"s{i % 7}") for i in range(n)]
    return decision_lines(decisions, Redactor())


def _sink(kind: str, path: Path, key: Any) -> Any:
    if kind == "plain":
        return JsonlSink(path, rotate_bytes=ROTATE)
    if kind == "chained":
        return ChainedJsonlSink(path, rotate_bytes=ROTATE)
    return ChainedJsonlSink(path, rotate_bytes=ROTATE, sign_key=key)


def _write(kind: str, lines: list[str], tmp: Path, key: Any, run: int) -> float:
    path = tmp / f"{kind}-{run}" / "audit.jsonl"
    sink = _sink(kind, path, key)
    append = sink.append_line
    gc.collect()
    started = time.perf_counter()
    for line in lines:
        append(line)
    sink.close()
    return time.perf_counter() - started


def _guard_run(kind: str, tmp: Path, key: Any, run: int, n: int) -> float:
    path = tmp / f"guard-{kind}-{run}" / "audit.jsonl"
    guard = Guard(audit=Auditor([_sink(kind, path, key)]),
                  rules=[{"id": "no-prod", "match": {"tool": "deploy"}, "args": {"env": "prod"}}])
    check = guard.check
    gc.collect()
    started = time.perf_counter()
    for i in range(n):
        check("bash", {"command": f"ls -la build/{i} && grep -rn TODO src/{i}"}, session="s")
    guard.close()
    return time.perf_counter() - started


def _seal_cost(tmp: Path, key: Any, signed: bool) -> float:
    """Microseconds per seal (what a rotation or a close adds): 500 seals in a row."""
    times = []
    for run in range(RUNS):
        sink = ChainedJsonlSink(tmp / f"seal-{signed}-{run}" / "audit.jsonl",
                                sign_key=key if signed else None)
        sink.append_line('{"type":"decision"}')
        gc.collect()
        with sink._lock:
            started = time.perf_counter()
            for _ in range(500):
                sink._seal("rotate")
            times.append((time.perf_counter() - started) / 500)
        sink.close()
    return statistics.median(times) * 1e6


def main() -> None:
    print(f"callwarden audit chain bench: {N} decision events per run, median of {RUNS} runs "
          f"(Python {sys.version.split()[0]})")
    lines = _lines(N)
    print(f"mean line: {sum(map(len, lines)) / len(lines):.0f} bytes (plain)")
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        generate_signing_key(tmp / "audit.key")
        key = load_signing_key(tmp / "audit.key")
        kinds = ("plain", "chained", "chained+signed")
        results: dict[str, float] = {}
        samples: dict[str, list[float]] = {k: [] for k in kinds}
        for run in range(RUNS):  # interleaved: a slow moment of the machine hits all three
            for kind in kinds:
                samples[kind].append(_write(kind, lines, tmp, key, run))
        print("\nsink append_line per event (rotation at 1 MB, close included):")
        for kind in kinds:
            seconds = statistics.median(samples[kind])
            results[kind] = seconds / N * 1e6
            extra = "" if kind == "plain" else f"   +{results[kind] - results['plain']:.2f} µs"
            print(f"  {kind:15} {N / seconds:>12,.0f} events/s  {results[kind]:6.2f} µs/event"
                  f"{extra}")
        chained_log = tmp / f"chained+signed-{RUNS - 1}" / "audit.jsonl"
        started = time.perf_counter()
        report = verify_logs(log_files([chained_log]), public_keys=[key.public])
        seconds = time.perf_counter() - started
        assert report.ok, report.summary()
        print(f"\nverify (signed, {report.seals} seals): {report.lines / seconds:,.0f} lines/s, "
              f"{seconds / report.lines * 1e6:.2f} µs/line")
        print(f"one seal (a rotation), unsigned: {_seal_cost(tmp, None, False):.1f} µs;  "
              f"signed (Ed25519): {_seal_cost(tmp, key, True):.1f} µs")
        n = max(N // 4, 1000)
        guard_samples: dict[str, list[float]] = {k: [] for k in kinds}
        for run in range(RUNS):
            for kind in kinds:
                guard_samples[kind].append(_guard_run(kind, tmp, key, run, n))
        print(f"\nGuard.check + audit (written delivery) per call, {n} calls:")
        base = statistics.median(guard_samples["plain"]) / n * 1e6
        for kind in kinds:
            per = statistics.median(guard_samples[kind]) / n * 1e6
            extra = "" if kind == "plain" else f"   +{per - base:.2f} µs"
            print(f"  {kind:15} {1e6 / per:>12,.0f} calls/s  {per:6.2f} µs/call{extra}")


if __name__ == "__main__":
    main()
