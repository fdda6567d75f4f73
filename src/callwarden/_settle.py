"""What the guard does with an ``ask`` decision: grant, resume, ask, wait, or pause.

``resolve_ask`` returns a decision the guard then executes or refuses:

1. the same call was asked before (same digest: tool, arguments, principal, session, policy;
   any framework call id), and its request is approved and unused → the call runs once (an
   approval is used by its own call before any grant remembered from it, so revoking the
   grant leaves nothing behind);
2. a remembered grant covers the call → allow;
3. ``approval_id`` given (resuming after a pause) → use that approval for this exact call, once;
4. the same call's earlier request is still valid → a pending one is asked again, a denied one
   is a deny with the person's reason: a person's resolution stands, whoever resumes or
   retries the call;
5. else a request is made; an approver, if given, answers it: approve → allow; deny → deny
   with the reviewer's reason; edit → the edited arguments are a new call, and the whole policy
   runs on them again (a deny rule still denies; an ``ask`` is satisfied by the edit);
6. ``wait`` given → wait that long for someone to resolve it from elsewhere;
7. otherwise → raise :class:`ApprovalPending` with the request id.

Deny and halt rules never get here: the engine's strictest-wins combination has already
decided those calls before anyone is asked. Limits are only checked at ask time (an exceeded
budget denies before anyone is asked); an approved or granted call counts against them when
the approval is used (``Engine.count_approved``), and is denied if a budget ran out meanwhile.
"""

from __future__ import annotations

from time import perf_counter as _perf
from typing import TYPE_CHECKING, Any

from callwarden._decision import Decision, Effect, Reason
from callwarden._flow import Flow, Step, adrive, drive
from callwarden._messages import decision_message, not_approved
from callwarden.approvals._approvals import Approvals
from callwarden.approvals._approvers import (
    Approve,
    Approver,
    Deny,
    aask_approver,
    approver_name,
    ask_approver,
)
from callwarden.approvals._records import ApprovalRequest, Grant, Status, decision_digest
from callwarden.engine.journal import APPROVAL_CODES, unjournaled
from callwarden.exceptions import (
    ApprovalError,
    ApprovalInvalid,
    ApprovalPending,
    ApprovalRefused,
    AuditError,
    StoreUnavailable,
)

if TYPE_CHECKING:
    from callwarden._guard import Guard

__all__ = ["aresolve_ask", "resolve_ask"]


def resolve_ask(guard: Guard, decision: Decision, *, approver: Approver | None = None,
                wait: float | None = None, approval_id: str | None = None,
                approvals: Approvals | None = None) -> Decision:
    """Turns an ``ask`` decision into one the guard can act on (see the module docstring).

    Args:
        guard: The guard that decided; edited calls are checked again with it.
        decision: The ``ask`` decision (any other decision is returned unchanged).
        approver: A callback or :class:`TerminalApprover` to ask now.
        wait: Seconds to wait for a resolution from another process.
        approval_id: The request to use, when resuming a paused call.
        approvals: Where requests live (default: ``guard.approvals``).

    Raises:
        ApprovalPending: nobody answered yet; carries ``request_id`` to resume with.
    """
    return drive(_resolve(guard, _approvals_of(guard, approvals), decision, approver, wait,
                          approval_id))


async def aresolve_ask(guard: Guard, decision: Decision, *, approver: Approver | None = None,
                       wait: float | None = None, approval_id: str | None = None,
                       approvals: Approvals | None = None) -> Decision:
    """Async twin of :func:`resolve_ask`: the store, the approver and the re-check are awaited."""
    return await adrive(_resolve(guard, _approvals_of(guard, approvals), decision, approver,
                                 wait, approval_id))


def _approvals_of(guard: Guard, approvals: Approvals | None) -> Approvals:
    found = approvals if approvals is not None else getattr(guard, "approvals", None)
    if not isinstance(found, Approvals):
        raise TypeError("no approvals store: pass approvals=Approvals(store) or configure the "
                        "policy's 'approvals:' section")
    return found


