"""How verdicts from several rules combine into one effect: a strategy object, not branches."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

from callwarden._decision import Mode, Verdict

__all__ = ["Combiner", "Entry", "FirstMatch", "StrictestWins"]


class Entry(NamedTuple):
    """One rule's verdict on a call, as the combiner sees it."""

    rule: str
    source: str | None
    verdict: Verdict
    mode: Mode
    order: int
    decisive: bool = True


class Combiner(Protocol):
    """Picks the deciding entry among the decisive, non-modify entries (None: nobody decided)."""

    def select(self, entries: Sequence[Entry]) -> Entry | None: ...


class StrictestWins:
    """``halt > deny > ask > allow``; among equals, the first rule in policy order decides."""

    __slots__ = ()

    def select(self, entries: Sequence[Entry]) -> Entry | None:
        best: Entry | None = None
        rank = -1
        for entry in entries:
            strictness = entry.verdict.effect.strictness
            if strictness > rank:
                best, rank = entry, strictness
        return best


class FirstMatch:
    """The first rule in policy order with an opinion decides (firewall style)."""

    __slots__ = ()

    def select(self, entries: Sequence[Entry]) -> Entry | None:
        return min(entries, key=lambda e: e.order) if entries else None


COMBINERS: dict[str, Combiner] = {"strictest": StrictestWins(), "first_match": FirstMatch()}
