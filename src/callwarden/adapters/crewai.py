"""CrewAI 1.15 adapter: CrewAI's own tool-call hooks put a policy in front of every tool call.

:class:`CrewGuard` registers a ``before_tool_call`` and an ``after_tool_call`` hook
(``crewai.hooks.register_before_tool_call_hook`` / ``register_after_tool_call_hook``). CrewAI
runs these for every tool call of every agent on each of its paths: native function calling
(``AgentExecutor._execute_single_native_tool_call``, also in worker threads when a turn asks
for several tools), the ReAct text format (``execute_tool_and_check_finality`` and its async
twin), ``LiteAgent`` and the planning step executor. CrewAI's hooks are process-global, so a
guard only acts on the crews / agents it was given (none: every call), and
:meth:`CrewGuard.uninstall` (or leaving ``with guard:``) takes it out again. Effects in CrewAI's
idiom:

* allow / modify — the tool runs; for modify the hook rewrites ``context.tool_input`` in place
  (the dict CrewAI then calls the tool with, and caches under);
* deny — the before-hook returns ``False``, so the tool never runs. CrewAI would tell the model
  only "Tool execution blocked by hook"; the after-hook, which CrewAI runs for blocked calls
  too, replaces that with callwarden's message, so the model reads why and what to do instead;
* ask — settled inline by ``approver=`` or by waiting ``wait`` seconds for
  ``callwarden approvals approve ID``; with ``human_input=True`` the person is asked at the
  console through ``ToolCallHookContext.request_human_input`` (CrewAI's approval gate for tool
  hooks), and their answer is recorded on the request before the call runs once. Otherwise the
  model is told the request is pending; the same call asked again runs once after approval.
  ``stop_on_pending=True`` stops the crew instead (:class:`CrewApprovalPending`), to kick it off
  again once a person has answered;
* halt — the call is blocked and the after-hook raises :class:`CrewRunHalted`, a
  ``crewai.hooks.HookAborted``: CrewAI's own "deliberate stop", which its executor, the agent's
  retry loop and the crew all let through, so ``crew.kickoff()`` raises it. The guard refuses
  (and stops) every later call until :meth:`CrewGuard.clear_halt`;
* output rules — the after-hook screens ``context.tool_result`` (the text the model will read)
  and returns the redacted or withheld text, which CrewAI puts in its place.

CrewAI ignores (fails open on) any other exception a hook raises, so both hooks catch their own
errors: a call callwarden could not decide is blocked with the reason, and an output it could
not screen is withheld. The hooks are synchronous on CrewAI's async paths too (``akickoff``,
``kickoff_async``); ``wait`` then blocks the thread the hook runs on. Install the guard after
any hook of yours that rewrites ``tool_input``: hooks run in the order they were registered.

The call's ``context.request`` is what the user gave the crew: its own task's description
(``context.task`` among ``crew.tasks``, kickoff inputs interpolated); for a coworker's delegated
task (written by a model) the kickoff inputs, and for ``crewai chat`` (whose inputs the chat model
fills in) the latest user chat message. An agent kicked off on its own carries none: CrewAI's
hook context then holds no task, crew or messages.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

from callwarden._call import thaw
from callwarden._decision import Decision, Effect, OutcomeStatus
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
from callwarden.exceptions import (
    ApprovalError,
    ApprovalInvalid,
    ApprovalPending,
    MissingDependency,
    RunHalted,
)

try:
    from crewai.hooks.dispatch import HookAborted
    from crewai.hooks.tool_hooks import (
        ToolCallHookContext,
        register_after_tool_call_hook,
        register_before_tool_call_hook,
        unregister_after_tool_call_hook,
        unregister_before_tool_call_hook,
    )
    from crewai.tools.tool_failure import ToolFailure
except ImportError as e:  # pragma: no cover - depends on the environment
    raise MissingDependency("the CrewAI adapter", "crewai", "crewai") from e

__all__ = ["FRAMEWORK", "CrewApprovalPending", "CrewGuard", "CrewRunHalted", "guard_crew"]

FRAMEWORK = "crewai"
"""The name recorded in ``call.framework`` and the audit log."""

_perf = time.perf_counter
# Decisions handed from the before-hook to the after-hook of the same call. A call whose
# after-hook never runs (an earlier hook aborted it) leaves its entry behind: the cap bounds that.
_MAX_STAGED = 4096
# The executors' own text for an exception a tool raised (native path).
_TOOL_ERROR = "Error executing tool:"


# Both are CrewAI HookAborted (the stop it lets through) and callwarden errors (what a caller
# catches). HookAborted is Any where mypy runs without crewai installed.
class CrewRunHalted(RunHalted, HookAborted):  # type: ignore[misc,unused-ignore]
    """A ``halt`` decision (on a call or on its output): ``crew.kickoff()`` raises it.

    ``except callwarden.RunHalted`` catches it; ``decision`` says which rule halted and why.
    """

    def __init__(self, decision: Decision) -> None:
        super().__init__(decision)
        self.reason: str = halted(decision)


class CrewApprovalPending(ApprovalPending, HookAborted):  # type: ignore[misc,unused-ignore]
    """A call waits for a person (``stop_on_pending=True``): ``crew.kickoff()`` raises it.

    ``request_id`` names the request; once it is approved, kick the crew off again and the
    same call runs once.
    """

    def __init__(self, decision: Decision, request_id: str) -> None:
        super().__init__(decision, request_id)
        self.reason: str = approval_pending(decision, request_id)


class _Entry:
    """One call as the before-hook left it for the after-hook: the decision to run it under, or
    the text the model gets instead (and the stop to raise, for halt / stop_on_pending)."""

    __slots__ = ("args", "decision", "started", "stop", "text")

    def __init__(self, args: dict[str, Any], decision: Decision | None = None, *,
                 text: str | None = None, stop: HookAborted | None = None) -> None:
        self.args = args  # held, so its id() is not reused while the entry waits
        self.decision = decision
        self.text = text
        self.stop = stop
        self.started = _perf()


class CrewGuard:
    """Decides every tool call of the given crews / agents (default: all) with a policy.

    Args:
        policy: A :class:`~callwarden.Guard`, a policy file path, or a policy dict.
        crew: Only guard the calls of this crew (or these crews), matched by identity
            (``kickoff_for_each`` runs copies: guard those without a filter).
        agents: Only guard the calls of these agents, also when kicked off on their own
            (both filters apply when both are given).
        approver: Answers ``ask`` decisions inside the call (a callback, sync or async, or
            ``TerminalApprover``).
        wait: Seconds to wait for an answer given elsewhere (``callwarden approvals approve``).
        human_input: Ask the person at the console through CrewAI's
            ``request_human_input`` when no approver settled the call.
        stop_on_pending: Stop the crew (:class:`CrewApprovalPending`) when a call awaits
            approval, instead of telling the model and carrying on.
        reviewer: Recorded as who answered at the console; it may not be the agent itself.
        agent / principal / session: Recorded on every call (the CrewAI agent's role wins
            over ``agent``).
    """

    __slots__ = ("_agents", "_crews", "_halted", "_installed", "_lock", "_staged", "enforcer",
                 "human_input", "reviewer", "stop_on_pending")

    def __init__(self, policy: Any, *, crew: Any = None, agents: Iterable[Any] | None = None,
                 approver: Any = None, wait: float | None = None, human_input: bool = False,
                 stop_on_pending: bool = False, reviewer: str = "crewai-reviewer",
                 agent: str | None = None, principal: str | None = None,
                 session: str | None = None) -> None:
        self.enforcer: Enforcer = enforcement_path(policy, framework=FRAMEWORK,
                                                   approver=approver, wait=wait, agent=agent,
                                                   principal=principal, session=session)
        crews = [] if crew is None else list(crew) if isinstance(crew, list | tuple) else [crew]
        self._crews: tuple[Any, ...] = tuple(crews)
        self._agents: tuple[Any, ...] = tuple(agents or ())
        self.human_input = human_input
        self.stop_on_pending = stop_on_pending
        self.reviewer = reviewer
        self._halted: Decision | None = None
        self._installed = False
        self._lock = threading.Lock()
        self._staged: OrderedDict[int, _Entry] = OrderedDict()

    def __repr__(self) -> str:
        return f"CrewGuard({self.enforcer!r}, installed={self._installed})"

    # -- installing ----------------------------------------------------------------------

    def install(self) -> CrewGuard:
        """Registers the two hooks with CrewAI (once); returns the guard."""
        if not self._installed:
            register_before_tool_call_hook(self.before_tool_call)
            register_after_tool_call_hook(self.after_tool_call)
            self._installed = True
        return self

    def uninstall(self) -> None:
        """Takes the hooks out of CrewAI again; later calls are not guarded."""
        unregister_before_tool_call_hook(self.before_tool_call)
        unregister_after_tool_call_hook(self.after_tool_call)
        self._installed = False

    @property
    def installed(self) -> bool:
        """Whether the hooks are registered with CrewAI."""
        return self._installed

    def __enter__(self) -> CrewGuard:
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    # -- state -----------------------------------------------------------------------------

    @property
    def halted(self) -> Decision | None:
        """The decision that halted the run, or None while calls may run."""
        return self._halted

    def clear_halt(self) -> None:
        """Lets calls run again after a halt (once a person has looked at why)."""
        self._halted = None

    @property
    def pending(self) -> list[str]:
        """Ids of approval requests this guard reported as pending and not yet used."""
        return self.enforcer.pending

    def answer(self, request_id: str, answer: Any, *, by: str) -> None:
        """Records a reviewer's answer to a pending request (see :meth:`Enforcer.answer`);
        the same call asked again then runs once, or is refused with the reviewer's reason."""
        self.enforcer.answer(request_id, answer, by=by)

    # -- the hooks ---------------------------------------------------------------------------

    def before_tool_call(self, context: ToolCallHookContext) -> bool | None:
        """CrewAI's ``before_tool_call`` hook: decides the call; ``False`` blocks it."""
        args = context.tool_input
        try:
            if not self._covers(context):
                return None
            entry = self._decide(context)
        except ApprovalError as e:
            entry = _Entry(args, text=not_approved(str(context.tool_name), e.message))
        except Exception as e:  # fail closed: CrewAI would run the tool if this raised
            entry = _Entry(args, text=undecided(str(context.tool_name), e))
        try:
            self._stage(entry)
        except Exception:  # the model then gets CrewAI's own "blocked by hook" text
            return False
        return False if entry.text is not None else None

    def after_tool_call(self, context: ToolCallHookContext) -> str | None:
        """CrewAI's ``after_tool_call`` hook: the refusal text for a blocked call, the
        screened output for one that ran (None: as it is); raises to stop the crew."""
        try:
            entry = self._unstage(context.tool_input)
            if entry is None:
                return None
            if entry.stop is not None:
                raise entry.stop
            if entry.text is not None:
                return entry.text
            return self._screen(context, entry)
        except HookAborted:
            raise
        except Exception as e:  # CrewAI would show the raw output if this raised
            return output_unscreened(str(context.tool_name), e)

    # -- one call --------------------------------------------------------------------------

    def _covers(self, context: ToolCallHookContext) -> bool:
        if self._crews and not any(context.crew is crew for crew in self._crews):
            return False
        return not self._agents or any(context.agent is agent for agent in self._agents)

    def _decide(self, context: ToolCallHookContext) -> _Entry:
        tool, args = context.tool_name, context.tool_input
        if self._halted is not None:
            return _Entry(args, self._halted, text=halted(self._halted),
                          stop=CrewRunHalted(self._halted))
        role = getattr(context.agent, "role", None)
        fields: dict[str, Any] = {"agent": role if isinstance(role, str) and role else None}
        request = _request(context)
        if request is not None:
            fields["context"] = {"request": request}
        try:
            decision = self.enforcer.decide(tool, args, **fields)
        except ApprovalPending as pending:
            if not self.human_input:
                stop = (CrewApprovalPending(pending.decision, pending.request_id)
                        if self.stop_on_pending else None)
                return _Entry(args, pending.decision, stop=stop,
                              text=approval_pending(pending.decision, pending.request_id))
            decision = self._ask_console(context, pending, fields)
        if decision.effect is Effect.HALT:
            self._halted = self._halted or decision
            return _Entry(args, decision, text=halted(decision), stop=CrewRunHalted(decision))
        if not decision.effect.allows:
            return _Entry(args, decision, text=describe_refusal(decision))
        if decision.effect is Effect.MODIFY:
            # In place: CrewAI calls the tool with this very dict.
            args.clear()
            args.update(thaw(decision.args))
        return _Entry(args, decision)

    def _ask_console(self, context: ToolCallHookContext, pending: ApprovalPending,
                     fields: dict[str, Any]) -> Decision:
        """Asks the person through CrewAI's console prompt, records the answer on the pending
        request, and decides the same call again with it."""
        request_id = pending.request_id
        reply = context.request_human_input(
            prompt=_console_prompt(pending.decision, request_id),
            default_message="Type 'approve' to run it, or a reason to refuse it:")
        text = str(reply or "").strip()
        approve = text.lower() in ("approve", "approved", "yes", "y")
        answer = {"approve": approve,
                  "reason": None if approve or text.lower() in ("", "no", "n") else text}
        try:
            self.enforcer.answer(request_id, answer, by=self.reviewer)
        except ApprovalInvalid as e:
            if e.code != "approval_already_resolved":
                raise
            # Resolved elsewhere meanwhile (CLI, web console): that resolution stands.
        return self.enforcer.decide(context.tool_name, context.tool_input,
                                    approval_id=request_id, **fields)

    def _screen(self, context: ToolCallHookContext, entry: _Entry) -> str | None:
        decision = entry.decision
        assert decision is not None  # an entry without text always carries its decision
        raw = context.raw_tool_result
        failed = isinstance(raw, ToolFailure) or (
            isinstance(raw, str) and raw.startswith(_TOOL_ERROR))
        try:
            screened = self.enforcer.finish(decision, context.tool_result, entry.started,
                                            failed=failed)
        except Exception as e:  # fail closed: withhold what could not be checked
            self._record_error(decision, entry.started, e)
            return output_unscreened(decision.call.tool, e)
        if screened.halt:
            stopped = decision._replace(effect=Effect.HALT, message=str(screened.shown))
            self._halted = self._halted or stopped
            raise CrewRunHalted(stopped)
        if screened.status in (OutcomeStatus.OK, OutcomeStatus.ERROR):
            return None
        return str(screened.shown)

    def _record_error(self, decision: Decision, started: float, error: BaseException) -> None:
        try:
            self.enforcer.record_outcome(decision, OutcomeStatus.ERROR, started, error)
        except Exception:  # an audit sink failing after the call cannot undo it
            return

    # -- the hand-over from the before-hook to the after-hook --------------------------------

    def _stage(self, entry: _Entry) -> None:
        # Keyed by the tool_input dict: CrewAI passes the same object to both hooks of a call,
        # and calls of one turn may run in parallel threads.
        with self._lock:
            self._staged[id(entry.args)] = entry
            while len(self._staged) > _MAX_STAGED:
                self._staged.popitem(last=False)

    def _unstage(self, args: Mapping[str, Any]) -> _Entry | None:
        with self._lock:
            entry = self._staged.get(id(args))
            if entry is None or entry.args is not args:
                return None
            del self._staged[id(args)]
            return entry


