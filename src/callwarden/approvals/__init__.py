"""Human approval that cannot be gamed: call-bound, expiring, single-use, and kept in a store.

An ``ask`` decision becomes an :class:`ApprovalRequest` bound to the exact call (a digest of
tool, args, principal, session and policy version). A reviewer — a callback, the person at the
terminal, or anyone running ``callwarden approvals approve ID`` against the same store —
approves, denies or edits it; an approved request runs its call exactly once::

    approvals = Approvals(open_store("sqlite:///state.db"), ttl=1800, approvers=["alice"])
    decision = guard.check("deploy", {"env": "prod"}, agent="bot")
    decision = callwarden.resolve_ask(guard, decision, approvals=approvals,
                                      approver=TerminalApprover())
"""

from callwarden.approvals._approvals import Approvals
from callwarden.approvals._approvers import (
    Answer,
    Approve,
    Approver,
    Deny,
    Edit,
    TerminalApprover,
)
from callwarden.approvals._config import ApprovalSettings, parse_config
from callwarden.approvals._pins import ToolPins, definition_digest
from callwarden.approvals._records import (
    ApprovalRequest,
    Grant,
    GrantStatus,
    Scope,
    Status,
    call_digest,
    decision_digest,
)
from callwarden.exceptions import (
    ApprovalError,
    ApprovalInvalid,
    ApprovalPending,
    ApprovalRefused,
)

__all__ = [
    "Answer",
    "ApprovalError",
    "ApprovalInvalid",
    "ApprovalPending",
    "ApprovalRefused",
    "ApprovalRequest",
    "ApprovalSettings",
    "Approvals",
    "Approve",
    "Approver",
    "Deny",
    "Edit",
    "Grant",
    "GrantStatus",
    "Scope",
    "Status",
    "TerminalApprover",
    "ToolPins",
    "call_digest",
    "decision_digest",
    "definition_digest",
    "parse_config",
]
