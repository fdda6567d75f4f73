"""The execution journal: a call with side effects runs once, across crashes and resumes.

A call that its caller names (a framework's tool-call id) and that has side effects — its
profile says ``write``, ``destructive`` or ``external``, or a person approved it — is written to
the state store before it runs, and closed when its outcome is recorded::

    journal:{session}|call-id  ->  {"state": "executing", "digest": ..., "decision_id": ...,
                                    "approval": "request or grant id", "started_at": ...}
                               ->  {"state": "done" | "failed", "outcome": "ok", ...}

A run resumed after a crash (a LangGraph checkpoint, an OpenAI Agents ``RunState``, a retried
service request) sends such a call again under the same id. If its entry is still
``executing``, nobody knows whether it ran: it is *in doubt*. It is not run again on its own: the
policy's ``on_in_doubt`` decides (``ask`` by default — the person is told it may have happened
already —, ``deny``, or ``allow`` to run it again), never looser than the policy's own decision.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from callwarden._call import ToolCall
from callwarden._decision import Decision, Effect, Reason
from callwarden._flow import Flow
from callwarden._messages import decision_message, in_doubt_message
from callwarden._profiles import SideEffect, ToolProfile
from callwarden.approvals._records import call_digest
from callwarden.engine.steps import StoreFailure, StoreStep

__all__ = ["APPROVAL_CODES", "IN_DOUBT", "Journal", "JournalSettings", "in_doubt", "journal_key",
           "journaled", "unjournaled"]

_SIDE_EFFECTS = frozenset({SideEffect.WRITE, SideEffect.DESTRUCTIVE, SideEffect.EXTERNAL})
#: Reason codes of a decision a person's approval (or a standing grant) let through.
APPROVAL_CODES = frozenset({"approved", "approved_with_edit", "approval_remembered",
                            "approval_timed_out"})
IN_DOUBT = "in_doubt"


@dataclass(frozen=True, slots=True)
class JournalSettings:
    """The policy's ``journal:`` and ``on_in_doubt:`` settings.

    Attributes:
        enabled: Whether calls are journaled at all (``journal: false`` turns it off).
        on_in_doubt: What a call in doubt gets: ask, deny, or allow (run it again).
        ttl: How long an entry of a call that started stays (a resume after that is not
            recognized).
        keep: How long a closed entry stays (for inspection; it never blocks a call).
    """

    enabled: bool = True
    on_in_doubt: Effect = Effect.ASK
    ttl: float = 7 * 86400.0
    keep: float = 3600.0


def journal_key(session: str | None, call_id: str) -> str:
    """Where a call's entry lives (hash-tagged per session, as its history is)."""
    return f"journal:{{{session or ''}}}|{call_id}"


