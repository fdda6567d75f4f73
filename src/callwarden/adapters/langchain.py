"""LangChain v1 / LangGraph: one policy in front of every tool call an agent makes.

``CallwardenMiddleware`` goes into ``langchain.agents.create_agent(..., middleware=[...])``;
``tool_call_wrapper`` / ``atool_call_wrapper`` go into a bare
``langgraph.prebuilt.ToolNode(tools, wrap_tool_call=..., awrap_tool_call=...)``. Both paths
translate each decision into LangGraph's idiom:

* allow — the handler runs the tool as asked;
* modify — the handler runs ``request.override(tool_call=...)`` with the rewritten arguments
  (the request itself is never changed);
* deny — the tool does not run; the model gets ``ToolMessage(status="error")`` carrying the
  decision's message;
* ask — settled inline by the configured approver, else ``langgraph.types.interrupt`` pauses the
  run (a checkpointer is needed) with ``{request_id, call_id, tool, args, rule, message}``;
  resume with ``Command(resume=True | False | {"approve": ..., "by": ..., "reason": ...,
  "edit": {...}})``. The node runs again on resume, finds the same pending request, records the
  answer on it and runs the approved call exactly once;
* halt — :class:`GraphRunHalted` ends the run, whatever ``handle_tool_errors`` says.

After the tool returns, output rules screen the ``ToolMessage`` content (redact, replace, halt)
and the outcome is audited. An error inside the adapter refuses the call (fail closed); LangGraph's
own control flow (``GraphInterrupt`` and every other ``GraphBubbleUp``) always passes through.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any, cast

from callwarden.exceptions import MissingDependency

try:
    from langchain.agents.middleware.types import AgentMiddleware
    from langchain_core.messages import ToolMessage
    from langgraph.errors import GraphBubbleUp
    from langgraph.prebuilt.tool_node import ToolCallRequest
    from langgraph.types import Command, interrupt
except ImportError as e:  # pragma: no cover - depends on the environment
    raise MissingDependency("the LangChain adapter", "langchain and langgraph",
                            "langchain") from e

from callwarden._call import thaw
from callwarden._decision import Decision, Effect
from callwarden._enforce import Enforcer, Screened
from callwarden._messages import describe_refusal, not_approved, undecided
from callwarden.adapters._core import enforcer as enforcement_path
from callwarden.adapters._core import latest_user_text
from callwarden.exceptions import (
    ApprovalError,
    ApprovalInvalid,
    ApprovalPending,
    CallwardenError,
    RunHalted,
)

__all__ = ["CallwardenMiddleware", "GraphRunHalted", "atool_call_wrapper", "tool_call_wrapper"]

FRAMEWORK = "langchain"

Result = ToolMessage | Command[Any]
Handler = Callable[[ToolCallRequest], Result]
AsyncHandler = Callable[[ToolCallRequest], Awaitable[Result]]

_perf = time.perf_counter


class GraphRunHalted(RunHalted, GraphBubbleUp):
    """A ``halt`` decision (on a call or on its output): the agent run stops.

    It is a :class:`~callwarden.RunHalted`, so ``except callwarden.RunHalted`` catches it around
    ``agent.invoke``. It is also a ``GraphBubbleUp``, LangGraph's marker for control flow that
    no error handler may swallow: ``ToolNode`` re-raises it even with
    ``handle_tool_errors=True``, ``ToolRetryMiddleware`` / ``ToolErrorMiddleware`` and node
    retry policies pass it on, and it crosses subgraph and agent-as-tool boundaries, like
    LangGraph's own ``GraphDrained`` ("the run exits early"). Tool calls of the same step that
    were already dispatched finish (each was decided on its own); the model gets no further turn.
    """


class _Call:
    """The framework's view of one call, turned into ``Enforcer`` arguments once."""

    __slots__ = ("args", "fields", "id", "tool")

    def __init__(self, request: ToolCallRequest) -> None:
        call = request.tool_call
        self.tool: str = call["name"]
        self.args: Any = call.get("args")
        self.id: str | None = call.get("id")
        config = getattr(getattr(request, "runtime", None), "config", None) or {}
        thread = (config.get("configurable") or {}).get("thread_id")
        agent = (config.get("metadata") or {}).get("lc_agent_name")
        self.fields: dict[str, Any] = {
            "call_id": self.id,
            "session": None if thread is None else str(thread),
            "agent": agent if isinstance(agent, str) else None,
        }
        # The user's latest message, for rules about what the user asked for (roles: ... in
        # request; CEL request.*).
        state = getattr(request, "state", None)
        said = latest_user_text(state.get("messages") if isinstance(state, Mapping) else None)
        if said is not None:
            self.fields["context"] = {"request": said}


