"""Google ADK 2.x adapter: a plugin that puts a policy in front of every tool call of a runner.

Give ``CallwardenPlugin(policy)`` to ``App(root_agent=..., plugins=[...])`` (or a ``Runner``),
first in the list: ADK stops at the first plugin whose callback returns a value. It uses the
``BasePlugin`` hooks ``before_tool_callback`` (decide), ``after_tool_callback`` (screen the
output), ``on_tool_error_callback`` (record a tool that raised), ``on_event_callback`` (end a
halted invocation) and ``before_run_callback`` (a halted session does not start again). Every
agent of the runner goes through them: sub-agents, workflow nodes, ``AgentTool`` agents
(unless ``include_plugins=False``), live runs. Effects in ADK's idiom:

* allow — the callback returns None and the tool runs;
* modify — the callback rewrites ``tool_args`` in place and the tool runs with the rewritten
  arguments (the model's ``FunctionCall`` in the session stays as it was asked);
* deny — the callback returns ``{"error": message}``: ADK skips the tool and the model gets
  that dict as the function response;
* ask — settled by ``approver`` or ``wait``; else ADK's tool confirmation flow:
  ``tool_context.request_confirmation`` pauses the run with an ``adk_request_confirmation``
  function call (its ``payload`` names callwarden's request), and the user's
  ``FunctionResponse(name="adk_request_confirmation", response={"confirmed": bool,
  "payload": {"by": ..., "reason": ..., "edit": {...}}})`` resumes it: ADK calls the tool
  again, the plugin records the answer on callwarden's request and runs the approved call
  exactly once, or sends the model the reviewer's reason;
* halt — an ``{"error": ...}`` response and ``end_invocation``; once that response is in the
  session, ``InvocationContext.abort()`` (the cancel ``run_async(abort_signal=...)`` trips)
  ends the invocation: the model is not called again, no later agent or workflow node runs,
  and ``run_async`` returns normally. Later calls of the session are refused and its next
  run ends at once until :meth:`CallwardenPlugin.clear_halt` (an ``AgentTool`` agent runs in
  a session of its own: its halt ends the parent's invocation, ADK shares the abort, but is
  remembered for the child's session only);
* output rules — ``after_tool_callback`` returns the redacted or withheld result in place of
  the tool's; a halting output rule halts as above.

The user's request (``context.request``) is the text of the message that started the
invocation (``tool_context.user_content``), or, when that carries no text (the answer to a
confirmation), of the session's latest user event with text; at most its last 20,000
characters.

An error inside the plugin never reaches ADK (which would end the run with a RuntimeError):
the call is refused with the reason, and a result that cannot be screened is withheld. An
agent's own ``before_tool_callback`` runs after the plugin and can still change the arguments;
an agent's ``after_tool_callback`` runs only when the plugin left the result as it was.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from callwarden.exceptions import MissingDependency

try:
    from google.adk.plugins import BasePlugin
    from google.genai import types as genai
except ImportError as e:  # pragma: no cover - depends on the environment
    raise MissingDependency("the Google ADK adapter", "google-adk", "google-adk") from e

from callwarden._call import MAX_REQUEST_CHARS, thaw
from callwarden._decision import Decision, Effect, OutcomeStatus
from callwarden._messages import (
    approval_pending,
    describe_refusal,
    halted,
    not_approved,
    output_unscreened,
    undecided,
)
from callwarden.adapters._core import enforcer as enforcement_path
from callwarden.exceptions import ApprovalError, ApprovalInvalid, ApprovalPending

if TYPE_CHECKING:
    from google.adk.agents.invocation_context import InvocationContext
    from google.adk.events import Event
    from google.adk.tools.base_tool import BaseTool
    from google.adk.tools.tool_context import ToolContext

    from callwarden._enforce import Enforcer, Screened

__all__ = ["FRAMEWORK", "CallwardenPlugin"]

FRAMEWORK = "google-adk"
"""The name recorded in ``call.framework`` and the audit log."""

_perf = time.perf_counter


class _Running(NamedTuple):
    """An allowed call between ``before_tool_callback`` and the callback after it."""

    decision: Decision
    started: float


class CallwardenPlugin(BasePlugin):
    """Decides every tool call of an ADK runner with a callwarden policy.

    Args:
        policy: A :class:`~callwarden.Guard`, a policy file path, or a policy dict.
        approver: Answers ``ask`` decisions inside the call (a callback, sync or async, or
            ``TerminalApprover``) instead of pausing the run for ADK's confirmation.
        wait: Seconds to wait for an answer given elsewhere (``callwarden approvals approve``)
            before pausing the run.
        reviewer: Who answered an ADK tool confirmation whose payload does not say (``by``);
            ADK does not tell. It must differ from the session's user, who is the call's
            principal (nobody approves their own call).
        agent / principal / session: Used when ADK does not tell (it names the agent, the
            session and its user, recorded as principal).
        name: The plugin's name in the runner.
    """

    def __init__(self, policy: Any, *, approver: Any = None, wait: float | None = None,
                 reviewer: str = "reviewer", agent: str | None = None,
                 principal: str | None = None, session: str | None = None,
                 name: str = "callwarden") -> None:
        super().__init__(name=name)
        self._enforcer: Enforcer = enforcement_path(policy, framework=FRAMEWORK,
                                                    approver=approver, wait=wait, agent=agent,
                                                    principal=principal, session=session)
        self.reviewer = reviewer
        self._halts: dict[str, Decision] = {}
        # (invocation id, call id) of halted calls whose response has not been emitted yet.
        self._aborting: set[tuple[str, str]] = set()
        self._running: weakref.WeakKeyDictionary[ToolContext, _Running] = \
            weakref.WeakKeyDictionary()

    def __repr__(self) -> str:
        return f"CallwardenPlugin({self._enforcer!r}, reviewer={self.reviewer!r})"

    @property
    def enforcer(self) -> Enforcer:
        """The :class:`Enforcer` deciding the calls (its ``guard`` holds the approvals)."""
        return self._enforcer

    @property
    def halts(self) -> Mapping[str, Decision]:
        """The halted sessions: session id → the decision that halted it (read-only)."""
        return MappingProxyType(self._halts)

    @property
    def pending(self) -> list[str]:
        """Ids of approval requests this plugin reported as pending and not yet settled."""
        return self._enforcer.pending

    def clear_halt(self, session_id: str | None = None) -> None:
        """Lets a halted session (or, without an id, every session) run again, once a person
        has looked at why."""
        if session_id is None:
            self._halts.clear()
        else:
            self._halts.pop(session_id, None)

    async def answer(self, request_id: str, answer: Any, *, by: str) -> None:
        """Records a reviewer's answer given outside ADK (see :meth:`Enforcer.answer`); the
        same call asked again then runs once, or is refused with the reviewer's reason."""
        await self._enforcer.aanswer(request_id, answer, by=by)

    # -- ADK's plugin callbacks --------------------------------------------------------------

    async def before_run_callback(self, *, invocation_context: InvocationContext
                                  ) -> genai.Content | None:
        """Ends a halted session's next run at once, saying why (ADK's early exit)."""
        session = _session_of(invocation_context)
        decision = None if session is None else self._halts.get(session)
        if decision is None:
            return None
        return genai.Content(role="model", parts=[genai.Part(text=halted(decision))])

    async def on_event_callback(self, *, invocation_context: InvocationContext,
                                event: Event) -> Event | None:
        """Aborts the invocation once the halted call's response is in the session."""
        if not self._aborting:
            return None
        invocation = invocation_context.invocation_id
        halted_here = {(invocation, r.id) for r in event.get_function_responses()
                       if r.id} & self._aborting
        if halted_here:
            self._aborting -= halted_here
            # ADK's own cancel (what run_async's abort_signal trips): no later agent or
            # workflow node of this invocation runs; run_async returns normally.
            invocation_context.abort()
        return None

    async def before_tool_callback(self, *, tool: BaseTool, tool_args: dict[str, Any],
                                   tool_context: ToolContext) -> dict[str, Any] | None:
        """Decides the call: None lets it run (with ``tool_args`` rewritten for modify); a
        dict answers it instead of the tool."""
        name = str(getattr(tool, "name", "") or "")
        try:
            session = _session_of(tool_context)
            if session in self._halts:
                return self._halt(tool_context, session, self._halts[session])
            decided = await self._decide(name, tool_args, tool_context, session)
            if isinstance(decided, dict):
                return decided
            if decided.effect is Effect.HALT:
                return self._halt(tool_context, session, decided)
            if not decided.effect.allows:
                return {"error": describe_refusal(decided)}
            if decided.effect is Effect.MODIFY:
                rewritten = thaw(decided.args)
                tool_args.clear()
                tool_args.update(rewritten)
        except ApprovalError as e:  # the answer could not be recorded: not approved
            return {"error": not_approved(name, str(e))}
        except Exception as e:  # fail closed: the tool does not run
            return {"error": undecided(name, e)}
        self._running[tool_context] = _Running(decided, _perf())
        return None

    async def after_tool_callback(self, *, tool: BaseTool, tool_args: dict[str, Any],
                                  tool_context: ToolContext, result: Any
                                  ) -> dict[str, Any] | None:
        """Screens the tool's result with the output rules and records the outcome: None
        keeps it, a dict replaces it."""
        running = self._running.pop(tool_context, None)
        if running is None:
            return None  # answered before the tool: a refusal, a pause, another plugin
        decision, started = running
        name = decision.call.tool
        try:
            screened = self._enforcer.screen(decision, result)
        except Exception as e:  # the output may hold what the rules exist to stop
            self._record(decision, OutcomeStatus.ERROR, started, e)
            return {"error": output_unscreened(name, e)}
        failed = screened.status is OutcomeStatus.OK and _is_error(result)
        self._record(decision, OutcomeStatus.ERROR if failed else screened.status, started,
                     None, screened)
        if screened.halt:
            halt = decision._replace(effect=Effect.HALT, message=str(screened.shown),
                                     rule=screened.rule, source=screened.source)
            return self._halt(tool_context, _session_of(tool_context), halt)
        if screened.status is OutcomeStatus.OK:
            return None
        if screened.status is OutcomeStatus.OUTPUT_BLOCKED:
            return {"error": str(screened.shown)}
        shown = screened.shown
        return dict(shown) if isinstance(shown, Mapping) else {"result": shown}

    async def on_tool_error_callback(self, *, tool: BaseTool, tool_args: dict[str, Any],
                                     tool_context: ToolContext, error: Exception
                                     ) -> dict[str, Any] | None:
        """Records a tool that raised (or was cancelled); ADK handles the error as usual."""
        running = self._running.pop(tool_context, None)
        if running is not None:
            self._record(running.decision, OutcomeStatus.ERROR, running.started, error)
        return None

    # -- one call ----------------------------------------------------------------------------

    async def _decide(self, name: str, args: dict[str, Any], tool_context: ToolContext,
                      session: str | None) -> Decision | dict[str, Any]:
        """The decision with an ``ask`` settled, or the response that pauses the call.

        ADK calls the tool again when the user answers the confirmation: the same call finds
        its pending request, the answer is recorded on it, and the decision uses it once. A
        call in doubt (it may have run before a crash) takes only a confirmation whose payload
        names its request: a resumed invocation replays the confirmation that let it run then,
        so the call stays asked (the model reads that the request raised in doubt awaits a
        person)."""
        enforcer = self._enforcer
        fields = _fields(tool_context, session)
        try:
            return await enforcer.adecide(name, args, **fields)
        except ApprovalPending as pending:
            request_id, asked = pending.request_id, pending.decision
        confirmation = tool_context.tool_confirmation
        named = _named(confirmation.payload) if confirmation is not None else None
        if confirmation is None or (asked.in_doubt and named != request_id):
            tool_context.request_confirmation(
                hint=asked.message or f"The call to '{name}' needs a person's approval.",
                payload={"request_id": request_id, "tool": name, "args": thaw(asked.args),
                         "rule": asked.rule, "by": None, "reason": None})
            # Like ADK's own confirmation gate: the pause is not a result to summarize.
            tool_context.actions.skip_summarization = True
            return {"error": approval_pending(asked, request_id)}
        answer = _answer(confirmation.confirmed, confirmation.payload, request_id)
        try:
            await enforcer.aanswer(request_id, answer, by=self.reviewer, names=named)
        except ValueError as e:
            raise ApprovalInvalid("approval_answer_invalid", str(e)) from e
        except ApprovalInvalid as e:
            if e.code != "approval_already_resolved":
                raise
            # Resolved elsewhere meanwhile (CLI, web console): that resolution stands.
        return await enforcer.adecide(name, args, approval_id=request_id, **fields)

    def _halt(self, tool_context: ToolContext, session: str | None,
              decision: Decision) -> dict[str, Any]:
        """Ends the invocation ADK's way and remembers the halt for the session."""
        if session is not None:
            self._halts.setdefault(session, decision)
        tool_context.actions.skip_summarization = True
        tool_context.get_invocation_context().end_invocation = True
        if tool_context.function_call_id:
            self._aborting.add((tool_context.invocation_id, tool_context.function_call_id))
        return {"error": halted(decision)}

    def _record(self, decision: Decision, status: str, started: float,
                error: BaseException | None, by: Screened | None = None) -> None:
        try:
            self._enforcer.record_outcome(decision, status, started, error, by=by)
        except Exception:  # an audit sink failing after the call cannot undo it
            return