def _digest(call: ToolCall) -> str:
    """What tells two attempts of one call from two calls under one id: the tool, its
    arguments, the principal and the session. Not the policy version: a policy reloaded
    between the crash and the resume must still recognize the call."""
    try:
        # JSON keeps the types apart that matter here (1, 1.0, "1", true) and costs a tenth of
        # the typed encoding approvals use; that one takes what JSON cannot (huge integers).
        text = json.dumps([call.tool, call.args, call.principal, call.session],
                          sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return call_digest(call.tool, call.args, call.principal, call.session, None)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class Journal:
    """Reads and writes the execution journal of one engine (see the module docstring).

    Args:
        settings: The policy's journal settings.
        store: A store with key-value records (``get`` / ``put`` / ``compare_and_set``), or
            None: entries are then kept in this process's memory (made on first use).
        clock: Wall clock for the entries' times.
    """

    __slots__ = ("_store", "_written", "clock", "settings")

    def __init__(self, settings: JournalSettings, store: Any = None,
                 clock: Any = None) -> None:
        self.settings = settings
        self._store = store if store is not None and hasattr(store, "compare_and_set") \
            else None
        self.clock = clock or time.time
        # decision id -> the version of the entry this process wrote for it (closed with one
        # round trip)
        self._written: dict[str, tuple[int, dict[str, Any]]] = {}

    @property
    def store(self) -> Any:
        """The store holding the entries."""
        if self._store is None:
            from callwarden.state import MemoryStore

            self._store = MemoryStore()
        return self._store

    def covers(self, call: ToolCall, profile: ToolProfile, decision_id: str, *,
               approved: bool = False) -> bool:
        """Whether a call is journaled: its caller named it (the call id is not the one the
        guard made up) and it has side effects, or a person approved it."""
        return self.settings.enabled and call.call_id != decision_id and (
            approved or profile.side_effect in _SIDE_EFFECTS)

    def covers_decision(self, decision: Decision, profile: ToolProfile) -> bool:
        """:meth:`covers` for a decided call (approved when a reason says so)."""
        return self.covers(decision.call, profile, decision.decision_id, approved=any(
            r.code in APPROVAL_CODES for r in decision.reasons))

    # -- the flows (run by the engine's or the enforcement path's driver) -------------------
    #
    # A call that runs costs two round trips in the usual case: one that creates its entry
    # (none is there yet) and one that closes it at the version this process wrote.

    def read(self, call: ToolCall, deadline: float) -> Flow[Mapping[str, Any] | StoreFailure | None]:
        """The entry of a call in doubt (started, no outcome, the same call), a store failure,
        or None."""
        store = self.store
        found = yield StoreStep(store.get, store.aget, (journal_key(call.session, call.call_id),),
                                {}, deadline)
        if isinstance(found, StoreFailure):
            return found
        return _in_doubt_entry(found, _digest(call))

    def claim(self, decision: Decision, deadline: float, *, approval: str | None = None,
              force: bool = False) -> Flow[Mapping[str, Any] | StoreFailure | None]:
        """Writes ``executing`` for a call about to run, unless an earlier attempt of it is in
        doubt: then that attempt's entry is returned and nothing is written (``force``: write
        it all the same, the call runs again). None once written; a store failure means the
        call must not run (nobody could tell later whether it did)."""
        call = decision.call
        store = self.store
        key = journal_key(call.session, call.call_id)
        digest = _digest(call)
        entry = {"state": "executing", "digest": digest, "tool": call.tool,
                 "decision_id": decision.decision_id, "approval": approval,
                 "started_at": self.clock()}
        expected: int | None = None  # the usual case: no entry yet
        for _ in range(_TRIES):
            written = yield StoreStep(store.compare_and_set, store.acompare_and_set,
                                      (key, expected, entry), {"ttl": self.settings.ttl},
                                      deadline)
            if isinstance(written, StoreFailure):
                return written
            if written is True:
                self._wrote(decision.decision_id, 1 if expected is None else expected + 1, entry)
                return None
            found = yield StoreStep(store.get, store.aget, (key,), {}, deadline)
            if isinstance(found, StoreFailure):
                return found
            doubt = _in_doubt_entry(found, digest)
            if doubt is not None and not force:
                return doubt
            expected = None if found is None else found.version
        return StoreFailure(RuntimeError("the entry kept changing under other writers"))

    def close(self, decision: Decision, outcome: str, deadline: float) -> Flow[bool]:
        """Marks a call's entry ``done`` (``failed`` when the tool raised) once its outcome is
        recorded; False when the store failed (the call then stays in doubt: safe)."""
        call = decision.call
        store = self.store
        key = journal_key(call.session, call.call_id)
        closing = {"state": "failed" if outcome == "error" else "done", "outcome": outcome,
                   "ended_at": self.clock()}
        mine = self._written.pop(decision.decision_id, None)
        if mine is not None:  # written by this process: closed at that version, or not ours
            version, entry = mine
            written = yield StoreStep(store.compare_and_set, store.acompare_and_set,
                                      (key, version, {**entry, **closing}),
                                      {"ttl": self.settings.keep}, deadline)
            if written is True:
                return True
        found = yield StoreStep(store.get, store.aget, (key,), {}, deadline)
        if isinstance(found, StoreFailure):
            return False
        if found is None or found.value.get("decision_id") != decision.decision_id:
            return True  # not ours (expired, or a later attempt of the same call took it)
        written = yield StoreStep(store.compare_and_set, store.acompare_and_set,
                                  (key, found.version, {**found.value, **closing}),
                                  {"ttl": self.settings.keep}, deadline)
        return written is True

    def _wrote(self, decision_id: str, version: int, entry: dict[str, Any]) -> None:
        written = self._written
        if len(written) >= _WRITTEN_KEPT:
            written.clear()  # a process deciding this many calls closes them the long way
        written[decision_id] = (version, entry)


_TRIES = 4
_WRITTEN_KEPT = 4096


def _in_doubt_entry(found: Any, digest: str) -> Mapping[str, Any] | None:
    if found is None:
        return None
    value: Mapping[str, Any] = found.value
    if value.get("state") != "executing" or value.get("digest") != digest:
        return None
    return value


def in_doubt(decision: Decision, entry: Mapping[str, Any], effect: Effect) -> Decision:
    """The decision of a call in doubt: the policy's own, made no looser than ``effect``
    (``on_in_doubt``); its reasons say when the earlier attempt started."""
    started = entry.get("started_at")
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(started)) \
        if isinstance(started, int | float) else "an unknown time"
    approval = entry.get("approval")
    text = (f"this call (id {decision.call.call_id}) was started at {when} (decision "
            f"{entry.get('decision_id')}" + (f", approval {approval}" if approval else "")
            + ") and no outcome was recorded: it may already have run")
    reason = Reason(IN_DOUBT, text, "journal")
    reasons = (reason, *decision.reasons)
    current = decision.effect
    if current.strictness >= effect.strictness or effect is Effect.ALLOW:
        message = decision.message
        if current is Effect.ASK:
            message = in_doubt_message(decision.call.tool, current, text, decision.message)
        return decision._replace(reasons=reasons, message=message)
    # An ask keeps a rewrite's arguments (what runs once a person approves); a refusal, the
    # call as asked.
    args = decision.args if effect is Effect.ASK else decision.call.args
    return decision._replace(effect=effect, args=args, reasons=reasons,
                             rule="journal", source=None,
                             message=in_doubt_message(decision.call.tool, effect, text, None))


