"""The gateway's behaviours on every pairing of transports the issue names: a client over
stdio or streamable HTTP (``--listen``), a server over stdio or streamable HTTP. stdio on both
hops is covered call by call in test_gateway_stdio.py; here each behaviour runs on the
pairings with HTTP in them, through the real MCP SDK on both hops."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp_support import (
    CLI,
    POLICY,
    TIMEOUT,
    UPSTREAM,
    Listening,
    Setup,
    ran,
    start_http_server,
    text,
)

from callwarden import Guard

PAIRINGS = ["stdio-http", "http-stdio", "http-http"]  # client side - server side


class Pairing:
    """A gateway between a client and the test server over the named transports."""

    def __init__(self, kind: str, setup: Setup, port: int | None = None) -> None:
        self.kind = kind
        self.setup = setup
        self.client, self.server = kind.split("-")
        self.port = port
        self.upstream: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.gateways: list[Listening] = []

    def start_upstream(self, **env: str) -> None:
        """(Re)starts the HTTP server, on the same port as before."""
        if self.server != "http":  # the gateway starts the server: a new gateway, then
            self.setup.env.update(env)
            for gateway in self.gateways:
                gateway.stop()
            return
        self.stop_upstream()
        self.upstream, self.url = start_http_server(self.setup.log, {**self.setup.env, **env},
                                                    port=self.port)
        self.port = int(self.url.rsplit(":", 1)[1].split("/")[0])

    def stop_upstream(self) -> None:
        if self.upstream is not None:
            self.upstream.kill()
            self.upstream.wait()
            self.upstream = None

    def gateway_args(self) -> list[str]:
        behind = ["--upstream", self.url] if self.server == "http" else \
            ["--", sys.executable, str(UPSTREAM), str(self.setup.log)]
        return ["--policy", str(self.setup.policy), *self.setup.extra, *behind]

    @asynccontextmanager
    async def session(self, elicit: Any = None) -> AsyncIterator[ClientSession]:
        async with AsyncExitStack() as stack:
            if self.client == "stdio":
                streams = await stack.enter_async_context(stdio_client(StdioServerParameters(
                    command=str(CLI), args=["mcp", *self.gateway_args()], env=self.setup.env)))
            else:
                if not self.gateways or self.gateways[-1].process.poll() is not None:
                    args = self.gateway_args()
                    where = args.index("--upstream") if "--upstream" in args else \
                        args.index("--")
                    self.gateways.append(Listening(
                        [*args[:where], "--listen", "127.0.0.1:0", *args[where:]],
                        self.setup.env))
                http = await stack.enter_async_context(create_mcp_http_client())
                streams = await stack.enter_async_context(
                    streamable_http_client(self.gateways[-1].url, http_client=http))
            session = await stack.enter_async_context(ClientSession(
                streams[0], streams[1], read_timeout_seconds=TIMEOUT,
                elicitation_callback=elicit))
            await asyncio.wait_for(session.initialize(), TIMEOUT)
            yield session

    def close(self) -> None:
        for gateway in self.gateways:
            gateway.stop()
        self.stop_upstream()


@pytest.fixture(params=PAIRINGS)
def pairing(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Pairing]:
    made = Pairing(request.param, Setup(tmp_path))
    made.start_upstream()
    yield made
    made.close()


async def test_halt_ends_the_session_and_the_tool_never_runs(pairing: Pairing) -> None:
    async with pairing.session() as session:
        allowed = await session.call_tool("read_file", {"path": "a"})
        with pytest.raises(MCPError) as stopped:
            await session.call_tool("wipe", {"disk": "sda"})
        assert "Wiping disks is never allowed" in str(stopped.value)
        with pytest.raises(Exception):  # noqa: B017 - the session is over: any error
            await asyncio.wait_for(session.call_tool("read_file", {"path": "b"}), TIMEOUT)
    assert text(allowed) == "contents of a"
    assert ran(pairing.setup.log) == [("read_file", {"path": "a"})]


@pytest.mark.parametrize(("answer", "runs"), [({"approve": True}, True),
                                              ({"approve": False, "reason": "freeze"}, False)])
async def test_an_ask_is_put_to_the_clients_user(pairing: Pairing, answer: dict[str, Any],
                                                 runs: bool) -> None:
    questions: list[str] = []

    async def elicit(_: Any, params: Any) -> types.ElicitResult:
        questions.append(params.message)
        return types.ElicitResult(action="accept", content=answer)

    async with pairing.session(elicit) as session:
        done = await session.call_tool("deploy", {"env": "prod"})
    assert len(questions) == 1 and "mcp__files__deploy" in questions[0]
    if runs:
        assert text(done) == "deployed to prod"
        assert ran(pairing.setup.log) == [("deploy", {"env": "prod"})]
    else:
        assert done.is_error and "freeze" in text(done) and ran(pairing.setup.log) == []


async def test_an_ask_without_elicitation_runs_once_after_approval(pairing: Pairing) -> None:
    setup = pairing.setup
    async with pairing.session() as session:
        first = await session.call_tool("deploy", {"env": "prod"})
        assert first.is_error and ran(setup.log) == []
        guard = Guard.from_file(setup.policy)
        try:
            (pending,) = guard.approvals.list("pending")
        finally:
            guard.close()
        approve = await asyncio.to_thread(
            subprocess.run, [str(CLI), "approvals", "approve", pending.id, "--policy",
                             str(setup.policy), "--by", "alice"],
            capture_output=True, text=True, timeout=TIMEOUT, env=setup.env, check=False)
        assert approve.returncode == 0, approve.stderr
        approved = await session.call_tool("deploy", {"env": "prod"})
        again = await session.call_tool("deploy", {"env": "prod"})
    assert text(approved) == "deployed to prod" and again.is_error
    assert ran(setup.log) == [("deploy", {"env": "prod"})]


async def test_redaction_and_listing(pairing: Pairing) -> None:
    async with pairing.session() as session:
        listed = {t.name for t in (await session.list_tools()).tools}
        denied = await session.call_tool("delete_file", {"path": "a"})
        capped = await session.call_tool("search", {"query": "q", "limit": 50})
        dumped = await session.call_tool("env_dump", {})
        config = await session.call_tool("config", {"name": "api"})
        attached = await session.call_tool("attach", {"name": "creds.txt"})
    assert "delete_file" not in listed and "wipe" not in listed and "search" in listed
    assert denied.is_error and text(capped) == "5 results for q"
    assert "ghp_A1b2" not in text(dumped) and "REDACTED" in text(dumped)
    assert config.structured_content is not None
    assert config.structured_content["service"] == "api"
    assert "ghp_A1b2" not in json.dumps(config.structured_content) + text(config)
    resource = attached.content[1].resource  # an embedded resource, screened too
    assert resource.uri == "file:///creds.txt" and "REDACTED" in resource.text
    assert "ghp_A1b2" not in json.dumps(attached.model_dump(mode="json"))
    assert ran(pairing.setup.log) == [("search", {"query": "q", "limit": 5}), ("env_dump", {}),
                                      ("config", {"name": "api"}),
                                      ("attach", {"name": "creds.txt"})]


async def test_a_changed_tool_is_refused_until_accepted(pairing: Pairing) -> None:
    async with pairing.session() as session:
        assert "read_file" in {t.name for t in (await session.list_tools()).tools}
    pairing.start_upstream(MCP_FILES_RUG_PULL="1")  # the server changes the tool
    async with pairing.session() as session:
        listed = {t.name for t in (await session.list_tools()).tools}
        refused = await session.call_tool("read_file", {"path": "a"})
    assert "read_file" not in listed
    assert refused.is_error and "callwarden mcp accept files read_file" in text(refused)
    assert ran(pairing.setup.log) == []
    accept = await asyncio.to_thread(
        subprocess.run, [str(CLI), "mcp", "accept", "files", "read_file", "--policy",
                         str(pairing.setup.policy)],
        capture_output=True, text=True, timeout=TIMEOUT, env=pairing.setup.env, check=False)
    assert accept.returncode == 0, accept.stderr
    async with pairing.session() as session:
        await session.list_tools()
        allowed = await session.call_tool("read_file", {"path": "b"})
    assert text(allowed) == "contents of b"


async def test_a_server_crash_fails_the_call_without_a_hang(pairing: Pairing) -> None:
    async with pairing.session() as session:
        with pytest.raises(MCPError):
            await asyncio.wait_for(session.call_tool("crash", {}), TIMEOUT)
    outcomes = [(e["tool"], e["status"]) for e in pairing.setup.events()
                if e["type"] == "outcome"]
    assert outcomes == [("mcp__files__crash", "error")]


async def test_a_server_that_hangs_fails_the_call_in_time(pairing: Pairing) -> None:
    pairing.setup.extra = ["--call-timeout", "1"]
    async with pairing.session() as session:
        with pytest.raises(MCPError) as late:
            await asyncio.wait_for(session.call_tool("hang", {"seconds": 5}), TIMEOUT)
        assert "did not answer within 1 s" in str(late.value)
        read = await asyncio.wait_for(session.call_tool("read_file", {"path": "b"}), TIMEOUT)
    assert text(read) == "contents of b"


async def test_two_gateways_share_one_budget(pairing: Pairing, tmp_path: Path) -> None:
    """Two gateway processes, one session name, a budget of 3 reads in the SQLite store:
    exactly 3 run, whichever gateway they went through."""
    policy = POLICY + """\
  - id: three-reads
    match: {{tool: mcp__files__read_file}}
    limit: {{calls: 3, per: session}}
    message: Three reads per session.
"""
    setup = pairing.setup
    setup.policy.write_text(policy.format(state=tmp_path / "state.db", audit=setup.audit))
    setup.extra = ["--session", "shared"]
    other = Pairing(pairing.kind, setup)
    other.url, other.port = pairing.url, pairing.port  # the same server
    try:
        async with pairing.session() as one, other.session() as two:
            results = await asyncio.gather(*(
                (one if i % 2 else two).call_tool("read_file", {"path": f"f{i}"})
                for i in range(8)))
    finally:
        for gateway in other.gateways:
            gateway.stop()
    assert sum(not r.is_error for r in results) == 3
    assert all("Three reads per session" in text(r) for r in results if r.is_error)
    assert len(ran(setup.log)) == 3
