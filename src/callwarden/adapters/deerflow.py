"""A DeerFlow guardrail provider: the policy decides every tool call a DeerFlow agent makes.

DeerFlow loads it from ``config.yaml``::

    guardrails:
      enabled: true
      provider:
        use: callwarden.adapters.deerflow:Provider
        config: {policy: policy.yaml}

DeerFlow resolves ``use`` to this class and calls it with ``config`` as keyword arguments (plus
``framework="deerflow"``); its ``GuardrailMiddleware`` (bytedance/deer-flow
backend/packages/harness/deerflow/guardrails/middleware.py) then calls ``evaluate`` /
``aevaluate`` with a ``GuardrailRequest`` before each tool call. It runs the tool when
``decision.allow`` is true — with the *original* arguments — and otherwise answers the model
with ``reasons[0].message``. It re-raises LangGraph's ``GraphBubbleUp`` (interrupts) and turns
any other provider exception into a deny only when ``fail_closed`` is set, so this provider
never raises one: its own errors are denies.

Effects: allow runs the tool; modify cannot be applied (DeerFlow has no rewrite hook), so it is
denied with a message naming the rewritten call the model should make instead; deny denies;
ask is settled by the approver / wait, else denied with the pending request's id — or, with
``interrupt: true``, pauses the run with a LangGraph interrupt whose resume value is the
reviewer's answer; halt is denied with ``metadata["halt"] = True`` (and pauses the run with
``interrupt: true``).

No ``context.request``: a ``GuardrailRequest`` names the tool call, agent, thread, user and run,
never the conversation, so the user's latest message is not known to this provider.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from callwarden._call import thaw
from callwarden._decision import Decision, Effect
from callwarden._enforce import Enforcer
from callwarden._messages import cannot_rewrite, describe_refusal
from callwarden.adapters._core import enforcer as enforcement_path
from callwarden.exceptions import ApprovalError, ApprovalPending
from callwarden.policyfile.oap import oap_code

__all__ = ["GuardrailDecision", "GuardrailReason", "Provider"]

_CONTEXT_FIELDS = ("is_subagent", "run_id", "user_role", "oauth_provider", "oauth_id",
                   "timestamp")


@dataclass
class GuardrailReason:
    """One reason, shaped like DeerFlow's ``GuardrailReason`` (``code``, ``message``)."""

    code: str
    message: str = ""


@dataclass
class GuardrailDecision:
    """The verdict, shaped like DeerFlow's ``GuardrailDecision``.

    Attributes:
        allow: whether DeerFlow runs the tool.
        reasons: why; DeerFlow shows the model ``reasons[0]`` of a denial.
        policy_id: the deciding callwarden rule.
        metadata: ``effect``, ``decision_id``, ``rule``, ``source`` and, where they apply,
            ``halt``, ``approval_request_id`` and ``rewritten_args``.
    """

    allow: bool
    reasons: list[GuardrailReason] = field(default_factory=list)
    policy_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Pause:
    """An ``ask`` or ``halt`` to put to a person through a LangGraph interrupt."""

    decision: Decision
    fields: dict[str, Any]
    request_id: str | None


