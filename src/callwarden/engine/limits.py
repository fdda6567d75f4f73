"""Limit rules: budgets, rate limits, attempt caps, calls in flight and fan-outs, counted in the
state store.

A rule with ``limit:`` is checked after every other rule, in one store round trip for all the
limits that apply to a call::

    limit: {calls: 25, per: session}                          # budget: 25 calls per session
    limit: {calls: 10, window: 60s, per: [agent, tool]}       # rate: sliding 60 s window
    limit: {sum: args.amount, max: 1000, window: 1d, per: principal}   # weighted budget
    limit: {attempts: 5, window: 10m, per: [session, tool, args]}  # the same call retried
    limit: {attempts: 5, window: 10m, per: [session, tool, args], backoff: 2s}  # and spaced
    limit: {calls: 2, window: 1d, per: [principal, payee]}   # per value of a role or argument
    limit: {sum: args.amount, max: 500, window: 1d, per: [session, args.currency]}
    limit: {concurrent: 3, per: session}                      # calls in flight at once
    limit: {distinct: recipient, max: 10, window: 1h, per: session}   # fan-out

Budgets and rate limits count only calls the final decision allows; attempt caps count every
call they apply to, so an agent retrying a blocked call in a loop is stopped. ``backoff:``
spaces the attempts: the second at least ``base`` after the first, each next one ``factor``
times longer after the one before (``backoff: 2s`` doubles; ``{base: 2s, factor: 3, max: 1m}``),
at most ``max`` (default: the window), an attempt too soon refused (and counted).

``concurrent: N`` holds a slot for each call the final decision allows (an approved call when
its approval is used), let go when its outcome is recorded, at the latest after ``hold``
(default 10 minutes: a caller that crashed never holds one for ever). ``distinct: ROLE`` with
``max: N`` allows at most N values of a role or an argument within the window: a value the
window holds already counts once, a call bringing several (a mail to five people) counts
each, and is refused whole when they do not fit.

``per:`` a role (``recipient``, ``payee``, ``url``, ``person`` ... or ``roles.NAME`` for one a
profile declares) or an argument (``args.to``) counts per value: values compared as the role's
kind of entity (``Bob@X.com`` is ``bob@x.com``, an IBAN without spaces), a call with several
(two recipients) counted once under each, a call without one under "none". ``distinct:``
compares its values the same way.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Protocol

from callwarden._call import ToolCall
from callwarden._decision import Budget, Verdict
from callwarden._profiles import ARG_ROLES, ToolProfile
from callwarden._units import parse_duration
from callwarden.conditions.roles import entities_module
from callwarden.engine.combine import Entry
from callwarden.exceptions import ConfigError
from callwarden.state import Counter, CounterState
from callwarden.state._base import exceeds

__all__ = ["DEFAULT_HOLD", "MAX_WINDOW", "PER_FIELDS", "LimitSpec", "budgets_of",
           "describe_exceeded", "exceeded_entries", "limit_entry"]

MAX_WINDOW = 10 * 365.25 * 86400.0
"""The longest window a limit may have (10 years): stores keep expiry times in milliseconds."""

DEFAULT_HOLD = 600.0
"""How long a call in flight holds its slot of a ``concurrent`` limit at most (10 minutes),
unless its outcome is recorded sooner: a caller that crashed frees it then."""

PER_FIELDS = ("session", "agent", "principal", "tool", "framework", "args")
_KINDS = ("calls", "attempts", "sum", "concurrent", "distinct")
_KEYS = (*_KINDS, "max", "window", "hold", "backoff", "per")
_SPACINGS = 100  # the steps a backoff grows for, at most (then it keeps its last wait)
_MAX_MEMBERS = 1000  # values of a fan-out one call may bring
_LONG_VALUE = 128  # longer values of a fan-out are kept as digests
_COUNTERS_KEPT = 4096
_MAX_COUNTERS = 64  # counters of one limit for one call (values of its roles, multiplied)
# Roles whose values compare as entities (as roles: compares them); others as written.
_ROLE_KINDS = {"recipient": "emails", "payee": "ibans", "url": "urls", "person": "names"}


@dataclass(frozen=True, slots=True)
class LimitSpec:
    """One compiled ``limit:``: what is counted, how much is allowed, per what, over which window
    (for ``concurrent``: how long a slot is held at most)."""

    kind: str                    # "calls" | "sum" | "attempts" | "concurrent" | "distinct"
    limit: float
    window: float | None
    per: tuple[str, ...]
    weight_path: tuple[str, ...] | None = None
    distinct: str | None = None  # the role or argument whose values a fan-out counts
    spacing: tuple[float, ...] = ()  # an attempt cap's backoff: the wait after n attempts
    # Counters of one weight are the same for the same rule and fields: kept, not rebuilt.
    _counters: dict[tuple[Any, ...], Counter] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False)
    # ``per`` read once: the call's fields a kept counter is found by (None: when it is not
    # kept, or for a global limit), the roles and arguments counted per value.
    _fields_of: Callable[[ToolCall], Any] | None = field(
        default=None, init=False, repr=False, compare=False, hash=False)
    _valued_per: tuple[str, ...] = field(
        default=(), init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        fields = [name for name in self.per if name in PER_FIELDS]
        object.__setattr__(self, "_valued_per",
                           tuple(name for name in self.per if name not in PER_FIELDS))
        if fields and self.weight_path is None and "args" not in fields:
            object.__setattr__(self, "_fields_of", attrgetter(*fields))

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
        kinds = [k for k in _KINDS if k in config]
        if len(kinds) != 1:
            raise ConfigError("give exactly one of 'calls', 'attempts', 'sum', 'concurrent' "
                              "or 'distinct'",
                              hint="calls: N (budget or rate), attempts: N (retry cap), "
                                   "sum: args.amount with max: N (weighted budget), "
                                   "concurrent: N (calls in flight), distinct: recipient "
                                   "with max: N (fan-out)")
        kind = kinds[0]
        _check_keys(kind, config)
        weight_path = distinct = None
        if kind in ("sum", "distinct"):
            path = config[kind]
            if kind == "sum" and (not isinstance(path, str) or not path.startswith("args.")
                                  or len(path) < 6):
                raise ConfigError("must name an argument, like args.amount", key="sum")
            if kind == "distinct":
                if not _valued(path):
                    raise ConfigError(f"cannot count the values of {path!r}", key="distinct",
                                      hint="name a role (recipient, payee, url, person, "
                                           "roles.NAME) or an argument (args.NAME)")
                distinct = path
            else:
                weight_path = tuple(path[5:].split("."))
            if "max" not in config:
                raise ConfigError(f"'{kind}' needs 'max'", key=kind,
                                  hint=f"e.g. {kind}: {path}, max: 10")
            limit = config["max"]
            key = "max"
        else:
            limit = config[kind]
            key = kind
        if (isinstance(limit, bool) or not isinstance(limit, int | float)
                or not math.isfinite(limit) or limit < 0):
            raise ConfigError("must be a finite number of zero or more", key=key,
                              hint="infinity or NaN would deny every call; omit the rule "
                                   "for no limit")
        if kind in ("concurrent", "distinct") and limit != int(limit):
            raise ConfigError("must be a whole number", key=key,
                              hint="calls in flight and distinct values are counted one by one")
        window = _duration(config, "window")
        if kind == "concurrent":
            window = _duration(config, "hold") or DEFAULT_HOLD
        spacing = () if "backoff" not in config else _backoff(config["backoff"], limit, window)
        per_raw = config.get("per", ())
        per = (per_raw,) if isinstance(per_raw, str) else tuple(per_raw)
        for name in per:
            if not isinstance(name, str) or not (name in PER_FIELDS or _valued(name)):
                raise ConfigError(f"cannot count per {name!r}", key="per",
                                  hint=f"use any of {', '.join(PER_FIELDS)}, a role "
                                       "(recipient, payee, roles.NAME) or an argument "
                                       "(args.NAME); or omit: global")
        return cls(kind, float(limit), window, per, weight_path, distinct, spacing)

    def counters(self, rule_id: str, call: ToolCall, profile: ToolProfile,
                 member: str | None = None) -> list[Counter]:
        """The counters this call touches: one, or one per value of the roles and arguments
        it counts per (see the module docstring); none for a fan-out the call brings no
        value to. ``member``: what holds a ``concurrent`` limit's slot (the decision's id).

        Raises:
            ValueError: as :meth:`counter`, when the call holds so many values that it
                would touch more than 64 counters or bring more than 1,000 values to a
                fan-out (refused, never counted partly), and for a ``concurrent`` limit
                without a ``member``.
        """
        valued = self._valued_per
        if not valued:
            found = [self.counter(rule_id, call)]
        else:
            base = self.counter(rule_id, call)
            keys = [base.key]
            for name in valued:
                values = _values_per(name, call, profile)
                keys = [f"{key}|{_escape(name)}" if value is None else
                        f"{key}|{_escape(name)}={_escape(value)}" for key in keys
                        for value in values]
                if len(keys) > _MAX_COUNTERS:
                    raise ValueError(f"the call holds too many values of {', '.join(valued)} "
                                     f"to count (more than {_MAX_COUNTERS} counters)")
            found = [self._valued(base, key) for key in keys]
        if self.kind == "concurrent":
            if member is None:
                raise ValueError("a call in flight needs an id to hold its slot")
            return [Counter(c.key, c.limit, c.window, members=(member,), shard=c.shard)
                    for c in found]
        if self.kind == "distinct":
            members = self.members_of(call, profile)
            return [Counter(c.key, c.limit, c.window, members=members, shard=c.shard)
                    for c in found] if members else []
        return found

    def members_of(self, call: ToolCall, profile: ToolProfile) -> tuple[str, ...]:
        """The values of a fan-out a call brings, normalized as ``per:`` values are (a long
        one as a digest); empty for a call without any.

        Raises:
            ValueError: the call brings more than 1,000.
        """
        assert self.distinct is not None
        values = [v for v in _values_per(self.distinct, call, profile) if v]
        if len(values) > _MAX_MEMBERS:
            raise ValueError(f"the call holds more than {_MAX_MEMBERS} values of "
                             f"{self.distinct} to count")
        return tuple(dict.fromkeys(
            v if len(v) <= _LONG_VALUE else "#" + hashlib.sha256(v.encode(
                "utf-8", "surrogatepass")).hexdigest() for v in values))

    def _valued(self, base: Counter, key: str) -> Counter:
        """``base`` under another key (kept: a call's values repeat, a payee, a recipient)."""
        kept = ("value", key, base.weight, base.shard)
        counter = self._counters.get(kept)
        if counter is None:
            counter = Counter(key, base.limit, base.window, base.weight, always=base.always,
                              shard=base.shard, spacing=base.spacing)
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
            fields_of = self._fields_of
            kept = (rule_id,) if fields_of is None else (rule_id, fields_of(call))
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
                          shard=shard, spacing=self.spacing)
        if kept is not None:
            if len(self._counters) >= _COUNTERS_KEPT:
                self._counters.clear()
            self._counters[kept] = counter
        return counter

    def scope(self) -> str:
        """``per session and tool`` / ``in total``."""
        return f"per {' and '.join(self.per)}" if self.per else "in total"


