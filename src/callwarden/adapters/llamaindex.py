"""LlamaIndex (llama-index-core 0.14) adapter: every tool an agent workflow may call, guarded.

``ToolGate.tools([...])`` wraps tools in :class:`GuardedTool`, a ``FunctionTool`` that keeps the
inner tool's name, description and schema and decides each call in ``acall`` / ``call``;
``ToolGate.agent(...)`` does it in place for a ``FunctionAgent``, ``ReActAgent`` or every agent
of an ``AgentWorkflow``, tool retriever included. The tool is the interception point because
every path that runs a tool ends in its ``acall``: ``BaseWorkflowAgent._call_tool`` for the
agents, ``AgentWorkflow._call_tool`` for multi-agent runs, and a direct ``tool.acall`` anywhere
else; the tools of an MCP server (``McpToolSpec.to_tool_list_async``,
``aget_tools_from_mcp_url``) are plain ``FunctionTool``\\s over ``BasicMCPClient.call_tool``
and are guarded the same way. A ``GuardedTool`` declares that it takes the workflow
``Context``, so the agents hand it the run's context, which is what the native pause needs.
Effects in LlamaIndex's idiom:

* allow / modify — the inner tool runs, with the rewritten arguments for modify; its
  ``ToolOutput`` passes through the policy's output rules before the model sees it;
* deny — a ``ToolOutput(is_error=True)`` carrying the decision's message; the tool never runs;
* ask — settled by ``approver=`` or ``wait=``; else the workflow's human-in-the-loop:
  ``ctx.wait_for_event`` puts a :class:`ToolApprovalRequest` (an ``InputRequiredEvent``) on the
  event stream and pauses the step until a :class:`ToolApprovalResponse` (a
  ``HumanResponseEvent``) arrives by ``handler.ctx.send_event``. The workflow then replays the
  step; the answer is recorded on callwarden's request and the approved call runs exactly once,
  a rejected one gives the model the reviewer's reason. Outside a workflow (``tool.call``)
  the model gets an error naming the pending request instead;
* halt — exceptions cannot stop a run from inside a tool (``_call_tool`` turns them into error
  outputs and the model gets another turn), so a halted call answers with
  ``ToolMetadata.return_direct``: the agent ends the run with the halt message as its final
  response, without asking the model again. The gate refuses (and ends) every later call until
  :meth:`ToolGate.clear_halt`.

Deciding, settling and screening go through :class:`~callwarden._enforce.Enforcer`; an error
inside the adapter refuses the call with the reason (fail closed). ``AgentWorkflow``'s own
``handoff`` tool is built inside the workflow and is not guarded.

A call's ``context.request`` is the user's latest message as the agent workflow keeps it in
the run's context (``ctx.store["user_msg_str"]``, set from ``user_msg`` or the chat history's
last user message); the sync ``call`` cannot read that async store and has no request.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from typing import Any, cast

from callwarden.exceptions import MissingDependency

try:
    from llama_index.core.agent.workflow import AgentWorkflow, BaseWorkflowAgent
    from llama_index.core.objects import ObjectRetriever
    from llama_index.core.tools import (
        AsyncBaseTool,
        BaseTool,
        FunctionTool,
        ToolMetadata,
        ToolOutput,
        adapt_to_async_tool,
    )
    from llama_index.core.workflow import Context, HumanResponseEvent, InputRequiredEvent
    from workflows.runtime.types.results import WaitingForEvent
except ImportError as e:  # pragma: no cover - depends on the environment
    raise MissingDependency("the LlamaIndex adapter", "llama-index-core", "llamaindex") from e

from callwarden._call import thaw
from callwarden._decision import Decision, Effect
from callwarden._enforce import Enforcer
from callwarden._messages import (
    approval_pending,
    describe_refusal,
    halted,
    not_approved,
    output_unscreened,
    undecided,
)
from callwarden.adapters._core import enforcer as enforcement_path
from callwarden.adapters._core import latest_user_text
from callwarden.exceptions import ApprovalError, ApprovalInvalid, ApprovalPending

__all__ = ["FRAMEWORK", "GuardedTool", "ToolApprovalRequest", "ToolApprovalResponse", "ToolGate",
           "guard_agent", "guard_tools"]

FRAMEWORK = "llamaindex"
"""The name recorded in ``call.framework`` and the audit log."""

_perf = time.perf_counter
# The keyword the agents pass the workflow Context under (FunctionTool.ctx_param_name); never
# shown to the model: the schema is the inner tool's.
_CTX = "__callwarden_ctx__"
# The tool whose call in this task just halted. The agent's call_tool step reads
# tool.metadata.return_direct right after awaiting tool.acall in the same task, so only the
# halted call ends the run, not a sibling call that finished meanwhile.
_HALTED_HERE: ContextVar[GuardedTool | None] = ContextVar("callwarden_llamaindex_halted",
                                                          default=None)


class ToolApprovalRequest(InputRequiredEvent):
    """Written to the event stream when a call needs a person's approval; the run waits for
    the :class:`ToolApprovalResponse` with the same ``request_id``."""

    request_id: str
    tool: str
    args: dict[str, Any]
    rule: str | None = None
    message: str = ""

    def approve(self, *, by: str, reason: str | None = None,
                edit: Mapping[str, Any] | None = None) -> ToolApprovalResponse:
        """The answer that approves this call (``edit``: run it with these arguments instead,
        checked by the policy again)."""
        return ToolApprovalResponse(request_id=self.request_id, approve=True, by=by,
                                    reason=reason, edit=None if edit is None else dict(edit))

    def reject(self, *, by: str, reason: str | None = None) -> ToolApprovalResponse:
        """The answer that refuses this call; the model gets ``reason``."""
        return ToolApprovalResponse(request_id=self.request_id, approve=False, by=by,
                                    reason=reason)


class ToolApprovalResponse(HumanResponseEvent):
    """A person's answer to a :class:`ToolApprovalRequest`: send it with
    ``handler.ctx.send_event(...)``."""

    request_id: str
    approve: bool
    by: str | None = None
    reason: str | None = None
    edit: dict[str, Any] | None = None


class ToolGate:
    """Decides every call of the tools it wraps with one callwarden policy.

    Args:
        policy: A :class:`~callwarden.Guard`, a policy file path, or a policy dict.
        approver: Answers ``ask`` decisions inside the call (a callback, sync or async, or
            ``TerminalApprover``).
        wait: Seconds to wait for an answer given elsewhere (``callwarden approvals approve``).
        pause: Without an approver (or once ``wait`` ran out), pause the workflow with a
            :class:`ToolApprovalRequest`; False: tell the model the request is pending instead.
        answer_timeout: Seconds the paused workflow waits for the answer (None: forever);
            after that the model is told the call was not approved.
        reviewer: Who answered a :class:`ToolApprovalResponse` that names nobody.
        agent / principal / session: Recorded on every call; the agent defaults to the
            workflow's current agent.
    """

    def __init__(self, policy: Any, *, approver: Any = None, wait: float | None = None,
                 pause: bool = True, answer_timeout: float | None = 2000.0,
                 reviewer: str = "reviewer", agent: str | None = None,
                 principal: str | None = None, session: str | None = None) -> None:
        self.enforcer: Enforcer = enforcement_path(policy, framework=FRAMEWORK,
                                                   approver=approver, wait=wait, agent=agent,
                                                   principal=principal, session=session)
        self.pause = pause
        self.answer_timeout = answer_timeout
        self.reviewer = reviewer
        self._halted: Decision | None = None

    def __repr__(self) -> str:
        return f"ToolGate({self.enforcer!r})"

    @property
    def halted(self) -> Decision | None:
        """The decision that halted the run, or None while calls may run."""
        return self._halted

    @property
    def pending(self) -> list[str]:
        """Ids of approval requests reported pending and not yet settled."""
        return self.enforcer.pending

    def clear_halt(self) -> None:
        """Lets calls run again after a halt (once a person has looked at why)."""
        self._halted = None

    async def answer(self, request_id: str, answer: Any, *, by: str) -> None:
        """Records a reviewer's answer to a pending request (see ``Enforcer.answer``); the same
        call asked again then runs once, or is refused with the reviewer's reason."""
        await self.enforcer.aanswer(request_id, answer, by=by)

    def tool(self, tool: BaseTool | Any, *, agent: str | None = None) -> GuardedTool:
        """``tool`` (a LlamaIndex tool or a plain function) behind this gate; ``agent``: the
        name its calls are recorded under when the workflow does not say."""
        if isinstance(tool, GuardedTool) and tool.gate is self:
            return tool
        if not isinstance(tool, BaseTool):
            if not callable(tool):
                raise TypeError(f"expected a LlamaIndex tool or a function, got "
                                f"{type(tool).__name__}")
            tool = FunctionTool.from_defaults(tool)
        return GuardedTool(tool, self, agent=agent)

    def tools(self, tools: Iterable[BaseTool | Any], *, agent: str | None = None
              ) -> list[GuardedTool]:
        """Each tool behind this gate, in order (MCP tools included)."""
        return [self.tool(tool, agent=agent) for tool in tools]

    def agent(self, agent: Any) -> Any:
        """Guards an agent's tools (and its tool retriever) in place; for an ``AgentWorkflow``,
        every agent's. Returns ``agent``."""
        if isinstance(agent, AgentWorkflow):
            for member in agent.agents.values():
                self.agent(member)
            return agent
        if not isinstance(agent, BaseWorkflowAgent):
            raise TypeError(f"expected a LlamaIndex agent (FunctionAgent, ReActAgent, ...) or "
                            f"an AgentWorkflow, got {type(agent).__name__}")
        if agent.tools:
            agent.tools = list(self.tools(agent.tools, agent=agent.name))
        retriever = agent.tool_retriever
        if retriever is not None and not isinstance(retriever, _GuardedRetriever):
            agent.tool_retriever = _GuardedRetriever(retriever, self, agent.name)
        return agent

    def _halt(self, decision: Decision) -> Decision:
        self._halted = self._halted or decision
        return self._halted


