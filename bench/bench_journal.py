"""What exactly-once costs: a payment decided and its outcome recorded, journaled (the caller
names the call: it is written ``executing`` before it runs and closed after) against the same
call unjournaled (no call id), on each store, in one run.

Run: .venv/bin/python bench/bench_journal.py [CALLS]   (default 2,000 per case, 5 rounds)

Starts its own redis-server (from PATH) on a free loopback port. Prints the median µs of a
decide + finish per case and the journaled ÷ unjournaled ratio per store.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from bench_state import start_redis

from callwarden import Guard
from callwarden._enforce import Enforcer

CALLS = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
ROUNDS = 5
ARGS = {"iban": "DE89370400440532013000", "amount": 40}


def case(guard: Guard, named: bool) -> float:
    """µs per decide + finish of ``CALLS`` payments, median of ``ROUNDS`` rounds."""
    enforcer = Enforcer(guard)
    rounds = []
    for r in range(ROUNDS):
        started = time.perf_counter()
        for i in range(CALLS):
            call_id = f"r{r}-c{i}" if named else None
            decision = enforcer.check("pay", ARGS, call_id=call_id, session="s1")
            enforcer.finish(decision, "paid", time.perf_counter())
        rounds.append((time.perf_counter() - started) / CALLS * 1e6)
    return statistics.median(rounds)


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        server, port = start_redis(Path(folder))
        try:
            stores: dict[str, Any] = {
                "memory": None,
                "sqlite": f"sqlite:///{Path(folder) / 'state.db'}",
                "redis": f"redis://127.0.0.1:{port}/0",
            }
            print(f"{'store':8} {'unjournaled µs':>15} {'journaled µs':>13} {'ratio':>6}")
            for name, url in stores.items():
                policy: dict[str, Any] = {"version": 1, "timeout": "10s",
                                          "tools": {"pay": {"kind": "payment"}}}
                if url is not None:
                    policy["state"] = url
                guard = Guard.from_dict(policy)
                case(guard, True)  # warm both paths (and open connections)
                plain, journaled = case(guard, False), case(guard, True)
                print(f"{name:8} {plain:15.1f} {journaled:13.1f} {journaled / plain:5.2f}x")
                guard.close()
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
