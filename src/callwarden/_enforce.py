"""The one enforcement path: decide a call, settle an ``ask``, run the tool, screen its output,
record the outcome.

``Guard.run`` / ``arun`` / ``@guard.protect``, every framework adapter and every hook go
through :class:`Enforcer`; none re-implements a step of it. An adapter only translates a
framework's objects to and from it. The effects map onto each framework's idiom:

* allow / modify — the tool runs, with ``decision.args`` (the rewritten arguments for modify);
* deny — the tool does not run; the model receives ``decision.message``;
* ask — :meth:`Enforcer.decide` settles it (a remembered grant, an earlier answer to the same
  call, the configured approver, a wait for an out-of-band answer) or raises
  :class:`~callwarden.ApprovalPending`, which the adapter maps onto the framework's pause;
* halt — the run stops, by the framework's own means.

Recording a call's outcome (any status, on every path: ``run``, ``arun``, ``finish``,
``afinish``, ``record_outcome``, ``arecord_outcome``) lets go of the slots it holds of
``concurrent`` limits; a store that fails then is logged, never raised into the agent (the
slots end with their hold).
"""

from __future__ import annotations

import inspect
import logging
import time
import types
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from callwarden._call import thaw
from callwarden._decision import Decision, Effect, OutcomeStatus
from callwarden._flow import Flow, adrive, drive
from callwarden._messages import output_unscreened
from callwarden._settle import aresolve_ask, resolve_ask
from callwarden.approvals import decision_digest
from callwarden.engine.facts import output_facts, remember
from callwarden.engine.output import nothing_after
from callwarden.engine.slots import holds_slots
from callwarden.exceptions import (
    ApprovalInvalid,
    ApprovalPending,
    ApprovalRequired,
    RunHalted,
    ToolDenied,
)

if TYPE_CHECKING:
    from callwarden._guard import Guard
    from callwarden.approvals import ApprovalRequest
    from callwarden.typing import Approver

__all__ = ["Enforcer", "Screened"]

_perf = time.perf_counter
_UNSET: Any = object()
log = logging.getLogger("callwarden.limits")
# Ask decisions reported as pending, kept until the same call comes back settled.
_MAX_PENDING = 4096


class Screened(NamedTuple):
    """A tool's result after the policy's output rules: what the model sees, the outcome
    status, whether the run must halt, and the output rule that changed it (if any)."""

    shown: Any
    status: OutcomeStatus
    halt: bool
    rule: str | None = None
    source: str | None = None


# (what the model sees, the outcome status, whether to halt, the output rule, its source)
_Screening = tuple[Any, OutcomeStatus, bool, str | None, str | None]


# ``Enforcer.answer``'s ``names`` left out: the caller names the request itself.
_NAMED: Any = object()


def _refuse_in_doubt(request: ApprovalRequest) -> None:
    """An approval the framework carried that does not name ``request``, raised in doubt."""
    if request.in_doubt:
        raise ApprovalInvalid("approval_in_doubt", (
            f"approval request {request.id} was raised in doubt ({request.in_doubt}): an "
            "approval the framework kept from before may be the one that let the call run "
            f"then. Answer request {request.id} itself (callwarden approvals approve "
            f"{request.id}, the console, or an answer naming it), and approve only if the call "
            "did not happen."))


class _Pending(NamedTuple):
    decision: Decision
    request_id: str


# Members read on every guarded call, kept as module constants: an enum member read from its
# class is a slow attribute lookup on Python 3.11 (the enum's metaclass has a __getattr__).
_ASK, _OK, _BLOCKED = Effect.ASK, OutcomeStatus.OK, OutcomeStatus.OUTPUT_BLOCKED

