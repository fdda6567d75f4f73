"""Microsoft Agent Framework (``agent-framework-core`` 1.x): one policy in front of every tool call.

:class:`CallwardenMiddleware` is a function middleware (``FunctionMiddleware.process(context,
call_next)`` with a ``FunctionInvocationContext``): give it to ``Agent(middleware=[...])``, to
one run (``agent.run(..., middleware=[...])``) or to a chat client's ``middleware=``. The
framework's function-invocation loop calls it for every local tool call, including an approved
call it replays. Effects in the framework's idiom:

* allow — ``await call_next()``: the framework validates the arguments and runs the tool;
* modify — ``context.arguments`` becomes the rewritten arguments before ``call_next()`` (the
  framework validates them again against the tool's schema);
* deny — ``context.result`` is the rule's message and ``call_next()`` is not called: the tool
  does not run, the model receives the message as the call's ``function_result`` and the loop
  goes on;
* ask — settled inline by ``approver=`` or ``wait=``; otherwise ``context.result`` is a
  ``function_approval_request`` for this one call (the framework's tool approval, as for
  ``approval_mode="always_require"``, but decided per call): the run returns with it in
  ``response.user_input_requests``. The caller answers in the next ``agent.run(..., session=)``
  on the same ``AgentSession`` with :meth:`CallwardenMiddleware.respond` (approve, or reject
  with a reason the model reads) or the framework's own ``request.to_function_approval_response
  (True / False)``. The framework replays the call through this middleware, which records the
  person's answer on callwarden's request (``Enforcer.aanswer``) and runs the exact call once;
* halt — ``MiddlewareTermination``: the function-invocation loop stops at once, the model gets
  no further turn, and the call's result says the run was halted (``raise_on_halt=True``:
  :class:`AgentRunHalted`, a ``MiddlewareFailure``, aborts the run and propagates from
  ``agent.run``). Every later call is refused until :meth:`CallwardenMiddleware.clear_halt`.

After the tool returns, output rules screen its result's text before the model sees it, and the
outcome is audited. An error while deciding refuses the call with the reason (fail closed): an
ordinary exception would become the framework's contentless "Error: Function failed.".

No ``context.request``: a ``FunctionInvocationContext`` carries the function, its arguments,
the session (whose history providers save the run's messages only after it) and runtime
kwargs, never the conversation, so the user's latest message is not known to this middleware.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from callwarden.exceptions import MissingDependency

try:
    from agent_framework import (
        AgentSession,
        Content,
        FunctionInvocationContext,
        FunctionMiddleware,
        MiddlewareFailure,
        MiddlewareTermination,
    )
except ImportError as e:  # pragma: no cover - depends on the environment
    raise MissingDependency("the Microsoft Agent Framework adapter", "agent-framework-core",
                            "agent-framework") from e

from callwarden._call import json_safe, thaw
from callwarden._decision import Decision, Effect
from callwarden._enforce import Enforcer, Screened
from callwarden._messages import (
    approval_pending,
    describe_refusal,
    halted,
    not_approved,
    output_unscreened,
    undecided,
)
from callwarden.adapters._core import enforcer as enforcement_path
from callwarden.exceptions import ApprovalError, ApprovalInvalid, ApprovalPending, RunHalted

__all__ = ["ANSWER_KEY", "FRAMEWORK", "REQUEST_KEY", "AgentRunHalted", "CallwardenMiddleware"]

FRAMEWORK = "agent-framework"
"""The name recorded in ``call.framework`` and the audit log."""

REQUEST_KEY = "callwarden_request_id"
"""The ``additional_properties`` key of an approval request naming callwarden's request."""

ANSWER_KEY = "callwarden_answer"
"""The ``additional_properties`` key of a response carrying the person's answer."""

_perf = time.perf_counter
Next = Callable[[], Awaitable[None]]


class AgentRunHalted(RunHalted, MiddlewareFailure):
    """A ``halt`` decision with ``raise_on_halt=True``: the agent run is aborted.

    It is a :class:`~callwarden.RunHalted`, so ``except callwarden.RunHalted`` catches it around
    ``agent.run``. It is also the framework's ``MiddlewareFailure``: the function-invocation loop
    never turns it into a tool result, cancels the calls still running in the batch, starts no
    other, and re-raises it to the caller (for a streaming run, when the stream is consumed).
    """


