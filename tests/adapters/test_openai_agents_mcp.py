"""MCP servers' tools under the OpenAI Agents SDK adapter: a real MCP server (``mcp``'s
``MCPServer``) in a subprocess over stdio, the SDK's ``MCPServerStdio`` client, the real Runner."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from _openai_agents_support import DENY_MESSAGE, ONE_TURN, POLICY, calls, outputs, scripted
from agents import Agent, Runner, RunState
from agents.mcp import MCPServerStdio

from callwarden.adapters.openai_agents import ToolGate
from callwarden.approvals import Status

SERVER = Path(__file__).parents[1] / "fixtures" / "mcp_files_server.py"
TIMEOUT = 30  # starting the server subprocess is the slow part; a hang still fails


@asynccontextmanager
async def mcp_server(log: Path) -> AsyncIterator[MCPServerStdio]:
    log.touch()
    params = {"command": sys.executable, "args": [str(SERVER), str(log)]}
    async with MCPServerStdio(params=params, client_session_timeout_seconds=TIMEOUT) as server:
        yield server


def ran(log: Path) -> list[tuple[str, dict[str, Any]]]:
    return [(row["tool"], row["args"]) for row in map(json.loads, log.read_text().splitlines())]


def text(output: Any) -> str:
    """An MCP tool's output as the model got it (content items), or a refusal string."""
    if isinstance(output, str):
        return output
    return "".join(item.get("text", "") for item in output)


@pytest.fixture
def gate() -> ToolGate:
    return ToolGate(POLICY, reviewer="alice")


async def test_mcp_tools_are_allowed_denied_and_rewritten(tmp_path, gate) -> None:
    log = tmp_path / "ran.jsonl"
    model = scripted(calls(*ONE_TURN))
    async with mcp_server(log) as server:
        agent = gate.agent(Agent(name="ops", model=model, mcp_servers=[server]))
        await asyncio.wait_for(Runner.run(agent, "go"), TIMEOUT)
    # The SDK runs one turn's tool calls concurrently: which MCP call lands first varies.
    assert sorted(ran(log), key=repr) == [("read_file", {"path": "notes.txt"}),
                                          ("search", {"query": "invoices", "limit": 5})]
    told = outputs(model)
    assert text(told["call-1"]) == DENY_MESSAGE
    assert text(told["call-2"]) == "5 results for invoices"


async def test_an_mcp_call_that_asks_pauses_and_runs_once_when_approved(tmp_path, gate) -> None:
    log = tmp_path / "ran.jsonl"
    model = scripted(calls(("deploy", {"env": "qa"})))
    async with mcp_server(log) as server:
        agent = gate.agent(Agent(name="ops", model=model, mcp_servers=[server]))
        paused = await asyncio.wait_for(Runner.run(agent, "go"), TIMEOUT)
        assert [item.tool_name for item in paused.interruptions] == ["deploy"]
        assert ran(log) == []
        state = await RunState.from_json(agent, paused.to_state().to_json())
        state.approve(state.get_interruptions()[0])
        await asyncio.wait_for(Runner.run(agent, state), TIMEOUT)
    assert ran(log) == [("deploy", {"env": "qa"})]
    assert gate.enforcer.guard.approvals.list()[0].status is Status.CONSUMED


async def test_a_rejected_mcp_call_never_reaches_the_server(tmp_path, gate) -> None:
    log = tmp_path / "ran.jsonl"
    model = scripted(calls(("deploy", {"env": "prod"})))
    async with mcp_server(log) as server:
        agent = gate.agent(Agent(name="ops", model=model, mcp_servers=[server]))
        paused = await asyncio.wait_for(Runner.run(agent, "go"), TIMEOUT)
        state = paused.to_state()
        gate.reject(state, paused.interruptions[0], reason="freeze", by="bob")
        await asyncio.wait_for(Runner.run(agent, state), TIMEOUT)
    assert ran(log) == []
    assert "denied by bob: freeze" in text(outputs(model)["call-0"])


async def test_the_sdk_mcp_client_through_callwarden_mcp(tmp_path) -> None:
    """No adapter at all: the SDK's own MCP client (protocol 2026-07-28: ``server/discover``)
    talks to ``callwarden mcp``, which stands in front of the server and applies the policy;
    the model reads the refusal as a tool error (``--show-refused`` offers the tool the policy
    always refuses, so the scripted model can call it)."""
    log = tmp_path / "ran.jsonl"
    log.touch()
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "version: 1\nrules:\n"
        f"  - {{id: no-delete, match: {{tool: mcp__files__delete_file}}, effect: deny,\n"
        f"     message: {json.dumps(DENY_MESSAGE)}}}\n"
        "  - {id: cap, match: {tool: mcp__files__search}, cap: {limit: 5}, effect: modify}\n")
    cli = Path(sys.executable).with_name("callwarden")
    params = {"command": str(cli),
              "args": ["mcp", "--policy", str(policy), "--show-refused", "--", sys.executable,
                       str(SERVER), str(log)]}
    model = scripted(calls(*ONE_TURN))
    async with MCPServerStdio(params=params, client_session_timeout_seconds=TIMEOUT) as server:
        agent = Agent(name="ops", model=model, mcp_servers=[server])
        await asyncio.wait_for(Runner.run(agent, "go"), TIMEOUT)
    assert sorted(ran(log), key=repr) == [("read_file", {"path": "notes.txt"}),
                                          ("search", {"query": "invoices", "limit": 5})]
    told = outputs(model)
    assert DENY_MESSAGE in text(told["call-1"])
    assert text(told["call-2"]) == "5 results for invoices"
