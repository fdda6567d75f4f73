"""Turns a policy file (or dict) into a compiled ``Engine``, reporting every problem with its line.

Loading is two passes, like Starlette's ``build_middleware_stack``: validate the whole document
into rule specs (collecting *every* problem, each with file, line, key and a fix), then compile
the specs once. Nothing is compiled per call.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib.machinery
import json
import re
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from callwarden._decision import Effect, Mode
from callwarden._profiles import (
    ARG_ROLES,
    KNOWN_KINDS,
    SideEffect,
    ToolProfile,
    default_profile,
    kind_side_effect,
)
from callwarden._units import parse_duration
from callwarden.conditions.base import CompileEnv, Matcher, condition_keys, get_condition
from callwarden.engine.engine import Engine, Settings
from callwarden.engine.rules import Rewrite, Rule, Selector
from callwarden.exceptions import ConfigError, PolicyError, Problem
from callwarden.policyfile.providers import instantiate, load_object
from callwarden.policyfile.yamlsrc import Lines, load_yaml, read_source

__all__ = ["compile_policy", "load_policy_file", "load_policy_text"]

Path_ = tuple[str | int, ...]

_TOP_KEYS = ("version", "name", "description", "default", "mode", "on_error", "timeout",
             "combine", "tools", "rules", "allow", "deny", "ask", "max_arg_depth", "lists", "state",
             "extends", "workspace", "audit", "approvals")
_RULE_KEYS = ("id", "description", "match", "effect", "message", "mode", "on_error", "phase",
              "use", "config", "examples", "set", "unset", "cap", "limit", "on")
_MATCH_KEYS = ("tool", "kind", "side_effect", "agent", "principal", "framework")
_PROFILE_KEYS = ("kind", "side_effect", "requires_approval", "args", "description",
                 *ARG_ROLES)
_EXAMPLE_EFFECTS = ("allow", "modify", "deny", "ask", "halt")
_CASE_KEYS = ("tool", "args", "agent", "session", "principal", "framework", "context", "name")
_PERMISSION = re.compile(r"^\s*([A-Za-z0-9_.*?\-\[\]]+)\s*(?:\((.*)\))?\s*$", re.S)

# Coding-agent tool names in permission strings stand for tool kinds, so that
# `Bash(rm -rf *)` also governs `run_shell_command`, `shell`, `bash` ...
_PERMISSION_KINDS = {
    "Bash": "shell", "Read": "file.read", "Write": "file.write", "Edit": "file.write",
    "MultiEdit": "file.write", "NotebookEdit": "file.write", "WebFetch": "http",
    "WebSearch": "search", "Glob": "file.read", "Grep": "file.read",
}


class _Checker:
    """Collects problems with their lines."""

    def __init__(self, lines: Lines) -> None:
        self.lines = lines
        self.problems: list[Problem] = []

    def error(self, path: Path_, message: str, hint: str | None = None) -> None:
        key = ".".join(str(p) if isinstance(p, str) else f"[{p}]" for p in path) or None
        if key:
            key = key.replace(".[", "[")
        self.problems.append(Problem(message, self.lines.file, self.lines.line(path), key, hint))

    def keys(self, mapping: Mapping[Any, Any], path: Path_, allowed: Sequence[str],
             what: str) -> None:
        for key in mapping:
            if key not in allowed:
                close = difflib.get_close_matches(str(key), [str(a) for a in allowed], n=1)
                hint = f"did you mean '{close[0]}'?" if close else \
                    f"allowed keys: {', '.join(sorted(str(a) for a in allowed))}"
                self.error((*path, key), f"unknown key in {what}", hint)

    def choice(self, value: Any, path: Path_, choices: Sequence[str]) -> str | None:
        if isinstance(value, str) and value in choices:
            return value
        self.error(path, f"must be one of {', '.join(choices)}, not {value!r}")
        return None

    def strings(self, value: Any, path: Path_) -> tuple[str, ...]:
        """A string or a list of strings."""
        if isinstance(value, str):
            return (value,)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(value)
        self.error(path, "must be a string or a list of strings")
        return ()


def load_policy_file(path: Path, *, check_examples: bool = True, audit: bool = True) -> Engine:
    """Loads and compiles a policy file.

    Raises:
        PolicyError: with every problem found.
    """
    text = read_source(path)
    return load_policy_text(text, filename=str(path), base_dir=path.parent,
                            check_examples=check_examples, audit=audit)


def load_policy_text(text: str, *, filename: str = "<policy>", base_dir: Path | None = None,
                     check_examples: bool = True, audit: bool = True) -> Engine:
    """Parses and compiles YAML policy text."""
    data, lines = load_yaml(text, filename, collect=True)
    return compile_policy(data, lines=lines, base_dir=base_dir, check_examples=check_examples,
                          digest=hashlib.sha256(text.encode()).hexdigest(), audit=audit)


def compile_policy(
    data: Any,
    *,
    lines: Lines | None = None,
    base_dir: Path | None = None,
    extra_policies: Sequence[Any] = (),
    check_examples: bool = True,
    digest: str | None = None,
    store: Any = None,
    clock: Any = None,
    audit: bool = True,
) -> Engine:
    """Validates a policy document and compiles it into an Engine.

    ``audit=False`` ignores the policy's ``audit:`` sinks (replaying or testing a policy must
    not write into the live audit log).

    Raises:
        PolicyError: with every problem found, each with its line when known.
    """
    lines = lines or Lines(None)
    check = _Checker(lines)
    check.problems.extend(lines.problems)  # duplicate keys: reported with everything else
    if not isinstance(data, Mapping):
        check.error((), "a policy must be a mapping with at least 'version: 1'",
                    "start the file with 'version: 1'")
        raise PolicyError(check.problems)
    if digest is None:
        digest = hashlib.sha256(
            json.dumps(data, sort_keys=True, default=repr).encode()).hexdigest()
    check.keys(data, (), _TOP_KEYS, "the policy")
    if "version" not in data:
        check.error((), "missing 'version'", "add 'version: 1' at the top")
    elif data["version"] != 1:
        check.error(("version",), f"unsupported version {data['version']!r}",
                    "this callwarden reads version 1")

    settings = _settings(data, check, lines, digest)
    folder = base_dir or Path.cwd()
    bases = _bases(data.get("extends"), ("extends",), check, folder, ()) if "extends" in data \
        else []
    named_lists: dict[str, Any] = {}
    profiles: dict[str, ToolProfile] = {}
    for base in bases:
        named_lists.update(_lists(base.data.get("lists"), base.check, base.folder))
        profiles.update(_profiles(base.data.get("tools"), base.check, base.lines))
    named_lists.update(_lists(data.get("lists"), check, folder))
    profiles.update(_profiles(data.get("tools"), check, lines))
    options = _workspace(data.get("workspace"), check, folder)
    env = CompileEnv(base_dir=folder, lists=named_lists, options=options)
    rules: list[Rule] = []
    examples: list[tuple[Path_, str, Mapping[str, Any]]] = []
    # Rules of the policies this one extends come first; a rule here with the same id
    # replaces the inherited one. Inherited examples are checked when the base itself loads.
    for base in bases:
        base_env = CompileEnv(base_dir=base.folder, lists=named_lists, options=options)
        for i, raw in enumerate(base.data.get("rules") or []):
            rule = _rule(raw, ("rules", i), base.check, base.lines, base_env, len(rules), [])
            if rule is not None:
                rules.append(rule)
        for effect_name in ("deny", "ask", "allow"):
            if effect_name in base.data:
                rules.extend(_permission_rules(base.data[effect_name], effect_name, base.check,
                                               base.lines, len(rules)))
        check.problems.extend(base.check.problems)
    inherited = {r.id: r for r in rules}

    raw_rules = data.get("rules", [])
    if raw_rules is None:
        raw_rules = []
    if not isinstance(raw_rules, list):
        check.error(("rules",), "must be a list of rules", "write each rule as '- id: ...'")
        raw_rules = []
    seen_ids: dict[str, Path_] = {}
    for i, raw in enumerate(raw_rules):
        # Checked on the raw id, so a duplicate shows even when the rule has other problems.
        raw_id = raw.get("id") if isinstance(raw, Mapping) else None
        if isinstance(raw_id, str) and raw_id.strip():
            raw_id = raw_id.strip()
            if raw_id in seen_ids:
                check.error(("rules", i, "id"), f"duplicate rule id {raw_id!r}",
                            f"ids must be unique; the first is at line "
                            f"{lines.line(seen_ids[raw_id])}")
            else:
                seen_ids[raw_id] = ("rules", i)
        rule = _rule(raw, ("rules", i), check, lines, env, len(rules), examples)
        if rule is None:
            continue
        if rule.id in inherited:
            rules.remove(inherited.pop(rule.id))
        rules.append(rule)

    for effect_name in ("deny", "ask", "allow"):
        if effect_name in data:
            rules.extend(_permission_rules(data[effect_name], effect_name, check, lines,
                                           len(rules)))

    for j, extra in enumerate(extra_policies):
        try:
            target = extra if hasattr(extra, "evaluate") or hasattr(extra, "aevaluate") \
                else instantiate(extra, {})
        except TypeError as e:
            check.error((), f"policies[{j}]: {e}")
            continue
        name = getattr(target, "name", None) or getattr(target, "__name__", None) \
            or type(target).__name__
        rules.append(Rule(str(name), policy=target, order=len(rules),
                          source=f"python:{name}"))

    if isinstance(store, str):
        # A URL passed in Python (Guard(state=...), Guard.from_dict(..., state=...)).
        store = _store(store, check, base_dir or Path.cwd())
    elif store is not None and not _is_store(store):
        check.error(("state",), f"must be a StateStore or a store URL, not "
                    f"{type(store).__name__}", "memory, sqlite:///state.db or redis://host:6379/0")
        store = None
    elif store is None and data.get("state") is not None:
        store = _store(data["state"], check, base_dir or Path.cwd())
    extensions: dict[str, Any] = {}
    if audit and data.get("audit") is not None and not check.problems:
        from callwarden.audit import Auditor

        try:
            extensions["audit"] = Auditor.from_config(data["audit"], base_dir=folder)
        except ConfigError as e:
            sub = tuple(getattr(e, "path", ()) or ())
            check.error(("audit", *sub), str(e), e.hint)
    approvals_store = None
    if data.get("approvals") is not None:
        from callwarden.approvals._config import parse_config, resolve_state_url

        try:
            approval_settings = parse_config(data["approvals"])
        except ConfigError as e:
            check.error(("approvals",) if e.key is None else ("approvals", e.key), str(e), e.hint)
        else:
            extensions["approvals"] = data["approvals"]
            # Validating is pure; opening the store waits until the rest of the policy is sound.
            if approval_settings.state is not None and not check.problems:
                from callwarden.state import open_store

                try:
                    approvals_store = open_store(resolve_state_url(approval_settings.state,
                                                                   folder))
                except Exception as e:
                    check.error(("approvals", "state"), f"cannot open the store: {e}")
    if check.problems:
        if check_examples and examples:
            # Examples run against the compiled policy, which a policy with errors never becomes.
            check.problems.append(Problem(
                f"{len(examples)} inline example(s) not checked because of the problems above",
                lines.file, lines.line(examples[0][0]), None,
                "fix those, then run 'callwarden lint' again to check the examples"))
        raise PolicyError(check.problems)
    if approvals_store is None and "approvals" in extensions:
        # Pending requests live where the limits live, so they survive what the store survives.
        if store is None:
            from callwarden.state import MemoryStore

            store = MemoryStore()
        approvals_store = store
    if approvals_store is not None:
        extensions["approvals_store"] = approvals_store
    engine = Engine(rules, settings=settings, profiles=profiles, store=store, clock=clock,
                    extensions=extensions)
    if check_examples and examples:
        _check_examples(engine, examples, lines)
    return engine


def _settings(data: Mapping[str, Any], check: _Checker, lines: Lines, digest: str) -> Settings:
    default = check.choice(data.get("default", "allow"), ("default",), ("allow", "deny"))
    mode = check.choice(data.get("mode", "enforce"), ("mode",), ("enforce", "observe"))
    on_error = check.choice(data.get("on_error", "deny"), ("on_error",),
                            ("deny", "halt", "ask", "allow"))
    timeout = 1.0
    if "timeout" in data:
        try:
            timeout = parse_duration(data["timeout"])
        except ValueError as e:
            check.error(("timeout",), str(e))
    combine = data.get("combine", "strictest")
    if combine != "strictest":
        check.error(("combine",), f"unknown combining strategy {combine!r}",
                    "only 'strictest' (halt > deny > ask > allow) is available")
    if "max_arg_depth" in data and not (isinstance(data["max_arg_depth"], int)
                                        and data["max_arg_depth"] > 0):
        check.error(("max_arg_depth",), "must be a positive integer")
    name = data.get("name")
    if name is not None and not isinstance(name, str):
        check.error(("name",), "must be a string")
        name = None
    label = f"{name or Path(lines.file or 'policy').name}@{digest[:12]}"
    return Settings(
        default=Effect(default or "allow"),
        default_source=lines.source(("default",)) if "default" in data else None,
        mode=Mode(mode or "enforce"),
        on_error=Effect(on_error or "deny"),
        timeout=timeout,
        name=label,
    )


def _workspace(raw: Any, check: _Checker, folder: Path) -> dict[str, Any]:
    """``workspace: {root: ., home: /home/dev}``: where relative paths and ``~`` point.

    Defaults: the process's working directory and ``$HOME`` when the guard is built.
    """
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        check.error(("workspace",), "must be a mapping", "e.g. workspace: {root: ., home: ~}")
        return {}
    check.keys(raw, ("workspace",), ("root", "home"), "workspace")
    out: dict[str, Any] = {}
    for key in ("root", "home"):
        if key in raw:
            value = raw[key]
            if not isinstance(value, str) or not value:
                check.error(("workspace", key), "must be a directory path")
                continue
            path = Path(value).expanduser()
            out[key] = str(path if path.is_absolute() else (folder / path).resolve())
    if "root" in out:
        out["project_root"] = out["cwd"] = out["root"]
    return out


BUILTIN_POLICIES = {
    "callwarden:recommended": Path(__file__).parent / "recommended.yaml",
    "callwarden:shell": Path(__file__).parent / "shell.yaml",
}


class _Base:
    """A policy this one extends: its data, lines, folder and own problem list."""

    __slots__ = ("check", "data", "folder", "lines")

    def __init__(self, data: Mapping[str, Any], lines: Lines, folder: Path) -> None:
        self.data = data
        self.lines = lines
        self.folder = folder
        self.check = _Checker(lines)


def _bases(raw: Any, path: Path_, check: _Checker, folder: Path,
           chain: tuple[Path, ...]) -> list[_Base]:
    """Loads the policies named by ``extends:`` (and theirs), deepest first."""
    names = [raw] if isinstance(raw, str) else raw
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        check.error(path, "must name a policy or a list of policies",
                    "e.g. extends: callwarden:recommended (or a path next to this file)")
        return []
    out: list[_Base] = []
    for i, name in enumerate(names):
        item_path = path if isinstance(raw, str) else (*path, i)
        if name.startswith("callwarden:"):
            target = BUILTIN_POLICIES.get(name)
            if target is None:
                check.error(item_path, f"no built-in policy {name!r}",
                            f"built-in policies: {', '.join(sorted(BUILTIN_POLICIES))}")
                continue
        else:
            target = (folder / name).resolve()
        if target in chain:
            check.error(item_path, f"{name!r} extends itself (directly or through another)")
            continue
        try:
            text = read_source(target)
        except PolicyError as e:  # named where `extends:` points at it
            check.error(item_path, f"{name!r}: {e.problems[0].message}", e.problems[0].hint)
            continue
        try:
            data, lines = load_yaml(text, str(target), collect=True)
        except PolicyError as e:
            check.problems.extend(e.problems)
            continue
        if not isinstance(data, Mapping):
            check.error(item_path, f"{name!r} is not a policy mapping")
            continue
        base = _Base(data, lines, target.parent)
        base.check.problems.extend(lines.problems)
        base.check.keys(data, (), _TOP_KEYS, "the policy")
        if "extends" in data:
            out.extend(_bases(data["extends"], ("extends",), base.check, target.parent,
                              (*chain, target)))
        out.append(base)
    return out


def _is_store(value: Any) -> bool:
    from callwarden.state import StateStore

    # Duck typing for stores that do not subclass StateStore (test doubles).
    return isinstance(value, StateStore) or (hasattr(value, "consume")
                                             and hasattr(value, "aconsume"))


def _store(raw: Any, check: _Checker, base_dir: Path) -> Any:
    """Opens the ``state:`` store; a relative SQLite path is relative to the policy's folder."""
    from callwarden.state import open_store

    if not isinstance(raw, str) or not raw:
        check.error(("state",), "must be a store URL",
                    "memory, sqlite:///state.db (next to the policy) or redis://host:6379/0")
        return None
    url = raw
    if url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
        url = "sqlite:///" + str((base_dir / url[len("sqlite:///"):]).resolve())
    try:
        return open_store(url)
    except Exception as e:
        check.error(("state",), f"cannot open the state store: {e}",
                    "memory, sqlite:///path.db or redis://host:6379/0")
        return None


