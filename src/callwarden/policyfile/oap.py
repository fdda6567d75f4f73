"""``extends: oap:passport.json``: an Open Agent Passport (OAP 1.0) as a policy to build on.

A passport says what an agent may do: its ``status``, the ``capabilities`` it holds
(``system.command.execute``, ``data.file.read`` ...) and ``limits`` per capability. It is read as
a policy of deny rules, composed with the rules of the file that extends it:

* ``status`` other than ``active`` (``suspended``, ``revoked``, ``draft``): every call is denied
  (``oap.passport_suspended``);
* a tool of a kind that maps onto a capability the passport does not hold is denied
  (``oap.tool_not_allowed``): shell and code tools need ``system.command.execute``, file reads
  ``data.file.read``, writes ``data.file.write``, HTTP tools ``web.fetch`` (or ``web.browser``),
  MCP tools ``mcp.tool.execute``, e-mail and messages ``messaging.message.send``, payments a
  ``finance.payment.*`` / ``payments.*`` capability. Tools of other kinds (``search``, a tool
  the policy does not profile) are left to the rest of the policy;
* limits become conditions (see ``_limit_rules``): ``allowed_commands`` and ``blocked_patterns``
  go through the shell analysis, so ``blocked_patterns: ["rm -rf"]`` also stops ``r''m -fr``.

Rule ids are ``oap.<code>.<capability>``: the OAP reason code is the id's first two parts
(:func:`oap_code`). The passport is validated against the published OAP 1.0 JSON schema, the copy
that the ``aport-agent-guardrails`` package ships (``pip install 'callwarden[oap]'``).
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from callwarden.conditions.shell import ShellMatcher
from callwarden.exceptions import ConfigError, PolicyError, Problem

__all__ = ["OAP_PREFIX", "load_passport", "oap_code", "passport_policy"]

OAP_PREFIX = "oap:"
_SCHEMA = ("runtime-bundle", "external", "aport-spec", "oap", "passport-schema.json")
_INSTALL = "pip install 'callwarden[oap]' (jsonschema and the OAP schema's package)"
MAX_PASSPORT_BYTES = 1 << 20

# The capabilities a passport grants, and the tool kinds each one covers.
_CAPABILITY_KINDS: Mapping[str, tuple[str, ...]] = {
    "system.command.execute": ("shell", "code"),
    "data.file.read": ("file.read",),
    "data.file.write": ("file.write",),
    "web.fetch": ("http",),
    "mcp.tool.execute": ("mcp",),
    "messaging.message.send": ("email", "message"),
    "finance.payment": ("payment",),
}
# Capability ids with the same meaning as one above (OAP's registry and its older names).
_ALIASES: Mapping[str, str] = {
    "web.browser": "web.fetch",
    "payments.refund": "finance.payment", "payments.charge": "finance.payment",
    "payments.payout": "finance.payment", "finance.payment.refund": "finance.payment",
    "finance.payment.charge": "finance.payment", "finance.payment.payout": "finance.payment",
}
# The limits enforced for each capability (rates for any); any other limit of a granted
# capability is reported as a note, never ignored silently.
_RATES = frozenset({"max_calls_per_minute", "msgs_per_min", "msgs_per_day"})
_FILE_LIMITS = frozenset({"allowed_paths", "blocked_paths", "blocked_patterns"})
_LIMITS: Mapping[str, frozenset[str]] = {
    "system.command.execute": frozenset({"allowed_commands", "blocked_patterns",
                                         "max_execution_time"}),
    "data.file.read": _FILE_LIMITS, "data.file.write": _FILE_LIMITS,
    "web.fetch": frozenset({"allowed_domains", "blocked_domains"}),
    "finance.payment": frozenset({"currency_limits", "max_amount", "currency"}),
}


def oap_code(rule_id: str | None) -> str | None:
    """The OAP reason code of a rule read from a passport (``oap.blocked_pattern`` for
    ``oap.blocked_pattern.system.command.execute``), or None for any other rule."""
    if not rule_id or not rule_id.startswith("oap."):
        return None
    return ".".join(rule_id.split(".", 2)[:2])


def load_passport(path: Path) -> dict[str, Any]:
    """Reads a passport file and validates it against the OAP 1.0 schema.

    Raises:
        PolicyError: the file cannot be read, is not JSON, or breaks the schema (every
            problem listed, with the place in the passport), or the schema is not installed.
    """
    try:
        raw = path.read_bytes()[:MAX_PASSPORT_BYTES + 1]
    except OSError as e:
        raise PolicyError(Problem(f"cannot read the passport: {e.strerror or e}", str(path),
                                  hint="check the path after 'oap:'")) from e
    if len(raw) > MAX_PASSPORT_BYTES:
        raise PolicyError(Problem("the passport is larger than 1 MiB", str(path)))
    try:
        passport = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise PolicyError(Problem(f"the passport is not JSON: {e}", str(path),
                                  hint="an OAP passport is a JSON object")) from e
    problems = [Problem(f"{where}: {message}" if where else message, str(path),
                        hint="see the OAP 1.0 passport schema")
                for where, message in _schema_errors(passport, str(path))]
    if problems:
        raise PolicyError(problems)
    assert isinstance(passport, dict)  # the schema says it is an object
    return passport


def _schema_errors(passport: Any, file: str) -> list[tuple[str, str]]:
    try:
        import jsonschema  # type: ignore[import-untyped]
    except ImportError as e:
        raise PolicyError(Problem("validating an OAP passport needs jsonschema", file,
                                  hint=_INSTALL)) from e
    spec = importlib.util.find_spec("aport_guardrails")
    schema_file = None if spec is None or spec.origin is None \
        else Path(spec.origin).parent.joinpath(*_SCHEMA)
    if schema_file is None or not schema_file.is_file():
        raise PolicyError(Problem("the OAP passport schema is not installed", file,
                                  hint=_INSTALL))
    schema = json.loads(schema_file.read_text(encoding="utf-8"))
    validator = jsonschema.Draft7Validator(schema,
                                           format_checker=jsonschema.FormatChecker())
    errors = sorted(validator.iter_errors(passport), key=lambda e: list(map(str, e.path)))
    return [("/".join(map(str, e.path)), e.message) for e in errors[:20]]


def passport_policy(passport: Mapping[str, Any], name: str) -> tuple[dict[str, Any], list[str]]:
    """The policy a validated passport stands for, and notes on the limits it cannot enforce.

    ``name`` is how messages name the passport (its file name)."""
    status = passport.get("status")
    who = f"passport {passport.get('passport_id', name)}"
    if status != "active":
        return {"version": 1, "rules": [{
            "id": "oap.passport_suspended", "match": {"tool": "*"}, "effect": "deny",
            "message": f"This agent's {who} is {status}: it may not call any tool. Stop and "
                       "tell the user; its owner must reactivate the passport."}]}, []
    granted: dict[str, dict[str, Any]] = {}
    for capability in passport.get("capabilities", ()):
        cap_id = str(capability["id"])
        granted[cap_id] = {**(capability.get("params") or {}),
                           **(passport.get("limits", {}).get(cap_id) or {})}
    held = {_ALIASES.get(c, c) for c in granted}
    rules: list[dict[str, Any]] = []
    for capability, kinds in _CAPABILITY_KINDS.items():
        if capability not in held:
            rules.append({
                "id": f"oap.tool_not_allowed.{capability}", "match": {"kind": list(kinds)},
                "effect": "deny",
                "message": f"This agent's {who} does not grant '{capability}', which this tool "
                           "needs. Use another way or ask the user."})
    notes: list[str] = []
    for cap_id, limits in granted.items():
        capability = _ALIASES.get(cap_id, cap_id)
        known = _RATES | _LIMITS.get(capability, frozenset())
        rules.extend(_limit_rules(capability, cap_id,
                                  {k: v for k, v in limits.items() if k in known}, who))
        unknown = sorted(set(limits) - known)
        if unknown and capability in _CAPABILITY_KINDS:
            notes.append(f"limits.{cap_id}: {', '.join(unknown)} not enforced by callwarden")
    return {"version": 1, "rules": rules}, notes


def _limit_rules(capability: str, cap_id: str, limits: Mapping[str, Any], who: str
                 ) -> list[dict[str, Any]]:
    """The rules for one granted capability's limits."""
    kinds = list(_CAPABILITY_KINDS.get(capability, ()))
    if not kinds:
        return []
    rules: list[dict[str, Any]] = []

    def rule(code: str, message: str, **condition: Any) -> None:
        rules.append({"id": f"oap.{code}.{cap_id}", "match": {"kind": kinds}, "effect": "deny",
                      "message": f"{message} ({who}, limits.{cap_id}).", **condition})

    commands = _strings(limits.get("allowed_commands"))
    if commands is not None and "*" not in commands:
        rule("command_not_allowed",
             f"This agent may run only these commands: {', '.join(commands) or 'none'}",
             shell={"allow": [f"{c} *" for c in commands] or ["callwarden-no-command"],
                    "opaque": "deny"})
    blocked = _strings(limits.get("blocked_patterns"))
    if blocked and capability == "system.command.execute":
        rule("blocked_pattern", "This command matches a pattern the agent's passport blocks, "
             "or cannot be read well enough to tell that it does not",
             shell={**_blocked_commands(blocked), "opaque": "deny"})
    elif blocked and capability in ("data.file.read", "data.file.write"):
        rule("blocked_pattern", "This path matches a pattern the agent's passport blocks",
             paths={"deny": blocked})
    timeout = limits.get("max_execution_time")
    if isinstance(timeout, int | float) and not isinstance(timeout, bool):
        rule("limit_exceeded", f"Commands may run for at most {timeout} seconds",
             **{"if": f"has(args.timeout) && args.timeout > {timeout}"})
    paths = _strings(limits.get("allowed_paths"))
    if paths is not None and "*" not in paths and "**" not in paths:
        roots = [p.removesuffix("/**").removesuffix("/*") or "/" for p in paths]
        rule("path_not_allowed", f"This agent may use files only under {', '.join(roots)}",
             paths={"allow_roots": roots} if roots else {"deny": ["**"]})
    if blocked_paths := _strings(limits.get("blocked_paths")):
        rule("blocked_pattern", "This path is blocked by the agent's passport",
             paths={"deny": blocked_paths})
    domains = _strings(limits.get("allowed_domains"))
    if domains is not None and "*" not in domains:
        rule("domain_not_allowed", f"This agent may reach only {', '.join(domains) or 'no host'}",
             urls={"allow_domains": domains or ["callwarden.invalid"]})
    if blocked_domains := _strings(limits.get("blocked_domains")):
        rule("domain_blocked", "This host is blocked by the agent's passport",
             urls={"deny_domains": blocked_domains})
    for key, window in (("max_calls_per_minute", "60s"), ("msgs_per_min", "60s"),
                        ("msgs_per_day", "1d")):
        count = limits.get(key)
        if isinstance(count, int) and not isinstance(count, bool):
            rules.append({"id": f"oap.limit_exceeded.{cap_id}.{key}",
                          "match": {"kind": kinds}, "effect": "deny",
                          "message": f"The agent's passport allows {count} such calls per "
                                     f"{'minute' if window == '60s' else 'day'} ({who}).",
                          "limit": {"calls": count, "window": window, "per": "agent"}})
    rules.extend(_amount_rules(cap_id, kinds, limits, who))
    return rules