class Provider:
    """callwarden as a DeerFlow ``GuardrailProvider``.

    Args:
        policy: A policy file path, a policy dict or a :class:`callwarden.Guard`; default: the
            ``CALLWARDEN_POLICY`` environment variable.
        framework: Recorded as ``call.framework`` (DeerFlow passes ``"deerflow"``).
        approver: Answers ``ask`` decisions now: an approver object or a ``"module:attr"`` path.
        wait: Seconds to wait for ``callwarden approvals approve ID`` before denying an ``ask``.
        interrupt: Pause the run with a LangGraph interrupt on ``ask`` (resume with True /
            False / ``{"approve": bool, "by": str, "reason": str}``) and on ``halt``.
        name: The provider's name in DeerFlow's logs.

    Raises:
        TypeError: no policy was given.
        PolicyError: the policy is broken (DeerFlow then fails to build the agent).
    """

    def __init__(self, policy: Any = None, *, framework: str = "deerflow",
                 approver: Any = None, wait: float | None = None, interrupt: bool = False,
                 name: str = "callwarden") -> None:
        if policy is None:
            policy = os.environ.get("CALLWARDEN_POLICY") or None
        if policy is None:
            raise TypeError("callwarden's DeerFlow provider needs a policy: set "
                            "guardrails.provider.config.policy (a file path) or "
                            "CALLWARDEN_POLICY")
        if isinstance(approver, str):
            approver = _load(approver)
        self.name = name
        self.interrupt = bool(interrupt)
        self.enforcer: Enforcer = enforcement_path(policy, framework=framework,
                                                   approver=approver, wait=wait)

    def __repr__(self) -> str:
        return f"Provider({self.enforcer!r}, interrupt={self.interrupt})"

    def evaluate(self, request: Any) -> GuardrailDecision:
        """Decides one DeerFlow tool call (never raises, except a LangGraph interrupt)."""
        step: GuardrailDecision | _Pause = _safe(self._decide, request)
        while isinstance(step, _Pause):
            answer = _pause_run(step)  # GraphInterrupt propagates: DeerFlow re-raises it
            if isinstance(answer, GuardrailDecision):
                return answer
            step = _safe(self._resume, step, answer)
        return step

    async def aevaluate(self, request: Any) -> GuardrailDecision:
        """Async twin of :meth:`evaluate`."""
        step: GuardrailDecision | _Pause = await _asafe(self._adecide, request)
        while isinstance(step, _Pause):
            answer = _pause_run(step)
            if isinstance(answer, GuardrailDecision):
                return answer
            step = await _asafe(self._aresume, step, answer)
        return step

    # -- one source of truth for what a settled decision means; thin sync / async drivers --

    def _decide(self, request: Any) -> GuardrailDecision | _Pause:
        fields = _fields(request)
        decision = self.enforcer.check(**fields)
        return self._after_check(decision, fields, self.enforcer.settle)

    async def _adecide(self, request: Any) -> GuardrailDecision | _Pause:
        fields = _fields(request)
        decision = await self.enforcer.acheck(**fields)
        if decision.effect is not Effect.ASK:
            return self._after_check(decision, fields, None)
        try:
            return _verdict(await self.enforcer.asettle(decision))
        except ApprovalPending as pending:
            return self._pending(decision, fields, pending.request_id)

    def _after_check(self, decision: Decision, fields: dict[str, Any],
                     settle: Callable[[Decision], Decision] | None) -> GuardrailDecision | _Pause:
        if decision.effect is Effect.HALT and self.interrupt:
            return _Pause(decision, fields, None)
        if decision.effect is not Effect.ASK or settle is None:
            return _verdict(decision)
        try:
            return _verdict(settle(decision))
        except ApprovalPending as pending:
            return self._pending(decision, fields, pending.request_id)

    def _pending(self, decision: Decision, fields: dict[str, Any],
                 request_id: str) -> GuardrailDecision | _Pause:
        if self.interrupt:
            return _Pause(decision, fields, request_id)
        return _deny(decision, "callwarden.approval_pending",
                     f"{describe_refusal(decision)} A person must approve this call first "
                     f"(approval request {request_id}). Do not retry it until the user says it "
                     "is approved.", approval_request_id=request_id)

    def _resume(self, pause: _Pause, answer: Any) -> GuardrailDecision | _Pause:
        if pause.request_id is None:  # a halt stays a halt, whatever the reviewer answered
            return _verdict(pause.decision)
        if _replayed(pause, answer):
            return pause
        self._record(pause.request_id, answer)
        settled = self.enforcer.decide(**pause.fields, approval_id=pause.request_id)
        return _verdict(settled)

    async def _aresume(self, pause: _Pause, answer: Any) -> GuardrailDecision | _Pause:
        if pause.request_id is None:
            return _verdict(pause.decision)
        if _replayed(pause, answer):
            return pause
        # Answered already (a re-executed node): the store's answer stands.
        with contextlib.suppress(ApprovalError):
            await self.enforcer.aanswer(pause.request_id, answer, by="deerflow",
                                        names=_named(answer))
        settled = await self.enforcer.adecide(**pause.fields, approval_id=pause.request_id)
        return _verdict(settled)

    def _record(self, request_id: str, answer: Any) -> None:
        # Answered already (a re-executed node): the store's answer stands.
        with contextlib.suppress(ApprovalError):
            self.enforcer.answer(request_id, answer, by="deerflow", names=_named(answer))


def _fields(request: Any) -> dict[str, Any]:
    """The ``Enforcer.check`` arguments for a DeerFlow ``GuardrailRequest``."""
    def get(name: str) -> Any:
        if isinstance(request, Mapping):
            return request.get(name)
        return getattr(request, name, None)

    tool = get("tool_name")
    if not isinstance(tool, str) or not tool:
        raise ValueError(f"GuardrailRequest without a tool_name: {request!r}")
    context = {key: value for key in _CONTEXT_FIELDS if (value := get(key)) is not None}
    return {"tool": tool, "args": get("tool_input"), "call_id": _text(get("tool_call_id")),
            "agent": _text(get("agent_id")), "session": _text(get("thread_id")),
            "principal": _text(get("user_id")), "context": context}