def _resolve(guard: Guard, approvals: Approvals, decision: Decision, approver: Approver | None,
             wait: float | None, approval_id: str | None) -> Flow[Decision]:
    if decision.effect is not Effect.ASK:
        return decision
    try:
        settled = yield from _decide(guard, approvals, decision, approver, wait, approval_id)
        return (yield from _journaled(guard, settled))
    except StoreUnavailable as e:
        return _denied(decision, "approval_store_unavailable",
                       f"the approvals store is unavailable ({e}); failing closed")
    except AuditError as e:  # audit is required and the transition could not be recorded
        return _denied(decision, "audit_failed", f"{e}; failing closed")
    except ApprovalRefused as e:
        if e.code != "approval_cap":
            raise
        return _denied(decision, e.code, e.message)  # past a max_open cap: not asked


def _journaled(guard: Guard, decision: Decision) -> Flow[Decision]:
    """An approved call is journaled before it runs, with the approval it used (exactly once:
    engine/journal.py); one whose entry cannot be written does not run."""
    engine: Any = getattr(guard, "engine", None)
    journal = getattr(engine, "journal", None)
    if journal is None or not decision.effect.allows or \
            not journal.covers_decision(decision, engine.profile(decision.call.tool)):
        return decision
    approval = next((r.message for r in decision.reasons if r.code in APPROVAL_CODES), None)
    # A person decided with the in-doubt state before them (or it was not in doubt): it runs.
    claimed = yield from journal.claim(decision, _perf() + engine.settings.timeout,
                                       approval=approval, force=True)
    if claimed is None:
        return decision
    return unjournaled(decision, engine.settings.on_error)


def _decide(guard: Guard, approvals: Approvals, decision: Decision, approver: Approver | None,
            wait: float | None, approval_id: str | None) -> Flow[Decision]:
    # A call in doubt (it may have run already) is put to a person: neither a standing grant
    # nor an approval given before anyone knew that covers it, only a request raised in doubt.
    in_doubt = decision.in_doubt
    if approval_id is not None and in_doubt:
        try:
            named = yield from approvals._get(approval_id)
        except ApprovalInvalid:
            named = None
        if named is not None and not named.in_doubt:
            approval_id = None
    earlier = None if approval_id is not None else (yield from approvals._latest(decision))
    if earlier is not None and in_doubt and not earlier.in_doubt:
        earlier = None
    if earlier is not None and earlier.status is Status.APPROVED:
        # The approval runs its own call first, and once; a grant remembered from it covers
        # the calls after. Left unused behind a grant, it would outlive the grant's revocation.
        return (yield from _resume(guard, approvals, decision, None, None, earlier.id))
    grant = None if in_doubt else (yield from approvals._granted(decision))
    if grant is not None:
        counted = yield from _counted(guard, _by_grant(decision, grant))
        if counted.effect.allows:
            approvals._grant_used(grant, counted)
        return counted
    if approval_id is not None:
        return (yield from _resume(guard, approvals, decision, approver, wait, approval_id))
    if earlier is not None:
        if earlier.status is Status.PENDING:
            return (yield from _ask(guard, approvals, decision, earlier, approver, wait))
        if earlier.status is Status.DENIED:
            return _denied(decision, "approval_denied", _denial(earlier))
    request = yield from approvals._request(decision)
    return (yield from _ask(guard, approvals, decision, request, approver, wait))


def _resume(guard: Guard, approvals: Approvals, decision: Decision, approver: Approver | None,
            wait: float | None, approval_id: str) -> Flow[Decision]:
    try:
        request = yield from approvals._get(approval_id)
    except ApprovalInvalid as e:
        return _denied(decision, e.code, e.message)
    if (request.status is Status.APPROVED and request.edited_args is not None
            and decision_digest(decision) == request.digest):
        # The paused call comes back as it was asked; the reviewer approved an edit of it.
        return (yield from _run_edit(guard, approvals, decision, request))
    return (yield from _use(guard, approvals, decision, approval_id, approver, wait))


