"""What an approval is made of: the request record, the remembered grant, the call digest."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from enum import StrEnum
from functools import lru_cache
from typing import TYPE_CHECKING, Any, NamedTuple, Self

from callwarden._call import json_safe
from callwarden.analysis.globs import GlobError, check_glob, compile_glob
from callwarden.approvals._integrity import canonical, identity

if TYPE_CHECKING:
    from callwarden._decision import Decision

__all__ = ["ARGS_KEPT", "ApprovalRequest", "Grant", "GrantSource", "GrantStatus", "Scope",
           "Status", "allowlist", "call_digest", "decision_digest", "exact_call", "grant_scope",
           "kept_args"]


class Status(StrEnum):
    """Where a request stands: ``pending → approved | denied | expired | cancelled``, and an
    approved request becomes ``consumed`` when the call runs."""

    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    CONSUMED = "consumed"


class Scope(StrEnum):
    """What a remembered decision covers besides its tool pattern."""

    SESSION = "session"
    AGENT = "agent"
    TOOL = "tool"


class GrantStatus(StrEnum):
    """Whether a remembered decision still applies."""

    ACTIVE = "active"
    REVOKED = "revoked"
    EXPIRED = "expired"


def call_digest(tool: str, args: Mapping[str, Any], principal: str | None, session: str | None,
                policy: str | None) -> str:
    """Returns the sha256 of a call's typed canonical encoding: what an approval is bound to.
    Types count: approving ``{"n": "inf"}`` does not approve ``{"n": inf}``."""
    return hashlib.sha256(canonical({
        "tool": tool, "args": args, "principal": principal, "session": session,
        "policy": policy,
    })).hexdigest()


def exact_call(tool: str, args: Mapping[str, Any]) -> str:
    """The digest of a tool and its arguments, as typed: what a grant of one exact call
    covers (whoever calls it within the grant's scope)."""
    return call_digest(tool, args, None, None, None)


def decision_digest(decision: Decision) -> str:
    """The digest of the call a decision is about (the call as asked, before any rewrite)."""
    call = decision.call
    return call_digest(call.tool, call.args, call.principal, call.session, decision.policy)


class _Record:
    """JSON round trip shared by the records: ``to_dict`` and ``from_dict``."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        """Returns the record as plain JSON data."""
        return asdict(self)  # type: ignore[call-overload, no-any-return]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """Builds the record from ``to_dict``'s output; unknown keys (newer writers) are ignored."""
        names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True, slots=True)
class ApprovalRequest(_Record):
    """One call waiting for (or having had) a human's decision.

    Attributes:
        id: The request's id (what ``approve ID`` takes).
        digest: sha256 over the canonical call: tool, args, principal, session, policy version.
        tool, args, agent, principal, session: The call, as asked.
        requested_by: Who made the call (the agent, else the principal); may not approve it.
        rule, source, message: Why approval is needed: the deciding rule, where it is written,
            and its message.
        created, expires: When the request was made and when it stops being valid.
        status: A :class:`Status` value; ``expired`` is computed on read.
        resolved_by, resolved_at, comment: Who approved or denied it, when, and what they said
            (a denial's reason is its comment).
        edited_args: The arguments the reviewer approved instead, or None.
        policy: The policy version the digest includes.
        approvers: The approver allowlist when the request was made (None: anyone else).
        decision_id: The decision that asked.
        consumed_at: When the approved call ran.
        required: How many distinct people must approve it (a quorum; 1 by default).
        veto: Whether one deny denies it (else a deny counts against the quorum).
        approved_by, denied_by: Who approved and who denied it so far (with a quorum the
            request stays pending until ``required`` people approved).
        reminded_at: When approvers were last reminded of it (``remind:``).
        in_doubt: Set when the call may already have run: an earlier attempt of it started
            and recorded no outcome (what the execution journal knows of it).
    """

    id: str
    digest: str
    tool: str
    args: dict[str, Any]
    agent: str | None
    principal: str | None
    session: str | None
    requested_by: str | None
    rule: str | None
    source: str | None
    message: str
    created: float
    expires: float
    status: Status = Status.PENDING
    resolved_by: str | None = None
    resolved_at: float | None = None
    comment: str | None = None
    edited_args: dict[str, Any] | None = None
    policy: str | None = None
    approvers: list[str] | None = None
    decision_id: str | None = None
    consumed_at: float | None = None
    required: int = 1
    veto: bool = True
    approved_by: list[str] | None = None
    denied_by: list[str] | None = None
    reminded_at: float | None = None
    in_doubt: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))

    def at(self, now: float) -> ApprovalRequest:
        """Returns the request as seen at ``now``: pending or approved turns expired after
        ``expires``."""
        if self.status in (Status.PENDING, Status.APPROVED) and now > self.expires:
            return replace(self, status=Status.EXPIRED)
        return self

    @property
    def edited_digest(self) -> str | None:
        """The digest the edited call must have, or None without an edit."""
        if self.edited_args is None:
            return None
        return call_digest(self.tool, self.edited_args, self.principal, self.session, self.policy)

    @property
    def callers(self) -> frozenset[str]:
        """The identities that made the call (as :func:`identity` reads them), none of whom
        may approve it."""
        return frozenset(identity(x) for x in (self.agent, self.principal, self.requested_by)
                         if x)


