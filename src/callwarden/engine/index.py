"""The rule index: finds the rules that can match a tool without looking at rules for other
tools, and splits them by phase into a per-tool :class:`Plan`."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from callwarden._decision import Effect, Mode, Phase
from callwarden._profiles import ToolProfile
from callwarden.analysis.globs import is_glob
from callwarden.conditions.base import Subject
from callwarden.engine.rules import Rule, union_of_tools

__all__ = ["Plan", "RuleIndex", "refuses_every_call"]


@dataclass(frozen=True, slots=True)
class Plan:
    """The rules that can match one tool, split by phase, in policy order.

    ``by_value`` holds validate rules whose only condition compares one argument with literal
    values: ``(argument, {value: rules})``, so they cost one lookup whatever their number.
    """

    mutators: tuple[Rule, ...]
    validators: tuple[Rule, ...]
    by_value: tuple[tuple[str, dict[Any, tuple[Rule, ...]]], ...] = ()
    profile: ToolProfile | None = None
    limits: tuple[Rule, ...] = ()
    history: bool = False
    outputs: tuple[Rule, ...] = ()
    external_validators: tuple[Rule, ...] = ()
    #: Nothing to drive: no user policies, no rewrites, no limits (decided without a generator).
    fast: bool = False
    #: The tools whose history entries the rules read (None: any; see ``history_tools``).
    history_tools: frozenset[str] | None = None
    #: Nothing to drive but limits: decided without a generator on a store that never waits.
    counted: bool = False
    #: Per validate rule, the arguments one of which a call needs for the rule to hold (those
    #: of the roles its ``roles:`` / ``untrusted:`` condition reads), None for any call; empty
    #: when no rule has such a condition.
    needs: tuple[frozenset[str] | None, ...] = ()
    #: Per argument names a call has, in its order (kept: calls repeat theirs), what ``shape``
    #: says.
    shapes: dict[tuple[str, ...], tuple[tuple[Rule, ...], bool, bool]] = field(
        default_factory=dict)
    #: A rule that applies to every call of the tool reads the session's facts.
    facts_always: bool = False
    #: The arguments one of which a call needs for a validate rule reading the facts to apply,
    #: and those holding a value the session remembers once the call runs (``in: seen``).
    facts_args: frozenset[str] = frozenset()
    seen_args: frozenset[str] = frozenset()
    #: A rule of the plan may ask a person (its effect, or its on_error), or the tool's
    #: profile always asks: a call may end up approved, and so journaled.
    may_ask: bool = False
    #: The validate rules depend on the call's arguments (see validators_for).
    narrowed: bool = field(init=False)
    #: Some call's facts are read or written (see reads_facts and remembers): when False,
    #: neither needs asking.
    touches_facts: bool = field(init=False)
    #: Conditions each standing for several validate rules that hold nothing else (path
    #: deny globs, shell deny patterns, one argument's values: see ``_unions``); ``grouped``:
    #: the ids of those rules, and ``ungrouped``: the validate rules without them.
    unions: tuple[Any, ...] = ()
    grouped: frozenset[int] = frozenset()
    ungrouped: tuple[Rule, ...] = ()
    #: A limit is ``concurrent``: an allowed call holds slots until its outcome lets them go.
    holds_slots: bool = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "narrowed", bool(self.by_value or self.needs))
        object.__setattr__(self, "touches_facts",
                           bool(self.facts_always or self.facts_args or self.seen_args))
        object.__setattr__(self, "holds_slots",
                           any(rule.limit.kind == "concurrent" for rule in self.limits))

    def unioned(self, rules: Sequence[Rule], subject: Subject) -> Sequence[Rule]:
        """``rules`` without the rules the unions stand for, when no union finds anything in
        the call (then none of them would); ``rules`` as they are otherwise, each rule then
        judging the call itself (an error included: each meets it with its ``on_error``)."""
        for union in self.unions:
            try:
                if union(subject) is not None:
                    return rules
            except Exception:
                return rules
        if rules is self.validators:
            return self.ungrouped
        return [rule for rule in rules if id(rule) not in self.grouped]

    def reads_facts(self, args: Collection[str]) -> bool:
        """Whether deciding a call with these arguments needs the session's facts: a rule that
        applies reads them, or the call holds a value they remember once it runs."""
        return self.facts_always or not (self.facts_args.isdisjoint(args)
                                         and self.seen_args.isdisjoint(args))

    def remembers(self, args: Collection[str]) -> bool:
        """Whether a call with these arguments holds a value the session remembers as seen."""
        return not self.seen_args.isdisjoint(args)

    def shape(self, args: Mapping[str, Any]) -> tuple[tuple[Rule, ...], bool, bool]:
        """What a call with these argument names needs, found once per set of names: the
        validate rules that can match it (the argument-value index aside), whether its
        decision reads the session's facts, whether it holds a value remembered as seen."""
        if not (self.needs or self.touches_facts):
            return self.validators, False, False  # the same for every call of the tool
        names = tuple(args)  # cheaper to build and hash than a set; a call keeps its order
        found = self.shapes.get(names)
        if found is None:
            applicable = self.validators if not self.needs else tuple(
                r for r, need in zip(self.validators, self.needs, strict=True)
                if need is None or not need.isdisjoint(names))
            if len(self.shapes) >= _SHAPES_KEPT:
                self.shapes.clear()
            found = self.shapes[names] = (applicable, self.reads_facts(names),
                                          self.remembers(names))
        return found

    def validators_for(self, args: Mapping[str, Any],
                       applicable: Sequence[Rule] | None = None) -> Sequence[Rule]:
        """The validate rules that can match these arguments (``applicable``: those of their
        ``shape``, when known)."""
        found: Sequence[Rule] = self.validators
        if applicable is not None:
            found = applicable
        elif self.needs:
            found = self.shape(args)[0]
        if not self.by_value:
            return found
        found = list(found)
        for key, table in self.by_value:
            value = args.get(key)
            if value is None:
                continue
            try:
                rules = table.get(value)
            except TypeError:  # unhashable argument value: no literal can equal it
                continue
            if rules:
                found.extend(rules)
        return found


