"""The protocols a user implements to extend callwarden: policies, approvers and audit sinks.

Each is structural: any object of the right shape works, no base class needed::

    class NoFridayDeploys:                      # a Policy
        def evaluate(self, call, ctx):
            ...

    def approve_small_refunds(request):         # an Approver
        return request.args.get("amount", 0) < 50

    class ShipToSiem:                           # a Sink
        def write(self, event): ...

A rule condition (``@register_condition``) follows :class:`callwarden.conditions.Matcher`.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from callwarden._decision import Decision, Verdict
    from callwarden.approvals import ApprovalRequest, Approve, Deny, Edit

__all__ = ["Approver", "AsyncPolicy", "Policy", "Sink"]


@runtime_checkable
class Policy(Protocol):
    """Anything with ``evaluate(call, ctx) -> Verdict | None``; no base class needed.

    ``ctx`` is a ``Subject``: the call's tool profile and a per-call memo. A policy may also (or
    instead) define ``async def aevaluate(call, ctx)``; ``acheck`` prefers it. Optional
    attributes: ``phase = "mutate"`` to rewrite arguments before validation, ``isolated = False``
    to run inline instead of on a worker thread with a deadline (only for fast, trusted code).
    """

    def evaluate(self, call: Any, ctx: Any, /) -> Verdict | Decision | None: ...


class AsyncPolicy(Protocol):
    """A policy that only has the async form."""

    def aevaluate(self, call: Any, ctx: Any, /) -> Awaitable[Verdict | Decision | None]: ...


class Approver(Protocol):
    """Answers an approval request now: a function (sync or async) or a callable object such
    as ``TerminalApprover``. True approves, False denies; ``Approve``, ``Deny`` and ``Edit``
    say who answered, why, or with which edited arguments."""

    def __call__(self, request: ApprovalRequest, /) -> (
            Approve | Deny | Edit | bool | Awaitable[Approve | Deny | Edit | bool]): ...


@runtime_checkable
class Sink(Protocol):
    """Receives audit events. ``flush()`` and ``close()`` are optional."""

    def write(self, event: dict[str, Any]) -> None:
        """Records one event; raises on failure (the auditor counts or reports it)."""
