"""``callwarden mcp --listen``: the gateway served over streamable HTTP, in front of a server
over stdio and one over streamable HTTP (HTTP on both hops). The real MCP Python SDK's
clients (a 2025 session client and a 2026 stateless one), the gateway as a process, raw HTTP
for what a client should not send."""

from __future__ import annotations

import asyncio
import http.client
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import mcp.types as types
import pytest
from mcp.client.client import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp_support import (
    CLI,
    TIMEOUT,
    UPSTREAM,
    Listening,
    Setup,
    listen_args,
    ran,
    start_http_server,
    text,
)

TOKEN = "s3cret-token-for-the-gateway"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "raw", "version": "0"}}}


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


@contextmanager
def gateway(setup: Setup, *extra: str, upstream: list[str] | None = None,
            env: dict[str, str] | None = None) -> Iterator[Listening]:
    listening = Listening(listen_args(setup, *extra, upstream=upstream), env or setup.env)
    try:
        yield listening
    finally:
        listening.stop()


@asynccontextmanager
async def session(url: str, *, token: str | None = None,
                  elicit: Any = None) -> AsyncIterator[ClientSession]:
    """A 2025-protocol client session (``initialize``, ``Mcp-Session-Id``) over HTTP."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with create_mcp_http_client(headers=headers) as http, \
            streamable_http_client(url, http_client=http) as streams, \
            ClientSession(streams[0], streams[1], read_timeout_seconds=TIMEOUT,
                          elicitation_callback=elicit) as client:
        await asyncio.wait_for(client.initialize(), TIMEOUT)
        yield client


def post(url: str, body: bytes | dict[str, Any], headers: dict[str, str] | None = None,
         method: str = "POST") -> tuple[int, dict[str, str], bytes]:
    """One raw HTTP request to the gateway: status, headers (lower-case names), body."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=TIMEOUT)
    try:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        sent = {"Content-Type": "application/json",
                "Accept": "application/json, text/event-stream", **(headers or {})}
        connection.request(method, parts.path, body=data if method == "POST" else None,
                           headers=sent)
        response = connection.getresponse()
        return (response.status, {k.lower(): v for k, v in response.getheaders()},
                response.read())
    finally:
        connection.close()


def upstreams_running(log: Path) -> int:
    """How many test-server processes write to ``log`` (one per gateway session)."""
    count = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if command[1:3] == [str(UPSTREAM).encode(), str(log).encode()]:
                count += 1  # the server itself, not the gateway that names it
    return count


