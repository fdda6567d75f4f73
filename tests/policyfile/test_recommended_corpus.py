"""callwarden:recommended against the shell corpus, split into a tuning part and a held-out
part by a hash of the command (the split bench/score_recommended.py prints)."""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path

import pytest

from callwarden import Guard

DATA = Path(__file__).parents[1] / "data"


def rows(name: str) -> list[dict[str, str]]:
    lines = [ln for ln in (DATA / name).read_text().splitlines() if not ln.startswith("#")]
    return list(csv.DictReader(lines, delimiter="\t", quoting=csv.QUOTE_NONE))


def held_out(row: dict[str, str]) -> bool:
    if row["source"].startswith("named in"):
        return False  # what an issue names is tuned on by definition
    return hashlib.sha256(row["command"].encode()).digest()[0] % 2 == 1


def part(kind: str, held: bool) -> list[str]:
    both = rows(f"bash_{kind}.tsv") + rows(f"bash_{kind}_extra.tsv")
    return [r["command"] for r in both if held_out(r) is held]


@pytest.fixture(scope="module")
def guard() -> Guard:
    # A generous deadline: a decision outlasting the default second on a busy machine is a
    # deny that would read as a wrong answer.
    return Guard.from_dict({"version": 1, "extends": "callwarden:recommended", "timeout": "60s",
                            "workspace": {"root": "/home/dev/project", "home": "/home/dev"}})


def blocked(guard: Guard, commands: list[str]) -> list[str]:
    return [c for c in commands if not guard.check("Bash", {"command": c}).allowed]


def allowed(guard: Guard, commands: list[str]) -> list[str]:
    return [c for c in commands if guard.check("Bash", {"command": c}).allowed]


def test_the_split_is_deterministic_and_keeps_issue_rows_for_tuning() -> None:
    assert (len(part("benign", False)), len(part("benign", True))) == (83, 67)
    assert (len(part("destructive", False)), len(part("destructive", True))) == (253, 231)
    assert "docker image prune -f" in part("benign", False)


@pytest.mark.parametrize("held", [False, True], ids=["tuning", "held-out"])
def test_every_destructive_row_is_denied_or_asked(guard: Guard, held: bool) -> None:
    assert allowed(guard, part("destructive", held)) == []


@pytest.mark.parametrize("held", [False, True], ids=["tuning", "held-out"])
def test_at_most_two_benign_rows_are_blocked(guard: Guard, held: bool) -> None:
    assert len(blocked(guard, part("benign", held))) <= 2
