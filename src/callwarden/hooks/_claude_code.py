"""The Claude Code dialect of ``callwarden hook``: PreToolUse JSON in, decision JSON out.

Claude Code runs the command for each ``PreToolUse`` event with the event's JSON on stdin
(``hook_event_name``, ``tool_name``, ``tool_input``, ``tool_use_id``, ``session_id``, ``cwd``,
``transcript_path``, ``permission_mode``, ``agent_id`` / ``agent_type`` inside a sub-agent) and
reads the reply from the exit code and stdout. The user's latest prompt, read from the
transcript, is the call's ``context.request`` (:mod:`callwarden.hooks._transcript`). How each
effect is answered:

============  ==============================================================================
allow         exit 0, no output: Claude Code's own permission rules and prompt still apply, so
              a policy never grants more than the user's settings do. With
              ``CALLWARDEN_CLAUDE_APPROVE=1`` (or ``approve_allowed=True``) callwarden's allow
              is ``permissionDecision: "allow"`` instead, which skips the prompt.
modify        ``hookSpecificOutput.updatedInput`` (the whole rewritten input); the permission
              rules then judge the rewritten call.
deny          ``permissionDecision: "deny"`` + ``permissionDecisionReason``: the model gets it
              as the tool's error result.
ask           ``permissionDecision: "ask"`` + the reason: the user is prompted (in ``-p`` mode,
              with nobody to ask, Claude Code refuses the call and the model sees the reason).
halt          ``"continue": false`` + ``stopReason``, and a deny for the call itself. Claude
              Code still runs the other tool calls of the same model turn, so the dialect
              remembers the halt (a file under ``~/.cache/callwarden/claude-code``, keyed by
              session) and blocks every later call of the same prompt; a new prompt runs.
any error     exit 2 with the reason on stderr: Claude Code blocks the call and shows the
              reason to the model.
============  ==============================================================================

The same mapping answers the Claude Agent SDK's in-process hook callbacks
(:mod:`callwarden.adapters.claude_agent`), through :func:`pre_tool_use_output`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from callwarden._call import thaw
from callwarden._decision import Decision, Effect
from callwarden._messages import describe_refusal
from callwarden.hooks._base import HookCall, HookReply, register_dialect
from callwarden.hooks._transcript import with_request

__all__ = ["ClaudeCodeDialect", "halt_key", "parse_pre_tool_use", "pre_tool_use_output"]

EVENT = "PreToolUse"
APPROVE_ENV = "CALLWARDEN_CLAUDE_APPROVE"
# Payload fields a policy may want in `context` (CEL: context.permission_mode == "plan").
# Every other event in Claude Code's hooks reference (code.claude.com/docs/en/hooks): none of
# them is a call about to run, so the hook lets them pass. Any other name (a new event, a
# different case, padding, a number) blocks: a payload we do not understand is not an allow.
_PASS_EVENTS = frozenset({
    "Setup", "SessionStart", "SessionEnd", "InstructionsLoaded", "UserPromptSubmit",
    "UserPromptExpansion", "PermissionRequest", "PermissionDenied", "PostToolUse",
    "PostToolUseFailure", "PostToolBatch", "SubagentStart", "SubagentStop", "TaskCreated",
    "TaskCompleted", "TeammateIdle", "Stop", "StopFailure", "Notification", "PreCompact",
    "PostCompact", "ConfigChange", "CwdChanged", "FileChanged", "WorktreeCreate",
    "WorktreeRemove", "Elicitation", "ElicitationResult",
})
_CONTEXT_FIELDS = ("cwd", "transcript_path", "permission_mode", "agent_id", "agent_type",
                   "prompt_id", "hook_event_name")


def parse_pre_tool_use(payload: Mapping[str, Any]) -> HookCall | None:
    """The call in a Claude Code hook payload (one without ``hook_event_name`` is taken as
    ``PreToolUse``); None for Claude Code's other documented events.

    Raises:
        ValueError: an unknown event name, ``tool_name`` or ``tool_input`` missing or of the
            wrong type, or a documented string field that is not a string.
    """
    event = payload.get("hook_event_name", EVENT)
    if type(event) is str and event in _PASS_EVENTS:
        return None
    if event != EVENT or type(event) is not str:
        raise ValueError(f"unknown Claude Code hook event {event!r:.80}; configure "
                         f"'callwarden hook claude-code' under hooks.{EVENT}")
    tool = payload.get("tool_name")
    if not isinstance(tool, str) or not tool:
        raise ValueError("Claude Code hook input has no 'tool_name' (a non-empty string); is "
                         "this hook registered for PreToolUse?")
    args = payload.get("tool_input")
    if not isinstance(args, Mapping):
        raise ValueError(f"Claude Code hook input 'tool_input' must be a JSON object, got "
                         f"{type(args).__name__}")
    fields = {key: _text(payload, key) for key in ("session_id", "cwd", "tool_use_id")}
    context = {key: value for key in _CONTEXT_FIELDS if (value := payload.get(key)) is not None}
    with_request(context, payload.get("transcript_path"), "claude-code")
    return HookCall(tool=tool, args=args, session=fields["session_id"], cwd=fields["cwd"],
                    call_id=fields["tool_use_id"], agent=_text(payload, "agent_type"),
                    context=context)


def _text(payload: Mapping[str, Any], key: str) -> str | None:
    value = payload.get(key)
    if value is None or isinstance(value, str):
        return value or None
    raise ValueError(f"Claude Code hook input {key!r} must be a string, got "
                     f"{type(value).__name__}")


def pre_tool_use_output(decision: Decision, *, approve_allowed: bool = False) -> dict[str, Any]:
    """The documented PreToolUse JSON reply for a decision (``{}`` means "no opinion").

    Uses the CLI's key ``continue`` (the Python SDK's ``continue_`` is translated to it).
    """
    effect = decision.effect
    specific: dict[str, Any] = {"hookEventName": EVENT}
    if effect is Effect.ALLOW:
        if not approve_allowed:
            return {}
        specific["permissionDecision"] = "allow"
        specific["permissionDecisionReason"] = _allow_reason(decision)
        return {"hookSpecificOutput": specific}
    if effect is Effect.MODIFY:
        if approve_allowed:
            specific["permissionDecision"] = "allow"
        specific["permissionDecisionReason"] = _allow_reason(decision)
        specific["updatedInput"] = thaw(decision.args)
        return {"hookSpecificOutput": specific}
    reason = describe_refusal(decision)
    if effect is Effect.ASK:
        specific["permissionDecision"] = "ask"
        specific["permissionDecisionReason"] = reason
        if decision.args != decision.call.args:  # a mutate rule ran before the ask
            specific["updatedInput"] = thaw(decision.args)
        return {"hookSpecificOutput": specific}
    specific["permissionDecision"] = "deny"
    specific["permissionDecisionReason"] = reason
    if effect is Effect.HALT:
        return {"continue": False, "stopReason": reason, "hookSpecificOutput": specific}
    return {"hookSpecificOutput": specific}


def _allow_reason(decision: Decision) -> str:
    return decision.message or f"callwarden: allowed by {decision.rule or 'policy'}"


def halt_key(call: HookCall) -> tuple[str, str] | None:
    """What a halt stops: the session's current prompt (the whole session without a prompt id)."""
    if not call.session:
        return None
    prompt = (call.context or {}).get("prompt_id")
    return call.session, prompt if isinstance(prompt, str) else ""


