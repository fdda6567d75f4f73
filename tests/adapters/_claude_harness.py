"""What the Claude tests share: the bundled CLI, an offline environment, one policy, one script.

Every command in the script works in the project directory the test gives the agent, so what
ran is visible as files: ``allowed.txt`` (allowed), ``keep.txt`` survives (denied ``rm``),
``rewritten.txt`` but no ``original.txt`` (rewritten), ``deployed.txt`` (the approval path).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import claude_agent_sdk
from _claude_fake_api import FakeMessagesAPI, tool_use

import callwarden
from callwarden.hooks import run_hook

CLI = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
CALLWARDEN = Path(sys.executable).parent / "callwarden"
SRC = Path(callwarden.__file__).resolve().parent.parent

DENY_MESSAGE = "Deleting files is not allowed here; move them to ./trash instead."

POLICY: dict[str, Any] = {
    "version": 1,
    "default": "allow",
    "rules": [
        {"id": "no-rm", "match": {"tool": "Bash"}, "shell": {"deny": ["rm *"]},
         "effect": "deny", "message": DENY_MESSAGE},
        {"id": "deploy-asks", "match": {"tool": "Bash"}, "shell": {"deny": ["./deploy.sh *"]},
         "effect": "ask"},
        {"id": "stop-everything", "match": {"tool": "Bash"}, "shell": {"deny": ["shutdown *"]},
         "effect": "halt"},
        {"id": "no-echo", "match": {"tool": "Bash"}, "if": "args.command.startsWith('echo ')",
         "set": {"command": "touch rewritten.txt"}, "effect": "modify"},
    ],
}

POLICY_YAML = f"""\
version: 1
default: allow
rules:
  - id: no-rm
    match: {{tool: Bash}}
    shell: {{deny: ["rm *"]}}
    effect: deny
    message: "{DENY_MESSAGE}"
  - id: deploy-asks
    match: {{tool: Bash}}
    shell: {{deny: ["./deploy.sh *"]}}
    effect: ask
  - id: stop-everything
    match: {{tool: Bash}}
    shell: {{deny: ["shutdown *"]}}
    effect: halt
  - id: no-echo
    match: {{tool: Bash}}
    if: "args.command.startsWith('echo ')"
    set: {{command: "touch rewritten.txt"}}
    effect: modify
"""

ALLOWED = tool_use("Bash", {"command": "touch allowed.txt"}, "toolu_allowed")
DENIED = tool_use("Bash", {"command": "rm -f keep.txt"}, "toolu_denied")
REWRITTEN = tool_use("Bash", {"command": "echo hi > original.txt"}, "toolu_rewritten")
ASKED = tool_use("Bash", {"command": "./deploy.sh prod"}, "toolu_asked")
HALTING = tool_use("Bash", {"command": "shutdown now"}, "toolu_halting")
AFTER_HALT = tool_use("Bash", {"command": "touch after-halt.txt"}, "toolu_after_halt")

ONE_TURN = [[ALLOWED, DENIED, REWRITTEN, ASKED]]
HALT_TURN = [[HALTING, AFTER_HALT]]


def make_project(root: Path) -> Path:
    """A project directory with a file to protect and a deploy script that leaves a mark."""
    project = root / "project"
    project.mkdir()
    (project / "keep.txt").write_text("precious\n")
    deploy = project / "deploy.sh"
    deploy.write_text("#!/bin/sh\necho deployed >> deployed.txt\n")
    deploy.chmod(0o755)
    return project


def offline_env(api_url: str, home: Path) -> dict[str, str]:
    """The CLI's environment: our fake API, a throwaway HOME, no other traffic."""
    home.mkdir(exist_ok=True)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "ANTHROPIC_BASE_URL": api_url,
        "ANTHROPIC_API_KEY": "fake-key",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "PYTHONPATH": str(SRC),
        # The CLI's hook calls go through a warm worker, which exits soon after the test.
        "CALLWARDEN_HOOK_WORKER_IDLE": "20",
    }


