"""The hook command's frame: read the agent's hook JSON, decide, print the agent's reply.

``callwarden hook DIALECT --policy FILE`` is what a coding agent (Claude Code, Gemini CLI,
Codex) runs before each tool call. A dialect knows one agent's documented hook format; this
module does the rest and fails closed: whatever goes wrong — unreadable input, a broken
policy, an exception — ends in the dialect's "block" reply with the reason, never a silent
allow.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol, TextIO

from callwarden._decision import Decision
from callwarden._enforce import Enforcer
from callwarden._guard import Guard

__all__ = ["DIALECTS", "HOOK_DIALECTS", "Dialect", "HookCall", "HookReply", "decide_once", "dialect",
           "json_reply", "register_dialect", "run_hook", "text_field", "tool_and_args"]

# Hook payloads are small JSON objects; anything past this is refused, not parsed.
MAX_INPUT = 8 * 1024 * 1024


class HookCall(NamedTuple):
    """One tool call as the agent's hook payload describes it."""

    tool: str
    args: Any
    session: str | None = None
    cwd: str | None = None
    call_id: str | None = None
    agent: str | None = None
    context: Mapping[str, Any] | None = None


class HookReply(NamedTuple):
    """What the hook process prints and how it exits."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0


class Dialect(Protocol):
    """One agent's hook format."""

    name: str

    def parse(self, payload: Mapping[str, Any]) -> HookCall | None:
        """The call in a hook payload; None for an event this dialect lets pass untouched.

        Raises:
            ValueError: the payload is malformed (the hook then blocks with the reason).
        """

    def render(self, decision: Decision, call: HookCall) -> HookReply:
        """The agent's reply for a decision (allow, modify, deny, ask, halt)."""

    def fail(self, reason: str) -> HookReply:
        """The agent's "block this call" reply, for any error: the hook fails closed."""


DIALECTS: dict[str, Dialect] = {}


def register_dialect(dialect: Dialect) -> Dialect:
    """Adds a dialect under its ``name`` (``callwarden hook NAME``)."""
    DIALECTS[dialect.name] = dialect
    return dialect


_MODULES = {"claude-code": "_claude_code", "gemini-cli": "_gemini_cli", "codex": "_codex"}
HOOK_DIALECTS = tuple(_MODULES)


def dialect(name: str) -> Dialect:
    """The registered dialect ``name``, importing its module on first use."""
    if name not in DIALECTS and name in _MODULES:
        importlib.import_module(f"callwarden.hooks.{_MODULES[name]}")  # registers itself
    try:
        return DIALECTS[name]
    except KeyError:
        raise ValueError(f"unknown hook dialect {name!r}; known: "
                         f"{', '.join(sorted({*_MODULES, *DIALECTS}))}") from None


def pre_tool_event(payload: Mapping[str, Any], event: str, passing: frozenset[str],
                   agent: str, command: str) -> str | None:
    """The payload's ``hook_event_name`` when it is the dialect's pre-tool ``event``; None
    for the events the dialect lets pass.

    Raises:
        ValueError: any other event, saying where to configure ``command``.
    """
    name = payload.get("hook_event_name")
    if name in passing:
        return None
    if name != event:
        raise ValueError(f"unknown {agent} hook event {name!r}; configure "
                         f"'callwarden hook {command}' under hooks.{event}")
    return event


def tool_and_args(payload: Mapping[str, Any], event: str) -> tuple[str, Mapping[str, Any]]:
    """The tool name and arguments of a pre-tool payload (``tool_name``, ``tool_input``).

    Raises:
        ValueError: no ``tool_name`` string, or ``tool_input`` is not an object.
    """
    tool = payload.get("tool_name")
    if not isinstance(tool, str) or not tool:
        raise ValueError(f"{event} payload without a 'tool_name' string")
    args = payload.get("tool_input")
    if not isinstance(args, Mapping):
        raise ValueError(f"{event} 'tool_input' must be an object, got "
                         f"{'nothing' if args is None else type(args).__name__}")
    return tool, args


def text_field(value: Any) -> str | None:
    """A payload's optional string field: the string, or None when absent, empty or not one."""
    return value if isinstance(value, str) and value else None


def json_reply(obj: Mapping[str, Any]) -> HookReply:
    """A reply that prints ``obj`` as JSON and exits 0."""
    return HookReply(stdout=json.dumps(obj, ensure_ascii=False, default=str))


def run_hook(dialect_name: str, policy: str | os.PathLike[str] | None, stdin: TextIO,
             stdout: TextIO, stderr: TextIO) -> int:
    """Runs one hook invocation; returns the exit code for the agent."""
    reply = _decide(dialect(dialect_name), policy, stdin)
    if reply.stdout:
        stdout.write(reply.stdout if reply.stdout.endswith("\n") else reply.stdout + "\n")
        stdout.flush()
    if reply.stderr:
        stderr.write(reply.stderr if reply.stderr.endswith("\n") else reply.stderr + "\n")
        stderr.flush()
    return reply.exit_code


def _decide(dialect: Dialect, policy: str | os.PathLike[str] | None, stdin: TextIO) -> HookReply:
    try:
        text = stdin.read(MAX_INPUT + 1)
        if len(text) > MAX_INPUT:
            return dialect.fail(f"callwarden: hook input larger than {MAX_INPUT} bytes; "
                                "blocked")
        try:
            payload = json.loads(text)
        except ValueError as e:
            return dialect.fail(f"callwarden: hook input is not JSON ({e}); blocked")
        if not isinstance(payload, Mapping):
            return dialect.fail("callwarden: hook input must be a JSON object; blocked")
        try:
            call = dialect.parse(payload)
        except ValueError as e:
            return dialect.fail(f"callwarden: {e}; blocked")
        if call is None:
            return HookReply()
        decision = decide_once(policy, call.tool, call.args, framework=dialect.name,
                               cwd=call.cwd, call_id=call.call_id, agent=call.agent,
                               session=call.session, context=call.context)
        return dialect.render(decision, call)
    except Exception as e:  # fail closed: the agent must never run a call we could not decide
        return dialect.fail(f"callwarden: {type(e).__name__}: {e}; blocked")


def decide_once(policy: str | os.PathLike[str] | None, tool: str, args: Any, *,
                framework: str | None, cwd: str | None = None, **fields: Any) -> Decision:
    """Decides one call for real in a short-lived process (``callwarden hook``,
    ``callwarden decide``): the policy's limits count, its history records, its audit log
    gets the decision (flushed before this returns).

    ``policy`` is a path (default: ``$CALLWARDEN_POLICY``); relative paths in the call
    resolve against ``cwd``, the agent's working directory.

    Raises:
        ValueError: no policy was given.
        PolicyError: the policy is broken.
    """
    guard = _guard(policy, cwd)
    try:
        return Enforcer(guard, framework=framework).check(tool, args, **fields)
    finally:
        guard.close()


def _guard(policy: str | os.PathLike[str] | None, cwd: str | None) -> Any:
    """The guard for this call; relative paths in the call resolve against the agent's cwd."""
    if policy is None:
        policy = os.environ.get("CALLWARDEN_POLICY")
    if not policy:
        raise ValueError("no policy: pass --policy FILE or set CALLWARDEN_POLICY")
    path = os.path.abspath(policy)
    if cwd and os.path.isdir(cwd):
        # A policy without `workspace: {root: ...}` takes the working directory as the project
        # root when it is built: that must be the agent's directory, not ours.
        with contextlib.chdir(cwd):
            return Guard.from_file(path)
    return Guard.from_file(path)
