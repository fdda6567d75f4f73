"""``callwarden mcp`` over stdio on both hops: the real MCP Python SDK's client, the gateway as
a process, a real MCP server behind it whose tools log every execution (the log proves what
ran)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp_support import CLI, POLICY, TIMEOUT, UPSTREAM, Setup, ran, start_http_server, text

from callwarden import Guard
from callwarden.approvals import Status


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


async def test_allowed_denied_and_rewritten_calls(setup: Setup) -> None:
    async with setup.session() as session:
        read = await session.call_tool("read_file", {"path": "notes.txt"})
        denied = await session.call_tool("delete_file", {"path": "notes.txt"})
        capped = await session.call_tool("search", {"query": "invoices", "limit": 50})
    assert not read.is_error and text(read) == "contents of notes.txt"
    assert denied.is_error
    assert text(denied) == "Deleting files is not allowed here; move them to trash/ instead."
    assert text(capped) == "5 results for invoices"
    # The denied call never reached the server; the rewrite did, with the new arguments.
    assert ran(setup.log) == [("read_file", {"path": "notes.txt"}),
                              ("search", {"query": "invoices", "limit": 5})]
    decisions = [(e["tool"], e["effect"], e["rule"]) for e in setup.events()
                 if e["type"] == "decision"]
    assert decisions == [("mcp__files__read_file", "allow", "default"),
                         ("mcp__files__delete_file", "deny", "no-delete"),
                         ("mcp__files__search", "modify", "cap-search")]
    outcomes = [(e["tool"], e["status"]) for e in setup.events() if e["type"] == "outcome"]
    assert outcomes == [("mcp__files__read_file", "ok"), ("mcp__files__search", "ok")]


async def test_secrets_are_redacted_in_text_and_structured_results(setup: Setup) -> None:
    async with setup.session() as session:
        dumped = await session.call_tool("env_dump", {})
        config = await session.call_tool("config", {"name": "api"})
    assert "ghp_A1b2" not in text(dumped) and "HOME=/home/dev" in text(dumped)
    assert "REDACTED" in text(dumped)
    assert config.structured_content is not None
    assert config.structured_content["service"] == "api"
    assert "ghp_A1b2" not in json.dumps(config.structured_content)
    assert "ghp_A1b2" not in text(config)
    outcomes = {e["tool"]: e["status"] for e in setup.events() if e["type"] == "outcome"}
    assert outcomes["mcp__files__env_dump"] == "output_modified"
    assert outcomes["mcp__files__config"] == "output_modified"


async def test_halt_ends_the_session_and_the_tool_never_runs(setup: Setup) -> None:
    async with setup.session() as session:
        with pytest.raises(MCPError) as stopped:
            await session.call_tool("wipe", {"disk": "sda"})
        assert "Wiping disks is never allowed" in str(stopped.value)
        with pytest.raises(Exception):  # noqa: B017 - the session is over: any error
            await asyncio.wait_for(session.call_tool("read_file", {"path": "a"}), TIMEOUT)
    assert ran(setup.log) == []


async def test_an_ask_runs_once_after_approval(setup: Setup) -> None:
    """Without elicitation: a tool error names the request; after ``callwarden approvals
    approve ID`` the same call in the same session runs once."""
    async with setup.session() as session:
        first = await session.call_tool("deploy", {"env": "prod"})
        assert first.is_error and "approval" in text(first).lower()
        assert ran(setup.log) == []
        guard = Guard.from_file(setup.policy)
        try:
            pending = guard.approvals.list("pending")
        finally:
            guard.close()
        assert len(pending) == 1 and pending[0].status is Status.PENDING
        assert pending[0].id in text(first)  # the model is told which request awaits
        approve = await asyncio.to_thread(
            subprocess.run, [str(CLI), "approvals", "approve", pending[0].id, "--policy",
                             str(setup.policy), "--by", "alice"],
            capture_output=True, text=True, timeout=TIMEOUT, env=setup.env, check=False)
        assert approve.returncode == 0, approve.stderr
        approved = await session.call_tool("deploy", {"env": "prod"})
        again = await session.call_tool("deploy", {"env": "prod"})
    assert not approved.is_error and text(approved) == "deployed to prod"
    assert again.is_error  # the approval was for one call
    assert ran(setup.log) == [("deploy", {"env": "prod"})]


async def test_tools_the_policy_always_refuses_are_not_listed(setup: Setup) -> None:
    async with setup.session() as session:
        listed = {tool.name for tool in (await session.list_tools()).tools}
    assert "delete_file" not in listed and "wipe" not in listed
    assert {"read_file", "search", "deploy", "config"} <= listed


async def test_show_refused_lists_every_tool(tmp_path: Path) -> None:
    setup = Setup(tmp_path, POLICY, "--show-refused")
    async with setup.session() as session:
        listed = {tool.name for tool in (await session.list_tools()).tools}
    assert {"delete_file", "wipe"} <= listed


async def test_a_server_crash_fails_the_call_and_ends_the_session(setup: Setup) -> None:
    async with setup.session() as session:
        with pytest.raises(MCPError) as gone:
            await asyncio.wait_for(session.call_tool("crash", {}), TIMEOUT)
    assert "gone" in str(gone.value)
    outcomes = [(e["tool"], e["status"]) for e in setup.events() if e["type"] == "outcome"]
    assert outcomes == [("mcp__files__crash", "error")]


async def test_a_call_the_server_does_not_answer_in_time_fails(tmp_path: Path) -> None:
    setup = Setup(tmp_path, POLICY, "--call-timeout", "1")
    async with setup.session() as session:
        with pytest.raises(MCPError) as late:
            await asyncio.wait_for(session.call_tool("hang", {"seconds": 30}), TIMEOUT)
        assert "did not answer within 1 s" in str(late.value)
        # The gateway still serves: the server is alive, the next call goes through.
        read = await asyncio.wait_for(session.call_tool("read_file", {"path": "b"}), TIMEOUT)
    assert text(read) == "contents of b"


async def test_an_upstream_that_cannot_start_is_an_error_not_a_hang(setup: Setup) -> None:
    with pytest.raises(Exception):  # noqa: B017 - no server: the client's initialize fails
        async with setup.session(str(setup.root / "no-such-server")):
            pass


def test_malformed_messages_get_json_rpc_errors(setup: Setup) -> None:
    """Raw lines from a client that is not speaking MCP properly: each gets an error, the
    gateway stays up, and a well-formed request still works."""
    lines = [
        "not json",
        json.dumps([1, 2]),
        json.dumps({"jsonrpc": "2.0", "id": 6, "method": "tools/call",
                    "params": {"name": "read_file", "arguments": {"path": "early"}}}),
        json.dumps({"jsonrpc": "2.0", "id": 8, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}),
        json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {}}),
    ]
    done = subprocess.run(
        [str(CLI), "mcp", "--policy", str(setup.policy), "--", sys.executable, str(UPSTREAM),
         str(setup.log)], input="\n".join(lines) + "\n", capture_output=True, text=True,
        timeout=TIMEOUT, env=setup.env, check=False)
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    errors = [r["error"]["code"] for r in replies if "error" in r]
    assert errors == [-32700, -32600, -32600, -32600]
    # Before the server has named itself, the policy could not tell which tool it is: refused.
    assert "before the server has answered initialize" in next(
        r for r in replies if r.get("id") == 6)["error"]["message"]
    assert next(r for r in replies if r.get("id") == 7)["error"]["message"].startswith(
        "callwarden: tools/call needs params.name")
    initialized = [r for r in replies if r.get("id") == 8]
    assert initialized and initialized[0]["result"]["serverInfo"]["name"] == "files"
    assert ran(setup.log) == []


def test_usage_errors(setup: Setup) -> None:
    none = subprocess.run([str(CLI), "mcp", "--policy", str(setup.policy)], capture_output=True,
                          text=True, timeout=TIMEOUT, env=setup.env, check=False)
    assert none.returncode == 2 and "after --" in none.stderr
    setup.policy.write_text("version: 1\nrules: [{id: x, effect: nope}]\n")
    broken = subprocess.run([str(CLI), "mcp", "--policy", str(setup.policy), "--", "true"],
                            capture_output=True, text=True, timeout=TIMEOUT, env=setup.env,
                            check=False)
    assert broken.returncode == 2 and "effect" in broken.stderr


async def test_two_gateways_share_one_budget(tmp_path: Path) -> None:
    """Limits live in the policy's state store (SQLite here): two gateway processes, one
    session name, a budget of 3 calls: exactly 3 run, whichever process they went through."""
    policy = POLICY + """\
  - id: three-reads
    match: {{tool: mcp__files__read_file}}
    limit: {{calls: 3, per: session}}
    message: Three reads per session.
