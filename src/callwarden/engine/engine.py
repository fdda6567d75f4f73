"""The decision engine: one decision flow, driven synchronously or asynchronously.

``Engine.flow`` is a generator holding the whole decision logic (mutate phase, validate phase,
combination, default, observe mode, approvals profile, deadline). Built-in rules are evaluated
inline; each rule backed by user code is *yielded* to the driver, which runs it with the
deadline — on a worker thread for ``check``, awaited for ``acheck`` — and sends the verdict back.
That is httpx's ``auth_flow`` shape: one source of truth, two thin drivers.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from callwarden._call import FrozenDict, ToolCall, freeze_call_args, new_id, snapshot
from callwarden._decision import Budget, Decision, Effect, Mode, Reason, RuleMatch, Verdict
from callwarden._flow import Flow, drive
from callwarden._messages import decision_message, invalid_call
from callwarden._profiles import ToolProfile, default_profile
from callwarden.analysis.globs import is_glob
from callwarden.conditions.base import Subject
from callwarden.engine.combine import Combiner, Entry, FirstMatch, StrictestWins
from callwarden.engine.facts import FactsUse
from callwarden.engine.index import Plan, RuleIndex, refuses_every_call
from callwarden.engine.journal import Journal, JournalSettings, journaled
from callwarden.engine.limits import budgets_of, exceeded_entries
from callwarden.engine.output import OutputCheck, check_output
from callwarden.engine.rules import NameSet, Rule
from callwarden.engine.slots import holds_slots, slots_of
from callwarden.engine.steps import PolicyStep, StoreFailure, StoreStep, never_blocks
from callwarden.engine.workers import Stuck
from callwarden.exceptions import InvalidCall, InvalidResult
from callwarden.state._base import Counter, HistoryEntry, LimitStore

__all__ = ["Engine", "Settings"]
_CARRIED = ("history", "facts", "facts_record")  # a rewrite's new Subject keeps these of the memo

# Samples for :meth:`Engine.warm`: a shell command with a pipe, a redirect and two programs, a
# file read, a file write, a URL and a glob, under the tool names most agents use.
_WARM_CALLS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("Bash", {"command": "cat README.md | grep -n todo > notes.txt && git status"}),
    ("Read", {"file_path": "src/app.py"}),
    ("Write", {"file_path": "notes/a.md", "content": "hello"}),
    ("WebFetch", {"url": "https://example.com/docs?q=1"}),
    ("Glob", {"pattern": "src/**/*.py"}),
)

_perf = time.perf_counter
_new = tuple.__new__  # NamedTuple's generated __new__ is a Python call; this is not

_LAST = 1 << 30  # order of entries that belong to no rule (deadline, state store)
# Reason codes of verdicts that stand for a failure, not for a rule's opinion.
_FAILURE_CODES = frozenset({"policy_error", "policy_timeout", "policy_invalid_result",
                            "state_unavailable"})


def _decides(entry: Entry) -> bool:
    """Whether an entry takes part in choosing the effect.

    A failure under ``on_error: allow`` means "ignore the failed rule": it must never act as an
    explicit allow that overrides ``default: deny`` (it is still recorded and explained).
    """
    verdict = entry.verdict
    if not entry.decisive or verdict.effect is Effect.MODIFY:
        return False
    return not (verdict.effect is Effect.ALLOW and verdict.code in _FAILURE_CODES)


@dataclass(frozen=True, slots=True)
class Settings:
    """Policy-wide settings."""

    default: Effect = Effect.ALLOW
    default_source: str | None = None
    mode: Mode = Mode.ENFORCE
    on_error: Effect = Effect.DENY
    timeout: float = 1.0
    name: str | None = None


class Engine:
    """Compiled rules + profiles + settings + the state store; decides calls.

    Immutable once built (its caches of per-tool plans and profiles aside): a policy reload
    builds a new engine.
    """

    __slots__ = (
        "_combiner",
        "_default_effect",
        "_default_reasons",
        "_default_would",
        "_driverless",
        "_history_by_tool",
        "_index",
        "_inline_journal",
        "_inline_store",
        "_plans",
        "_profile_cache",
        "_profile_globs",
        "_profiles",
        "_records_history",
        "_refusals",
        "_sealed",
        "_timeout",
        "clock",
        "facts",
        "journal",
        "rules",
        "settings",
        "store",
    )

    def __init__(
        self,
        rules: Sequence[Rule],
        *,
        settings: Settings,
        profiles: Mapping[str, ToolProfile] | None = None,
        combiner: Combiner | None = None,
        store: LimitStore | None = None,
        clock: Any = None,
        journal: JournalSettings | None = None,
    ) -> None:
        self.rules = tuple(rules)
        self.settings = settings
        if store is None and any(r.limit is not None or r.needs_history or r.needs_facts
                                 for r in self.rules):
            from callwarden.state import MemoryStore

            store = MemoryStore()
        #: The state store for limits and history, or None when nothing needs one.
        self.store = store
        # Every decision feeds the session history as soon as one rule reads it.
        self._records_history = any(r.needs_history for r in self.rules)
        self.facts = FactsUse.of(self.rules)  #: what the rules need of session facts
        # The parts of decisions one rule refused alone, per tool and verdict (_one_refusal).
        self._refusals: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        # Whether the store reads a history limited to some tools (a store of another
        # project's may predate the argument: it then reads the whole history).
        self._history_by_tool = store is not None and _takes_tools(store)
        # A store whose steps never wait (in memory): limits are counted without a driver.
        self._inline_store = store is not None and never_blocks(store)
        #: Wall clock for windows and history (injectable for tests).
        self.clock = clock or time.time
        #: Where calls with side effects are written before they run (exactly once).
        self.journal = Journal(journal or JournalSettings(), store, self.clock)
        self._inline_journal = never_blocks(self.journal.store)
        # Whether a plan of this engine may be decided without a driver (decide_fast): no
        # history to record, and facts (when read) from a store that never waits.
        self._driverless = not self._records_history and (
            not self.facts.reads or self._inline_store)
        self._timeout = settings.timeout
        self._combiner = combiner or StrictestWins()
        self._index = RuleIndex(self.rules, [role for role, _ in self.facts.seen])
        self._plans = self._index._cache  # read directly on the hot path
        profiles = dict(profiles or {})
        self._profiles = {k: v for k, v in profiles.items() if not is_glob(k)}
        self._profile_globs = [(NameSet([k]), v) for k, v in profiles.items() if is_glob(k)]
        self._profile_cache: dict[str, ToolProfile] = {}
        #: What the default decides in this mode, and the would-effect it reports (observe).
        self._default_effect = settings.default if settings.mode is Mode.ENFORCE else Effect.ALLOW
        self._default_would = settings.default if settings.mode is Mode.OBSERVE else None
        self._default_reasons = (Reason(
            f"default_{settings.default.value}",
            f"no rule decided; the policy default is {settings.default.value}", "default"),)
        self._sealed = True

    def __setattr__(self, name: str, value: Any) -> None:
        if getattr(self, "_sealed", False):
            raise AttributeError(f"an Engine is immutable once built (cannot set {name!r}); "
                                 "build a new one from the LoadedPolicy")
        object.__setattr__(self, name, value)

    # -- profiles ---------------------------------------------------------------------------

    def profile(self, tool: str) -> ToolProfile:
        """Returns the profile of a tool: from the policy, else the built-in defaults."""
        profile = self._profile_cache.get(tool)
        if profile is not None:
            return profile
        profile = self._profiles.get(tool)
        if profile is None:
            for names, glob_profile in self._profile_globs:
                if tool in names:
                    profile = glob_profile.merged(name=tool)
                    break
        if profile is None:
            profile = default_profile(tool)
        if len(self._profile_cache) > 4096:
            self._profile_cache.clear()
        self._profile_cache[tool] = profile
        return profile

    # -- starting a decision ----------------------------------------------------------------

    def decide(self, tool: Any, args: Any = None, *, call_id: str | None = None,
               agent: str | None = None, session: str | None = None,
               principal: str | None = None, framework: str | None = None,
               context: Mapping[str, Any] | None = None) -> Decision:
        """Decides one call synchronously, with nothing recorded anywhere but this engine's
        store (for what-if checks and policy examples; a ``Guard`` also audits)."""
        started = _perf()
        decision_id = new_id()
        try:
            call = snapshot(tool, args, call_id or decision_id, agent, session, principal,
                            framework, context, deadline=started + self.settings.timeout)
        except InvalidCall as e:
            return self.rejected(tool, e, {"call_id": call_id, "agent": agent,
                                           "session": session, "principal": principal,
                                           "framework": framework}, started, decision_id)
        decision = self.decide_fast(call, started, decision_id)
        return decision if decision is not None else drive(self.flow(call, started, decision_id))

    def rejected(self, tool: Any, error: InvalidCall, fields: Mapping[str, Any], started: float,
                 decision_id: str) -> Decision:
        """The deny for a call that cannot be snapshotted (bad arguments or call fields)."""
        name = tool if isinstance(tool, str) and tool else "<invalid>"
        # Only strings are recorded: an invalid field is dropped (the reason names it).
        text = {k: str.__str__(v) if isinstance(v, str) else None for k, v in fields.items()}
        call = ToolCall(name[:200], FrozenDict(), text["call_id"] or decision_id, text["agent"],
                        text["session"], text["principal"], text["framework"])
        reason = Reason(error.code, str(error), "input")
        return Decision(
            Effect.DENY, call, call.args, (reason,), "input", None, (),
            invalid_call(name[:200], error), self.settings.mode, None, decision_id,
            _perf() - started, self.settings.name,
        )

    def refusal(self, call: ToolCall, rule: str, code: str, message: str, started: float,
                decision_id: str) -> Decision:
        """A deny decided outside the policy's rules, named after ``rule`` (an MCP gateway's
        check that a tool is still what it was when first seen), with ``message`` for the
        model."""
        return Decision(
            Effect.DENY, call, call.args, (Reason(code, message, rule),), rule, None, (),
            message, Mode.ENFORCE, None, decision_id, _perf() - started, self.settings.name)

    # -- the decision flow ------------------------------------------------------------------

    def _plan(self, tool: str) -> tuple[ToolProfile, Plan]:
        profile = self._profile_cache.get(tool) or self.profile(tool)
        plan = self._plans.get(tool)
        if plan is None or plan.profile is not profile:
            plan = self._index.plan(profile)
        return profile, plan

    def refuses_every_call(self, tool: str) -> bool:
        """Whether the policy refuses every call of ``tool`` whatever its arguments (an MCP
        gateway hides such tools); see :func:`~callwarden.engine.index.refuses_every_call`."""
        return refuses_every_call(self._plan(tool)[1], self.settings.mode,
                                  self.settings.default, isinstance(self._combiner, FirstMatch))

    def warm(self) -> None:
        """Decides one what-if sample call per common kind of tool whose plan needs no
        driver (nothing counted, recorded or asked of a user policy), so that the first real
        decision in a process does not pay for first-time work: the shell parser, the rule
        plans, the interpreter's first runs of each path. A policy with a rule of its user's
        code (``use:``, a Python policy) is not warmed: that code sees real calls only."""
        if any(rule.policy is not None for rule in self.rules):
            return
        for tool, args in _WARM_CALLS:
            try:
                call = snapshot(tool, args, "warm", None, None, None, None, None)
                self.decide_fast(call, _perf(), "warm", dry=True)
            except Exception:  # a sample the policy cannot decide: skip it
                continue

    def decide_fast(self, call: ToolCall, started: float, decision_id: str, *,
                    dry: bool = False) -> Decision | None:
        """Decides without a driver when the plan needs none (no user policies, rewrites or
        history; limits only on a store that never waits); returns None otherwise. Same
        logic as ``flow``: both call ``_validate``, ``_count`` and ``_decide``."""
        tool = call.tool
        profile = self._profile_cache.get(tool) or self.profile(tool)
        plan = self._plans.get(tool)
        if plan is None or plan.profile is not profile:
            plan = self._index.plan(profile)
        if not (self._driverless and (plan.fast or (plan.counted and self._inline_store))):
            return None
        named = call.call_id != decision_id  # a caller's id: a call the journal may hold
        if named and not self._inline_journal and self.journal.settings.enabled and (
                plan.may_ask or self.settings.on_error is Effect.ASK
                or self.journal.covers(call, profile, decision_id)):
            return None  # its journal entry is read (and written) through the driver
        subject, deadline = Subject(call, profile), started + self._timeout
        entries: list[Entry] = []
        applicable, reads, keeps = plan.shape(call.args)
        if reads and self.facts.reads and \
                (failed := self.facts.load_inline(self.store, subject, deadline)) is not None:
            entries.append(self._store_error(failed))
        if applicable or plan.by_value:
            self._validate(plan, call, subject, entries, None, applicable)
        budgets: tuple[Budget, ...] = ()
        taken: list[Counter] = []
        if plan.limits:
            step, owners, now = self._count(plan, call, call, subject, entries, dry, None,
                                            deadline, decision_id)
            if step is not None:
                budgets, taken = self._counted(owners, step, step.run(), now, entries)
        decision = self._decide(call, call, profile, entries, started, decision_id, budgets)
        if taken and not decision.effect.allows:
            self._let_go(taken).run()  # refused after all (the deadline): it holds no slot
        if keeps and (writes := self.facts.after(
                self, subject, not dry and decision.effect.allows, deadline)):
            drive(writes)
        if named and self.journal.covers(call, profile, decision_id,
                                         approved=decision.effect is Effect.ASK):
            decision = drive(journaled(self.journal, decision, dry, deadline,
                                         self.settings.on_error))
        return decision

    def flow(self, call: ToolCall, started: float, decision_id: str, *,
             dry: bool = False) -> Flow[Decision]:
        """Decides ``call``; yields the steps (user policies, store operations) that the
        driver must run, synchronously or asynchronously, under the deadline.

        ``dry`` decides without changing any state: limits are read but nothing is counted
        (attempt caps included) and the session history records nothing (what-if queries,
        ``callwarden check``).
        """
        settings = self.settings
        profile, plan = self._plan(call.tool)
        subject = Subject(call, profile)
        deadline = started + settings.timeout
        entries: list[Entry] = []
        current = call
        store = self.store
        history_session = call.session if self._records_history else None
        reads_history = history_session is not None and plan.history
        if dry:
            history_session = None
        if reads_history:
            assert store is not None and call.session is not None  # history has a store
            history = yield StoreStep(store.history, store.ahistory, (call.session,),
                                      self._history_options(plan, deadline), deadline)
            if isinstance(history, StoreFailure):
                entries.append(self._store_error(history))
            else:
                subject.memo["history"] = history.to_cel()
        # Without rewrites, the call's own arguments say whether a rule reads the facts.
        if (plan.mutators or plan.reads_facts(call.args)) and \
                (failed := (yield from self.facts.load(store, subject, deadline))) is not None:
            entries.append(self._store_error(failed))

        for rule in plan.mutators:
            if rule.dynamic is not None and not rule.dynamic(call):
                continue
            if rule.external:
                verdict = yield PolicyStep(self, rule, subject, deadline)
            else:
                verdict = self._inline(rule, subject)
            if verdict is None:
                continue
            if verdict.effect is Effect.MODIFY and verdict.args is not None:
                verdict = self._frozen_rewrite(rule, verdict)
            mode = rule.mode or settings.mode
            entries.append(_new(Entry, (rule.id, rule.source, verdict, mode, rule.order, True)))
            if (verdict.effect is Effect.MODIFY and mode is Mode.ENFORCE
                    and verdict.args is not None):
                current = current.replace_args(verdict.args)
                subject = Subject(current, profile, {k: subject.memo[k] for k in
                                                     _CARRIED if k in subject.memo})

        # User policies among the validators all see the same final arguments: run them
        # first (through the driver), then the whole validate loop in rule order.
        external: dict[int, Verdict | None] | None = None
        if plan.external_validators:
            external = {}
            for rule in plan.external_validators:
                if rule.dynamic is None or rule.dynamic(call):
                    external[id(rule)] = yield PolicyStep(self, rule, subject, deadline)
        self._validate(plan, current, subject, entries, external)

        recorded = False
        budgets: tuple[Budget, ...] = ()
        taken: list[Counter] = []
        if plan.limits:
            step, owners, now = self._count(plan, call, current, subject, entries, dry,
                                            history_session, deadline, decision_id)
            if step is not None:
                recorded = step.kwargs["record"] is not None
                budgets, taken = self._counted(owners, step, (yield step), now, entries)
        decision = self._decide(call, current, profile, entries, started, decision_id, budgets)
        if taken and not decision.effect.allows:
            yield self._let_go(taken)  # refused after all (the deadline): it holds no slot
        if plan.mutators or plan.remembers(current.args):
            yield from self.facts.after(self, subject, not dry and decision.effect.allows,
                                        deadline)
        if self.journal.covers(call, profile, decision_id,
                               approved=decision.effect is Effect.ASK):
            decision = yield from journaled(self.journal, decision, dry, deadline,
                                            settings.on_error)
        if history_session is not None and not recorded:
            assert store is not None
            # A failed write only loses history; the next read of it fails closed.
            yield StoreStep(store.record, store.arecord,
                            (history_session, call.tool, decision.effect.value),
                            {"now": self.clock(), "deadline": deadline}, deadline)
        return decision

    def _count(self, plan: Plan, call: ToolCall, current: ToolCall, subject: Subject,
               entries: list[Entry], dry: bool, history_session: str | None,
               deadline: float, member: str) -> tuple[StoreStep | None, list[Rule], float]:
        """The store step that checks and counts the call's limits, their rules, and the time
        they count at; no step when no limit applies (a limit whose counter cannot be built
        adds its error entry instead).

        Limits go last: budgets count only calls everything else allows, and all of a call's
        counters are checked and counted in one atomic store round trip, together with the
        session history when the policy keeps one. ``member`` holds the call's slots of
        ``concurrent`` limits (the decision's id).
        """
        counters = []
        owners = []
        for rule, counter in self._limit_counters(plan, call, subject, current, member):
            if isinstance(counter, Entry):
                entries.append(counter)
                continue
            counters.append(counter)
            owners.append(rule)
        if not counters:
            return None, owners, 0.0
        store = self.store
        assert store is not None
        now = self.clock()
        # What the call gets before its limits (a tool that requires approval is asked: an ask
        # only checks them; the approval, once used, counts).
        commit = not dry and self._effect_of(entries, subject.profile, False).allows
        if dry:  # read the counters, count nothing (not even an attempt)
            counters = [replace(c, always=False) if c.always else c for c in counters]
        record = None
        if history_session is not None:
            record = self._history_entry(history_session, call, current, subject.profile,
                                         entries, owners)
        return StoreStep(store.consume, store.aconsume, (counters,),
                         {"now": now, "commit": commit, "deadline": deadline, "record": record},
                         deadline), owners, now

    def _counted(self, owners: list[Rule], step: StoreStep, states: Any, now: float,
                 entries: list[Entry]) -> tuple[tuple[Budget, ...], list[Counter]]:
        """Adds the entries of the limits the store found exceeded (or its failure); what
        each limit has left, and the slots of calls in flight the call took."""
        if isinstance(states, StoreFailure):
            entries.append(self._store_error(states))
            return (), []
        counters = step.args[0]
        commit = step.kwargs["commit"]
        budgets = budgets_of(owners, counters, states, commit)  # as many of each, or raises
        taken: list[Counter] = []
        for state in states:
            if state.exceeded:
                entries.extend(exceeded_entries(owners, counters, states, now,
                                                self.settings.mode))
                return budgets, taken
        if commit:
            for rule, counter in zip(owners, counters, strict=True):
                if rule.limit.kind == "concurrent":
                    taken.append(counter)
        return budgets, taken

    def _let_go(self, slots: list[Counter]) -> StoreStep:
        """The store step that lets go of a call's slots of ``concurrent`` limits."""
        store = self.store
        assert store is not None
        deadline = _perf() + self.settings.timeout  # its own: the call's may have passed
        return StoreStep(store.release, store.arelease, (slots,), {"deadline": deadline},
                         deadline)

    def release(self, decision: Decision) -> Flow[StoreFailure | None] | None:
        """Lets go of the slots of ``concurrent`` limits a decided call holds (see
        :func:`~.slots.slots_of`): a flow of one store step returning its failure, if any;
        None when the call holds none."""
        slots = slots_of(self, decision) if holds_slots(self, decision) else []
        return _released(self._let_go(slots)) if slots else None

    def _limit_counters(self, plan: Plan, call: ToolCall, subject: Subject,
                        current: ToolCall, member: str
                        ) -> list[tuple[Rule, Counter | Entry]]:
        """(rule, its counter for this call) for every limit rule that applies; a rule whose
        counter cannot be built (a missing or bad amount) comes with its error entry instead.
        ``member``: what holds the call's slots of ``concurrent`` limits."""
        found: list[tuple[Rule, Counter | Entry]] = []
        for rule in plan.limits:
            if rule.dynamic is not None and not rule.dynamic(call):
                continue
            try:
                if not rule.applies(subject):
                    continue
                counters = rule.limit.counters(rule.id, current, subject.profile, member)
            except Exception as e:
                found.append((rule, Entry(rule.id, rule.source, self.error_verdict(rule, e),
                                          Mode.ENFORCE, rule.order)))
                continue
            for counter in counters:
                found.append((rule, counter))
        return found

    def _history_options(self, plan: Plan, deadline: float) -> dict[str, Any]:
        """The history read's options: the deadline, and the tools the rules read when
        they name them (the read then costs those tools, not all the session called)."""
        if plan.history_tools is None or not self._history_by_tool:
            return {"deadline": deadline}
        return {"deadline": deadline, "tools": plan.history_tools}

    def _history_entry(self, session: str, call: ToolCall, current: ToolCall,
                       profile: ToolProfile, entries: list[Entry],
                       owners: list[Rule]) -> HistoryEntry | None:
        """What the store records for this call, for each outcome of its limits, so that the
        counters and the history are written in one round trip.

        With the built-in combiners, the effect when several limits are exceeded is the one
        their dominant limit alone gives (strictest-wins: the strictest; first-match: the
        first in policy order); each counter carries that effect and its rank. A custom
        combiner gives None: the engine then records after deciding (a second round trip).
        """
        combiner = type(self._combiner)
        if combiner is not StrictestWins and combiner is not FirstMatch:
            return None
        modified = current.args is not call.args
        ok = self._effect_of(entries, profile, modified)
        if_exceeded: list[tuple[float, str] | None] = []
        for rule in owners:
            mode = rule.mode or self.settings.mode
            effect = rule.effect
            if mode is not Mode.ENFORCE or (profile.requires_approval is False
                                            and effect is Effect.ASK):
                if_exceeded.append(None)  # it does not take part in the decision
                continue
            entry = _new(Entry, (rule.id, rule.source, Verdict(effect), mode, rule.order, True))
            rank = effect.strictness if combiner is StrictestWins else -rule.order
            if_exceeded.append((rank, self._effect_of([*entries, entry], profile,
                                                      modified).value))
        return HistoryEntry(session, call.tool, ok.value, tuple(if_exceeded))

    def _effect_of(self, entries: list[Entry], profile: ToolProfile, modified: bool) -> Effect:
        """The effect ``_decide`` gives these entries (before the deadline check)."""
        effect = self._default_effect  # when nothing decides (no entries: the usual case)
        if entries or profile.requires_approval is not None:
            if profile.requires_approval is not None:
                entries = self._apply_profile_approval(profile, entries)
            chosen = self._combiner.select(
                [e for e in entries if _decides(e) and e.mode is Mode.ENFORCE])
            if chosen is not None:
                effect = chosen.verdict.effect
        return Effect.MODIFY if modified and effect is Effect.ALLOW else effect

    def count_approved(self, decision: Decision) -> Flow[Decision]:
        """Counts a call a person approved (or a remembered grant allowed) against its limits
        (see :func:`~.approved.count_approved`)."""
        from callwarden.engine.approved import count_approved

        return count_approved(self, decision)

    def _frozen_rewrite(self, rule: Rule, verdict: Verdict) -> Verdict:
        """The modify verdict with its arguments frozen, or the rule's ``on_error`` verdict
        when they are not a JSON object of acceptable values (a cycle, too deep...)."""
        if rule.policy is None and type(verdict.args) is FrozenDict:
            return verdict  # built-in rewrites are frozen already
        try:
            return verdict._replace(args=freeze_call_args(verdict.args))
        except Exception as e:  # InvalidCall, or a mapping whose items() raise
            return self.error_verdict(rule, InvalidResult(
                f"returned arguments that cannot be used: {str(e) or type(e).__name__}"))

    def _validate(self, plan: Plan, current: ToolCall, subject: Subject, entries: list[Entry],
                  external: dict[int, Verdict | None] | None,
                  applicable: Sequence[Rule] | None = None) -> None:
        """The validate phase: every rule sees the final arguments; verdicts go to ``entries``
        (``applicable``: the rules of the arguments' ``Plan.shape``, when known)."""
        call = subject.call
        if not plan.narrowed:
            rules: Sequence[Rule] = plan.validators
        elif applicable is not None and not plan.by_value:
            rules = applicable  # the rules of the arguments' names, no value index to add
        else:
            rules = plan.validators_for(current.args, applicable)
        if plan.unions:
            rules = plan.unioned(rules, subject)
        for rule in rules:
            if rule.dynamic is not None and not rule.dynamic(call):
                continue
            if rule.external:
                verdict = external.get(id(rule)) if external is not None else None
            else:  # _inline, inlined: this is every decision's hot loop
                try:
                    verdict = rule.evaluate(subject)
                except Exception as e:
                    verdict = self.error_verdict(rule, e)
            if verdict is None:
                continue
            if verdict.effect is Effect.MODIFY:
                verdict = self.error_verdict(rule, InvalidResult(
                    "returned modify in the validate phase; declare the rule with "
                    "'phase: mutate' (or @policy(phase='mutate')) to rewrite arguments"))
            entries.append(_new(Entry, (rule.id, rule.source, verdict,
                                        rule.mode or self.settings.mode, rule.order, True)))
        if plan.by_value and len(entries) > 1:
            entries.sort(key=_by_order)  # indexed rules were evaluated out of policy order

    def check_output(self, decision: Decision, result: Any) -> OutputCheck | None:
        """Applies the output rules to a tool's result (see :func:`~.output.check_output`)."""
        plan = self._plans.get(decision.call.tool)
        if plan is not None and not plan.outputs:
            return None  # the tool has no output rules (the common case, kept short)
        return check_output(self, decision, result)

    def _store_error(self, failure: StoreFailure) -> Entry:
        return Entry("state", None, Verdict(
            self.settings.on_error, None, "state_unavailable", None,
            f"the state store is unavailable ({failure}); failing closed"), Mode.ENFORCE, _LAST)

    def _inline(self, rule: Rule, subject: Subject) -> Verdict | None:
        try:
            return rule.evaluate(subject)
        except Exception as e:
            return self.error_verdict(rule, e)

    def error_verdict(self, rule: Rule, error: BaseException | None) -> Verdict:
        """The verdict for a rule that raised (``error``), timed out (None) or returned garbage."""
        effect = rule.on_error or self.settings.on_error
        if error is None:
            code = "policy_timeout"
            text = f"rule '{rule.id}' did not answer within the deadline"
        elif isinstance(error, Stuck):
            code = "policy_timeout"
            text = f"rule '{rule.id}' was not run: {error}"
        elif isinstance(error, InvalidResult):
            code = "policy_invalid_result"
            text = f"rule '{rule.id}' {error}"
        else:
            code = "policy_error"
            text = f"rule '{rule.id}' raised {type(error).__name__}: {error}"
        return Verdict(effect, None, code, None, text[:500])

    def _decide(self, call: ToolCall, current: ToolCall, profile: ToolProfile,
                entries: list[Entry], started: float, decision_id: str,
                budgets: tuple[Budget, ...] = ()) -> Decision:
        settings = self.settings
        now = _perf()
        if now > started + settings.timeout and not any(
                e.verdict.code == "policy_timeout" for e in entries):
            # An overrun no rule accounts for. When a rule timed out, its own entry carries the
            # failure in that rule's mode (an observe rule that hangs must not deny).
            entries.append(Entry("deadline", None, Verdict(
                settings.on_error,
                f"the decision took longer than its {settings.timeout * 1000:.0f} ms deadline",
                "policy_timeout"), settings.mode, _LAST))
        if not entries and profile.requires_approval is None:
            # Nobody had an opinion: the default decides (the common case, kept short).
            effect = self._default_effect
            return _new(Decision, (
                effect, call, call.args, self._default_reasons, "default",
                settings.default_source, (),
                self._default_message(call.tool) if effect is not Effect.ALLOW else "",
                settings.mode, self._default_would, decision_id, now - started, settings.name,
                budgets))
        if profile.requires_approval is not None:
            entries = self._apply_profile_approval(profile, entries)
        refusal = self._refusal_key(call.tool, entries) if current is call else None
        if refusal is not None:
            parts = self._refusals.get(refusal)
            if parts is not None:  # one rule refused the call alone: decided as last time
                return _new(Decision, (parts[0], call, call.args, *parts[1:], decision_id,
                                       _perf() - started, settings.name, budgets))

        deciding = [e for e in entries if _decides(e)]
        enforced = [e for e in deciding if e.mode is Mode.ENFORCE]
        chosen = self._combiner.select(enforced)
        observed = len(enforced) != len(deciding) or settings.mode is Mode.OBSERVE

        if chosen is not None:
            effect = chosen.verdict.effect
        elif settings.mode is Mode.ENFORCE:
            effect = settings.default
        else:
            effect = Effect.ALLOW
        would: Effect | None = None
        if observed:
            would_entry = self._combiner.select(deciding)
            would = would_entry.verdict.effect if would_entry is not None else settings.default
            if would is Effect.ALLOW and any(e.verdict.effect is Effect.MODIFY for e in entries):
                would = Effect.MODIFY

        if effect is Effect.ALLOW and current.args is not call.args:
            effect = Effect.MODIFY
        args = current.args if effect.allows else call.args

        reasons = self._reasons(effect, chosen, entries)
        if chosen is not None:
            rule_id, source = chosen.rule, chosen.source
        elif effect is Effect.MODIFY:
            first = next(e for e in entries
                         if e.verdict.effect is Effect.MODIFY and e.mode is Mode.ENFORCE)
            rule_id, source = first.rule, first.source
        else:
            rule_id, source = "default", settings.default_source
        matched = tuple(
            RuleMatch(e.rule, e.source, e.verdict.effect, e.mode, e.verdict.code or "matched",
                      e.verdict.detail or e.verdict.message or "")
            for e in entries
        )
        message = decision_message(effect, call.tool,
                                   rule_id if chosen is not None else "default",
                                   chosen.verdict.message if chosen is not None else None,
                                   reasons)
        if refusal is not None:
            if len(self._refusals) >= _REFUSAL_CACHE:
                self._refusals.clear()
            self._refusals[refusal] = (effect, reasons, rule_id, source, matched, message,
                                       settings.mode, would)
        return Decision(effect, call, args, reasons, rule_id, source, matched, message,
                        settings.mode, would, decision_id, _perf() - started, settings.name,
                        budgets)

    def _refusal_key(self, tool: str, entries: list[Entry]) -> tuple[Any, ...] | None:
        """For a call one enforced rule alone denied, asked or halted: what its decision is a
        function of (the tool and the rule's verdict), so that it is built once and reused;
        None for any other case."""
        if len(entries) != 1:
            return None
        entry = entries[0]
        verdict = entry.verdict
        if entry.mode is not Mode.ENFORCE or self.settings.mode is not Mode.ENFORCE \
                or not entry.decisive or verdict.effect not in _REFUSALS:
            return None
        return (tool, entry.rule, entry.source, verdict.effect, verdict.message, verdict.code,
                verdict.detail)

    def _default_message(self, tool: str) -> str:
        return decision_message(self._default_effect, tool, "default", None,
                                self._default_reasons)

    def _apply_profile_approval(self, profile: ToolProfile, entries: list[Entry]) -> list[Entry]:
        if profile.requires_approval:
            return [*entries, Entry(
                f"tools.{profile.name}", profile.source,
                Verdict(Effect.ASK, None, "requires_approval",
                        detail=f"tool '{profile.name}' requires approval"),
                self.settings.mode, -1)]
        # requires_approval: false exempts the tool from ask rules (kept for attribution);
        # never from a failure under ``on_error: ask``: an error must not become an allow.
        return [
            Entry(e.rule, e.source, e.verdict, e.mode, e.order, decisive=False)
            if e.verdict.effect is Effect.ASK and e.verdict.code not in _FAILURE_CODES else e
            for e in entries
        ]

    def _reasons(self, effect: Effect, chosen: Entry | None,
                 entries: list[Entry]) -> tuple[Reason, ...]:
        reasons: list[Reason] = []
        for e in entries:
            relevant = (
                e.mode is Mode.ENFORCE and e.decisive and (
                    (effect is Effect.MODIFY and e.verdict.effect in (Effect.MODIFY, Effect.ALLOW))
                    or (effect is not Effect.MODIFY and e.verdict.effect.strictness == effect.strictness
                        and (chosen is not None or e.verdict.effect is not Effect.ALLOW))
                )
            )
            if relevant or e.verdict.code in _FAILURE_CODES:
                reasons.append(Reason(e.verdict.code or "matched",
                                      e.verdict.detail or e.verdict.message or e.rule, e.rule))
        if chosen is None and effect is not Effect.MODIFY:
            reasons.extend(self._default_reasons)
        return tuple(reasons)


_REFUSALS = frozenset({Effect.DENY, Effect.ASK, Effect.HALT})
_REFUSAL_CACHE = 4096


def _released(step: StoreStep) -> Flow[StoreFailure | None]:
    result = yield step
    return result if isinstance(result, StoreFailure) else None


def _by_order(entry: Entry) -> int:
    return entry.order


def _freeze(args: Any) -> FrozenDict:
    from callwarden._call import freeze, parse_args

    frozen = freeze(parse_args(args))
    assert isinstance(frozen, FrozenDict)
    return frozen


def _takes_tools(store: Any) -> bool:
    """Whether ``store.history`` and ``store.ahistory`` take ``tools``."""
    try:
        return all("tools" in inspect.signature(fn).parameters
                   for fn in (store.history, store.ahistory))
    except (AttributeError, TypeError, ValueError):
        return False
