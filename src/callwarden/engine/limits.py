"""Limit rules: budgets, rate limits and attempt caps, counted in the state store.

A rule with ``limit:`` is checked after every other rule, in one store round trip for all the
limits that apply to a call::

    limit: {calls: 25, per: session}                          # budget: 25 calls per session
    limit: {calls: 10, window: 60s, per: [agent, tool]}       # rate: sliding 60 s window
    limit: {sum: args.amount, max: 1000, window: 1d, per: principal}   # weighted budget
    limit: {attempts: 5, window: 10m, per: [session, tool, args]}  # the same call retried
    limit: {calls: 2, window: 1d, per: [principal, payee]}   # per value of a role or argument
    limit: {sum: args.amount, max: 500, window: 1d, per: [session, args.currency]}

Budgets and rate limits count only calls the final decision allows; attempt caps count every
call they apply to, so an agent retrying a blocked call in a loop is stopped.

``per:`` a role (``recipient``, ``payee``, ``url``, ``person`` ... or ``roles.NAME`` for one a
profile declares) or an argument (``args.to``) counts per value: values compared as the role's
kind of entity (``Bob@X.com`` is ``bob@x.com``, an IBAN without spaces), a call with several
(two recipients) counted once under each, a call without one under "none".
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from callwarden._call import ToolCall
from callwarden._decision import Budget, Verdict
from callwarden._profiles import ARG_ROLES, ToolProfile
from callwarden._units import parse_duration
from callwarden.conditions.roles import entities_module
from callwarden.engine.combine import Entry
from callwarden.exceptions import ConfigError
from callwarden.state import Counter, CounterState

__all__ = ["MAX_WINDOW", "PER_FIELDS", "LimitSpec", "budgets_of", "describe_exceeded",
           "limit_entry"]

MAX_WINDOW = 10 * 365.25 * 86400.0
"""The longest window a limit may have (10 years): stores keep expiry times in milliseconds."""

PER_FIELDS = ("session", "agent", "principal", "tool", "framework", "args")
_KEYS = ("calls", "attempts", "sum", "max", "window", "per")
_COUNTERS_KEPT = 4096
_MAX_COUNTERS = 64  # counters of one limit for one call (values of its roles, multiplied)
# Roles whose values compare as entities (as roles: compares them); others as written.
_ROLE_KINDS = {"recipient": "emails", "payee": "ibans", "url": "urls", "person": "names"}


@dataclass(frozen=True, slots=True)
class LimitSpec:
    """One compiled ``limit:``: what is counted, how much is allowed, per what, over which window."""

    kind: str                    # "calls" | "sum" | "attempts"
    limit: float
    window: float | None
    per: tuple[str, ...]
    weight_path: tuple[str, ...] | None = None
    # Counters of one weight are the same for the same rule and fields: kept, not rebuilt.
    _counters: dict[tuple[Any, ...], Counter] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False)

    @classmethod
    def parse(cls, config: Any) -> LimitSpec:
        """Validates a ``limit:`` mapping.

        Raises:
            ConfigError: naming the bad key and how to fix it.
        """
        if not isinstance(config, Mapping):
            raise ConfigError("must be a mapping", hint="e.g. limit: {calls: 25, per: session}")
        for key in config:
            if key not in _KEYS:
                raise ConfigError(f"unknown key {key!r}", key=key,
                                  hint=f"allowed: {', '.join(_KEYS)}")
        kinds = [k for k in ("calls", "attempts", "sum") if k in config]
        if len(kinds) != 1:
            raise ConfigError("give exactly one of 'calls', 'attempts' or 'sum'",
                              hint="calls: N (budget or rate), attempts: N (retry cap), "
                                   "sum: args.amount with max: N (weighted budget)")
        kind = kinds[0]
        weight_path = None
        if kind == "sum":
            path = config["sum"]
            if not isinstance(path, str) or not path.startswith("args.") or len(path) < 6:
                raise ConfigError("must name an argument, like args.amount", key="sum")
            weight_path = tuple(path[5:].split("."))
            limit = config.get("max")
            key = "max"
        else:
            if "max" in config:
                raise ConfigError("'max' goes with 'sum'", key="max",
                                  hint=f"write {kind}: N instead")
            limit = config[kind]
            key = kind
        if (isinstance(limit, bool) or not isinstance(limit, int | float)
                or not math.isfinite(limit) or limit < 0):
            raise ConfigError("must be a finite number of zero or more", key=key,
                              hint="infinity or NaN would deny every call; omit the rule "
                                   "for no limit")
        window = None
        if "window" in config:
            try:
                window = parse_duration(config["window"])
            except ValueError as e:
                raise ConfigError(str(e), key="window") from e
            if not math.isfinite(window):
                raise ConfigError("must be a finite duration", key="window",
                                  hint="omit 'window' to count forever")
            if window > MAX_WINDOW:
                raise ConfigError(f"{config['window']!r} is longer than 10 years", key="window",
                                  hint="omit 'window' to count forever")
        per_raw = config.get("per", ())
        per = (per_raw,) if isinstance(per_raw, str) else tuple(per_raw)
        for name in per:
            if not isinstance(name, str) or not (
                    name in PER_FIELDS or name in ARG_ROLES
                    or (name.startswith(("roles.", "args.")) and name.partition(".")[2] != "")):
                raise ConfigError(f"cannot count per {name!r}", key="per",
                                  hint=f"use any of {', '.join(PER_FIELDS)}, a role "
                                       "(recipient, payee, roles.NAME) or an argument "
                                       "(args.NAME); or omit: global")
        return cls(kind, float(limit), window, per, weight_path)

    def counters(self, rule_id: str, call: ToolCall, profile: ToolProfile) -> list[Counter]:
        """The counters this call touches: one, or one per value of the roles and arguments
        it counts per (see the module docstring).

        Raises:
            ValueError: as :meth:`counter`, and when the call holds so many values that it
                would touch more than 64 counters (refused, never counted partly).
        """
        valued = [name for name in self.per if name not in PER_FIELDS]
        if not valued:
            return [self.counter(rule_id, call)]
        base = self.counter(rule_id, call)
        keys = [base.key]
        for name in valued:
            values = _values_per(name, call, profile)
            keys = [f"{key}|{_escape(name)}" if value is None else
                    f"{key}|{_escape(name)}={_escape(value)}" for key in keys for value in values]
            if len(keys) > _MAX_COUNTERS:
                raise ValueError(f"the call holds too many values of {', '.join(valued)} to "
                                 f"count (more than {_MAX_COUNTERS} counters)")
        return [self._valued(base, key) for key in keys]

    def _valued(self, base: Counter, key: str) -> Counter:
        """``base`` under another key (kept: a call's values repeat, a payee, a recipient)."""
        kept = ("value", key, base.weight, base.shard)
        counter = self._counters.get(kept)
        if counter is None:
            counter = Counter(key, base.limit, base.window, base.weight, always=base.always,
                              shard=base.shard)
            if len(self._counters) >= _COUNTERS_KEPT:
                self._counters.clear()
            self._counters[kept] = counter
        return counter

    def counter(self, rule_id: str, call: ToolCall) -> Counter:
        """The counter this call touches.

        The key is ``rule|field=value|...`` with ``%``, ``|`` and ``=`` percent-encoded in
        the rule id and the values, and a field that is not set (None) written without
        ``=``, so that no two calls of different sessions, agents ... share a counter.

        Raises:
            ValueError: when the weight argument is missing or not a number (the engine fails
                closed: a spend budget never lets an unpriced call through).
        """
        kept = None
        if self.weight_path is None and "args" not in self.per:  # (roles: keyed in counters())
            kept = (rule_id, *(getattr(call, name) for name in self.per if name in PER_FIELDS))
            counter = self._counters.get(kept)
            if counter is not None:
                return counter
        parts = [_escape(rule_id)]
        for name in self.per:
            if name not in PER_FIELDS:
                continue  # a role or an argument: see counters()
            if name == "args":
                # The same arguments again: what a retry loop looks like.
                canonical = json.dumps(call.args, sort_keys=True, default=repr)
                parts.append("args=" + hashlib.sha256(canonical.encode()).hexdigest()[:20])
                continue
            field_value = getattr(call, name)
            parts.append(name if field_value is None else f"{name}={_escape(field_value)}")
        key = "|".join(parts)
        weight = 1.0
        if self.weight_path is not None:
            value: Any = call.args
            for part in self.weight_path:
                if not isinstance(value, Mapping) or part not in value:
                    raise ValueError(f"the amount args.{'.'.join(self.weight_path)} is "
                                     "missing; a call without it cannot be counted")
                value = value[part]
            if isinstance(value, bool):
                raise ValueError(f"args.{'.'.join(self.weight_path)} is not a number")
            try:
                weight = float(value)
            except (TypeError, ValueError) as e:
                raise ValueError(f"args.{'.'.join(self.weight_path)} is not a number") from e
            if weight != weight or weight < 0:
                raise ValueError(f"args.{'.'.join(self.weight_path)} must be zero or more")
        # A per-session counter is kept with its session's history: on a Redis Cluster the
        # decision's per-session limits and the history are then one atomic step.
        shard = call.session if "session" in self.per and call.session is not None else None
        counter = Counter(key, self.limit, self.window, weight, always=self.kind == "attempts",
                          shard=shard)
        if kept is not None:
            if len(self._counters) >= _COUNTERS_KEPT:
                self._counters.clear()
            self._counters[kept] = counter
        return counter

    def scope(self) -> str:
        """``per session and tool`` / ``in total``."""
        return f"per {' and '.join(self.per)}" if self.per else "in total"


def _values_per(name: str, call: ToolCall, profile: ToolProfile) -> list[str | None]:
    """The values of a role (``payee``, ``roles.x``) or an argument (``args.to``) a call is
    counted under, normalized and sorted; ``[None]`` when it has none."""
    if name.startswith("args."):
        value: Any = call.args
        for part in name[5:].split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        raw = [] if value is None else list(value) if isinstance(value, list | tuple) else [value]
    else:
        role = name.removeprefix("roles.")
        raw = list(profile.values(call.args, role))
        kind = _ROLE_KINDS.get(role)
        if kind is not None:
            values_of = entities_module().values_of
            raw = [v for item in raw for v in (
                values_of(kind, item if isinstance(item, str) else str(item)) or {str(item)})]
    found = sorted({v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=repr)
                    for v in raw if v is not None})
    return list(found) or [None]


