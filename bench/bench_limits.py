"""Limit decisions through a Guard on each state store, and the cost of history conditions.

Run: .venv/bin/python bench/bench_limits.py   (starts its own redis-server on a free port)

Also: a budget of 100 on Redis under 4 processes x 250 concurrent acheck with two busy
loops beside them: calls allowed (must be exactly 100) and decisions that timed out.

Prints decisions per second for a budget + rate-limit policy on memory, SQLite and Redis, from
one process and from 4 (medians of several runs), calls per second through ``guard.run`` under a
concurrent limit (decide and take a slot, run, let it go with the outcome; its Redis round
trips per call), Redis round trips per decision for three
policy shapes (limits only; limits + a rule reading history, on a call it does not apply to:
the call is counted and recorded; a call whose rule reads history), and the median decision
time of a history condition after 20 and after 20,000 earlier calls in the session.
"""

from __future__ import annotations

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

from callwarden import Guard
from callwarden.state import open_store

POLICY: dict[str, Any] = {"version": 1, "rules": [
    {"id": "budget", "limit": {"calls": 10**9, "per": "session"}},
    {"id": "rate", "limit": {"calls": 10**9, "window": "60s", "per": ["agent", "tool"]}},
]}
HISTORY: dict[str, Any] = {"version": 1, "rules": [
    {"id": "mail-after-fetch", "match": {"tool": "send_email"},
     "if": "'web_fetch' in history.tools", "effect": "ask"}]}
LIMITS_AND_HISTORY: dict[str, Any] = {"version": 1,
                                      "rules": POLICY["rules"] + HISTORY["rules"]}
CONCURRENT: dict[str, Any] = {"version": 1, "rules": [
    {"id": "in-flight", "limit": {"concurrent": 8, "per": "session"}}]}
RUNS = 5  # each figure is the median of this many runs
# Commands the store sends itself; those its scripts run inside the server are counted apart.
CLIENT_COMMANDS = ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_hgetall", "cmdstat_hmget")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def decisions_per_second(url: str, n: int) -> float:
    store = open_store(url, timeout=30.0) if url != "memory" else open_store(url)
    guard = Guard.from_dict(POLICY, state=store)
    for _ in range(50):
        guard.check("fetch", {"url": "https://x"}, session="s", agent="a")
    started = time.perf_counter()
    for _ in range(n):
        guard.check("fetch", {"url": "https://x"}, session="s", agent="a")
    elapsed = time.perf_counter() - started
    store.close()
    return n / elapsed


def runs_per_second(url: str, n: int) -> float:
    """Calls through guard.run under a concurrent limit: each takes a slot, runs, lets it go."""
    store = open_store(url, timeout=30.0) if url != "memory" else open_store(url)
    guard = Guard.from_dict(CONCURRENT, state=store)
    for _ in range(50):
        guard.run("export", {"table": "t"}, lambda table: table, session="s")
    started = time.perf_counter()
    for _ in range(n):
        guard.run("export", {"table": "t"}, lambda table: table, session="s")
    elapsed = time.perf_counter() - started
    store.close()
    return n / elapsed


def _worker(url: str, n: int, barrier: Any, out: Any) -> None:
    barrier.wait()
    decisions_per_second(url, n)
    out.put(n)  # the parent times all four from the barrier to the last report


def four_processes(url: str, n: int) -> float:
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(5), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(url, n, barrier, out)) for _ in range(4)]
    for p in procs:
        p.start()
    barrier.wait()
    started = time.perf_counter()
    total = sum(out.get(timeout=600) for _ in procs)
    elapsed = time.perf_counter() - started
    for p in procs:
        p.join()
    return total / elapsed


def _starved_worker(url: str, session: str, barrier: Any, out: Any) -> None:
    guard = Guard.from_dict({"version": 1, "rules": [
        {"id": "b", "limit": {"calls": 100, "per": "session"}}]}, state=url)
    barrier.wait()

    async def burst() -> list[Any]:
        return await asyncio.gather(*(guard.acheck("t", {"i": i}, session=session)
                                      for i in range(250)))

    decisions = asyncio.run(burst())
    out.put((sum(d.allowed for d in decisions),
             sum(1 for d in decisions if d.reasons and d.reasons[0].code in
                 ("state_unavailable", "policy_timeout"))))


def starved_redis(url: str) -> tuple[int, int]:
    """4 processes x 250 concurrent acheck against a budget of 100, two busy loops beside
    them: (calls allowed, decisions that timed out or found the store unavailable)."""
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(4), ctx.Queue()
    session = f"starved-{time.time_ns()}"
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        procs = [ctx.Process(target=_starved_worker, args=(url, session, barrier, out))
                 for _ in range(4)]
        for proc in procs:
            proc.start()
        results = [out.get(timeout=600) for _ in procs]
        for proc in procs:
            proc.join()
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    return sum(a for a, _ in results), sum(t for _, t in results)