"""
    first = Setup(tmp_path, policy, "--session", "shared")
    second = Setup(tmp_path, policy, "--session", "shared")
    async with first.session() as one, second.session() as two:
        results = await asyncio.gather(*(
            (one if i % 2 else two).call_tool("read_file", {"path": f"f{i}"})
            for i in range(8)))
    assert sum(not r.is_error for r in results) == 3
    assert all("Three reads per session" in text(r) for r in results if r.is_error)
    assert len(ran(first.log)) == 3


async def test_a_call_through_the_gateway_lets_its_slot_go_with_its_result(
        tmp_path: Path) -> None:
    """limit: {concurrent: 1}: one read in flight at a time; each result recorded frees the
    slot, so reads one after the other all run (an error result included)."""
    policy = POLICY + """\
  - id: one-read-at-a-time
    match: {{tool: "mcp__files__*"}}
    limit: {{concurrent: 1, per: session}}
"""
    setup = Setup(tmp_path, policy)
    async with setup.session() as session:
        results = [await session.call_tool("read_file", {"path": f"f{i}"}) for i in range(3)]
        failed = await session.call_tool("read_file", {})  # the server refuses: no path
        after = await session.call_tool("read_file", {"path": "g"})
    assert [r.is_error for r in results] == [False] * 3
    assert failed.is_error and not after.is_error
    assert [args["path"] for _, args in ran(setup.log)][-1] == "g"


def test_a_client_of_the_2025_protocol_line_by_line(setup: Setup) -> None:
    """``initialize`` (protocol 2025-06-18), then calls: the refusal is a plain tool error."""
    lines = _Lines(setup)
    try:
        hello = lines.ask({"id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}})
        assert hello["result"]["serverInfo"]["name"] == "files"
        lines.send({"method": "notifications/initialized"})
        denied = lines.ask({"id": 2, "method": "tools/call",
                            "params": {"name": "delete_file", "arguments": {"path": "a"}}})
        read = lines.ask({"id": 3, "method": "tools/call",
                          "params": {"name": "read_file", "arguments": {"path": "a"}}})
    finally:
        assert lines.close() == 0
    assert denied["result"] == {"content": [{"type": "text", "text": (
        "Deleting files is not allowed here; move them to trash/ instead.")}], "isError": True}
    assert read["result"]["content"][0]["text"] == "contents of a"
    assert ran(setup.log) == [("read_file", {"path": "a"})]

def _one_by_one(setup: Setup, tmp_path: Path, several: bool,
                lines: list[dict[str, Any] | str]) -> list[dict[str, Any]]:
    """The replies of ``callwarden mcp`` (one server, or ``--config`` with one) to ``lines``
    (messages, or raw text), each sent after the answer to the one before; a reply that never
    comes fails the test instead of hanging it. The gateway must then exit 0."""
    command = [str(CLI), "mcp", "--policy", str(setup.policy)]
    if several:
        config = tmp_path / "servers.json"
        config.write_text(json.dumps({"mcpServers": {"files": {
            "command": sys.executable, "args": [str(UPSTREAM), str(setup.log)],
            "env": {"PYTHONPATH": setup.env["PYTHONPATH"]}}}}))
        command += ["--config", str(config)]
    else:
        command += ["--", sys.executable, str(UPSTREAM), str(setup.log)]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True, env=setup.env)
    assert process.stdin is not None and process.stdout is not None
    replies = []
    pool = ThreadPoolExecutor(1)
    try:
        for message in lines:
            raw = message if isinstance(message, str) else json.dumps({"jsonrpc": "2.0",
                                                                       **message})
            process.stdin.write(raw + "\n")
            process.stdin.flush()
            if isinstance(message, str) or "id" in message:
                line = pool.submit(process.stdout.readline).result(timeout=TIMEOUT)
                replies.append(json.loads(line))
        process.stdin.close()
        assert process.wait(timeout=TIMEOUT) == 0
    finally:
        process.kill()
        process.wait()
        pool.shutdown()
        process.stdout.close()
    return replies


def _initialize() -> list[dict[str, Any] | str]:
    return [{"id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}},
        {"method": "notifications/initialized"}]


@pytest.mark.parametrize("several", [False, True], ids=["one server", "--config"])
def test_a_message_holding_a_lone_surrogate_is_refused_not_passed_on(setup: Setup, tmp_path: Path,
                                                                     several: bool) -> None:
    """A client may send "\\ud800" (valid JSON, not text once read): in a tool's name, an
    id, a method or the arguments, the message is answered with an error saying so (its id
    sent back escaped) and not passed on to the server, which would choke on it (the Python
    SDK's stops answering); the session goes on."""
    prefix = "files__" if several else ""
    replies = _one_by_one(setup, tmp_path, several, [
        *_initialize(),
        {"id": 2, "method": "tools/call",
         "params": {"name": prefix + "read_file", "arguments": {"path": "a\ud800"}}},
        {"id": 3, "method": "tools/call",
         "params": {"name": prefix + "read_file\ud800", "arguments": {}}},
        {"id": "\udfff", "method": "tools/call",
         "params": {"name": prefix + "read_file", "arguments": {"path": "c"}}},
        {"id": 4, "method": "tools/list\ud800"},
        {"method": "notifications/\ud800"},
        {"id": 5, "method": "tools/call",
         "params": {"name": prefix + "read_file", "arguments": {"path": "b"}}}])
    assert [r["id"] for r in replies] == [1, 2, 3, "\udfff", 4, 5]
    for refused in replies[1:5]:
        assert refused["error"]["code"] == -32600
        assert "lone surrogate" in refused["error"]["message"]
    assert replies[5]["result"]["content"][0]["text"] == "contents of b"
    assert ran(setup.log) == [("read_file", {"path": "b"})]


@pytest.mark.parametrize("several", [False, True], ids=["one server", "--config"])
def test_messages_nested_as_deep_as_json_goes_and_deeper_are_answered(
        setup: Setup, tmp_path: Path, several: bool) -> None:
    """Arguments nested 900 deep (JSON, which the gateway reads and walks) are denied by the
    policy; a line nested past what the JSON reader takes is a parse error; neither stops
    the gateway, and the next call runs."""
    prefix = "files__" if several else ""
    deep: Any = "x"
    for _ in range(900):
        deep = [deep]
    too_deep = '{"jsonrpc": "2.0", "id": 9, "method": "ping", "params": ' + "[" * 100_000 \
        + "]" * 100_000 + "}"
    replies = _one_by_one(setup, tmp_path, several, [
        *_initialize(),
        {"id": 2, "method": "tools/call",
         "params": {"name": prefix + "read_file", "arguments": {"path": deep}}},
        too_deep,
        {"id": 3, "method": "tools/call",
         "params": {"name": prefix + "read_file", "arguments": {"path": "b"}}}])
    assert [r["id"] for r in replies] == [1, 2, None, 3]
    assert replies[1]["result"]["isError"] is True
    assert replies[2]["error"]["code"] == -32700
    assert "nested too deeply" in replies[2]["error"]["message"]
    assert replies[3]["result"]["content"][0]["text"] == "contents of b"
    assert ran(setup.log) == [("read_file", {"path": "b"})]


async def test_a_tool_that_changes_after_first_sight_is_refused_until_accepted(
        setup: Setup) -> None:
    """Pinning: the first listing pins each tool; a server that later changes a tool's
    description ("rug pull") gets that tool hidden and its calls refused (audited) until
    ``callwarden mcp accept SERVER TOOL``."""
    async with setup.session() as session:
        assert "read_file" in {t.name for t in (await session.list_tools()).tools}
    setup.env["MCP_FILES_RUG_PULL"] = "1"
    async with setup.session() as session:
        listed = {t.name for t in (await session.list_tools()).tools}
        refused = await session.call_tool("read_file", {"path": "notes.txt"})
        other = await session.call_tool("search", {"query": "x", "limit": 1})
    assert "read_file" not in listed and "search" in listed
    assert refused.is_error and "callwarden mcp accept files read_file" in text(refused)
    assert not other.is_error
    assert ran(setup.log) == [("search", {"query": "x", "limit": 1})]
    refusal = [e for e in setup.events() if e["type"] == "decision"
               and e["tool"] == "mcp__files__read_file"][-1]
    assert (refusal["effect"], refusal["rule"]) == ("deny", "mcp.tool_pin")
    # A new session (another gateway process) still refuses it: the pin is in the store.
    async with setup.session() as session:
        assert (await session.call_tool("read_file", {"path": "a"})).is_error
    accept = await asyncio.to_thread(
        subprocess.run, [str(CLI), "mcp", "accept", "files", "read_file", "--policy",
                         str(setup.policy), "--by", "alice"],
        capture_output=True, text=True, timeout=TIMEOUT, env=setup.env, check=False)
    assert accept.returncode == 0, accept.stderr
    async with setup.session() as session:
        assert "read_file" in {t.name for t in (await session.list_tools()).tools}
        allowed = await session.call_tool("read_file", {"path": "b"})
    assert not allowed.is_error and text(allowed) == "contents of b"


def test_accepting_a_tool_never_seen_says_so(setup: Setup) -> None:
    done = subprocess.run([str(CLI), "mcp", "accept", "files", "nope", "--policy",
                           str(setup.policy)], capture_output=True, text=True,
                          timeout=TIMEOUT, env=setup.env, check=False)
    assert done.returncode == 1 and "no pin for files nope" in done.stderr


@pytest.mark.parametrize(("answer", "runs"), [({"approve": True}, True),
                                              ({"approve": False, "reason": "freeze"}, False)])
async def test_an_ask_is_put_to_the_clients_user(setup: Setup, answer: dict[str, Any],
                                                 runs: bool) -> None:
    """A client that can elicit gets ``elicitation/create`` with an approval form; its user's
    answer runs the call once, or refuses it with the reason."""
    import mcp.types as types

    questions: list[str] = []

    async def elicit(_: Any, params: Any) -> types.ElicitResult:
        questions.append(params.message)
        return types.ElicitResult(action="accept", content=answer)

    async with stdio_client(setup.params()) as (read, write), \
            ClientSession(read, write, read_timeout_seconds=TIMEOUT,
                          elicitation_callback=elicit) as session:
        await asyncio.wait_for(session.initialize(), TIMEOUT)
        done = await session.call_tool("deploy", {"env": "prod"})
        again = await session.call_tool("deploy", {"env": "prod"}) if runs else None
    assert len(questions) == 1 + bool(runs) and "mcp__files__deploy" in questions[0]
    if runs:
        assert not done.is_error and text(done) == "deployed to prod"
        assert again is not None and text(again) == "deployed to prod"  # asked, approved
        assert ran(setup.log) == [("deploy", {"env": "prod"})] * 2
    else:
        assert done.is_error and "freeze" in text(done)
        assert ran(setup.log) == []
    approvals = [e for e in setup.events() if e["type"] == "approval"]
    assert approvals and "(MCP client)" in json.dumps(approvals)


def _modern(message: dict[str, Any], *, elicits: bool = True) -> dict[str, Any]:
    """A 2026-07-28 request: the protocol version and capabilities ride in every ``_meta``."""
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}} if elicits
            else {}}
    params = {**message.get("params", {}), "_meta": meta}
    return {"jsonrpc": "2.0", **message, "params": params}


