"""One rule of the policy file turned into a compiled :class:`~callwarden.engine.Rule`: its
selector, conditions (through the condition registry), rewrite, limit or provider; and the
``tools:`` profiles and ``lists:`` a policy declares."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from callwarden._decision import Effect, Mode, Phase
from callwarden._profiles import ARG_ROLES, SideEffect, ToolProfile, default_profile, kind_side_effect
from callwarden.conditions.base import (
    CompileEnv,
    Hit,
    Matcher,
    Subject,
    condition_keys,
    get_condition,
)
from callwarden.engine.limits import LimitSpec
from callwarden.engine.rules import Rewrite, Rule, Selector, union_of_tools
from callwarden.exceptions import ConfigError
from callwarden.policyfile.caps import PatternBudget, count_strings
from callwarden.policyfile.check import Checker, Path_
from callwarden.policyfile.examples import collect_examples
from callwarden.policyfile.lists import load_lists, resolve_items
from callwarden.policyfile.names import Kinds, profile_kind_problem
from callwarden.policyfile.providers import ProviderAllowlist, ProviderMode, compile_provider
from callwarden.policyfile.yamlsrc import Lines

__all__ = ["RuleContext", "compile_rule", "parse_lists", "parse_named_conditions", "parse_profiles"]


@dataclass(frozen=True, slots=True)
class RuleContext:
    """What compiling any rule of one policy needs beyond the rule itself.

    Attributes:
        kinds: the kinds ``match:`` may name (built-in, declared in ``tools:``, families).
        providers: ``"load"`` imports ``use:`` targets, ``"check"`` checks their form only.
        allowlist: what ``use:`` may name, or None for anything.
        budget: the patterns the policy may still compile.
    """

    kinds: Kinds = field(default_factory=Kinds)
    providers: ProviderMode = "load"
    allowlist: ProviderAllowlist | None = None
    budget: PatternBudget = field(default_factory=PatternBudget)
    #: the policy's named ``conditions:``, compiled once, for the rules' ``when:`` / ``unless:``
    named: dict[str, list[tuple[str, Matcher]]] = field(default_factory=dict)

_RULE_KEYS = ("id", "description", "match", "effect", "message", "mode", "on_error", "phase",
              "use", "config", "examples", "set", "unset", "cap", "limit", "on", "when", "unless",
              "on_timeout")


_MATCH_KEYS = ("tool", "kind", "side_effect", "agent", "principal", "framework")


_PROFILE_KEYS = ("kind", "side_effect", "requires_approval", "args", "roles", "output",
                 "description", *ARG_ROLES)
_ROLE_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")
_CONDITION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")


def parse_lists(raw: Any, check: Checker, base_dir: Path,
                roots: Sequence[Path] = ()) -> dict[str, Any]:
    """The ``lists:`` section; list files may lie under ``base_dir`` or one of ``roots``."""
    if raw is None:
        return {}
    try:
        return load_lists(raw, base_dir, roots=roots)
    except ConfigError as e:
        check.error(("lists",) if e.key is None else ("lists", e.key), str(e), e.hint)
        return {}


def parse_profiles(raw: Any, check: Checker, lines: Lines) -> dict[str, ToolProfile]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        check.error(("tools",), "must map tool names to profiles",
                    "e.g. tools: {bash: {kind: shell, command: command}}")
        return {}
    out: dict[str, ToolProfile] = {}
    for name, spec in raw.items():
        path: Path_ = ("tools", name)
        check.globs((str(name),), path)
        if spec is None:
            spec = {}
        if not isinstance(spec, Mapping):
            check.error(path, "a tool profile must be a mapping", "e.g. {kind: file.read, path: path}")
            continue
        check.keys(spec, path, _PROFILE_KEYS, f"the profile of '{name}'")
        base = default_profile(str(name))
        kind = spec.get("kind", base.kind)
        if not isinstance(kind, str) or not kind:
            check.error((*path, "kind"), "must be a string such as shell, file.read, http")
            kind = base.kind
        elif (problem := profile_kind_problem(kind)) is not None:
            check.error((*path, "kind"), *problem)
            kind = base.kind
        side_effect = base.side_effect if "kind" not in spec else kind_side_effect(kind)
        if "side_effect" in spec:
            value = check.choice(spec["side_effect"], (*path, "side_effect"),
                                 [s.value for s in SideEffect])
            side_effect = SideEffect(value) if value else side_effect
        requires = spec.get("requires_approval")
        if requires is not None and not isinstance(requires, bool):
            check.error((*path, "requires_approval"), "must be true or false")
            requires = None
        roles: dict[str, str] = {}
        if "args" in spec:
            if isinstance(spec["args"], Mapping) and all(
                    isinstance(k, str) and isinstance(v, str) for k, v in spec["args"].items()):
                roles.update(spec["args"])
            else:
                check.error((*path, "args"), "must map roles to argument names",
                            "e.g. args: {command: cmd}")
        for role in ARG_ROLES:
            if role in spec:
                if isinstance(spec[role], str):
                    roles[role] = spec[role]
                else:
                    check.error((*path, role), "must be the name of an argument")
        output = check.choice(spec["output"], (*path, "output"), ("untrusted", "trusted")) \
            if "output" in spec else None
        out[str(name)] = ToolProfile(name=str(name), kind=kind, args=roles,
                                     roles=_roles(spec.get("roles"), (*path, "roles"), check),
                                     untrusted=None if not output else output == "untrusted",
                                     side_effect=side_effect, requires_approval=requires,
                                     source=lines.source(path))
    return out


def _roles(raw: Any, path: Path_, check: Checker) -> dict[str, tuple[str, ...]]:
    """A profile's ``roles:``: role -> the argument (or list of arguments) playing it."""
    if raw is None:
        return {}
    hint = "e.g. roles: {recipient: [to, cc, bcc], text: body}"
    if not isinstance(raw, Mapping):
        check.error(path, "must map roles to argument names", hint)
        return {}
    out: dict[str, tuple[str, ...]] = {}
    for role, names in raw.items():
        if not isinstance(role, str) or not _ROLE_NAME.match(role):
            check.error((*path, str(role)), "a role is a lower-case name such as recipient",
                        "built-in roles: " + ", ".join(ARG_ROLES))
            continue
        listed = [names] if isinstance(names, str) else names
        if not isinstance(listed, list) or not listed or not all(
                isinstance(n, str) and n for n in listed):
            check.error((*path, role), "must name an argument or a list of arguments", hint)
            continue
        out[role] = tuple(listed)
    return out


