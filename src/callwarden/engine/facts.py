"""Writing a session's facts (state/_facts.py) from the engine's flow: merged with
compare-and-set, so concurrent processes never lose each other's values."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from time import perf_counter as _perf
from types import MappingProxyType
from typing import Any

from callwarden._call import ToolCall
from callwarden._flow import Flow
from callwarden._profiles import untrusted_output
from callwarden.conditions.base import Subject
from callwarden.conditions.provenance import seen_in_output
from callwarden.conditions.roles import seen_values
from callwarden.engine.steps import StoreFailure, StoreStep
from callwarden.state._facts import CATEGORIES, FACTS_TTL, facts_key, merged

__all__ = ["FactsUse", "output_facts", "remember"]

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


class FactsUse:
    """What a policy's rules need of the session's facts, and the facts as last read.

    Attributes:
        reads: a rule reads them (the engine loads them before the rules run).
        seen: (role, kind) pairs whose values are remembered once a call runs (``in: seen``).
        untrusted: untrusted tool output is remembered (a rule reads where values came from).
    """

    __slots__ = ("_views", "reads", "seen", "untrusted")

    def __init__(self, reads: bool = False, seen: tuple[tuple[str, str], ...] = (),
                 untrusted: bool = False) -> None:
        self.reads, self.seen, self.untrusted = reads, seen, untrusted
        # session -> (the record as read, its view): a record unchanged since is not decoded
        # (nor turned into sets) again, so a long session's facts cost what a short one's do.
        self._views: dict[str, tuple[Any, dict[str, Any]]] = {}

    @classmethod
    def of(cls, rules: Iterable[Any]) -> FactsUse:
        conditions = [c for r in rules for _, c in r.conditions]
        return cls(reads=any(getattr(c, "uses_facts", False) for c in conditions),
                   seen=tuple(sorted({p for c in conditions
                                      for p in getattr(c, "seen_roles", ())})),
                   untrusted=any(getattr(c, "reads_untrusted", False) for c in conditions))

    def load(self, store: Any, subject: Subject, deadline: float) -> Flow[StoreFailure | None]:
        """Loads the session's facts into ``subject.memo`` when the rules read them and the
        call has a session (``facts``: each kind's values as a set; ``facts_record``: the
        record, for writers); the store's failure if it failed."""
        session = subject.call.session
        if not self.reads or session is None:
            return None
        cached = self._views.get(session)
        found = yield StoreStep(store.get_changed, store.aget_changed,
                                (facts_key(session), cached[0] if cached else None), {},
                                deadline)
        return self._take(subject, session, found, cached)

    def load_inline(self, store: Any, subject: Subject, deadline: float) -> StoreFailure | None:
        """``load`` on a store that never waits (the engine's fast path): called directly."""
        session = subject.call.session
        if not self.reads or session is None:
            return None
        if _perf() > deadline:
            return StoreFailure(TimeoutError("the deadline passed before the state store was "
                                             "reached"))
        cached = self._views.get(session)
        try:
            if cached is None:
                found = store.get_changed(facts_key(session), None)
            else:  # a kept record (never None: see _take), asked for under its own key
                record = cached[0]
                found = store.get_changed(record.key, record)
                if found is record:  # unchanged (the usual case), inlined
                    memo = subject.memo
                    memo["facts"], memo["facts_record"] = cached[1], found
                    return None
        except Exception as e:  # StoreUnavailable, or a store bug: both fail closed
            return StoreFailure(e)
        return self._take(subject, session, found, cached)

    def _take(self, subject: Subject, session: str, found: Any,
              cached: tuple[Any, dict[str, Any]] | None) -> StoreFailure | None:
        """Puts what the store answered (``cached``: the view as it was when asked) into
        ``subject.memo``."""
        if isinstance(found, StoreFailure):
            return found
        if found is None:
            view = _NO_FACTS
        elif cached is not None and found is cached[0]:
            view = cached[1]  # unchanged since (the usual case): not decoded again
        else:
            view = _view(found.value)
            if len(self._views) >= _MAX_VIEWS:
                self._views.clear()  # a process serving this many sessions rereads
            self._views[session] = (found, view)
        subject.memo["facts"] = view
        subject.memo["facts_record"] = found
        return None

    def after(self, engine: Any, subject: Subject, allowed: bool, deadline: float
              ) -> Flow[bool] | tuple[()]:
        """Once a call is decided (not a dry one): the writes that remember the values of a
        call that runs (``allowed``) for ``in: seen``, when a rule reads them; ``()`` when
        there is nothing to write — the facts read for this decision hold them already (the
        usual case in a long session)."""
        session = subject.call.session
        if not self.seen or not allowed or session is None \
                or not any(subject.role_values(role) for role, _ in self.seen):
            return ()
        seen = seen_values(subject, self.seen)
        known = (subject.memo.get("facts") or {}).get("seen") or {}
        if all(set(values) <= known.get(kind, frozenset()) for kind, values in seen.items()):
            return ()
        return remember(engine.store, engine.clock, session, "seen", seen, deadline,
                        found=subject.memo.get("facts_record", _UNREAD))


_MAX_VIEWS = 4096
_NO_FACTS: Mapping[str, Any] = MappingProxyType({})  # a session without facts (shared: read-only)


def _view(value: Mapping[str, Any]) -> dict[str, Any]:
    """A facts record as the conditions read it: each kind's values as a frozenset."""
    view: dict[str, Any] = dict(value)
    for category in CATEGORIES:
        section = value.get(category)
        if isinstance(section, Mapping):
            view[category] = {kind: frozenset(v for v in values if isinstance(v, str))
                              for kind, values in section.items()
                              if isinstance(values, list)}
    return view


def output_facts(engine: Any, use: FactsUse, call: ToolCall, output: Any
                 ) -> dict[str, list[str]] | None:
    """The entities to remember from a tool's output when the policy reads where values came
    from, the call has a session and the tool's output is untrusted content; else None."""
    if not use.untrusted or call.session is None \
            or not untrusted_output(engine.profile(call.tool)):
        return None
    return seen_in_output(output)