class CallwardenMiddleware(AgentMiddleware[Any, Any, Any]):
    """Guards every tool call of a ``create_agent`` agent with a callwarden policy.

    Args:
        guard: A ``Guard``, a policy file path, or a policy dict.
        approver: Settles ``ask`` decisions inline (no interrupt), e.g. a callback or
            ``TerminalApprover``.
        wait: Seconds to wait for an answer given elsewhere (``callwarden approvals approve``)
            before pausing the run with an interrupt.
        reviewer: Who answered a resume value that does not name its reviewer (``by``).
        agent: The agent's name when the graph has none (``create_agent(name=...)`` wins).
        principal: The user the agent acts for.
    """

    def __init__(self, guard: Any, *, approver: Any = None, wait: float | None = None,
                 reviewer: str = "reviewer", agent: str | None = None,
                 principal: str | None = None) -> None:
        super().__init__()
        self.enforcer: Enforcer = enforcement_path(guard, framework=FRAMEWORK,
                                                   approver=approver, wait=wait, agent=agent,
                                                   principal=principal)
        self.reviewer = reviewer

    def __repr__(self) -> str:
        return f"CallwardenMiddleware({self.enforcer!r})"

    # -- sync ------------------------------------------------------------------------------

    def wrap_tool_call(self, request: ToolCallRequest, handler: Handler) -> Result:
        """Decides the call, then runs, rewrites, refuses, pauses or halts it."""
        try:
            call = _Call(request)
            decision = self._decide(call)
            effective = _effective(decision, request)
        except GraphBubbleUp:
            raise
        except Exception as e:  # fail closed: the tool does not run
            return _failed(request, e)
        started = _perf()
        try:
            result = handler(effective)
        except GraphBubbleUp:
            raise
        except BaseException as e:
            self.enforcer.record_outcome(decision, "error", started, e)
            raise
        return self._screen(decision, request, result, started)

    def _decide(self, call: _Call) -> Decision:
        enforcer = self.enforcer
        try:
            return enforcer.decide(call.tool, call.args, **call.fields)
        except ApprovalPending as pending:
            request_id, asked = pending.request_id, pending.decision
        # Outside the except block: GraphInterrupt must not carry ApprovalPending as context.
        answer = _ask(request_id, asked)
        try:
            enforcer.answer(request_id, answer, by=self.reviewer)
        except ValueError as e:
            raise ApprovalInvalid("approval_answer_invalid", str(e)) from e
        except ApprovalInvalid as e:
            if e.code != "approval_already_resolved":
                raise
            # Resolved elsewhere meanwhile (CLI, web console): that resolution stands.
        return enforcer.decide(call.tool, call.args, approval_id=request_id, **call.fields)

    # -- async -----------------------------------------------------------------------------

    async def awrap_tool_call(self, request: ToolCallRequest, handler: AsyncHandler) -> Result:
        """Async twin of :meth:`wrap_tool_call`."""
        try:
            call = _Call(request)
            decision = await self._adecide(call)
            effective = _effective(decision, request)
        except GraphBubbleUp:
            raise
        except Exception as e:  # fail closed: the tool does not run
            return _failed(request, e)
        started = _perf()
        try:
            result = await handler(effective)
        except GraphBubbleUp:
            raise
        except BaseException as e:
            self.enforcer.record_outcome(decision, "error", started, e)
            raise
        return self._screen(decision, request, result, started)

    async def _adecide(self, call: _Call) -> Decision:
        enforcer = self.enforcer
        try:
            return await enforcer.adecide(call.tool, call.args, **call.fields)
        except ApprovalPending as pending:
            request_id, asked = pending.request_id, pending.decision
        answer = _ask(request_id, asked)
        try:
            await enforcer.aanswer(request_id, answer, by=self.reviewer)
        except ValueError as e:
            raise ApprovalInvalid("approval_answer_invalid", str(e)) from e
        except ApprovalInvalid as e:
            if e.code != "approval_already_resolved":
                raise
        return await enforcer.adecide(call.tool, call.args, approval_id=request_id,
                                      **call.fields)

    # -- after the tool ran ----------------------------------------------------------------

    def _screen(self, decision: Decision, request: ToolCallRequest, result: Result,
                started: float) -> Result:
        try:
            shown, status, halt, by = _screen_result(self.enforcer, decision, result)
        except Exception as e:  # the output may hold what the rules exist to stop
            self.enforcer.record_outcome(decision, "error", started, e)
            return _refuse(request, f"The output of '{decision.call.tool}' was withheld: it "
                                    f"could not be screened ({type(e).__name__}: {e}).")
        self.enforcer.record_outcome(decision, status, started, by=by)
        if halt is not None:
            raise GraphRunHalted(decision._replace(effect=Effect.HALT, message=halt))
        return cast("Result", shown)


def tool_call_wrapper(guard: Any, **options: Any) -> Callable[[ToolCallRequest, Handler], Result]:
    """A ``wrap_tool_call`` for a bare ``ToolNode``: ``ToolNode(tools, wrap_tool_call=...)``.

    ``guard`` is what :class:`CallwardenMiddleware` takes (``options`` are its keyword
    arguments), or a ``CallwardenMiddleware`` to share with :func:`atool_call_wrapper`.
    """
    return _middleware(guard, options).wrap_tool_call


