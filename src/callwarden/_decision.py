"""The verdict a policy returns and the decision the guard makes: small closed types."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, NamedTuple

from callwarden._call import FrozenDict, ToolCall, json_safe

__all__ = ["Budget", "Decision", "Effect", "Mode", "OutcomeStatus", "Phase", "Reason", "RuleMatch",
           "Verdict"]


class Effect(StrEnum):
    """What happens to a tool call. Ordered by strictness: ``halt > deny > ask > allow``."""

    ALLOW = "allow"
    MODIFY = "modify"
    ASK = "ask"
    DENY = "deny"
    HALT = "halt"

    # Set below as plain member attributes: an enum property costs more than a decision step.
    strictness: int
    """Rank used to combine verdicts: the strictest effect wins."""
    allows: bool
    """True for the effects that let the tool run (allow, modify)."""
    text: str
    """The value as a plain ``str`` (for JSON)."""


for _member, _rank in ((Effect.ALLOW, 0), (Effect.MODIFY, 0), (Effect.ASK, 1), (Effect.DENY, 2),
                       (Effect.HALT, 3)):
    _member.strictness = _rank
    _member.allows = _rank == 0
    _member.text = str.__str__(_member)


class Mode(StrEnum):
    """``enforce`` applies decisions; ``observe`` records what enforce would do and lets calls through."""

    ENFORCE = "enforce"
    OBSERVE = "observe"

    text: str  # set below, as Effect's
    """The value as a plain ``str`` (for JSON)."""


for _mode in Mode:
    _mode.text = str.__str__(_mode)


class Phase(StrEnum):
    """When a rule runs: ``mutate`` rewrites arguments first, ``validate`` rules all see the
    final arguments, ``limit`` rules count what everything else allows, ``output`` rules
    screen what the tool returned."""

    MUTATE = "mutate"
    VALIDATE = "validate"
    LIMIT = "limit"
    OUTPUT = "output"


class OutcomeStatus(StrEnum):
    """How a tool call that ran ended, as the outcome audit event records it."""

    OK = "ok"
    ERROR = "error"
    OUTPUT_BLOCKED = "output_blocked"
    OUTPUT_MODIFIED = "output_modified"


class Reason(NamedTuple):
    """Why a decision was made: a stable machine code and a human message."""

    code: str
    message: str
    rule: str | None = None


class RuleMatch(NamedTuple):
    """One rule that had an opinion on the call (attribution), whether or not it decided."""

    rule: str
    source: str | None
    effect: Effect
    mode: Mode
    code: str
    detail: str


class Verdict(NamedTuple):
    """What one policy says about a call. Build it with the named constructors.

    ``Verdict.deny("Use the staging bucket instead.")`` reads as what it does; ``None`` from a
    policy means "no opinion".
    """

    effect: Effect
    message: str | None = None
    code: str | None = None
    args: Mapping[str, Any] | None = None
    detail: str | None = None

    @classmethod
    def allow(cls, message: str | None = None, *, code: str = "allowed") -> Verdict:
        """Explicitly allows the call (an allow rule; other rules may still be stricter)."""
        return cls(Effect.ALLOW, message, code)

    @classmethod
    def deny(cls, message: str | None = None, *, code: str = "denied") -> Verdict:
        """Blocks the call; ``message`` tells the model what to do instead."""
        return cls(Effect.DENY, message, code)

    @classmethod
    def ask(cls, message: str | None = None, *, code: str = "approval_required") -> Verdict:
        """Requires a human's approval before the call runs."""
        return cls(Effect.ASK, message, code)

    @classmethod
    def halt(cls, message: str | None = None, *, code: str = "halted") -> Verdict:
        """Stops the whole agent run."""
        return cls(Effect.HALT, message, code)

    @classmethod
    def modify(
        cls, args: Mapping[str, Any], message: str | None = None, *, code: str = "modified"
    ) -> Verdict:
        """Rewrites the call's arguments (mutate phase)."""
        return cls(Effect.MODIFY, message, code, args)


class Budget(NamedTuple):
    """What a limit that applied to a call has left once the call is decided.

    Attributes:
        rule: the limit rule's id.
        limit: how much it allows (calls, attempts, the sum of an amount, calls in flight or
            distinct values) in its window.
        used: what is used of it now, this call included when it counted.
        remaining: what is left (``limit - used``, never below zero).
        reset_at: when the call fits again (seconds since the epoch), for a limit this call
            went over: enough usage leaves the window, the wait of a retry's backoff has
            passed, or (calls in flight) the oldest slot's hold ends, sooner when a running
            call finishes; None when it did not go over, or when it never frees up (no
            window, a fan-out naming more values than it allows).
    """

    rule: str
    limit: float
    used: float
    remaining: float
    reset_at: float | None = None


_BUDGET_FIELDS = Budget._fields