def journaled(journal: Journal, decision: Decision, dry: bool, deadline: float,
              on_error: Effect) -> Flow[Decision]:
    """The decision of a call the journal may hold (a caller's call id; side effects, or an
    ask a person may approve): made no looser when an earlier attempt is in doubt, and written
    as ``executing`` when it lets the call run (not for a dry decision; an approved call is
    written when its approval is used). A call whose entry cannot be read or written is
    refused (``on_error``)."""
    if dry or not decision.effect.allows:
        found = yield from journal.read(decision.call, deadline)
    else:
        found = yield from journal.claim(decision, deadline)
    if isinstance(found, StoreFailure):
        return unjournaled(decision, on_error)
    if found is None:
        return decision  # not in doubt (and written, when it runs)
    decision = in_doubt(decision, found, journal.settings.on_in_doubt)
    if dry or not decision.effect.allows:
        return decision
    # on_in_doubt: allow — it runs again, journaled as this attempt
    claimed = yield from journal.claim(decision, deadline, force=True)
    return decision if claimed is None else unjournaled(decision, on_error)


def unjournaled(decision: Decision, on_error: Effect) -> Decision:
    """A call that may not run because its journal entry could not be read or written (the
    policy's ``on_error``; ``allow`` lets it run unjournaled)."""
    if on_error.allows:
        return decision
    reason = Reason("state_unavailable", "the state store could not read or record that the "
                    "call is starting (the journal of calls with side effects); failing "
                    "closed", "journal")
    return decision._replace(
        effect=on_error, args=decision.call.args, reasons=(reason, *decision.reasons),
        rule="journal", source=None,
        message=decision_message(on_error, decision.call.tool, "journal", None, (reason,)))
