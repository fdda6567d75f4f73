"""The attack figures: every probe in tests/adversarial/_probes.py, run against this checkout.

    python bench/score_attacks.py [--verbose]

Prints attacks tried, how many ran the tool at all, bypasses (a harmful call ran), hangs (a
call still running after the hang limit), crashes (an exception other than a refusal reached
the agent) and decision events lost. Exits 1 when any attack got through.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests" / "adversarial"))

from _probes import HANG_AFTER, PROBES, attempt  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verbose", action="store_true", help="one line per probe")
    options = parser.parse_args()
    results = [attempt(probe) for probe in PROBES]
    by_group: dict[str, list] = collections.defaultdict(list)
    for r in results:
        by_group[r.probe.group].append(r)
        if options.verbose or not r.held:
            what = ("HELD " if r.held else "FAIL ") + r.probe.name
            problems = [p for p in (r.bypass, r.crash, "hang" if r.hang else None,
                                    f"{r.events_lost} event(s) lost" if r.events_lost else None)
                        if p]
            print(f"{what:75} {r.seconds * 1000:8.1f} ms  {'; '.join(problems)}")
    print(f"\n{'group':18} {'tried':>6} {'ran':>5} {'bypass':>7} {'hang':>5} {'crash':>6} "
          f"{'lost':>5}")
    rows = [*by_group.items(), ("all", results)]
    for group, rs in rows:
        print(f"{group:18} {len(rs):6} {sum(r.executed for r in rs):5} "
              f"{sum(bool(r.bypass) for r in rs):7} {sum(r.hang for r in rs):5} "
              f"{sum(bool(r.crash) for r in rs):6} {sum(r.events_lost for r in rs):5}")
    print(f"(ran: the tool ran at all, harmful or not; hang: still running after "
          f"{HANG_AFTER:g} s; lost: calls without a decision event)")
    return 0 if all(r.held for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
