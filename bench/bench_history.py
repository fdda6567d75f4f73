"""Cost of a decision whose rule reads the session history, as the session calls more tools.

Run: .venv/bin/python bench/bench_history.py

For the memory and SQLite stores (and Redis when ``redis-server`` is on the PATH), a session
first calls 20, then 2,000 distinct tools; then a rule reading the history decides a call.
Two rules: one that names the tools it reads (``'web_fetch' in history.tools``: the store
reads those tools' entries only) and one that may read any (``history.tools.exists(...)``:
the whole history). Prints the median µs per decision and the 2,000 / 20 ratio.
"""

from __future__ import annotations

import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from callwarden import Guard

RULES = {
    "names its tools": "'web_fetch' in history.tools",
    "may read any tool": "history.tools.exists(t, t.startsWith('rm_'))",
}
SIZES = (20, 2000)


def per_decision_us(guard: Guard, session: str, n: int) -> float:
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            guard.check("send", {}, session=session)
        runs.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(runs)


def measure(state: str) -> None:
    for label, expression in RULES.items():
        costs = []
        for size in SIZES:
            guard = Guard.from_dict({"version": 1, "rules": [
                {"id": "h", "match": {"tool": "send"}, "if": expression, "effect": "deny"}]},
                state=state)
            session = f"s{size}-{time.time_ns()}"
            for i in range(size):
                guard.check(f"tool{i}", {}, session=session)
            costs.append(per_decision_us(guard, session, 2000 if size < 100 else 200))
        print(f"  {state.split(':')[0]:7} {label:18} {costs[0]:9.1f} {costs[1]:10.1f}"
              f" {costs[1] / costs[0]:8.2f}x")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    print(f"  {'store':7} {'rule':18} {'20 tools':>9} {'2000 tools':>10} {'ratio':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        measure("memory")
        measure(f"sqlite:///{Path(tmp) / 'state.db'}")
        if shutil.which("redis-server"):
            port = free_port()
            server = subprocess.Popen(["redis-server", "--port", str(port), "--save", "",
                                       "--appendonly", "no"], stdout=subprocess.DEVNULL)
            try:
                time.sleep(0.5)
                measure(f"redis://127.0.0.1:{port}/0")
            finally:
                server.terminate()
                server.wait()


if __name__ == "__main__":
    main()
