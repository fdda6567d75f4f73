"""Runs ``callwarden hook DIALECT`` the two ways an agent can: a real process and in-process."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

from _readme import ReadmeSection

from callwarden.hooks import run_hook

CLI = Path(sys.executable).with_name("callwarden")

# One rule per effect; tool names are made up so that no built-in profile interferes.
POLICY = """\
version: 1
default: allow
rules:
  - id: no-delete
    match: {tool: delete_file}
    effect: deny
    message: Deleting files is not allowed here; move them to trash/ instead.
  - id: cap-search
    match: {tool: search}
    cap: {limit: 5}
    effect: modify
  - id: drop-token
    match: {tool: upload}
    unset: [token]
    effect: modify
  - id: deploy-asks
    match: {tool: deploy}
    effect: ask
    message: Deploys need a person's go-ahead.
  - id: stop-on-wipe
    match: {tool: wipe}
    effect: halt
    message: Wiping is never allowed; the run is over.
"""

RECOMMENDED = "version: 1\nextends: callwarden:recommended\n"


class Result(NamedTuple):
    """What the hook printed and how it exited."""

    stdout: str
    stderr: str
    code: int

    @property
    def json(self) -> Any:
        return json.loads(self.stdout)


def write_policy(directory: Path, text: str = POLICY) -> Path:
    path = directory / "policy.yaml"
    path.write_text(text)
    return path


def run_process(dialect: str, stdin: str | bytes, policy: Path | None,
                env: dict[str, str] | None = None) -> Result:
    """``callwarden hook DIALECT --policy FILE`` as the agent starts it."""
    args = [str(CLI), "hook", dialect]
    if policy is not None:
        args += ["--policy", str(policy)]
    data = stdin.encode() if isinstance(stdin, str) else stdin
    # Each call decides in its own process here; test_hook_worker.py covers the warm worker.
    base = {"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "CALLWARDEN_HOOK_WORKER": "0"}
    done = subprocess.run(args, input=data, capture_output=True, timeout=60,
                          env={**base, **(env or {})}, check=False)
    return Result(done.stdout.decode(), done.stderr.decode(), done.returncode)


def run_inprocess(dialect: str, stdin: str, policy: Path | None) -> Result:
    """The same through :func:`callwarden.hooks.run_hook` with in-memory streams."""
    out, err = io.StringIO(), io.StringIO()
    code = run_hook(dialect, policy, io.StringIO(stdin), out, err)
    return Result(out.getvalue(), err.getvalue(), code)


README = ReadmeSection("Gemini CLI and Codex hooks")


def documented_command(heading: str) -> list[str]:
    """The hook command of the settings snippet under ``### heading`` in the README notes."""
    import re
    import shlex

    section = README.read_text().split(f"### {heading}\n", 1)[1].split("\n### ", 1)[0]
    (block,) = re.findall(r"```json\n(.*?)```", section, re.S)
    settings = json.loads(block)
    ((event, groups),) = settings["hooks"].items()
    (hook,) = groups[0]["hooks"]
    return [event, *shlex.split(hook["command"])]