def _valued(name: object) -> bool:
    """Whether ``name`` is a role or an argument whose values a limit can count."""
    return isinstance(name, str) and (name in ARG_ROLES or (
        name.startswith(("roles.", "args.")) and name.partition(".")[2] != ""))


def _duration(config: Mapping[str, Any], key: str) -> float | None:
    """A limit's ``window`` or ``hold``, checked; None when not given."""
    if key not in config:
        return None
    try:
        seconds = parse_duration(config[key])
    except ValueError as e:
        raise ConfigError(str(e), key=key) from e
    if not math.isfinite(seconds):
        raise ConfigError("must be a finite duration", key=key,
                          hint="omit 'window' to count forever" if key == "window"
                          else "omit 'hold' for 10 minutes")
    if seconds > MAX_WINDOW:
        raise ConfigError(f"{config[key]!r} is longer than 10 years", key=key,
                          hint="omit 'window' to count forever" if key == "window"
                          else "omit 'hold' for 10 minutes")
    return seconds


# Keys that go with one kind of limit only, and what to write instead.
_ONLY = {"max": (("sum", "distinct"), "write {kind}: N instead"),
         "hold": (("concurrent",), "'hold' says how long a call in flight holds its slot"),
         "backoff": (("attempts",), "backoff spaces the attempts of an attempt cap")}