def _request(context: ToolCallHookContext) -> str | None:
    """What the user asked the crew for (see the module docstring); None when there is nothing
    or it cannot be read — never an exception."""
    try:
        crew, task = context.crew, context.task
        if crew is None:
            return None
        inputs = getattr(crew, "_inputs", None)
        inputs = inputs if isinstance(inputs, Mapping) else {}
        chat = inputs.get("crew_chat_messages")
        if chat:  # crewai chat: the inputs (and so the description) came from the chat model
            return latest_user_text(json.loads(str(chat)))
        if task is not None and any(task is own for own in crew.tasks):
            text = str(task.description)
        else:  # a coworker's task, written by the delegating agent's model
            text = "\n".join(str(value) for value in inputs.values())
        return latest_user_text([{"role": "user", "content": text}])  # trimmed alike
    except Exception:
        return None


def _console_prompt(decision: Decision, request_id: str) -> str:
    """What the person at the console reads (the model never sees it)."""
    args = json.dumps(thaw(decision.call.args), ensure_ascii=False, default=str, sort_keys=True)
    return (f"callwarden approval request {request_id}\n  tool:   {decision.call.tool}\n"
            f"  args:   {args[:2000]}\n  rule:   {decision.rule}\n"
            f"  reason: {decision.message or '-'}")


def guard_crew(crew: Any, policy: Any, **options: Any) -> CrewGuard:
    """Guards one crew's tool calls: ``CrewGuard(policy, crew=crew, **options).install()``.

    Call ``uninstall()`` on the result when the crew is done (or use ``with CrewGuard(...)``).
    """
    return CrewGuard(policy, crew=crew, **options).install()
