"""Explain a recorded decision: what was decided, by which rules and why; optionally, how a
policy file decides the same call today, rule by rule (every rule considered, matched or not).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from callwarden._decision import Decision, Phase
from callwarden.audit import decision_event
from callwarden.review.reader import EventReader

__all__ = ["explain_decision", "explain_event", "explain_with_policy", "find_decision"]


def find_decision(decision_id: str, paths: Iterable[str | Path]
                  ) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """Finds a decision event and its outcome events by decision id (streaming)."""
    found: dict[str, Any] | None = None
    outcomes: list[dict[str, Any]] = []
    for event in EventReader(paths):
        if event.get("decision_id") != decision_id:
            continue
        if event.get("type") == "decision" and found is None:
            found = event
        elif event.get("type") == "outcome":
            outcomes.append(event)
    return found, outcomes


def _json(value: Any, limit: int = 400) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
    return text if len(text) <= limit else text[:limit] + "…"


def explain_event(event: dict[str, Any], outcomes: Iterable[dict[str, Any]] = ()) -> str:
    """Renders a decision for people: the one renderer behind ``callwarden check``,
    ``callwarden explain`` and the review tools.

    ``event`` is a decision audit event (a recorded one, or :func:`explain_decision`'s).
    """
    where = f" ({event.get('source')})" if event.get("source") else ""
    lines = [f"{str(event.get('effect')).upper()}  {event.get('tool')}  by rule "
             f"'{event.get('rule')}'{where}"]
    if event.get("would_effect"):
        lines.append(f"  would be: {event['would_effect']} in enforce mode "
                     f"(mode: {event.get('mode')})")
    if event.get("message"):
        lines.append(f"  message: {event['message']}")
    for reason in event.get("reasons") or ():
        rule = reason.get("rule")
        by = f" (rule {rule})" if rule and rule != event.get("rule") else ""
        lines.append(f"  reason: [{reason.get('code')}] {reason.get('message')}{by}")
    matched = event.get("matched") or []
    if matched:
        lines.append("  rules that matched, in evaluation order:")
        for m in matched:
            mark = "→" if m.get("rule") == event.get("rule") else "-"
            mode = f", {m.get('mode')}" if m.get("mode") not in (None, "enforce") else ""
            detail = f": {m.get('detail')}" if m.get("detail") else ""
            lines.append(f"    {mark} {m.get('rule')} ({m.get('source') or 'python'}): "
                         f"{m.get('effect')}{mode} [{m.get('code')}]{detail}")
    else:
        lines.append("  no rule matched: the policy default decided")
    lines.append(f"  args: {_json(event.get('args'))}")
    if "effective_args" in event:
        lines.append(f"  effective args: {_json(event.get('effective_args'))}")
    if event.get("context"):
        lines.append(f"  context: {_json(event.get('context'))}")
    who = ", ".join(f"{k} {event[k]}" for k in ("agent", "session", "principal", "framework")
                    if event.get(k))
    if who:
        lines.append(f"  call: {who}")
    for r in event.get("redactions") or ():
        lines.append(f"  redacted: {r.get('path')} ({r.get('detector')})")
    if event.get("truncated"):
        lines.append(f"  cut to fit the event size bound: {', '.join(event['truncated'])}")
    for o in outcomes:
        error = f": {o.get('error')}" if o.get("error") else ""
        lines.append(f"  outcome: {o.get('status')} in {o.get('duration_ms')} ms{error}")
    when = f" at {event['time']}" if event.get("time") else ""
    lines.append(f"  decision {event.get('decision_id')}{when} · policy {event.get('policy')}"
                 f" · {event.get('elapsed_us')} µs")
    return "\n".join(lines)


def explain_decision(decision: Decision) -> str:
    """Renders a decision just made (``callwarden check``) as :func:`explain_event` renders
    a recorded one, its arguments redacted as the audit log would write them."""
    return explain_event(decision_event(decision))


def explain_with_policy(event: dict[str, Any], guard: Any) -> str:
    """Re-decides the recorded call with ``guard`` and lists every rule considered for its tool.

    A rule is *considered* when its ``match:`` selects the tool (the engine's rule index plan);
    it *matched* when it had an opinion on this call.
    """
    engine = guard.engine
    tool = str(event.get("tool"))
    args = event.get("args") if isinstance(event.get("args"), dict) else {}
    context = event.get("context") if isinstance(event.get("context"), dict) else None
    decision = guard.check(tool, args, agent=event.get("agent"), session=event.get("session"),
                           principal=event.get("principal"), framework=event.get("framework"),
                           context=context or None)
    profile = engine.profile(tool)
    plan = engine._index.plan(profile)
    considered: dict[int, Any] = {}
    for rule in (*plan.mutators, *plan.validators, *getattr(plan, "limits", ())):
        considered[id(rule)] = rule
    for _arg, table in plan.by_value:
        for rules in table.values():
            for rule in rules:
                considered[id(rule)] = rule
    by_value = {id(r) for _arg, table in plan.by_value for rs in table.values() for r in rs}
    matched = {m.rule: m for m in decision.matched}
    same = decision.effect.value == event.get("effect")
    lines = [
        f"with {decision.policy}: {decision.effect.value.upper()} by rule '{decision.rule}'"
        f"{' (' + decision.source + ')' if decision.source else ''}"
        f" — {'same as recorded' if same else 'recorded: ' + str(event.get('effect'))}",
        f"  tool '{tool}': kind {profile.kind}"
        f"{', side effect ' + str(profile.side_effect) if getattr(profile, 'side_effect', None) else ''}",
    ]
    if decision.would_effect is not None:
        lines.append(f"  would be: {decision.would_effect.value} in enforce mode")
    ordered = sorted(considered.values(), key=lambda r: r.order)
    lines.append(f"  rules considered ({len(ordered)} of {len(engine.rules)}; the others do "
                 "not select this tool):")
    for rule in ordered:
        m = matched.get(rule.id)
        where = rule.source or "python"
        if m is not None:
            mark = "→" if rule.id == decision.rule else "✓"
            mode = f", {m.mode.value}" if m.mode.value != "enforce" else ""
            detail = f": {m.detail}" if m.detail else ""
            lines.append(f"    {mark} {rule.id} ({where}) matched: {m.effect.value}{mode} "
                         f"[{m.code}]{detail}")
        else:
            why = "its argument values did not match" if id(rule) in by_value else \
                "its conditions did not hold"
            if rule.phase is Phase.MUTATE:
                why = "no rewrite needed" if rule.policy is None else "no opinion"
            elif rule.phase is Phase.LIMIT:
                why = "within its limit"
            lines.append(f"    ✗ {rule.id} ({where}) did not match: {why}")
    for m in decision.matched:
        if not any(r.id == m.rule for r in ordered):  # profile approvals, deadline entries
            lines.append(f"    ✓ {m.rule} ({m.source or 'engine'}): {m.effect.value} "
                         f"[{m.code}] {m.detail}")
    for reason in decision.reasons:
        lines.append(f"  reason: [{reason.code}] {reason.message}")
    return "\n".join(lines)