class ClaudeCodeDialect:
    """``callwarden hook claude-code``: Claude Code's PreToolUse command-hook protocol.

    Args:
        approve_allowed: Answer callwarden's allow with ``permissionDecision: "allow"`` (skip
            Claude Code's permission prompt). None reads ``CALLWARDEN_CLAUDE_APPROVE``.
        halt_dir: Where halted runs are remembered between hook processes (default
            ``$XDG_CACHE_HOME/callwarden/claude-code`` or ``~/.cache/callwarden/claude-code``).
    """

    name = "claude-code"

    def __init__(self, approve_allowed: bool | None = None,
                 halt_dir: str | os.PathLike[str] | None = None) -> None:
        self._approve_allowed = approve_allowed
        self._halt_dir = halt_dir

    @property
    def approve_allowed(self) -> bool:
        """Whether callwarden's allow skips Claude Code's permission prompt."""
        if self._approve_allowed is not None:
            return self._approve_allowed
        return os.environ.get(APPROVE_ENV, "").strip().lower() in ("1", "true", "yes", "on")

    def parse(self, payload: Mapping[str, Any]) -> HookCall | None:
        """See :func:`parse_pre_tool_use`; a call of a halted run is refused.

        Raises:
            ValueError: the payload is malformed, or the run was halted.
        """
        call = parse_pre_tool_use(payload)
        if call is not None:
            halted = self._halted_reason(call)
            if halted is not None:
                raise ValueError(f"this run was halted; no further tool calls run ({halted})")
        return call

    def render(self, decision: Decision, call: HookCall) -> HookReply:
        """Exit 0 with the decision JSON (no output for a plain allow)."""
        output = pre_tool_use_output(decision, approve_allowed=self.approve_allowed)
        if decision.effect is Effect.HALT:
            self._remember_halt(call, output["stopReason"])
        return HookReply(stdout=json.dumps(output) if output else "")

    def fail(self, reason: str) -> HookReply:
        """Exit 2 with the reason on stderr: Claude Code blocks the call and tells the model."""
        return HookReply(stderr=reason, exit_code=2)

    # -- halted runs, remembered across hook processes ---------------------------------------

    def _halt_file(self, session: str) -> Path:
        if self._halt_dir is not None:
            base = Path(self._halt_dir)
        else:
            cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
            base = Path(cache) / "callwarden" / "claude-code"
        return base / f"halted-{hashlib.sha256(session.encode()).hexdigest()[:32]}.json"

    def _halted_reason(self, call: HookCall) -> str | None:
        key = halt_key(call)
        if key is None:
            return None
        path = self._halt_file(key[0])
        if not path.is_file():
            return None
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return "the halt record is unreadable"  # fail closed
        if not isinstance(record, dict) or record.get("prompt_id") != key[1]:
            return None  # it halted an earlier prompt: the user has asked for something new
        return str(record.get("reason") or "halted")

    def _remember_halt(self, call: HookCall, reason: str) -> None:
        key = halt_key(call)
        if key is None:
            return
        path = self._halt_file(key[0])
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            path.write_text(json.dumps({"prompt_id": key[1], "reason": reason}),
                            encoding="utf-8")
        except OSError:
            pass  # the halt itself still stands; only later calls of this turn go unblocked


register_dialect(ClaudeCodeDialect())