@dataclass(frozen=True, slots=True)
class Grant(_Record):
    """A remembered decision: "approve and don't ask again" for a scope, until ``expires``.

    Attributes:
        id: The grant's id (what ``revoke`` takes).
        scope: A :class:`Scope` value: ``session`` and ``agent`` grants cover the tool pattern
            in that session / for that agent; ``tool`` grants cover it for every caller.
        tool: The tool name or glob (``mcp__github__*``) it covers.
        session, agent: The session or agent it is bound to (per ``scope``).
        by: Who granted it. created, expires: When it was granted and until when.
        request_id: The approval it was remembered from, if any.
        status: A :class:`GrantStatus` value; ``expired`` is computed on read.
        revoked_at, revoked_by: When it was revoked, and by whom (None when not said).
        call: For a grant of one exact call ("allow this command for this session for an
            hour"): the digest of the tool and its arguments it covers; None: any arguments.
        args: The arguments of that exact call, for people to read (None for any other grant,
            and for arguments over ``ARGS_KEPT`` bytes of JSON: every ask reads every grant).
    """

    id: str
    scope: Scope
    tool: str
    session: str | None
    agent: str | None
    by: str
    created: float
    expires: float
    request_id: str | None = None
    status: GrantStatus = GrantStatus.ACTIVE
    revoked_at: float | None = None
    call: str | None = None
    revoked_by: str | None = None
    args: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "scope", Scope(self.scope))
        object.__setattr__(self, "status", GrantStatus(self.status))

    def at(self, now: float) -> Grant:
        """Returns the grant as seen at ``now``: active turns expired after ``expires``."""
        if self.status is GrantStatus.ACTIVE and now > self.expires:
            return replace(self, status=GrantStatus.EXPIRED)
        return self

    def covers_tool(self, tool: str) -> bool:
        """Whether the grant's tool name or glob names ``tool`` (whatever its status)."""
        return _tool_glob(self.tool)(tool)

    def covers(self, decision: Decision) -> bool:
        """Whether this (active) grant pre-approves the call a decision is about."""
        call = decision.call
        if self.status is not GrantStatus.ACTIVE or not self.covers_tool(call.tool):
            return False
        if self.call is not None and self.call != exact_call(call.tool, call.args):
            return False
        if self.scope is Scope.SESSION:
            return call.session is not None and call.session == self.session
        if self.scope is Scope.AGENT:
            return call.agent is not None and call.agent == self.agent
        return True


ARGS_KEPT = 8192  # bytes of JSON: the most of an exact call's arguments a grant keeps to show


def kept_args(args: Any) -> dict[str, Any] | None:
    """An exact call's arguments as a grant keeps them to show (JSON data), or None past
    ``ARGS_KEPT`` bytes."""
    data = json_safe(args)
    if not isinstance(data, dict):
        return None
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return None if len(text.encode("utf-8", "surrogatepass")) > ARGS_KEPT else data


def allowlist(approvers: Sequence[str] | None) -> list[str] | None:
    """Validates an approver allowlist (None: anyone but the caller)."""
    if approvers is None:
        return None
    if isinstance(approvers, str):
        approvers = [approvers]
    out = list(approvers)
    if not all(isinstance(a, str) and a for a in out):
        raise ValueError("approvers must be non-empty strings")
    group = next((a for a in out if a.strip().startswith("group:")), None)
    if group is not None:  # a name nobody has: nobody could approve, and nobody would know
        raise ValueError(f"{group!r} names a group: a policy's approvals: {{groups: ...}} "
                         "expands it; here, name the people")
    return out


def grant_scope(value: str) -> Scope:
    """A grant's :class:`Scope` from its name (ValueError for any other)."""
    try:
        return Scope(value)
    except ValueError:
        raise ValueError(f"a grant's scope is session, agent or tool, not {value!r}") from None


class GrantSource(NamedTuple):
    """What a grant is remembered from: an approved request, or an ``ask`` decision."""

    tool: str
    session: str | None
    agent: str | None
    callers: frozenset[str]
    approvers: Sequence[str] | None
    request_id: str | None
    args: Any

    @classmethod
    def of_request(cls, request: ApprovalRequest) -> GrantSource:
        args = request.edited_args if request.edited_args is not None else request.args
        return cls(request.tool, request.session, request.agent, request.callers,
                   request.approvers, request.id, args)

    @classmethod
    def of_decision(cls, decision: Decision) -> GrantSource:
        call = decision.call
        callers = frozenset(identity(x) for x in (call.agent, call.principal) if x)
        return cls(call.tool, call.session, call.agent, callers, None, None, call.args)

    def check_grant(self, scope: Scope, tool: str | None, exact: bool,
                    required: int = 1) -> None:
        """Raises ValueError for a grant of this call that could not cover anything, or that
        would let calls a quorum (``required`` people) must approve run on one person's say."""
        if required > 1:
            raise ValueError(f"each call needs {required} people's approval (approvals: "
                             f"required: {required}); a standing grant would let the calls "
                             "after this one run without them: approve each call")
        if tool is not None:
            check_glob(tool)  # a grant whose tool glob cannot be read would grant nothing
        if exact and tool is not None and tool != self.tool:
            raise ValueError("a grant of one exact call covers that call's own tool")
        if scope is Scope.SESSION and self.session is None:
            raise ValueError("a session-scoped grant needs a call made in a session")
        if scope is Scope.AGENT and self.agent is None:
            raise ValueError("an agent-scoped grant needs a call made by a named agent")


@lru_cache(maxsize=256)
def _tool_glob(pattern: str) -> Callable[[str], bool]:
    """The test of a grant's tool name or glob; a glob that cannot be read grants nothing."""
    try:
        return compile_glob(pattern)
    except GlobError:
        return _nothing


def _nothing(_: str) -> bool:
    return False
