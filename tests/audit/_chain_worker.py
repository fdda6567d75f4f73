"""A process that writes chained audit events through a Guard built from a policy file.

Run: python _chain_worker.py POLICY GO N. Waits until the file GO exists (so that two workers
start appending together), decides N calls (allowed ones run and record their outcome), and
closes the guard, which seals its stream.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from callwarden import Guard


def main() -> None:
    policy, go, n = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    guard = Guard.from_file(policy)
    deadline = time.monotonic() + 60
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    for i in range(n):
        guard.run("fetch", {"url": f"https://example.com/{i}"}, lambda **kw: "ok")
    guard.close()


if __name__ == "__main__":
    main()
