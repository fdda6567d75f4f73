"""Turns a policy file (or dict) into a :class:`LoadedPolicy`, reporting every problem with its
line.

Loading is two passes, like Starlette's ``build_middleware_stack``: validate the whole document
into rule specs (collecting *every* problem, each with file, line, key and a fix), then compile
the specs once. Nothing is compiled per call, and nothing is opened: the guard opens the state
store and the audit sinks from the loaded settings.

Loading a policy must be safe on a file nobody has reviewed (``callwarden lint`` on a pull
request, ``callwarden hook`` on every tool call):

* **Providers.** ``providers="load"`` (the default, for a ``Guard``) imports each ``use:``
  target and instantiates it, calling only classes that implement the policy protocol;
  ``providers="check"`` (for ``callwarden lint``) checks each target's form and imports
  nothing. ``allowed_providers`` (else the ``CALLWARDEN_PROVIDERS`` environment variable:
  comma-separated module prefixes and folders, e.g. ``mycompany.guards,./providers``; unset =
  anything, empty = nothing) says what ``use:`` may name. See
  :mod:`callwarden.policyfile.providers`.
* **Caps.** File size, nesting depth, values, alias expansion, compiled patterns and list-file
  bytes are capped (:mod:`callwarden.policyfile.caps`); each is an error with its line.
* **Files.** ``lists: {x: {file: ...}}`` reads only inside the policy's folder (or a folder
  of a policy it extends); an ``extends:`` target that is not a policy is never quoted.
* **Names.** Unknown kinds and permission names that look like built-in ones (``shel``,
  ``Bsh``, ``bash``) are errors with "did you mean" (:mod:`callwarden.policyfile.names`).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from callwarden._profiles import ToolProfile
from callwarden.conditions.base import CompileEnv
from callwarden.engine.rules import Rule
from callwarden.engine.user import FunctionPolicy, instantiate
from callwarden.exceptions import ConfigError, PolicyError, Problem
from callwarden.policyfile.caps import PatternBudget
from callwarden.policyfile.check import TOP_KEYS, Checker, Path_
from callwarden.policyfile.examples import verify_examples
from callwarden.policyfile.extends import Base, load_bases
from callwarden.policyfile.names import Kinds
from callwarden.policyfile.ownfiles import own_files, policy_files
from callwarden.policyfile.permissions import permission_rules
from callwarden.policyfile.providers import NotLoaded, ProviderAllowlist, ProviderMode
from callwarden.policyfile.rules import (
    RuleContext,
    compile_rule,
    parse_lists,
    parse_named_conditions,
    parse_profiles,
)
from callwarden.policyfile.settings import (
    LoadedPolicy,
    parse_approvals,
    parse_audit,
    parse_journal,
    parse_mcp,
    parse_settings,
    parse_state,
    parse_workspace,
)
from callwarden.policyfile.yamlsrc import Lines, load_yaml, read_source

__all__ = ["compile_policy", "load_policy_file", "load_policy_text"]


def load_policy_file(path: Path, *, check_examples: bool = True,
                     providers: ProviderMode = "load",
                     allowed_providers: Sequence[str] | None = None) -> LoadedPolicy:
    """Loads and compiles a policy file.

    Args:
        path: the policy file.
        check_examples: run the rules' inline ``examples`` against the compiled policy.
        providers: ``"load"`` imports and instantiates ``use:`` targets (what a guard needs);
            ``"check"`` checks their form and the allowlist only, importing nothing (for
            linting; the result is for checking only, see ``LoadedPolicy.notes``).
        allowed_providers: module prefixes and folders ``use:`` may name; None reads
            ``CALLWARDEN_PROVIDERS`` (unset: anything).

    Raises:
        PolicyError: with every problem found.
    """
    text = read_source(path)
    return load_policy_text(text, filename=str(path), base_dir=path.parent,
                            check_examples=check_examples, providers=providers,
                            allowed_providers=allowed_providers)


def load_policy_text(text: str, *, filename: str = "<policy>", base_dir: Path | None = None,
                     check_examples: bool = True, providers: ProviderMode = "load",
                     allowed_providers: Sequence[str] | None = None) -> LoadedPolicy:
    """Parses and compiles YAML policy text (arguments as :func:`load_policy_file`)."""
    data, lines = load_yaml(text, filename, collect=True)
    return compile_policy(data, lines=lines, base_dir=base_dir, check_examples=check_examples,
                          digest=hashlib.sha256(text.encode()).hexdigest(),
                          providers=providers, allowed_providers=allowed_providers)


def compile_policy(
    data: Any,
    *,
    lines: Lines | None = None,
    base_dir: Path | None = None,
    extra_policies: Sequence[Any] = (),
    check_examples: bool = True,
    digest: str | None = None,
    providers: ProviderMode = "load",
    allowed_providers: Sequence[str] | None = None,
) -> LoadedPolicy:
    """Validates a policy document and compiles it.

    ``extra_policies`` are Python policies (objects or functions) appended after the file's
    rules. With ``check_examples`` the rules' inline ``examples`` are decided by the compiled
    policy (on a private in-memory store) and any that fails is a problem. ``providers`` and
    ``allowed_providers`` are as in :func:`load_policy_file`.

    Raises:
        PolicyError: with every problem found, each with its line when known.
        ConfigError: for a ``providers`` mode other than ``"load"`` or ``"check"``.
    """
    if providers not in ("load", "check"):
        raise ConfigError(f"providers must be 'load' or 'check', not {providers!r}")
    lines = lines or Lines(None)
    check = Checker(lines)
    check.problems.extend(lines.problems)  # duplicate keys: reported with everything else
    if not isinstance(data, Mapping):
        check.error((), "a policy must be a mapping with at least 'version: 1'",
                    "start the file with 'version: 1'")
        raise PolicyError(check.problems)
    if digest is None:
        digest = hashlib.sha256(
            json.dumps(data, sort_keys=True, default=repr).encode()).hexdigest()
    check.keys(data, (), TOP_KEYS, "the policy")
    if "version" not in data:
        check.error((), "missing 'version'", "add 'version: 1' at the top")
    elif data["version"] != 1:
        check.error(("version",), f"unsupported version {data['version']!r}",
                    "this callwarden reads version 1")

    settings = parse_settings(data, check, lines, digest)
    folder = base_dir or Path.cwd()
    bases = load_bases(data.get("extends"), ("extends",), check, folder, ()) if "extends" in data \
        else []
    roots = [folder, *(base.folder for base in bases)]
    # Before the bases' rules: those merge the bases' problems into this policy's.
    journal = parse_journal([(data, check), *((b.data, b.check) for b in bases)])
    named_lists: dict[str, Any] = {}
    profiles: dict[str, ToolProfile] = {}
    for base in bases:
        named_lists.update(parse_lists(base.data.get("lists"), base.check, base.folder, roots))
        profiles.update(parse_profiles(base.data.get("tools"), base.check, base.lines))
    named_lists.update(parse_lists(data.get("lists"), check, folder, roots))
    profiles.update(parse_profiles(data.get("tools"), check, lines))
    options = parse_workspace(data.get("workspace"), check, folder)
    sources = [(lines.file, data, folder), *((b.lines.file, b.data, b.folder) for b in bases)]
    options.update(own_files(data, folder, sources))
    env = CompileEnv(base_dir=folder, lists=named_lists, options=options)
    allowlist = ProviderAllowlist.from_env() if allowed_providers is None \
        else ProviderAllowlist(allowed_providers)
    ctx = RuleContext(Kinds(profiles), providers, allowlist, PatternBudget())
    for base in bases:
        parse_named_conditions(base.data.get("conditions"), base.check,
                               CompileEnv(base_dir=base.folder, lists=named_lists,
                                          options=options), ctx)
    parse_named_conditions(data.get("conditions"), check, env, ctx)
    examples: list[tuple[Path_, str, Mapping[str, Any]]] = []
    rules = _inherited_rules(bases, check, named_lists, options, ctx, profiles)
    _own_rules(data, check, lines, env, rules, examples, ctx, profiles)
    _python_policies(extra_policies, check, rules)

    unloaded = [r.policy for r in rules if isinstance(r.policy, NotLoaded)]
    notes = [Problem(f"{p.target!r} not imported: the policy was loaded with providers='check'",
                     p.file, p.line, None,
                     "load with providers='load' (callwarden lint --providers) to import it")
             for p in unloaded]
    notes += [Problem(note, base.lines.file, None, None,
                      "enforce it with a rule of your own, or leave it to the passport's issuer")
              for base in bases for note in base.notes]
    if unloaded and check_examples and examples:
        notes.append(Problem(
            f"{len(examples)} inline example(s) not run: they need the providers",
            lines.file, lines.line(examples[0][0]), None,
            "load with providers='load' (callwarden lint --providers) to run them"))
        check_examples = False
    mcp: dict[str, bool] = {}
    for base in bases:
        mcp.update(parse_mcp(base.data.get("mcp"), base.check))
    mcp.update(parse_mcp(data.get("mcp"), check))
    loaded = LoadedPolicy(
        tuple(rules), settings, profiles,
        state=parse_state(data.get("state"), check, folder),
        audit=parse_audit(data.get("audit"), check, folder, providers=providers,
                          allowlist=allowlist),
        approvals=parse_approvals(data.get("approvals"), check, folder),
        workspace={k: v for k, v in options.items() if k in ("root", "home")},
        digest=digest, source=lines.file, lines=lines, notes=tuple(notes),
        files=tuple(os.path.abspath(f) for f in policy_files(sources)),
        mcp=mcp,
        journal=journal,
    )
    if check.problems:
        if check_examples and examples:
            # Examples run against the compiled policy, which a policy with errors never becomes.
            check.problems.append(Problem(
                f"{len(examples)} inline example(s) not checked because of the problems above",
                lines.file, lines.line(examples[0][0]), None,
                "fix those, then run 'callwarden lint' again to check the examples"))
        raise PolicyError(check.problems)
    if check_examples and examples:
        verify_examples(loaded, examples, lines)
    return loaded


def _inherited_rules(bases: Sequence[Base], check: Checker, named_lists: Mapping[str, Any],
                     options: Mapping[str, Any], ctx: RuleContext,
                     profiles: Mapping[str, ToolProfile]) -> list[Rule]:
    """The rules of the policies this one extends, deepest first. Their examples are checked
    when the base itself loads."""
    rules: list[Rule] = []
    for base in bases:
        base_env = CompileEnv(base_dir=base.folder, lists=named_lists, options=options)
        raw_rules = base.data.get("rules") or []
        if not isinstance(raw_rules, list):
            base.check.error(("rules",), "must be a list of rules",
                             "write each rule as '- id: ...'")
            raw_rules = []
        for i, raw in enumerate(raw_rules):
            rule = compile_rule(raw, ("rules", i), base.check, base.lines, base_env, len(rules),
                                [], ctx)
            if rule is not None:
                rules.append(rule)
        for effect_name in ("deny", "ask", "allow"):
            if effect_name in base.data:
                rules.extend(permission_rules(base.data[effect_name], effect_name, base.check,
                                              base.lines, len(rules), profiles=profiles,
                                              budget=ctx.budget, env=base_env))
        check.problems.extend(base.check.problems)
    return rules


def _own_rules(data: Mapping[str, Any], check: Checker, lines: Lines, env: CompileEnv,
               rules: list[Rule], examples: list[tuple[Path_, str, Mapping[str, Any]]],
               ctx: RuleContext, profiles: Mapping[str, ToolProfile]) -> None:
    """Appends this policy's ``rules:`` (a rule with an inherited id replaces it) and its
    permission strings to ``rules``."""
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
        rule = compile_rule(raw, ("rules", i), check, lines, env, len(rules), examples, ctx)
        if rule is None:
            continue
        if rule.id in inherited:
            rules.remove(inherited.pop(rule.id))
        rules.append(rule)
    for effect_name in ("deny", "ask", "allow"):
        if effect_name in data:
            rules.extend(permission_rules(data[effect_name], effect_name, check, lines,
                                          len(rules), profiles=profiles, budget=ctx.budget,
                                          env=env))


def _python_policies(extra_policies: Sequence[Any], check: Checker, rules: list[Rule]) -> None:
    """Appends the Python policies given to a ``Guard`` (objects or plain functions)."""
    for j, extra in enumerate(extra_policies):
        try:
            if hasattr(extra, "evaluate") or hasattr(extra, "aevaluate"):
                target = extra
            elif callable(extra) and not inspect.isclass(extra):
                # The application's own callable (a partial, a callable object): trusted as
                # code is, unlike a name a policy file makes the loader import.
                target = FunctionPolicy(extra)
            else:
                target = instantiate(extra, {})
        except TypeError as e:
            check.error((), f"policies[{j}]: {e}")
            continue
        name = getattr(target, "name", None) or getattr(target, "__name__", None) \
            or type(target).__name__
        rules.append(Rule(str(name), policy=target, order=len(rules),
                          source=f"python:{name}"))
