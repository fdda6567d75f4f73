"""Output rules (``on: output``): what the model may see of a tool's result.

The result is seen by conditions as ``args.output``; a rule redacts or cuts it (modify),
replaces it with a message (deny) or stops the run (halt). Fails closed like decisions do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from callwarden._call import FrozenDict, Opaque, ToolCall, freeze_call_args, thaw
from callwarden._decision import Decision, Effect, Mode, Reason, Verdict
from callwarden._messages import output_withheld
from callwarden._profiles import ToolProfile
from callwarden.conditions.base import Subject

if TYPE_CHECKING:
    from callwarden.engine.engine import Engine
    from callwarden.engine.rules import Rule

__all__ = ["OutputCheck", "check_output", "nothing_after"]


class OutputCheck(NamedTuple):
    """What the output rules decided about a tool's result.

    ``output`` is what the model should see: the result (allow), the redacted or cut result
    (modify), or a message in its place (deny); for halt the run must stop.
    """

    effect: Effect
    output: Any
    rule: str | None
    source: str | None
    message: str
    reasons: tuple[Reason, ...]


def check_output(engine: Engine, decision: Decision, result: Any) -> OutputCheck | None:
    """Applies the output rules for the decided call to what the tool returned.

    The output is seen by conditions as ``args.output``. A structured result (an MCP result
    with text blocks and ``structuredContent``, a dict, a list) is screened as it is — a
    redaction rewrites it in place — and as the text it holds (its strings, one per line), so
    a rule written against text (``args: {output: "*CONFIDENTIAL*"}``) blocks it whatever
    shape it comes in. Returns None when no output rule exists for the tool (nothing to do),
    else the effect (allow, modify, deny, halt), the output to hand to the model, and the
    deciding rule. Fails closed like decisions do.
    """
    call = decision.call
    profile = engine._profile_cache.get(call.tool) or engine.profile(call.tool)
    plan = engine._index.plan(profile)
    if not plan.outputs:
        return None
    try:
        seen = call.replace_args(freeze_call_args({"output": result}))
    except Exception as e:  # a cyclic or absurdly deep result
        return OutputCheck(engine.settings.on_error, None, "output", None,
                           f"The output of '{call.tool}' was withheld: {e}.",
                           (Reason("output_invalid", str(e), "output"),))
    subject = Subject(seen, profile)
    chosen: tuple[Rule, Verdict] | None = None
    modified: tuple[Rule, Verdict] | None = None
    for rule in plan.outputs:
        if rule.dynamic is not None and not rule.dynamic(call):
            continue
        verdict = engine._inline(rule, subject)
        if verdict is None or (rule.mode or engine.settings.mode) is Mode.OBSERVE:
            continue
        if verdict.effect is Effect.MODIFY and verdict.args is not None:
            seen = seen.replace_args(verdict.args)  # type: ignore[arg-type]
            subject = Subject(seen, profile)
            modified = modified or (rule, verdict)
        elif verdict.effect is not Effect.ALLOW:
            chosen = _stricter(chosen, rule, verdict)
    shown = seen.args.get("output")
    if chosen is None and not isinstance(shown, str) and any(
            rule.effect in (Effect.DENY, Effect.HALT) for rule in plan.outputs):
        # Only a deny or a halt counts in the text view: rules that can only rewrite (a
        # redaction) have nothing more to say there.
        chosen = _text_view(engine, plan.outputs, call, profile, shown)
    if chosen is not None:
        rule, verdict = chosen
        text = verdict.message or output_withheld(call.tool, rule.id, verdict.detail)
        return OutputCheck(verdict.effect, text if verdict.effect is Effect.DENY else None,
                           rule.id, rule.source, text,
                           (Reason(verdict.code or "output.denied", verdict.detail or text,
                                   rule.id),))
    if modified is not None:
        rule, verdict = modified
        return OutputCheck(Effect.MODIFY, thaw(shown), rule.id,
                           rule.source, verdict.message or "",
                           (Reason(verdict.code or "modified", verdict.detail or "", rule.id),))
    return OutputCheck(Effect.ALLOW, result, None, None, "", ())


def _stricter(chosen: tuple[Rule, Verdict] | None, rule: Rule,
              verdict: Verdict) -> tuple[Rule, Verdict]:
    if chosen is None or verdict.effect.strictness > chosen[1].effect.strictness:
        return rule, verdict
    return chosen


def _text_view(engine: Engine, rules: Sequence[Rule], call: ToolCall, profile: ToolProfile,
               output: Any) -> tuple[Rule, Verdict] | None:
    """The strictest blocking verdict of the output rules on the text a structured output
    holds (its strings, one per line); rewrites found there cannot be mapped back, so only a
    deny or a halt counts."""
    strings: list[str] = []
    _strings(output, strings, 0)
    if not strings:
        return None
    subject = Subject(call.replace_args(FrozenDict(output="\n".join(strings))), profile)
    chosen: tuple[Rule, Verdict] | None = None
    for rule in rules:
        if rule.dynamic is not None and not rule.dynamic(call):
            continue
        verdict = engine._inline(rule, subject)
        if verdict is None or (rule.mode or engine.settings.mode) is Mode.OBSERVE:
            continue
        if verdict.effect in (Effect.DENY, Effect.HALT):
            chosen = _stricter(chosen, rule, verdict)
    return chosen


_MAX_DEPTH = 64


def _strings(value: Any, out: list[str], depth: int) -> None:
    """Collects the strings of a frozen value in order (keys excluded: they name fields)."""
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, bytes):
        out.append(value.decode("utf-8", "replace"))
    elif depth < _MAX_DEPTH and isinstance(value, Mapping):
        for item in value.values():
            _strings(item, out, depth + 1)
    elif depth < _MAX_DEPTH and isinstance(value, tuple):
        for item in value:
            _strings(item, out, depth + 1)
    elif isinstance(value, Opaque):
        out.append(repr(value))


def nothing_after(engine: Engine, decision: Decision) -> bool:
    """Whether nothing follows an allowed call's tool but its outcome: no output rules, no
    provenance to remember, no slots to let go of, no journal entry to close (what
    ``Engine.check_output``, ``facts.untrusted``, ``slots.holds_slots`` and
    ``journal.covers`` would each answer; the enforcement path then skips asking them one by
    one)."""
    call = decision.call
    plan = engine._plans.get(call.tool)
    return plan is not None and not plan.outputs and not (
        plan.holds_slots and decision.budgets) and not engine.facts.untrusted and (
        call.call_id == decision.decision_id or not engine.journal.settings.enabled)
