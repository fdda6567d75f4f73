"""AutoGen 0.7 adapter: a workbench that puts a policy in front of every tool call.

Wrap any workbench (``StaticWorkbench``, ``StaticStreamWorkbench``, ``McpWorkbench``) and give
the wrapper to ``AssistantAgent(workbench=...)``; for plain ``tools=[...]`` wrap
``StaticStreamWorkbench(tools)`` yourself. Effects in AutoGen's idiom:

* allow / modify — the inner workbench runs the call, with the rewritten arguments for modify;
  its result passes through the policy's output rules before the model sees it;
* deny — an error :class:`ToolResult` carrying the decision's message; the tool never runs;
* ask — settled by the approver (the recommended way in AutoGen) or by waiting ``wait``
  seconds for ``callwarden approvals approve ID``; otherwise an error result says the request
  is pending, and the same call asked again runs once after approval;
* halt — an error result, never an exception (a workbench that raises hangs
  ``AssistantAgent.run``), and :class:`CallwardenHaltTermination` stops the team. The
  workbench refuses every later call until :meth:`GuardedWorkbench.clear_halt`.

Handoff tools bypass workbenches in AutoGen, so no policy sees them.

AutoGen does not tell a workbench what the user asked for; given the agent's model context
(``model_context=``, the one passed to ``AssistantAgent``), the workbench makes the latest
message from ``"user"`` in it each call's ``context.request``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any, NoReturn

from callwarden._call import thaw
from callwarden._decision import Decision, Effect
from callwarden._enforce import Enforcer, Screened
from callwarden._messages import approval_pending, describe_refusal, halted, output_unscreened
from callwarden.adapters._core import enforcer as enforcement_path
from callwarden.adapters.autogen_guardrail import request_context
from callwarden.exceptions import ApprovalPending, MissingDependency

try:
    from autogen_agentchat.base import TerminatedException, TerminationCondition
    from autogen_agentchat.messages import BaseAgentEvent, BaseChatMessage, StopMessage
    from autogen_core import CancellationToken
    from autogen_core.tools import (
        StaticStreamWorkbench,
        TextResultContent,
        ToolResult,
        ToolSchema,
        Workbench,
    )

    # StreamWorkbench is public API but not re-exported by autogen_core.tools.
    from autogen_core.tools._workbench import StreamWorkbench
except ImportError as e:  # pragma: no cover - depends on the environment
    raise MissingDependency("the AutoGen adapter", "autogen-agentchat", "autogen") from e

__all__ = ["CallwardenHaltTermination", "GuardedWorkbench"]

_perf = time.perf_counter


def _error(name: str, text: str) -> ToolResult:
    return ToolResult(name=name, result=[TextResultContent(content=text)], is_error=True)


# AssistantAgent streams only through workbenches that are StaticStreamWorkbench instances (an
# isinstance check in _execute_tool_call); inheriting it makes the agent call
# call_tool_stream, so a streaming inner workbench's progress events still reach run_stream().
class GuardedWorkbench(StaticStreamWorkbench):
    """A workbench that decides every call with a callwarden policy before the inner one runs.

    Args:
        workbench: The workbench to guard (static, streaming or MCP).
        policy: A :class:`~callwarden.Guard`, a policy file path, or a policy dict.
        approver: Answers ``ask`` decisions inside the call (a callback, sync or async, or
            ``TerminalApprover``).
        wait: Seconds to wait for an answer given elsewhere (``callwarden approvals approve``).
        agent / principal / session: Recorded on every call (AutoGen does not tell a
            workbench which agent calls it).
        model_context: The agent's ``ChatCompletionContext`` (give the same one to
            ``AssistantAgent(model_context=...)``): its latest message from the user is each
            call's ``context.request``.
    """

    component_provider_override = "callwarden.adapters.autogen.GuardedWorkbench"

    def __init__(self, workbench: Workbench, policy: Any, *, approver: Any = None,
                 wait: float | None = None, agent: str | None = None,
                 principal: str | None = None, session: str | None = None,
                 model_context: Any = None) -> None:
        # StaticWorkbench.__init__ is skipped on purpose: every method it backs is overridden.
        if not isinstance(workbench, Workbench):
            raise TypeError(f"GuardedWorkbench wraps an AutoGen Workbench, got "
                            f"{type(workbench).__name__}; for a list of tools pass "
                            "StaticStreamWorkbench(tools)")
        self._inner = workbench
        self._enforcer: Enforcer = enforcement_path(policy, framework="autogen",
                                                    approver=approver, wait=wait, agent=agent,
                                                    principal=principal, session=session)
        self._model_context = model_context
        self._halted: Decision | None = None
        self._condition: CallwardenHaltTermination | None = None

    def __repr__(self) -> str:
        return f"GuardedWorkbench({self._inner!r}, {self._enforcer!r})"

    @property
    def inner(self) -> Workbench:
        """The guarded workbench (for its own extras, e.g. ``McpWorkbench.list_prompts``)."""
        return self._inner

    @property
    def enforcer(self) -> Enforcer:
        """The :class:`Enforcer` deciding the calls (its ``guard`` holds the approvals)."""
        return self._enforcer

    @property
    def halted(self) -> Decision | None:
        """The decision that halted the run, or None while calls may run."""
        return self._halted

    @property
    def pending(self) -> list[str]:
        """Ids of approval requests this workbench reported as pending and not yet used."""
        return self._enforcer.pending

    @property
    def halt_condition(self) -> CallwardenHaltTermination:
        """A termination condition that stops a team once this workbench halts.

        Combine it with others: ``wb.halt_condition | MaxMessageTermination(20)``. One
        instance per workbench; build ``CallwardenHaltTermination(wb)`` for more teams.
        """
        if self._condition is None:
            self._condition = CallwardenHaltTermination(self)
        return self._condition

    def clear_halt(self) -> None:
        """Lets calls run again after a halt (once a person has looked at why)."""
        self._halted = None

    async def answer(self, request_id: str, answer: Any, *, by: str) -> None:
        """Records a reviewer's answer to a pending request (see :meth:`Enforcer.answer`);
        the same call asked again then runs once, or is refused with the reviewer's reason."""
        await self._enforcer.aanswer(request_id, answer, by=by)

    # -- the Workbench interface -----------------------------------------------------------

    async def list_tools(self) -> list[ToolSchema]:
        return list(await self._inner.list_tools())

    async def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None,
                        cancellation_token: CancellationToken | None = None,
                        call_id: str | None = None) -> ToolResult:
        result: ToolResult | None = None
        async for event in self._guarded(name, arguments, cancellation_token, call_id, False):
            if isinstance(event, ToolResult):
                result = event
        return result if result is not None else _error(name, "The tool returned no result.")

    async def call_tool_stream(self, name: str, arguments: Mapping[str, Any] | None = None,
                               cancellation_token: CancellationToken | None = None,
                               call_id: str | None = None
                               ) -> AsyncGenerator[Any | ToolResult, None]:
        async for event in self._guarded(name, arguments, cancellation_token, call_id, True):
            yield event

    async def start(self) -> None:
        await self._inner.start()

    async def stop(self) -> None:
        await self._inner.stop()

    async def reset(self) -> None:
        """Resets the inner workbench, clears a halt and forgets pending requests."""
        self._halted = None
        self._enforcer.forget_pending()
        await self._inner.reset()

    async def save_state(self) -> Mapping[str, Any]:
        return await self._inner.save_state()

    async def load_state(self, state: Mapping[str, Any]) -> None:
        await self._inner.load_state(state)

    def _to_config(self) -> NoReturn:
        raise NotImplementedError(
            "a GuardedWorkbench holds a live policy and cannot be serialized; serialize the "
            "inner workbench and wrap it again after loading")

    # -- one call ------------------------------------------------------------------------

    async def _guarded(self, name: str, arguments: Mapping[str, Any] | None,
                       token: CancellationToken | None, call_id: str | None,
                       stream: bool) -> AsyncGenerator[Any, None]:
        """Yields the inner workbench's progress events, then exactly one ToolResult.

        Never raises an Exception: AssistantAgent waits forever for a workbench that does.
        """
        if self._halted is not None:
            yield _error(name, halted(self._halted))
            return
        try:
            decided = await self._decide(name, {} if arguments is None else arguments, call_id)
        except Exception as e:  # fail closed: the tool does not run
            yield _error(name, f"callwarden could not decide the call to '{name}' "
                               f"({type(e).__name__}: {e}); it was not run.")
            return
        if isinstance(decided, ToolResult):
            yield decided
            return
        if decided.effect is Effect.HALT:
            self._halted = self._halted or decided
            yield _error(name, halted(decided))
            return
        if not decided.effect.allows:
            yield _error(name, describe_refusal(decided))
            return
        started = _perf()
        result: ToolResult | None = None
        try:
            args = thaw(decided.args)
            if stream and isinstance(self._inner, StreamWorkbench):
                async for event in self._inner.call_tool_stream(name, args, token, call_id):
                    if isinstance(event, ToolResult):
                        result = event
                    else:
                        yield event
            else:
                result = await self._inner.call_tool(name, args, token, call_id)
        except Exception as e:
            self._record(decided, "error", started, e)
            yield _error(name, f"The tool '{name}' failed: {type(e).__name__}: {e}")
            return
        if result is None:
            self._record(decided, "error", started, None)
            yield _error(name, f"The tool '{name}' returned no result.")
            return
        yield self._screen(decided, result, started)

    async def _decide(self, name: str, arguments: Any, call_id: str | None
                      ) -> Decision | ToolResult:
        """The decision, with an ``ask`` settled; a ToolResult when approval is pending.

        The same call asked again (a new model turn has a new call id) finds its request: it
        waits, runs once when approved, or is refused with the reviewer's reason."""
        try:
            return await self._enforcer.adecide(
                name, arguments, call_id=call_id,
                context=await request_context(self._model_context))
        except ApprovalPending as pending:
            return _error(name, approval_pending(pending.decision, pending.request_id))

    def _screen(self, decision: Decision, result: ToolResult, started: float) -> ToolResult:
        """Applies output rules to the result's text (images are dropped if text changes)."""
        try:
            text = result.to_text(replace_image="[image]")
            screened = self._enforcer.screen(decision, text)
            shown, status, halt = screened.shown, screened.status, screened.halt
        except Exception as e:  # fail closed: withhold what could not be checked
            self._record(decision, "error", started, e)
            return _error(result.name, output_unscreened(result.name, e))
        # The inner workbench reports a failed tool as an error result, not an exception.
        self._record(decision, "error" if result.is_error and status == "ok" else status,
                     started, None, screened)
        if halt:
            self._halted = self._halted or decision._replace(effect=Effect.HALT,
                                                             message=str(shown))
            return _error(result.name, halted(self._halted))
        if status == "ok":
            return result
        return ToolResult(name=result.name, result=[TextResultContent(content=str(shown))],
                          is_error=result.is_error or status == "output_blocked")

    def _record(self, decision: Decision, status: str, started: float,
                error: BaseException | None, by: Screened | None = None) -> None:
        try:
            self._enforcer.record_outcome(decision, status, started, error, by=by)
        except Exception:  # an audit sink failing after the call cannot undo it
            return


