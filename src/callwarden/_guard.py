"""``Guard``: the public face of the engine — check, run, protect; sync and async twins."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

from callwarden._call import new_id, snapshot
from callwarden._decision import Decision, Effect, Mode, Reason
from callwarden._enforce import Enforcer
from callwarden._flow import Flow, adrive, drive
from callwarden._profiles import ToolProfile
from callwarden._protect import protect
from callwarden.engine import Engine, OutputCheck
from callwarden.exceptions import (
    AuditError,
    ConfigError,
    InvalidCall,
)
from callwarden.policyfile import LoadedPolicy, compile_policy, load_policy_file, load_policy_text
from callwarden.state import StateStore, open_store

__all__ = ["Guard"]

F = TypeVar("F", bound=Callable[..., Any])
_perf = time.perf_counter


class Guard:
    """The policy-enforcement point: decides tool calls, and runs tools only when allowed.

    Build one from a policy file (``Guard.from_file("policy.yaml")``), a dict
    (``Guard.from_dict({...})``), or Python (``Guard(rules=[...], policies=[fn, obj])``).
    """

    def __init__(
        self,
        *,
        rules: Sequence[Mapping[str, Any]] = (),
        policies: Sequence[Any] = (),
        default: str = "allow",
        mode: str = "enforce",
        on_error: str = "deny",
        timeout: float | str = 1.0,
        tools: Mapping[str, Mapping[str, Any]] | None = None,
        name: str | None = None,
        state: Any = None,
        clock: Callable[[], float] | None = None,
        audit: Any = None,
        approvals: Any = None,
    ) -> None:
        """Builds a guard in Python; ``rules`` are policy-file rules as dicts.

        Args:
            state: a ``StateStore`` or a store URL (``memory``, ``sqlite:///p.db``,
                ``redis://host:6379/0``) for limits and history; memory when omitted.
            clock: wall clock for limit windows and history (tests inject one).
            audit: a ``callwarden.audit.Auditor`` recording every decision and outcome.
            approvals: a ``callwarden.approvals.Approvals`` for ``ask`` decisions (by default
                one on the guard's state store, created when first needed).
        """
        spec: dict[str, Any] = {
            "version": 1, "default": default, "mode": mode, "on_error": on_error,
            "timeout": timeout, "rules": list(rules),
        }
        if tools:
            spec["tools"] = dict(tools)
        if name:
            spec["name"] = name
        loaded = compile_policy(spec, extra_policies=policies)
        self._open(loaded, state=state, clock=clock, audit=audit, approvals=approvals)

    @classmethod
    def from_loaded(cls, loaded: LoadedPolicy, *, state: Any = None,
                    clock: Callable[[], float] | None = None, audit: Any = True,
                    approvals: Any = None) -> Guard:
        """A guard deciding with a loaded policy; opens what the policy names.

        Args:
            loaded: a policy compiled by ``callwarden.policyfile``.
            state: a ``StateStore`` or store URL that replaces the policy's ``state:``.
            clock: wall clock for limit windows and history (tests inject one).
            audit: True opens the policy's ``audit:`` sinks, False ignores them (what-if use:
                replay, tests), or an ``Auditor`` to use instead.
            approvals: an ``Approvals`` that replaces the policy's ``approvals:``.

        Raises:
            PolicyError: the state store, an audit sink or the approvals store cannot be
                opened (with the line of the setting).
        """
        guard = cls.__new__(cls)
        guard._open(loaded, state=state, clock=clock, audit=audit, approvals=approvals)
        return guard

    def _open(self, loaded: LoadedPolicy, *, state: Any, clock: Callable[[], float] | None,
              audit: Any, approvals: Any) -> None:
        """Opens the state store, the audit sinks and the approvals store the policy names."""
        self.loaded = loaded
        self.source: str | None = loaded.source if loaded.source != "<policy>" else None
        store = _open_state(loaded, state)
        self._engine = loaded.engine(store=store, clock=clock)
        self._timeout = loaded.settings.timeout
        self._auditor: Any = None
        if audit is True:
            self._auditor = _open_audit(loaded)
        elif audit is not False and audit is not None:
            self._auditor = audit
        self._approvals_store: Any = None
        if loaded.approvals is not None and loaded.approvals.state is not None:
            try:
                self._approvals_store = open_store(loaded.approvals.state)
            except Exception as e:
                raise loaded.error(("approvals", "state"), f"cannot open the store: {e}") from e
        self._own_store: Any = None
        self._approvals: Any = None
        if approvals is not None:
            self.approvals = approvals
        #: The enforcement path ``run`` / ``arun`` / ``protect`` take.
        self._path = Enforcer(self)

    @property
    def approvals(self) -> Any:
        """The ``Approvals`` service: pending requests, approve / deny, remembered grants.

        Built on first use from the policy's ``approvals:`` section, on its ``state`` store,
        else on the policy's state store (in memory when the policy has none).
        """
        if self._approvals is None:
            from callwarden.approvals import Approvals, ApprovalSettings
            from callwarden.approvals._policy import reminder_options
            from callwarden.engine.user import load_object
            from callwarden.state import MemoryStore

            store: Any = self._approvals_store or self._engine.store
            if store is None or not hasattr(store, "compare_and_set"):  # limits-only store
                store = self._own_store = self._own_store or MemoryStore()
            settings = self.loaded.approvals or ApprovalSettings()
            self._approvals = Approvals(store, ttl=settings.ttl, approvers=settings.approvers,
                                        on_expiry=settings.on_expiry, clock=self._engine.clock,
                                        key=settings.key_file, required=settings.required,
                                        veto=settings.veto, max_open=settings.max_open,
                                        **reminder_options(settings, load_object))
            self._approvals.auditor = self._auditor
        return self._approvals

    @approvals.setter
    def approvals(self, value: Any) -> None:
        if value is not None and getattr(value, "auditor", False) is None:
            value.auditor = self._auditor  # its transitions go to this guard's audit log
        self._approvals = value

    @classmethod
    def from_file(cls, path: str | Path, *, check_examples: bool = True,
                  audit: bool = True) -> Guard:
        """Loads a YAML policy file.

        ``audit=False`` ignores its ``audit:`` sinks (for what-if use: replay, tests).

        Raises:
            PolicyError: listing every problem with its file, line and key.
        """
        loaded = load_policy_file(Path(path), check_examples=check_examples)
        return cls.from_loaded(loaded, audit=audit)

    @classmethod
    def from_dict(cls, policy: Mapping[str, Any], *, base_dir: str | Path | None = None,
                  policies: Sequence[Any] = (), check_examples: bool = True, state: Any = None,
                  clock: Callable[[], float] | None = None) -> Guard:
        """Builds a guard from a policy already parsed into a dict (same keys as the file).

        ``state`` is a ``StateStore`` or a store URL; it replaces the policy's ``state:``.

        Raises:
            PolicyError: listing every problem, a state URL that cannot be opened included.
        """
        loaded = compile_policy(policy, base_dir=Path(base_dir) if base_dir else None,
                                extra_policies=policies, check_examples=check_examples)
        return cls.from_loaded(loaded, state=state, clock=clock)

    @classmethod
    def from_yaml(cls, text: str, *, base_dir: str | Path | None = None,
                  filename: str = "<policy>") -> Guard:
        """Builds a guard from YAML text."""
        loaded = load_policy_text(text, filename=filename,
                                  base_dir=Path(base_dir) if base_dir else None)
        return cls.from_loaded(loaded)

    # -- introspection ----------------------------------------------------------------------

    @property
    def engine(self) -> Engine:
        """The compiled policy."""
        return self._engine

    @property
    def mode(self) -> Mode:
        """The policy's mode."""
        return self._engine.settings.mode

    def profile(self, tool: str) -> ToolProfile:
        """Returns the profile the guard uses for a tool name."""
        return self._engine.profile(tool)

    # -- deciding ---------------------------------------------------------------------------

    def _start(self, tool: Any, args: Any, call_id: str | None, agent: str | None,
               session: str | None, principal: str | None, framework: str | None,
               context: Mapping[str, Any] | None, extra: dict[str, Any], *,
               dry: bool = False, refusal: tuple[str, str, str] | None = None,
               ) -> Flow[Decision] | Decision:
        """Snapshots the call and decides it when no driver is needed (bad input, a plan of
        built-in rules only, a ``refusal``: (rule, code, message) decided outside the rules);
        otherwise returns its decision flow for a driver to run."""
        started = _perf()
        decision_id = new_id()
        if extra:  # a fresh dict of its own: taken as it is when there is no context
            context = extra if context is None else {**context, **extra}
        try:
            call = snapshot(tool, args, call_id or decision_id, agent, session, principal,
                            framework, context, deadline=started + self._timeout)
        except InvalidCall as e:
            return self._engine.rejected(tool, e, {"call_id": call_id, "agent": agent,
                                                   "session": session, "principal": principal,
                                                   "framework": framework},
                                         started, decision_id)
        if refusal is not None:
            return self._engine.refusal(call, *refusal, started, decision_id)
        decision = self._engine.decide_fast(call, started, decision_id, dry=dry)
        if decision is not None:
            return decision
        return self._engine.flow(call, started, decision_id, dry=dry)

    def check(self, tool: str, args: Any = None, *, call_id: str | None = None,
              agent: str | None = None, session: str | None = None,
              principal: str | None = None, framework: str | None = None,
              context: Mapping[str, Any] | None = None, **extra: Any) -> Decision:
        """Decides one call. Never raises for a bad call: it returns a deny with the reason.

        ``agent``, ``session``, ``principal``, ``framework`` and ``call_id`` fill the call's
        fields; ``context`` and any other keyword argument go into ``call.context``.
        """
        # ``_start`` inlined: this is the hot path of every synchronous decision.
        started = _perf()
        decision_id = new_id()
        if extra:  # a fresh dict of its own: taken as it is when there is no context
            context = extra if context is None else {**context, **extra}
        try:
            call = snapshot(tool, args, call_id or decision_id, agent, session, principal,
                            framework, context, deadline=started + self._timeout)
        except InvalidCall as e:  # a deny like any other: it is audited too
            decision = self._engine.rejected(tool, e, {
                "call_id": call_id, "agent": agent, "session": session,
                "principal": principal, "framework": framework}, started, decision_id)
        else:
            fast = self._engine.decide_fast(call, started, decision_id)
            decision = fast if fast is not None else drive(
                self._engine.flow(call, started, decision_id))
        return decision if self._auditor is None else self._audited(decision)

    def _audited(self, decision: Decision) -> Decision:
        """Records a decision; one the required audit could not record is refused (and lets
        go of the slots it took)."""
        if self._auditor is not None:
            try:
                self._auditor.decision(decision)
            except AuditError as e:
                if decision.budgets and decision.effect.allows:
                    self._path.release(decision)
                return _audit_failed(decision, e)
        return decision

    def refuse(self, tool: str, args: Any = None, *, rule: str, code: str, message: str,
               call_id: str | None = None, agent: str | None = None,
               session: str | None = None, principal: str | None = None,
               framework: str | None = None,
               context: Mapping[str, Any] | None = None) -> Decision:
        """Refuses one call for a reason outside the policy's rules (``rule`` names the check,
        ``code`` the reason, ``message`` is what the model reads); audited like a decision."""
        decision = self._start(tool, args, call_id, agent, session, principal, framework,
                               context, {}, refusal=(rule, code, message))
        return self._audited(cast(Decision, decision))  # a refusal needs no driver

    async def acheck(self, tool: str, args: Any = None, *, call_id: str | None = None,
                     agent: str | None = None, session: str | None = None,
                     principal: str | None = None, framework: str | None = None,
                     context: Mapping[str, Any] | None = None, **extra: Any) -> Decision:
        """Async twin of ``check``: user policies are awaited (``aevaluate``) with the deadline."""
        started = self._start(tool, args, call_id, agent, session, principal, framework,
                              context, extra)
        decision = started if type(started) is Decision else await adrive(started)  # type: ignore[arg-type]
        if self._auditor is not None:
            try:
                await self._auditor.adecision(decision)
            except AuditError as e:
                if decision.budgets and decision.effect.allows:
                    await self._path.arelease(decision)
                return _audit_failed(decision, e)
        return decision

    def record_output(self, decision: Decision, output: Any) -> bool:
        """For a tool you ran yourself after :meth:`check` allowed it: remembers what its
        output brought into the session when the output is untrusted content (web pages,
        inbound mail and chat), for rules about where a value came from (``untrusted:``,
        ``after_untrusted:``) — as ``run`` and every adapter do. Returns False when that could
        not be recorded: then do not show the output to the model."""
        return self._path.record_output(decision, output)

    def release(self, decision: Decision) -> bool:
        """For a tool you ran yourself after :meth:`check` allowed it: lets go of the slots
        it holds of ``concurrent`` limits once it has finished (``run``, ``arun`` and every
        adapter do it when they record the outcome). Idempotent; never raises: returns False
        when the store failed (the slots then end with their ``hold``)."""
        return self._path.release(decision)

    async def arelease(self, decision: Decision) -> bool:
        """Async twin of :meth:`release`."""
        return await self._path.arelease(decision)

    def query(self, tool: str, args: Any = None, **fields: Any) -> Decision:
        """What the policy would decide for a call, changing nothing: limits are read but
        not counted, the session history records nothing, and nothing is audited. Arguments
        as for :meth:`check` (``callwarden check`` is this)."""
        started = self._start(tool, args, *self._query_fields(fields), dry=True)
        return started if type(started) is Decision else drive(started)  # type: ignore[arg-type]

    async def aquery(self, tool: str, args: Any = None, **fields: Any) -> Decision:
        """Async twin of :meth:`query`."""
        started = self._start(tool, args, *self._query_fields(fields), dry=True)
        return started if type(started) is Decision else await adrive(started)  # type: ignore[arg-type]

    @staticmethod
    def _query_fields(fields: dict[str, Any]) -> tuple[Any, ...]:
        named = [fields.pop(k, None) for k in ("call_id", "agent", "session", "principal",
                                                "framework", "context")]
        return (*named, fields)

    # -- running ----------------------------------------------------------------------------

    def run(self, tool: str, args: Any, fn: Callable[..., Any], *, approver: Any = None,
            wait: float | None = None, approval_id: str | None = None, **context: Any) -> Any:
        """Decides, then calls ``fn(**effective_args)`` only when allowed.

        An ``ask`` decision creates an approval request bound to this exact call: ``approver``
        (a callback or ``TerminalApprover``) answers it now, ``wait`` waits that many seconds
        for someone to resolve it from elsewhere (``callwarden approvals approve ID``), and
        otherwise ``ApprovalPending`` carries the request id; calling again (with or without
        ``approval_id=``) runs the approved call exactly once.

        The tool's output passes the policy's output rules, and the outcome is audited. This
        is the one enforcement path every adapter uses too (:class:`callwarden.adapters.Enforcer`).

        Raises:
            ToolDenied: (or ``ApprovalPending`` / ``RunHalted``) when the call may not run;
                the exception carries the decision.
        """
        return self._path.call(tool, args, fn, approval_id=approval_id, approver=approver,
                               wait=wait, **context)

    async def arun(self, tool: str, args: Any, fn: Callable[..., Any], *, approver: Any = None,
                   wait: float | None = None, approval_id: str | None = None,
                   **context: Any) -> Any:
        """Async twin of ``run``; ``fn`` and ``approver`` may be sync or async."""
        return await self._path.acall(tool, args, fn, approval_id=approval_id,
                                      approver=approver, wait=wait, **context)

    def check_output(self, decision: Decision, result: Any) -> OutputCheck | None:
        """Applies the policy's output rules (``on: output``) to a tool's result.

        Returns None when the tool has no output rules. ``run`` / ``arun`` and the adapters
        do it through the enforcement path.
        """
        return self._engine.check_output(decision, result)

    @property
    def auditor(self) -> Any:
        """The ``Auditor`` recording this guard's decisions and outcomes, or None."""
        return self._auditor

    def close(self) -> None:
        """Flushes and closes the audit sinks and the stores the guard opened."""
        if self._auditor is not None:
            self._auditor.close()
        for store in {id(s): s for s in (self._engine.store, self._approvals_store,
                                         self._own_store) if s is not None}.values():
            store.close()

    def protect(self, fn: F | None = None, *, tool: str | None = None, **context: Any) -> Any:
        """Decorator guarding a plain function (sync or async) as a tool named after it.

        The call's arguments are the function's bound arguments by parameter name, defaults
        applied: ``*args`` as a list under its name, ``**kwargs`` merged in, and the ``self`` /
        ``cls`` of a method left out (a first parameter named so is the receiver, passed
        through untouched). The function runs, or ``ToolDenied`` is raised; it receives the
        caller's own objects (the decision records a copy), except arguments a policy
        rewrote, which it receives as the effective values.
        """
        return protect(self, fn, tool=tool, **context)










def _audit_failed(decision: Decision, error: AuditError) -> Decision:
    """Audit is required and could not be written: the call must not run (fail closed)."""
    if not decision.effect.allows:
        return decision
    reason = Reason("audit_failed", str(error), "audit")
    return decision._replace(
        effect=Effect.DENY, args=decision.call.args, reasons=(reason, *decision.reasons),
        rule="audit", source=None,
        message=f"The call to '{decision.call.tool}' was not run: the audit log required by the "
                "policy could not be written. Try again later or tell the user.")




def _open_state(loaded: LoadedPolicy, state: Any) -> Any:
    """The state store: ``state`` (a store or a URL) when given, else the policy's ``state:``.

    Raises:
        PolicyError: the store cannot be opened, or ``state`` is neither a store nor a URL.
    """
    if state is not None and not isinstance(state, str):
        # Duck typing for stores that do not subclass StateStore (test doubles).
        if isinstance(state, StateStore) or (hasattr(state, "consume")
                                             and hasattr(state, "aconsume")):
            return state
        raise loaded.error(("state",), f"must be a StateStore or a store URL, not "
                           f"{type(state).__name__}",
                           "memory, sqlite:///state.db or redis://host:6379/0")
    url = state if state is not None else loaded.state
    if url is None:
        return None
    if not url:
        raise loaded.error(("state",), "must be a store URL",
                           "memory, sqlite:///state.db or redis://host:6379/0")
    try:
        return open_store(url)
    except Exception as e:
        raise loaded.error(("state",), f"cannot open the state store: {e}",
                           "memory, sqlite:///path.db or redis://host:6379/0") from e


def _open_audit(loaded: LoadedPolicy) -> Any:
    """The policy's auditor with its sinks open, or None when it has no ``audit:``.

    Raises:
        PolicyError: a sink cannot be opened.
    """
    if loaded.audit is None:
        return None
    from callwarden.audit import Auditor

    try:
        return Auditor.from_settings(loaded.audit)
    except (ConfigError, OSError) as e:
        raise loaded.error(("audit",), f"cannot open the audit log: {e}") from e