def hook_settings(policy: Path | str, *, command: str | None = None) -> dict[str, Any]:
    """Claude Code settings whose PreToolUse hook is ``callwarden hook claude-code``."""
    if command is None:
        command = f"{shlex.quote(str(CALLWARDEN))} hook claude-code --policy " \
                  f"{shlex.quote(str(policy))}"
    return {"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
        {"type": "command", "command": command, "timeout": 30, "onFailure": "block"}]}]}}


class HookResult(NamedTuple):
    """What ``callwarden hook claude-code`` printed and how it exited."""

    stdout: str
    stderr: str
    code: int

    @property
    def json(self) -> Any:
        return json.loads(self.stdout)


def pre_tool_use(tool: str, tool_input: Any, **extra: Any) -> dict[str, Any]:
    """A PreToolUse payload as Claude Code 2.1 sends it."""
    return {"session_id": "sess-1", "transcript_path": "/tmp/sess-1.jsonl", "cwd": "/tmp",
            "prompt_id": "prompt-1", "permission_mode": "default",
            "effort": {"level": "medium"}, "hook_event_name": "PreToolUse",
            "tool_name": tool, "tool_input": tool_input, "tool_use_id": "toolu_01", **extra}


def run_hook_process(stdin: str | bytes, policy: Path | None, home: Path,
                     env: dict[str, str] | None = None) -> HookResult:
    """``callwarden hook claude-code --policy FILE`` as Claude Code starts it."""
    args = [str(CALLWARDEN), "hook", "claude-code"]
    if policy is not None:
        args += ["--policy", str(policy)]
    data = stdin.encode() if isinstance(stdin, str) else stdin
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
            "XDG_CACHE_HOME": str(home / ".cache"), "PYTHONPATH": str(SRC),
            "CALLWARDEN_HOOK_WORKER": "0"}
    done = subprocess.run(args, input=data, capture_output=True, timeout=30, check=False,
                          env={**base, **(env or {})})
    return HookResult(done.stdout.decode(), done.stderr.decode(), done.returncode)


def run_hook_inprocess(stdin: str, policy: Path | None) -> HookResult:
    """The same through :func:`callwarden.hooks.run_hook` with in-memory streams."""
    out, err = io.StringIO(), io.StringIO()
    code = run_hook("claude-code", policy, io.StringIO(stdin), out, err)
    return HookResult(out.getvalue(), err.getvalue(), code)


class CliRun(NamedTuple):
    """One ``claude -p`` run against the fake API."""

    api: FakeMessagesAPI
    project: Path
    events: list[dict[str, Any]]
    code: int
    stderr: str

    @property
    def result(self) -> dict[str, Any]:
        """The final ``result`` event."""
        return next(e for e in reversed(self.events) if e.get("type") == "result")


def run_cli(root: Path, turns: list[list[dict[str, Any]]], settings: dict[str, Any], *,
            args: tuple[str, ...] = ("--allowedTools", "Bash"),
            env: dict[str, str] | None = None, prompt: str = "Tidy up and deploy.",
            transcript: bool = False) -> CliRun:
    """Runs the bundled CLI in a fresh project whose ``.claude/settings.json`` is ``settings``,
    with the user's ``prompt``. ``transcript``: each model turn waits until the CLI's session
    transcript holds the prompt (it writes every 100 ms; a real model answers far later)."""
    project = make_project(root)
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(json.dumps(settings))
    home = root / "home"
    with FakeMessagesAPI(turns, before_turn=(lambda: wait_for_transcript(home, prompt))
                         if transcript else None) as api:
        done = subprocess.run(
            [str(CLI), "-p", prompt, "--output-format", "stream-json",
             "--verbose", *args],
            cwd=project, env={**offline_env(api.url, home), **(env or {})},
            capture_output=True, text=True, timeout=90, check=False)
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return CliRun(api, project, events, done.returncode, done.stderr)


def wait_for_transcript(home: Path, prompt: str, deadline: float = 60.0) -> None:
    """Returns once a session transcript under ``home`` holds the user entry of ``prompt``
    (or after ``deadline`` seconds: the test then fails on what it checks)."""
    needle = '"role":"user","content":' + json.dumps(prompt)
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        for path in (home / ".claude" / "projects").rglob("*.jsonl"):
            with contextlib.suppress(OSError):
                if needle in path.read_text(errors="replace"):
                    return
        time.sleep(0.02)
