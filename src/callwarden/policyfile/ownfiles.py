"""callwarden's own files, as a policy knows them: what an agent's tools must never touch.

An agent that can edit the policy, write the state store, read the approvals key or run
``callwarden approvals approve`` can undo every rule. A ``paths:`` condition (or a shell
condition's ``read_paths`` / ``write_paths``) with ``callwarden_files: all`` (or ``true``)
denies them: this policy file and those it extends, its list files, its SQLite state and
approvals stores, its audit logs, the approvals key, and callwarden's per-user folders
(config, state, cache) and any ``.callwarden`` folder; ``callwarden_files: private`` all but
the policy and list files, which an agent may read. ``callwarden:recommended`` denies writes
to all of them and reads of the private ones, by file tools and shell commands.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from callwarden.approvals._config import resolve_state_url
from callwarden.approvals._integrity import default_key_file

__all__ = ["OWN_FILES_OPTION", "PRIVATE_FILES_OPTION", "own_files", "policy_files"]

OWN_FILES_OPTION = "callwarden_files"
PRIVATE_FILES_OPTION = "callwarden_private_files"
_PER_USER = ("~/.config/callwarden/**", "~/.local/state/callwarden/**",
             "~/.cache/callwarden/**", "**/.callwarden/**", "/tmp/callwarden-*/**")
# The same folders where the environment moves them (the hook workers' keys are in the cache).
_XDG = ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR")
_SQLITE_COMPANIONS = ("", "-wal", "-shm", "-journal")


def own_files(data: Mapping[str, Any], folder: Path,
              sources: Iterable[tuple[str | None, Mapping[str, Any], Path]]
              ) -> dict[str, list[str]]:
    """The globs naming callwarden's files for a policy document (``data``, read from
    ``folder``; ``sources`` are (file, document, folder) of it and the policies it extends,
    whose list files count too): all of them under ``OWN_FILES_OPTION``, and under
    ``PRIVATE_FILES_OPTION`` those that must not even be read (stores, audit logs, the key,
    callwarden's folders), not the policy and list files."""
    policies = policy_files(sources)
    paths: list[str] = []
    raw = data.get("approvals")
    approvals: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    for url in (data.get("state"), approvals.get("state")):
        if isinstance(url, str) and url.startswith("sqlite:///"):
            db = resolve_state_url(url, folder)[len("sqlite:///"):]
            paths.extend(db + suffix for suffix in _SQLITE_COMPANIONS)
    logs = _audit_files(data.get("audit"), folder)
    paths.extend(logs)
    key = approvals.get("key_file")
    paths.append(str(Path(key).expanduser()) if isinstance(key, str) else str(default_key_file()))
    # A log's rotated pieces (audit.jsonl.1 ...) and an SQLite log's -wal / -shm files.
    rotated = [_literal(os.path.abspath(p)) + "*" for p in logs]
    moved = [_literal(os.path.abspath(os.environ[name])) + "/callwarden/**" for name in _XDG
             if os.environ.get(name, "").startswith("/")]
    private = [*(_literal(os.path.abspath(p)) for p in paths), *rotated, *_PER_USER, *moved]
    return {OWN_FILES_OPTION: [*(_literal(os.path.abspath(p)) for p in policies), *private],
            PRIVATE_FILES_OPTION: private}


def policy_files(sources: Iterable[tuple[str | None, Mapping[str, Any], Path]]) -> list[str]:
    """The files a policy is read from: each (file, document, folder) of ``sources`` (the
    policy and those it extends) and the list files each names."""
    out: list[str] = []
    for file, document, where in sources:
        if file and not file.startswith("<"):
            out.append(file)
        out.extend(_list_files(document.get("lists"), where))
    return out


def _list_files(raw: Any, folder: Path) -> list[str]:
    """The files ``lists: {name: {file: ...}}`` reads."""
    if not isinstance(raw, Mapping):
        return []
    return [str(folder / entry["file"]) for entry in raw.values()
            if isinstance(entry, Mapping) and isinstance(entry.get("file"), str)]


def _audit_files(raw: Any, folder: Path) -> list[str]:
    """The JSONL and SQLite audit logs an ``audit:`` section names (with rotated pieces)."""
    sinks = raw.get("sinks") if isinstance(raw, Mapping) else None
    out: list[str] = []
    for sink in sinks if isinstance(sinks, list) else ():
        if not isinstance(sink, Mapping):
            continue
        for kind in ("jsonl", "sqlite"):
            value = sink.get(kind)
            path = value.get("path") if isinstance(value, Mapping) else value
            if isinstance(path, str) and path:
                out.append(str(folder / Path(path).expanduser()))
    return out


def _literal(path: str) -> str:
    """A path as a glob that matches it alone (glob characters in brackets)."""
    return "".join(f"[{c}]" if c in "*?[]{}" else c for c in path)
