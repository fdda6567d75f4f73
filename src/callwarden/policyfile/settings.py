"""What a loaded policy is made of: :class:`LoadedPolicy`, and the policy-wide settings
(``default``, ``mode``, ``on_error``, ``timeout``, ``workspace``, ``state``, ``audit``,
``approvals``, ``mcp``) checked into typed values.

Loading opens nothing. The guard opens the state store, the audit sinks and the approvals
store from these settings, and builds the engine with them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from callwarden._decision import Effect, Mode
from callwarden._profiles import ToolProfile
from callwarden._units import parse_duration
from callwarden.approvals import ApprovalSettings, parse_config
from callwarden.approvals._config import resolve_state_url
from callwarden.audit import AuditSettings, parse_audit_config
from callwarden.engine import Engine, Rule, Settings
from callwarden.engine.journal import JournalSettings
from callwarden.exceptions import ConfigError, PolicyError, Problem
from callwarden.policyfile.check import Checker, Path_
from callwarden.policyfile.providers import PROVIDERS_ENV, ProviderAllowlist, ProviderMode
from callwarden.policyfile.yamlsrc import Lines
from callwarden.state import check_store_url

__all__ = ["MCP_KEYS", "LoadedPolicy", "parse_approvals", "parse_audit", "parse_journal",
           "parse_mcp", "parse_settings", "parse_state", "parse_workspace"]

# ``mcp:``: the gateway's policy settings (``callwarden mcp``), each on by default.
MCP_KEYS = ("hide_refused", "pin_tools")


@dataclass(frozen=True, eq=False)
class LoadedPolicy:
    """A policy file compiled and checked: its rules, profiles and settings.

    Attributes:
        rules: the compiled rules, inherited ones first, in policy order.
        settings: the policy-wide decision settings (default, mode, on_error, timeout, name).
        profiles: the ``tools:`` profiles (inherited ones merged in).
        state: the ``state:`` store URL (a relative SQLite path made absolute), or None.
        audit: the checked ``audit:`` section (no sink open yet), or None.
        approvals: the checked ``approvals:`` section (its ``state`` URL made absolute), or None.
        workspace: where relative paths and ``~`` point (``root``, ``home``).
        digest: the SHA-256 of the policy's text.
        source: the policy file's path, when it was loaded from one.
        lines: where each key is written, for errors found when the guard opens a store or a
            sink.
        notes: what loading left unchecked, not errors: with ``providers="check"``, each
            ``use:`` not imported and the inline examples not run because of them. A policy
            with such notes is for checking only (its unloaded rules fail closed).
        mcp: the ``mcp:`` settings of the MCP gateway (``hide_refused``, ``pin_tools``), those
            of the policies it extends merged in; a key not given is on.
        files: the files it was read from: the policy file, those it extends (bundled ones
            included) and their list files.
        journal: the ``journal:`` and ``on_in_doubt:`` settings (exactly once across crashes),
            inherited through ``extends:`` where this policy does not set them.
    """

    rules: tuple[Rule, ...]
    settings: Settings
    profiles: Mapping[str, ToolProfile] = field(default_factory=dict)
    state: str | None = None
    audit: AuditSettings | None = None
    approvals: ApprovalSettings | None = None
    workspace: Mapping[str, str] = field(default_factory=dict)
    digest: str = ""
    source: str | None = None
    lines: Lines | None = None
    notes: tuple[Problem, ...] = ()
    files: tuple[str, ...] = ()
    mcp: Mapping[str, bool] = field(default_factory=dict)
    journal: JournalSettings = field(default_factory=JournalSettings)
    _warmed: bool = field(default=False, init=False, repr=False, compare=False)

    def engine(self, *, store: Any = None, clock: Any = None) -> Engine:
        """A new engine deciding with this policy (``store`` for its limits and history).
        The first one is warmed (:meth:`Engine.warm`): that is part of loading the policy,
        outside any decision's deadline."""
        engine = Engine(self.rules, settings=self.settings, profiles=self.profiles,
                        store=store, clock=clock, journal=self.journal)
        if not self._warmed:
            object.__setattr__(self, "_warmed", True)
            engine.warm()
        return engine

    def error(self, path: Path_, message: str, hint: str | None = None) -> PolicyError:
        """A :class:`PolicyError` naming the line of ``path`` (e.g. ``("state",)``)."""
        lines = self.lines or Lines(self.source)
        key = ".".join(str(p) for p in path) or None
        return PolicyError(Problem(message, lines.file, lines.line(path), key, hint))


def parse_settings(data: Mapping[str, Any], check: Checker, lines: Lines, digest: str) -> Settings:
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


def parse_journal(sources: list[tuple[Mapping[str, Any], Checker]]) -> JournalSettings:
    """``journal: true | false | {ttl: 7d, keep: 1h}`` and ``on_in_doubt: ask | deny |
    allow``, from the policy and the ones it extends (``sources``: the policy first); a key
    the policy sets wins over a base's."""
    defaults = JournalSettings()
    enabled, ttl, keep, on_in_doubt = True, defaults.ttl, defaults.keep, "ask"
    for data, check in reversed(sources):
        if "on_in_doubt" in data:
            on_in_doubt = check.choice(data["on_in_doubt"], ("on_in_doubt",),
                                       ("ask", "deny", "allow")) or on_in_doubt
        if "journal" not in data:
            continue
        raw = data["journal"]
        if isinstance(raw, bool):
            enabled = raw
            continue
        if not isinstance(raw, Mapping):
            check.error(("journal",), "must be true, false or a mapping",
                        "e.g. journal: {ttl: 7d, keep: 1h}; journal: false turns it off")
            continue
        check.keys(raw, ("journal",), ("ttl", "keep"), "journal")
        enabled = True
        for key in ("ttl", "keep"):
            if key in raw:
                try:
                    seconds = parse_duration(raw[key])
                except ValueError as e:
                    check.error(("journal", key), str(e))
                    continue
                if seconds <= 0:
                    check.error(("journal", key), "must be longer than zero",
                                "journal: false turns the journal off")
                    continue
                ttl, keep = (seconds, keep) if key == "ttl" else (ttl, seconds)
    return JournalSettings(enabled, Effect(on_in_doubt), ttl, keep)


