"""``callwarden hook codex``: the policy as a Codex ``PreToolUse`` hook.

Codex runs the hook with one JSON object on stdin (openai/codex
codex-rs/hooks/schema/generated/pre-tool-use.command.input.schema.json): ``tool_name``
(``Bash`` for every shell-like tool, ``apply_patch`` with the patch in ``tool_input.command``,
``mcp__server__tool`` for MCP tools), ``tool_input``, ``tool_use_id``, ``session_id``,
``turn_id``, ``cwd``, ``model``, ``permission_mode``, ``transcript_path`` (the session's
rollout file, whose latest ``user_message`` is the call's ``context.request``). It parses the reply in
codex-rs/hooks/src/engine/output_parser.rs (``parse_pre_tool_use``), where several fields are
"unsupported" and make the hook *fail open*: the tool runs. So:

* allow — no output: ``permissionDecision: "allow"`` without ``updatedInput`` is rejected.
* modify — denied with a message naming the rewritten call: Codex releases before 0.12x reject
  ``updatedInput`` and then run the *original* call. Set ``CALLWARDEN_CODEX_UPDATED_INPUT=1`` on
  a Codex that applies ``permissionDecision: "allow"`` + ``updatedInput`` to rewrite natively.
* deny — ``hookSpecificOutput.permissionDecision: "deny"`` with a non-empty
  ``permissionDecisionReason`` (an empty reason is rejected, i.e. fails open).
* ask — ``permissionDecision: "ask"`` is unsupported (fails open): denied with a message that
  a person's approval is needed.
* halt — ``continue: false`` and ``stopReason`` are unsupported (fail open): denied, with the
  reason telling the model to stop and a ``systemMessage`` for the user.
* any error — exit code 2 with the reason on stderr (Codex blocks only if stderr is non-empty).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from callwarden._call import thaw
from callwarden._decision import Decision, Effect
from callwarden._messages import cannot_rewrite, describe_refusal, needs_approval
from callwarden.hooks._base import (
    HookCall,
    HookReply,
    json_reply,
    pre_tool_event,
    register_dialect,
    text_field,
    tool_and_args,
)
from callwarden.hooks._transcript import with_request

__all__ = ["Codex"]

# Events of codex-rs/hooks (schema/generated/*.command.input.schema.json) that are not a call.
_PASS_EVENTS = frozenset({
    "SessionStart", "UserPromptSubmit", "Stop", "StopFailure", "PostToolUse",
    "PostToolUseFailure", "PermissionRequest", "PreCompact", "PostCompact", "SubagentStart",
    "SubagentStop",
})
UPDATED_INPUT_ENV = "CALLWARDEN_CODEX_UPDATED_INPUT"
_CONTEXT_KEYS = ("turn_id", "model", "permission_mode", "agent_type", "transcript_path")


class Codex:
    """Codex's ``PreToolUse`` hook format."""

    name = "codex"

    def parse(self, payload: Mapping[str, Any]) -> HookCall | None:
        """The call in a ``PreToolUse`` payload; None for Codex's other events.

        Raises:
            ValueError: an unknown event, or a ``PreToolUse`` payload without a tool name or
                with ``tool_input`` that is not an object.
        """
        event = pre_tool_event(payload, "PreToolUse", _PASS_EVENTS, "Codex", "codex")
        if event is None:
            return None
        tool, args = tool_and_args(payload, "PreToolUse")
        context: dict[str, Any] = {"hook_event": event}
        for key in _CONTEXT_KEYS:
            value = payload.get(key)
            if isinstance(value, str) and value:
                context[key] = value
        with_request(context, payload.get("transcript_path"), "codex")
        return HookCall(tool=tool, args=args, session=text_field(payload.get("session_id")),
                        cwd=text_field(payload.get("cwd")), call_id=text_field(payload.get("tool_use_id")),
                        agent=text_field(payload.get("agent_id")), context=context)

    def render(self, decision: Decision, call: HookCall) -> HookReply:
        """Codex's reply for a decision (see the module docstring)."""
        effect = decision.effect
        if effect is Effect.ALLOW:
            return HookReply()
        if effect is Effect.MODIFY:
            args = thaw(decision.args)
            if args == call.args:
                return HookReply()
            if os.environ.get(UPDATED_INPUT_ENV, "").lower() in ("1", "true", "yes"):
                return json_reply({"hookSpecificOutput": {
                    "hookEventName": "PreToolUse", "permissionDecision": "allow",
                    "updatedInput": args}})
            return _deny(cannot_rewrite(decision, args, "this Codex hook cannot rewrite a call"))
        reason = describe_refusal(decision).strip() or "blocked by policy"
        if effect is Effect.ASK:
            return _deny(needs_approval(reason, "Codex"), system=f"callwarden: {reason}")
        if effect is Effect.HALT:
            return _deny(f"{reason} The policy halted this run: stop working on the task and "
                         "report to the user.", system=f"callwarden halted the run: {reason}")
        return _deny(reason)

    def fail(self, reason: str) -> HookReply:
        """Exit code 2 with the reason on stderr: Codex blocks the call and tells the model."""
        return HookReply(stderr=reason.strip() or "callwarden: blocked", exit_code=2)


def _deny(reason: str, *, system: str | None = None) -> HookReply:
    reply: dict[str, Any] = {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "deny",
        "permissionDecisionReason": reason}}
    if system:
        reply["systemMessage"] = system
    return json_reply(reply)


CODEX = register_dialect(Codex())