def _use(guard: Guard, approvals: Approvals, decision: Decision, request_id: str,
         approver: Approver | None, wait: float | None) -> Flow[Decision]:
    """Consumes an approval for this call and allows it, or says why not."""
    try:
        used = yield from approvals._consume(request_id, decision)
    except ApprovalInvalid as e:
        if e.code != "approval_expired":
            return _denied(decision, e.code, e.message)
        on_timeout = _on_timeout(guard, decision)
        if on_timeout is Effect.ALLOW:
            return (yield from _counted(guard, _timed_out(decision, Effect.ALLOW, e.message)))
        if on_timeout is Effect.HALT:
            return _timed_out(decision, Effect.HALT, e.message)
        if on_timeout is None and approvals.on_expiry == "ask":
            fresh = yield from approvals._request(decision)
            return (yield from _ask(guard, approvals, decision, fresh, approver, wait))
        return _denied(decision, e.code, e.message)
    return (yield from _counted(guard, _approved(decision, used)))


def _on_timeout(guard: Guard, decision: Decision) -> Effect | None:
    """The asking rule's ``on_timeout`` (None: the approvals' ``on_expiry`` decides)."""
    engine = getattr(guard, "engine", None)
    for rule in getattr(engine, "rules", ()):
        if rule.id == decision.rule:
            return rule.on_timeout  # type: ignore[no-any-return]
    return None


def _timed_out(decision: Decision, effect: Effect, why: str) -> Decision:
    """The decision of a call whose approval request expired unanswered, as the rule's
    ``on_timeout`` says: allowed, or the run halted."""
    text = f"{why}; nobody answered in time, and the rule says {effect.value} then"
    reason = Reason("approval_timed_out", text, decision.rule)
    message = "" if effect is Effect.ALLOW else decision_message(
        effect, decision.call.tool, decision.rule or "approvals", None, (reason,))
    return decision._replace(effect=effect, reasons=(reason, *decision.reasons),
                             message=message)


def _ask(guard: Guard, approvals: Approvals, decision: Decision, request: ApprovalRequest,
         approver: Approver | None, wait: float | None) -> Flow[Decision]:
    if approver is not None:
        try:
            answer = yield Step(ask_approver, aask_approver, (approver, request))
        except Exception as e:
            yield from _quietly(approvals._cancel(request.id))
            return _denied(decision, "approver_error",
                           f"the approver failed ({type(e).__name__}: {e}); the call was not run")
        by = answer.by or approver_name(approver)
        if isinstance(answer, Deny):
            yield from _quietly(approvals._resolve(request.id, Status.DENIED, by, answer.reason,
                                                   None))
            return _denied(decision, "approval_denied",
                           f"{by} denied it" + (f": {answer.reason}" if answer.reason else ""))
        if isinstance(answer, Approve):
            try:
                answered = yield from approvals._resolve(request.id, Status.APPROVED, by,
                                                         answer.comment, None)
            except ApprovalError as e:
                yield from _quietly(approvals._cancel(request.id))
                return _denied(decision, e.code, e.message)
            if answered.status is Status.PENDING:  # one of a quorum: the others decide
                return (yield from _ask(guard, approvals, decision, answered, None, wait))
            return (yield from _use(guard, approvals, decision, request.id, None, None))
        # Edit
        if answer.tool is not None and answer.tool != request.tool:
            text = (f"{by} tried to turn the call to '{request.tool}' into a call to "
                    f"'{answer.tool}'; an edit may change arguments, never the tool")
            yield from _quietly(approvals._resolve(request.id, Status.DENIED, by, text, None))
            return _denied(decision, "approval_edit_renames_tool", text)
        try:
            edited = yield from approvals._resolve(request.id, Status.APPROVED, by,
                                                   answer.comment, answer.args)
        except (ApprovalError, TypeError, ValueError) as e:
            yield from _quietly(approvals._cancel(request.id))
            code, text = (e.code, e.message) if isinstance(e, ApprovalError) else \
                ("approval_edit_invalid", str(e))
            return _denied(decision, code, text)
        return (yield from _run_edit(guard, approvals, decision, edited))

    if wait is not None:
        request = yield from approvals._wait(request.id, wait)
        if request.status is Status.APPROVED and request.edited_args is not None:
            return (yield from _run_edit(guard, approvals, decision, request))
        if request.status is not Status.PENDING:
            return (yield from _use(guard, approvals, decision, request.id, None, None))
    raise ApprovalPending(decision, request.id)


