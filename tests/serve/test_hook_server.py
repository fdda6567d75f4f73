"""``callwarden hook claude-code --server URL``: the coding agent's hook asks a running
``callwarden serve`` instead of reading a policy; it fails closed when the service cannot
answer."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import pytest
from test_serve import CLI, TIMEOUT, TOKENS, Service


def pre_tool_use(tool: str, tool_input: Any) -> str:
    """A PreToolUse payload as Claude Code sends it."""
    return json.dumps({"session_id": "sess-9", "cwd": "/tmp", "hook_event_name": "PreToolUse",
                       "permission_mode": "default", "tool_name": tool,
                       "tool_input": tool_input, "tool_use_id": "toolu_01"})


def hook(payload: str, *options: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("CALLWARDEN_")}
    return subprocess.run([str(CLI), "hook", "claude-code", *options], input=payload,
                          capture_output=True, text=True, timeout=TIMEOUT,
                          env={**base, "CALLWARDEN_SERVER_TOKEN": TOKENS["agent"], **env},
                          check=False)


def specific(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout).get("hookSpecificOutput", {})) if done.stdout.strip() \
        else {}  # no opinion: Claude Code's own permissions apply


def test_the_service_decides_for_the_hook(service: Service) -> None:
    allowed = hook(pre_tool_use("read_file", {"path": "a"}), "--server", service.url)
    denied = hook(pre_tool_use("delete_file", {"path": "a"}), "--server", service.url)
    asked = hook(pre_tool_use("deploy", {"env": "prod"}),
                 CALLWARDEN_SERVER=service.url)  # the environment names it too
    assert specific(allowed).get("permissionDecision") in (None, "allow")
    assert specific(denied)["permissionDecision"] == "deny"
    assert "trash/" in specific(denied)["permissionDecisionReason"]
    assert specific(asked)["permissionDecision"] == "ask"
    decisions = [(e["tool"], e["effect"], e["framework"], e["session"], e["context"].get("cwd"))
                 for e in service.events() if e["type"] == "decision"]
    assert decisions == [("read_file", "allow", "claude-code", "sess-9", "/tmp"),
                         ("delete_file", "deny", "claude-code", "sess-9", "/tmp"),
                         ("deploy", "ask", "claude-code", "sess-9", "/tmp")]


@pytest.mark.parametrize("problem", ["unreachable", "wrong token", "no token", "not http"])
def test_a_service_that_cannot_decide_blocks_the_call(service: Service, problem: str) -> None:
    url = {"unreachable": "http://127.0.0.1:9", "not http": "file:///etc/passwd"}.get(
        problem, service.url)
    env = {"wrong token": {"CALLWARDEN_SERVER_TOKEN": "not-a-token-of-the-service"},
           "no token": {"CALLWARDEN_SERVER_TOKEN": ""}}.get(problem, {})
    done = hook(pre_tool_use("read_file", {"path": "a"}), "--server", url, **env)
    assert done.returncode == 2  # Claude Code: block, the reason on stderr
    assert "blocked" in done.stderr
    assert not service.audit.exists() or not service.events()  # the service decided nothing
