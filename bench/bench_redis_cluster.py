"""One decision's consume on a Redis Cluster against a single Redis server: median latency.

Three decisions, as the engine sends them (its deadline included, the session history recorded
in the same step):

* per-session: a session budget (no window) and a per-session rate (60 s window): one slot on
  the cluster, so one script on one node, as on a single server;
* + global: the same plus a global budget: two slots on the cluster (the global one, then the
  session's with its history), one script on a single server;
* + global, refused: the session budget is spent, so the cluster gives back what the global
  slot took (a third script); one script on a single server.

    python bench/bench_redis_cluster.py [--calls 3000] [--rounds 5]

Starts its own redis-server and a 3-master cluster (redis-server and redis-cli from PATH) on
free loopback ports, in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import redis
from bench_state import start_redis

from callwarden.state import Counter, HistoryEntry, open_store

SESSIONS = 100
Decision = Callable[[int], tuple[list[Counter], HistoryEntry]]


def per_session(i: int) -> tuple[list[Counter], HistoryEntry]:
    session = f"s{i % SESSIONS}"
    return ([Counter(f"budget|session={session}", 1e12, None, shard=session),
             Counter(f"rate|session={session}", 1e12, 60.0, shard=session)],
            HistoryEntry(session, "fetch", "allow", ((2.0, "deny"), (2.0, "deny"))))


def with_global(i: int) -> tuple[list[Counter], HistoryEntry]:
    counters, record = per_session(i)
    return ([*counters, Counter("global", 1e12, None)],
            HistoryEntry(record.session, "fetch", "allow", (*record.if_exceeded, (2.0, "deny"))))


def refused(i: int) -> tuple[list[Counter], HistoryEntry]:
    counters, record = with_global(i)
    spent = Counter(counters[0].key + "|spent", 0, None, shard=counters[0].shard)
    return [spent, *counters[1:]], record


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(directory: Path, *extra: str) -> tuple[subprocess.Popen[bytes], int]:
    directory.mkdir(parents=True)
    return start_redis(directory, *extra)


def start_cluster(directory: Path, started: list[subprocess.Popen[bytes]]) -> list[int]:
    """Starts three masters (appended to ``started``), joins them, waits until ok."""
    ports = []
    for i in range(3):
        process, port = start(directory / f"node{i}", "--cluster-enabled", "yes",
                              "--cluster-config-file", "nodes.conf",
                              "--cluster-port", str(free_port()))
        started.append(process)
        ports.append(port)
    cli = shutil.which("redis-cli") or sys.exit("redis-cli not found (it comes with redis-server)")
    subprocess.run([cli, "--cluster", "create", *(f"127.0.0.1:{port}" for port in ports),
                    "--cluster-replicas", "0", "--cluster-yes"], check=True,
                   stdout=subprocess.DEVNULL)
    for port in ports:
        client = redis.Redis(port=port)
        while client.execute_command("CLUSTER INFO")["cluster_state"] != "ok":
            time.sleep(0.05)
        client.close()
    return ports


def latencies(url: str, decision: Decision, calls: int) -> list[float]:
    """Seconds per consume, one after the other, on a fresh store (warmed up first)."""
    store = open_store(url, timeout=5.0)
    try:
        work = [decision(i) for i in range(calls)]
        for counters, record in work[:200]:
            store.consume(counters, now=time.time(), commit=True, record=record)
        out = []
        for counters, record in work:
            started = time.perf_counter()
            store.consume(counters, now=time.time(), commit=True, record=record,
                          deadline=started + 1.0)
            out.append(time.perf_counter() - started)
        return out
    finally:
        store.close()


async def throughput(url: str, decision: Decision, calls: int, concurrency: int = 64) -> float:
    """aconsume decisions per second, ``concurrency`` in flight."""
    store = open_store(url, timeout=5.0)
    try:
        work = iter([decision(i) for i in range(calls)])
        warm, _ = decision(0)
        await store.aconsume(warm, now=time.time(), commit=True)

        async def worker() -> None:
            for counters, record in work:
                await store.aconsume(counters, now=time.time(), commit=True, record=record)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return calls / (time.perf_counter() - started)
    finally:
        await store.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000, help="decisions per round")
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="callwarden-bench-cluster-") as tmp:
        directory = Path(tmp)
        started: list[subprocess.Popen[bytes]] = []
        try:
            server, port = start(directory / "single")
            started.append(server)
            ports = start_cluster(directory / "cluster", started)
            targets = {"redis": f"redis://127.0.0.1:{port}/0",
                       "cluster": "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in ports)
                       + "/"}
            decisions: dict[str, Decision] = {"per-session": per_session,
                                              "+ global": with_global,
                                              "+ global, refused": refused}
            print(f"{'decision':<20}{'store':<9}{'p50 µs':>9}{'p99 µs':>9}{'async/s':>10}")
            for d, (name, decision) in enumerate(decisions.items()):
                for kind, base in targets.items():
                    p50s, p99s, rates = [], [], []
                    for r in range(options.rounds):
                        url = f"{base}?prefix=bench-{d}-{r}-"
                        seconds = sorted(latencies(url, decision, options.calls))
                        p50s.append(seconds[len(seconds) // 2] * 1e6)
                        p99s.append(seconds[int(len(seconds) * 0.99)] * 1e6)
                        rates.append(asyncio.run(throughput(url + "async", decision,
                                                            options.calls)))
                    print(f"{name:<20}{kind:<9}{statistics.median(p50s):>9.0f}"
                          f"{statistics.median(p99s):>9.0f}{statistics.median(rates):>10.0f}")
        finally:
            for process in started:
                process.terminate()
                process.wait(10)


if __name__ == "__main__":
    main()
