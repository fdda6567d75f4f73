"""Median scan time of callwarden's detectors on 1 KB and 100 KB arguments.

Benign prose, benign source code, and the same with one secret in the middle; secret
detectors alone and secrets + personal data; plus a 10 MB adversarial string through
``scan_value`` (capped at 1 MB per string by default).

    python bench/bench_secrets.py
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from callwarden.analysis.detectors import (  # noqa: E402
    PII,
    SECRETS,
    scan_text,
    scan_value,
    select_detectors,
)

PROSE = ("the quick brown fox jumps over the lazy dog while the agent reads config files and "
         "writes results to disk please summarize this report for the team by friday")
WORDS = PROSE.split(" ")
SECRET = "GITHUB_TOKEN=ghp_DfOQkG0P2LIHSMWCgajwJ5lPJqk2B8mETcik"


def prose(n: int) -> str:
    rng = random.Random(1)
    out: list[str] = []
    size = 0
    while size < n:
        w = rng.choice(WORDS)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:n]


def code(n: int) -> str:
    src = (ROOT / "src" / "callwarden" / "_call.py").read_text()
    return (src * (n // len(src) + 1))[:n]


def with_secret(text: str) -> str:
    mid = len(text) // 2
    return text[:mid] + " " + SECRET + " " + text[mid:]


def median_us(fn, *, min_runs: int = 15, min_time: float = 0.5) -> float:
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_runs or time.perf_counter() - start < min_time:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if len(times) > 20000:
            break
    return statistics.median(times) * 1e6


def main() -> None:
    both = select_detectors(["secret", "pii"])
    print(f"{'case':<34} {'secrets':>12} {'secrets+pii':>14} {'pii':>10}")
    for size in (1_000, 100_000):
        for label, make in (("prose", prose), ("code", code)):
            for secret in (False, True):
                text = make(size)
                if secret:
                    text = with_secret(text)
                args = {"path": "notes.md", "body": text}
                row = [median_us(lambda d=d, a=args: scan_value(a, d)) for d in (SECRETS, both, PII)]
                name = f"{size // 1000} KB {label}{' + secret' if secret else ''}"
                print(f"{name:<34} {row[0]:>10.1f}us {row[1]:>12.1f}us {row[2]:>8.1f}us")
    hostile = {
        "10 MB 'a'": "a" * 10_000_000,
        "10 MB 'key=' repeated": "key=" * 2_500_000,
        "10 MB 'AKIA' repeated": "AKIA" * 2_500_000,
        "10 MB digits and spaces": "4111 " * 2_000_000,
        "10 MB '://a:' repeated": "://a:" * 2_000_000,
    }
    print("\nadversarial, scan_value (1 MB cap)  secrets+pii    uncapped scan_text")
    for name, text in hostile.items():
        t0 = time.perf_counter()
        found = scan_value({"x": text}, both)
        capped = time.perf_counter() - t0
        t0 = time.perf_counter()
        scan_text(text, both)
        full = time.perf_counter() - t0
        print(f"{name:<36} {capped * 1e3:>8.0f}ms (truncated={found.truncated}) {full * 1e3:>8.0f}ms")


if __name__ == "__main__":
    main()
