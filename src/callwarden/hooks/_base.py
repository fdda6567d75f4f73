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
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple, Protocol, TextIO

from callwarden._decision import Decision
from callwarden._enforce import Enforcer
from callwarden._guard import Guard
from callwarden.hooks._client import HOOK_MODULES, MAX_INPUT, print_reply
from callwarden.hooks._remote import SERVER_ENV, decide_remote
from callwarden.policyfile import LoadedPolicy, load_policy_file

__all__ = ["DIALECTS", "HOOK_DIALECTS", "Dialect", "HookCall", "HookReply", "Loader", "decide_hook",
           "decide_once", "dialect", "json_reply", "load_policy", "register_dialect", "run_hook",
           "text_field", "tool_and_args", "write_reply"]



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


HOOK_DIALECTS = tuple(HOOK_MODULES)


def dialect(name: str) -> Dialect:
    """The registered dialect ``name``, importing its module on first use."""
    if name not in DIALECTS and name in HOOK_MODULES:
        importlib.import_module(f"callwarden.hooks.{HOOK_MODULES[name]}")  # registers itself
    try:
        return DIALECTS[name]
    except KeyError:
        raise ValueError(f"unknown hook dialect {name!r}; known: "
                         f"{', '.join(sorted({*HOOK_MODULES, *DIALECTS}))}") from None


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


# What a short-lived process does with a policy path: compile it (a warm worker keeps them).
Loader = Callable[[str, "str | None"], LoadedPolicy]


def run_hook(dialect_name: str, policy: str | os.PathLike[str] | None, stdin: TextIO,
             stdout: TextIO, stderr: TextIO, *, server: str | None = None) -> int:
    """Runs one hook invocation; returns the exit code for the agent. ``server``: the URL of
    a ``callwarden serve`` that decides instead of the policy file (default:
    ``$CALLWARDEN_SERVER``)."""
    return write_reply(decide_hook(dialect(dialect_name), policy, stdin,
                                   server=server or os.environ.get(SERVER_ENV) or None),
                       stdout, stderr)


def write_reply(reply: HookReply, stdout: TextIO, stderr: TextIO) -> int:
    """Prints a reply for the agent; returns its exit code."""
    return print_reply(reply.stdout, reply.stderr, reply.exit_code, stdout, stderr)


def decide_hook(dialect: Dialect, policy: str | os.PathLike[str] | None, stdin: TextIO,
                load: Loader | None = None, *, server: str | None = None) -> HookReply:
    """The reply to one hook invocation; ``load`` compiles the policy (default: from the file,
    each time); ``server``: a ``callwarden serve`` URL that decides instead."""
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
        if server:
            decision = decide_remote(server, call.tool, call.args, framework=dialect.name,
                                     cwd=call.cwd, call_id=call.call_id, agent=call.agent,
                                     session=call.session, context=call.context)
        else:
            decision = decide_once(policy, call.tool, call.args, framework=dialect.name,
                                   cwd=call.cwd, call_id=call.call_id, agent=call.agent,
                                   session=call.session, context=call.context, load=load)
        return dialect.render(decision, call)
    except Exception as e:  # fail closed: the agent must never run a call we could not decide
        return dialect.fail(f"callwarden: {type(e).__name__}: {e}; blocked")


def decide_once(policy: str | os.PathLike[str] | None, tool: str, args: Any, *,
                framework: str | None, cwd: str | None = None, load: Loader | None = None,
                **fields: Any) -> Decision:
    """Decides one call for real in a short-lived process (``callwarden hook``,
    ``callwarden decide``): the policy's limits count, its history records, its audit log
    gets the decision (flushed before this returns).

    ``policy`` is a path (default: ``$CALLWARDEN_POLICY``); relative paths in the call
    resolve against ``cwd``, the agent's working directory. ``load`` compiles the policy
    (default: :func:`load_policy`).

    Raises:
        ValueError: no policy was given.
        PolicyError: the policy is broken.
    """
    if policy is None:
        policy = os.environ.get("CALLWARDEN_POLICY")
    if not policy:
        raise ValueError("no policy: pass --policy FILE or set CALLWARDEN_POLICY")
    guard = Guard.from_loaded((load or load_policy)(os.path.abspath(policy), cwd))
    try:
        return Enforcer(guard, framework=framework).check(tool, args, **fields)
    finally:
        guard.close()


def load_policy(path: str, cwd: str | None) -> LoadedPolicy:
    """Compiles the policy file at ``path`` for a call made in ``cwd``: a policy without
    ``workspace: {root: ...}`` takes the working directory as the project root when it is
    built, and that must be the agent's directory, not ours."""
    if cwd and os.path.isdir(cwd):
        with contextlib.chdir(cwd):
            return load_policy_file(Path(path))
    return load_policy_file(Path(path))
