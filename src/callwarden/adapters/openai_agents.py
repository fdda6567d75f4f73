"""OpenAI Agents SDK adapter: every ``FunctionTool`` call decided by a callwarden policy.

``guard_tools`` / ``guard_agent`` return guarded *copies* (the originals stay untouched). Each
effect maps onto the SDK's own idiom:

* allow — the tool runs;
* modify — the tool's invoker is wrapped and gets the rewritten JSON arguments (the model's
  ``tool_call.arguments`` are never mutated);
* deny — a tool input guardrail answers ``reject_content(message)``: the tool does not run and
  the model receives callwarden's message as the call's output;
* ask — the tool's ``needs_approval`` returns True, so the run pauses with
  ``result.interruptions``; after ``state.approve(item)`` the resumed run records that answer on
  callwarden's pending request and runs the call once; ``gate.reject(state, item, reason=...)``
  (or ``RunConfig(tool_error_formatter=gate.tool_error_formatter)`` with a plain
  ``state.reject``) records the refusal and sends the model callwarden's message;
* halt — the input guardrail answers ``raise_exception()``: the run stops with
  ``ToolInputGuardrailTripwireTriggered`` whose ``output.output_info`` is the decision;
* output rules — a tool output guardrail applies them (``reject_content`` carries the redacted or
  blocked text; a halting output rule raises ``ToolOutputGuardrailTripwireTriggered``).

Any error inside the adapter refuses the call with the reason; the tool does not run.

The latest user message of the run's input (``RunContextWrapper.turn_input``, which the SDK
copies into each ``ToolContext``) is the call's ``context.request``.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

from callwarden.exceptions import MissingDependency

try:
    from agents import Agent, FunctionTool
    from agents.exceptions import ToolInputGuardrailTripwireTriggered
    from agents.tool_guardrails import (
        ToolGuardrailFunctionOutput,
        ToolInputGuardrail,
        ToolInputGuardrailData,
        ToolOutputGuardrail,
        ToolOutputGuardrailData,
    )
except ImportError as e:  # pragma: no cover - depends on the environment
    raise MissingDependency("the OpenAI Agents SDK adapter", "openai-agents",
                            "openai-agents") from e

from callwarden._call import json_safe, thaw
from callwarden._decision import Decision, Effect
from callwarden._enforce import Enforcer
from callwarden._messages import approval_pending, describe_refusal
from callwarden.adapters._core import enforcer as enforcement_path
from callwarden.adapters._core import latest_user_text
from callwarden.exceptions import ApprovalPending

__all__ = ["FRAMEWORK", "ToolGate", "guard_agent", "guard_tools"]

FRAMEWORK = "openai-agents"
"""The name recorded in ``call.framework`` and the audit log."""

_GUARDRAIL_NAME = "callwarden"
# Decisions waiting for the next stage of the same call (guardrail -> invoker -> output
# guardrail). A run that stops between stages leaves its entry behind: the cap bounds that.
_MAX_STAGED = 4096
_perf = time.perf_counter
_Key = tuple[str, str]


class _Entry:
    """One call's decision, handed from one stage of the SDK's pipeline to the next."""

    __slots__ = ("decision", "error", "params", "raw", "stage", "started")

    def __init__(self, stage: str, decision: Decision | None, *, raw: str | None = None,
                 params: Any = None, error: str | None = None, started: float = 0.0) -> None:
        self.stage = stage
        self.decision = decision
        self.raw = raw
        self.params = params
        self.error = error
        self.started = started

    def same_call(self, raw: str) -> bool:
        if self.raw is not None:
            return self.raw == raw
        try:
            return bool(json.loads(raw) == self.params)
        except ValueError:
            return False


class ToolGate:
    """Guards OpenAI Agents SDK tools with one callwarden policy.

    Args:
        guard: A :class:`~callwarden.Guard`, a policy file path, or a policy dict.
        reviewer: The name recorded as the approver when a paused call is approved with
            ``state.approve(item)`` (the SDK does not say who approved). It must be allowed by
            the policy's ``approvals.approvers`` and differ from the agent's name.
        **enforcer_kwargs: ``approver``, ``wait``, ``agent``, ``principal``, ``session`` for
            :class:`~callwarden.adapters.Enforcer`. Without ``agent``, a call carries the name
            of the SDK agent it was guarded with (:meth:`agent`).
    """

    __slots__ = ("_agents", "_stages", "enforcer", "reviewer")

    def __init__(self, guard: Any, *, reviewer: str = "agents-sdk-reviewer",
                 **enforcer_kwargs: Any) -> None:
        self.enforcer: Enforcer = enforcement_path(guard, framework=FRAMEWORK,
                                                   **enforcer_kwargs)
        self.reviewer = reviewer
        self._stages: OrderedDict[_Key, _Entry] = OrderedDict()
        self._agents: set[str] = set()

    def __repr__(self) -> str:
        return f"ToolGate({self.enforcer!r}, reviewer={self.reviewer!r})"

    # -- guarding ------------------------------------------------------------------------

    def tools(self, tools: Iterable[Any], *, agent_name: str | None = None) -> list[Any]:
        """Returns guarded copies of ``tools`` (``FunctionTool`` s, MCP tools included).

        Raises:
            TypeError: a tool is not a ``FunctionTool`` (hosted tools run on OpenAI's servers
                and local shell/computer tools have no guardrail hook: callwarden cannot stop
                them, so it refuses to pretend it guards them).
        """
        guarded: list[Any] = []
        for tool in tools:
            if not isinstance(tool, FunctionTool):
                raise TypeError(
                    f"callwarden can only guard FunctionTool instances; {type(tool).__name__} "
                    f"{getattr(tool, 'name', '')!r} cannot be intercepted. Remove it from the "
                    "list, or wrap the action in a @function_tool.")
            invoker = tool.on_invoke_tool
            if isinstance(invoker, _GuardedInvoker) and invoker.bound.gate is self:
                guarded.append(tool)  # guarded by this gate already: deciding twice would
                continue              # double-count limits and audit events
            guarded.append(_Bound(self, tool, self.enforcer.agent or agent_name).tool)
        return guarded

    def agent(self, agent: Agent[Any]) -> Agent[Any]:
        """Returns a copy of ``agent`` whose tools (and MCP servers' tools) are guarded.

        Handoff target agents are guarded too (handoffs given as ``Handoff`` objects are not:
        guard the agent they hand off to yourself).
        """
        return self._agent(agent, {})

    def _agent(self, agent: Agent[Any], seen: dict[int, Agent[Any]]) -> Agent[Any]:
        if id(agent) in seen:
            return seen[id(agent)]
        self._agents.add(agent.name)
        tools = self.tools(agent.tools, agent_name=agent.name)
        if agent.mcp_servers:
            copy: Agent[Any] = _guarded_agent_type()(
                **{f.name: getattr(agent, f.name) for f in dataclasses.fields(agent) if f.init},
            )
            copy._callwarden_gate = self
            copy.tools = tools
        else:
            copy = agent.clone(tools=tools)
        seen[id(agent)] = copy
        copy.handoffs = [self._agent(h, seen) if isinstance(h, Agent) else h
                         for h in agent.handoffs]
        return copy

    # -- a reviewer's refusal ------------------------------------------------------------

    def reject(self, state: Any, item: Any, *, reason: str | None = None,
               by: str | None = None) -> None:
        """Rejects a paused call: records the refusal on callwarden's request and sends the
        model callwarden's message when the run resumes (``state.reject`` with that text)."""
        tool, args, call_id, agent = self._item(item)
        message = self._refuse(tool, args, call_id, agent, by or self.reviewer, reason,
                               _state_request(state))
        state.reject(item, rejection_message=message)

    async def areject(self, state: Any, item: Any, *, reason: str | None = None,
                      by: str | None = None) -> None:
        """Async twin of :meth:`reject`."""
        tool, args, call_id, agent = self._item(item)
        message = await self._arefuse(tool, args, call_id, agent, by or self.reviewer, reason,
                                      _state_request(state))
        state.reject(item, rejection_message=message)

    async def tool_error_formatter(self, args: Any) -> str | None:
        """A ``RunConfig.tool_error_formatter``: a plain ``state.reject(item)`` of a call this
        process paused is recorded on callwarden's request, and the model gets its message."""
        if getattr(args, "kind", None) != "approval_rejected":
            return None
        asked = self.enforcer.pending_call(args.call_id)
        if asked is None:
            return None  # paused by another process: the SDK's own text
        decision, request_id = asked
        try:
            return await self._arefused(decision, request_id, self.reviewer, None)
        except Exception as e:  # the call is refused either way; say so plainly
            return f"The call to '{decision.tool}' was rejected by the reviewer ({_error_text(e)})."

    def _item(self, item: Any) -> tuple[str, Any, str, str | None]:
        raw = item.raw_item
        fields: Mapping[str, Any] = raw if isinstance(raw, Mapping) else vars(raw)
        tool = str(item.tool_name or fields.get("name"))
        call_id = str(fields.get("call_id"))
        agent = getattr(getattr(item, "agent", None), "name", None)
        return (tool, fields.get("arguments"), call_id,
                self.enforcer.agent or (agent if agent in self._agents else None))

    def _refuse(self, tool: str, args: Any, call_id: str, agent: str | None, by: str,
                reason: str | None, context: dict[str, Any] | None) -> str:
        enforcer = self.enforcer
        decision = enforcer.check(tool, args, call_id=call_id, agent=agent, context=context)
        if decision.effect is not Effect.ASK:
            return _rejected_text(tool, by, reason)
        request_id = enforcer.request(decision)  # the same pending request
        enforcer.answer(request_id, {"approve": False, "reason": reason}, by=by)
        denied = enforcer.settle(decision, approval_id=request_id)
        return _rejected_text(tool, by, reason) if denied.allowed else describe_refusal(denied)

    async def _arefuse(self, tool: str, args: Any, call_id: str, agent: str | None, by: str,
                       reason: str | None, context: dict[str, Any] | None) -> str:
        enforcer = self.enforcer
        decision = await enforcer.acheck(tool, args, call_id=call_id, agent=agent,
                                         context=context)
        if decision.effect is not Effect.ASK:
            return _rejected_text(tool, by, reason)
        return await self._arefused(decision, await enforcer.arequest(decision), by, reason)

    async def _arefused(self, decision: Decision, request_id: str, by: str,
                        reason: str | None) -> str:
        enforcer = self.enforcer
        await enforcer.aanswer(request_id, {"approve": False, "reason": reason}, by=by)
        denied = await enforcer.asettle(decision, approval_id=request_id)
        return (_rejected_text(decision.tool, by, reason) if denied.allowed
                else describe_refusal(denied))

    # -- the hand-over between stages ------------------------------------------------------

    def _put(self, key: _Key, entry: _Entry) -> None:
        stages = self._stages
        stages[key] = entry
        stages.move_to_end(key)
        if len(stages) > _MAX_STAGED:
            stages.popitem(last=False)

    def _take(self, key: _Key, raw: str, stage: str) -> _Entry | None:
        entry = self._stages.pop(key, None)
        if entry is None or entry.stage != stage or not entry.same_call(raw):
            return None  # stale (another run reused the call id): decide afresh
        return entry




class _Bound:
    """One guarded tool: its gate, the agent it belongs to, and the SDK hooks it installs."""

    __slots__ = ("agent", "gate", "input_guardrail", "name", "original_needs_approval", "tool")

    def __init__(self, gate: ToolGate, tool: FunctionTool, agent: str | None) -> None:
        self.gate = gate
        self.name = tool.name
        self.agent = agent
        self.original_needs_approval = tool.needs_approval
        self.input_guardrail: ToolInputGuardrail[Any] = ToolInputGuardrail(
            guardrail_function=self.check_input, name=_GUARDRAIL_NAME)
        output_guardrail: ToolOutputGuardrail[Any] = ToolOutputGuardrail(
            guardrail_function=self.check_output, name=_GUARDRAIL_NAME)
        # Ours runs last among input guardrails (a user's rejection must not leave a decision
        # waiting for an invocation) and first among output guardrails (nothing sees output
        # the policy blocks).
        self.tool = dataclasses.replace(
            tool,
            on_invoke_tool=_GuardedInvoker(self, tool.on_invoke_tool),
            needs_approval=self.needs_approval,
            tool_input_guardrails=[*(tool.tool_input_guardrails or ()), self.input_guardrail],
            tool_output_guardrails=[output_guardrail, *(tool.tool_output_guardrails or ())],
        )

    # -- stage 1: the SDK asks whether the call needs approval (before anything runs) -------

    async def needs_approval(self, ctx: Any, params: dict[str, Any], call_id: str) -> bool:
        """The policy says ``ask`` and nothing settles it now: pause for a human."""
        gate = self.gate
        enforcer = gate.enforcer
        key = (self.name, call_id)
        try:
            decision = await enforcer.acheck(self.name, params, call_id=call_id,
                                             agent=self.agent, context=_request(ctx))
            if decision.effect is Effect.ASK:
                try:
                    decision = await enforcer.asettle(decision)
                except ApprovalPending:
                    return True
        except Exception as e:
            # Refused in the guardrail, with the reason; never paused for a broken check.
            gate._put(key, _Entry("input", None, params=params, error=_failed(self.name, e)))
            return False
        gate._put(key, _Entry("input", decision, params=params))
        if not decision.allowed:
            return False  # the guardrail refuses it: nobody needs to be asked
        original = self.original_needs_approval
        if not callable(original):
            return bool(original)
        answer = original(ctx, params, call_id)
        return bool(await answer if inspect.isawaitable(answer) else answer)

    # -- stage 2: the input guardrail (after approval, before the tool runs) ---------------

    async def check_input(self, data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        """Refuses, halts, or lets the call through to the invoker with its decision."""
        ctx = data.context
        key = (self.name, ctx.tool_call_id)
        try:
            entry = self.gate._take(key, ctx.tool_arguments, "input")
            if entry is not None and entry.error is not None:
                return ToolGuardrailFunctionOutput.reject_content(entry.error)
            if entry is not None and entry.decision is not None:
                decision = entry.decision
            else:
                found = await self._decide_again(ctx)
                if found is None:  # pre-approval guardrail pass: the SDK pauses next
                    return ToolGuardrailFunctionOutput.allow()
                decision = found
        except Exception as e:
            return ToolGuardrailFunctionOutput.reject_content(_failed(self.name, e))
        return self._verdict(key, ctx.tool_arguments, decision)

    def _verdict(self, key: _Key, raw: str, decision: Decision) -> ToolGuardrailFunctionOutput:
        if decision.allowed:
            self.gate._put(key, _Entry("invoke", decision, raw=raw))
            return ToolGuardrailFunctionOutput.allow(output_info=decision)
        if decision.effect is Effect.HALT:
            return ToolGuardrailFunctionOutput.raise_exception(output_info=decision)
        return ToolGuardrailFunctionOutput.reject_content(describe_refusal(decision),
                                                          output_info=decision)

    async def _decide_again(self, ctx: Any) -> Decision | None:
        """Decides a call the approval stage did not (a resumed run, an always-approved tool)."""
        enforcer = self.gate.enforcer
        decision = await enforcer.acheck(self.name, ctx.tool_arguments,
                                         call_id=ctx.tool_call_id, agent=self.agent,
                                         context=_request(ctx))
        if decision.effect is not Effect.ASK:
            return decision
        approved = ctx.is_tool_approved(self.name, ctx.tool_call_id)
        if approved is None:
            return None
        if approved is not True:
            return decision  # refused below as an unsettled ask
        if decision.in_doubt:
            # It may have run before a crash: the SDK's approval in the resumed state is the
            # one that let it run then. Only an answer to callwarden's new request counts.
            try:
                return await enforcer.asettle(decision, approver=None, wait=None)
            except ApprovalPending as pending:
                return decision._replace(message=approval_pending(decision, pending.request_id))
        # The SDK's approval is the human's answer: record it on callwarden's request for this
        # exact call (same call id and arguments -> the same request), then use it once. A
        # grant, or an answer a person gave meanwhile (a deny included), settles it first.
        try:
            return await enforcer.asettle(decision, approver=None, wait=None)
        except ApprovalPending as pending:
            await enforcer.aanswer(pending.request_id, True, by=self.gate.reviewer)
            return await enforcer.asettle(decision, approval_id=pending.request_id)

    # -- stage 4: the output guardrail ------------------------------------------------------

    async def check_output(self, data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        """Applies the policy's output rules and records the outcome."""
        ctx = data.context
        enforcer = self.gate.enforcer
        try:
            entry = self.gate._take((self.name, ctx.tool_call_id), ctx.tool_arguments, "output")
            if entry is None or entry.decision is None:
                # The tool ran without our invoker deciding it (its invoker was replaced):
                # screen against a fresh decision rather than not at all.
                decision = await enforcer.acheck(self.name, ctx.tool_arguments,
                                                 call_id=ctx.tool_call_id, agent=self.agent,
                                                 context=_request(ctx))
                started = _perf()
            else:
                decision, started = entry.decision, entry.started
            screened = enforcer.finish(decision, data.output, started)
            shown, status, halt = screened.shown, screened.status, screened.halt
        except Exception as e:
            return ToolGuardrailFunctionOutput.reject_content(
                f"The output of '{self.name}' was withheld: callwarden could not check it "
                f"({_error_text(e)}).")
        if halt:
            return ToolGuardrailFunctionOutput.raise_exception(output_info=shown)
        if status != "ok":
            return ToolGuardrailFunctionOutput.reject_content(_text(shown), output_info=status)
        return ToolGuardrailFunctionOutput.allow()


class _GuardedInvoker:
    """Stage 3: runs the tool with the decision's effective arguments."""

    __slots__ = ("__agents_sync_function_tool__", "bound", "inner")

    def __init__(self, bound: _Bound, inner: Any) -> None:
        self.bound = bound
        self.inner = inner
        # The SDK refuses timeouts for sync tools by this marker; keep what the original said.
        self.__agents_sync_function_tool__ = bool(
            getattr(inner, "__agents_sync_function_tool__", False))

    def __agents_bind_function_tool__(self, tool: FunctionTool) -> _GuardedInvoker:
        # The SDK rebinds a copied tool's invoker so failure handling uses the copy's settings.
        bind = getattr(self.inner, "__agents_bind_function_tool__", None)
        if not callable(bind):
            return self
        inner = bind(tool)
        return self if inner is self.inner else _GuardedInvoker(self.bound, inner)

    async def __call__(self, ctx: Any, input: str) -> Any:
        bound = self.bound
        gate = bound.gate
        key = (bound.name, ctx.tool_call_id)
        entry = gate._take(key, input, "invoke")
        if entry is not None and entry.decision is not None:
            decision = entry.decision
        else:
            # No guardrail decided this call (the tool was invoked outside a run, or its
            # guardrails were removed): decide here, and refuse what is not allowed.
            try:
                decision = await self._decide(ctx, input)
            except Exception as e:
                return _failed(bound.name, e)
            if decision.effect is Effect.HALT:
                raise ToolInputGuardrailTripwireTriggered(
                    bound.input_guardrail,
                    ToolGuardrailFunctionOutput.raise_exception(output_info=decision))
            if not decision.allowed:
                return describe_refusal(decision)
        arguments = input
        if decision.effect is Effect.MODIFY:
            arguments = json.dumps(thaw(decision.args), ensure_ascii=False)
            # Arguments the SDK prepared from the model's JSON must not reach the tool.
            if getattr(ctx, "_function_tool_arguments", None) is not None:
                ctx._function_tool_arguments = None
        started = _perf()
        try:
            result = await self.inner(ctx, arguments)
        except BaseException as e:
            gate.enforcer.record_outcome(decision, "error", started, e)
            raise
        gate._put(key, _Entry("output", decision, raw=input, started=started))
        return result

    async def _decide(self, ctx: Any, input: str) -> Decision:
        bound = self.bound
        enforcer = bound.gate.enforcer
        decision = await enforcer.acheck(bound.name, input, call_id=ctx.tool_call_id,
                                         agent=bound.agent, context=_request(ctx))
        try:
            return await enforcer.asettle(decision)
        except ApprovalPending:
            return decision  # unsettled: refused


_GUARDED_AGENT: type[Agent[Any]] | None = None


def _guarded_agent_type() -> type[Agent[Any]]:
    """An ``Agent`` whose MCP servers' tools are guarded each time the SDK lists them."""
    global _GUARDED_AGENT
    if _GUARDED_AGENT is None:

        @dataclasses.dataclass
        class GuardedAgent(Agent[Any]):
            _callwarden_gate: ToolGate | None = dataclasses.field(
                default=None, kw_only=True, repr=False)

            async def get_mcp_tools(self, run_context: Any) -> list[Any]:
                tools = await super().get_mcp_tools(run_context)
                gate = self._callwarden_gate
                return tools if gate is None else gate.tools(tools, agent_name=self.name)

        _GUARDED_AGENT = GuardedAgent
    return _GUARDED_AGENT


def guard_tools(tools: Iterable[Any], guard: Any, **kwargs: Any) -> list[Any]:
    """Returns guarded copies of ``tools``.

    Args:
        tools: ``FunctionTool`` s (``@function_tool`` functions, ``agent.as_tool()``, ...).
        guard: A :class:`ToolGate`, a :class:`~callwarden.Guard`, a policy file path, or a
            policy dict.
        **kwargs: :class:`ToolGate` arguments (``reviewer``, ``approver``, ``agent``, ...).
    """
    return _gate(guard, kwargs).tools(tools)


def guard_agent(agent: Agent[Any], guard: Any, **kwargs: Any) -> Agent[Any]:
    """Returns a copy of ``agent`` with its tools, MCP servers' tools and handoff agents
    guarded; arguments as for :func:`guard_tools`."""
    return _gate(guard, kwargs).agent(agent)


def _gate(guard: Any, kwargs: dict[str, Any]) -> ToolGate:
    if isinstance(guard, ToolGate):
        if kwargs:
            raise TypeError(f"pass options to ToolGate(...) itself, not with a ToolGate: "
                            f"{sorted(kwargs)}")
        return guard
    return ToolGate(guard, **kwargs)


def _request(ctx: Any) -> dict[str, Any] | None:
    """``{"request": text}`` from the run's input (``turn_input``: the items the run started
    with, the user's message among them); None when there is none. Never raises: a request
    that cannot be read is no request."""
    try:
        said = latest_user_text(getattr(ctx, "turn_input", None))
    except Exception:
        return None
    return None if said is None else {"request": said}


def _state_request(state: Any) -> dict[str, Any] | None:
    """The request of a paused run's ``RunState`` (its context, else its original input)."""
    found = _request(getattr(state, "_context", None))
    if found is not None:
        return found
    try:
        original = getattr(state, "_original_input", None)
        said = latest_user_text([{"role": "user", "content": original}]
                                if isinstance(original, str) else original)
    except Exception:
        return None
    return None if said is None else {"request": said}


def _failed(tool: str, error: BaseException) -> str:
    return (f"The call to '{tool}' was not run: callwarden could not decide it "
            f"({_error_text(error)}). Do not retry the same call.")


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def _rejected_text(tool: str, by: str, reason: str | None) -> str:
    said = f": {reason}" if reason else ""
    return (f"The call to '{tool}' was rejected by {by}{said}. Do not retry the same call; "
            "choose another way to reach the goal or ask the user.")


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(json_safe(value), ensure_ascii=False)