def eventually(check: Any, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


# -- the calls, over HTTP ---------------------------------------------------------------------


async def test_a_client_over_http_is_governed_as_over_stdio(setup: Setup) -> None:
    """HTTP to the client, stdio to the server: allowed, denied, rewritten calls; text and
    structured results screened; refused tools not listed; every decision audited."""
    with gateway(setup) as listening:
        async with session(listening.url) as client:
            listed = {t.name for t in (await client.list_tools()).tools}
            read = await client.call_tool("read_file", {"path": "notes.txt"})
            denied = await client.call_tool("delete_file", {"path": "notes.txt"})
            capped = await client.call_tool("search", {"query": "invoices", "limit": 50})
            dumped = await client.call_tool("env_dump", {})
            config = await client.call_tool("config", {"name": "api"})
    assert "delete_file" not in listed and "wipe" not in listed and "read_file" in listed
    assert text(read) == "contents of notes.txt"
    assert denied.is_error and "trash/" in text(denied)
    assert text(capped) == "5 results for invoices"
    assert "ghp_A1b2" not in text(dumped) and "REDACTED" in text(dumped)
    assert config.structured_content is not None
    assert "ghp_A1b2" not in json.dumps(config.structured_content)
    assert ran(setup.log) == [("read_file", {"path": "notes.txt"}),
                              ("search", {"query": "invoices", "limit": 5}),
                              ("env_dump", {}), ("config", {"name": "api"})]
    decisions = [(e["tool"], e["effect"]) for e in setup.events() if e["type"] == "decision"]
    assert ("mcp__files__delete_file", "deny") in decisions
    assert ("mcp__files__search", "modify") in decisions


@pytest.fixture
def http_upstream(setup: Setup) -> Iterator[str]:
    server, url = start_http_server(setup.log, setup.env)
    yield url
    server.kill()
    server.wait()


async def test_http_on_both_hops_and_a_halt_ends_only_its_session(
        setup: Setup, http_upstream: str) -> None:
    with gateway(setup, upstream=["--upstream", http_upstream]) as listening:
        async with session(listening.url) as client:
            read = await client.call_tool("read_file", {"path": "a.txt"})
            denied = await client.call_tool("delete_file", {"path": "a.txt"})
            capped = await client.call_tool("search", {"query": "q", "limit": 50})
            config = await client.call_tool("config", {"name": "api"})
            with pytest.raises(MCPError) as stopped:
                await client.call_tool("wipe", {"disk": "sda"})
            assert "Wiping disks is never allowed" in str(stopped.value)
            with pytest.raises(MCPError):  # the session is over: no such session
                await asyncio.wait_for(client.call_tool("read_file", {"path": "b"}), TIMEOUT)
        async with session(listening.url) as other:  # the gateway serves new sessions
            after = await other.call_tool("read_file", {"path": "c.txt"})
    assert text(read) == "contents of a.txt" and denied.is_error
    assert text(capped) == "5 results for q"
    assert config.structured_content is not None
    assert "ghp_A1b2" not in json.dumps(config.structured_content)
    assert text(after) == "contents of c.txt"
    assert ran(setup.log) == [("read_file", {"path": "a.txt"}), ("search", {"query": "q",
                                                                            "limit": 5}),
                              ("config", {"name": "api"}), ("read_file", {"path": "c.txt"})]


async def test_a_stateless_2026_client(setup: Setup, http_upstream: str) -> None:
    """A client of protocol 2026-07-28 (``server/discover``, no session): its calls are
    decided the same; an ask comes back as ``input_required`` and its retry carries the
    user's answer."""
    questions: list[str] = []

    async def elicit(_: Any, params: Any) -> types.ElicitResult:
        questions.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    with gateway(setup, upstream=["--upstream", http_upstream]) as listening:
        async with Client(listening.url, elicitation_callback=elicit,
                          read_timeout_seconds=TIMEOUT) as client:
            assert client.session.protocol_version == "2026-07-28"
            read = await client.call_tool("read_file", {"path": "n.txt"})
            denied = await client.call_tool("delete_file", {"path": "n.txt"})
            deployed = await client.call_tool("deploy", {"env": "prod"})
    assert text(read) == "contents of n.txt" and denied.is_error
    assert text(deployed) == "deployed to prod" and len(questions) == 1
    assert ran(setup.log) == [("read_file", {"path": "n.txt"}), ("deploy", {"env": "prod"})]


async def test_several_servers_behind_a_listening_gateway(setup: Setup) -> None:
    servers = setup.root / "servers.json"
    servers.write_text(json.dumps({"mcpServers": {"files": {
        "command": sys.executable, "args": [str(UPSTREAM), str(setup.log)]}}}))
    with gateway(setup, upstream=["--config", str(servers)]) as listening:
        async with session(listening.url) as client:
            listed = {t.name for t in (await client.list_tools()).tools}
            read = await client.call_tool("files__read_file", {"path": "x"})
            denied = await client.call_tool("files__delete_file", {"path": "x"})
    assert "files__read_file" in listed and "files__delete_file" not in listed
    assert text(read) == "contents of x" and denied.is_error
    assert ran(setup.log) == [("read_file", {"path": "x"})]


# -- sessions -------------------------------------------------------------------------------


async def test_each_session_has_its_own_upstream_until_it_ends(setup: Setup) -> None:
    with gateway(setup) as listening:
        async with session(listening.url) as one, session(listening.url) as two:
            await one.call_tool("read_file", {"path": "1"})
            await two.call_tool("read_file", {"path": "2"})
            assert upstreams_running(setup.log) == 2
        # The SDK's client ends its session (DELETE) on the way out: its server stops.
        eventually(lambda: upstreams_running(setup.log) == 0, "upstreams left running")
    assert sorted(args["path"] for _, args in ran(setup.log)) == ["1", "2"]


def test_an_idle_session_is_closed(setup: Setup) -> None:
    with gateway(setup, "--session-idle", "1") as listening:
        status, headers, _ = post(listening.url, INIT)
        assert status == 200 and headers["mcp-session-id"]
        sid = headers["mcp-session-id"]
        eventually(lambda: upstreams_running(setup.log) == 1, "no upstream started")
        eventually(lambda: upstreams_running(setup.log) == 0, "the idle session stayed open")
        status, _, body = post(listening.url, {"jsonrpc": "2.0", "id": 2,
                                               "method": "tools/list"},
                               {"Mcp-Session-Id": sid})
    assert status == 404 and "initialize again" in json.loads(body)["error"]["message"]


async def test_a_server_crash_over_http_fails_the_call_not_the_gateway(setup: Setup) -> None:
    with gateway(setup) as listening:
        async with session(listening.url) as client:
            with pytest.raises(MCPError) as gone:
                await asyncio.wait_for(client.call_tool("crash", {}), TIMEOUT)
        async with session(listening.url) as other:
            after = await other.call_tool("read_file", {"path": "z"})
    assert "gone" in str(gone.value)
    assert text(after) == "contents of z"


def test_sigterm_stops_the_gateway_and_every_upstream(setup: Setup) -> None:
    listening = Listening(listen_args(setup), setup.env)
    try:
        for i in range(2):
            status, _, _ = post(listening.url, {**INIT, "id": i})
            assert status == 200
        eventually(lambda: upstreams_running(setup.log) == 2, "upstreams did not start")
    finally:
        code = listening.stop()
    assert code == 0
    eventually(lambda: upstreams_running(setup.log) == 0, "upstreams outlived the gateway")


# -- who may talk to it ---------------------------------------------------------------------


async def test_a_bearer_token_is_required_when_given(setup: Setup) -> None:
    env = {**setup.env, "CALLWARDEN_MCP_TOKEN": TOKEN}
    with gateway(setup, env=env) as listening:
        for headers in ({}, {"Authorization": "Bearer wrong-token-of-the-same-len"},
                        {"Authorization": f"Basic {TOKEN}"}):
            status, got, body = post(listening.url, INIT, headers)
            assert status == 401 and got["www-authenticate"].startswith("Bearer")
            assert "Authorization: Bearer" in json.loads(body)["error"]["message"]
        assert upstreams_running(setup.log) == 0  # nothing started for a refused request
        async with session(listening.url, token=TOKEN) as client:
            read = await client.call_tool("read_file", {"path": "t"})
    assert text(read) == "contents of t"


def test_listening_beyond_loopback_needs_a_token(setup: Setup, tmp_path: Path) -> None:
    def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(CLI), "mcp", "--policy", str(setup.policy), *args, "--",
                               sys.executable, str(UPSTREAM), str(setup.log)],
                              capture_output=True, text=True, timeout=TIMEOUT,
                              env=env or setup.env, check=False)

    open_to_all = run("--listen", "0.0.0.0:0")
    assert open_to_all.returncode == 2 and "bearer token" in open_to_all.stderr
    short = run("--listen", "127.0.0.1:0", env={**setup.env, "CALLWARDEN_MCP_TOKEN": "short"})
    assert short.returncode == 2 and "16 characters" in short.stderr
    empty = tmp_path / "token"
    empty.write_text("\n")
    no_token = run("--listen", "127.0.0.1:0", "--token-file", str(empty))
    assert no_token.returncode == 2 and "empty" in no_token.stderr
    bad = run("--listen", "localhost")
    assert bad.returncode == 2 and "HOST:PORT" in bad.stderr
    assert not ran(setup.log)