def _fields(tool_context: ToolContext, session: str | None) -> dict[str, Any]:
    """What ADK tells about the call: its id, the agent, the session and its user, and the
    user's request."""
    user = getattr(tool_context, "user_id", None)
    agent = getattr(tool_context, "agent_name", None)
    fields: dict[str, Any] = {
        "call_id": tool_context.function_call_id, "session": session,
        "agent": agent if isinstance(agent, str) and agent else None,
        "principal": user if isinstance(user, str) and user else None}
    request = _request_of(tool_context)
    if request is not None:
        fields["context"] = {"request": request}
    return fields




def _request_of(tool_context: Any) -> str | None:
    """The text of the user's latest message (see the module docstring); None when there is
    none or it cannot be read."""
    try:
        contents = [getattr(tool_context, "user_content", None)]
        events = getattr(getattr(tool_context, "session", None), "events", None) or ()
        contents += [e.content for e in reversed(events) if getattr(e, "author", None) == "user"]
        for content in contents:
            parts = getattr(content, "parts", None) or ()
            text = "\n".join(p.text for p in parts
                             if isinstance(getattr(p, "text", None), str) and p.text
                             and not getattr(p, "thought", False))
            if text:
                return text[-MAX_REQUEST_CHARS:]
    except Exception:  # the request is a hint: unreadable means none
        return None
    return None


def _session_of(context: Any) -> str | None:
    session = getattr(getattr(context, "session", None), "id", None)
    return session if isinstance(session, str) and session else None


def _named(payload: Any) -> str | None:
    """The request id a confirmation's payload names (callwarden's own payload does)."""
    named = payload.get("request_id") if isinstance(payload, Mapping) else None
    return named if isinstance(named, str) else None


def _answer(confirmed: bool, payload: Any, request_id: str) -> dict[str, Any]:
    """An ADK tool confirmation as an approval answer; the payload may say who answered,
    why, and an edit of the arguments."""
    answer: dict[str, Any] = {"approve": bool(confirmed)}
    if not isinstance(payload, Mapping):
        return answer
    named = payload.get("request_id")
    if named is not None and named != request_id:
        raise ApprovalInvalid("approval_mismatch",
                              f"the answer is for request {named}, not {request_id}")
    for key in ("by", "reason", "edit"):
        if payload.get(key) is not None:
            answer[key] = payload[key]
    return answer


def _is_error(result: Any) -> bool:
    """ADK's convention for a tool that reports its own failure: ``{"error": ...}``."""
    return isinstance(result, Mapping) and result.get("error") is not None
