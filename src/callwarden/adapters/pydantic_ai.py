"""Pydantic AI adapter: a capability that puts a policy in front of every tool call.

``Agent(..., capabilities=[CallwardenCapability(policy)])``. Pydantic AI routes every tool it
executes — ``@agent.tool`` functions, ``FunctionToolset``, MCP toolsets, any other toolset —
through the capabilities' tool-execution hooks, after the arguments were validated. The
capability sits in the ``innermost`` tier: its ``before_tool_execute`` runs last, so it decides
the arguments the tool will really get (after any other capability rewrote them), and its
``after_tool_execute`` runs first, so no other capability sees an unscreened result;
``wrap_tool_execute`` refuses calls once halted and records the outcome of a tool that raised;
``after_node_run`` ends a halted run. Effects in Pydantic AI's idiom:

* allow / modify — ``before_tool_execute`` returns the arguments: the tool runs, with the
  rewritten ones (validated again by the tool's own schema) for modify; ``after_tool_execute``
  passes its result through the policy's output rules before the model sees it;
* deny — ``before_tool_execute`` raises ``ToolFailed(message)``: the tool never runs and the
  model gets a failed tool return carrying callwarden's message. Unlike ``ModelRetry`` it neither
  asks the model to "fix the errors and try again" nor spends the tool's retry budget, so
  denials never exhaust a run into ``UnexpectedModelBehavior``;
* ask — settled inline by ``approver=`` or by waiting ``wait=`` seconds for
  ``callwarden approvals approve ID``; otherwise ``before_tool_execute`` raises
  ``ApprovalRequired`` (metadata: the callwarden request id, rule and message) and the run ends
  with ``DeferredToolRequests`` as its output (add it to the agent's ``output_type``). Resume with
  ``agent.run(message_history=..., deferred_tool_results=DeferredToolResults(approvals=...))``,
  or answer inline with a ``HandleDeferredToolCalls`` capability: an approved call (Pydantic AI
  sets ``ctx.tool_call_approved``) records the approval on callwarden's request and runs that
  exact call once (``ToolApproved(override_args=...)`` is an edit: the policy decides the edited
  call again); a ``ToolDenied(message)`` is recorded as the reviewer's refusal (``after_node_run``)
  and the model reads the reviewer's message. With ``defer=False`` the model gets a failed
  return naming the pending request instead, and the same call asked again (in the same
  conversation) runs once after approval;
* halt — the call gets ``ToolFailed`` saying the run halted; once the tool-call step ends
  (calls of the same step that were already dispatched finish, each decided on its own),
  ``after_node_run`` raises :class:`AgentRunHalted` — a :class:`~callwarden.RunHalted` and a
  Pydantic AI ``AgentRunError`` — so ``agent.run`` raises it and the model gets no further turn.
  The capability refuses every later call (and halts those runs) until :meth:`clear_halt`.

If deciding fails (a broken policy, a store error), the tool does not run and the model gets a
failed return saying why. Tools Pydantic AI never executes itself (``external`` tools, output
tools) are not seen by any hook, so no policy sees them.

The call's ``context.request`` is the latest ``UserPromptPart`` of the run's messages
(``RunContext.messages``, else ``RunContext.prompt``).
"""

from __future__ import annotations

import copy
import time
from contextvars import ContextVar
from typing import Any

from callwarden.exceptions import MissingDependency