class _Call:
    """The framework's view of one call, turned into ``Enforcer`` arguments once."""

    __slots__ = ("args", "call_id", "fields", "occurrence", "tool")

    def __init__(self, context: FunctionInvocationContext) -> None:
        self.tool: str = context.function.name
        self.args: dict[str, Any] = _arguments(context.arguments)
        meta = context.metadata
        call_id = meta.get("call_id")
        self.call_id: str = call_id if isinstance(call_id, str) else ""
        occurrence = meta.get("function_call_occurrence_id")
        self.occurrence: str = occurrence if isinstance(occurrence, str) and occurrence \
            else self.call_id
        session = context.session
        self.fields: dict[str, Any] = {
            "call_id": self.call_id or None,
            "session": session.session_id if isinstance(session, AgentSession) else None,
        }


class CallwardenMiddleware(FunctionMiddleware):
    """Guards every tool call of an Agent Framework agent with a callwarden policy.

    Args:
        policy: A :class:`~callwarden.Guard`, a policy file path, or a policy dict.
        approver: Settles ``ask`` decisions inline (a callback, sync or async, or
            ``TerminalApprover``) instead of pausing the run for a tool approval.
        wait: Seconds to wait for an answer given elsewhere (``callwarden approvals approve``)
            before pausing the run.
        reviewer: Who answered a framework approval response that names nobody.
        raise_on_halt: Abort the run with :class:`AgentRunHalted` on a halt, instead of
            stopping the function-invocation loop with the halt message as the call's result.
        agent / principal: Recorded on every call (the framework does not tell a function
            middleware which agent calls it); the session is the run's ``AgentSession`` id.
    """

    def __init__(self, policy: Any, *, approver: Any = None, wait: float | None = None,
                 reviewer: str = "reviewer", raise_on_halt: bool = False,
                 agent: str | None = None, principal: str | None = None) -> None:
        self.enforcer: Enforcer = enforcement_path(policy, framework=FRAMEWORK,
                                                   approver=approver, wait=wait, agent=agent,
                                                   principal=principal)
        self.reviewer = reviewer
        self.raise_on_halt = raise_on_halt
        self._halted: Decision | None = None

    def __repr__(self) -> str:
        return f"CallwardenMiddleware({self.enforcer!r})"

    @property
    def halted(self) -> Decision | None:
        """The decision that halted the run, or None while calls may run."""
        return self._halted

    def clear_halt(self) -> None:
        """Lets calls run again after a halt (once a person has looked at why)."""
        self._halted = None

    def respond(self, request: Content, answer: Any = True, *, by: str | None = None) -> Content:
        """The ``function_approval_response`` that answers one of callwarden's approval requests.

        ``answer`` is True / ``"approve"``, False / ``"reject"``, or a mapping ``{"approve":
        bool, "reason": str, "by": str}``; ``by`` names the reviewer. Send the response back in
        the next ``agent.run`` on the same session: the replayed call records the answer on
        callwarden's request, then runs once, or gives the model the reviewer's reason. A
        rejection therefore resumes the call too (the framework's own rejection text carries no
        reason); callwarden refuses it. Answer any other approval request the framework's way.

        Raises:
            ValueError: ``request`` is not an approval request made by callwarden.
        """
        properties = dict(getattr(request, "additional_properties", None) or {})
        request_id = properties.get(REQUEST_KEY)
        if getattr(request, "type", None) != "function_approval_request" \
                or not isinstance(request_id, str) or request.function_call is None:
            raise ValueError("not an approval request made by callwarden; answer it with "
                             "request.to_function_approval_response(approved)")
        properties[ANSWER_KEY] = {"request_id": request_id, "answer": json_safe(answer),
                                  "by": by}
        return Content.from_function_approval_response(
            approved=True, id=str(request.id), function_call=request.function_call,
            additional_properties=properties)

    # -- the FunctionMiddleware interface --------------------------------------------------

    async def process(self, context: FunctionInvocationContext, call_next: Next) -> None:
        """Decides the call, then runs, rewrites, refuses, pauses or halts it."""
        if self._halted is not None:
            self._stop(context, self._halted)
        try:
            call = _Call(context)
            decided = await self._decide(context, call)
        except Exception as e:  # fail closed: the tool does not run
            context.result = _failed(context, e)
            return
        if isinstance(decided, Content):  # a function_approval_request: the run pauses
            context.result = decided
            return
        if decided.effect is Effect.HALT:
            self._halted = self._halted or decided
            self._stop(context, decided)
        if not decided.effect.allows:
            context.result = describe_refusal(decided)
            return
        if decided.effect is Effect.MODIFY:
            context.arguments = thaw(decided.args)
        await self._run(context, decided, call_next)

    def _on_approval_responses(self, responses: Sequence[Content], *,
                               session: AgentSession | None) -> None:
        """Records a rejection given the framework's way (``to_function_approval_response(
        False)``) on callwarden's request: the framework never replays a rejected call, it tells
        its function middleware through this (private) observer hook, as its own security
        middleware is told."""
        for response in responses:
            call = getattr(response, "function_call", None)
            found = self.enforcer.pending_call(str(getattr(call, "call_id", "")))
            if found is None or getattr(response, "approved", False) is True:
                continue
            try:
                self.enforcer.answer(found[1], False, by=self.reviewer)
            except Exception:  # the framework refuses the call either way
                continue

    # -- deciding --------------------------------------------------------------------------

    async def _decide(self, context: FunctionInvocationContext, call: _Call
                      ) -> Decision | Content:
        """The decision with an ``ask`` settled, or the approval request that pauses the run."""
        enforcer = self.enforcer
        response = context.metadata.get("approval_response")
        if isinstance(response, Content) and response.approved is True:
            return await self._resume(call, response)
        try:
            return await enforcer.adecide(call.tool, call.args, **call.fields)
        except ApprovalPending as pending:
            return _approval_request(call, pending)

    async def _resume(self, call: _Call, response: Content) -> Decision | Content:
        """A call the framework replays after an approval response: records the person's
        answer on callwarden's request and settles the call with it. A call in doubt (it may
        have run before a crash) is asked again: the response a resumed session replays is the
        one that let it run then."""
        enforcer = self.enforcer
        request_id, answer, by = _answer(response, self.reviewer)
        decision = await enforcer.acheck(call.tool, call.args, **call.fields)
        if decision.effect is not Effect.ASK:
            if _rejects(answer):  # a person said no to this exact call: it never runs
                why = answer.get("reason") if isinstance(answer, Mapping) else None
                return enforcer.refuse(call.tool, call.args, rule="approval",
                                       code="approval_denied", call_id=call.call_id or None,
                                       message=not_approved(call.tool, f"{by} rejected it"
                                                            + (f": {why}" if why else "")))
            return decision
        try:
            return await enforcer.asettle(decision, approver=None, wait=None)
        except ApprovalPending as pending:
            pending_id = pending.request_id
            if pending.decision.in_doubt and request_id != pending_id:
                return _approval_request(call, pending)
        if request_id is not None and request_id != pending_id:
            raise ApprovalInvalid("approval_mismatch",
                                  f"the answer is for request {request_id}, not {pending_id}")
        try:
            await enforcer.aanswer(pending_id, answer, by=by, names=request_id)
        except ValueError as e:
            raise ApprovalInvalid("approval_answer_invalid", str(e)) from e
        except ApprovalInvalid as e:
            if e.code != "approval_already_resolved":
                raise
            # Resolved elsewhere meanwhile (CLI, web console): that resolution stands.
        return await enforcer.asettle(decision, approval_id=pending_id, approver=None,
                                      wait=None)

    # -- running the tool ------------------------------------------------------------------

    async def _run(self, context: FunctionInvocationContext, decision: Decision,
                   call_next: Next) -> None:
        started = _perf()
        try:
            await call_next()
        except MiddlewareTermination:
            # An inner middleware stopped the loop with a result of its own: screen it too.
            self._screen(context, decision, started)
            raise
        except BaseException as e:
            self._record(decision, "error", started, e)
            raise
        self._screen(context, decision, started)

    def _screen(self, context: FunctionInvocationContext, decision: Decision,
                started: float) -> None:
        result = context.result
        if _is_approval_request(result):  # an inner middleware asks: the tool has not run
            return
        tool = decision.call.tool
        try:
            screened = self.enforcer.screen(decision, _text(result))
        except Exception as e:  # the output may hold what the rules exist to stop
            self._record(decision, "error", started, e)
            context.result = output_unscreened(tool, e)
            return
        self._record(decision, screened.status, started, None, screened)
        if screened.halt:
            self._halted = self._halted or decision._replace(
                effect=Effect.HALT, message=str(screened.shown),
                rule=screened.rule or decision.rule, source=screened.source)
            self._stop(context, self._halted)
        if screened.status != "ok":
            context.result = str(screened.shown)

    def _stop(self, context: FunctionInvocationContext, decision: Decision) -> None:
        """Ends the run: the loop stops with the halt message, or the run is aborted."""
        if self.raise_on_halt:
            raise AgentRunHalted(decision._replace(message=halted(decision)))
        text = halted(decision)
        context.result = text
        raise MiddlewareTermination(text, result=text)

    def _record(self, decision: Decision, status: str, started: float,
                error: BaseException | None, by: Screened | None = None) -> None:
        try:
            self.enforcer.record_outcome(decision, status, started, error, by=by)
        except Exception:  # an audit sink failing after the call cannot undo it
            return