class GuardedTool(FunctionTool):
    """A tool whose every call a :class:`ToolGate` decides before the inner tool runs.

    It keeps the inner tool's metadata (the model sees the same name, description and schema).
    Build it with :meth:`ToolGate.tool` / :meth:`ToolGate.tools`.
    """

    def __init__(self, tool: BaseTool, gate: ToolGate, *, agent: str | None = None) -> None:
        if not isinstance(tool, BaseTool):
            raise TypeError(f"GuardedTool wraps a LlamaIndex tool, got {type(tool).__name__}")
        self._inner = tool
        self.gate = gate
        self.agent = agent
        super().__init__(fn=self.call, async_fn=self.acall, metadata=tool.metadata)
        # The agents pass the workflow Context to a FunctionTool that asks for it.
        self.requires_context = True
        self.ctx_param_name = _CTX

    def __repr__(self) -> str:
        return f"GuardedTool({self._inner.metadata.name!r}, {self.gate!r})"

    @property
    def inner(self) -> BaseTool:
        """The guarded tool."""
        return self._inner

    @property
    def metadata(self) -> ToolMetadata:
        metadata = self._inner.metadata
        if _HALTED_HERE.get() is self:  # this task's call halted: end the run with it
            return dataclasses.replace(metadata, return_direct=True)
        return metadata

    # -- async -----------------------------------------------------------------------------

    async def acall(self, *args: Any, **kwargs: Any) -> ToolOutput:
        """Decides the call, then runs, rewrites, refuses, pauses for approval or halts it."""
        _HALTED_HERE.set(None)
        ctx = kwargs.pop(_CTX, None)
        arguments = _arguments(args, kwargs)
        name = self._name
        if self.gate.halted is not None:
            return self._halt(self.gate.halted, arguments)
        agent = await _agent_name(ctx) or self.agent
        context = await _request(ctx)
        pending: ApprovalPending | None = None
        try:
            decision = await self.gate.enforcer.adecide(name, arguments, agent=agent,
                                                        context=context)
        except ApprovalPending as e:
            pending = e
        except Exception as e:  # fail closed: the tool does not run
            return _error(name, arguments, undecided(name, e))
        if pending is not None:
            if ctx is None or not self.gate.pause:
                return _error(name, arguments,
                              approval_pending(pending.decision, pending.request_id))
            settled = await self._await_answer(ctx, pending, arguments, agent, context)
            if isinstance(settled, ToolOutput):
                return settled
            decision = settled
        refused = self._refused(decision, arguments)
        if refused is not None:
            return refused
        started = _perf()
        try:
            output = await adapt_to_async_tool(self._inner).acall(
                **self._inner_args(decision, ctx))
        except WaitingForEvent:  # the inner tool's own wait_for_event: the step replays
            raise
        except BaseException as e:
            self._record(decision, "error", started, e)
            raise  # the agent turns it into an error ToolOutput, as for any tool
        return self._screen(decision, output, arguments, started)

    async def _await_answer(self, ctx: Context, pending: ApprovalPending,
                            arguments: dict[str, Any], agent: str | None,
                            context: dict[str, Any] | None) -> Decision | ToolOutput:
        """Pauses the workflow until the person answers (the step is replayed then: this same
        request is found pending again, and its answer is waiting)."""
        name, request_id, asked = self._name, pending.request_id, pending.decision
        request = ToolApprovalRequest(
            request_id=request_id, tool=name, args=thaw(asked.args), rule=asked.rule,
            message=asked.message or f"The call to '{name}' needs approval.")
        try:
            answer = await ctx.wait_for_event(
                ToolApprovalResponse, waiter_event=request, waiter_id=f"callwarden:{request_id}",
                requirements={"request_id": request_id}, timeout=self.gate.answer_timeout)
        except TimeoutError:
            return _error(name, arguments, not_approved(
                name, f"nobody answered approval request {request_id} within "
                      f"{self.gate.answer_timeout} seconds"))
        enforcer = self.gate.enforcer
        try:
            await enforcer.aanswer(request_id, {
                "approve": answer.approve, "by": answer.by or self.gate.reviewer,
                "reason": answer.reason, "edit": answer.edit}, by=self.gate.reviewer,
                names=answer.request_id)
        except ApprovalInvalid as e:
            if e.code != "approval_already_resolved":  # else: resolved elsewhere, it stands
                return _error(name, arguments, not_approved(name, e.message))
        except (ApprovalError, ValueError) as e:
            return _error(name, arguments, not_approved(name, str(e)))
        except Exception as e:
            return _error(name, arguments, undecided(name, e))
        try:
            return await enforcer.adecide(name, arguments, agent=agent, context=context,
                                          approval_id=request_id)
        except Exception as e:  # ApprovalPending included: nothing may run unsettled
            return _error(name, arguments, undecided(name, e))

    # -- sync ------------------------------------------------------------------------------

    def call(self, *args: Any, **kwargs: Any) -> ToolOutput:
        """Sync twin of :meth:`acall`; an ``ask`` nobody settles is reported pending (only a
        workflow run can pause)."""
        _HALTED_HERE.set(None)
        ctx = kwargs.pop(_CTX, None)
        arguments = _arguments(args, kwargs)
        name = self._name
        if self.gate.halted is not None:
            return self._halt(self.gate.halted, arguments)
        try:
            decision = self.gate.enforcer.decide(name, arguments, agent=self.agent)
        except ApprovalPending as e:
            return _error(name, arguments, approval_pending(e.decision, e.request_id))
        except Exception as e:  # fail closed: the tool does not run
            return _error(name, arguments, undecided(name, e))
        refused = self._refused(decision, arguments)
        if refused is not None:
            return refused
        started = _perf()
        inner = self._inner
        try:
            inner_args = self._inner_args(decision, ctx)
            output = (inner.call(**inner_args) if isinstance(inner, AsyncBaseTool)
                      else inner(**inner_args))
        except BaseException as e:
            self._record(decision, "error", started, e)
            raise
        return self._screen(decision, output, arguments, started)

    # -- shared ----------------------------------------------------------------------------

    @property
    def _name(self) -> str:
        return self._inner.metadata.get_name()

    def _refused(self, decision: Decision, arguments: dict[str, Any]) -> ToolOutput | None:
        """The output for a call that may not run, or None when it runs."""
        if decision.effect is Effect.HALT:
            return self._halt(self.gate._halt(decision), arguments)
        if not decision.effect.allows:
            return _error(self._name, arguments, describe_refusal(decision))
        return None

    def _inner_args(self, decision: Decision, ctx: Context | None) -> dict[str, Any]:
        args = cast("dict[str, Any]", thaw(decision.args))
        inner = self._inner
        if isinstance(inner, FunctionTool) and inner.requires_context \
                and inner.ctx_param_name is not None and ctx is not None:
            args[inner.ctx_param_name] = ctx
        return args

    def _halt(self, decision: Decision, arguments: dict[str, Any]) -> ToolOutput:
        """The run's last word: not an error, so that return_direct ends the run with it."""
        _HALTED_HERE.set(self)
        return ToolOutput(content=halted(decision), tool_name=self._name, raw_input=arguments,
                          raw_output=None)

    def _screen(self, decision: Decision, result: Any, arguments: dict[str, Any],
                started: float) -> ToolOutput:
        """Applies the output rules to what the model would read (the output's text)."""
        name = self._name
        output: ToolOutput = result if isinstance(result, ToolOutput) else ToolOutput(
            content=str(result), tool_name=name, raw_input=arguments, raw_output=result)
        try:
            screened = self.gate.enforcer.screen(decision, output.content)
        except Exception as e:  # fail closed: withhold what could not be checked
            self._record(decision, "error", started, e)
            return _error(name, arguments, output_unscreened(name, e))
        failed = output.is_error or _mcp_failed(output.raw_output)
        status = screened.status
        self._record(decision, "error" if failed and status == "ok" else status, started, None,
                     screened)
        if screened.halt:
            stop = self.gate._halt(decision._replace(effect=Effect.HALT,
                                                     message=str(screened.shown)))
            return self._halt(stop, arguments)
        if status == "ok":
            return output
        # raw_output reaches the app (ToolCallResult events, return_direct responses): it may
        # hold exactly what the rule removed.
        shown = str(screened.shown)
        return ToolOutput(content=shown, tool_name=output.tool_name, raw_input=output.raw_input,
                          raw_output=shown, is_error=output.is_error or status == "output_blocked")

    def _record(self, decision: Decision, status: str, started: float,
                error: BaseException | None, by: Any = None) -> None:
        try:
            self.gate.enforcer.record_outcome(decision, status, started, error, by=by)
        except Exception:  # an audit sink failing after the call cannot undo it
            return