def compile_rule(raw: Any, path: Path_, check: Checker, lines: Lines, env: CompileEnv, order: int,
                 examples: list[tuple[Path_, str, Mapping[str, Any]]],
                 ctx: RuleContext | None = None) -> Rule | None:
    """One rule, or None after reporting its problems to ``check``."""
    ctx = ctx or RuleContext()
    if not isinstance(raw, Mapping):
        check.error(path, "a rule must be a mapping", "write '- id: my-rule' then its keys")
        return None
    conditions_known = condition_keys()
    check.keys(raw, path, (*_RULE_KEYS, *sorted(conditions_known)), "a rule")
    rule_id = raw.get("id")
    if not isinstance(rule_id, str) or not rule_id.strip():
        check.error((*path, "id") if "id" in raw else path, "every rule needs an 'id' (a string)",
                    "e.g. id: no-credentials")
        rule_id = f"rules[{path[-1]}]"
    problems_before = len(check.problems)

    effect_value = raw.get("effect", "deny")
    effect_name = check.choice(effect_value, (*path, "effect"),
                               ("allow", "modify", "deny", "ask", "halt"))
    effect = Effect(effect_name) if effect_name else Effect.DENY
    mode = None
    if "mode" in raw:
        m = check.choice(raw["mode"], (*path, "mode"), ("enforce", "observe"))
        mode = Mode(m) if m else None
    on_error = None
    if "on_error" in raw:
        oe = check.choice(raw["on_error"], (*path, "on_error"), ("deny", "halt", "ask", "allow"))
        on_error = Effect(oe) if oe else None
    on_timeout = None
    if "on_timeout" in raw:
        ot = check.choice(raw["on_timeout"], (*path, "on_timeout"), ("deny", "allow", "halt"))
        on_timeout = Effect(ot) if ot else None
        if effect is not Effect.ASK:
            check.error((*path, "on_timeout"), "only a rule that asks has approvals that can "
                        "time out", "add effect: ask, or drop on_timeout")
    message = raw.get("message")
    if message is not None and not isinstance(message, str):
        check.error((*path, "message"), "must be a string")
        message = None
    phase = raw.get("phase")
    if phase is not None and phase not in (Phase.MUTATE, Phase.VALIDATE):
        check.error((*path, "phase"), "must be 'mutate' or 'validate'")
        phase = None

    selector = _selector(raw.get("match"), (*path, "match"), check, ctx.kinds)

    on = raw.get("on", "call")
    if on not in ("call", "output"):
        check.error((*path, "on"), "must be 'call' or 'output'",
                    "output rules look at what the tool returned, as args.output")
        on = "call"
    if on == "output":
        if effect is Effect.ASK:
            check.error((*path, "effect"), "an output rule cannot ask: the tool already ran",
                        "use modify (redact or cut), deny (replace the output) or halt")
        for key in ("use", "limit", "examples"):
            if key in raw:
                check.error((*path, key), f"'{key}' is not available on output rules")

    limit = None
    if "limit" in raw:
        try:
            limit = LimitSpec.parse(raw["limit"])
        except ConfigError as e:
            check.error((*path, "limit") if e.key is None else (*path, "limit", e.key), str(e),
                        e.hint)
        if effect not in (Effect.DENY, Effect.ASK, Effect.HALT):
            check.error((*path, "effect"), "a limit rule's effect is what exceeding it does",
                        "use deny (default), ask or halt")
        if "use" in raw:
            check.error((*path, "use"), "a limit rule cannot delegate to a provider")

    own = _conditions(raw, path, check, env, ctx)
    if own is None:
        return None
    when, unless = _named(raw, path, check, env, ctx)
    conditions = [*when, *own, *unless]  # the named ones first: they guard what follows

    rewrite = None
    if any(k in raw for k in ("set", "unset", "cap")):
        rewrite = _rewrite(raw, path, check)
        if effect is not Effect.MODIFY:
            check.error((*path, "effect"), "'set', 'unset' and 'cap' rewrite arguments",
                        "add 'effect: modify' to this rule")

    policy = None
    if "use" in raw:
        policy = compile_provider(raw, path, check, env.base_dir, ctx.providers, ctx.allowlist)
        if conditions or rewrite:
            check.error((*path, "use"), "a 'use' rule delegates to its provider",
                        "move conditions into a separate rule")
    elif "config" in raw:
        check.error((*path, "config"), "'config' is only for providers", "add 'use: module:Class'")

    if effect is Effect.MODIFY and policy is None and limit is None and not rewrite and not any(
            k in ("secrets", "content", "max_chars") for k, _ in conditions):
        check.error((*path, "effect"), "a modify rule must say how to rewrite",
                    "add 'set:', 'cap:' or 'unset:' (or a redacting condition)")

    if "examples" in raw:
        collect_examples(raw["examples"], (*path, "examples"), check, examples)

    if len(check.problems) != problems_before:
        return None
    return Rule(
        rule_id.strip(), effect=effect, selector=selector, conditions=conditions,
        message=message, mode=mode, on_error=on_error, source=lines.source(path),
        policy=policy, phase=phase, rewrite=rewrite, order=order, limit=limit, on=on,
        on_timeout=on_timeout,
    )


