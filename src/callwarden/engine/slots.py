"""The slots of ``concurrent`` limits a call holds, found again when its outcome is recorded.

A slot is held by the decision's id under each counter of the limit for the call. The counters
are built again from the policy, the call's effective arguments and that id, for the concurrent
limits the decision's budgets name (those that applied to it), so a decision read back from
JSON (the service's ``/v1/outcome``, another worker of it) lets go of its slots too. A slot
the call does not hold (the limit was over, the policy changed) is skipped by the store; one
a policy reload no longer finds is let go at the end of its hold.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from callwarden._decision import Decision
from callwarden.state._base import Counter

if TYPE_CHECKING:
    from callwarden.engine.engine import Engine

__all__ = ["holds_slots", "slots_of"]


def slots_of(engine: Engine, decision: Decision) -> list[Counter]:
    """The counters whose member the decision's id is: its slots of ``concurrent`` limits."""
    call = decision.call
    profile, plan = engine._plan(call.tool)
    named = {budget.rule for budget in decision.budgets}
    current = call if decision.args is call.args else call.replace_args(decision.args)
    slots: list[Counter] = []
    for rule in plan.limits:
        if rule.limit.kind == "concurrent" and rule.id in named:
            try:
                slots += rule.limit.counters(rule.id, current, profile, decision.decision_id)
            except ValueError:  # it could not have taken one either
                continue
    return slots


def holds_slots(engine: Engine, decision: Decision) -> bool:
    """Whether a decided call may hold slots to let go: it has budgets and its tool a
    ``concurrent`` limit (True when that cannot be told: letting go of none is harmless)."""
    if not decision.budgets or engine.store is None:
        return False
    try:
        return engine._plan(decision.call.tool)[1].holds_slots
    except Exception:
        return True