class Enforcer:
    """Decides tool calls for one framework (or for ``Guard.run``) and runs the allowed ones.

    Args:
        guard: The :class:`~callwarden.Guard` that decides (``adapters.as_guard`` turns a
            policy file path or dict into one).
        framework: The framework's name, recorded in ``call.framework`` and the audit log.
        approver: Answers ``ask`` decisions now (a callback or ``TerminalApprover``); without
            one, an ``ask`` pauses the run the framework's way.
        wait: Seconds to wait for someone to answer an ``ask`` from another process
            (``callwarden approvals approve ID``) before pausing.
        agent / principal / session: Defaults for the call's fields when the framework does
            not tell them.
    """

    __slots__ = ("_pending", "agent", "approver", "framework", "guard", "principal", "session",
                 "wait")

    def __init__(self, guard: Guard, *, framework: str | None = None,
                 approver: Approver | None = None, wait: float | None = None,
                 agent: str | None = None, principal: str | None = None,
                 session: str | None = None) -> None:
        if not hasattr(guard, "check") or not hasattr(guard, "approvals"):
            raise TypeError(f"Enforcer needs a callwarden.Guard, got {type(guard).__name__} "
                            "(callwarden.adapters.as_guard builds one from a policy file or dict)")
        self.guard = guard
        self.framework = framework
        self.approver = approver
        self.wait = wait
        self.agent = agent
        self.principal = principal
        self.session = session
        self._pending: OrderedDict[str, _Pending] = OrderedDict()

    def __repr__(self) -> str:
        return f"Enforcer(framework={self.framework!r}, guard={self.guard.source or 'python'})"

    # -- deciding --------------------------------------------------------------------------

    def _fields(self, call_id: str | None, agent: str | None, session: str | None,
                principal: str | None, context: Mapping[str, Any] | None,
                framework: Any = _UNSET) -> dict[str, Any]:
        return {"call_id": call_id, "agent": agent or self.agent,
                "session": session or self.session, "principal": principal or self.principal,
                "framework": self.framework if framework is _UNSET else framework,
                "context": context}

    def check(self, tool: str, args: Any, *, call_id: str | None = None,
              agent: str | None = None, session: str | None = None,
              principal: str | None = None, context: Mapping[str, Any] | None = None,
              framework: Any = _UNSET) -> Decision:
        """The policy's decision alone (an ``ask`` stays ``ask``), audited."""
        return self.guard.check(tool, args, **self._fields(call_id, agent, session, principal,
                                                           context, framework))

    async def acheck(self, tool: str, args: Any, *, call_id: str | None = None,
                     agent: str | None = None, session: str | None = None,
                     principal: str | None = None, context: Mapping[str, Any] | None = None,
                     framework: Any = _UNSET) -> Decision:
        """Async twin of :meth:`check`."""
        return await self.guard.acheck(tool, args, **self._fields(call_id, agent, session,
                                                                  principal, context, framework))

    def refuse(self, tool: str, args: Any, *, rule: str, code: str, message: str,
               call_id: str | None = None, context: Mapping[str, Any] | None = None
               ) -> Decision:
        """Refuses a call for a reason outside the policy's rules (see ``Guard.refuse``)."""
        return self.guard.refuse(tool, args, rule=rule, code=code, message=message,
                                 **self._fields(call_id, None, None, None, context))

    def decide(self, tool: str, args: Any, *, call_id: str | None = None,
               agent: str | None = None, session: str | None = None,
               principal: str | None = None, context: Mapping[str, Any] | None = None,
               approval_id: str | None = None) -> Decision:
        """Decides a call and settles an ``ask``: the result is never ``ask``.

        ``approval_id`` resumes a paused call: the approved request runs this exact call once.

        Raises:
            ApprovalPending: nobody has answered yet; ``request_id`` names the request. The
                same call asked again (a re-run node, a retry in a new turn) gets the same
                request, and once it is answered, that answer.
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

    def settle(self, decision: Decision, *, approval_id: str | None = None,
               approver: Any = _UNSET, wait: Any = _UNSET) -> Decision:
        """Turns an ``ask`` into allow / modify / deny, or raises ``ApprovalPending``.

        ``approver`` / ``wait`` replace the enforcer's own for this call (None: do not ask
        anyone now, do not wait).
        """
        if decision.effect is not _ASK:
            return decision
        try:
            settled = resolve_ask(self.guard, decision, approval_id=approval_id,
                                  approver=self.approver if approver is _UNSET else approver,
                                  wait=self.wait if wait is _UNSET else wait)
        except ApprovalPending as pending:
            self._note_pending(pending)
            raise
        self._pending.pop(_key(decision), None)
        return settled

    async def asettle(self, decision: Decision, *, approval_id: str | None = None,
                      approver: Any = _UNSET, wait: Any = _UNSET) -> Decision:
        """Async twin of :meth:`settle`."""
        if decision.effect is not _ASK:
            return decision
        try:
            settled = await aresolve_ask(
                self.guard, decision, approval_id=approval_id,
                approver=self.approver if approver is _UNSET else approver,
                wait=self.wait if wait is _UNSET else wait)
        except ApprovalPending as pending:
            self._note_pending(pending)
            raise
        self._pending.pop(_key(decision), None)
        return settled

    def _note_pending(self, pending: ApprovalPending) -> None:
        key = _key(pending.decision)
        self._pending[key] = _Pending(pending.decision, pending.request_id)
        self._pending.move_to_end(key)
        while len(self._pending) > _MAX_PENDING:
            self._pending.popitem(last=False)

    @property
    def pending(self) -> list[str]:
        """Ids of the approval requests this enforcer reported as pending whose call has not
        come back settled since (approved and run, or refused)."""
        return [p.request_id for p in self._pending.values()]

    def forget_pending(self) -> None:
        """Forgets the requests reported pending (their records stay in the store)."""
        self._pending.clear()

    def pending_call(self, call_id: str) -> tuple[Decision, str] | None:
        """The ``ask`` decision and request id this enforcer reported pending for a framework
        call id, or None."""
        for found in reversed(self._pending.values()):
            if found.decision.call.call_id == call_id:
                return found.decision, found.request_id
        return None

    # -- a person's answer that arrived through the framework --------------------------------

    def answer(self, request_id: str, answer: Any, *, by: str,
               names: str | None = _NAMED) -> Any:
        """Records a reviewer's answer given through the framework (an interrupt's resume
        value, ``RunState.approve``) on the pending request; the call then resumes with
        ``approval_id=request_id`` (or is simply asked again).

        ``answer`` is True / ``"approve"``, False / ``"reject"``, or a mapping
        ``{"approve": bool, "by": str, "reason": str, "edit": {...args}}``. Returns the
        request as resolved.

        ``names`` is the request id the framework's answer itself carries (its payload, its
        resume value), None when it carries none: an adapter passes it when the answer comes
        out of the framework's saved state, which a run resumed after a crash replays. A
        request raised in doubt (the call may have run before the crash) takes an approval
        only from an answer that names it; a refusal always counts. Left out, the caller
        names ``request_id`` itself (it had it from callwarden).

        Raises:
            ApprovalError: the request is unknown, resolved already, expired, or ``by`` may
                not approve it (nobody approves their own call); ``approval_in_doubt``: an
                approval that does not name a request raised in doubt.
            ValueError: the answer is none of the above.
        """
        approve, who, reason, edit = _parse_answer(answer, by)
        approvals = self.guard.approvals
        if not approve:
            return approvals.deny(request_id, by=who, reason=reason)
        if names != request_id and names is not _NAMED:
            _refuse_in_doubt(approvals.get(request_id))
        return approvals.approve(request_id, by=who, comment=reason, edit=edit)

    async def aanswer(self, request_id: str, answer: Any, *, by: str,
                      names: str | None = _NAMED) -> Any:
        """Async twin of :meth:`answer`."""
        approve, who, reason, edit = _parse_answer(answer, by)
        approvals = self.guard.approvals
        if not approve:
            return await approvals.adeny(request_id, by=who, reason=reason)
        if names != request_id and names is not _NAMED:
            _refuse_in_doubt(await approvals.aget(request_id))
        return await approvals.aapprove(request_id, by=who, comment=reason, edit=edit)

    def request(self, decision: Decision) -> str:
        """The id of the approval request an ``ask`` decision is bound to (the same call's
        pending request, or a new one), without asking anyone."""
        request_id: str = self.guard.approvals.request(decision).id
        return request_id

    async def arequest(self, decision: Decision) -> str:
        """Async twin of :meth:`request`."""
        request_id: str = (await self.guard.approvals.arequest(decision)).id
        return request_id

    # -- running the tool ------------------------------------------------------------------

    def call(self, tool: str, args: Any, fn: Callable[..., Any], *,
             approval_id: str | None = None, approver: Any = _UNSET, wait: Any = _UNSET,
             **fields: Any) -> Any:
        """The whole path for one call: decide, settle an ask, run ``fn`` with the effective
        arguments, screen its output, record the outcome; returns what the model sees.

        ``fields`` are ``check``'s: ``call_id``, ``agent``, ``session``, ``principal``,
        ``framework``, ``context``, and any other keyword as context.

        Raises:
            ToolDenied: (``ApprovalPending``, ``ApprovalRequired``, ``RunHalted``) when the call
                may not run or its output halts the run; carries the decision.
        """
        decision = self.guard.check(tool, args, **self._defaults(fields))
        if decision.effect is _ASK:
            decision = self.settle(decision, approval_id=approval_id, approver=approver,
                                   wait=wait)
        shown, halt = self.run(decision, fn)
        if halt:
            raise RunHalted(decision._replace(effect=Effect.HALT, message=str(shown)))
        return shown

    async def acall(self, tool: str, args: Any, fn: Callable[..., Any], *,
                    approval_id: str | None = None, approver: Any = _UNSET, wait: Any = _UNSET,
                    **fields: Any) -> Any:
        """Async twin of :meth:`call`; ``fn`` and the approver may be sync or async."""
        decision = await self.guard.acheck(tool, args, **self._defaults(fields))
        if decision.effect is _ASK:
            decision = await self.asettle(decision, approval_id=approval_id, approver=approver,
                                          wait=wait)
        shown, halt = await self.arun(decision, fn)
        if halt:
            raise RunHalted(decision._replace(effect=Effect.HALT, message=str(shown)))
        return shown

    def _defaults(self, fields: dict[str, Any]) -> dict[str, Any]:
        """``fields`` with this enforcer's framework and defaults where they say nothing."""
        if self.framework is None and self.agent is None and self.session is None \
                and self.principal is None:
            return fields  # Guard.run's own path: nothing to add
        if self.framework is not None:
            fields.setdefault("framework", self.framework)
        for name in ("agent", "session", "principal"):
            default = getattr(self, name)
            if default is not None and fields.get(name) is None:
                fields[name] = default
        return fields

    def run(self, decision: Decision, fn: Callable[..., Any]) -> tuple[Any, bool]:
        """Runs ``fn`` for an allowed decision with its effective arguments, screens the
        output and records the outcome: (what the model sees, whether the run must halt).

        Raises:
            ToolDenied: the decision does not allow the call (the tool does not run).
            TypeError: ``fn`` is async (use :meth:`arun`).
            BaseException: whatever the tool raised (recorded as an ``error`` outcome).
        """
        if not decision.effect.allows:
            raise_unless_allowed(decision)
        started = _perf()
        try:
            result = _invoke(fn, decision)
            if inspect.isawaitable(result):
                if inspect.iscoroutine(result):
                    result.close()  # never awaited: close it so Python does not warn
                raise TypeError(
                    f"the tool for '{decision.call.tool}' is async: it cannot run on the "
                    "synchronous path; use 'await guard.arun(...)' (or arun) instead")
        except BaseException as e:
            self.record_outcome(decision, OutcomeStatus.ERROR, started, e)
            raise
        guard = self.guard
        if nothing_after(guard.engine, decision):  # the usual case: only the outcome to record
            if guard.auditor is not None:
                guard.auditor.outcome(decision, _OK, _perf() - started, None, output_rule=None,
                                      output_source=None)
            return result, False
        screened = self.finish(decision, result, started)
        return screened.shown, screened.halt

    async def arun(self, decision: Decision, fn: Callable[..., Any]) -> tuple[Any, bool]:
        """Async twin of :meth:`run`; ``fn`` may be sync or async."""
        if not decision.effect.allows:
            raise_unless_allowed(decision)
        started = _perf()
        try:
            result = _invoke(fn, decision)
            if type(result) is types.CoroutineType or inspect.isawaitable(result):
                result = await result
        except BaseException as e:
            await self.arecord_outcome(decision, OutcomeStatus.ERROR, started, e)
            raise
        guard = self.guard
        if nothing_after(guard.engine, decision):  # the usual case: only the outcome to record
            if guard.auditor is not None:
                await guard.auditor.aoutcome(decision, _OK, _perf() - started, None,
                                             output_rule=None, output_source=None)
            return result, False
        try:  # _ascreen and arelease, awaited only when there is something to wait for
            screened, writes = self._screening(decision, result)
            shown, status, halt, rule, source = screened if writes is None else \
                await self._written(decision, screened, writes)
        finally:
            if holds_slots(guard.engine, decision):
                await self.arelease(decision)
        auditor = guard.auditor  # inlined arecord_outcome: this is every arun's cost
        if auditor is not None:
            await auditor.aoutcome(decision, status, _perf() - started, None,
                                   output_rule=rule, output_source=source)
        if (closing := self._closing(decision, status)) is not None:
            await _aquietly(closing)
        return shown, halt

    def finish(self, decision: Decision, result: Any, started: float, *,
               failed: bool = False) -> Screened:
        """After a tool the framework ran itself (``started``: ``time.perf_counter()`` when it
        started): screen its output and record the outcome, naming the output rule that acted.
        ``failed``: the tool reported a failure in its result (an MCP ``isError``), recorded
        as an ``error`` outcome when the output rules left the result as it was.

        Raises:
            AuditError: the outcome could not be written and the audit is required.
        """
        try:
            screened = Screened(*self._screen(decision, result))
        finally:
            if decision.budgets:
                self.release(decision)
        status = OutcomeStatus.ERROR if failed and screened.status is OutcomeStatus.OK \
            else screened.status
        auditor = self.guard.auditor  # inlined record_outcome: this is every run's cost
        if auditor is not None:
            auditor.outcome(decision, status, _perf() - started, None,
                            output_rule=screened.rule, output_source=screened.source)
        if (closing := self._closing(decision, status)) is not None:
            _quietly(closing)
        return screened

    async def afinish(self, decision: Decision, result: Any, started: float, *,
                      failed: bool = False) -> Screened:
        """Async twin of :meth:`finish`: the store is written without blocking the loop; the
        outcome is recorded as :meth:`finish` records it (at once, after its decision, when
        the audit writes its lines directly)."""
        try:
            screened = Screened(*await self._ascreen(decision, result))
        finally:
            if holds_slots(self.guard.engine, decision):
                await self.arelease(decision)
        status = OutcomeStatus.ERROR if failed and screened.status is OutcomeStatus.OK \
            else screened.status
        auditor = self.guard.auditor
        if auditor is not None:
            auditor.outcome(decision, status, _perf() - started, None,
                            output_rule=screened.rule, output_source=screened.source)
        if (closing := self._closing(decision, status)) is not None:
            await _aquietly(closing)
        return screened

    # -- the slots of calls in flight ----------------------------------------------------------

    def release(self, decision: Decision) -> bool:
        """Lets go of the slots a call holds of ``concurrent`` limits, once it has finished
        (every outcome path does it; call it for a tool you ran yourself after ``check``).
        Idempotent; never raises: a failure is logged, and the slots end with their hold.
        Returns whether it succeeded (True when the call held none)."""
        failure: object = None
        try:
            flow = self.guard.engine.release(decision)
            failure = None if flow is None else drive(flow)
        except Exception as e:  # a bug must not fail the tool's result either
            failure = e
        return _released(decision, failure)

    async def arelease(self, decision: Decision) -> bool:
        """Async twin of :meth:`release`."""
        failure: object = None
        try:
            flow = self.guard.engine.release(decision)
            failure = None if flow is None else await adrive(flow)
        except Exception as e:
            failure = e
        return _released(decision, failure)

    # -- the output and the record -----------------------------------------------------------

    def screen(self, decision: Decision, result: Any) -> Screened:
        """Applies the policy's output rules (``on: output``) to a tool's result."""
        return Screened(*self._screen(decision, result))

    def screen_output(self, decision: Decision, result: Any) -> tuple[Any, str, bool]:
        """(what the model sees, the outcome status, whether to halt): :meth:`screen` as a
        tuple of three."""
        shown, status, halt, _, _ = self._screen(decision, result)
        return shown, status, halt

    def _screen(self, decision: Decision, result: Any) -> _Screening:
        screened = self._output_rules(decision, result)
        if screened[1] is _BLOCKED:
            return screened
        return self._provenance(decision, screened)

    async def _ascreen(self, decision: Decision, result: Any) -> _Screening:
        """Async twin of :meth:`_screen`: the store is written without blocking the loop."""
        screened, writes = self._screening(decision, result)
        return screened if writes is None else await self._written(decision, screened, writes)

    def _screening(self, decision: Decision, result: Any) -> tuple[_Screening, Flow[bool] | None]:
        """The output rules' screening of a result, and the writes that remember what the
        model is about to see of it (None: nothing to remember)."""
        screened = self._output_rules(decision, result)
        if screened[1] is _BLOCKED:
            return screened, None
        return screened, self._untrusted_writes(decision, screened[0])

    async def _written(self, decision: Decision, screened: _Screening,
                       writes: Flow[bool]) -> _Screening:
        """``screened`` once ``writes`` are done; withheld when they could not be."""
        try:
            written = await adrive(writes)
        except Exception as e:  # fail closed: withhold what could not be recorded
            return self._withheld(decision, f"{type(e).__name__}: {e}")
        return screened if written else self._withheld(decision, None)

    def _output_rules(self, decision: Decision, result: Any) -> _Screening:
        check = self.guard.check_output(decision, result)
        if check is None or check.effect is Effect.ALLOW:
            return result, _OK, False, None, None
        if check.effect is Effect.MODIFY:
            return check.output, OutcomeStatus.OUTPUT_MODIFIED, False, check.rule, check.source
        return (check.message, OutcomeStatus.OUTPUT_BLOCKED, check.effect is Effect.HALT,
                check.rule, check.source)

    def _provenance(self, decision: Decision, screened: _Screening) -> _Screening:
        """Remembers the entities of an untrusted output the model is about to see, for rules
        about where a value came from (``untrusted:``, ``after_untrusted:``). An output whose
        entities could not be remembered is withheld: the model must not act on values whose
        origin the policy would no longer know."""
        writes = self._untrusted_writes(decision, screened[0])
        if writes is None:
            return screened
        try:
            written = drive(writes)
        except Exception as e:  # fail closed: withhold what could not be recorded
            return self._withheld(decision, f"{type(e).__name__}: {e}")
        return screened if written else self._withheld(decision, None)

    def _untrusted_writes(self, decision: Decision, output: Any) -> Flow[bool] | None:
        """The store writes that remember an untrusted output's entities; None when the
        policy does not read where values came from or the call has no session."""
        engine = self.guard.engine
        if not engine.facts.untrusted or decision.call.session is None:
            return None
        return _remember_output(engine, decision.call, output)

    @staticmethod
    def _withheld(decision: Decision, why: str | None) -> _Screening:
        reason = why or "the state store did not record where its content came from"
        return (output_unscreened(decision.call.tool, reason), OutcomeStatus.OUTPUT_BLOCKED,
                False, None, None)

    def record_output(self, decision: Decision, output: Any) -> bool:
        """For callers that run tools themselves and use only :meth:`check`: remembers an
        untrusted output's entities (as running it through the enforcement path does);
        returns False when they could not be recorded (do not show the output then)."""
        screened = self._provenance(decision, (output, OutcomeStatus.OK, False, None, None))
        return screened[1] is OutcomeStatus.OK

    def record_outcome(self, decision: Decision, status: str, started: float,
                       error: BaseException | None = None, *,
                       by: Screened | None = None) -> None:
        """Writes the outcome event (``ok``, ``error``, ``output_blocked`` ...) when audited, and
        lets go of the call's slots of ``concurrent`` limits; ``by``: the screening of the
        result, so the event names the output rule that acted."""
        if decision.budgets:
            self.release(decision)
        auditor = self.guard.auditor
        if auditor is not None:
            auditor.outcome(decision, status, _perf() - started, _error_text(error),
                            output_rule=None if by is None else by.rule,
                            output_source=None if by is None else by.source)
        if (closing := self._closing(decision, status)) is not None:
            _quietly(closing)

    async def arecord_outcome(self, decision: Decision, status: str, started: float,
                              error: BaseException | None = None, *,
                              by: Screened | None = None) -> None:
        """Async twin of :meth:`record_outcome`."""
        if holds_slots(self.guard.engine, decision):
            await self.arelease(decision)
        auditor = self.guard.auditor
        if auditor is not None:
            await auditor.aoutcome(decision, status, _perf() - started, _error_text(error),
                                   output_rule=None if by is None else by.rule,
                                   output_source=None if by is None else by.source)
        if (closing := self._closing(decision, status)) is not None:
            await _aquietly(closing)

    def _closing(self, decision: Decision, status: str) -> Flow[bool] | None:
        """The journal write that closes a call's entry once its outcome is recorded (a call
        with side effects its caller named: engine/journal.py), or None."""
        engine = self.guard.engine
        journal = engine.journal
        if not decision.effect.allows or decision.call.call_id == decision.decision_id or \
                not journal.covers_decision(decision, engine.profile(decision.call.tool)):
            return None
        return journal.close(decision, str(status), _perf() + engine.settings.timeout)


