"""``callwarden mcp wrap CLIENT_CONFIG.json``: every MCP server of a client's config behind the
gateway.

A client config (Claude Desktop's ``claude_desktop_config.json``, Cursor's ``mcp.json``, VS
Code's, Goose's exported JSON, ...) lists servers under ``mcpServers`` (VS Code: ``servers``),
each a ``command`` with ``args`` and ``env``, or a ``url``. Each command server becomes
``callwarden mcp --policy P --name NAME -- COMMAND ARGS...`` with its ``env`` kept, so the
policy sees its tools as ``mcp__NAME__TOOL``. Servers already wrapped are left as they are;
``url`` servers become ``callwarden mcp ... --upstream URL`` (their ``headers`` as
``--header``).
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from callwarden.gateway._proxy import server_slug

__all__ = ["Wrapped", "wrap_config", "write_with_backup"]

_SERVER_KEYS = ("mcpServers", "servers")


class Wrapped:
    """A client config with its servers wrapped: the new text, and what happened to each."""

    def __init__(self, before: str, after: str, wrapped: list[str], skipped: list[str]) -> None:
        self.before = before
        self.after = after
        self.wrapped = wrapped
        self.skipped = skipped

    def diff(self, name: str) -> str:
        """A unified diff of the change."""
        return "".join(difflib.unified_diff(self.before.splitlines(keepends=True),
                                            self.after.splitlines(keepends=True),
                                            fromfile=name, tofile=f"{name} (wrapped)"))


def wrap_config(text: str, policy: str, *, command: str = "callwarden") -> Wrapped:
    """Wraps every command server of a client config's JSON text.

    Raises:
        ValueError: the text is not a JSON object with ``mcpServers`` (or ``servers``).
    """
    try:
        config = json.loads(text)
    except ValueError as e:
        raise ValueError(f"not JSON ({e})") from None
    key = next((k for k in _SERVER_KEYS if isinstance(config, dict)
                and isinstance(config.get(k), dict)), None)
    if key is None:
        raise ValueError("no 'mcpServers' (or 'servers') object: not an MCP client config")
    wrapped: list[str] = []
    skipped: list[str] = []
    servers = config[key]
    for name, server in servers.items():
        if not isinstance(server, Mapping):
            skipped.append(f"{name}: not an object")
        elif _is_wrapped(server):
            skipped.append(f"{name}: already behind callwarden")
        elif isinstance(server.get("command"), str) and server["command"]:
            args = server.get("args", [])
            if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                skipped.append(f"{name}: 'args' is not a list of strings")
                continue
            servers[name] = {**server, "command": command, "args": [
                "mcp", "--policy", policy, "--name", server_slug(name), "--", server["command"],
                *args]}
            wrapped.append(name)
        elif isinstance(server.get("url"), str) and server["url"]:
            headers = server.get("headers", {})
            if not isinstance(headers, Mapping) or not all(
                    isinstance(v, str) for v in headers.values()):
                skipped.append(f"{name}: 'headers' is not an object of strings")
                continue
            rest = {k: v for k, v in server.items() if k not in ("url", "headers", "type")}
            servers[name] = {**rest, "command": command, "args": [
                "mcp", "--policy", policy, "--name", server_slug(name), "--upstream",
                server["url"], *(f for k, v in headers.items() for f in ("--header",
                                                                           f"{k}: {v}"))]}
            wrapped.append(name)
        else:
            skipped.append(f"{name}: neither a 'command' nor a 'url'")
    after = json.dumps(config, indent=2, ensure_ascii=False) + "\n"
    return Wrapped(text, after, wrapped, skipped)


def write_with_backup(path: Path, text: str) -> Path:
    """Writes ``text`` to ``path`` atomically, keeping the old file as ``PATH.bak``
    (``PATH.bak.1`` ... when that exists); returns the backup's path."""
    backup = path.with_name(path.name + ".bak")
    n = 0
    while backup.exists():
        n += 1
        backup = path.with_name(f"{path.name}.bak.{n}")
    shutil.copy2(path, backup)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        shutil.copymode(path, temp)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return backup


def _is_wrapped(server: Mapping[str, Any]) -> bool:
    args = server.get("args")
    return (isinstance(server.get("command"), str)
            and Path(server["command"]).name.startswith("callwarden")
            and isinstance(args, list) and args[:1] == ["mcp"])


