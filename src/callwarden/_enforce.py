"""What every framework adapter shares: decide a call, settle an ``ask``, record the outcome.

An adapter is a thin translation between a framework's interception point and this class;
no policy logic lives in adapters. The effects map onto each framework's idiom:

* allow / modify — the tool runs, with ``decision.args`` (the rewritten arguments for modify);
* deny — the tool does not run; the model receives ``decision.message``;
* ask — :meth:`Enforcer.decide` settles it (a remembered grant, the configured approver, a
  wait for an out-of-band answer) or raises :class:`~callwarden.ApprovalPending`, which the
  adapter maps onto the framework's pause (a LangGraph interrupt, an SDK interruption);
* halt — the run stops, by the framework's own means.
"""

from __future__ import annotations

import inspect
import json
import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from callwarden._call import thaw
from callwarden._decision import Decision, Effect

if TYPE_CHECKING:
    from callwarden._guard import Guard
    from callwarden.approvals import Approver

__all__ = ["Enforcer", "as_guard", "cannot_rewrite", "describe_refusal", "needs_approval"]

# The rewritten call shown to the model is capped: it goes into the model's context.
_MAX_SHOWN = 4000

_perf = time.perf_counter


def as_guard(source: Any) -> Guard:
    """Returns a :class:`Guard` for a guard, a policy file path, or a policy dict.

    Raises:
        TypeError: ``source`` is none of those.
        PolicyError: the policy file or dict is broken (with every problem listed).
    """
    from callwarden._guard import Guard

    if isinstance(source, Guard):
        return source
    if isinstance(source, str | os.PathLike):
        return Guard.from_file(os.fspath(source))
    if isinstance(source, Mapping):
        return Guard.from_dict(source)
    raise TypeError(f"expected a callwarden.Guard, a policy file path or a policy dict, "
                    f"got {type(source).__name__}")


def describe_refusal(decision: Decision) -> str:
    """The text the model receives for a call that did not run (never empty)."""
    if decision.message:
        return decision.message
    why = decision.reasons[0].message if decision.reasons else "blocked by policy"
    return f"The call to '{decision.call.tool}' was not run ({decision.effect.value}): {why}."


def needs_approval(reason: str, agent: str) -> str:
    """The model's text for an ``ask`` the agent's hook cannot put to a person."""
    return (f"{reason} This call needs a person's approval, which the {agent} hook cannot "
            "ask for. Do not retry it: tell the user what you want to run and why, so they "
            "can run it themselves or approve it in the policy.")


def cannot_rewrite(decision: Decision, args: Mapping[str, Any], why: str) -> str:
    """The model's text for a rewrite the agent's hook cannot apply."""
    shown = json.dumps(args, ensure_ascii=False, default=str, sort_keys=True)
    if len(shown) > _MAX_SHOWN:
        shown = shown[:_MAX_SHOWN] + " ... (truncated)"
    note = f" ({decision.message})" if decision.message else ""
    return (f"The policy allows '{decision.call.tool}' only with rewritten arguments{note}, "
            f"and {why}. Call '{decision.call.tool}' again with these arguments instead: "
            f"{shown}")