def parse_workspace(raw: Any, check: Checker, folder: Path) -> dict[str, Any]:
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



def parse_mcp(raw: Any, check: Checker) -> dict[str, bool]:
    """``mcp: {hide_refused: true, pin_tools: true}``: what ``callwarden mcp`` does with tools
    the policy refuses whatever their arguments (left out of ``tools/list``) and with tool
    definitions (pinned, a changed one refused)."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        check.error(("mcp",), "must be a mapping", "e.g. mcp: {hide_refused: false}")
        return {}
    check.keys(raw, ("mcp",), MCP_KEYS, "mcp")
    out = {}
    for key in MCP_KEYS:
        if key in raw:
            if isinstance(raw[key], bool):
                out[key] = raw[key]
            else:
                check.error(("mcp", key), "must be true or false")
    return out


def parse_state(raw: Any, check: Checker, base_dir: Path) -> str | None:
    """``state: URL``: checked, not opened; a relative SQLite path is relative to the policy."""
    if raw is None:
        return None
    if not isinstance(raw, str) or not raw:
        check.error(("state",), "must be a store URL",
                    "memory, sqlite:///state.db (next to the policy) or redis://host:6379/0")
        return None
    try:
        check_store_url(raw)
    except ValueError as e:
        check.error(("state",), str(e), "memory, sqlite:///path.db or redis://host:6379/0")
        return None
    return resolve_state_url(raw, base_dir)


def parse_audit(raw: Any, check: Checker, base_dir: Path, *, providers: ProviderMode = "load",
                allowlist: ProviderAllowlist | None = None) -> AuditSettings | None:
    """The ``audit:`` section, checked; its sinks are opened by the guard.

    The names it imports (``callable`` sinks, ``redact.callback``) obey the providers
    allowlist; with ``providers="check"`` they are not imported: a stand-in that refuses to
    run takes their place, so the settings are for checking only.
    """
    if raw is None:
        return None
    found = list(_audit_targets(raw))
    refused = False
    for path, target in found:
        if allowlist is not None and not allowlist.allows(target, base_dir):
            check.error(("audit", *path), f"{target!r} is not an allowed provider",
                        f"{PROVIDERS_ENV} allows only: {allowlist.describe()}")
            refused = True
    if refused:
        return None
    if providers == "check" and found:
        raw = _without_targets(raw)
    try:
        return parse_audit_config(raw, base_dir=base_dir)
    except ConfigError as e:
        sub = tuple(getattr(e, "path", ()) or ())
        check.error(("audit", *sub), str(e), e.hint)
        return None


def _audit_targets(raw: Any) -> Iterator[tuple[Path_, str]]:
    """The ``module:name`` strings the ``audit:`` section would import, with their paths."""
    sinks, prefix = (raw, ()) if isinstance(raw, list) else (
        (raw.get("sinks"), ("sinks",)) if isinstance(raw, Mapping) else (None, ()))
    for i, sink in enumerate(sinks if isinstance(sinks, list) else ()):
        if not isinstance(sink, Mapping) or "callable" not in sink:
            continue
        value = sink["callable"]
        if isinstance(value, str):
            yield (*prefix, i, "callable"), value
        elif isinstance(value, Mapping) and isinstance(value.get("target"), str):
            yield (*prefix, i, "callable", "target"), value["target"]
        if isinstance(sink.get("target"), str):
            yield (*prefix, i, "target"), sink["target"]
    redact = raw.get("redact") if isinstance(raw, Mapping) else None
    if isinstance(redact, Mapping) and isinstance(redact.get("callback"), str):
        yield ("redact", "callback"), redact["callback"]


_STAND_IN = "callwarden.policyfile.settings:not_loaded"


def not_loaded(*args: Any, **kwargs: Any) -> Any:
    """Stands in for an audit target of a policy loaded with ``providers="check"``."""
    raise PolicyError("this audit target was not loaded (the policy was loaded with "
                      "providers='check', which imports nothing)")


def _without_targets(raw: Any) -> Any:
    """A copy of the ``audit:`` section whose import targets are the stand-in."""
    def swap(node: Any, path: Path_) -> Any:
        if path in paths:
            return _STAND_IN
        if isinstance(node, Mapping):
            return {k: swap(v, (*path, k)) for k, v in node.items()}
        if isinstance(node, list):
            return [swap(v, (*path, i)) for i, v in enumerate(node)]
        return node

    paths = {p for p, _ in _audit_targets(raw)}
    return swap(raw, ())


def parse_approvals(raw: Any, check: Checker, base_dir: Path) -> ApprovalSettings | None:
    """The ``approvals:`` section, checked; a ``state`` URL made absolute, not opened."""
    if raw is None:
        return None
    try:
        settings = parse_config(raw)
    except ConfigError as e:
        # groups.payments is the line of that group, not of the section
        check.error(("approvals",) if e.key is None else ("approvals", *str(e.key).split(".")),
                    str(e), e.hint)
        return None
    if settings.state is None:
        return settings
    try:
        check_store_url(settings.state)
    except ValueError as e:
        check.error(("approvals", "state"), str(e))
        return None
    # Every other setting kept as parsed: a quorum, a cap or a reminder holds whichever store
    # the requests live in.
    return replace(settings, state=resolve_state_url(settings.state, base_dir))