def _amount_rules(cap_id: str, kinds: list[str], limits: Mapping[str, Any], who: str
                  ) -> list[dict[str, Any]]:
    """``max_amount`` and ``currency_limits.<CUR>.max_per_tx``: a larger amount is denied."""
    caps: list[tuple[str | None, float]] = []
    if isinstance(limits.get("max_amount"), int | float):
        currency = limits.get("currency")
        caps.append((currency if isinstance(currency, str) else None, limits["max_amount"]))
    currency_limits = limits.get("currency_limits")
    if isinstance(currency_limits, Mapping):
        for currency, spec in currency_limits.items():
            if isinstance(spec, Mapping) and isinstance(spec.get("max_per_tx"), int | float):
                caps.append((str(currency), spec["max_per_tx"]))
    rules = []
    for i, (currency, most) in enumerate(caps):
        where = f"args.currency == {json.dumps(currency)} && " if currency else ""
        rules.append({
            "id": f"oap.limit_exceeded.{cap_id}.amount{i}", "match": {"kind": kinds},
            "effect": "deny", "if": f"{where}args.amount > {most}",
            "message": f"The agent's passport allows at most {most}"
                       f"{' ' + currency if currency else ''} per transaction ({who})."})
    return rules


def _blocked_commands(patterns: Sequence[str]) -> dict[str, Any]:
    """A ``shell:`` condition for blocked command patterns: each one read as a command pattern
    (flag-aware, so ``rm -rf`` also stops ``r''m -fr`` and ``rm --recursive --force``), and
    also as text anywhere in the command line, as OAP's evaluators match it."""
    deny: list[str] = []
    for pattern in patterns:
        candidate = f"{pattern.strip()} *"
        try:
            ShellMatcher({"deny": [candidate]})
        except ConfigError:
            continue  # not a command (an operator, a fork bomb): matched as text only
        deny.append(candidate)
    lines = ["*" + "".join(f"[{c}]" if c in "*?[]{}\\," else c for c in p) + "*"
             for p in patterns]
    text = {"program": "*", "line": lines}
    return {"deny": deny, "rules": [text]} if deny else {"rules": [text]}


def _strings(value: Any) -> list[str] | None:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    return None
