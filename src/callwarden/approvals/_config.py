"""The policy file's ``approvals:`` section, and where the CLI finds the store."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from callwarden._units import parse_duration
from callwarden.approvals._integrity import identity
from callwarden.exceptions import ConfigError
from callwarden.state._sqlite import state_home

__all__ = ["ApprovalSettings", "default_state_url", "parse_config", "state_url_from_policy"]
_KEYS = ("approvers", "groups", "key_file", "max_open", "on_expiry", "remind", "required",
         "state", "ttl", "veto")
_EXAMPLE = ("e.g. approvals: {ttl: 30m, approvers: [alice, bob, carol], required: 2, "
            "on_expiry: deny}")


@dataclass(frozen=True, slots=True)
class ApprovalSettings:
    """The parsed ``approvals:`` section."""

    ttl: float = 3600.0
    approvers: tuple[str, ...] | None = None
    on_expiry: str = "deny"
    state: str | None = None
    key_file: str | None = None
    required: int = 1
    veto: bool = True
    max_open: tuple[tuple[str, int], ...] = ()
    #: ``remind: {after, every, call}``: (seconds, seconds or None, "module:function")
    remind: tuple[float, float | None, str] | None = None


def parse_config(config: Mapping[str, Any] | None) -> ApprovalSettings:
    """Validates an ``approvals:`` section.

    Raises:
        ConfigError: naming the key at fault and how to fix it.
    """
    if config is None:
        return ApprovalSettings()
    if not isinstance(config, Mapping):
        raise ConfigError("the approvals section must be a mapping", hint=_EXAMPLE)
    for key in config:
        if key not in _KEYS:
            raise ConfigError(f"unknown key {key!r} in approvals", key=str(key),
                              hint=f"allowed keys: {', '.join(_KEYS)}")
    ttl = 3600.0
    if "ttl" in config:
        try:
            ttl = parse_duration(config["ttl"])
        except ValueError as e:
            raise ConfigError(str(e), key="ttl", hint="how long a request stays valid, e.g. 30m") \
                from e
    approvers = _approvers(config.get("approvers"), _groups(config.get("groups")))
    on_expiry = config.get("on_expiry", "deny")
    if on_expiry not in ("deny", "ask"):
        raise ConfigError(f"must be deny or ask, not {on_expiry!r}", key="on_expiry",
                          hint="deny: an expired approval denies the call; ask: ask again")
    state = config.get("state")
    if state is not None and (not isinstance(state, str) or not state):
        raise ConfigError("must be a store URL", key="state",
                          hint="memory, sqlite:///state.db (next to the policy) or "
                               "redis://host:6379/0")
    key_file = config.get("key_file")
    if key_file is not None and (not isinstance(key_file, str) or not (
            key_file.startswith("~") or Path(key_file).is_absolute())):
        raise ConfigError("must be an absolute path or start with ~", key="key_file",
                          hint="the approvals key is the approver credential: keep it outside "
                               "the project, e.g. key_file: ~/.config/callwarden/approvals.key")
    required = config.get("required", 1)
    if isinstance(required, bool) or not isinstance(required, int) or required < 1:
        raise ConfigError(f"must be a whole number of 1 or more, not {required!r}",
                          key="required", hint="how many distinct people must approve, e.g. 2")
    if approvers is not None and required > len(approvers):  # distinct people, groups expanded
        raise ConfigError(f"{required} approvals can never be given by only "
                          f"{len(approvers)} approvers", key="required",
                          hint="lower required:, or name more approvers")
    veto = config.get("veto", True)
    if not isinstance(veto, bool):
        raise ConfigError("must be true or false", key="veto",
                          hint="true (default): one deny denies the request; false: a deny "
                               "counts against the quorum")
    return ApprovalSettings(ttl, approvers, on_expiry, state, key_file, required, veto,
                            _max_open(config.get("max_open")), _remind(config.get("remind")))


_GROUP = "group:"
_GROUPS_HINT = "e.g. groups: {payments: [alice, bob, carol]}, approvers: [group:payments, dave]"


def _groups(raw: Any) -> dict[str, tuple[str, ...]]:
    """``groups: {payments: [alice, bob, carol]}``: named lists of people, for ``approvers``
    to name as ``group:payments``."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping) or not raw:
        raise ConfigError("must map each group's name to the people in it", key="groups",
                          hint=_GROUPS_HINT)
    groups = {}
    for name, members in raw.items():
        if not isinstance(name, str) or not name.strip() or ":" in name:
            raise ConfigError(f"{name!r} is not a group name (a word without ':')",
                              key="groups", hint=_GROUPS_HINT)
        key = f"groups.{name}"
        if isinstance(members, list) and not members:
            raise ConfigError(f"group {name!r} has nobody in it", key=key,
                              hint="name its people, or remove the group")
        if not isinstance(members, list) or not all(isinstance(m, str) and m.strip()
                                                    for m in members):
            raise ConfigError("must be a list of people's names", key=key, hint=_GROUPS_HINT)
        nested = next((m for m in members if m.strip().startswith(_GROUP)), None)
        if nested is not None:
            raise ConfigError(f"{nested!r}: a group lists people, not other groups", key=key,
                              hint="name those people here too, or both groups in approvers")
        groups[name] = tuple(members)
    return groups