class Decision(NamedTuple):
    """The guard's verdict on one call, with everything needed to explain it.

    Attributes:
        effect: what happens (``allow | modify | deny | ask | halt``).
        call: the call as asked (never changed).
        args: the effective arguments (rewritten when ``modify``).
        reasons: why, as (code, message, rule) triples.
        rule: id of the deciding rule (``default`` when no rule decided).
        source: where the deciding rule is written (``policy.yaml:42``).
        matched: every rule that had an opinion, in evaluation order.
        message: text for the model: what was blocked and what to do instead.
        mode: ``enforce`` or ``observe``.
        would_effect: what enforce mode would have decided, when observe-mode rules or an
            observe-mode policy were involved; otherwise None.
        decision_id: unique id of this decision.
        elapsed: evaluation time in seconds.
        policy: the policy's name and content hash.
        budgets: for each limit that applied, what it has left (a per-value limit: its
            tightest value); read, not counted, for a what-if query.
    """

    effect: Effect
    call: ToolCall
    args: FrozenDict
    reasons: tuple[Reason, ...]
    rule: str | None
    source: str | None
    matched: tuple[RuleMatch, ...]
    message: str
    mode: Mode
    would_effect: Effect | None
    decision_id: str
    elapsed: float
    policy: str | None = None
    budgets: tuple[Budget, ...] = ()

    @property
    def allowed(self) -> bool:
        """True when the tool may run (allow or modify)."""
        return self.effect.allows

    @property
    def tool(self) -> str:
        """The tool name of the call."""
        return self.call.tool

    @property
    def code(self) -> str | None:
        """The first reason's code, or None."""
        return self.reasons[0].code if self.reasons else None

    @property
    def in_doubt(self) -> bool:
        """True when an earlier attempt of this very call started and recorded no outcome:
        it may already have run (the execution journal; ``on_in_doubt`` decided)."""
        return any(r.code == "in_doubt" for r in self.reasons)

    @classmethod
    def from_dict(cls, data: Any) -> Decision:
        """The decision a :meth:`to_dict` (``callwarden serve``'s answer) describes: effect,
        call, effective arguments, rule, source, message, policy and reasons (the matched
        rules and timings are not carried back).

        Raises:
            ValueError: not such a dict, or a field it reads of another type (text fields
                are strings or null; ``args`` and ``context`` objects or null; ``reasons`` a
                list of objects or null).
        """
        from callwarden._call import freeze_args
        from callwarden.exceptions import InvalidCall

        if not isinstance(data, Mapping):
            raise ValueError("a decision is an object")
        call = data.get("call")
        if not isinstance(call, Mapping) or not isinstance(call.get("tool"), str) \
                or not isinstance(data.get("decision_id"), str):
            raise ValueError("it has no 'call' with a 'tool', or no 'decision_id'")
        typed = [(data, ("rule", "source", "message", "policy", "mode"), str),
                 (call, ("call_id", "agent", "session", "principal", "framework"), str),
                 (data, ("args",), Mapping), (call, ("args", "context"), Mapping),
                 (data, ("reasons",), list)]
        for part, keys, kind in typed:
            for key in keys:
                if part.get(key) is not None and not isinstance(part[key], kind):
                    raise ValueError(f"its {key!r} is a {type(part[key]).__name__}")
        if not all(isinstance(r, Mapping) for r in data.get("reasons") or ()):
            raise ValueError("its 'reasons' are not objects")

        def text(value: Any) -> str | None:
            return value or None

        try:
            made = ToolCall.create(
                call["tool"], call.get("args"), call_id=text(call.get("call_id")),
                agent=text(call.get("agent")), session=text(call.get("session")),
                principal=text(call.get("principal")), framework=text(call.get("framework")),
                context=call.get("context"))
            given = call.get("args") if data.get("args") is None else data["args"]
            args = freeze_args({} if given is None else given)
            effect = Effect(str(data.get("effect")))
            mode = Mode(str(data.get("mode") or "enforce"))
        except InvalidCall as e:
            raise ValueError(str(e)) from None
        reasons = tuple(Reason(str(r.get("code")), str(r.get("message")),
                               r.get("rule") if isinstance(r.get("rule"), str) else None)
                        for r in data.get("reasons") or ())
        return cls(effect, made, args, reasons, text(data.get("rule")), text(data.get("source")),
                   (), str(data.get("message") or ""), mode, None, data["decision_id"], 0.0,
                   text(data.get("policy")), _budgets(data.get("budgets")))

    def to_dict(self) -> dict[str, Any]:
        """Returns a JSON-safe dict of the decision. When the call was not rewritten, its
        ``args`` and the call's are one object."""
        call = self.call.to_dict()
        return {
            "decision_id": self.decision_id,
            "effect": self.effect.text,
            "would_effect": self.would_effect.text if self.would_effect else None,
            "mode": self.mode.text,
            "rule": self.rule,
            "source": self.source,
            "message": self.message,
            # (an empty one without a comprehension: each is a function call of its own)
            "reasons": [
                {"code": r.code, "message": r.message, "rule": r.rule} for r in self.reasons
            ] if self.reasons else [],
            "matched": [
                {
                    "rule": m.rule,
                    "source": m.source,
                    "effect": m.effect.text,
                    "mode": m.mode.text,
                    "code": m.code,
                    "detail": m.detail,
                }
                for m in self.matched
            ] if self.matched else [],
            "call": call,
            "args": call["args"] if self.args is self.call.args else json_safe(self.args),
            "elapsed_us": _tenths(self.elapsed * 1e6),
            "policy": self.policy,
            "budgets": [dict(zip(_BUDGET_FIELDS, b, strict=True)) for b in self.budgets]
            if self.budgets else [],
        }


def _tenths(value: float) -> float:
    """``round(value, 1)``, without its conversion to text (for a finite value)."""
    try:
        return round(value * 10) / 10
    except (ValueError, OverflowError):  # NaN or infinity: as round(value, 1) has it
        return value


def _budgets(raw: Any) -> tuple[Budget, ...]:
    """The budgets of a decision's dict (those that are not well formed are left out)."""
    out = []
    for item in raw if isinstance(raw, list) else ():
        try:
            reset = item.get("reset_at")
            out.append(Budget(str(item["rule"]), float(item["limit"]), float(item["used"]),
                              float(item["remaining"]), None if reset is None else float(reset)))
        except (AttributeError, KeyError, TypeError, ValueError):
            continue
    return tuple(out)