class Enforcer:
    """Decides tool calls for one framework, with that framework's name on every call.

    Args:
        guard: A :class:`Guard`, a policy file path, or a policy dict.
        framework: The framework's name, recorded in ``call.framework`` and the audit log.
        approver: Answers ``ask`` decisions now (a callback or ``TerminalApprover``); without
            one, an ``ask`` pauses the run the framework's way.
        wait: Seconds to wait for someone to answer an ``ask`` from another process
            (``callwarden approvals approve ID``) before pausing.
        agent / principal / session: Defaults for the call's fields when the framework does
            not tell them.
    """

    __slots__ = ("agent", "approver", "framework", "guard", "principal", "session", "wait")

    def __init__(self, guard: Any, *, framework: str, approver: Approver | None = None,
                 wait: float | None = None, agent: str | None = None,
                 principal: str | None = None, session: str | None = None) -> None:
        self.guard = as_guard(guard)
        self.framework = framework
        self.approver = approver
        self.wait = wait
        self.agent = agent
        self.principal = principal
        self.session = session

    def __repr__(self) -> str:
        return f"Enforcer(framework={self.framework!r}, guard={self.guard.source or 'python'})"

    def _fields(self, call_id: str | None, agent: str | None, session: str | None,
                principal: str | None, context: Mapping[str, Any] | None) -> dict[str, Any]:
        return {"call_id": call_id, "agent": agent or self.agent,
                "session": session or self.session, "principal": principal or self.principal,
                "framework": self.framework, "context": context}

    def check(self, tool: str, args: Any, *, call_id: str | None = None,
              agent: str | None = None, session: str | None = None,
              principal: str | None = None,
              context: Mapping[str, Any] | None = None) -> Decision:
        """The policy's decision alone (an ``ask`` stays ``ask``)."""
        return self.guard.check(tool, args, **self._fields(call_id, agent, session, principal,
                                                           context))

    async def acheck(self, tool: str, args: Any, *, call_id: str | None = None,
                     agent: str | None = None, session: str | None = None,
                     principal: str | None = None,
                     context: Mapping[str, Any] | None = None) -> Decision:
        """Async twin of :meth:`check`."""
        return await self.guard.acheck(tool, args, **self._fields(call_id, agent, session,
                                                                  principal, context))

    def decide(self, tool: str, args: Any, *, call_id: str | None = None,
               agent: str | None = None, session: str | None = None,
               principal: str | None = None, context: Mapping[str, Any] | None = None,
               approval_id: str | None = None) -> Decision:
        """Decides a call and settles an ``ask``: the result is never ``ask``.

        ``approval_id`` resumes a paused call: the approved request runs this exact call once.

        Raises:
            ApprovalPending: nobody has answered yet; ``request_id`` names the request. The
                same call (same ``call_id`` and arguments) asked again gets the same request.
        """
        decision = self.check(tool, args, call_id=call_id, agent=agent, session=session,
                              principal=principal, context=context)
        return self.settle(decision, approval_id=approval_id)

    async def adecide(self, tool: str, args: Any, *, call_id: str | None = None,
                      agent: str | None = None, session: str | None = None,
                      principal: str | None = None, context: Mapping[str, Any] | None = None,
                      approval_id: str | None = None) -> Decision:
        """Async twin of :meth:`decide`."""
        decision = await self.acheck(tool, args, call_id=call_id, agent=agent, session=session,
                                     principal=principal, context=context)
        return await self.asettle(decision, approval_id=approval_id)

    def settle(self, decision: Decision, *, approval_id: str | None = None) -> Decision:
        """Turns an ``ask`` into allow / modify / deny, or raises ``ApprovalPending``."""
        if decision.effect is not Effect.ASK:
            return decision
        from callwarden.approvals import resolve_ask

        return resolve_ask(self.guard, decision, approver=self.approver, wait=self.wait,
                           approval_id=approval_id)

    async def asettle(self, decision: Decision, *, approval_id: str | None = None) -> Decision:
        """Async twin of :meth:`settle`."""
        if decision.effect is not Effect.ASK:
            return decision
        from callwarden.approvals import aresolve_ask

        return await aresolve_ask(self.guard, decision, approver=self.approver, wait=self.wait,
                                  approval_id=approval_id)

    # -- a human's answer that arrived through the framework -------------------------------

    def answer(self, request_id: str, answer: Any, *, by: str) -> None:
        """Records a reviewer's answer given through the framework (an interrupt's resume
        value, ``RunState.approve``) on the pending request, so the call can resume with
        ``approval_id=request_id``.

        ``answer`` is True / ``"approve"``, False / ``"reject"``, or a mapping
        ``{"approve": bool, "by": str, "reason": str, "edit": {...args}}``.

        Raises:
            ApprovalError: the request is unknown, resolved already, expired, or ``by`` may
                not approve it (nobody approves their own call).
            ValueError: the answer is none of the above.
        """
        approve, who, reason, edit = _parse_answer(answer, by)
        approvals = self.guard.approvals
        if approve:
            approvals.approve(request_id, by=who, comment=reason, edit=edit)
        else:
            approvals.deny(request_id, by=who, reason=reason)

    async def aanswer(self, request_id: str, answer: Any, *, by: str) -> None:
        """Async twin of :meth:`answer`."""
        approve, who, reason, edit = _parse_answer(answer, by)
        approvals = self.guard.approvals
        if approve:
            await approvals.aapprove(request_id, by=who, comment=reason, edit=edit)
        else:
            await approvals.adeny(request_id, by=who, reason=reason)

    # -- after the tool ran ------------------------------------------------------------------

    def screen_output(self, decision: Decision, result: Any) -> tuple[Any, str, bool]:
        """Applies output rules: (what the model sees, the outcome status, whether to halt)."""
        return self.guard._screen_output(decision, result)

    def record_outcome(self, decision: Decision, status: str, started: float,
                       error: BaseException | None = None) -> None:
        """Writes the outcome event (``ok``, ``error``, ``output_blocked`` ...) when audited."""
        auditor = self.guard._auditor
        if auditor is not None:
            auditor.outcome(decision, status, _perf() - started,
                            None if error is None else f"{type(error).__name__}: {error}")

    def run(self, decision: Decision, fn: Any) -> tuple[Any, bool]:
        """Runs ``fn(**decision.args)`` for an allowed decision, screens its output and records
        the outcome: (what the model sees, whether the run must halt)."""
        started = _perf()
        try:
            result = fn(**thaw(decision.args))
        except BaseException as e:
            self.record_outcome(decision, "error", started, e)
            raise
        return self._finish(decision, result, started)

    async def arun(self, decision: Decision, fn: Any) -> tuple[Any, bool]:
        """Async twin of :meth:`run`; ``fn`` may be sync or async."""
        started = _perf()
        try:
            result = fn(**thaw(decision.args))
            if inspect.isawaitable(result):
                result = await result
        except BaseException as e:
            self.record_outcome(decision, "error", started, e)
            raise
        return self._finish(decision, result, started)

    def _finish(self, decision: Decision, result: Any, started: float) -> tuple[Any, bool]:
        shown, status, halt = self.screen_output(decision, result)
        self.record_outcome(decision, status, started)
        return shown, halt