def _approvers(raw: Any, groups: Mapping[str, tuple[str, ...]]) -> tuple[str, ...] | None:
    """The people who may approve: the names in ``approvers``, each ``group:NAME`` its
    members; a person named twice (in two groups, under two spellings) is one person."""
    if raw is None:
        if groups:
            raise ConfigError("groups are named in approvers, as group:NAME", key="groups",
                              hint=_GROUPS_HINT)
        return None
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not raw or not all(isinstance(a, str) and a.strip()
                                                       for a in raw):
        raise ConfigError("must be a non-empty list of names", key="approvers",
                          hint="e.g. approvers: [alice, bob] or [group:payments, dave]; omit it "
                               "to let anyone but the caller approve")
    by_identity = {identity(g): g for g in groups}
    people: dict[str, str] = {}  # identity -> the name as first written
    used = set()
    for entry in raw:
        entry = entry.strip()
        if entry.startswith(_GROUP):
            name = entry[len(_GROUP):].strip()
            if name not in groups:
                known = f"the groups are {', '.join(groups)}" if groups else "there are none"
                raise ConfigError(f"no group {name!r}", key="approvers",
                                  hint=f"{known}; define one under groups:, e.g. groups: "
                                       f"{{{name or 'payments'}: [alice, bob]}}")
            used.add(name)
            members: tuple[str, ...] = groups[name]
        elif identity(entry) in by_identity:
            group = by_identity[identity(entry)]
            raise ConfigError(f"{entry!r} is a group, not a person", key="approvers",
                              hint=f"write group:{group} for its members")
        else:
            members = (entry,)
        for member in members:
            people.setdefault(identity(member), member.strip())
    unused = next((g for g in groups if g not in used), None)
    if unused is not None:
        raise ConfigError(f"group {unused!r} is not named in approvers", key=f"groups.{unused}",
                          hint=f"add group:{unused} to approvers, or remove the group")
    return tuple(people.values())


def _remind(raw: Any) -> tuple[float, float | None, str] | None:
    """``remind: {after: 10m, every: 30m, call: team.notify:approver_reminder}``: who is told
    about requests left waiting (``callwarden approvals remind``, or ``callwarden serve``
    every minute)."""
    if raw is None:
        return None
    hint = "e.g. remind: {after: 10m, every: 30m, call: team.notify:approver_reminder}"
    if not isinstance(raw, Mapping):
        raise ConfigError("must be a mapping", key="remind", hint=hint)
    for key in raw:
        if key not in ("after", "every", "call"):
            raise ConfigError(f"unknown key {key!r}", key=f"remind.{key}", hint=hint)
    call = raw.get("call")
    if not isinstance(call, str) or ":" not in call:
        raise ConfigError("must name a function as module:function", key="remind.call",
                          hint=hint)
    try:
        after = parse_duration(raw.get("after", "10m"))
        every = None if raw.get("every") is None else parse_duration(raw["every"])
    except ValueError as e:
        raise ConfigError(str(e), key="remind", hint=hint) from e
    return after, every, call


_CAP_FIELDS = ("session", "agent")


def _max_open(raw: Any) -> tuple[tuple[str, int], ...]:
    """``max_open: {session: 5, agent: 20}``: at most that many requests waiting at once per
    session / per agent; past it, an ask is a deny (approval fatigue)."""
    if raw is None:
        return ()
    hint = "e.g. max_open: {session: 5, agent: 20}"
    if not isinstance(raw, Mapping) or not raw:
        raise ConfigError("must map session and/or agent to a number", key="max_open",
                          hint=hint)
    caps = []
    for field, cap in raw.items():
        if field not in _CAP_FIELDS:
            raise ConfigError(f"cannot cap open requests per {field!r}", key="max_open",
                              hint=hint)
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise ConfigError(f"must be a whole number of 1 or more, not {cap!r}",
                              key=f"max_open.{field}", hint=hint)
        caps.append((str(field), cap))
    return tuple(caps)


def default_state_url() -> str:
    """Where the approvals CLI looks when given no store: the per-user state folder
    (``$XDG_STATE_HOME/callwarden/state.db``, ``~/.local/state/callwarden/state.db``), outside
    any project an agent works in. A policy names it with
    ``state: sqlite:///~/.local/state/callwarden/state.db``."""
    return "sqlite:///" + os.path.join(state_home(), "state.db")


def resolve_state_url(url: str, base_dir: Path) -> str:
    """Makes a SQLite path absolute: ``~`` is the home folder, a relative path is relative
    to ``base_dir`` (the policy's folder)."""
    if url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
        path = Path(url[len("sqlite:///"):]).expanduser()
        return "sqlite:///" + str(path if path.is_absolute() else (base_dir / path).resolve())
    return url


def state_url_from_policy(path: Path) -> tuple[str, Mapping[str, Any] | None, str | None]:
    """Returns the store URL a policy file names (``approvals.state``, else ``state``, else the
    default), its ``approvals:`` section, and the key the URL came from (``approvals.state``,
    ``state``, or None for the default).

    Raises:
        ConfigError: the file cannot be read or its sections are malformed.
    """
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise ConfigError(f"cannot read policy file {path}: {e}") from e
    if not isinstance(data, Mapping):
        raise ConfigError(f"policy file {path} is not a mapping", hint="start it with 'version: 1'")
    section = data.get("approvals")
    settings = parse_config(section)
    key = "approvals.state" if settings.state else "state"
    url = settings.state or data.get("state")
    if url is None:
        return default_state_url(), section, None
    if not isinstance(url, str) or not url:
        raise ConfigError("must be a store URL", key="state")
    return resolve_state_url(url, path.parent), section, key
