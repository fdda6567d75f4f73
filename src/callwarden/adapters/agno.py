"""Agno adapter: a tool hook that puts a policy in front of every tool call an agent makes.

Put :class:`CallwardenToolHook` *first* in ``Agent(tool_hooks=[...])`` (or ``Team``): Agno's
``tool_hooks`` wrap every tool's execution, toolkit and MCP tools included, and the first hook
sees the call's live ``arguments`` before anything runs. One hook serves ``agent.run`` and
``agent.arun``: it is a plain callable (Agno silently skips an ``async def`` hook on a sync
run), deciding synchronously for sync tools, which ``arun`` runs in worker threads, and
returning a coroutine Agno awaits for ``async def`` tools. Effects in Agno's idiom:

* allow / modify — the tool runs; for modify the call's ``arguments`` are rewritten in place
  (Agno runs the tool with the dict the first hook received, not with what it passes on);
* deny — the hook raises ``RetryAgentRun(message)``: the tool never runs and the model gets
  callwarden's message as the call's error result (``tool_call_error=True``), then carries on;
* ask — settled by ``approver=`` or by waiting ``wait`` seconds for
  ``callwarden approvals approve ID``; otherwise the model gets an error result naming the
  pending request, and the same call asked again runs once after approval. Agno cannot pause a
  run from inside a hook (its confirmation pause is a static ``requires_confirmation`` flag,
  checked before hooks run), so for tools you mark ``requires_confirmation=True`` answer the
  paused run with :meth:`CallwardenToolHook.confirm` / :meth:`~CallwardenToolHook.reject`:
  the answer is recorded on callwarden's request for that exact call, ``continue_run`` runs an
  approved call once, and a rejected one gives the model the reviewer's reason;
* halt — ``StopAgentRun``: the call's error result says the run was halted and Agno asks the
  model nothing more. The hook refuses every later call (the rest of the same batch too) until
  :meth:`CallwardenToolHook.clear_halt`;
* output rules — the tool's result (a ``ToolResult``'s text; a generator is collected first) is
  screened before Agno hands it to the model; a halting output rule halts as above.

Deciding that fails (a broken policy, a store error) refuses the call with the reason: the tool
does not run. Agno's own control flow (``AgentRunException``, cancellation) passes through.

A call's ``context.request`` is the run's latest user message (``run_context.messages``), without
the knowledge references and dependencies Agno appends to it; a team member's user message is
the leader's task, written by a model, so a member's calls (and a sub-team's) carry no request.
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, NoReturn

from callwarden.exceptions import MissingDependency

try:
    from agno.exceptions import RetryAgentRun, StopAgentRun
    from agno.run.requirement import RunRequirement
    from agno.tools.function import ToolResult
except ImportError as e:  # pragma: no cover - depends on the environment
    raise MissingDependency("the Agno adapter", "agno", "agno") from e

from callwarden._call import thaw
from callwarden._decision import Decision, Effect
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
from callwarden.exceptions import ApprovalError, ApprovalPending

__all__ = ["FRAMEWORK", "CallwardenToolHook"]

FRAMEWORK = "agno"
"""The name recorded in ``call.framework`` and the audit log."""

_perf = time.perf_counter
# What Agno appends to the user's message (agent/_messages.py, team/_messages.py): retrieved
# documents and the app's dependencies are not what the user asked for.
_APPENDED = ("\n\nUse the following references from the knowledge base if it helps:\n",
             "\n\n<additional context>\n")


class CallwardenToolHook:
    """An Agno tool hook deciding every call with a callwarden policy.

    Args:
        policy: A :class:`~callwarden.Guard`, a policy file path, or a policy dict.
        approver: Answers ``ask`` decisions inside the call (a callback or
            ``TerminalApprover``).
        wait: Seconds to wait for an answer given elsewhere (``callwarden approvals approve``).
        reviewer: Who is recorded as approving when :meth:`confirm` / :meth:`reject` are not
            told (Agno's confirmation does not say who answered).
        agent / principal / session: Recorded on every call; by default the Agno agent's (or
            team's) name, the run's ``user_id`` and ``session_id``.
    """

    def __init__(self, policy: Any, *, approver: Any = None, wait: float | None = None,
                 reviewer: str = "agno-reviewer", agent: str | None = None,
                 principal: str | None = None, session: str | None = None) -> None:
        self._enforcer: Enforcer = enforcement_path(policy, framework=FRAMEWORK,
                                                    approver=approver, wait=wait, agent=agent,
                                                    principal=principal, session=session)
        self.reviewer = reviewer
        self._halted: Decision | None = None

    def __repr__(self) -> str:
        return f"CallwardenToolHook({self._enforcer!r})"

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
        """Ids of approval requests this hook reported as pending and not yet used."""
        return self._enforcer.pending

    def clear_halt(self) -> None:
        """Lets calls run again after a halt (once a person has looked at why)."""
        self._halted = None

    def answer(self, request_id: str, answer: Any, *, by: str) -> None:
        """Records a reviewer's answer to a pending request (see :meth:`Enforcer.answer`);
        the same call asked again then runs once, or is refused with the reviewer's reason."""
        self._enforcer.answer(request_id, answer, by=by)

    async def aanswer(self, request_id: str, answer: Any, *, by: str) -> None:
        """Async twin of :meth:`answer`."""
        await self._enforcer.aanswer(request_id, answer, by=by)

    # -- Agno's confirmation pause -----------------------------------------------------------

    def confirm(self, requirement: RunRequirement, *, run: Any = None,
                by: str | None = None) -> None:
        """Approves a call Agno paused for confirmation: ``requirement.confirm()``, and, when
        the policy asks about this call, the approval recorded on callwarden's request, so
        ``continue_run`` runs it once.

        ``run`` is the paused ``RunOutput`` (its ``session_id`` / ``user_id`` name the call
        the way the hook will see it again).
        """
        self._resolve(requirement, run, by, approve=True, reason=None)
        requirement.confirm()  # type: ignore[no-untyped-call]

    def reject(self, requirement: RunRequirement, *, run: Any = None, reason: str | None = None,
               by: str | None = None) -> None:
        """Rejects a call Agno paused for confirmation: the refusal is recorded on
        callwarden's request and ``requirement.reject(note)`` carries callwarden's message,
        which the model gets as the call's result when the run continues."""
        note = self._resolve(requirement, run, by, approve=False, reason=reason)
        requirement.reject(note=note)

    def _resolve(self, requirement: RunRequirement, run: Any, by: str | None, *, approve: bool,
                 reason: str | None) -> str:
        tool = requirement.tool_execution
        if tool is None or not tool.tool_name:
            raise ValueError("the requirement names no tool call")
        who = by or self.reviewer
        refused = not_approved(tool.tool_name, f"{who} rejected it: {reason or 'no reason given'}")
        enforcer = self._enforcer
        decision = enforcer.check(tool.tool_name, dict(tool.tool_args or {}),
                                  call_id=tool.tool_call_id, **_run_fields(run))
        if decision.effect is not Effect.ASK:
            return refused
        request_id = enforcer.request(decision)  # the same call's pending request, or a new one
        # Agno's requirement names no request of callwarden's: one raised in doubt (the call
        # may have run before a crash) is answered only through callwarden (it says how).
        enforcer.answer(request_id, {"approve": approve, "reason": reason}, by=who, names=None)
        if approve:
            return ""
        try:
            settled = enforcer.settle(decision, approval_id=request_id, approver=None, wait=None)
        except ApprovalError:
            return refused
        return refused if settled.effect.allows else describe_refusal(settled)

    # -- the hook ----------------------------------------------------------------------------

    def __call__(self, name: str, function: Callable[..., Any], arguments: dict[str, Any],
                 run_context: Any = None, agent: Any = None, team: Any = None) -> Any:
        """Agno calls this around each tool call (the parameter names are what Agno passes).

        Raises:
            RetryAgentRun: the call was refused; the model gets the message as its result.
            StopAgentRun: the run halts.
        """
        if inspect.iscoroutinefunction(function):  # an async tool under agent.arun
            return self._acall(name, function, arguments, run_context, agent, team)
        fields = self._fields(name, arguments, run_context, agent, team)
        try:
            decision = self._enforcer.decide(name, arguments, **fields)
        except ApprovalPending as pending:
            _refuse(approval_pending(pending.decision, pending.request_id))
        except Exception as e:  # fail closed: the tool does not run
            _refuse(_undecided(name, e), e)
        args = self._effective(decision, arguments)
        started = _perf()
        try:
            result = function(**args)
            if isinstance(result, Iterator):
                result = _Collected(list(result), asynchronous=False)
        except BaseException as e:
            self._record(decision, started, e)
            raise
        return self._screen(decision, result, started)

    async def _acall(self, name: str, function: Callable[..., Any], arguments: dict[str, Any],
                     run_context: Any, agent: Any, team: Any) -> Any:
        fields = self._fields(name, arguments, run_context, agent, team)
        try:
            decision = await self._enforcer.adecide(name, arguments, **fields)
        except ApprovalPending as pending:
            _refuse(approval_pending(pending.decision, pending.request_id))
        except Exception as e:
            _refuse(_undecided(name, e), e)
        args = self._effective(decision, arguments)
        started = _perf()
        try:
            result = await function(**args)
            if isinstance(result, AsyncIterator):
                result = _Collected([item async for item in result], asynchronous=True)
            elif isinstance(result, Iterator):
                result = _Collected(list(result), asynchronous=False)
        except BaseException as e:
            self._record(decision, started, e)
            raise
        return self._screen(decision, result, started)

    def _fields(self, name: str, arguments: Any, run_context: Any, agent: Any,
                team: Any) -> dict[str, Any]:
        if self._halted is not None:
            raise StopAgentRun(halted(self._halted))
        owner = agent if agent is not None else team
        who = getattr(owner, "name", None)
        return {"call_id": _call_id(run_context, name, arguments),
                "agent": who if isinstance(who, str) else None,
                "session": _text(getattr(run_context, "session_id", None)),
                "principal": _text(getattr(run_context, "user_id", None)),
                "context": _request(run_context, owner)}

    def _effective(self, decision: Decision, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments the tool runs with; raises for a call that may not run."""
        effect = decision.effect
        if effect is Effect.HALT:
            self._halted = self._halted or decision
            raise StopAgentRun(halted(decision))
        if not effect.allows:
            _refuse(describe_refusal(decision))
        if effect is Effect.MODIFY:
            rewritten = thaw(decision.args)
            if not isinstance(rewritten, dict) or (not arguments and rewritten):
                _refuse(cannot_rewrite(decision, rewritten if isinstance(rewritten, dict) else {},
                                       "Agno cannot add arguments to a call made without any"))
            # Agno runs the tool with the call's own dict, whatever a hook passes on.
            arguments.clear()
            arguments.update(rewritten)
        return arguments

    # -- after the tool ran ------------------------------------------------------------------

    def _screen(self, decision: Decision, result: Any, started: float) -> Any:
        tool = decision.call.tool
        value = (result.content if isinstance(result, ToolResult) else
                 result.text() if isinstance(result, _Collected) else result)
        try:
            screened = self._enforcer.finish(decision, value, started)
        except Exception as e:  # the output may hold what the rules exist to stop
            self._record(decision, started, e)
            _refuse(output_unscreened(tool, e), e)
        if screened.halt:
            self._halted = self._halted or decision._replace(effect=Effect.HALT,
                                                             message=str(screened.shown))
            raise StopAgentRun(halted(self._halted))
        if screened.status == "output_blocked":
            _refuse(str(screened.shown))
        if screened.status == "ok":
            return result.replay() if isinstance(result, _Collected) else result
        if isinstance(result, ToolResult):  # media and metadata may hold what was removed
            return ToolResult(content=str(screened.shown))
        return screened.shown if isinstance(screened.shown, str) else str(screened.shown)

    def _record(self, decision: Decision, started: float, error: BaseException | None,
                by: Screened | None = None) -> None:
        try:
            self._enforcer.record_outcome(decision, "error", started, error, by=by)
        except Exception:  # an audit sink failing after the call cannot undo it
            return


class _Collected:
    """A tool's streamed (generator) result, collected so it is screened before the model
    sees it; replayed to Agno as a generator when the output rules leave it as it was."""

    __slots__ = ("asynchronous", "items")

    def __init__(self, items: list[Any], asynchronous: bool) -> None:
        self.items = items
        self.asynchronous = asynchronous

    def text(self) -> str:
        # What Agno shows the model: the text of each item (of content events, their content).
        return "".join(str(getattr(item, "content", item) or "") for item in self.items)

    def replay(self) -> Any:
        if self.asynchronous:
            return _areplay(self.items)
        return iter(self.items)


async def _areplay(items: list[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item


def _refuse(text: str, cause: BaseException | None = None) -> NoReturn:
    """The tool does not run; Agno gives the model ``text`` as the call's error result."""
    raise RetryAgentRun(text) from cause


def _undecided(tool: str, error: Exception) -> str:
    if isinstance(error, ApprovalError):
        return not_approved(tool, str(error))
    return undecided(tool, error)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _run_fields(run: Any) -> dict[str, Any]:
    """A paused ``RunOutput``'s identity, named as the hook names a call's."""
    if run is None:
        return {}
    return {"session": _text(getattr(run, "session_id", None)),
            "principal": _text(getattr(run, "user_id", None)),
            "agent": getattr(run, "agent_name", None) or getattr(run, "team_name", None)}


def _request(run_context: Any, owner: Any) -> dict[str, Any] | None:
    """``{"request": text}``: the run's latest user message, without what Agno appended to
    it; None for a team member's run, when there is none, or when it cannot be read — never
    an exception."""
    try:
        if getattr(owner, "team_id", None) is not None \
                or getattr(owner, "parent_team_id", None) is not None:
            return None  # the leader's task for a member is no user's request
        role = getattr(owner, "user_message_role", None) or "user"
        for message in reversed(getattr(run_context, "messages", None) or ()):
            if getattr(message, "role", None) != role:
                continue
            content = message.content
            if isinstance(content, str):
                for marker in _APPENDED:
                    content = content.split(marker, 1)[0]
            said = latest_user_text([{"role": "user", "content": content}])
            return None if said is None else {"request": said}
    except Exception:
        return None
    return None


def _call_id(run_context: Any, name: str, arguments: Any) -> str | None:
    """The model's id for this call, when the run's latest tool-calling message names it
    unambiguously (Agno does not give hooks the call id)."""
    try:
        for message in reversed(getattr(run_context, "messages", None) or ()):
            calls = getattr(message, "tool_calls", None)
            if not calls:
                continue
            found = [c.get("id") for c in calls
                     if c.get("function", {}).get("name") == name
                     and json.loads(c["function"].get("arguments") or "{}") == arguments]
            return str(found[0]) if len(found) == 1 and found[0] else None
    except Exception:  # best effort: the id only labels the audit record
        return None
    return None
