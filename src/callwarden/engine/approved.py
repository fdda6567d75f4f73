"""What a call a person approved costs: its limits are counted when the approval is used
(``Engine.count_approved``), and a budget that ran out meanwhile refuses it."""

from __future__ import annotations

from time import perf_counter as _perf
from typing import TYPE_CHECKING

from callwarden._decision import Decision, Effect, Mode, Reason, RuleMatch
from callwarden._flow import Flow
from callwarden._messages import decision_message
from callwarden.conditions.base import Subject
from callwarden.engine.combine import Entry
from callwarden.engine.limits import budgets_of, limit_entry
from callwarden.engine.rules import Rule
from callwarden.engine.steps import StoreFailure, StoreStep
from callwarden.state._base import Counter, HistoryEntry

if TYPE_CHECKING:
    from callwarden.engine.engine import Engine

__all__ = ["count_approved"]

_NO_LIMIT = 1e300  # the limit of a counter a person approved going over: counted, never hit


def count_approved(engine: Engine, decision: Decision) -> Flow[Decision]:
    """Counts a call a person approved (or a remembered grant allowed) against its limits.

    At ``ask`` time limits are only checked (an exceeded one is stricter than the ask and
    wins, so nobody is asked about a call that could not run anyway). The call counts
    when the approval is used: this flow checks and counts its budgets and rates
    atomically, as a call allowed outright would, and records it as ``approved`` in the
    session history. Attempt caps counted the attempt already; a limit whose ``ask`` the
    person approved counts without stopping it.

    Returns the decision unchanged, or a deny (halt for a halting limit) when a budget ran
    out meanwhile or the store failed (``on_error``).
    """
    started = _perf()
    deadline = started + engine.settings.timeout
    call = decision.call
    current = call if decision.args is call.args else call.replace_args(decision.args)
    profile, plan = engine._plan(call.tool)
    store = engine.store
    session = call.session if engine._records_history else None
    if (not plan.limits and session is None) or store is None:
        return decision
    subject = Subject(current, profile)
    if plan.history and call.session is not None and any(
            r.needs_history for r in plan.limits):
        history = yield StoreStep(store.history, store.ahistory, (call.session,),
                                  engine._history_options(plan, deadline), deadline)
        if isinstance(history, StoreFailure):
            return _refuse_approved(decision, engine._store_error(history))
        subject.memo["history"] = history.to_cel()
    approved_over = {m.rule for m in decision.matched
                     if m.code == "limit.exceeded" and m.effect is Effect.ASK}
    counters: list[Counter] = []
    owners: list[Rule] = []
    for rule, counter in engine._limit_counters(plan, call, subject, current,
                                                decision.decision_id):
        if isinstance(counter, Entry):
            return _refuse_approved(decision, counter)
        if counter.always:
            continue  # attempt caps counted this call when it was asked
        if rule.id in approved_over:
            # The person approved going over this limit: count it, never stop on it.
            counter = Counter(counter.key, _NO_LIMIT, counter.window, counter.weight,
                              shard=counter.shard, members=counter.members)
        counters.append(counter)
        owners.append(rule)
    if not counters and session is None:
        return decision
    record = None
    if session is not None:
        if_exceeded = tuple((float(_refusal(r).strictness), _refusal(r).value)
                            for r in owners)
        record = HistoryEntry(session, call.tool, "approved", if_exceeded)
    now = engine.clock()
    states = yield StoreStep(store.consume, store.aconsume, (counters,),
                             {"now": now, "commit": True, "deadline": deadline,
                              "record": record}, deadline)
    if isinstance(states, StoreFailure):
        return _refuse_approved(decision, engine._store_error(states))
    for rule, state, counter in zip(owners, states, counters, strict=True):
        if state.exceeded and (rule.mode or engine.settings.mode) is Mode.ENFORCE:
            entry = limit_entry(rule, state, now, engine.settings.mode, counter)
            refusal = entry.verdict._replace(effect=_refusal(rule))
            return _refuse_approved(decision, entry._replace(verdict=refusal))
    return decision._replace(budgets=budgets_of(owners, counters, states, True))

def _refuse_approved(decision: Decision, entry: Entry) -> Decision:
    verdict = entry.verdict
    effect = verdict.effect
    if effect is Effect.ALLOW:  # on_error: allow ignores the failure
        return decision
    if effect is Effect.ASK or effect is Effect.MODIFY:
        effect = Effect.DENY  # asking again after an approval would loop
    text = verdict.detail or verdict.message or entry.rule
    reason = Reason(verdict.code or "limit.exceeded", text, entry.rule)
    match = RuleMatch(entry.rule, entry.source, effect, entry.mode, reason.code, text)
    message = decision_message(effect, decision.call.tool, entry.rule,
                               entry.verdict.message, (reason,))
    return decision._replace(effect=effect, args=decision.call.args,
                             reasons=(reason, *decision.reasons), rule=entry.rule,
                             source=entry.source, matched=(*decision.matched, match),
                             message=message)


def _refusal(rule: Rule) -> Effect:
    """What an approved call that went over this limit gets: halt for a halting limit."""
    return Effect.HALT if rule.effect is Effect.HALT else Effect.DENY