class _GuardedRetriever(ObjectRetriever[BaseTool]):
    """An agent's tool retriever whose tools come back guarded."""

    def __init__(self, inner: ObjectRetriever[BaseTool], gate: ToolGate,
                 agent: str | None) -> None:
        # ObjectRetriever.__init__ is skipped on purpose: retrieval is the inner one's.
        self._inner = inner
        self._gate = gate
        self._agent = agent

    @property
    def retriever(self) -> Any:
        return self._inner.retriever

    @property
    def object_node_mapping(self) -> Any:
        return self._inner.object_node_mapping

    @property
    def node_postprocessors(self) -> Any:
        return self._inner.node_postprocessors

    def retrieve(self, str_or_query_bundle: Any) -> list[BaseTool]:
        return list(self._gate.tools(self._inner.retrieve(str_or_query_bundle),
                                     agent=self._agent))

    async def aretrieve(self, str_or_query_bundle: Any) -> list[BaseTool]:
        return list(self._gate.tools(await self._inner.aretrieve(str_or_query_bundle),
                                     agent=self._agent))


def guard_tools(tools: Iterable[BaseTool | Any], policy: Any, **options: Any
                ) -> list[GuardedTool]:
    """``ToolGate(policy, **options).tools(tools)``."""
    return ToolGate(policy, **options).tools(tools)


