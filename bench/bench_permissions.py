"""Coding-agent permission lists: loading and deciding as they grow.

Run: .venv/bin/python bench/bench_permissions.py [COUNT ...]   (default 1 50 150 300)

A coding agent's settings gather permission strings: every "always allow" a person clicks adds
one, so a few hundred ``allow`` entries are common. For COUNT strings of each of ``Bash(...)``,
``Read(...)`` and ``WebFetch(domain:...)`` in ``allow`` (and as many in ``deny``, in a second
policy), prints the time to load the policy and the median ``Guard.check`` of: a command one
allow string covers, one none covers, a read and a fetch they cover, and a fetch under the deny
list. A tool's allow strings share one check of what the call does (all their patterns), and
strings of one kind that only match are checked as one condition first (``engine/index.py``'s
unions): what no string matches costs what it costs under one string.
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

from callwarden import Guard, PolicyError

COUNTS = [int(a) for a in sys.argv[1:]] or [1, 50, 150, 300]


def median_us(guard: Guard, tool: str, args: dict[str, Any], n: int = 400) -> float:
    for _ in range(50):
        guard.check(tool, args)
    runs = []
    for _ in range(7):
        start = time.perf_counter_ns()
        for _ in range(n):
            guard.check(tool, args)
        runs.append((time.perf_counter_ns() - start) / n / 1000)
    return statistics.median(runs)


def loaded(policy: dict[str, Any]) -> tuple[Guard, float]:
    start = time.perf_counter()
    guard = Guard.from_dict(policy)
    return guard, (time.perf_counter() - start) * 1000


def main() -> None:
    print(f"{'strings of each kind':>22} {'load':>9} {'covered':>9} {'uncovered':>10} "
          f"{'read':>8} {'fetch':>8} {'load (deny)':>12} {'denied':>8}")
    for count in COUNTS:
        strings = {
            "Bash": [f"Bash(tool{i} --flag *)" for i in range(count)],
            "Read": [f"Read(docs{i}/**)" for i in range(count)],
            "WebFetch": [f"WebFetch(domain:site{i}.example)" for i in range(count)]}
        every = [s for group in strings.values() for s in group]
        try:
            allowing, allow_ms = loaded({"version": 1, "default": "deny", "allow": every})
        except PolicyError as e:
            print(f"{count:>22} does not load: {e.problems[0].message}")
            continue
        last = count - 1
        covered = median_us(allowing, "Bash", {"command": f"tool{last} --flag x"})
        uncovered = median_us(allowing, "Bash", {"command": "git status"})
        read = median_us(allowing, "Read", {"file_path": f"docs{last}/guide.md"})
        fetch = median_us(allowing, "WebFetch", {"url": f"https://site{last}.example/a"})
        assert allowing.check("Bash", {"command": "git status"}).effect == "deny"
        denying, deny_ms = loaded({"version": 1, "deny": every})
        denied = median_us(denying, "WebFetch", {"url": f"https://www.site{last}.example/"})
        print(f"{count:>22} {allow_ms:>6.0f} ms {covered:>6.1f} µs {uncovered:>7.1f} µs "
              f"{read:>5.1f} µs {fetch:>5.1f} µs {deny_ms:>9.0f} ms {denied:>5.1f} µs")


if __name__ == "__main__":
    main()