def _parse_answer(answer: Any, by: str) -> tuple[bool, str, str | None, dict[str, Any] | None]:
    if answer is True or answer in ("approve", "approved", "yes", "y"):
        return True, by, None, None
    if answer is False or answer in ("reject", "rejected", "deny", "denied", "no", "n"):
        return False, by, None, None
    if isinstance(answer, Mapping):
        unknown = set(answer) - {"approve", "by", "reason", "comment", "edit", "request_id"}
        if unknown or not isinstance(answer.get("approve"), bool):
            raise ValueError(
                "an approval answer is True/'approve', False/'reject', or a mapping "
                "{'approve': bool, 'by': str, 'reason': str, 'edit': {args}}; got "
                f"{dict(answer)!r}")
        edit = answer.get("edit")
        if edit is not None and not isinstance(edit, Mapping):
            raise ValueError(f"'edit' must be a mapping of the new arguments, got {edit!r}")
        reason = answer.get("reason", answer.get("comment"))
        return (answer["approve"], str(answer.get("by") or by),
                None if reason is None else str(reason), None if edit is None else dict(edit))
    raise ValueError(f"an approval answer is True/'approve', False/'reject', or a mapping "
                     f"{{'approve': bool, 'by': str, 'reason': str, 'edit': {{args}}}}; got "
                     f"{answer!r}")