try:
    from pydantic_ai import CallToolsNode, ModelRequestNode
    from pydantic_ai.capabilities import AbstractCapability, CapabilityOrdering
    from pydantic_ai.capabilities.abstract import NodeResult, WrapToolExecuteHandler
    from pydantic_ai.exceptions import AgentRunError, CallDeferred, SkipToolExecution, ToolFailed
    from pydantic_ai.exceptions import ApprovalRequired as DeferForApproval
    from pydantic_ai.messages import (
        ModelRequest,
        TextContent,
        ToolCallPart,
        ToolReturn,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.tools import AgentDepsT, RunContext, ToolDefinition
    from pydantic_core import to_jsonable_python
except ImportError as e:  # pragma: no cover - depends on the environment
    raise MissingDependency("the Pydantic AI adapter", "pydantic-ai-slim", "pydantic-ai") from e

from callwarden._call import thaw
from callwarden._decision import Decision, Effect, OutcomeStatus
from callwarden._enforce import Enforcer, Screened
from callwarden._messages import (
    approval_pending,
    cannot_rewrite,
    describe_refusal,
    halted,
    not_approved,
    output_unscreened,
    undecided,
)
from callwarden.adapters._core import enforcer as enforcement_path
from callwarden.adapters._core import latest_user_text
from callwarden.exceptions import (
    ApprovalError,
    ApprovalInvalid,
    ApprovalPending,
    CallwardenError,
    RunHalted,
)

__all__ = ["FRAMEWORK", "AgentRunHalted", "CallwardenCapability"]

FRAMEWORK = "pydantic-ai"
"""The name recorded in ``call.framework`` and the audit log."""

_perf = time.perf_counter
_SCALARS = frozenset({str, int, float, bool, type(None)})


class AgentRunHalted(RunHalted, AgentRunError):
    """A ``halt`` decision (on a call or on its output) ended the agent run.

    ``agent.run`` / ``run_sync`` / ``iter`` raise it once the tool-call step that hit the halt
    has finished. It is a :class:`~callwarden.RunHalted` (``decision`` says which rule and why)
    and a Pydantic AI ``AgentRunError``, the framework's base for a run that failed for good (a
    durable execution engine does not retry it).
    """

    def __init__(self, decision: Decision) -> None:
        super().__init__(decision)
        self.message = halted(decision)
        self.args = (self.message,)


class _Halt:
    """The decision that halted a capability, shared by its per-run copies."""

    __slots__ = ("decision",)

    def __init__(self) -> None:
        self.decision: Decision | None = None


class CallwardenCapability(AbstractCapability[AgentDepsT]):
    """Decides every tool call of a Pydantic AI agent with a callwarden policy.

    Args:
        policy: A :class:`~callwarden.Guard`, a policy file path, or a policy dict (or an
            ``Enforcer`` to share with other adapters).
        approver: Answers ``ask`` decisions inside the call (a callback, sync or async, or
            ``TerminalApprover``).
        wait: Seconds to wait for an answer given elsewhere (``callwarden approvals approve``)
            before pausing the run.
        defer: Pause an unanswered ``ask`` as a deferred tool call (``DeferredToolRequests``);
            False gives the model a failed tool return naming the pending request instead.
        reviewer: The name recorded as the approver of an answer given through Pydantic AI
            (``DeferredToolResults`` does not say who answered). The policy's
            ``approvals.approvers`` must allow it, and it must differ from the agent's name.
        agent / principal / session: Recorded on every call. By default the agent is the
            Pydantic AI agent's ``name`` and the session its ``conversation_id`` (carried over
            when a run continues a conversation's ``message_history``).
        id: The capability's id within a run (Pydantic AI derives one when None).
    """

    def __init__(self, policy: Any, *, approver: Any = None, wait: float | None = None,
                 defer: bool = True, reviewer: str = "pydantic-ai-reviewer",
                 agent: str | None = None, principal: str | None = None,
                 session: str | None = None, id: str | None = None) -> None:
        # AbstractCapability is a dataclass without __init__ (init=False): its fields are set here.
        self.id = id
        self.description = None
        self.defer_loading = False
        self._enforcer: Enforcer = enforcement_path(policy, framework=FRAMEWORK,
                                                    approver=approver, wait=wait, agent=agent,
                                                    principal=principal, session=session)
        self._defer = defer
        self.reviewer = reviewer
        self._halt = _Halt()
        self._run_halt: Decision | None = None  # set on the per-run copy that hit the halt

    # The dataclass base compares fields (the id): two capabilities are never the same one.
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"CallwardenCapability({self._enforcer!r})"

    @property
    def enforcer(self) -> Enforcer:
        """The :class:`Enforcer` deciding the calls (its ``guard`` holds the approvals)."""
        return self._enforcer

    @property
    def halted(self) -> Decision | None:
        """The decision that halted the agent, or None while calls may run."""
        return self._halt.decision

    @property
    def pending(self) -> list[str]:
        """Ids of approval requests reported as pending and not yet settled."""
        return self._enforcer.pending

    def clear_halt(self) -> None:
        """Lets calls run again after a halt (once a person has looked at why)."""
        self._halt.decision = None

    async def answer(self, request_id: str, answer: Any, *, by: str) -> None:
        """Records a reviewer's answer to a pending request (see :meth:`Enforcer.answer`):
        the same call then runs once, or is refused with the reviewer's reason."""
        await self._enforcer.aanswer(request_id, answer, by=by)

    # -- the capability's place and lifetime ------------------------------------------------

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds a live policy: not buildable from an agent spec

    def get_ordering(self) -> CapabilityOrdering:
        return CapabilityOrdering(position="innermost")

    async def for_run(self, ctx: RunContext[AgentDepsT]) -> AbstractCapability[AgentDepsT]:
        """A copy per run: a halt ends the run that hit it (and is shared by every copy)."""
        run = copy.copy(self)
        run._run_halt = None
        return run

    # -- one tool call -------------------------------------------------------------------
    # Pydantic AI runs a call as: every capability's wrap_tool_execute (this one innermost) →
    # every before_tool_execute (this one last: it decides the arguments the tool will get) →
    # the tool → every after_tool_execute (this one first: nothing sees an unscreened result).

    async def wrap_tool_execute(self, ctx: RunContext[AgentDepsT], *, call: ToolCallPart,
                                tool_def: ToolDefinition, args: dict[str, Any],
                                handler: WrapToolExecuteHandler) -> Any:
        """Refuses every call once halted; records the outcome of a tool that raised."""
        if self._halt.decision is not None:
            self._halting(self._halt.decision)
            raise ToolFailed(halted(self._halt.decision))
        slot = _Slot()
        token = _CALL.set(slot)
        try:
            return await handler(args)
        except BaseException as e:
            if slot.decision is not None and slot.started and not slot.recorded \
                    and not isinstance(e, _CONTROL_FLOW):
                self._record(slot.decision, OutcomeStatus.ERROR, slot.started, e)
            raise
        finally:
            _CALL.reset(token)

    async def before_tool_execute(self, ctx: RunContext[AgentDepsT], *, call: ToolCallPart,
                                  tool_def: ToolDefinition,
                                  args: dict[str, Any]) -> dict[str, Any]:
        """Decides the call: the arguments to run it with, or a refusal, deferral or halt."""
        tool = call.tool_name
        try:
            decision = await self._decide(ctx, call, _plain(args))
            effective = args if decision.effect is Effect.ALLOW else _validated(ctx, decision)
        except (DeferForApproval, ToolFailed):
            raise
        except _Unappliable as e:
            raise ToolFailed(str(e)) from None
        except ApprovalError as e:
            raise ToolFailed(not_approved(tool, str(e))) from e
        except Exception as e:  # fail closed: the tool does not run
            raise ToolFailed(undecided(tool, e)) from e
        slot = _CALL.get()
        if slot is not None:
            slot.decision, slot.started = decision, _perf()
        return effective

    async def after_tool_execute(self, ctx: RunContext[AgentDepsT], *, call: ToolCallPart,
                                 tool_def: ToolDefinition, args: dict[str, Any],
                                 result: Any) -> Any:
        """Screens the result with the output rules and records the outcome."""
        slot = _CALL.get()
        if slot is None or slot.decision is None:
            return result  # not a call this capability decided (it never ran the tool)
        slot.recorded = True
        return self._screened(slot.decision, result, slot.started)

    async def _decide(self, ctx: RunContext[AgentDepsT], call: ToolCallPart,
                      args: Any) -> Decision:
        """The decision with an ``ask`` settled, refusals raised as the model's ``ToolFailed``.

        Raises:
            pydantic_ai.exceptions.ApprovalRequired: nobody answered yet (the run defers it).
            ToolFailed: denied, halted, or pending with ``defer=False``.
        """
        enforcer, tool = self._enforcer, call.tool_name
        fields = self._fields(ctx, call)
        try:
            if ctx.tool_call_approved:
                decision = await self._approved(call, args, fields)
            else:
                decision = await enforcer.adecide(tool, args, **fields)
        except ApprovalPending as pending:
            if not self._defer:
                raise ToolFailed(approval_pending(pending.decision, pending.request_id)) from None
            asked = pending.decision
            raise DeferForApproval(metadata={
                "request_id": pending.request_id, "rule": asked.rule,
                "message": asked.message or f"The call to '{tool}' needs approval."}) from None
        if decision.effect is Effect.HALT:
            self._halt.decision = self._halt.decision or decision
            self._halting(decision)
            raise ToolFailed(halted(decision))
        if not decision.effect.allows:
            raise ToolFailed(describe_refusal(decision))
        return decision

    async def _approved(self, call: ToolCallPart, args: Any,
                        fields: dict[str, Any]) -> Decision:
        """A call a person approved through Pydantic AI: their approval answers callwarden's
        request for it, and the call runs once (an edited call is decided again)."""
        enforcer, tool = self._enforcer, call.tool_name
        decision = await enforcer.acheck(tool, args, **fields)
        if decision.effect is not Effect.ASK:
            return decision
        if decision.in_doubt:
            # It may have run before a crash, and a resumed run carries the approval that let
            # it run then: only an answer to callwarden's request in doubt counts (deferred
            # again until a person gives one).
            return await enforcer.asettle(decision, approver=None, wait=None)
        asked = enforcer.pending_call(call.tool_call_id)
        if asked is not None and thaw(asked[0].call.args) != thaw(decision.call.args):
            # ToolApproved(override_args=...): the reviewer edited the call they were shown.
            original, request_id = asked
            await self._answer(request_id, {"approve": True, "edit": thaw(decision.call.args)})
            return await enforcer.adecide(tool, thaw(original.call.args),
                                          approval_id=request_id, **fields)
        try:
            return await enforcer.asettle(decision, approver=None, wait=None)
        except ApprovalPending as pending:
            request_id = pending.request_id
        await self._answer(request_id, True)
        return await enforcer.adecide(tool, args, approval_id=request_id, **fields)

    async def _answer(self, request_id: str, answer: Any) -> None:
        try:
            await self._enforcer.aanswer(request_id, answer, by=self.reviewer)
        except ApprovalInvalid as e:
            if e.code != "approval_already_resolved":
                raise
            # Resolved elsewhere meanwhile (CLI, web console): that resolution stands.

    def _fields(self, ctx: RunContext[AgentDepsT], call: ToolCallPart) -> dict[str, Any]:
        enforcer = self._enforcer
        name = getattr(ctx.agent, "name", None)
        return {"call_id": call.tool_call_id,
                "agent": None if enforcer.agent or not isinstance(name, str) else name,
                "session": None if enforcer.session else ctx.conversation_id,
                "context": _request(ctx)}

    def _halting(self, decision: Decision) -> None:
        """Ends this run once the current tool-call step is over."""
        self._run_halt = self._run_halt or decision

    # -- after the tool ran ----------------------------------------------------------------

    def _screened(self, decision: Decision, result: Any, started: float) -> Any:
        """The result as the output rules leave it, the outcome recorded; a blocked or
        unscreenable result becomes the model's ``ToolFailed``."""
        tool = decision.call.tool
        try:
            shown, by = _screen(self._enforcer, decision, result)
        except Exception as e:  # fail closed: withhold what could not be checked
            self._record(decision, OutcomeStatus.ERROR, started, e)
            raise ToolFailed(output_unscreened(tool, e)) from None
        self._record(decision, by.status, started, None, by)
        if by.halt:
            stop = decision._replace(effect=Effect.HALT, message=str(by.shown), rule=by.rule,
                                     source=by.source)
            self._halt.decision = self._halt.decision or stop
            self._halting(stop)
            raise ToolFailed(halted(stop))
        if by.status is OutcomeStatus.OUTPUT_BLOCKED:
            raise ToolFailed(str(by.shown))
        return shown

    def _record(self, decision: Decision, status: str, started: float,
                error: BaseException | None, by: Screened | None = None) -> None:
        try:
            self._enforcer.record_outcome(decision, status, started, error, by=by)
        except Exception:  # an audit sink failing after the call cannot undo it
            return

    # -- the end of a tool-call step ---------------------------------------------------------

    async def after_node_run(self, ctx: RunContext[AgentDepsT], *, node: Any,
                             result: NodeResult[AgentDepsT]) -> NodeResult[AgentDepsT]:
        """Ends a run that hit a halt, and records reviewers' refusals of deferred calls."""
        if not isinstance(node, CallToolsNode):
            return result
        if self._run_halt is not None:
            raise AgentRunHalted(self._run_halt)
        if isinstance(result, ModelRequestNode):
            for part in result.request.parts:
                if isinstance(part, ToolReturnPart) and part.outcome == "denied":
                    await self._refused(part)
        return result

    async def _refused(self, part: ToolReturnPart) -> None:
        """A ``ToolDenied`` answer to a call callwarden deferred: the reviewer's refusal."""
        asked = self._enforcer.pending_call(part.tool_call_id)
        if asked is None:
            return
        reason = part.model_response_str(wrap_if_error=False)
        try:
            await self._enforcer.aanswer(asked[1], {"approve": False, "reason": reason},
                                         by=self.reviewer)
        except Exception:  # resolved elsewhere, or refused: the call did not run either way
            return
        try:  # settles the request on the enforcer: it is no longer pending
            await self._enforcer.asettle(asked[0], approver=None, wait=None)
        except Exception:
            return


class _Slot:
    """One call on its way through the hooks: its decision and when the tool started."""

    __slots__ = ("decision", "recorded", "started")

    def __init__(self) -> None:
        self.decision: Decision | None = None
        self.started = 0.0
        self.recorded = False


# Each tool call runs in its own task, so the slot set by wrap_tool_execute is that call's.
_CALL: ContextVar[_Slot | None] = ContextVar("callwarden_pydantic_ai_call", default=None)
# Raised by the tool to defer itself or by another capability to answer in its place: no
# outcome yet (a deferred call comes back through the hooks when it is resolved).
_CONTROL_FLOW = (CallDeferred, DeferForApproval, SkipToolExecution)


class _Unappliable(CallwardenError):
    """A rewrite the tool's own schema rejects: the model is told to call it that way."""


def _request(ctx: RunContext[Any]) -> dict[str, Any] | None:
    """``{"request": text}``: the latest user prompt of the run (its messages, else its
    prompt); None when there is none or it cannot be read — never an exception."""
    try:
        content: Any = ctx.prompt
        found = False
        for message in reversed(ctx.messages):
            if isinstance(message, ModelRequest):
                for part in reversed(message.parts):
                    if isinstance(part, UserPromptPart):
                        content, found = part.content, True
                        break
            if found:
                break
        if content is None:
            return None
        text = content if isinstance(content, str) else "\n".join(
            item if isinstance(item, str) else item.content
            for item in content if isinstance(item, str | TextContent))
        said = latest_user_text([{"role": "user", "content": text}])  # trimmed as everywhere
    except Exception:
        return None
    return None if said is None else {"request": said}


def _plain(value: Any) -> Any:
    """A value as the JSON the policy reasons about (a Pydantic model becomes a dict)."""
    if type(value) is str or (type(value) is dict and all(
            type(v) in _SCALARS for v in value.values())):
        return value
    try:
        return to_jsonable_python(value)
    except Exception:  # left as it is: the snapshot keeps what it cannot read opaque
        return value


def _validated(ctx: RunContext[AgentDepsT], decision: Decision) -> dict[str, Any]:
    """Rewritten arguments validated by the tool's own schema, as the tool expects them."""
    args = thaw(decision.args)
    tools = getattr(ctx.tool_manager, "tools", None) or {}
    found = tools.get(decision.call.tool)
    if found is None:  # no tool manager (a durable worker): the plain arguments
        return dict(args)
    try:
        validated = found.args_validator.validate_python(args, context=ctx.validation_context)
    except Exception as e:
        raise _Unappliable(cannot_rewrite(decision, args, f"the tool's schema rejects the "
                                                          f"rewrite ({e})")) from e
    return dict(validated)


def _screen(enforcer: Enforcer, decision: Decision, result: Any) -> tuple[Any, Screened]:
    """(what the model gets, the screening that decides the outcome)."""
    if isinstance(result, ToolReturn):
        value, by = _screen_value(enforcer, decision, result.return_value)
        if by.halt or by.status is OutcomeStatus.OUTPUT_BLOCKED or result.content is None:
            return _rebuilt(result, value, result.content, by), by
        content, also = _screen_value(enforcer, decision, result.content)
        worst = also if _rank(also) > _rank(by) else by
        return _rebuilt(result, value, content, worst), worst
    return _screen_value(enforcer, decision, result)


def _screen_value(enforcer: Enforcer, decision: Decision, value: Any) -> tuple[Any, Screened]:
    by = enforcer.screen(decision, _plain(value))
    return (value if by.status is OutcomeStatus.OK else by.shown), by


def _rebuilt(result: ToolReturn[Any], value: Any, content: Any, by: Screened) -> Any:
    if by.status is OutcomeStatus.OK:
        return result
    # Metadata never reaches the model, but may hold the very data a rule removed.
    return ToolReturn(value, content=content)


def _rank(by: Screened) -> int:
    """How much a screening changed: halt > blocked > modified > untouched."""
    if by.halt:
        return 3
    return {OutcomeStatus.OUTPUT_BLOCKED: 2, OutcomeStatus.OUTPUT_MODIFIED: 1}.get(by.status, 0)
