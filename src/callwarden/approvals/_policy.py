"""The approval policy beyond who may approve: how many people must (a quorum, and whether one
deny vetoes), how long a grant may last, and who is reminded of requests left waiting."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from callwarden.approvals._integrity import identity
from callwarden.approvals._records import ApprovalRequest

__all__ = ["MAX_GRANT_TTL", "grant_ttl", "quorum_text", "reachable", "reminder_options"]

# A grant is a person's standing decision: one that outlives a year is a rule, and belongs in
# the policy file, where it is reviewed.
MAX_GRANT_TTL = 366 * 86400.0


def quorum_text(request: ApprovalRequest) -> str | None:
    """``1 of the 2 approvals it needs`` for a request under a quorum; None otherwise."""
    if request.required <= 1:
        return None
    return (f"it has {len(request.approved_by or ())} of the {request.required} approvals it "
            "needs")


def reachable(request: ApprovalRequest, denied: Sequence[str]) -> bool:
    """Whether the quorum can still be reached: always, unless an approver allowlist leaves
    too few people who have neither denied nor made the call."""
    if request.approvers is None:
        return True
    gone = {identity(n) for n in (*denied, *(request.approved_by or ()))} | request.callers
    left = {identity(n) for n in request.approvers} - gone
    return len(request.approved_by or ()) + len(left) >= request.required


def grant_ttl(ttl: object) -> float:
    """The seconds a grant lasts, checked: a number over 0, a year at most.

    Raises:
        ValueError: anything else (a grant that ended at once, or never, is not one).
    """
    # The range test refuses NaN and infinity too (and compares a huge int exactly).
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 < ttl <= MAX_GRANT_TTL:
        raise ValueError(f"a grant lasts a number of seconds over 0 and at most a year "
                         f"({MAX_GRANT_TTL:g}), not {ttl!r}")
    return float(ttl)


def reminder_options(settings: Any, load: Callable[[str], Any]) -> dict[str, Any]:
    """The ``Approvals`` arguments of a policy's ``remind:`` (none without one); ``load``
    imports its ``module:function`` (the caller's: this layer imports no user code).

    Raises:
        ImportError: the reminder function cannot be found.
    """
    if settings.remind is None:
        return {}
    after, every, call = settings.remind
    return {"reminder": load(call), "remind_after": after, "remind_every": every}