def _is_list_ref(value: Any) -> bool:
    return isinstance(value, Mapping) and list(value) == ["list"]


def _expand_lists(value: Any, env: CompileEnv) -> Any:
    """Replaces ``{list: name}`` references anywhere in a condition's config by the named
    list's items, so every condition accepts named lists (``deny_domains: [{list: blocked}]``).

    Raises:
        ConfigError: for an unknown list.
    """
    if not env.lists and not isinstance(value, Mapping | list):
        return value
    if _is_list_ref(value):
        return resolve_items(value, env)
    if isinstance(value, list):
        if any(_is_list_ref(item) for item in value):
            flat: list[Any] = []
            for item in value:
                flat.extend(resolve_items(item, env) if _is_list_ref(item) else [item])
            return flat
        return [_expand_lists(item, env) for item in value]
    if isinstance(value, Mapping):
        return {k: _expand_lists(v, env) for k, v in value.items()}
    return value


def _conditions(raw: Mapping[str, Any], path: Path_, check: Checker, env: CompileEnv,
                ctx: RuleContext) -> list[tuple[str, Matcher]] | None:
    """The conditions among ``raw``'s keys, compiled; None once the pattern budget ran out."""
    conditions_known = condition_keys()
    conditions: list[tuple[str, Matcher]] = []
    for key in raw:
        if key in conditions_known and key not in _RULE_KEYS:
            factory = get_condition(key)
            assert factory is not None
            if ctx.budget.exhausted:
                return None  # reported once, where it ran out; compile nothing more
            try:
                config = _expand_lists(raw[key], env)
                if not ctx.budget.take(count_strings(config)):
                    ctx.budget.refuse()
                    check.error((*path, key), f"the policy compiles more than "
                                f"{ctx.budget.limit:,} patterns", ctx.budget.hint)
                    return None
                conditions.append((key, factory(config, env)))
            except ConfigError as e:
                sub = (*path, key) if e.key is None else (*path, key, e.key)
                check.error(sub, str(e), e.hint)
            except Exception as e:  # a condition's own bug must still name the line
                check.error((*path, key), f"invalid configuration: {e}")
    return conditions