def _lists(raw: Any, check: _Checker, base_dir: Path) -> dict[str, Any]:
    if raw is None:
        return {}
    from callwarden.policyfile.lists import load_lists

    try:
        return load_lists(raw, base_dir)
    except ConfigError as e:
        check.error(("lists",) if e.key is None else ("lists", e.key), str(e), e.hint)
        return {}


def _profiles(raw: Any, check: _Checker, lines: Lines) -> dict[str, ToolProfile]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        check.error(("tools",), "must map tool names to profiles",
                    "e.g. tools: {bash: {kind: shell, command: command}}")
        return {}
    out: dict[str, ToolProfile] = {}
    for name, spec in raw.items():
        path: Path_ = ("tools", name)
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
        elif kind not in KNOWN_KINDS and "." not in kind:
            check.error((*path, "kind"), f"unknown kind {kind!r}",
                        f"known kinds: {', '.join(sorted(KNOWN_KINDS))} (or a dotted custom kind)")
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
        out[str(name)] = ToolProfile(name=str(name), kind=kind, args=roles,
                                     side_effect=side_effect, requires_approval=requires,
                                     source=lines.source(path))
    return out


def _rule(raw: Any, path: Path_, check: _Checker, lines: Lines, env: CompileEnv, order: int,
          examples: list[tuple[Path_, str, Mapping[str, Any]]]) -> Rule | None:
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
    message = raw.get("message")
    if message is not None and not isinstance(message, str):
        check.error((*path, "message"), "must be a string")
        message = None
    phase = raw.get("phase")
    if phase is not None and phase not in ("mutate", "validate"):
        check.error((*path, "phase"), "must be 'mutate' or 'validate'")
        phase = None

    selector = _selector(raw.get("match"), (*path, "match"), check)

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
        from callwarden.engine.limits import LimitSpec

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

    conditions: list[tuple[str, Matcher]] = []
    for key in raw:
        if key in conditions_known and key not in _RULE_KEYS:
            factory = get_condition(key)
            assert factory is not None
            try:
                conditions.append((key, factory(_expand_lists(raw[key], env), env)))
            except ConfigError as e:
                sub = (*path, key) if e.key is None else (*path, key, e.key)
                check.error(sub, str(e), e.hint)
            except Exception as e:  # a condition's own bug must still name the line
                check.error((*path, key), f"invalid configuration: {e}")

    rewrite = None
    if any(k in raw for k in ("set", "unset", "cap")):
        rewrite = _rewrite(raw, path, check)
        if effect is not Effect.MODIFY:
            check.error((*path, "effect"), "'set', 'unset' and 'cap' rewrite arguments",
                        "add 'effect: modify' to this rule")

    policy = None
    if "use" in raw:
        policy = _provider(raw, path, check, env)
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
        _collect_examples(raw["examples"], (*path, "examples"), check, examples)

    if len(check.problems) != problems_before:
        return None
    return Rule(
        rule_id.strip(), effect=effect, selector=selector, conditions=conditions,
        message=message, mode=mode, on_error=on_error, source=lines.source(path),
        policy=policy, phase=phase, rewrite=rewrite, order=order, limit=limit, on=on,
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
        from callwarden.policyfile.lists import resolve_items

        return resolve_items(value, env)
    if isinstance(value, list):
        if any(_is_list_ref(item) for item in value):
            from callwarden.policyfile.lists import resolve_items

            flat: list[Any] = []
            for item in value:
                flat.extend(resolve_items(item, env) if _is_list_ref(item) else [item])
            return flat
        return [_expand_lists(item, env) for item in value]
    if isinstance(value, Mapping):
        return {k: _expand_lists(v, env) for k, v in value.items()}
    return value


def _selector(raw: Any, path: Path_, check: _Checker) -> Selector:
    if raw is None:
        return Selector()
    if isinstance(raw, str):
        return Selector(tools=(raw,))
    if not isinstance(raw, Mapping):
        check.error(path, "must be a mapping", "e.g. match: {tool: [read_file, write_file]}")
        return Selector()
    check.keys(raw, path, _MATCH_KEYS, "match")
    get = {k: check.strings(raw[k], (*path, k)) for k in _MATCH_KEYS if k in raw}
    for side_effect in get.get("side_effect", ()):
        if side_effect not in {s.value for s in SideEffect} | {"unknown"}:
            check.error((*path, "side_effect"), f"unknown side effect {side_effect!r}",
                        "use none, read, write, destructive, external or unknown")
    return Selector(
        tools=get.get("tool", ()), kinds=get.get("kind", ()), side_effects=get.get("side_effect", ()),
        agents=get.get("agent", ()), principals=get.get("principal", ()),
        frameworks=get.get("framework", ()),
    )


def _rewrite(raw: Mapping[str, Any], path: Path_, check: _Checker) -> Rewrite:
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


def _provider(raw: Mapping[str, Any], path: Path_, check: _Checker, env: CompileEnv) -> Any:
    target = raw["use"]
    config = raw.get("config") or {}
    if not isinstance(target, str):
        check.error((*path, "use"), "must be 'package.module:Name'")
        return None
    if not isinstance(config, Mapping):
        check.error((*path, "config"), "must be a mapping of keyword arguments")
        return None
    try:
        obj = _load_provider(target, env.base_dir)
    except Exception as e:
        check.error((*path, "use"), f"cannot load {target!r}: {e}",
                    "modules are looked up next to the policy file, then on the Python path: "
                    "write 'use: path/to/file.py:Name' for a file elsewhere, or add its folder "
                    "to PYTHONPATH (or install the package)")
        return None
    try:
        return instantiate(obj, dict(config))
    except Exception as e:
        check.error((*path, "config") if config else (*path, "use"),
                    f"cannot create the policy from {target!r}: {type(e).__name__}: {e}")
        return None


_IMPORT_LOCK = threading.Lock()


def _load_provider(target: str, base_dir: Path | None) -> Any:
    """Imports a ``use:`` target, looking in the policy file's folder first.

    ``python -m callwarden`` has the working directory on ``sys.path`` and the console script
    does not; resolving against the policy's folder makes every entry point agree. The folder
    is on ``sys.path`` only while the module imports, so a host's path is left as it was.
    """
    module_name = target.partition(":")[0]
    top = module_name.split(".")[0]
    if base_dir is None or module_name.endswith(".py") or not top.isidentifier() \
            or top in sys.modules:
        return load_object(target, base_dir=base_dir)
    folder = str(base_dir.resolve())
    if importlib.machinery.PathFinder.find_spec(top, [folder]) is None:
        return load_object(target, base_dir=base_dir)
    with _IMPORT_LOCK:
        sys.path.insert(0, folder)
        try:
            return load_object(target, base_dir=base_dir)
        finally:
            sys.path.remove(folder)


def _collect_examples(raw: Any, path: Path_, check: _Checker,
                      out: list[tuple[Path_, str, Mapping[str, Any]]]) -> None:
    if not isinstance(raw, Mapping):
        check.error(path, "must map effects to lists of calls",
                    "e.g. examples: {deny: [{tool: bash, args: {command: 'rm -rf /'}}]}")
        return
    check.keys(raw, path, _EXAMPLE_EFFECTS, "examples")
    for effect, cases in raw.items():
        if effect not in _EXAMPLE_EFFECTS:
            continue
        if not isinstance(cases, list):
            check.error((*path, effect), "must be a list of calls")
            continue
        for k, case in enumerate(cases):
            case_path = (*path, effect, k)
            if _valid_case(case, case_path, check):
                out.append((case_path, effect, case))


def _valid_case(case: Any, path: Path_, check: _Checker) -> bool:
    if not isinstance(case, Mapping) or not isinstance(case.get("tool"), str):
        check.error(path, "each example needs 'tool' (and usually 'args')",
                    "e.g. {tool: read_file, args: {path: README.md}}")
        return False
    check.keys(case, path, (*_CASE_KEYS, "expect", "rule"), "an example")
    if "args" in case and not isinstance(case["args"], Mapping):
        check.error((*path, "args"), "must be a mapping")
        return False
    return True


def _check_examples(engine: Engine, examples: list[tuple[Path_, str, Mapping[str, Any]]],
                    lines: Lines) -> None:
    from callwarden.policyfile.examples import run_case

    problems = []
    for path, effect, case in examples:
        result = run_case(engine, case, effect)
        if not result.passed:
            problems.append(Problem(
                f"example expects {effect} but the policy decides {result.actual}"
                f" (rule {result.rule}: {result.detail})",
                lines.file, lines.line(path), _dotted(path),
                "fix the rule or the example; run 'callwarden test' to see every case"))
    if problems:
        raise PolicyError(problems)


def _dotted(path: Path_) -> str:
    return ".".join(str(p) if isinstance(p, str) else f"[{p}]" for p in path).replace(".[", "[")


def _permission_rules(raw: Any, effect_name: str, check: _Checker, lines: Lines,
                      order: int) -> list[Rule]:
    path: Path_ = (effect_name,)
    if not isinstance(raw, list):
        check.error(path, "must be a list of tool names or permission strings",
                    'e.g. deny: ["Bash(rm -rf *)", "Read(~/.ssh/**)", "mcp__github__*"]')
        return []
    rules: list[Rule] = []
    # An allow string covers a call only together with the other allow strings of its tool:
    # `ls && git log` is allowed by Bash(ls *) and Bash(git log *) between them.
    siblings: dict[str, list[str]] = {}
    for item in raw:
        m = _PERMISSION.match(item) if isinstance(item, str) else None
        if m is not None and m.group(2) is not None and m.group(2).strip() not in ("", "*"):
            siblings.setdefault(m.group(1), []).append(m.group(2).strip())
    for i, item in enumerate(raw):
        item_path = (*path, i)
        if not isinstance(item, str):
            check.error(item_path, "must be a string such as 'Bash(git push *)' or 'mcp__x__*'")
            continue
        m = _PERMISSION.match(item)
        if m is None:
            check.error(item_path, f"cannot read permission {item!r}",
                        "write ToolName, a glob like mcp__github__*, or ToolName(pattern)")
            continue
        name, pattern = m.group(1), m.group(2)
        kind = _PERMISSION_KINDS.get(name)
        selector = Selector(kinds=(kind,)) if kind else Selector(tools=(name,))
        conditions: list[tuple[str, Matcher]] = []
        if pattern is not None and pattern.strip() not in ("", "*"):
            try:
                conditions.append(("pattern", permission_matcher(
                    kind, pattern.strip(), allow=effect_name == "allow",
                    siblings=siblings.get(name, ()))))
            except ConfigError as e:
                check.error(item_path, str(e), e.hint)
                continue
        rules.append(Rule(f"{effect_name}:{item}", effect=Effect(effect_name), selector=selector,
                          conditions=conditions, source=lines.source(item_path),
                          order=order + len(rules)))
    return rules



def permission_matcher(kind: str | None, pattern: str, *, allow: bool = False,
                       siblings: Sequence[str] = ()) -> Matcher:
    """Compiles the pattern inside ``Tool(pattern)`` for a tool kind (``allow``: every
    command, path or URL of the call must be covered by it or one of ``siblings``)."""
    from callwarden.conditions.args import compile_permission_pattern

    return compile_permission_pattern(kind, pattern, allow=allow, siblings=siblings)
