"""``Approvals``: requests and remembered grants kept in a state store, sync and async twins.

Every operation is a generator flow (see ``_steps``) driven by a thin sync method and its
``a``-prefixed async twin, so the rules — who may approve, when a request expires, when an
approval may be used — are written once. Every transition is a compare-and-set on the record,
so of two people resolving the same request at once, exactly one wins.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import json
import os
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from callwarden._call import json_safe
from callwarden._decision import Effect
from callwarden._flow import Flow, Step, adrive, drive, sleep
from callwarden.approvals._checks import check_same_call, check_usable, iso, not_pending
from callwarden.approvals._integrity import Seal, identity, load_key, process_key
from callwarden.approvals._pins import ToolPins
from callwarden.approvals._policy import grant_ttl, quorum_text, reachable
from callwarden.approvals._records import (
    ApprovalRequest,
    Grant,
    GrantSource,
    GrantStatus,
    Scope,
    Status,
    allowlist,
    decision_digest,
    exact_call,
    grant_scope,
    kept_args,
)
from callwarden.exceptions import ApprovalInvalid, ApprovalRefused

if TYPE_CHECKING:
    from callwarden._decision import Decision
    from callwarden.state import RecordStore, StoredValue

__all__ = ["Approvals"]

_REQUESTS = "req:"
_BY_CALL = "call:"
_BY_DIGEST = "digest:"
# A refused use of an approval, recorded as this audit action.
_REFUSAL_ACTIONS = {"approval_expired": "expired", "approval_mismatch": "refused",
                    "approval_already_used": "refused", "approval_denied": "refused",
                    "approval_not_approved": "refused"}
# All grants live in one record: the ask path reads them in one round trip, never a scan.
_GRANTS = "grants"
_ON_EXPIRY = ("deny", "ask")


class Approvals:
    """Approval requests and remembered decisions, kept in a state store.

    Args:
        store: Where requests live; SQLite or Redis let them survive a restart and be resolved
            from another process (``callwarden approvals approve ID``).
        ttl: Seconds a request stays valid, from its creation.
        approvers: Who may approve (an allowlist); None: anyone but the agent or principal that
            made the call. Nobody may ever approve their own call.
        on_expiry: ``deny`` (an expired approval denies the call) or ``ask`` (a new request is
            made).
        clock: The wall clock (tests inject one).
        namespace: Key prefix of the records in the store.
        retention: Seconds a record stays in the store after it expired, for review.
        auditor: A ``callwarden.audit.Auditor`` recording every transition as an ``approval``
            event (a guard's ``approvals`` use the guard's auditor).
        key: The approvals key that seals every record (bytes, or the path of a key file).
            Default: for a ``MemoryStore``, a key of this process; for any store another
            process can reach, the key file ``~/.config/callwarden/approvals.key`` (or
            ``$CALLWARDEN_APPROVALS_KEY_FILE``), made on first use. Whoever holds the key can
            approve: keep it where an agent's tools cannot read it. A record without a good
            seal (written to the store by anything else, or edited there) is ignored.

    Raises:
        ConfigError: the key file cannot be read or made, or others can read it.
    """

    def __init__(
        self,
        store: RecordStore,
        *,
        ttl: float = 3600,
        approvers: Sequence[str] | None = None,
        on_expiry: str = "deny",
        clock: Callable[[], float] = time.time,
        namespace: str = "approvals:",
        retention: float = 7 * 86400,
        auditor: Any = None,
        key: bytes | str | os.PathLike[str] | None = None,
        required: int = 1,
        veto: bool = True,
        max_open: Sequence[tuple[str, int]] = (),
        reminder: Callable[[ApprovalRequest], Any] | None = None,
        remind_after: float = 600.0,
        remind_every: float | None = None,
    ) -> None:
        if not isinstance(ttl, int | float) or isinstance(ttl, bool) or not ttl > 0:
            raise ValueError(f"ttl must be a number of seconds > 0, got {ttl!r}")
        if on_expiry not in _ON_EXPIRY:
            raise ValueError(f"on_expiry must be 'deny' or 'ask', got {on_expiry!r}")
        if isinstance(required, bool) or not isinstance(required, int) or required < 1:
            raise ValueError(f"required must be a whole number of 1 or more, got {required!r}")
        #: How many distinct people must approve a request; whether one deny denies it.
        self.required, self.veto = required, veto
        #: (session | agent, N): at most N requests waiting at once per session / agent.
        self.max_open = tuple(max_open)
        #: Called for a request left waiting ``remind_after`` seconds (again every
        #: ``remind_every``, if given) by :meth:`remind`.
        self.reminder, self.remind_after, self.remind_every = (
            reminder, remind_after, remind_every)
        self.store = store
        self.ttl = float(ttl)
        self.approvers = allowlist(approvers)
        self.on_expiry = on_expiry
        self.clock = clock
        # Where transitions are recorded (``approval`` audit events); a guard sets its own.
        self.auditor: Any = auditor
        self.namespace = namespace
        self.retention = retention
        self._seal = Seal(_key_for(store, key))

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None, store: RecordStore, *,
                    clock: Callable[[], float] = time.time) -> Approvals:
        """Builds it from a policy file's ``approvals:`` section (its ``remind:`` function is
        imported by the caller that may run user code: ``Guard``, the CLI).

        Raises:
            ConfigError: naming the key at fault and how to fix it.
        """
        from callwarden.approvals._config import parse_config

        settings = parse_config(config)
        return cls(store, ttl=settings.ttl, approvers=settings.approvers,
                   on_expiry=settings.on_expiry, clock=clock, key=settings.key_file,
                   required=settings.required, veto=settings.veto, max_open=settings.max_open)

    @property
    def pins(self) -> ToolPins:
        """The pinned definitions of MCP servers' tools, in this store, under this key."""
        return ToolPins(self)

    def __repr__(self) -> str:
        return (f"Approvals({type(self.store).__name__}, ttl={self.ttl:g}, "
                f"approvers={self.approvers!r}, on_expiry={self.on_expiry!r})")

    # -- requests: public twins ---------------------------------------------------------

    def request(self, decision: Decision) -> ApprovalRequest:
        """Records a pending request for an ``ask`` decision and returns it."""
        return drive(self._request(decision))

    async def arequest(self, decision: Decision) -> ApprovalRequest:
        """Async twin of :meth:`request`."""
        return await adrive(self._request(decision))

    def get(self, request_id: str) -> ApprovalRequest:
        """Returns a request as it stands now.

        Raises:
            ApprovalInvalid: ``approval_not_found``.
        """
        return drive(self._get(request_id))

    async def aget(self, request_id: str) -> ApprovalRequest:
        """Async twin of :meth:`get`."""
        return await adrive(self._get(request_id))

    def list(self, status: str | None = None) -> builtins.list[ApprovalRequest]:
        """Returns the requests (with that status, if given), oldest first."""
        return drive(self._list(status))

    async def alist(self, status: str | None = None) -> builtins.list[ApprovalRequest]:
        """Async twin of :meth:`list`."""
        return await adrive(self._list(status))

    def approve(self, request_id: str, *, by: str, edit: Mapping[str, Any] | None = None,
                comment: str | None = None) -> ApprovalRequest:
        """Approves a pending request, optionally with edited arguments (a new call that the
        policy evaluates again before it runs).

        Raises:
            ApprovalRefused: ``by`` made the call, or is not an approver.
            ApprovalInvalid: not found, expired, or already resolved.
        """
        return drive(self._resolve(request_id, Status.APPROVED, by, comment, edit))

    async def aapprove(self, request_id: str, *, by: str, edit: Mapping[str, Any] | None = None,
                       comment: str | None = None) -> ApprovalRequest:
        """Async twin of :meth:`approve`."""
        return await adrive(self._resolve(request_id, Status.APPROVED, by, comment, edit))

    def deny(self, request_id: str, *, by: str, reason: str | None = None) -> ApprovalRequest:
        """Denies a pending request; ``reason`` is shown to the agent.

        Raises:
            ApprovalRefused: ``by`` is not an approver.
            ApprovalInvalid: not found, expired, or already resolved.
        """
        return drive(self._resolve(request_id, Status.DENIED, by, reason, None))

    async def adeny(self, request_id: str, *, by: str,
                    reason: str | None = None) -> ApprovalRequest:
        """Async twin of :meth:`deny`."""
        return await adrive(self._resolve(request_id, Status.DENIED, by, reason, None))

    def cancel(self, request_id: str) -> ApprovalRequest:
        """Withdraws a pending (or approved, unused) request.

        Raises:
            ApprovalInvalid: not found, or already denied, used, expired or cancelled.
        """
        return drive(self._cancel(request_id))

    async def acancel(self, request_id: str) -> ApprovalRequest:
        """Async twin of :meth:`cancel`."""
        return await adrive(self._cancel(request_id))

    def consume(self, request_id: str, decision: Decision) -> ApprovalRequest:
        """Uses an approval for the call ``decision`` is about: once, and only for that call.

        The call must have the approved digest (tool, args, principal, session, policy
        version), or the edited call's digest when the reviewer edited the arguments.

        Raises:
            ApprovalInvalid: ``approval_not_found``, ``approval_expired``,
                ``approval_not_approved``, ``approval_already_used``, ``approval_mismatch``
                or ``approval_denied``.
        """
        return drive(self._consume(request_id, decision))

    async def aconsume(self, request_id: str, decision: Decision) -> ApprovalRequest:
        """Async twin of :meth:`consume`."""
        return await adrive(self._consume(request_id, decision))

    def wait(self, request_id: str, timeout: float) -> ApprovalRequest:
        """Polls the store (with backoff) until the request is resolved or ``timeout`` seconds
        have passed; returns it as it then stands (still pending on a timeout)."""
        return drive(self._wait(request_id, timeout))

    async def await_(self, request_id: str, timeout: float) -> ApprovalRequest:
        """Async twin of :meth:`wait` (``await`` is a keyword); never blocks the event loop."""
        return await adrive(self._wait(request_id, timeout))

    # -- remembered decisions: public twins ---------------------------------------------

    def remember(self, source: str | Decision, *, scope: str, by: str,
                 ttl: float | None = None, tool: str | None = None,
                 exact: bool = False) -> Grant:
        """Remembers an approval for a scope: later ``ask`` calls it covers are allowed.

        Args:
            source: An approved (or used) request's id, or an ``ask`` decision.
            scope: ``session`` (this tool in this session), ``agent`` (this tool for this
                agent) or ``tool`` (this tool for every caller).
            by: Who grants it; the same rules as for approving apply.
            ttl: Seconds it lasts, over 0 and at most a year (default: the request ttl).
            tool: A tool name or glob to cover instead of the call's tool.
            exact: Cover only this exact call (the tool with these arguments; with an edit,
                the edited ones), not every call of the tool.

        Raises:
            ApprovalRefused: ``by`` made the call, or is not an approver.
            ApprovalInvalid: the request is not found or was not approved.
            ValueError: an unknown scope, a ttl out of range, or a scope that needs a session
                or agent the call does not have.
        """
        return drive(self._remember(source, scope, by, ttl, tool, exact))

    async def aremember(self, source: str | Decision, *, scope: str, by: str,
                        ttl: float | None = None, tool: str | None = None,
                        exact: bool = False) -> Grant:
        """Async twin of :meth:`remember`."""
        return await adrive(self._remember(source, scope, by, ttl, tool, exact))

    def approve_and_remember(self, request_id: str, *, scope: str, by: str,
                             ttl: float | None = None, exact: bool = False,
                             edit: Mapping[str, Any] | None = None, comment: str | None = None
                             ) -> tuple[ApprovalRequest, Grant | None]:
        """Approves a pending request and remembers it ("approve, and don't ask again"), the
        grant checked before the approval is given (:meth:`approve`, then :meth:`remember`).

        Returns the request and its grant; the grant is None while a quorum still waits for
        others (the approval that completes it may remember it).

        Raises:
            ApprovalRefused, ApprovalInvalid: as :meth:`approve` and :meth:`remember`.
            ValueError: the grant could not be made (as :meth:`remember`); nothing approved.
        """
        return drive(self._approve_remembering(request_id, scope, by, ttl, exact, edit, comment))

    async def aapprove_and_remember(
        self, request_id: str, *, scope: str, by: str, ttl: float | None = None,
        exact: bool = False, edit: Mapping[str, Any] | None = None, comment: str | None = None
    ) -> tuple[ApprovalRequest, Grant | None]:
        """Async twin of :meth:`approve_and_remember`."""
        return await adrive(self._approve_remembering(request_id, scope, by, ttl, exact, edit,
                                                      comment))

    def granted(self, decision: Decision) -> Grant | None:
        """Returns an active grant that pre-approves this ``ask`` decision, or None."""
        return drive(self._granted(decision))

    async def agranted(self, decision: Decision) -> Grant | None:
        """Async twin of :meth:`granted`."""
        return await adrive(self._granted(decision))

    def revoke(self, grant_id: str, *, by: str | None = None) -> Grant:
        """Revokes an active grant; the record stays, marked revoked (by ``by``, if given).

        Raises:
            ApprovalInvalid: ``grant_not_found``, ``grant_already_revoked`` or
                ``grant_expired``.
        """
        return drive(self._revoke(grant_id, by))

    async def arevoke(self, grant_id: str, *, by: str | None = None) -> Grant:
        """Async twin of :meth:`revoke`."""
        return await adrive(self._revoke(grant_id, by))

    def remind(self) -> builtins.list[ApprovalRequest]:
        """Calls the reminder for each request waiting longer than ``remind_after`` (and not
        reminded in the last ``remind_every`` seconds, or ever when that is None); returns
        them. A reminder that raises is skipped (the next run tries again): telling people
        never decides a call. Run it from cron (``callwarden approvals remind``);
        ``callwarden serve`` runs it every minute."""
        return drive(self._remind())

    async def aremind(self) -> builtins.list[ApprovalRequest]:
        """Async twin of :meth:`remind` (the reminder itself is called as it is)."""
        return await adrive(self._remind())

    def grants(self, *, include_inactive: bool = False) -> builtins.list[Grant]:
        """Returns the grants, oldest first (active ones only unless ``include_inactive``)."""
        return drive(self._grants(include_inactive))

    async def agrants(self, *, include_inactive: bool = False) -> builtins.list[Grant]:
        """Async twin of :meth:`grants`."""
        return await adrive(self._grants(include_inactive))

    # -- store steps --------------------------------------------------------------------

    def _key(self, kind: str, ident: str) -> str:
        return f"{self.namespace}{kind}{ident}"

    def _read(self, key: str) -> Step:
        return Step(self.store.get, self.store.aget, (key,))

    def _cas(self, key: str, version: int | None, value: dict[str, Any], expires: float) -> Step:
        ttl = max(expires - self.clock(), 0.0) + self.retention
        return Step(self.store.compare_and_set, self.store.acompare_and_set,
                    (key, version, self._seal.sealed(key, value)), {"ttl": ttl})

    def _opened(self, found: StoredValue | None) -> dict[str, Any] | None:
        """A stored record's value when its seal is good; None when absent or not sealed by
        this key (forged, edited, or copied from another record)."""
        return None if found is None else self._seal.opened(found.key, found.value)

    def _scan(self, kind: str) -> Step:
        return Step(self.store.scan, self.store.ascan, (self.namespace + kind,))

    def _emit(self, action: str, record: ApprovalRequest | Grant, decision_id: str | None = None,
              detail: str | None = None) -> None:
        """Records a transition in the audit log (``AuditError`` only when audit is required)."""
        if self.auditor is not None:
            self.auditor.approval(action, record, decision_id=decision_id, detail=detail)

    # -- request flows ------------------------------------------------------------------

    def _request(self, decision: Decision) -> Flow[ApprovalRequest]:
        """Creates the request for an ``ask``; the same framework call asked again gets the same
        pending request (a LangGraph node re-runs after an interrupt, an SDK re-checks on resume).
        """
        if decision.effect is not Effect.ASK:
            raise ValueError(f"only an 'ask' decision needs approval, not {decision.effect.value!r}")
        call = decision.call
        if call.call_id == decision.decision_id:  # no call id from the framework: always new
            return (yield from self._new_request(decision))
        index = self._key(_BY_CALL, _call_key(decision_digest(decision), call.call_id))
        found = yield self._read(index)
        pointer = self._opened(found)
        if pointer is not None:
            try:
                known = yield from self._get(pointer.get("id", ""))
            except ApprovalInvalid:
                known = None
            # A call now in doubt needs a request that says so (engine/journal.py).
            if known is not None and known.status is Status.PENDING and \
                    (known.in_doubt or not decision.in_doubt):
                return known
        request = yield from self._new_request(decision)
        yield self._cas(index, None if found is None else found.version, {"id": request.id},
                        request.expires)
        return request

    def _latest(self, decision: Decision) -> Flow[ApprovalRequest | None]:
        """The latest request made for this call (same digest: tool, arguments, principal,
        session and policy), while it is within its validity window; None otherwise.

        A retry of the same call (a new framework call id, a new model turn) finds it: a
        pending request is asked again, an approved one runs the call once, a denied one
        gives the person's answer instead of asking again.
        """
        found = yield self._read(self._key(_BY_DIGEST, decision_digest(decision)))
        pointer = self._opened(found)
        if pointer is None:
            return None
        try:
            request = yield from self._get(pointer.get("id", ""))
        except ApprovalInvalid:
            return None
        if request.digest != decision_digest(decision) or self.clock() > request.expires:
            return None
        return request

    def _new_request(self, decision: Decision) -> Flow[ApprovalRequest]:
        call = decision.call
        if self.max_open:
            yield from self._check_open(decision)
        now = self.clock()
        while True:
            request = ApprovalRequest(
                id=secrets.token_hex(8), digest=decision_digest(decision), tool=call.tool,
                args=json_safe(call.args), agent=call.agent, principal=call.principal,
                session=call.session, requested_by=call.agent or call.principal,
                rule=decision.rule, source=decision.source, message=decision.message,
                created=now, expires=now + self.ttl, policy=decision.policy,
                approvers=self.approvers, decision_id=decision.decision_id,
                required=self.required, veto=self.veto,
                in_doubt=next((r.message for r in decision.reasons if r.code == "in_doubt"),
                              None),
            )
            created = yield self._cas(self._key(_REQUESTS, request.id), None,
                                      request.to_dict(), request.expires)
            if created:  # else an id collision: draw another
                self._emit("requested", request, decision.decision_id)
                yield from self._index_digest(request)
                return request

    def _remind(self) -> Flow[builtins.list[ApprovalRequest]]:
        if self.reminder is None:
            return []
        now = self.clock()
        due = [r for r in (yield from self._list(Status.PENDING.value))
               if now - r.created >= self.remind_after and (
                   r.reminded_at is None if self.remind_every is None
                   else r.reminded_at is None or now - r.reminded_at >= self.remind_every)]
        reminded = []
        for request in due:
            with contextlib.suppress(Exception):
                self.reminder(request)
                marked = yield from self._mark_reminded(request.id, now)
                if marked is not None:
                    reminded.append(marked)
        return reminded

    def _mark_reminded(self, request_id: str, now: float) -> Flow[ApprovalRequest | None]:
        while True:
            request, found = yield from self._load(request_id)
            if request.status is not Status.PENDING:
                return None
            updated = replace(request, reminded_at=now)
            if (yield self._cas(found.key, found.version, updated.to_dict(), request.expires)):
                return updated

    def _check_open(self, decision: Decision) -> Flow[None]:
        """Refuses a new request past a ``max_open`` cap: a person asked about more calls than
        they can weigh approves without reading (approval fatigue)."""
        call = decision.call
        waiting = yield from self._list(Status.PENDING.value)
        for field, cap in self.max_open:
            value = getattr(call, field)
            if value is None:
                continue
            open_now = sum(1 for r in waiting if getattr(r, field) == value)
            if open_now >= cap:
                raise ApprovalRefused(
                    "approval_cap",
                    f"{open_now} calls of this {field} are already waiting for a person's "
                    f"approval (at most {cap} at once), so this one is not asked: wait for "
                    "the answers, or do without it")

    def _index_digest(self, request: ApprovalRequest) -> Flow[None]:
        """Points the call's digest at its newest request (see :meth:`_latest`)."""
        key = self._key(_BY_DIGEST, request.digest)
        for _ in range(3):  # a concurrent request for the same call may win: that is fine
            found = yield self._read(key)
            if (yield self._cas(key, None if found is None else found.version,
                                {"id": request.id}, request.expires)):
                return

    def _load(self, request_id: str) -> Flow[tuple[ApprovalRequest, StoredValue]]:
        if not isinstance(request_id, str) or not request_id:
            raise ApprovalInvalid("approval_not_found", f"no approval request {request_id!r}")
        found = yield self._read(self._key(_REQUESTS, request_id))
        if found is None:
            raise ApprovalInvalid(
                "approval_not_found",
                f"no approval request {request_id!r} (it never existed, or its record expired)")
        value = self._opened(found)
        if value is None:
            raise ApprovalInvalid(
                "approval_forged",
                f"approval request {request_id!r} fails its integrity check: it was written or "
                "changed without the approvals key, so it counts for nothing")
        return ApprovalRequest.from_dict(value).at(self.clock()), found

    def _get(self, request_id: str) -> Flow[ApprovalRequest]:
        request, _ = yield from self._load(request_id)
        return request

    def _list(self, status: str | None) -> Flow[builtins.list[ApprovalRequest]]:
        wanted = None if status is None else Status(status)
        found = yield self._scan(_REQUESTS)
        now = self.clock()
        # Records without a good seal are not requests: they are left out.
        requests = [ApprovalRequest.from_dict(value).at(now) for v in found
                    if (value := self._opened(v)) is not None]
        return sorted((r for r in requests if wanted is None or r.status is wanted),
                      key=lambda r: (r.created, r.id))

    def _check_approver(self, callers: frozenset[str], recorded: Sequence[str] | None,
                        by: str) -> None:
        who = identity(by) if isinstance(by, str) else ""
        if not who:
            raise ApprovalRefused("approver_required", "say who approves (by='name')")
        # Names are compared as people read them (case, spacing, invisible and look-alike
        # characters aside): AGENT-1 or agent-1 with a Cyrillic a is the agent-1 that made the call.
        if who in callers:
            raise ApprovalRefused(
                "self_approval",
                f"{by!r} made this call and cannot approve it; another person must")
        for names in (self.approvers, recorded):
            if names is not None and who not in {identity(n) for n in names}:
                raise ApprovalRefused(
                    "not_an_approver",
                    f"{by!r} is not an approver; the approvers are {', '.join(names)}")

    def _resolve(self, request_id: str, status: Status, by: str, comment: str | None,
                 edit: Mapping[str, Any] | None) -> Flow[ApprovalRequest]:
        edited = None if edit is None else _edited_args(edit)
        while True:
            request, found = yield from self._load(request_id)
            if status is Status.APPROVED:
                self._check_approver(request.callers, request.approvers, by)
            else:
                # Anyone allowed to approve may deny; the caller may too (it only blocks).
                self._check_approver(frozenset(), request.approvers, by)
            if request.status is not Status.PENDING:
                raise not_pending(request)
            updated = self._answered(request, status, by, comment, edited)
            if (yield self._cas(found.key, found.version, updated.to_dict(), request.expires)):
                self._emit(status.value, updated, detail=quorum_text(updated))
                return updated

    def _answered(self, request: ApprovalRequest, status: Status, by: str,
                  comment: str | None, edited: dict[str, Any] | None) -> ApprovalRequest:
        """The request once ``by`` answered it: resolved, or — under a quorum — still pending
        with the answer recorded (until ``required`` people approved, or a deny decided)."""
        now = self.clock()
        if request.required <= 1:
            return replace(request, status=status, resolved_by=by, resolved_at=now,
                           comment=comment, edited_args=edited)
        answered = {identity(n) for n in (*(request.approved_by or ()),
                                          *(request.denied_by or ()))}
        if identity(by) in answered:
            raise ApprovalRefused("already_answered",
                                  f"{by!r} already approved or denied request {request.id}; "
                                  f"{quorum_text(request)}")
        if status is Status.APPROVED:
            if edited is not None:
                raise ApprovalRefused(
                    "quorum_edit", "a request that needs several approvers cannot be approved "
                    "with an edit (the others approved the call as asked): deny it, and the "
                    "agent can ask for the edited call")
            approved = [*(request.approved_by or ()), by]
            done = len(approved) >= request.required
            return replace(request, approved_by=approved, status=status if done else
                           Status.PENDING, resolved_by=by if done else None,
                           resolved_at=now if done else None,
                           comment=comment if done else request.comment)
        denied = [*(request.denied_by or ()), by]
        if request.veto or not reachable(request, denied):
            return replace(request, denied_by=denied, status=status, resolved_by=by,
                           resolved_at=now, comment=comment)
        return replace(request, denied_by=denied)

    def _cancel(self, request_id: str) -> Flow[ApprovalRequest]:
        while True:
            request, found = yield from self._load(request_id)
            if request.status not in (Status.PENDING, Status.APPROVED):
                raise not_pending(request)
            updated = replace(request, status=Status.CANCELLED, resolved_at=self.clock())
            if (yield self._cas(found.key, found.version, updated.to_dict(), request.expires)):
                self._emit("cancelled", updated)
                return updated

    def _consume(self, request_id: str, decision: Decision) -> Flow[ApprovalRequest]:
        while True:
            request, found = yield from self._load(request_id)
            try:
                check_usable(request)
                check_same_call(request, decision)
            except ApprovalInvalid as e:
                if e.code in _REFUSAL_ACTIONS:
                    self._emit(_REFUSAL_ACTIONS[e.code], request, decision.decision_id, e.message)
                raise
            updated = replace(request, status=Status.CONSUMED, consumed_at=self.clock())
            if (yield self._cas(found.key, found.version, updated.to_dict(), request.expires)):
                self._emit("consumed", updated, decision.decision_id)
                return updated
            # Someone else changed it first: read again, and refuse with its new status.

    def _wait(self, request_id: str, timeout: float) -> Flow[ApprovalRequest]:
        deadline = time.monotonic() + timeout
        delay = 0.02
        while True:
            request = yield from self._get(request_id)
            remaining = deadline - time.monotonic()
            if request.status is not Status.PENDING or remaining <= 0:
                return request
            yield sleep(min(delay, remaining))
            delay = min(delay * 1.5, 1.0)

    # -- grant flows --------------------------------------------------------------------

    def _remember(self, source: str | Decision, scope: str, by: str, ttl: float | None,
                  tool: str | None, exact: bool = False) -> Flow[Grant]:
        kind, lasting = grant_scope(scope), grant_ttl(self.ttl if ttl is None else ttl)
        if isinstance(source, str):
            request = yield from self._get(source)
            if request.status not in (Status.APPROVED, Status.CONSUMED):
                raise ApprovalInvalid(
                    "approval_not_approved",
                    f"request {request.id} is {request.status.value}; only an approved request "
                    "can be remembered")
            call, required = GrantSource.of_request(request), request.required
        else:
            call, required = GrantSource.of_decision(source), self.required
        self._check_approver(call.callers, call.approvers, by)
        call.check_grant(kind, tool, exact, required)
        now = self.clock()
        grant = Grant(
            id=secrets.token_hex(8), scope=kind, tool=tool or call.tool,
            session=call.session if kind is Scope.SESSION else None,
            agent=call.agent if kind is Scope.AGENT else None,
            by=by, created=now, expires=now + lasting, request_id=call.request_id,
            call=exact_call(call.tool, call.args) if exact else None,
            args=kept_args(call.args) if exact else None,
        )
        yield from self._update_grants(lambda grants: {**grants, grant.id: grant})
        self._emit("grant_created", grant)
        return grant

    def _approve_remembering(self, request_id: str, scope: str, by: str, ttl: float | None,
                             exact: bool, edit: Mapping[str, Any] | None,
                             comment: str | None) -> Flow[tuple[ApprovalRequest, Grant | None]]:
        # What would refuse the grant refuses before the approval: a person asking for both
        # never gets the one without being told.
        kind = grant_scope(scope)
        grant_ttl(self.ttl if ttl is None else ttl)
        request = yield from self._get(request_id)
        GrantSource.of_request(request).check_grant(kind, None, exact, request.required)
        approved = yield from self._resolve(request_id, Status.APPROVED, by, comment, edit)
        if approved.status is not Status.APPROVED:  # one of a quorum: not approved yet
            return approved, None
        grant = yield from self._remember(approved.id, kind.value, by, ttl, None, exact)
        return approved, grant

    def _load_grants(self) -> Flow[tuple[dict[str, Grant], StoredValue | None]]:
        found = yield self._read(self.namespace + _GRANTS)
        value = self._opened(found)
        if value is None:  # none, or not sealed by this key: no grant counts
            return {}, found
        grants = {k: Grant.from_dict(v) for k, v in value.get("grants", {}).items()}
        return grants, found

    def _update_grants(
        self, change: Callable[[dict[str, Grant]], dict[str, Grant]]
    ) -> Flow[dict[str, Grant]]:
        """Applies ``change`` to the grants with compare-and-set, retrying on a conflict."""
        key = self.namespace + _GRANTS
        while True:
            grants, found = yield from self._load_grants()
            changed = change(grants)
            # Forget grants that ended longer ago than the retention.
            horizon = self.clock() - self.retention
            kept = {k: g for k, g in changed.items()
                    if max(g.expires, g.revoked_at or 0.0) > horizon}
            value = self._seal.sealed(key, {"grants": {k: g.to_dict() for k, g in kept.items()}})
            step = Step(self.store.compare_and_set, self.store.acompare_and_set,
                        (key, None if found is None else found.version, value), {"ttl": None})
            if (yield step):
                return kept

    def _grants(self, include_inactive: bool) -> Flow[builtins.list[Grant]]:
        found, _ = yield from self._load_grants()
        now = self.clock()
        grants = [g.at(now) for g in found.values()]
        return sorted((g for g in grants if include_inactive or g.status is GrantStatus.ACTIVE),
                      key=lambda g: (g.created, g.id))

    def _granted(self, decision: Decision) -> Flow[Grant | None]:
        if decision.effect is not Effect.ASK:
            return None
        grants = yield from self._grants(False)
        covering = [g for g in grants if g.covers(decision)]
        return max(covering, key=lambda g: g.expires) if covering else None

    def _grant_used(self, grant: Grant, decision: Decision) -> None:
        """Records that a grant let a call run (``AuditError`` when audit is required and
        could not record it: the call is then refused)."""
        self._emit("grant_used", grant, decision.decision_id)

    def _revoke(self, grant_id: str, by: str | None) -> Flow[Grant]:
        now = self.clock()

        def revoke(grants: dict[str, Grant]) -> dict[str, Grant]:
            grant = grants.get(grant_id)
            if grant is None:
                raise ApprovalInvalid("grant_not_found", f"no grant {grant_id!r}")
            status = grant.at(now).status
            if status is GrantStatus.REVOKED:
                who = f" by {grant.revoked_by}" if grant.revoked_by else ""
                raise ApprovalInvalid("grant_already_revoked", f"grant {grant_id} was already "
                                      f"revoked{who} at {iso(grant.revoked_at or now)}")
            if status is GrantStatus.EXPIRED:
                raise ApprovalInvalid("grant_expired", f"grant {grant_id} expired at "
                                      f"{iso(grant.expires)}: it covers nothing any more")
            return {**grants, grant_id: replace(grant, status=GrantStatus.REVOKED,
                                                revoked_at=now, revoked_by=by or None)}

        grants = yield from self._update_grants(revoke)
        self._emit("grant_revoked", grants[grant_id])
        return grants[grant_id]


def _key_for(store: Any, key: bytes | str | os.PathLike[str] | None) -> bytes:
    """The approvals key: given, read from a key file, or this process's for a memory store."""
    if isinstance(key, bytes):
        if len(key) < 16:
            raise ValueError("an approvals key must be at least 16 bytes")
        return key
    if key is not None:
        return load_key(key)
    from callwarden.state import MemoryStore

    return process_key() if isinstance(store, MemoryStore) else load_key()


def _call_key(digest: str, call_id: str) -> str:
    return hashlib.sha256(f"{digest}\0{call_id}".encode()).hexdigest()[:32]


def _edited_args(edit: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(edit, Mapping):
        raise TypeError(f"edited arguments must be a JSON object (a dict), not {type(edit).__name__}")
    # Round-trip through JSON: the edit is stored, compared by digest and run from the store.
    return json.loads(json.dumps(json_safe(edit)))  # type: ignore[no-any-return]