def parse_named_conditions(raw: Any, check: Checker, env: CompileEnv, ctx: RuleContext) -> None:
    """A policy's ``conditions:`` (name -> conditions, as a rule writes them), compiled once
    into ``ctx.named`` for the rules' ``when:`` and ``unless:``; a later policy's name wins."""
    if raw is None:
        return
    hint = "e.g. conditions: {stranger: {roles: {recipient: {in: [contacts, request]}}}}"
    if not isinstance(raw, Mapping):
        check.error(("conditions",), "must map names to conditions", hint)
        return
    known = condition_keys()
    for name, spec in raw.items():
        path: Path_ = ("conditions", str(name))
        if not isinstance(name, str) or not _CONDITION_NAME.match(name):
            check.error(path, "a condition's name is a word such as known_party", hint)
            continue
        if not isinstance(spec, Mapping) or not spec:
            check.error(path, "must be a mapping of conditions", hint)
            continue
        check.keys(spec, path, sorted(known - set(_RULE_KEYS)), f"the condition '{name}'")
        compiled = _conditions(spec, path, check, env, ctx)
        if compiled:
            ctx.named[name] = compiled


def _named(raw: Mapping[str, Any], path: Path_, check: Checker, env: CompileEnv,
           ctx: RuleContext) -> tuple[list[tuple[str, Matcher]], list[tuple[str, Matcher]]]:
    """A rule's ``when:`` (named conditions that must all hold) and ``unless:`` (named ones,
    or conditions written in place: the rule does not apply when one of them holds)."""
    out: list[tuple[str, Matcher]] = []
    for name in _names(raw, "when", path, check):
        out.extend(ctx.named.get(name, ()))
        if name not in ctx.named:
            check.error((*path, "when"), f"no condition named {name!r}",
                        "define it under conditions:")
    if "unless" not in raw:
        return out, []
    groups: list[tuple[str, list[tuple[str, Matcher]]]] = []
    if isinstance(raw["unless"], Mapping):
        inline = _conditions(raw["unless"], (*path, "unless"), check, env, ctx) or []
        check.keys(raw["unless"], (*path, "unless"), sorted(condition_keys() - set(_RULE_KEYS)),
                   "unless")
        groups.append(("the conditions under unless", inline))
    else:
        for name in _names(raw, "unless", path, check):
            if name not in ctx.named:
                check.error((*path, "unless"), f"no condition named {name!r}",
                            "define it under conditions:, or write the conditions in place")
            else:
                groups.append((name, ctx.named[name]))
    return out, [("unless", _Unless(tuple(groups)))] if groups else []


