"""Writing a session's facts (state/_facts.py) from the engine's flow: merged with
compare-and-set, so concurrent processes never lose each other's values."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from callwarden._call import ToolCall
from callwarden._flow import Flow
from callwarden._profiles import untrusted_output
from callwarden.conditions.base import Subject
from callwarden.conditions.provenance import seen_in_output
from callwarden.conditions.roles import seen_values
from callwarden.engine.steps import StoreFailure, StoreStep
from callwarden.state._facts import FACTS_TTL, facts_key, merged

__all__ = ["FactsUse", "output_facts", "read_step", "remember", "remember_seen"]

_TRIES = 4
_UNREAD: Any = object()


def remember(store: Any, clock: Callable[[], float], session: str, category: str,
             values: Mapping[str, Any], deadline: float, *, found: Any = _UNREAD) -> Flow[bool]:
    """Adds ``values`` (kind -> strings) under ``category`` of the session's facts; True once
    written, False when the store failed or other writers won every try. A seen party that is
    lost only makes a ``seen`` rule stricter; the enforcement path withholds an untrusted output
    whose values could not be remembered. ``found``: the record as just read (the first try
    merges into it instead of reading it again)."""
    key = facts_key(session)
    for _ in range(_TRIES):
        if found is _UNREAD:
            found = yield StoreStep(store.get, store.aget, (key,), {}, deadline)
        if isinstance(found, StoreFailure):
            return False
        value = merged(found.value if found is not None else None, category, values, clock())
        written = yield StoreStep(store.compare_and_set, store.acompare_and_set,
                                  (key, found.version if found is not None else None, value),
                                  {"ttl": FACTS_TTL}, deadline)
        if written is True:
            return True
        found = _UNREAD
    return False


@dataclass(frozen=True, slots=True)
class FactsUse:
    """What a policy's rules need of the session's facts.

    Attributes:
        reads: a rule reads them (the engine loads them before the rules run).
        seen: (role, kind) pairs whose values are remembered once a call runs (``in: seen``).
        untrusted: untrusted tool output is remembered (a rule reads where values came from).
    """

    reads: bool = False
    seen: tuple[tuple[str, str], ...] = ()
    untrusted: bool = False

    @classmethod
    def of(cls, rules: Iterable[Any]) -> FactsUse:
        conditions = [c for r in rules for _, c in r.conditions]
        return cls(reads=any(getattr(c, "uses_facts", False) for c in conditions),
                   seen=tuple(sorted({p for c in conditions
                                      for p in getattr(c, "seen_roles", ())})),
                   untrusted=any(getattr(c, "reads_untrusted", False) for c in conditions))


def read_step(store: Any, session: str, deadline: float) -> StoreStep:
    """The store operation that reads a session's facts (a ``StoredValue`` or None)."""
    return StoreStep(store.get, store.aget, (facts_key(session),), {}, deadline)


def remember_seen(engine: Any, subject: Subject, pairs: tuple[tuple[str, str], ...],
                  deadline: float) -> Flow[bool]:
    """Remembers the values of a call that runs, for ``in: seen``; nothing is written when the
    facts read for this decision hold them already (the usual case in a long session)."""
    seen = seen_values(subject, pairs)
    if not seen or subject.call.session is None:
        return False
    known = (subject.memo.get("facts") or {}).get("seen") or {}
    if all(set(values) <= set(known.get(kind, ())) for kind, values in seen.items()):
        return True
    found = subject.memo.get("facts_record", _UNREAD)
    return (yield from remember(engine.store, engine.clock, subject.call.session, "seen", seen,
                                deadline, found=found))


def output_facts(engine: Any, use: FactsUse, call: ToolCall, output: Any
                 ) -> dict[str, list[str]] | None:
    """The entities to remember from a tool's output when the policy reads where values came
    from, the call has a session and the tool's output is untrusted content; else None."""
    if not use.untrusted or call.session is None \
            or not untrusted_output(engine.profile(call.tool)):
        return None
    return seen_in_output(output)
