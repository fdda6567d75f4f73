"""The baseline policy against the corpus (aggregate rates, never per row)."""

from __future__ import annotations

import pytest
from _shell_support import corpus_rows

from callwarden.analysis.shell import analyze_command
from callwarden.conditions.shell import ShellMatcher
from callwarden.policyfile.bundled import baseline_config, baseline_rules

DESTRUCTIVE = corpus_rows("bash_destructive.tsv")
BENIGN = corpus_rows("bash_benign.tsv")


@pytest.fixture(scope="module")
def baseline() -> ShellMatcher:
    return ShellMatcher(baseline_config())


def hit_rate(matcher: ShellMatcher, rows: list[list[str]], **kwargs: str) -> float:
    hits = sum(matcher.check(analyze_command(row[2], **kwargs)) is not None for row in rows)
    return hits / len(rows)


def test_corpus_copies_are_complete() -> None:
    assert (len(DESTRUCTIVE), len(BENIGN)) == (450, 60)


def test_baseline_hits_destructive_rows(baseline: ShellMatcher) -> None:
    assert hit_rate(baseline, DESTRUCTIVE) >= 0.99


def test_baseline_spares_benign_rows(baseline: ShellMatcher) -> None:
    assert hit_rate(baseline, BENIGN) <= 0.02


def test_baseline_hits_destructive_rows_with_a_home_and_cwd() -> None:
    matcher = ShellMatcher({**baseline_config(), "home": "/home/dev", "cwd": "/home/dev/project"})
    kwargs = {"home": "/home/dev", "cwd": "/home/dev/project"}
    assert hit_rate(matcher, DESTRUCTIVE, **kwargs) >= 0.99
    assert hit_rate(matcher, BENIGN, **kwargs) <= 0.02


def test_baseline_without_opaque_still_hits_most_rows() -> None:
    config = {k: v for k, v in baseline_config().items() if k != "opaque"}
    assert hit_rate(ShellMatcher(config), DESTRUCTIVE) >= 0.95


def test_every_corpus_row_parses() -> None:
    errors = [row for row in DESTRUCTIVE + BENIGN if analyze_command(row[2]).parse_error]
    assert errors == []


def test_baseline_rules_have_unique_ids_and_compile() -> None:
    rules = baseline_rules()
    assert len({rule["id"] for rule in rules}) == len(rules)
    for rule in rules:
        ShellMatcher(rule["shell"])


def test_baseline_config_selects_one_rule() -> None:
    assert set(baseline_config("shell-opaque")) == {"opaque"}