def _check_keys(kind: str, config: Mapping[str, Any]) -> None:
    """Rejects the keys that do not go with this kind of limit."""
    for key, (kinds, hint) in _ONLY.items():
        if key in config and kind not in kinds:
            raise ConfigError(f"'{key}' goes with {' or '.join(repr(k) for k in kinds)}",
                              key=key, hint=hint.format(kind=kind))
    if kind == "concurrent" and "window" in config:
        raise ConfigError("a concurrent limit has no window", key="window",
                          hint="it counts the calls running now; 'hold: 10m' bounds how "
                               "long one holds its slot")
    if kind == "distinct" and "window" not in config:
        raise ConfigError("a fan-out needs a window", key="distinct",
                          hint="e.g. window: 1h: at most max values within the last hour")
    if "backoff" in config and "window" not in config:
        raise ConfigError("a backoff needs a window", key="backoff",
                          hint="the attempts within the window are spaced: e.g. window: 10m")


def _backoff(config: Any, limit: float, window: float | None) -> tuple[float, ...]:
    """The waits of ``backoff: 2s`` or ``backoff: {base, factor, max}``, per attempt made."""
    assert window is not None  # checked: a backoff needs a window
    raw = config if isinstance(config, Mapping) else {"base": config}
    if not isinstance(config, Mapping | str | int | float) or isinstance(config, bool):
        raise ConfigError("must be a duration or a mapping", key="backoff",
                          hint="backoff: 2s, or backoff: {base: 2s, factor: 2, max: 1m}")
    for key in raw:
        if key not in ("base", "factor", "max"):
            raise ConfigError(f"unknown key {key!r}", key="backoff",
                              hint="allowed: base, factor, max")
    if "base" not in raw:
        raise ConfigError("needs 'base', the wait after the first attempt", key="backoff",
                          hint="backoff: {base: 2s, factor: 2, max: 1m}")
    waits = {}
    for key in ("base", "max"):
        if key in raw:
            try:
                waits[key] = parse_duration(raw[key])
            except ValueError as e:
                raise ConfigError(f"{key}: {e}", key="backoff") from e
            if waits[key] > window:
                raise ConfigError(f"{key}: {raw[key]!r} is longer than the window", key="backoff",
                                  hint="an attempt that waited the window is the first of a "
                                       "new one: shorten it or lengthen the window")
    factor = raw.get("factor", 2)
    if isinstance(factor, bool) or not isinstance(factor, int | float) \
            or not math.isfinite(factor) or factor < 1:
        raise ConfigError("factor: must be a number of 1 or more", key="backoff",
                          hint="2 doubles the wait after each attempt, 1 keeps it")
    base, most = waits["base"], waits.get("max", window)
    if most < base:
        raise ConfigError("max: is shorter than base", key="backoff")
    spacing = [base]  # the wait after n attempts is spacing[n - 1], then the last one
    while len(spacing) < min(max(int(limit), 1), _SPACINGS):
        wait = min(most, spacing[-1] * factor)
        if wait == spacing[-1]:
            break
        spacing.append(wait)
    return tuple(spacing)


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