class CallwardenHaltTermination(TerminationCondition):
    """Stops a team when a guarded workbench halts (and, optionally, when a call awaits approval).

    Args:
        *workbenches: The guarded workbenches (or guardrail providers) to watch.
        on_pending: Also stop when a call's approval request becomes pending, so the team
            pauses until a person answers; run the team again afterwards.
    """

    def __init__(self, *workbenches: Any, on_pending: bool = False) -> None:
        # A GuardedWorkbench, or anything that halts the same way (the guardrail provider of
        # callwarden.adapters.autogen_guardrail): a ``halted`` decision and ``pending`` ids.
        if not workbenches or not all(isinstance(w, GuardedWorkbench) or (
                hasattr(w, "halted") and hasattr(w, "pending")) for w in workbenches):
            raise TypeError("CallwardenHaltTermination watches one or more GuardedWorkbench "
                            "or CallwardenGuardrailProvider")
        self._workbenches: Sequence[Any] = workbenches
        self._on_pending = on_pending
        self._terminated = False
        self._reported: set[str] = set()

    @property
    def terminated(self) -> bool:
        return self._terminated

    async def __call__(self, messages: Sequence[BaseAgentEvent | BaseChatMessage]
                       ) -> StopMessage | None:
        if self._terminated:
            raise TerminatedException("Termination condition has already been reached")
        for workbench in self._workbenches:
            if workbench.halted is not None:
                self._terminated = True
                return StopMessage(content=halted(workbench.halted),
                                   source="CallwardenHaltTermination")
        if self._on_pending:
            fresh = [r for w in self._workbenches for r in w.pending if r not in self._reported]
            if fresh:
                self._reported.update(fresh)
                self._terminated = True
                return StopMessage(
                    content=f"callwarden paused the run: approval request(s) "
                            f"{', '.join(fresh)} pending (callwarden approvals approve ID)",
                    source="CallwardenHaltTermination")
        return None

    async def reset(self) -> None:
        # A halt outlives the reset the team does after stopping: the workbench stays halted
        # (and the next run stops at once) until someone calls clear_halt().
        self._terminated = False
