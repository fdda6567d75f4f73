"""What the MCP gateway tests share: the policy, the upstream test server (its tools log
every run: the log proves what ran), and a gateway launched by the real CLI."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from listening import ListeningProcess
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

UPSTREAM = Path(__file__).parents[1] / "fixtures" / "mcp_files_server.py"
CLI = Path(sys.executable).with_name("callwarden")
TIMEOUT = 60  # starting two processes is the slow part; a hang still fails

POLICY = """\
version: 1
default: allow
state: sqlite:///{state}
audit: {{sinks: [{{jsonl: {audit}}}]}}
rules:
  - id: no-delete
    match: {{tool: mcp__files__delete_file}}
    effect: deny
    message: Deleting files is not allowed here; move them to trash/ instead.
  - id: cap-search
    match: {{tool: mcp__files__search}}
    cap: {{limit: 5}}
    effect: modify
  - id: deploy-asks
    match: {{tool: mcp__files__deploy}}
    effect: ask
    message: Deploys need a person's go-ahead.
  - id: stop-wipe
    match: {{tool: mcp__files__wipe}}
    effect: halt
    message: Wiping disks is never allowed; the session is over.
  - id: redact-secrets
    on: output
    match: {{tool: "mcp__files__*"}}
    secrets: true
    effect: modify
"""


def ran(log: Path) -> list[tuple[str, dict[str, Any]]]:
    if not log.exists():
        return []
    return [(row["tool"], row["args"]) for row in map(json.loads, log.read_text().splitlines())]


def text(result: Any) -> str:
    return "".join(getattr(item, "text", "") for item in result.content)


class Setup:
    def __init__(self, root: Path, policy: str = POLICY, *extra: str) -> None:
        self.root = root
        self.log = root / "ran.jsonl"
        self.audit = root / "audit.jsonl"
        self.policy = root / "policy.yaml"
        self.policy.write_text(policy.format(state=root / "state.db", audit=self.audit))
        self.extra = list(extra)
        self.env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}

    def params(self, *command: str) -> StdioServerParameters:
        upstream = list(command) or [sys.executable, str(UPSTREAM), str(self.log)]
        return StdioServerParameters(
            command=str(CLI), args=["mcp", "--policy", str(self.policy), *self.extra, "--",
                                    *upstream], env=self.env)

    @asynccontextmanager
    async def session(self, *command: str) -> AsyncIterator[ClientSession]:
        async with stdio_client(self.params(*command)) as (read, write), \
                ClientSession(read, write, read_timeout_seconds=TIMEOUT) as session:
            await asyncio.wait_for(session.initialize(), TIMEOUT)
            yield session

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.audit.read_text().splitlines()]


def start_http_server(log: Path, env: dict[str, str], port: int | None = None
                      ) -> tuple[subprocess.Popen[bytes], str]:
    """The test server over streamable HTTP on ``port`` (default: a free local one), once
    it listens."""
    import socket
    import time

    if port is None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, str(UPSTREAM), str(log), "--http", str(port)],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.05)
    return server, f"http://127.0.0.1:{port}/mcp"


class Listening(ListeningProcess):
    """``callwarden mcp --listen 127.0.0.1:0 ...`` as a process."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        super().__init__(["mcp", *args], env)


def listen_args(setup: Setup, *extra: str, upstream: list[str] | None = None) -> list[str]:
    """The arguments of a listening gateway in front of the test server (over stdio unless
    ``upstream`` says otherwise, e.g. ``["--upstream", URL]``)."""
    behind = upstream if upstream is not None else \
        ["--", sys.executable, str(UPSTREAM), str(setup.log)]
    return ["--policy", str(setup.policy), "--listen", "127.0.0.1:0", *setup.extra, *extra,
            *behind]