def _names(raw: Mapping[str, Any], key: str, path: Path_, check: Checker) -> list[str]:
    value = raw.get(key)
    if value is None:
        return []
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        check.error((*path, key), "must name a condition or a list of conditions",
                    f"e.g. {key}: known_party")
        return []
    return names


class _Unless:
    """Holds when none of its groups holds (a group holds when all its conditions do).

    It tells the engine what its conditions need (the session history, the session facts,
    the roles they remember as seen) as a rule's own conditions do, so that a condition under
    ``unless:`` sees what it would see anywhere else."""

    __slots__ = ("_groups", "history_tools", "reads_untrusted", "seen_roles", "uses_facts",
                 "uses_history")

    def __init__(self, groups: tuple[tuple[str, list[tuple[str, Matcher]]], ...]) -> None:
        self._groups = groups
        inner = [m for _, group in groups for _, m in group]
        self.uses_history = any(getattr(m, "uses_history", False) for m in inner)
        self.history_tools = union_of_tools(getattr(m, "history_tools", None) for m in inner
                                            if getattr(m, "uses_history", False))
        self.uses_facts = any(getattr(m, "uses_facts", False) for m in inner)
        self.reads_untrusted = any(getattr(m, "reads_untrusted", False) for m in inner)
        self.seen_roles = tuple(p for m in inner for p in getattr(m, "seen_roles", ()))

    def __call__(self, subject: Subject) -> Hit | None:
        for _, group in self._groups:
            if group and all(matcher(subject) is not None for _, matcher in group):
                return None
        names = " nor ".join(name for name, _ in self._groups)
        return Hit(f"neither {names} held" if len(self._groups) > 1 else f"{names} did not hold",
                   "unless")


def _selector(raw: Any, path: Path_, check: Checker, kinds: Kinds) -> Selector:
    if raw is None:
        return Selector()
    if isinstance(raw, str):
        return Selector(tools=check.globs((raw,), path))
    if not isinstance(raw, Mapping):
        check.error(path, "must be a mapping", "e.g. match: {tool: [read_file, write_file]}")
        return Selector()
    check.keys(raw, path, _MATCH_KEYS, "match")
    get = {k: check.strings(raw[k], (*path, k)) for k in _MATCH_KEYS if k in raw}
    for key in ("tool", "agent", "principal", "framework"):
        check.globs(get.get(key, ()), (*path, key))
    for kind in get.get("kind", ()):
        if (problem := kinds.pattern_problem(kind)) is not None:
            check.error((*path, "kind"), *problem)
    for side_effect in get.get("side_effect", ()):
        if side_effect not in {s.value for s in SideEffect} | {"unknown"}:
            check.error((*path, "side_effect"), f"unknown side effect {side_effect!r}",
                        "use none, read, write, destructive, external or unknown")
    return Selector(
        tools=get.get("tool", ()), kinds=get.get("kind", ()), side_effects=get.get("side_effect", ()),
        agents=get.get("agent", ()), principals=get.get("principal", ()),
        frameworks=get.get("framework", ()),
    )


def _rewrite(raw: Mapping[str, Any], path: Path_, check: Checker) -> Rewrite:
    set_ = raw.get("set", {})
    if not isinstance(set_, Mapping):
        check.error((*path, "set"), "must map argument names to values", "e.g. set: {limit: 100}")
        set_ = {}
    unset = check.strings(raw["unset"], (*path, "unset")) if "unset" in raw else ()
    cap = raw.get("cap", {})
    if not isinstance(cap, Mapping) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in cap.values()):
        check.error((*path, "cap"), "must map argument names to numbers", "e.g. cap: {limit: 100}")
        cap = {}
    return Rewrite(set={str(k): v for k, v in set_.items()}, unset=unset,
                   cap={str(k): v for k, v in cap.items()})