def guard_agent(agent: Any, policy: Any, **options: Any) -> Any:
    """``ToolGate(policy, **options).agent(agent)``: guards the agent's tools in place."""
    return ToolGate(policy, **options).agent(agent)


def _arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    if not args:
        return kwargs
    if len(args) == 1 and not kwargs:  # LlamaIndex's single-input convention (BaseTool(input))
        return {"input": args[0]}
    raise TypeError("a guarded tool takes keyword arguments")


async def _agent_name(ctx: Context | None) -> str | None:
    """The workflow's current agent (AgentWorkflow keeps it in the context's store)."""
    if ctx is None:
        return None
    try:
        name = await ctx.store.get("current_agent_name", default=None)
    except Exception:  # a context outside a run: no agent to name
        return None
    return name if isinstance(name, str) else None


async def _request(ctx: Context | None) -> dict[str, Any] | None:
    """``{"request": text}``: the user's latest message the agent workflow keeps in the run's
    store (``user_msg_str``); None when there is none or it cannot be read — never raises."""
    if ctx is None:
        return None
    try:
        said = latest_user_text([{"role": "user",
                                  "content": await ctx.store.get("user_msg_str", default=None)}])
    except Exception:
        return None
    return None if said is None else {"request": said}


def _error(tool: str, arguments: dict[str, Any], text: str) -> ToolOutput:
    return ToolOutput(content=text, tool_name=tool, raw_input=arguments, raw_output=text,
                      is_error=True)


def _mcp_failed(raw: Any) -> bool:
    """An MCP ``CallToolResult`` that reports a failed tool (LlamaIndex does not flag it)."""
    flag = getattr(raw, "is_error", getattr(raw, "isError", False))
    return flag is True and hasattr(raw, "content")