def raise_unless_allowed(decision: Decision) -> None:
    """Raises the exception that refuses a decision which does not let the tool run.

    Raises:
        RunHalted: halt.  ApprovalRequired: an unsettled ask.  ToolDenied: deny.
    """
    effect = decision.effect
    if effect.allows:
        return
    if effect is Effect.HALT:
        raise RunHalted(decision)
    if effect is Effect.ASK:
        raise ApprovalRequired(decision)
    raise ToolDenied(decision)


def _invoke(fn: Callable[..., Any], decision: Decision) -> Any:
    """Calls a tool with the effective arguments, as fresh copies the tool may change."""
    # A function or method has no invoke_decided: asking costs a raised AttributeError.
    invoke = None if type(fn) in _ROUTINES else getattr(fn, "invoke_decided", None)
    if invoke is not None:  # @guard.protect's call: it maps arguments back onto parameters
        return invoke(decision)
    return fn(**thaw(decision.args))


_ROUTINES = frozenset({types.FunctionType, types.MethodType, types.BuiltinFunctionType})


def _key(decision: Decision) -> str:
    return decision_digest(decision)


def _remember_output(engine: Any, call: Any, output: Any) -> Flow[bool]:
    """Remembers the entities of a tool's untrusted output in its session's facts (True when
    there is nothing to remember); reading the output happens here, so its errors surface
    where the writes are driven."""
    values = output_facts(engine, engine.facts, call, output)
    if values is None:
        return True
    return (yield from remember(engine.store, engine.clock, call.session, "untrusted", values,
                                _perf() + engine.settings.timeout))


def _quietly(flow: Flow[Any]) -> None:
    """Closes a journal entry; a store that fails leaves the call in doubt, which is safe, and
    must not fail the tool's result."""
    try:
        drive(flow)
    except Exception:  # the entry stays "executing": a resume asks before running it again
        return


async def _aquietly(flow: Flow[Any]) -> None:
    """Async twin of :func:`_quietly`."""
    try:
        await adrive(flow)
    except Exception:  # as _quietly
        return


def _released(decision: Decision, failure: object) -> bool:
    if failure is None:
        return True
    log.warning("callwarden: the slots of call %s (%s) could not be let go, they end with "
                "their hold: %s", decision.decision_id, decision.call.tool, failure)
    return False


def _error_text(error: BaseException | None) -> str | None:
    return None if error is None else f"{type(error).__name__}: {error}"


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
