"""Helpers shared by the shell tests."""

from __future__ import annotations

from pathlib import Path

from callwarden.analysis.shell import SimpleCommand, analyze_command

DATA = Path(__file__).resolve().parents[2] / "data"


def corpus_rows(name: str) -> list[list[str]]:
    """Rows of a corpus TSV copied into tests/data (header and comments dropped)."""
    lines = [ln for ln in (DATA / name).read_text("utf-8").splitlines() if ln and ln[0] != "#"]
    return [ln.split("\t") for ln in lines[1:]]


def only(command: str, **kwargs: str) -> SimpleCommand:
    """The single command of ``command``'s analysis."""
    analysis = analyze_command(command, **kwargs)
    assert len(analysis.commands) == 1, analysis.commands
    return analysis.commands[0]
