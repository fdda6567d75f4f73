"""Scores the ``paths:`` condition on the path-traversal corpus, per technique.

Run: ``python bench/score_paths.py [corpus.tsv]`` (default: tests/data/path_traversal.tsv).
Policy: ``sensitive: true`` + ``allow_roots: [".", "/tmp"]`` + ``read_roots: ["/usr", "/etc"]``,
root ``/home/dev/project``, home ``/home/dev``; symlink rows get their link created in a
scratch tree used as the filesystem root (``fs_root``). Each row is checked as a read.
"""

from __future__ import annotations

import collections
import os
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from callwarden.conditions.base import CompileEnv
from callwarden.conditions.paths import PathMatcher

ROOT = "/home/dev/project"
HOME = "/home/dev"
_LINK_RE = re.compile(r"ln -s ([^\s`]+) ([^\s`]+)")


def load_rows(path: Path) -> list[dict[str, str]]:
    lines = [ln for ln in path.read_text("utf-8").splitlines() if ln and not ln.startswith("#")]
    header = lines[0].split("\t")
    return [dict(zip(header, ln.split("\t"), strict=True)) for ln in lines[1:]]


def build_tree(rows: list[dict[str, str]], fs_root: Path) -> None:
    """Creates the project tree and every symlink the corpus rows describe."""
    (fs_root / ROOT.lstrip("/")).mkdir(parents=True, exist_ok=True)
    for row in rows:
        m = _LINK_RE.search(row["target"])
        if not m:
            continue
        target, link = m.groups()
        target = HOME + target[1:] if target.startswith("~") else target
        link_path = fs_root / ROOT.lstrip("/") / link
        link_path.parent.mkdir(parents=True, exist_ok=True)
        if not link_path.is_symlink():
            os.symlink(target, link_path)


def score(rows: list[dict[str, str]], fs_root: Path, case_insensitive: bool,
          roots: bool = True) -> None:
    config: dict[str, object] = {"sensitive": True, "root": ROOT, "home": HOME,
                                 "fs_root": str(fs_root), "case_insensitive": case_insensitive}
    if roots:
        config.update(allow_roots=[".", "/tmp"], read_roots=["/usr", "/etc"])
    matcher = PathMatcher(config, CompileEnv())
    per_tech: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    misses: list[str] = []
    for row in rows:
        label = row["label"]
        if label.startswith("sensitive-if-case") and not case_insensitive:
            # Case-sensitive filesystem: the row names another (missing) file; skip it.
            continue
        expect_hit = label == "sensitive" or (
            label.startswith("sensitive-if-case") and case_insensitive)
        hit = matcher.check_paths([row["path"]], write=False)
        ok = (hit is not None) == expect_hit
        key = f"{row['technique']} ({'deny' if expect_hit else 'allow'})"
        per_tech[key][0] += ok
        per_tech[key][1] += 1
        if not ok:
            misses.append(f"  MISS {label:<34} {row['path']!r} -> {hit}")
    print(f"\ncase_insensitive={case_insensitive} allow_roots={'on' if roots else 'off'}")
    print(f"{'technique':<52} {'correct':>8}")
    for key in sorted(per_tech):
        good, total = per_tech[key]
        print(f"{key:<52} {good:>3}/{total:<4} {100 * good / total:5.1f}%")
    sens = [r for r in rows if r["label"] == "sensitive"]
    benign = [r for r in rows if r["label"] == "benign"]
    denied = sum(matcher.check_paths([r["path"]]) is not None for r in sens)
    blocked = sum(matcher.check_paths([r["path"]]) is not None for r in benign)
    print(f"sensitive denied: {denied}/{len(sens)} ({100 * denied / len(sens):.1f}%)   "
          f"benign blocked: {blocked}/{len(benign)}")
    print("\n".join(misses) or "  no misses")


def main() -> None:
    corpus = Path(sys.argv[1]) if len(sys.argv) > 1 else (
        Path(__file__).resolve().parents[1] / "tests" / "data" / "path_traversal.tsv")
    rows = load_rows(corpus)
    with tempfile.TemporaryDirectory() as tmp:
        build_tree(rows, Path(tmp))
        for ci in (False, True):
            score(rows, Path(tmp), ci)
        # The shipped sensitive list alone, without any root confinement.
        score(rows, Path(tmp), True, roots=False)


if __name__ == "__main__":
    main()