def test_dns_rebinding_is_refused(setup: Setup) -> None:
    with gateway(setup, "--allow-origin", "https://app.example") as listening:
        host, _, _ = post(listening.url, INIT, {"Host": "evil.example"})
        origin, _, body = post(listening.url, INIT, {"Origin": "http://evil.example"})
        local, _, _ = post(listening.url, INIT, {"Origin": "http://localhost:6274"})
        allowed, _, _ = post(listening.url, {**INIT, "id": 2},
                             {"Origin": "https://app.example"})
    assert host == 403 and origin == 403 and "Origin" in json.loads(body)["error"]["message"]
    assert local == 200 and allowed == 200


def test_bad_http_requests_get_json_errors_and_the_gateway_goes_on(setup: Setup) -> None:
    with gateway(setup) as listening:
        url = listening.url
        cases = {
            "not json": post(url, b"{nope"),
            "batch": post(url, json.dumps([INIT]).encode()),
            "not json-rpc": post(url, {"id": 1, "method": "initialize"}),
            "no session": post(url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
            "unknown session": post(url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                                    {"Mcp-Session-Id": "nope"}),
            "wrong type": post(url, b"<xml/>", {"Content-Type": "text/xml"}),
            "too big": post(url, b" " * (16 * 1024 * 1024 + 10)),
            "wrong path": post(url.replace("/mcp", "/other"), INIT),
            "wrong method": post(url, b"", method="PUT"),
            "get without session": post(url, b"", method="GET"),
            "delete unknown": post(url, b"", {"Mcp-Session-Id": "nope"}, method="DELETE"),
        }
        expected = {"not json": 400, "batch": 400, "not json-rpc": 400, "no session": 400,
                    "unknown session": 404, "wrong type": 415, "too big": 413,
                    "wrong path": 404, "wrong method": 405, "get without session": 405,
                    "delete unknown": 404}
        for name, (status, headers, body) in cases.items():
            assert status == expected[name], (name, status, body)
            assert headers["content-type"] == "application/json", name
            assert json.loads(body)["error"]["message"].startswith("callwarden: "), name
        status, headers, _ = post(url, INIT)  # still serving
        assert status == 200 and "mcp-session-id" in headers
        sid = headers["mcp-session-id"]
        same_id, _, _ = post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                             {"Mcp-Session-Id": sid})
        listed, _, body = post(url, {"jsonrpc": "2.0", "id": 7, "method": "tools/list"},
                               {"Mcp-Session-Id": sid, "Accept": "application/json"})
        # A lone surrogate (valid JSON, not text): answered with an error, not passed on.
        lone, _, lone_body = post(url, b'{"jsonrpc": "2.0", "id": "\\ud800", "method": '
                                       b'"tools/call", "params": {"name": "read_file", '
                                       b'"arguments": {"path": "\\udfff"}}}',
                                  {"Mcp-Session-Id": sid, "Accept": "application/json"})
        # Nested past what the JSON reader takes: a parse error, not a server error.
        deep, _, deep_body = post(url, b'{"jsonrpc": "2.0", "id": 9, "params": '
                                       + b"[" * 100_000 + b"]" * 100_000 + b"}",
                                  {"Mcp-Session-Id": sid, "Accept": "application/json"})
        ended, _, _ = post(url, b"", {"Mcp-Session-Id": sid}, method="DELETE")
        after, _, _ = post(url, {"jsonrpc": "2.0", "id": 8, "method": "tools/list"},
                           {"Mcp-Session-Id": sid})
    assert same_id == 202
    assert listed == 200 and json.loads(body)["id"] == 7
    refused = json.loads(lone_body)
    assert lone == 200 and refused["id"] == "\ud800", lone_body
    assert "lone surrogate" in refused["error"]["message"]
    assert deep == 400 and "nested too deeply" in json.loads(deep_body)["error"]["message"]
    assert ended == 200 and after == 404
    assert listening.process.returncode == 0
    assert not any("Traceback" in line for line in listening.said), listening.said


def test_a_gateway_that_cannot_reach_its_server_says_so_over_http(setup: Setup) -> None:
    with gateway(setup, upstream=["--upstream", "http://127.0.0.1:9/mcp"]) as listening:
        status, _, body = post(listening.url, INIT)
    assert status == 200
    assert "MCP server behind callwarden" in json.loads(body)["error"]["message"]


def test_the_port_in_use_is_a_clear_error(setup: Setup) -> None:
    with gateway(setup) as listening:
        port = urlsplit(listening.url).port
        again = subprocess.run(
            [str(CLI), "mcp", "--policy", str(setup.policy), "--listen", f"127.0.0.1:{port}",
             "--", sys.executable, str(UPSTREAM), str(setup.log)],
            capture_output=True, text=True, timeout=TIMEOUT, env=setup.env, check=False)
    assert again.returncode == 1 and "cannot listen" in again.stderr