def _verdict(decision: Decision) -> GuardrailDecision:
    """DeerFlow's decision for a settled callwarden decision (never ``ask``)."""
    effect = decision.effect
    if effect is Effect.MODIFY:
        args = thaw(decision.args)
        if args == thaw(decision.call.args):
            return _allow(decision)
        return _deny(decision, "callwarden.rewrite_required",
                     cannot_rewrite(decision, args, "DeerFlow cannot rewrite a call"),
                     rewritten_args=args)
    if effect.allows:
        return _allow(decision)
    if effect is Effect.HALT:
        return _deny(decision, _code(decision),
                     f"{describe_refusal(decision)} The policy halted this run: stop working "
                     "on the task and report to the user.", halt=True)
    if effect is Effect.ASK:  # only when settling was skipped: never let it through
        return _deny(decision, _code(decision), describe_refusal(decision))
    return _deny(decision, _code(decision), describe_refusal(decision))


def _allow(decision: Decision) -> GuardrailDecision:
    message = decision.message or "allowed by policy"
    return GuardrailDecision(
        allow=True, reasons=[GuardrailReason(_code(decision), message),
                             GuardrailReason("oap.allowed", message)],
        policy_id=decision.rule, metadata=_metadata(decision))


def _deny(decision: Decision, code: str, message: str, **extra: Any) -> GuardrailDecision:
    """A denial: callwarden's reason code and, beside it, the OAP one (first when a passport's
    rule decided, as DeerFlow's OAP provider reports it)."""
    passport = oap_code(decision.rule)
    own = GuardrailReason(code, message)
    if passport is not None:
        reasons = [GuardrailReason(passport, message), own]
    else:
        reasons = [own, GuardrailReason(_oap_equivalent(decision), message)]
    reasons += [GuardrailReason(r.code, r.message) for r in decision.reasons[1:]]
    return GuardrailDecision(allow=False, reasons=reasons, policy_id=decision.rule,
                             metadata={**_metadata(decision), **extra})


def _oap_equivalent(decision: Decision) -> str:
    """The OAP reason code nearest to a denial by one of the policy's own rules."""
    return "oap.limit_exceeded" if (decision.code or "").startswith("limit") else "oap.denied"


def _code(decision: Decision) -> str:
    """The reason code DeerFlow shows: the deciding check's (``shell.denied``), or the effect."""
    code = decision.code
    return code if code and code != "matched" else f"callwarden.{decision.effect.value}"


def _metadata(decision: Decision) -> dict[str, Any]:
    return {"effect": decision.effect.value, "decision_id": decision.decision_id,
            "rule": decision.rule, "source": decision.source, "mode": decision.mode.value,
            "would_effect": None if decision.would_effect is None
            else decision.would_effect.value}


def _error(e: BaseException) -> GuardrailDecision:
    """Fail closed: DeerFlow with ``fail_closed: false`` would run the tool on an exception."""
    message = (f"callwarden could not decide this call ({type(e).__name__}: {e}); it was not "
               "run. Try a different approach or ask the user.")
    return GuardrailDecision(
        allow=False, reasons=[GuardrailReason("callwarden.adapter_error", message),
                              GuardrailReason("oap.evaluator_error", message)],
        metadata={"effect": Effect.DENY.value, "error": type(e).__name__})


def _safe(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception as e:  # fail closed, see _error
        return _error(e)


async def _asafe(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return await fn(*args)
    except Exception as e:  # fail closed, see _error
        return _error(e)


def _named(answer: Any) -> str | None:
    """The request id a resume value names (``{"approve": true, "request_id": ...}``)."""
    named = answer.get("request_id") if isinstance(answer, Mapping) else None
    return named if isinstance(named, str) else None


def _replayed(pause: _Pause, answer: Any) -> bool:
    """Whether an answer cannot settle a call in doubt (it may have run before a crash): only
    one naming its request can; LangGraph replays the resume values a node was given before,
    and the answer that let the first attempt run must not let it run again (the run pauses
    once more, with ``in_doubt`` in the interrupt)."""
    return bool(pause.decision.in_doubt) and _named(answer) != pause.request_id


def _pause_run(pause: _Pause) -> Any:
    """Pauses the LangGraph run; returns the resume value (the reviewer's answer), or a deny
    when no interrupt is possible (no LangGraph, no checkpointer, outside a graph)."""
    decision = pause.decision
    try:
        from langgraph.errors import GraphBubbleUp
        from langgraph.types import interrupt
    except ImportError as e:
        return _error(e)
    try:
        return interrupt({
            "type": "callwarden.approval" if pause.request_id else "callwarden.halt",
            "request_id": pause.request_id, "tool": decision.tool,
            "args": thaw(decision.call.args), "message": describe_refusal(decision),
            "rule": decision.rule, "decision_id": decision.decision_id,
            "in_doubt": decision.in_doubt})
    except GraphBubbleUp:
        raise
    except Exception as e:  # e.g. "called outside of a runnable context": fail closed
        return _verdict(decision) if pause.request_id is None else _error(e)


def _load(path: str) -> Any:
    module, _, attr = path.partition(":")
    if not module or not attr:
        raise ValueError(f"approver must be 'package.module:name', got {path!r}")
    obj = getattr(importlib.import_module(module), attr)
    return obj() if isinstance(obj, type) else obj


def _text(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)
