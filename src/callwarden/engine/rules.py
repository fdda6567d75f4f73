"""Compiled rules: what a rule selects (``match:``), its conditions, its rewrite and its effect."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from types import FunctionType
from typing import Any

from callwarden._call import FrozenDict, ToolCall, freeze
from callwarden._decision import Effect, Mode, Phase, Verdict
from callwarden._profiles import ToolProfile
from callwarden.analysis.globs import GlobSet
from callwarden.conditions.base import Hit, Matcher, Subject
from callwarden.engine.user import as_verdict

__all__ = ["NameSet", "Rewrite", "Rule", "Selector", "union_of_tools"]

# Hit codes that mean "could not be analysed" rather than "matched".
_UNCERTAIN = (".parse_error", ".invalid", ".opaque", ".incomplete", ".error")


class NameSet:
    """Names and name globs (tool, agent, principal, framework), matched case-sensitively."""

    __slots__ = ("_globs", "_seen")

    def __init__(self, patterns: Sequence[str]) -> None:
        self._globs = GlobSet(patterns)
        # Agents, principals and frameworks are few: remember the answer per name.
        self._seen: dict[object, bool] = {}

    def __contains__(self, value: object) -> bool:
        try:
            seen = self._seen.get(value)
        except TypeError:  # unhashable: not a name
            return False
        if seen is not None:
            return seen
        answer = self._match(value)
        if len(self._seen) >= 1024:
            self._seen.clear()
        with suppress(TypeError):  # unhashable: not a name anyway
            self._seen[value] = answer
        return answer

    def _match(self, value: object) -> bool:
        if value is None:
            value = ""  # an absent agent/principal matches only "*"
        if not isinstance(value, str):
            return False
        return self._globs(value)


@dataclass(frozen=True, slots=True)
class Selector:
    """Which calls a rule is about: tool names/globs, kinds, side effects, agents, principals.

    Tool, kind and side-effect constraints are static per tool name (used by the index);
    agent, principal and framework are checked per call. Empty means "any".
    """

    tools: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    side_effects: tuple[str, ...] = ()
    agents: tuple[str, ...] = ()
    principals: tuple[str, ...] = ()
    frameworks: tuple[str, ...] = ()

    def static_match(self, profile: ToolProfile) -> bool:
        """True when the rule can apply to this tool at all."""
        if self.tools and profile.name not in NameSet(self.tools):
            return False
        if self.kinds and not any(_kind_matches(k, profile.kind) for k in self.kinds):
            return False
        if self.side_effects:
            effect = profile.side_effect.value if profile.side_effect else "unknown"
            if effect not in self.side_effects:
                return False
        return True

    def compile_dynamic(self) -> _DynamicCheck | None:
        """Returns the per-call check for agent/principal/framework, or None when there is none."""
        if not (self.agents or self.principals or self.frameworks):
            return None
        return _DynamicCheck(
            NameSet(self.agents) if self.agents else None,
            NameSet(self.principals) if self.principals else None,
            NameSet(self.frameworks) if self.frameworks else None,
        )


def _kind_matches(pattern: str, kind: str) -> bool:
    # "file" selects "file.read" and "file.write"; "file.*" too.
    if pattern == kind:
        return True
    if pattern.endswith(".*"):
        pattern = pattern[:-2]
    return kind.startswith(pattern + ".")


class _DynamicCheck:
    __slots__ = ("agents", "frameworks", "principals")

    def __init__(self, agents: NameSet | None, principals: NameSet | None,
                 frameworks: NameSet | None) -> None:
        self.agents = agents
        self.principals = principals
        self.frameworks = frameworks

    def __call__(self, call: ToolCall) -> bool:
        if self.agents is not None and call.agent not in self.agents:
            return False
        if self.principals is not None and call.principal not in self.principals:
            return False
        return self.frameworks is None or call.framework in self.frameworks


class Rewrite:
    """Argument rewriting of a ``modify`` rule: ``set`` values, ``cap`` numbers, ``unset`` keys.

    Keys are dotted paths into nested arguments (``options.timeout``).
    """

    __slots__ = ("cap", "set", "unset")

    def __init__(self, set: Mapping[str, Any] | None = None, unset: Sequence[str] = (),
                 cap: Mapping[str, float] | None = None) -> None:
        self.set = dict(set or {})
        self.unset = tuple(unset)
        self.cap = dict(cap or {})

    def __bool__(self) -> bool:
        return bool(self.set or self.unset or self.cap)

    def apply(self, args: Mapping[str, Any]) -> tuple[FrozenDict, list[str]]:
        """Returns the rewritten arguments and a description of each change."""
        out: dict[str, Any] = _thaw_shallow(args)
        changes: list[str] = []
        for path, value in self.set.items():
            _assign(out, path, value)
            changes.append(f"set {path}")
        for path, limit in self.cap.items():
            current = _lookup(out, path)
            if isinstance(current, int | float) and not isinstance(current, bool) and current > limit:
                _assign(out, path, limit)
                changes.append(f"capped {path} at {limit}")
        for path in self.unset:
            if _remove(out, path):
                changes.append(f"removed {path}")
        return freeze(out), changes


def _thaw_shallow(args: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (_thaw_shallow(v) if isinstance(v, Mapping) else v) for k, v in args.items()}


def _lookup(args: Mapping[str, Any], path: str) -> Any:
    node: Any = args
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _assign(args: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    node = args
    for part in parents:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[last] = value


def _remove(args: dict[str, Any], path: str) -> bool:
    *parents, last = path.split(".")
    node: Any = args
    for part in parents:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict) and last in node:
        del node[last]
        return True
    return False


class Rule:
    """One compiled rule: a selector, conditions or a policy object, and what to do on a match.

    A declarative rule applies its ``effect`` when every condition returns a Hit. A policy rule
    (``use:`` or a Python policy) delegates to the policy object, which returns the verdict.
    """

    __slots__ = (
        "_allow",
        "_checks",
        "conditions",
        "dynamic",
        "effect",
        "external",
        "history_tools",
        "id",
        "limit",
        "message",
        "mode",
        "needs_facts",
        "needs_history",
        "on_error",
        "on_timeout",
        "order",
        "phase",
        "policy",
        "rewrite",
        "selector",
        "source",
    )

    def __init__(
        self,
        id: str,
        *,
        effect: Effect = Effect.DENY,
        selector: Selector | None = None,
        conditions: Sequence[tuple[str, Matcher]] = (),
        message: str | None = None,
        mode: Mode | None = None,
        on_error: Effect | None = None,
        on_timeout: Effect | None = None,
        source: str | None = None,
        policy: Any = None,
        phase: Phase | str | None = None,
        rewrite: Rewrite | None = None,
        order: int = 0,
        limit: Any = None,
        on: str = "call",
    ) -> None:
        self.id = id
        self.effect = effect
        self._allow = effect is Effect.ALLOW
        self.selector = selector or Selector()
        self.dynamic = self.selector.compile_dynamic()
        self.conditions = tuple(conditions)
        self._checks = tuple(_direct(c) for _, c in self.conditions)
        self.message = message
        self.mode = mode
        self.on_error = on_error
        #: For an ask rule: what a call whose approval request expired unanswered gets
        #: (deny, allow or halt); None: the approvals' on_expiry.
        self.on_timeout = on_timeout
        self.source = source
        self.policy = policy
        self.rewrite = rewrite
        self.order = order
        #: A ``LimitSpec`` for limit rules (checked in the limit phase, after validation).
        self.limit = limit
        #: True when a condition reads the session history (the engine then loads it).
        self.needs_history = any(getattr(c, "uses_history", False) for _, c in self.conditions)
        #: True when a condition reads the session's facts (state/_facts.py): the engine then
        #: loads them, and remembers what calls and untrusted outputs bring.
        self.needs_facts = any(getattr(c, "uses_facts", False) for _, c in self.conditions)
        #: The tools whose history entries those conditions read, or None for any.
        self.history_tools = union_of_tools(
            getattr(c, "history_tools", None) for _, c in self.conditions
            if getattr(c, "uses_history", False))
        if limit is not None:
            phase = Phase.LIMIT
        if on == "output":
            phase = Phase.OUTPUT
        if phase is None:
            phase = getattr(policy, "phase", None) if policy is not None else None
            phase = phase or (Phase.MUTATE if effect is Effect.MODIFY else Phase.VALIDATE)
        self.phase = Phase(phase)
        # Policy objects are user code: they run with a deadline on a worker thread unless
        # they say they are fast and trusted.
        self.external = policy is not None and getattr(policy, "isolated", True)

    def __repr__(self) -> str:
        return f"<Rule {self.id} {self.effect.value} at {self.source}>"

    def applies(self, subject: Subject) -> bool:
        """True when every condition holds (used by limit rules). Exceptions propagate."""
        for check in self._checks:  # noqa: SIM110 (all() over a generator costs more)
            if check(subject) is None:
                return False
        return True

    def evaluate(self, subject: Subject) -> Verdict | None:
        """Evaluates the rule inline. Exceptions propagate: the engine applies ``on_error``."""
        if self.policy is not None:
            return as_verdict(self.policy.evaluate(subject.call, subject))
        hit: Hit | None = None
        details: list[str] | None = None  # made once a condition holds (most never do)
        for check in self._checks:
            hit = check(subject)
            if hit is None:
                return None
            if self._allow and hit.code.endswith(_UNCERTAIN):
                # "Could not analyse" makes deny rules fire (fail closed); it must never make
                # an allow rule fire, or uncertainty would open the door.
                return None
            if details is None:
                details = []
            details.append(hit.detail)
        if details is None:
            details = []
        code = hit.code if hit is not None else "matched"
        if self.effect is Effect.MODIFY:
            args: Mapping[str, Any] | None = None
            if self.rewrite:
                args, changes = self.rewrite.apply(
                    hit.args if hit is not None and hit.args is not None else subject.args
                )
                details.extend(changes)
            elif hit is not None and hit.args is not None:
                args = freeze(hit.args)
            else:
                # The rule matched but nothing says how to rewrite: never pass the call as is.
                return Verdict(Effect.DENY, self.message, "modify_failed", None,
                               "; ".join(details) or "the rewrite could not be computed")
            if args == subject.args:
                return None
            return Verdict(Effect.MODIFY, self.message, "modified" if code == "matched" else code,
                           args, "; ".join(details) or None)
        return tuple.__new__(Verdict, (self.effect, self.message, code, None,
                                       "; ".join(details) or None))


def _direct(condition: Matcher) -> Callable[[Subject], Hit | None]:
    """What calling ``condition`` runs: a matcher object's ``__call__`` as a bound method,
    which the interpreter calls as it does a function (an object's ``__call__`` costs a
    detour through the type's call slot on every call of every rule)."""
    call = type(condition).__call__  # a condition is callable, so its type has one
    return call.__get__(condition) if isinstance(call, FunctionType) else condition


def union_of_tools(parts: Iterable[frozenset[str] | None]) -> frozenset[str] | None:
    """The union of tool sets, None (any tool) as soon as one part is None."""
    found: set[str] = set()
    for part in parts:
        if part is None:
            return None
        found |= part
    return frozenset(found)
