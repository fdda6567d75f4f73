"""Scores the baseline shell policy against the corpus copied into tests/data/.

Run: ``python bench/score_shell.py [--rows] [--home /home/dev --cwd /home/dev/project]``.
Prints the hit rate per category and per technique for destructive rows (must be denied or
asked), the false-positive rate on benign rows, and which rows only a path rule
(reads/writes) or only the opaque rule catches.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from callwarden.analysis.shell import analyze_command  # noqa: E402
from callwarden.conditions.shell import ShellMatcher  # noqa: E402
from callwarden.policyfile.bundled import baseline_rules  # noqa: E402

DATA = ROOT / "tests" / "data"


def read_rows(name: str) -> list[list[str]]:
    rows = []
    for line in (DATA / name).read_text("utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        rows.append(line.split("\t"))
    return rows[1:]  # header


def main() -> None:
    show_rows = "--rows" in sys.argv
    home = sys.argv[sys.argv.index("--home") + 1] if "--home" in sys.argv else None
    cwd = sys.argv[sys.argv.index("--cwd") + 1] if "--cwd" in sys.argv else None
    matchers = {
        rule["id"]: ShellMatcher({**rule["shell"], "home": home, "cwd": cwd})
        for rule in baseline_rules()
    }
    path_rules = {"shell-credentials", "shell-system-writes"}

    def verdicts(command: str) -> dict[str, str]:
        analysis = analyze_command(command, home=home, cwd=cwd)
        out = {}
        for rule_id, matcher in matchers.items():
            hit = matcher.check(analysis)
            if hit is not None:
                out[rule_id] = hit.detail
        return out

    destructive = read_rows("bash_destructive.tsv")
    benign = read_rows("bash_benign.tsv")
    per_cat: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    per_tech: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    strict_cat: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    only_paths: list[list[str]] = []
    only_opaque: list[list[str]] = []
    missed: list[list[str]] = []
    for row in destructive:
        category, technique, command = row[0], row[1], row[2]
        hits = verdicts(command)
        caught = bool(hits)
        without_opaque = bool(set(hits) - {"shell-opaque"})
        for table, key in ((per_cat, category), (per_tech, technique)):
            table[key][0] += caught
            table[key][1] += 1
        strict_cat[category][0] += without_opaque
        strict_cat[category][1] += 1
        if not caught:
            missed.append(row)
        elif not without_opaque:
            only_opaque.append(row)
        elif set(hits) - {"shell-opaque"} <= path_rules:
            only_paths.append(row)
    false_positives = [(row, verdicts(row[2])) for row in benign]
    false_positives = [(row, hits) for row, hits in false_positives if hits]

    total = len(destructive)
    hit = total - len(missed)
    print(f"destructive rows hit: {hit}/{total} = {hit / total:.1%}  (target >= 99%)")
    print(f"benign rows hit:      {len(false_positives)}/{len(benign)} = "
          f"{len(false_positives) / len(benign):.1%}  (target <= 2%)")
    print()
    print(f"{'category':22} {'hit':>9} {'rate':>7}   without opaque")
    for key in sorted(per_cat):
        ok, n = per_cat[key]
        strict_ok, _ = strict_cat[key]
        print(f"{key:22} {ok:>4}/{n:<4} {ok / n:>7.1%}   {strict_ok / n:.1%}")
    print()
    print(f"{'technique':26} {'hit':>9} {'rate':>7}")
    for key in sorted(per_tech):
        ok, n = per_tech[key]
        print(f"{key:26} {ok:>4}/{n:<4} {ok / n:>7.1%}")
    print()
    print(f"rows caught only by path rules (reads/writes): {len(only_paths)}")
    for row in only_paths if show_rows else only_paths[:60]:
        print(f"  [{row[0]}/{row[1]}] {row[2]}")
    print(f"rows caught only by the opaque rule (ask): {len(only_opaque)}")
    for row in only_opaque:
        print(f"  [{row[0]}/{row[1]}] {row[2]}")
    for row in missed:
        print(f"MISSED [{row[0]}/{row[1]}] {row[2]}")
    for row, hits in false_positives:
        print(f"FALSE POSITIVE {row[2]}: {hits}")


if __name__ == "__main__":
    main()