# -- translating -----------------------------------------------------------------------------

def _arguments(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, Mapping):
        return dict(arguments)
    dump = getattr(arguments, "model_dump", None)  # the tool's pydantic input model
    if callable(dump):
        return dict(dump())
    return {} if arguments is None else {"input": arguments}


def _approval_request(call: _Call, pending: ApprovalPending) -> Content:
    """This call's ``function_approval_request``, bound to callwarden's pending request.

    Its id is the call's occurrence id, as the framework's own requests are: the framework
    stores the request in the session and accepts only a response that answers it."""
    decision = pending.decision
    function_call = Content.from_function_call(
        call_id=call.call_id, name=call.tool, arguments=json_safe(call.args),
        id=call.occurrence)
    return Content.from_function_approval_request(
        id=call.occurrence, function_call=function_call,
        additional_properties={REQUEST_KEY: pending.request_id, "rule": decision.rule,
                               "reason": approval_pending(decision, pending.request_id)})


def _answer(response: Content, reviewer: str) -> tuple[str | None, Any, str]:
    """(callwarden's request id if named, the answer, who gave it) from an approval response:
    :meth:`CallwardenMiddleware.respond`'s, or the framework's plain approval."""
    given = (response.additional_properties or {}).get(ANSWER_KEY)
    if not isinstance(given, Mapping):
        return None, True, reviewer
    request_id = given.get("request_id")
    by = given.get("by")
    return (request_id if isinstance(request_id, str) else None, given.get("answer"),
            by if isinstance(by, str) and by else reviewer)


def _rejects(answer: Any) -> bool:
    if isinstance(answer, Mapping):
        return answer.get("approve") is not True
    return answer is not True and answer not in ("approve", "approved", "yes", "y")


def _is_approval_request(result: Any) -> bool:
    return isinstance(result, Content) and result.type == "function_approval_request"


def _text(result: Any) -> Any:
    """What output rules read: the text of a tool's ``list[Content]`` (other items named by
    their type), or the value itself."""
    if isinstance(result, Content):
        result = [result]
    if isinstance(result, list) and result and all(isinstance(c, Content) for c in result):
        return "\n".join(c.text if c.type == "text" and c.text is not None else f"[{c.type}]"
                         for c in result)
    return result


def _failed(context: FunctionInvocationContext, error: Exception) -> str:
    tool = str(getattr(context.function, "name", "tool"))
    if isinstance(error, ApprovalError):
        return not_approved(tool, str(error))
    return undecided(tool, error)