def exceeded_entries(rules: Sequence[Any], counters: Sequence[Counter],
                     states: Sequence[CounterState], now: float, mode: Any) -> list[Entry]:
    """The entries of the limits a call went over (``rules``: each counter's); a rule
    counting per value (per recipient) says so once, however many of its counters it
    exceeds."""
    exceeded: dict[int, tuple[Any, CounterState, Counter]] = {}
    for rule, state, counter in zip(rules, states, counters, strict=True):
        if state.exceeded:
            exceeded[id(rule)] = (rule, state, counter)
    return [limit_entry(rule, state, now, mode, counter)
            for rule, state, counter in exceeded.values()]


def limit_entry(rule: Any, state: CounterState, now: float, mode: Any,
                counter: Counter | None = None) -> Entry:
    """The entry of a limit rule the call exceeds, with a message saying what is left and when
    it frees up (``mode``: the policy's, for a rule without its own; ``counter``: the one the
    store found exceeded, for a fan-out's count of this call's values)."""
    spec = rule.limit
    text = describe_exceeded(rule.id, spec, state, now=now, counter=counter)
    if spec.kind == "attempts":
        code = "limit.attempts" if exceeds(state.used, 1.0, spec.limit) else "limit.backoff"
    else:
        code = "limit.exceeded"
    return Entry(rule.id, rule.source,
                 Verdict(rule.effect, f"{rule.message} ({text})" if rule.message
                         else text[0].upper() + text[1:], code, None, text),
                 rule.mode or mode, rule.order)


