"""Decisions per second of each state store, and Redis round trips per decision.

A "decision" is one ``consume`` of two counters, as a limit rule makes them: a session budget
(no window) and a per-tool rate limit (60 s sliding window), both committed.

    python bench/bench_state.py [--calls 20000] [--rounds 5]

Starts its own redis-server (from PATH) on a free loopback port, in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import redis

from callwarden.state import Counter, open_store

SESSIONS = 100
PROCESSES = 4


def counters(i: int) -> list[Counter]:
    session = f"s{i % SESSIONS}"
    return [
        Counter(f"budget:session-budget:session={session}", 1e12, None),
        Counter(f"rate:fetch-rate:session={session}:tool=fetch", 1e12, 60.0),
    ]


def run_sync(url: str, calls: int, offset: int = 0) -> tuple[float, list[float]]:
    """Returns (seconds, per-call latencies) for ``calls`` decisions on a fresh store object."""
    store = open_store(url)
    try:
        batches = [counters(offset + i) for i in range(calls)]
        latencies = []
        started = time.perf_counter()
        for batch in batches:
            t0 = time.perf_counter()
            store.consume(batch, now=time.time(), commit=True)
            latencies.append(time.perf_counter() - t0)
        return time.perf_counter() - started, latencies
    finally:
        store.close()


async def run_async(url: str, calls: int, concurrency: int = 32) -> float:
    """Returns seconds for ``calls`` aconsume decisions, ``concurrency`` in flight."""
    store = open_store(url)
    try:
        batches = [counters(i) for i in range(calls)]
        queue = iter(batches)

        async def worker() -> None:
            for batch in queue:
                await store.aconsume(batch, now=time.time(), commit=True)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.perf_counter() - started
    finally:
        await store.aclose()


def _process(url: str, calls: int, index: int, barrier: Any, results: Any) -> None:
    store = open_store(url)
    batches = [counters(index * calls + i) for i in range(calls)]
    store.consume(batches[0], now=time.time(), commit=True)  # connect before the clock starts
    barrier.wait()
    started = time.perf_counter()
    for batch in batches:
        store.consume(batch, now=time.time(), commit=True)
    results.put((started, time.perf_counter()))
    store.close()


def run_processes(url: str, calls: int) -> float:
    """Returns aggregate decisions/s of PROCESSES processes sharing one store."""
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(PROCESSES), context.Queue()
    workers = [
        context.Process(target=_process, args=(url, calls, i, barrier, results))
        for i in range(PROCESSES)
    ]
    for w in workers:
        w.start()
    spans = [results.get(timeout=600) for _ in workers]
    for w in workers:
        w.join()
    wall = max(end for _, end in spans) - min(start for start, _ in spans)
    return PROCESSES * calls / wall


def round_trips(url: str, admin: redis.Redis, calls: int = 1000) -> tuple[float, float, float]:
    """Counts requests the client sends, and EVALSHA / all commands the server runs, per call."""
    sent = 0
    original = redis.connection.AbstractConnection.send_packed_command

    def counting(self: Any, command: Any, check_health: bool = True) -> None:
        nonlocal sent
        sent += 1
        original(self, command, check_health)

    store = open_store(url)
    try:
        store.consume(counters(0), now=time.time(), commit=True)
        before = admin.info("commandstats")
        redis.connection.AbstractConnection.send_packed_command = counting  # type: ignore[method-assign]
        try:
            for i in range(calls):
                store.consume(counters(i), now=time.time(), commit=True)
        finally:
            redis.connection.AbstractConnection.send_packed_command = original  # type: ignore[method-assign]
        after = admin.info("commandstats")
    finally:
        store.close()

    def delta(name: str) -> int:
        return int(after.get(name, {"calls": 0})["calls"] - before.get(name, {"calls": 0})["calls"])

    server_total = sum(delta(n) for n in after if n != "cmdstat_info")
    return sent / calls, delta("cmdstat_evalsha") / calls, server_total / calls


def start_redis(directory: Path, *extra: str) -> tuple[subprocess.Popen[bytes], int]:
    """A redis-server on a free loopback port, nothing persisted; ``extra`` options added."""
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("redis-server not found: install Debian's package (apt-get install redis-server)")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory),
         "--save", "", "--appendonly", "no", *extra],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    client = redis.Redis(port=port)
    for _ in range(500):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.01)
    client.close()
    return process, port


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000, help="decisions per round")
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="callwarden-bench-") as tmp:
        directory = Path(tmp)
        process, port = start_redis(directory)
        admin = redis.Redis(port=port)
        try:
            stores = {
                "memory": "memory",
                "sqlite": f"sqlite:///{directory / 'bench.db'}",
                "redis": f"redis://127.0.0.1:{port}/0?prefix=bench:",
            }
            rows = []
            for name, url in stores.items():
                calls = options.calls if name == "memory" else options.calls // 4
                rates, p50s, p99s, arates = [], [], [], []
                for _ in range(options.rounds):
                    seconds, latencies = run_sync(url, calls)
                    rates.append(calls / seconds)
                    latencies.sort()
                    p50s.append(latencies[len(latencies) // 2] * 1e6)
                    p99s.append(latencies[int(len(latencies) * 0.99)] * 1e6)
                    arates.append(calls / asyncio.run(run_async(url, calls)))
                multi = (
                    statistics.median(run_processes(url, calls) for _ in range(3))
                    if name != "memory"
                    else None
                )
                rows.append(
                    (name, statistics.median(rates), statistics.median(p50s),
                     statistics.median(p99s), statistics.median(arates), multi)
                )  # fmt: skip
            sent, evalsha, server = round_trips(stores["redis"], admin)
        finally:
            admin.shutdown(nosave=True)
            admin.close()
            process.wait()

    print(f"state stores: consume(budget + 60s rate counter), median of {options.rounds} rounds")
    print(f"python {sys.version.split()[0]}, {multiprocessing.cpu_count()} CPUs")
    print()
    print(f"{'store':8} {'1 proc/s':>10} {'p50 us':>8} {'p99 us':>8} {'async/s':>10} "
          f"{f'{PROCESSES} procs/s':>12}")  # fmt: skip
    for name, rate, p50, p99, arate, multi in rows:
        shared = f"{multi:12,.0f}" if multi is not None else f"{'(not shared)':>12}"
        print(f"{name:8} {rate:10,.0f} {p50:8.1f} {p99:8.1f} {arate:10,.0f} {shared}")
    print()
    print(f"redis: requests sent per consume {sent:.2f}, EVALSHA per consume {evalsha:.2f}, "
          f"server-side commands per consume {server:.2f} (inside the script)")  # fmt: skip


if __name__ == "__main__":
    main()
