"""Output rules (``on: output``): what the model may see of a tool's result.

The result is seen by conditions as ``args.output``; a rule redacts or cuts it (modify),
replaces it with a message (deny) or stops the run (halt). Fails closed like decisions do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from callwarden._call import freeze_call_args, thaw
from callwarden._decision import Decision, Effect, Mode, Reason, Verdict
from callwarden.conditions.base import Subject

if TYPE_CHECKING:
    from callwarden.engine.engine import Engine
    from callwarden.engine.rules import Rule

__all__ = ["OutputCheck", "check_output"]


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

    The output is seen by conditions as ``args.output``. Returns None when no output rule
    exists for the tool (nothing to do), else the effect (allow, modify, deny, halt), the
    output to hand to the model, and the deciding rule. Fails closed like decisions do.
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
        elif verdict.effect is not Effect.ALLOW and (
                chosen is None or verdict.effect.strictness > chosen[1].effect.strictness):
            chosen = (rule, verdict)
    if chosen is not None:
        rule, verdict = chosen
        text = verdict.message or (
            f"The output of '{call.tool}' was withheld by policy rule '{rule.id}': "
            f"{verdict.detail or 'blocked'}.")
        return OutputCheck(verdict.effect, text if verdict.effect is Effect.DENY else None,
                           rule.id, rule.source, text,
                           (Reason(verdict.code or "output.denied", verdict.detail or text,
                                   rule.id),))
    if modified is not None:
        rule, verdict = modified
        return OutputCheck(Effect.MODIFY, thaw(seen.args.get("output")), rule.id,
                           rule.source, verdict.message or "",
                           (Reason(verdict.code or "modified", verdict.detail or "", rule.id),))
    return OutputCheck(Effect.ALLOW, result, None, None, "", ())
