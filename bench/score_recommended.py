"""Scores the shipped `callwarden:recommended` policy against the test corpus.

Run: .venv/bin/python bench/score_recommended.py [--rows] [--held-out-rows]

Destructive commands go through a `Bash` tool (must be denied or asked), benign ones must be
allowed; sensitive paths through `read_file` (denied), benign paths allowed; secrets inside an
outgoing request body (denied), look-alikes allowed.

The shell rows (the corpus copy in tests/data plus the `*_extra.tsv` rows written for issues 13
and 14) are split in two, deterministically by a hash of the command: a *tuning* part, the only
one looked at while changing the policy, and a *held-out* part, scored but not tuned on. Rows an
issue names go to the tuning part. `--rows` lists the tuning rows scored wrong;
`--held-out-rows` lists the held-out ones too.
"""

from __future__ import annotations

import csv
import hashlib
import json
import sys
from collections import Counter
from pathlib import Path

from callwarden import Guard

DATA = Path(__file__).parent.parent / "tests" / "data"


def rows(name: str) -> list[dict[str, str]]:
    lines = [ln for ln in (DATA / name).read_text().splitlines() if not ln.startswith("#")]
    return list(csv.DictReader(lines, delimiter="\t", quoting=csv.QUOTE_NONE))


def held_out(row: dict[str, str]) -> bool:
    """The deterministic split: half the rows by a hash of the command; issue rows tune."""
    if row.get("source", "").startswith("named in"):
        return False
    return hashlib.sha256(row["command"].encode()).digest()[0] % 2 == 1


def shell_rows(kind: str) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """(tuning, held-out) rows of ``bash_<kind>.tsv`` and ``bash_<kind>_extra.tsv``."""
    both = rows(f"bash_{kind}.tsv") + rows(f"bash_{kind}_extra.tsv")
    return [r for r in both if not held_out(r)], [r for r in both if held_out(r)]


def score(guard: Guard, *, show: tuple[str, ...] = ()) -> dict[str, object]:
    blocked = lambda tool, args: not guard.check(tool, args).allowed  # noqa: E731
    out: dict[str, object] = {}
    for part, (destructive, benign) in zip(
            ("tuning", "held-out"), zip(shell_rows("destructive"), shell_rows("benign"),
                                        strict=True), strict=True):
        missed = [r for r in destructive if not blocked("Bash", {"command": r["command"]})]
        wrong = [r for r in benign if blocked("Bash", {"command": r["command"]})]
        out[f"destructive blocked ({part})"] = (len(destructive) - len(missed), len(destructive))
        out[f"benign blocked ({part})"] = (len(wrong), len(benign))
        if part in show:
            for r in missed:
                print(f"  {part} MISSED      {r['command']}")
            for r in wrong:
                d = guard.check("Bash", {"command": r["command"]})
                print(f"  {part} BLOCKED     {r['command']}  [{d.rule}: {d.reasons[0].message}]")
    destructive = rows("bash_destructive.tsv")
    by_tech: Counter[str] = Counter()
    hits_tech: Counter[str] = Counter()
    for r in destructive:
        by_tech[r["technique"]] += 1
        hits_tech[r["technique"]] += blocked("Bash", {"command": r["command"]})
    benign = rows("bash_benign.tsv")
    out["corpus destructive blocked"] = (sum(hits_tech.values()), len(destructive))
    out["corpus benign blocked"] = (sum(blocked("Bash", {"command": r["command"]})
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
    return Guard.from_dict({"version": 1, "extends": "callwarden:recommended",
                            "workspace": {"root": "/home/dev/project", "home": "/home/dev"}})


def main(argv: list[str]) -> int:
    show = ("tuning",) if "--rows" in argv else ()
    show += ("held-out",) if "--held-out-rows" in argv else ()
    guard = recommended_for_the_corpus()
    for name, value in score(guard, show=show).items():
        if isinstance(value, tuple):
            hit, total = value
            print(f"{name:34} {hit:4}/{total:<4} {100 * hit / total:6.1f}%")
        else:
            print(f"{name}:")
            for k, v in value.items():  # type: ignore[attr-defined]
                print(f"    {k:30} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