_SHAPES_KEPT = 64


def _needs(rule: Rule, profile: ToolProfile) -> frozenset[str] | None:
    """The arguments one of which a call needs for ``rule`` to hold: those of the roles of its
    first condition that holds only for a call with a value of one (``roles:``,
    ``untrusted:``); a dotted name needs its first part. None when any call may match."""
    if rule.policy is not None:
        return None
    for _, condition in rule.conditions:
        roles = getattr(condition, "needs_roles", None)
        if roles:
            return frozenset(name.split(".", 1)[0] for role in roles
                             for name in profile.arg_names(role))
    return None


def _value_index(rule: Rule) -> tuple[str, frozenset[Any]] | None:
    if rule.policy is not None or rule.phase is not Phase.VALIDATE or len(rule.conditions) != 1:
        return None
    return getattr(rule.conditions[0][1], "index_key", None)


def _unions(rules: Sequence[Rule]) -> dict[int, Any]:
    """Rule id -> one condition standing for it and the other validate rules whose only
    condition is of its kind with the same ``group_key`` (path deny globs, shell deny
    patterns, one argument's values; whatever their tools), made by the kind's ``union``,
    which finds nothing exactly when none of them would: a tool with many such rules checks
    one condition however many they are, and runs them one by one only when it finds
    something. Made as the policy loads, outside any decision's deadline."""
    groups: dict[tuple[Any, Any], list[Rule]] = {}  # (condition class, its group_key)
    for rule in rules:
        if rule.policy is not None or rule.phase is not Phase.VALIDATE or rule.external or \
                rule.dynamic is not None or len(rule.conditions) != 1:
            continue
        condition = rule.conditions[0][1]
        key = getattr(condition, "group_key", None)
        if key is not None:
            groups.setdefault((type(condition), key), []).append(rule)
    found: dict[int, Any] = {}
    for (kind, _), members in groups.items():
        if len(members) > 1:
            try:
                union = kind.union([rule.conditions[0][1] for rule in members])
            except Exception:  # no union: each rule is checked alone, as without one
                continue
            for rule in members:
                found[id(rule)] = union
    return found


