"""Scores the shipped `callwarden:recommended` policy against the test corpus.

Run: .venv/bin/python bench/score_recommended.py

Destructive commands go through a `Bash` tool (must be denied or asked), benign ones must be
allowed; sensitive paths through `read_file` (denied), benign paths allowed; secrets inside an
outgoing request body (denied), look-alikes allowed.
"""

from __future__ import annotations

import csv
import json
import sys
from collections import Counter
from pathlib import Path

from callwarden import Guard

DATA = Path(__file__).parent.parent / "tests" / "data"
POLICY = Path(__file__).parent.parent / "src" / "callwarden" / "policies" / "recommended.yaml"


def rows(name: str) -> list[dict[str, str]]:
    lines = [ln for ln in (DATA / name).read_text().splitlines() if not ln.startswith("#")]
    return list(csv.DictReader(lines, delimiter="\t", quoting=csv.QUOTE_NONE))


def score(guard: Guard) -> dict[str, object]:
    blocked = lambda tool, args: not guard.check(tool, args).allowed  # noqa: E731
    out: dict[str, object] = {}
    destructive = rows("bash_destructive.tsv")
    by_tech: Counter[str] = Counter()
    hits_tech: Counter[str] = Counter()
    for r in destructive:
        by_tech[r["technique"]] += 1
        hits_tech[r["technique"]] += blocked("Bash", {"command": r["command"]})
    benign = rows("bash_benign.tsv")
    out["destructive blocked"] = (sum(hits_tech.values()), len(destructive))
    out["benign commands blocked"] = (sum(blocked("Bash", {"command": r["command"]})
                                          for r in benign), len(benign))
    out["destructive by technique"] = {t: f"{hits_tech[t]}/{n}" for t, n in sorted(by_tech.items())}
    paths = rows("path_traversal.tsv")
    # Symlink rows need links on disk: tests/test_paths.py builds them under a fake root.
    sensitive = [r for r in paths if r["label"].startswith("sensitive") and
                 "symlink" not in r["technique"]]
    benign_paths = [r for r in paths if r["label"] == "benign"]
    out["sensitive paths denied"] = (sum(blocked("read_file", {"path": r["path"]})
                                         for r in sensitive), len(sensitive))
    out["benign paths blocked"] = (sum(blocked("read_file", {"path": r["path"]})
                                       for r in benign_paths), len(benign_paths))
    secrets = [json.loads(ln) for ln in (DATA / "secrets.jsonl").read_text().splitlines()
               if ln.strip()]
    send = lambda s: blocked("fetch", {"url": "https://api.example.com/upload", "body": s})  # noqa: E731
    pos = [s for s in secrets if s["kind"] == "positive"]
    neg = [s for s in secrets if s["kind"] == "negative"]
    out["secrets caught"] = (sum(send(s["sample"]) for s in pos), len(pos))
    out["look-alikes flagged"] = (sum(send(s["sample"]) for s in neg), len(neg))
    return out


def recommended_for_the_corpus() -> Guard:
    """The shipped policy, deployed where the corpus says the agent works."""
    return Guard.from_dict({"version": 1, "extends": str(POLICY),
                            "workspace": {"root": "/home/dev/project", "home": "/home/dev"}})


def main() -> int:
    guard = recommended_for_the_corpus()
    for name, value in score(guard).items():
        if isinstance(value, tuple):
            hit, total = value
            print(f"{name:28} {hit:4}/{total:<4} {100 * hit / total:6.1f}%")
        else:
            print(f"{name}:")
            for k, v in value.items():  # type: ignore[attr-defined]
                print(f"    {k:30} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
