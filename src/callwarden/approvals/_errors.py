"""The errors of the approvals package.

The hierarchy (``ApprovalPending`` extends the core ``ApprovalRequired``, so handlers written for
it keep working)::

    CallwardenError
    ├── ApprovalError            an approval operation was refused
    │   ├── ApprovalInvalid      the approval cannot be used: not found, expired, not approved,
    │   │                        already used, denied, or for another call (``code`` says which)
    │   └── ApprovalRefused      this person may not resolve this request (self-approval, not an
    │                            approver)
    └── ToolDenied
        └── ApprovalRequired
            └── ApprovalPending  the call waits for a human; resume with ``request_id``
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from callwarden.exceptions import ApprovalRequired, CallwardenError

if TYPE_CHECKING:
    from callwarden._decision import Decision

__all__ = ["ApprovalError", "ApprovalInvalid", "ApprovalPending", "ApprovalRefused"]


class ApprovalError(CallwardenError):
    """An approval operation was refused. ``code`` is stable, ``message`` says why."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(f"{message} [{code}]")


class ApprovalInvalid(ApprovalError):
    """The approval cannot be used or resolved in its current state.

    Codes: ``approval_not_found``, ``approval_expired``, ``approval_not_approved``,
    ``approval_already_used``, ``approval_mismatch``, ``approval_denied``,
    ``approval_already_resolved``, ``grant_not_found``.
    """


class ApprovalRefused(ApprovalError):
    """This person may not resolve this request.

    Codes: ``self_approval`` (the agent or principal that made the call), ``not_an_approver``
    (outside the allowlist), ``approver_required`` (no name given).
    """


class ApprovalPending(ApprovalRequired):
    """The call waits for a human's decision; ``request_id`` names the request to resume with.

    A framework pauses the run, and later calls the guard again with
    ``approval_id=request_id``: the exact approved call then runs once.
    """

    def __init__(self, decision: Decision, request_id: str) -> None:
        super().__init__(decision)
        self.request_id = request_id
        self.args = (f"{decision.message} Approval request {request_id} is pending; resume "
                     f"with approval_id={request_id!r} once it is approved.",)