def _escape(value: object) -> str:
    text = str(value)
    if "%" in text or "|" in text or "=" in text:
        text = text.replace("%", "%25").replace("|", "%7C").replace("=", "%3D")
    return text


def limit_entry(rule: Any, state: CounterState, now: float, mode: Any) -> Entry:
    """The entry of a limit rule the call exceeds, with a message saying when it frees up
    (``mode``: the policy's, for a rule without its own)."""
    text = describe_exceeded(rule.id, rule.limit, state, now=now)
    code = "limit.attempts" if rule.limit.kind == "attempts" else "limit.exceeded"
    return Entry(rule.id, rule.source,
                 Verdict(rule.effect, f"{rule.message} ({text})" if rule.message
                         else text[0].upper() + text[1:], code, None, text),
                 rule.mode or mode, rule.order)


def budgets_of(rule_ids: Sequence[str], counters: Sequence[Counter],
               states: Sequence[CounterState], commit: bool) -> tuple[Budget, ...]:
    """What each limit rule has left after a call: its counters' states as the store found
    them, plus this call's weight where the store counted it (``commit``: the decision let
    it through, then only when no limit was exceeded; an attempt cap counts every call). A rule
    counting per value (several counters) reports its tightest."""
    counted = commit and not any(state.exceeded for state in states)
    tightest: dict[str, Budget] = {}
    for rule_id, counter, state in zip(rule_ids, counters, states, strict=True):
        used = state.used + (counter.weight if counted or counter.always else 0.0)
        budget = Budget(rule_id, counter.limit, used, max(0.0, counter.limit - used),
                        state.reset_at)
        if rule_id not in tightest or budget.remaining < tightest[rule_id].remaining:
            tightest[rule_id] = budget
    return tuple(tightest.values())


def describe_exceeded(rule_id: str, spec: LimitSpec, state: CounterState, *,
                      now: float) -> str:
    """The message for a call that went over a limit, saying when it resets."""
    unit = {"calls": "calls", "attempts": "attempts"}.get(
        spec.kind, f"(sum of args.{'.'.join(spec.weight_path or ())})")
    window = f" within {_span(spec.window)}" if spec.window else ""
    text = (f"limit '{rule_id}' reached: {state.used:g} used of {spec.limit:g} {unit} "
            f"{spec.scope()}{window}")
    if state.reset_at is not None:
        wait = max(0.0, state.reset_at - now)
        stamp = time.strftime("%H:%M:%S UTC", time.gmtime(state.reset_at))
        return f"{text}; it frees up at {stamp} (in {_span(wait)}). Wait or stop."
    return f"{text}; it does not reset. Stop and tell the user."


def _span(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}".replace(".0 ", " ")
    return f"{seconds:.0f} s" if seconds >= 1 else f"{seconds * 1000:.0f} ms"