def history_cost(url: str, earlier: int) -> float:
    store = open_store(url)
    guard = Guard.from_dict(HISTORY, state=store)
    session = f"h{earlier}-{time.time()}"
    guard.check("web_fetch", {"url": "https://x"}, session=session)
    for i in range(earlier):
        guard.check(f"tool_{i % 7}", {}, session=session)
    samples = []
    for _ in range(300):
        t0 = time.perf_counter_ns()
        guard.check("send_email", {"to": "a"}, session=session)
        samples.append(time.perf_counter_ns() - t0)
    store.close()
    return statistics.median(samples) / 1000


def round_trips(url: str, policy: dict[str, Any], tool: str, n: int = 1000,
                run: bool = False) -> float:
    """Commands the store sends per decision (``run``: per call through guard.run, the outcome
    recorded), read from the server's command statistics."""
    import redis

    client = redis.Redis.from_url(url)
    store = open_store(url)
    guard = Guard.from_dict(policy, state=store)
    guard.check(tool, {}, session="rt", agent="a")  # loads the scripts, opens the connection

    def sent() -> int:
        stats = client.info("commandstats")
        return sum(stats.get(name, {"calls": 0})["calls"] for name in CLIENT_COMMANDS)

    before = sent()
    for _ in range(n):
        if run:
            guard.run(tool, {}, lambda: None, session="rt", agent="a")
        else:
            guard.check(tool, {}, session="rt", agent="a")
    after = sent()
    store.close()
    client.close()
    return (after - before) / n


def median_of(runs: int, measure: Any, *args: Any) -> float:
    return statistics.median(measure(*args) for _ in range(runs))


def main() -> None:
    redis_bin = shutil.which("redis-server")
    tmp = Path(tempfile.mkdtemp(prefix="cw-bench-"))
    server = None
    urls = {"memory": "memory", "sqlite": f"sqlite:///{tmp / 'state.db'}"}
    if redis_bin:
        port = free_port()
        server = subprocess.Popen([redis_bin, "--port", str(port), "--bind", "127.0.0.1",
                                   "--save", "", "--appendonly", "no"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        urls["redis"] = f"redis://127.0.0.1:{port}/0"
    try:
        print(f"budget + rate-limit policy, decisions per second (median of {RUNS} runs)")
        print(f"{'store':8} {'1 process/s':>12} {'4 processes/s':>20}")
        for name, url in urls.items():
            one = median_of(RUNS, decisions_per_second, url,
                            5000 if name != "memory" else 50000)
            # Memory counts per process: four processes share nothing to measure.
            four = "n/a (per process)" if name == "memory" else \
                f"{median_of(3, four_processes, url, 2000):,.0f}"
            print(f"{name:8} {one:12,.0f} {four:>20}")
        print(f"concurrent limit, guard.run calls per second (median of {RUNS} runs)")
        for name, url in urls.items():
            runs = median_of(RUNS, runs_per_second, url, 3000 if name != "memory" else 30000)
            print(f"{name:8} {runs:12,.0f}")
        if server is not None:
            shapes = (("limits only", POLICY, "t"),
                      ("limits + history recorded", LIMITS_AND_HISTORY, "t"),
                      ("limits + history read (rule reads it)", LIMITS_AND_HISTORY,
                       "send_email"))
            print("redis round trips per decision:")
            for label, policy, tool in shapes:
                print(f"  {label:40} {round_trips(urls['redis'], policy, tool):.2f}")
            slots = round_trips(urls["redis"], CONCURRENT, "export", run=True)
            print(f"  {'concurrent limit, per guard.run call':40} {slots:.2f}")
        if server is not None:
            for run in range(3):
                allowed, failed = starved_redis(urls["redis"])
                print(f"redis, budget 100, 4 processes x 250 concurrent acheck, two busy loops"
                      f" beside (run {run + 1}): {allowed} allowed, {failed} of 1,000 timed out"
                      " or found the store unavailable")
        for name in ("memory", "sqlite") + (("redis",) if server else ()):
            a = median_of(3, history_cost, urls[name], 20)
            b = median_of(3, history_cost, urls[name], 20000)
            print(f"history condition on {name}: {a:.1f} µs after 20 calls, {b:.1f} µs after "
                  f"20,000 ({b / a:.2f}x)")
    finally:
        if server is not None:
            server.terminate()
            server.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