class RuleIndex:
    """Finds the rules that can match a tool without looking at rules for other tools.

    Rules are bucketed by exact tool name, by kind, by glob, or as "any tool"; a tool's plan is
    built once from its buckets and cached (bounded), so a decision's cost does not grow with
    rules written for other tools.
    """

    _MAX_CACHE = 4096

    def __init__(self, rules: Sequence[Rule],
                 seen_roles: Sequence[str] = ()) -> None:
        self._seen_roles = tuple(seen_roles)
        self._by_name: dict[str, list[Rule]] = {}
        self._by_kind: dict[str, list[Rule]] = {}
        self._globbed: list[Rule] = []
        self._any: list[Rule] = []
        for rule in rules:
            sel = rule.selector
            if sel.tools:
                names = [t for t in sel.tools if not is_glob(t)]
                for name in names:
                    self._by_name.setdefault(name, []).append(rule)
                if len(names) != len(sel.tools):
                    self._globbed.append(rule)
            elif sel.kinds:
                for kind in sel.kinds:
                    root = kind[:-2] if kind.endswith(".*") else kind
                    self._by_kind.setdefault(root, []).append(rule)
            else:
                self._any.append(rule)
        self._cache: dict[str, Plan] = {}
        self._union_of = _unions(rules)

    def plan(self, profile: ToolProfile) -> Plan:
        """Returns the plan for a tool (cached per tool name)."""
        plan = self._cache.get(profile.name)
        if plan is None or plan.profile is not profile:
            plan = self._build(profile)
            if len(self._cache) >= self._MAX_CACHE:
                self._cache.clear()
            self._cache[profile.name] = plan
        return plan

    def _build(self, profile: ToolProfile) -> Plan:
        seen: dict[int, Rule] = {}
        kind = profile.kind
        candidates: list[Rule] = list(self._by_name.get(profile.name, ()))
        candidates += self._by_kind.get(kind, ())
        if "." in kind:
            candidates += self._by_kind.get(kind.split(".", 1)[0], ())
        candidates += self._globbed
        candidates += self._any
        for rule in candidates:
            if id(rule) not in seen and rule.selector.static_match(profile):
                seen[id(rule)] = rule
        ordered = sorted(seen.values(), key=lambda r: r.order)
        scanned: list[Rule] = []
        tables: dict[str, dict[Any, list[Rule]]] = {}
        for rule in ordered:
            if rule.phase is not Phase.VALIDATE:
                continue
            key = _value_index(rule)
            if key is None:
                scanned.append(rule)
                continue
            table = tables.setdefault(key[0], {})
            for value in key[1]:
                table.setdefault(value, []).append(rule)
        # Indexing pays off only when several rules share an argument.
        by_value = []
        for name, table in tables.items():
            rules = {id(r): r for rs in table.values() for r in rs}
            if len(rules) < 3:
                scanned.extend(rules.values())
            else:
                by_value.append((name, {v: tuple(rs) for v, rs in table.items()}))
        scanned.sort(key=lambda r: r.order)
        needs = tuple(_needs(rule, profile) for rule in scanned)
        members: dict[int, tuple[Any, list[Rule]]] = {}
        for rule in scanned:
            union = self._union_of.get(id(rule))
            if union is not None:
                members.setdefault(id(union), (union, []))[1].append(rule)
        groups = [(union, rules) for union, rules in members.values() if len(rules) > 1]
        grouped = frozenset(id(rule) for _, rules in groups for rule in rules)
        # Rules that read the session's facts, and when (see Plan.reads_facts).
        facts_always = any(r.needs_facts for r in ordered if r.phase is not Phase.VALIDATE) \
            or any(r.needs_facts and need is None for r, need in zip(scanned, needs, strict=True))
        facts_args = frozenset(name for r, need in zip(scanned, needs, strict=True)
                               if r.needs_facts and need is not None for name in need)
        seen_args = frozenset(name.split(".", 1)[0] for role in self._seen_roles
                              for name in profile.arg_names(role))
        return Plan(
            tuple(r for r in ordered if r.phase is Phase.MUTATE),
            tuple(scanned),
            tuple(by_value),
            profile,
            tuple(r for r in ordered if r.phase is Phase.LIMIT),
            any(r.needs_history for r in ordered),
            tuple(r for r in ordered if r.phase is Phase.OUTPUT),
            tuple(r for r in ordered if r.phase is Phase.VALIDATE and r.external),
            not any(r.phase in (Phase.MUTATE, Phase.LIMIT) or r.external or r.needs_history
                    for r in ordered),
            union_of_tools(r.history_tools for r in ordered if r.needs_history),
            not any(r.phase is Phase.MUTATE or r.external or r.needs_history for r in ordered),
            needs if any(need is not None for need in needs) else (),
            facts_always=facts_always,
            facts_args=facts_args,
            seen_args=seen_args,
            may_ask=bool(profile.requires_approval) or any(
                Effect.ASK in (r.effect, r.on_error) for r in ordered),
            unions=tuple(union for union, _ in groups),
            grouped=grouped,
            ungrouped=tuple(rule for rule in scanned if id(rule) not in grouped),
        )


def refuses_every_call(plan: Plan, mode: Mode, default: Effect, first_match: bool) -> bool:
    """Whether a tool's plan refuses every call whatever its arguments: an enforced deny or
    halt rule with no condition (the first of its rules under first-match), or no rule at all
    under a refusing default. Conservative: a rule that could allow some call keeps the tool."""
    rules = sorted((*plan.mutators, *plan.validators,
                    *(r for _, table in plan.by_value for rs in table.values() for r in rs)),
                   key=lambda r: r.order)
    for rule in rules:
        unconditional = (not rule.conditions and rule.dynamic is None and rule.policy is None
                         and rule.phase is Phase.VALIDATE)
        if unconditional and rule.effect in (Effect.DENY, Effect.HALT) \
                and (rule.mode or mode) is Mode.ENFORCE:
            return True
        if first_match:
            return False  # an earlier rule may decide first
    if rules or plan.limits:
        return False
    return mode is Mode.ENFORCE and default in (Effect.DENY, Effect.HALT)