class _Lines:
    """A raw line-by-line client of the gateway."""

    def __init__(self, setup: Setup) -> None:
        self.process = subprocess.Popen(
            [str(CLI), "mcp", "--policy", str(setup.policy), "--", sys.executable,
             str(UPSTREAM), str(setup.log)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True, env=setup.env)

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        self.process.stdin.flush()

    def receive(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        return json.loads(self.process.stdout.readline())

    def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        self.send(message)
        return self.receive()

    def close(self) -> int:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        code = self.process.wait(timeout=TIMEOUT)
        self.process.stdout.close()
        return code


def test_an_ask_is_put_to_a_2026_clients_user_as_input_required(setup: Setup) -> None:
    """Protocol 2026-07-28: an ``input_required`` result carries the approval form; the retry
    with the user's answer (and the echoed request state) runs the very call once; an answer
    sent with other arguments is not taken."""
    lines = _Lines(setup)
    try:
        assert "result" in lines.ask(_modern({"id": 1, "method": "server/discover"}))
        call = {"name": "deploy", "arguments": {"env": "prod"}}
        asked = lines.ask(_modern({"id": 2, "method": "tools/call", "params": call}))["result"]
        assert asked["resultType"] == "input_required"
        question = asked["inputRequests"]["callwarden_approval"]
        assert question["method"] == "elicitation/create"
        assert question["params"]["requestedSchema"]["required"] == ["approve"]
        answer = {"inputResponses": {"callwarden_approval": {
            "action": "accept", "content": {"approve": True}}},
            "requestState": asked["requestState"]}
        other = lines.ask(_modern({"id": 3, "method": "tools/call", "params": {
            "name": "deploy", "arguments": {"env": "qa"}, **answer}}))["result"]
        assert other["resultType"] == "input_required"  # asked anew: not the same call
        assert ran(setup.log) == []
        done = lines.ask(_modern({"id": 4, "method": "tools/call",
                                  "params": {**call, **answer}}))["result"]
        assert done["content"][0]["text"] == "deployed to prod"
        without = lines.ask(_modern({"id": 5, "method": "tools/call", "params": call},
                                    elicits=False))["result"]
        assert without["isError"] and without["resultType"] == "complete"
        assert "callwarden approvals approve" in without["content"][0]["text"]
    finally:
        assert lines.close() == 0
    assert ran(setup.log) == [("deploy", {"env": "prod"})]


@pytest.fixture
def http_server(setup: Setup) -> Any:
    """The same server over streamable HTTP; yields its URL."""
    server, url = start_http_server(setup.log, setup.env)
    yield url
    server.kill()
    server.wait()


async def test_an_http_upstream_is_governed_the_same(setup: Setup, http_server: str) -> None:
    """stdio to the client, streamable HTTP to the server: allowed, denied, rewritten calls
    and screened results, as over stdio."""
    setup.extra = ["--upstream", http_server, "--header", "X-Trace: callwarden-test"]
    async with stdio_client(StdioServerParameters(
            command=str(CLI), args=["mcp", "--policy", str(setup.policy), *setup.extra],
            env=setup.env)) as (read, write), \
            ClientSession(read, write, read_timeout_seconds=TIMEOUT) as session:
        await asyncio.wait_for(session.initialize(), TIMEOUT)
        listed = {t.name for t in (await session.list_tools()).tools}
        read_ok = await session.call_tool("read_file", {"path": "notes.txt"})
        denied = await session.call_tool("delete_file", {"path": "notes.txt"})
        capped = await session.call_tool("search", {"query": "x", "limit": 50})
        dumped = await session.call_tool("env_dump", {})
    assert "delete_file" not in listed and "read_file" in listed
    assert text(read_ok) == "contents of notes.txt"
    assert denied.is_error and "trash/" in text(denied)
    assert text(capped) == "5 results for x"
    assert "ghp_A1b2" not in text(dumped)
    assert ran(setup.log) == [("read_file", {"path": "notes.txt"}),
                              ("search", {"query": "x", "limit": 5}), ("env_dump", {})]


def test_mcp_usage_errors_for_the_upstream(setup: Setup) -> None:
    both = subprocess.run([str(CLI), "mcp", "--policy", str(setup.policy), "--upstream",
                           "http://127.0.0.1:9/mcp", "--", "true"], capture_output=True,
                          text=True, timeout=TIMEOUT, env=setup.env, check=False)
    assert both.returncode == 2 and "one of the two" in both.stderr
    header = subprocess.run([str(CLI), "mcp", "--policy", str(setup.policy), "--header", "x",
                             "--upstream", "http://127.0.0.1:9/mcp"], capture_output=True,
                            text=True, timeout=TIMEOUT, env=setup.env, check=False)
    assert header.returncode == 2 and "NAME:VALUE" in header.stderr


async def test_an_http_upstream_that_is_down_fails_the_client_fast(setup: Setup) -> None:
    setup.extra = ["--upstream", "http://127.0.0.1:9/mcp"]
    with pytest.raises(Exception):  # noqa: B017 - nothing listens: initialize fails, no hang
        async with stdio_client(StdioServerParameters(
                command=str(CLI), args=["mcp", "--policy", str(setup.policy), *setup.extra],
                env=setup.env)) as (read, write), \
                ClientSession(read, write, read_timeout_seconds=TIMEOUT) as session:
            await asyncio.wait_for(session.initialize(), TIMEOUT)


async def test_annotations_feed_profiles_and_descriptions_reach_rules(tmp_path: Path) -> None:
    """A tool's annotations (destructiveHint) give it a side effect policies match on; its
    description is ``context.mcp.description`` for rules on instructions hidden in it."""
    policy = """\
version: 1
rules:
  - id: no-destructive
    match: {{side_effect: destructive}}
    effect: deny
    message: Destructive tools are not available to this agent.
  - id: injected-description
    match: {{tool: "mcp__*"}}
    if: 'context.mcp.description.matches("(?i)ignore (all )?previous instructions")'
    effect: deny
    message: This tool's description tries to instruct the model; it is not used.
"""
    setup = Setup(tmp_path, policy, "--show-refused")
    async with setup.session() as session:
        await session.list_tools()
        deleted = await session.call_tool("delete_file", {"path": "a"})
        summarized = await session.call_tool("summarize", {"text": "hello"})
        read = await session.call_tool("read_file", {"path": "a"})
    assert deleted.is_error and "Destructive tools" in text(deleted)
    assert summarized.is_error and "tries to instruct" in text(summarized)
    assert not read.is_error
    assert ran(setup.log) == [("read_file", {"path": "a"})]


async def test_a_failure_inside_the_gateway_answers_the_call_and_runs_nothing(
        setup: Setup) -> None:
    """In process: a gateway whose decision step breaks (a bug, injected here) answers the
    call with a JSON-RPC error instead of leaving the client waiting; the server never sees
    the call."""
    from callwarden.gateway import Gateway, ProcessUpstream

    class Broken(Gateway):
        async def _call(self, message: dict[str, Any]) -> None:
            raise RuntimeError("injected")

    guard = Guard.from_file(setup.policy)
    replies: list[dict[str, Any]] = []
    client = asyncio.StreamReader()
    for message in ({"id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}},
            {"id": 2, "method": "tools/call",
             "params": {"name": "read_file", "arguments": {"path": "a"}}}):
        client.feed_data(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
    client.feed_eof()
    try:
        code = await asyncio.wait_for(Broken(guard).serve(client, replies.append, ProcessUpstream(
            [sys.executable, str(UPSTREAM), str(setup.log)])), TIMEOUT)
    finally:
        guard.close()
    assert code == 0
    failed = next(r for r in replies if r.get("id") == 2)
    assert failed["error"]["code"] == -32603 and "injected" in failed["error"]["message"]
    assert ran(setup.log) == []


async def test_several_servers_behind_one_gateway(tmp_path: Path) -> None:
    """``--config`` in the mcpServers format: one stdio server and one over HTTP, offered as
    SERVER__TOOL, each call decided as mcp__SERVER__TOOL and sent to its own server."""
    setup = Setup(tmp_path, POLICY.replace("mcp__files__search", "mcp__remote__search"))
    remote_log = tmp_path / "remote.jsonl"
    remote, url = start_http_server(remote_log, setup.env)
    try:
        config = tmp_path / "servers.json"
        config.write_text(json.dumps({"mcpServers": {
            "files": {"command": sys.executable, "args": [str(UPSTREAM), str(setup.log)],
                      "env": {"PYTHONPATH": setup.env["PYTHONPATH"]}},
            "remote": {"url": url}}}))
        params = StdioServerParameters(command=str(CLI), args=[
            "mcp", "--policy", str(setup.policy), "--config", str(config)], env=setup.env)
        async with stdio_client(params) as (read, write), \
                ClientSession(read, write, read_timeout_seconds=TIMEOUT) as session:
            hello = await asyncio.wait_for(session.initialize(), TIMEOUT)
            listed = {t.name for t in (await session.list_tools()).tools}
            local = await session.call_tool("files__read_file", {"path": "a"})
            capped = await session.call_tool("remote__search", {"query": "q", "limit": 50})
            denied = await session.call_tool("files__delete_file", {"path": "a"})
            remote_delete = await session.call_tool("remote__delete_file", {"path": "b"})
            with pytest.raises(MCPError):
                await session.call_tool("nope", {})
    finally:
        remote.kill()
        remote.wait()
    assert "callwarden" in json.dumps(hello.model_dump(mode="json"))
    assert {"files__read_file", "remote__read_file", "remote__delete_file"} <= listed
    assert "files__delete_file" not in listed  # refused whatever its arguments
    assert text(local) == "contents of a" and text(capped) == "5 results for q"
    assert denied.is_error and not remote_delete.is_error
    assert ran(setup.log) == [("read_file", {"path": "a"})]
    assert ran(remote_log) == [("search", {"query": "q", "limit": 5}),
                               ("delete_file", {"path": "b"})]
    tools = {e["tool"] for e in setup.events() if e["type"] == "decision"}
    assert {"mcp__files__read_file", "mcp__remote__search", "mcp__files__delete_file"} <= tools


def test_a_servers_config_that_is_not_one_is_a_usage_error(setup: Setup) -> None:
    bad = setup.root / "servers.json"
    for text_, said in (('{"mcpServers": {}}', "at least one server"),
                        ('{"mcpServers": {"a": {"args": []}}}', "give a 'command' or a 'url'"),
                        ("nope", "not JSON")):
        bad.write_text(text_)
        done = subprocess.run([str(CLI), "mcp", "--policy", str(setup.policy), "--config",
                               str(bad)], capture_output=True, text=True, timeout=TIMEOUT,
                              env=setup.env, check=False)
        assert done.returncode == 2 and said in done.stderr, done.stderr
    both = subprocess.run([str(CLI), "mcp", "--policy", str(setup.policy), "--config",
                           str(bad), "--", "true"], capture_output=True, text=True,
                          timeout=TIMEOUT, env=setup.env, check=False)
    assert both.returncode == 2 and "--config names the servers" in both.stderr


PAGED_SERVER = '''\
import json, sys
PAGES = {None: (["alpha", "beta"], "p2"), "p2": (["gamma", "delete_all"], "p3"),
         "p3": (["omega"], None)}
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method, params = msg["method"], msg.get("params") or {}
    if method == "initialize":
        result = {"protocolVersion": params["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "paged", "version": "1"}}
    elif method == "tools/list":
        names, cursor = PAGES[params.get("cursor")]
        result = {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in names]}
        if cursor:
            result["nextCursor"] = cursor
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "ran " + params["name"]}]}
    else:
        result = {}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
'''


async def test_every_page_of_each_servers_tools_is_offered(tmp_path: Path) -> None:
    """A server that lists its tools over three pages behind ``--config``: the client gets
    all of them in one list (less the one the policy always refuses), and can call any."""
    setup = Setup(tmp_path, POLICY.replace("mcp__files__delete_file", "mcp__paged__delete_all"))
    server = tmp_path / "paged.py"
    server.write_text(PAGED_SERVER)
    config = tmp_path / "servers.json"
    config.write_text(json.dumps({"mcpServers": {"paged": {"command": sys.executable,
                                                           "args": [str(server)]}}}))
    params = StdioServerParameters(command=str(CLI), args=[
        "mcp", "--policy", str(setup.policy), "--config", str(config)], env=setup.env)
    async with stdio_client(params) as (read, write), \
            ClientSession(read, write, read_timeout_seconds=TIMEOUT) as session:
        await asyncio.wait_for(session.initialize(), TIMEOUT)
        listed = await session.list_tools()
        last = await session.call_tool("paged__omega", {})
        refused = await session.call_tool("paged__delete_all", {})
    assert [t.name for t in listed.tools] == ["paged__alpha", "paged__beta", "paged__gamma",
                                              "paged__omega"]
    assert listed.next_cursor is None
    assert text(last) == "ran omega" and refused.is_error


async def test_the_policy_says_whether_refused_tools_are_listed_and_tools_pinned(
        tmp_path: Path) -> None:
    """``mcp: {hide_refused: false, pin_tools: false}``: refused tools are listed (calls to
    them still refused) and a changed tool is not pinned against; the CLI flags need not be
    given."""
    setup = Setup(tmp_path, POLICY + "mcp: {{hide_refused: false, pin_tools: false}}\n")
    async with setup.session() as session:
        listed = {t.name for t in (await session.list_tools()).tools}
        denied = await session.call_tool("delete_file", {"path": "a"})
    assert {"delete_file", "wipe"} <= listed and denied.is_error
    setup.env["MCP_FILES_RUG_PULL"] = "1"
    async with setup.session() as session:
        listed = {t.name for t in (await session.list_tools()).tools}
        read = await session.call_tool("read_file", {"path": "b"})
    assert "read_file" in listed and text(read) == "contents of b"


@pytest.mark.parametrize(("section", "says"), [
    ("mcp: {{hide: true}}", "allowed keys: hide_refused, pin_tools"),
    ("mcp: {{pin_tools: 'yes'}}", "must be true or false"),
    ("mcp: [hide_refused]", "must be a mapping")])
def test_a_wrong_mcp_section_is_a_policy_error(tmp_path: Path, section: str, says: str) -> None:
    from callwarden.exceptions import PolicyError

    setup = Setup(tmp_path, POLICY + section + "\n")
    with pytest.raises(PolicyError) as wrong:
        Guard.from_file(setup.policy)
    assert says in str(wrong.value)
