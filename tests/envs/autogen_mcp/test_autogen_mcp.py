"""AutoGen's McpWorkbench behind GuardedWorkbench, against a real MCP server over stdio.

autogen-ext 0.7.5's MCP client imports ``mcp.shared.context.RequestContext``, which mcp 2.x
removed, while the rest of the suite runs with mcp 2.x: so this test has its own environment
(``.venv-autogen-mcp``, with ``mcp<2``), which ``scripts/test.sh`` builds and runs after the main
suite. Run alone: ``CALLWARDEN_TEST_ENV=autogen-mcp .venv-autogen-mcp/bin/python -m pytest
tests/envs/autogen_mcp``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from _autogen_support import asks, assistant, call, model, results_seen
from autogen_ext.tools.mcp import McpWorkbench, StdioServerParams

from callwarden.adapters.autogen import GuardedWorkbench

SERVER = Path(__file__).with_name("_autogen_mcp_server.py")
POLICY = {"version": 1, "default": "allow", "rules": [
    {"id": "no-delete", "match": {"tool": "delete_file"}, "effect": "deny",
     "message": "Deleting files over MCP is not allowed."}]}


async def test_a_denied_mcp_tool_never_runs_on_the_server(tmp_path) -> None:
    log = tmp_path / "ran.txt"
    params = StdioServerParams(command=sys.executable, args=[str(SERVER), str(log)],
                               env=dict(os.environ), read_timeout_seconds=20)
    client = model(asks(call("c1", "read_file", path="a.txt"),
                        call("c2", "delete_file", path="a.txt")), "ok")
    async with McpWorkbench(params) as mcp:
        agent = assistant(GuardedWorkbench(mcp, POLICY), client, reflect_on_tool_use=True)
        await asyncio.wait_for(agent.run(task="clean up"), 60)
    seen = results_seen(client)
    assert log.read_text().split() == ["read_file"]
    assert seen["c1"].content == "contents of a.txt"
    assert seen["c2"].is_error and seen["c2"].content == "Deleting files over MCP is not allowed."


async def test_the_guardrail_provider_protocol_governs_an_mcp_workbench(tmp_path) -> None:
    """autogen #7405's flow on Workbench.call_tool: callwarden's provider, then another one that
    sees the rewritten arguments, in front of a real MCP server."""
    from callwarden.adapters.autogen_guardrail import (
        CallwardenGuardrailProvider,
        Decision,
        GuardrailResult,
        GuardrailWorkbench,
    )

    seen_by_second: list[dict[str, object]] = []

    class Second:
        async def evaluate(self, *, tool_name, args, agent_name=None, call_id=None,
                           cancellation_token=None):
            seen_by_second.append({"tool": tool_name, **args})
            return GuardrailResult(decision=Decision.ALLOW)

    policy = {**POLICY, "rules": [*POLICY["rules"], {
        "id": "notes-only", "match": {"tool": "read_file"}, "set": {"path": "notes.txt"},
        "effect": "modify"}]}
    log = tmp_path / "ran.txt"
    params = StdioServerParams(command=sys.executable, args=[str(SERVER), str(log)],
                               env=dict(os.environ), read_timeout_seconds=20)
    client = model(asks(call("c1", "read_file", path="a.txt"),
                        call("c2", "delete_file", path="a.txt")), "ok")
    async with McpWorkbench(params) as mcp:
        workbench = GuardrailWorkbench(mcp, [CallwardenGuardrailProvider(policy), Second()])
        agent = assistant(workbench, client, reflect_on_tool_use=True)
        await asyncio.wait_for(agent.run(task="clean up"), 60)
    seen = results_seen(client)
    assert log.read_text().split() == ["read_file"]
    assert seen["c1"].content == "contents of notes.txt"
    assert seen_by_second == [{"tool": "read_file", "path": "notes.txt"}]
    assert seen["c2"].is_error
    assert seen["c2"].content == "Tool call denied: Deleting files over MCP is not allowed."
