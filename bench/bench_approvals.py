"""Cost of the approval path per store: an ``ask`` becoming a pending request, and an approved
request being consumed by its one call.

Run: .venv/bin/python bench/bench_approvals.py [N]

Starts its own redis-server (from PATH) on a free loopback port, like bench_state.py. Prints,
per store (memory, SQLite, Redis), the median of 5 runs of N calls, in µs per call:
  - check: the ``ask`` decision alone;
  - pending: check + resolve_ask with nobody answering (the request is stored, ApprovalPending);
  - approve + consume: a reviewer's approve() and the resumed call's resolve_ask(approval_id=).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench_state import start_redis

from callwarden import ApprovalPending, Guard, resolve_ask
from callwarden.approvals import Approvals
from callwarden.state import open_store

N = int(sys.argv[1]) if len(sys.argv) > 1 else 500
RUNS = 5
RULES = [{"id": "ask-deploy", "match": {"tool": "deploy"}, "effect": "ask"}]


def one_run(url: str) -> tuple[float, float, float]:
    guard = Guard(rules=RULES)
    store = open_store(url)
    guard.approvals = Approvals(store)
    calls = [{"env": "qa", "build": f"b-{i}"} for i in range(N)]
    t0 = time.perf_counter()
    for args in calls:
        guard.check("deploy", args, agent="bot")
    t1 = time.perf_counter()
    ids = []
    for args in calls:
        try:
            resolve_ask(guard, guard.check("deploy", args, agent="bot"))
        except ApprovalPending as pending:
            ids.append(pending.request_id)
    t2 = time.perf_counter()
    for rid, args in zip(ids, calls, strict=True):
        guard.approvals.approve(rid, by="alice")
        decision = resolve_ask(guard, guard.check("deploy", args, agent="bot"), approval_id=rid)
        assert decision.effect == "allow", decision.reasons
    t3 = time.perf_counter()
    store.close()
    check = (t1 - t0) / N * 1e6
    return check, (t2 - t1) / N * 1e6, (t3 - t2) / N * 1e6


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        process, port = start_redis(Path(tmp))
        try:
            urls = {"memory": "memory", "sqlite": f"sqlite:///{tmp}/approvals.db",
                    "redis": f"redis://127.0.0.1:{port}/0?prefix=bench-approvals:"}
            print(f"{N} calls per run, median of {RUNS} runs, µs per call")
            print(f"  {'store':<8} {'check':>9} {'pending':>9} {'approve+consume':>16}")
            for name, url in urls.items():
                runs = [one_run(url) for _ in range(RUNS)]
                check, pending, consume = (statistics.median(r[i] for r in runs) for i in range(3))
                print(f"  {name:<8} {check:9.1f} {pending:9.1f} {consume:16.1f}")
        finally:
            process.terminate()
            process.wait()


if __name__ == "__main__":
    main()