def _run_edit(guard: Guard, approvals: Approvals, decision: Decision,
              request: ApprovalRequest) -> Flow[Decision]:
    """Evaluates the edited call with the whole policy, then runs it on the same approval."""
    call = decision.call
    kwargs: dict[str, Any] = {
        "call_id": call.call_id, "agent": call.agent, "session": call.session,
        "principal": call.principal, "framework": call.framework,
        "context": call.context or None,
    }
    edited = yield Step(guard.check, guard.acheck, (call.tool, request.edited_args), kwargs)
    by = request.resolved_by or "the reviewer"
    if not edited.effect.allows and edited.effect is not Effect.ASK:
        # A deny or halt rule catches the edited call: it does not run, and the approval dies.
        yield from _quietly(approvals._cancel(request.id))
        note = Reason("approval_edit_refused",
                      f"{by} approved edited arguments, and the policy refused the edited call",
                      edited.rule)
        return decision._replace(
            effect=edited.effect, args=decision.args, reasons=(*edited.reasons, note),
            rule=edited.rule, source=edited.source, matched=edited.matched,
            message=edited.message)
    try:
        used = yield from approvals._consume(request.id, edited)
    except ApprovalInvalid as e:
        return _denied(decision, e.code, e.message)
    if edited.effect is Effect.ASK:
        # An allowed edit was counted by its check; an asked one counts now that it runs.
        counted = yield from _counted(guard, edited)
        if counted.effect is not edited.effect:  # refused: a budget ran out, or the store
            return decision._replace(
                effect=counted.effect, args=decision.args, reasons=counted.reasons,
                rule=counted.rule, source=counted.source, matched=counted.matched,
                message=counted.message)
    # An `ask` on the edited call is satisfied by the same reviewer's edit.
    args = edited.args if edited.effect.allows else edited.call.args
    text = f"approved by {used.resolved_by} with edited arguments" + _said(used.comment)
    return decision._replace(
        effect=Effect.MODIFY, args=args,
        reasons=(Reason("approved_with_edit", text, decision.rule), *edited.reasons),
        matched=(*decision.matched, *edited.matched),
        message=f"The call to '{call.tool}' was approved with edited arguments by "
                f"{used.resolved_by}.")


def _counted(guard: Guard, decision: Decision) -> Flow[Decision]:
    """Counts an approved call against its limits: the decision, or a refusal (the engine's
    flow, its store steps run by the same driver)."""
    engine = getattr(guard, "engine", None)
    if engine is None:  # a guard-like object without limits
        return decision
    counted: Decision = yield from engine.count_approved(decision)
    return counted


def _approved(decision: Decision, request: ApprovalRequest) -> Decision:
    text = f"approved by {request.resolved_by} (request {request.id})" + _said(request.comment)
    return decision._replace(effect=Effect.ALLOW,
                             reasons=(Reason("approved", text, decision.rule), *decision.reasons),
                             message="")


def _by_grant(decision: Decision, grant: Grant) -> Decision:
    bound = {"session": f" in session {grant.session}", "agent": f" for agent {grant.agent}"}
    text = (f"pre-approved by {grant.by} for '{grant.tool}'{bound.get(grant.scope.value, '')}"
            f" (grant {grant.id})")
    return decision._replace(effect=Effect.ALLOW,
                             reasons=(Reason("approval_remembered", text, decision.rule),
                                      *decision.reasons),
                             message="")


def _denied(decision: Decision, code: str, text: str) -> Decision:
    return decision._replace(
        effect=Effect.DENY, reasons=(Reason(code, text, decision.rule), *decision.reasons),
        message=not_approved(decision.call.tool, text))


def _denial(request: ApprovalRequest) -> str:
    return f"{request.resolved_by} denied it (request {request.id})" + _said(request.comment)


def _said(comment: str | None) -> str:
    return f": {comment}" if comment else ""


def _quietly(flow: Flow[Any]) -> Flow[None]:
    """Runs a bookkeeping flow whose failure must not change the outcome (it fails closed)."""
    try:
        yield from flow
    except Exception:  # the call is refused either way
        return
