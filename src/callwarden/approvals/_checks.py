"""Why a request cannot be answered or used, worded once: the refusals ``Approvals`` raises
when a request is resolved already, expired, not approved, used, or for another call."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from callwarden.approvals._policy import quorum_text
from callwarden.approvals._records import ApprovalRequest, Status, decision_digest
from callwarden.exceptions import ApprovalInvalid

if TYPE_CHECKING:
    from callwarden._decision import Decision

__all__ = ["check_same_call", "check_usable", "expired_text", "iso", "not_pending"]


def not_pending(request: ApprovalRequest) -> ApprovalInvalid:
    if request.status is Status.EXPIRED:
        return ApprovalInvalid("approval_expired", expired_text(request))
    who = f" by {request.resolved_by}" if request.resolved_by else ""
    return ApprovalInvalid("approval_already_resolved",
                           f"request {request.id} was already {request.status.value}{who}")


def expired_text(request: ApprovalRequest) -> str:
    return (f"approval request {request.id} expired (it was valid for "
            f"{request.expires - request.created:g} s, until {iso(request.expires)})")


def iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def check_usable(request: ApprovalRequest) -> None:
    status = request.status
    if status is Status.APPROVED:
        return
    if status is Status.EXPIRED:
        raise ApprovalInvalid("approval_expired", expired_text(request))
    if status is Status.CONSUMED:
        raise ApprovalInvalid("approval_already_used",
                              f"approval {request.id} was already used; an approval runs one call "
                              "once")
    if status is Status.DENIED:
        why = f": {request.comment}" if request.comment else ""
        raise ApprovalInvalid("approval_denied",
                              f"request {request.id} was denied by {request.resolved_by}{why}")
    if status is Status.CANCELLED:
        raise ApprovalInvalid("approval_not_approved", f"request {request.id} was cancelled")
    if request.approved_by:
        raise ApprovalInvalid("approval_not_approved",
                              f"request {request.id} is still pending: {quorum_text(request)}")
    raise ApprovalInvalid("approval_not_approved",
                          f"request {request.id} is still pending; nobody has approved it yet")


def check_same_call(request: ApprovalRequest, decision: Decision) -> None:
    digest = decision_digest(decision)
    expected = request.edited_digest or request.digest
    if digest == expected:
        return
    call = decision.call
    if call.tool != request.tool:
        what = f"the tool is {call.tool!r}, not {request.tool!r}"
    elif request.edited_args is not None and digest == request.digest:
        what = "the reviewer approved edited arguments, not the original ones"
    elif (call.principal, call.session) != (request.principal, request.session):
        what = "it comes from another principal or session"
    elif decision.policy != request.policy:
        what = f"the policy changed since it was approved ({request.policy} → {decision.policy})"
    else:
        what = "the arguments differ from the approved ones"
    raise ApprovalInvalid("approval_mismatch",
                          f"approval {request.id} is for another call: {what}")