def atool_call_wrapper(guard: Any,
                       **options: Any) -> Callable[[ToolCallRequest, AsyncHandler],
                                                   Awaitable[Result]]:
    """Async twin of :func:`tool_call_wrapper`, for ``ToolNode(awrap_tool_call=...)``."""
    return _middleware(guard, options).awrap_tool_call


def _middleware(guard: Any, options: Mapping[str, Any]) -> CallwardenMiddleware:
    if isinstance(guard, CallwardenMiddleware):
        if options:
            raise TypeError("options go to CallwardenMiddleware(...), not to the wrapper")
        return guard
    return CallwardenMiddleware(guard, **options)


def _ask(request_id: str, decision: Decision) -> Any:
    """Pauses the run for a human (returns their answer once the run is resumed).

    A call in doubt (it may have run before a crash: ``in_doubt`` in the interrupt) takes only
    an answer that names its request: LangGraph replays the resume values a task was given
    before the crash, and the answer that let the first attempt run must not let it run again.
    """
    call = decision.call
    in_doubt = decision.in_doubt
    payload = {
        "request_id": request_id,
        "call_id": call.call_id,
        "tool": call.tool,
        "args": thaw(decision.args),
        "rule": decision.rule,
        "message": decision.message or f"The call to '{call.tool}' needs approval.",
        "in_doubt": in_doubt,
    }
    while True:  # ends: each turn takes the next resume value, or pauses the run
        answer = interrupt(payload)
        named = answer.get("request_id") if isinstance(answer, Mapping) else None
        if in_doubt and named != request_id:
            continue  # an answer given before the crash, to another request: ask again
        if named is not None and named != request_id:
            # Several asks inside one ToolNode task are matched to resume values by order only.
            raise ApprovalInvalid("approval_mismatch",
                                  f"the answer is for request {named}, not {request_id}")
        return answer


def _effective(decision: Decision, request: ToolCallRequest) -> ToolCallRequest:
    if decision.effect is Effect.HALT:
        raise GraphRunHalted(decision)
    if decision.effect is Effect.MODIFY:
        return request.override(tool_call={**request.tool_call, "args": thaw(decision.args)})
    if decision.effect is Effect.ALLOW:
        return request
    raise _Refused(decision)


class _Refused(CallwardenError):
    """A deny decision on its way to becoming the model's ToolMessage."""

    def __init__(self, decision: Decision) -> None:
        super().__init__(describe_refusal(decision))


def _refuse(request: ToolCallRequest, text: str) -> ToolMessage:
    call = request.tool_call
    return ToolMessage(content=text, tool_call_id=str(call.get("id") or ""),
                       name=call.get("name"), status="error")


def _failed(request: ToolCallRequest, error: Exception) -> ToolMessage:
    if isinstance(error, _Refused):
        return _refuse(request, str(error))
    tool = request.tool_call.get("name") if isinstance(request.tool_call, Mapping) else None
    if isinstance(error, ApprovalError):
        text = not_approved(str(tool), str(error))
    else:
        text = undecided(str(tool), error)
    try:
        return _refuse(request, text)
    except Exception:  # a tool_call too broken to answer in kind
        return ToolMessage(content=text, tool_call_id="", status="error")


def _screen_result(enforcer: Enforcer, decision: Decision,
                   result: Any) -> tuple[Any, str, str | None, Screened | None]:
    """(what the model gets, the outcome status, the halt message or None, the screening
    that decided the status: it names the output rule)."""
    if isinstance(result, ToolMessage):
        return _screen_message(enforcer, decision, result)
    update = result.update if isinstance(result, Command) else None
    if not isinstance(update, Mapping):
        return result, "ok", None, None
    messages = update.get("messages")
    if not isinstance(messages, list | tuple):
        return result, "ok", None, None
    screened, outcomes = [], []
    for message in messages:
        if isinstance(message, ToolMessage):
            message, status, halt, by = _screen_message(enforcer, decision, message)
            if halt is not None:
                return result, status, halt, by
            outcomes.append((status, by))
        screened.append(message)
    statuses = [status for status, _ in outcomes]
    worst = next((s for s in ("output_blocked", "error", "output_modified") if s in statuses),
                 "ok")
    by = next((by for status, by in outcomes if status == worst and by is not None), None)
    return replace(result, update={**update, "messages": screened}), worst, None, by


def _screen_message(enforcer: Enforcer, decision: Decision, message: ToolMessage
                    ) -> tuple[ToolMessage, str, str | None, Screened | None]:
    by = enforcer.screen(decision, message.content)
    shown, status, halt = by.shown, by.status, by.halt
    if halt:
        return message, status, str(shown), by
    if status == "ok":
        return message, "error" if message.status == "error" else "ok", None, None
    # The artifact is never shown to the model but may hold the very data the rule removed.
    update: dict[str, Any] = {"content": shown if isinstance(shown, str | list) else str(shown),
                              "artifact": None}
    if status == "output_blocked":
        update["status"] = "error"
    return message.model_copy(update=update), status, None, by