def budgets_of(rules: Sequence[_Named], counters: Sequence[Counter],
               states: Sequence[CounterState], commit: bool) -> tuple[Budget, ...]:
    """What each limit rule (``rules``: each counter's, by its ``id``) has left after a call:
    its counters' states as the store found them, plus this call's weight where the store
    counted it (``commit``: the decision let it through, then only when no limit was
    exceeded; an attempt cap counts every call; a call in flight weighs its slot, a fan-out
    the values it brings). A rule counting per value (several counters) reports its
    tightest."""
    if len(states) == 1 and len(counters) == 1 and len(rules) == 1:  # one limit: most calls
        state = states[0]
        return (_budget(rules[0].id, counters[0], state, commit and not state.exceeded),)
    counted = commit
    for state in states:
        if state.exceeded:
            counted = False
            break
    tightest: dict[str, Budget] = {}
    for rule, counter, state in zip(rules, counters, states, strict=True):
        budget = _budget(rule.id, counter, state, counted)
        found = tightest.get(rule.id)
        if found is None or budget.remaining < found.remaining:
            tightest[rule.id] = budget
    return tuple(tightest.values())


def _budget(rule_id: str, counter: Counter, state: CounterState, counted: bool) -> Budget:
    """One counter's budget: its state, plus this call's weight when it ``counted``."""
    used = state.used + (counter.cost if counted or counter.always else 0.0)
    left = counter.limit - used  # never below zero (not max(): a builtin call)
    return _new(Budget, (rule_id, counter.limit, used, left if left > 0.0 else 0.0,
                         state.reset_at))


class _Named(Protocol):
    """A limit rule, as ``budgets_of`` reads it."""

    @property
    def id(self) -> str: ...


_new = tuple.__new__  # a NamedTuple's generated __new__ is a Python call; this is not


def describe_exceeded(rule_id: str, spec: LimitSpec, state: CounterState, *,
                      now: float, counter: Counter | None = None) -> str:
    """The message for a call that went over a limit: what is used and left, and when it
    frees up (or why it never will)."""
    window = f" within {_span(spec.window)}" if spec.window else ""
    if spec.kind == "concurrent":
        text = (f"limit '{rule_id}' reached: {state.used:g} of {spec.limit:g} calls in flight "
                f"{spec.scope()}; a slot frees up when a running call finishes")
        if state.reset_at is None:
            return f"{text}. Wait for one to finish, or stop and tell the user."
        return (f"{text}, at the latest at {_stamp(state.reset_at)} (in "
                f"{_span(max(0.0, state.reset_at - now))}). Wait or stop.")
    if spec.kind == "distinct":
        brought = len(counter.members) if counter is not None else 1
        text = (f"limit '{rule_id}' reached: {state.used:g} other {spec.distinct} values used "
                f"of {spec.limit:g} {spec.scope()}{window}, and this call names {brought} "
                f"({max(0.0, spec.limit - state.used):g} left)")
        if state.reset_at is None:
            return (f"{text}; it never fits. Name fewer {spec.distinct} values in one call, "
                    "or stop and tell the user.")
        return f"{text}; it frees up at {_stamp(state.reset_at)} (in " \
               f"{_span(max(0.0, state.reset_at - now))}). Wait or stop."
    if spec.kind == "attempts" and spec.spacing and not exceeds(state.used, 1.0, spec.limit):
        text = (f"limit '{rule_id}': retried too soon, attempt {state.used + 1:g} of "
                f"{spec.limit:g} {spec.scope()}{window} (it counts: "
                f"{max(0.0, spec.limit - state.used - 1):g} left)")
        if state.reset_at is None:
            return f"{text}. Stop and tell the user."
        return (f"{text}; wait {_span(max(0.0, state.reset_at - now))} (until "
                f"{_stamp(state.reset_at)}) before the next attempt, or stop.")
    unit = {"calls": "calls", "attempts": "attempts"}.get(
        spec.kind, f"(sum of args.{'.'.join(spec.weight_path or ())})")
    text = (f"limit '{rule_id}' reached: {state.used:g} used of {spec.limit:g} {unit} "
            f"{spec.scope()}{window}")
    if state.reset_at is not None:
        wait = max(0.0, state.reset_at - now)
        return f"{text}; it frees up at {_stamp(state.reset_at)} (in {_span(wait)}). Wait or stop."
    return f"{text}; it does not reset. Stop and tell the user."


def _stamp(at: float) -> str:
    return time.strftime("%H:%M:%S UTC", time.gmtime(at))


def _span(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}".replace(".0 ", " ")
    return f"{seconds:.0f} s" if seconds >= 1 else f"{seconds * 1000:.0f} ms"
