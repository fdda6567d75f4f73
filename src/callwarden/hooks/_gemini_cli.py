"""``callwarden hook gemini-cli``: the policy as a Gemini CLI ``BeforeTool`` hook.

Gemini CLI runs the hook with one JSON object on stdin and reads one JSON object from stdout
(google-gemini/gemini-cli docs/hooks/reference.md, packages/core/src/hooks/types.ts). The
``BeforeTool`` input carries ``tool_name``, ``tool_input``, ``session_id``, ``cwd``,
``hook_event_name``, ``transcript_path`` (the chat recording, whose latest user message is the
call's ``context.request``) and, for MCP tools, ``mcp_context`` (``server_name``,
``tool_name``).

How each effect is answered:

* allow — ``{}``: no opinion, so Gemini CLI's own confirmation rules still apply (``"allow"``
  could auto-approve a call its policy engine would have asked about).
* modify — ``hookSpecificOutput.tool_input`` with the changed keys; Gemini *merges* it into the
  model's arguments (packages/core/src/core/coreToolHookTriggers.ts, ``Object.assign``). A
  rewrite that *removes* an argument cannot be expressed as a merge, so it is denied with a
  message naming the rewritten call.
* deny — ``{"decision": "deny", "reason": ...}``: the reason goes to the model as the tool error.
* ask — denied with a message that a person's approval is needed. ``decision: "ask"`` exists in
  the code (PR #21146) but not in the hooks reference, and a CLI without it treats an unknown
  decision as "not blocking" and runs the tool; set ``CALLWARDEN_GEMINI_NATIVE_ASK=1`` to send
  it on a Gemini CLI that has it (the user then confirms in Gemini's own prompt).
* halt — ``{"continue": false, "stopReason": ...}`` stops the agent loop; ``decision: "deny"``
  rides along so that the call is blocked even where ``continue`` were ignored.
* any error — exit code 2 with the reason on stderr, Gemini's documented "block" reply.
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

__all__ = ["GeminiCli"]

# Every event in packages/core/src/hooks/types.ts (HookEventName); only BeforeTool is a call.
_PASS_EVENTS = frozenset({
    "AfterTool", "BeforeAgent", "Notification", "AfterAgent", "SessionStart", "SessionEnd",
    "PreCompress", "BeforeModel", "AfterModel", "BeforeToolSelection",
})
NATIVE_ASK_ENV = "CALLWARDEN_GEMINI_NATIVE_ASK"


class GeminiCli:
    """Gemini CLI's ``BeforeTool`` hook format."""

    name = "gemini-cli"

    def parse(self, payload: Mapping[str, Any]) -> HookCall | None:
        """The call in a ``BeforeTool`` payload; None for Gemini's other events.

        Raises:
            ValueError: an unknown event, or a ``BeforeTool`` payload without a tool name or
                with ``tool_input`` that is not an object.
        """
        event = pre_tool_event(payload, "BeforeTool", _PASS_EVENTS, "Gemini CLI", "gemini-cli")
        if event is None:
            return None
        tool, args = tool_and_args(payload, "BeforeTool")
        context: dict[str, Any] = {"hook_event": event}
        mcp = payload.get("mcp_context")
        if isinstance(mcp, Mapping):
            server, name = mcp.get("server_name"), mcp.get("tool_name")
            if isinstance(server, str) and server and isinstance(name, str) and name:
                # Gemini's own MCP names changed across versions (server__tool, mcp_server_tool);
                # mcp_context is authoritative, so policies can say mcp__github__* everywhere.
                context["agent_tool_name"] = tool
                context["mcp_server"] = server
                tool = f"mcp__{server}__{name}"
        with_request(context, payload.get("transcript_path"), "gemini-cli")
        return HookCall(tool=tool, args=args, session=text_field(payload.get("session_id")),
                        cwd=text_field(payload.get("cwd")), context=context)

    def render(self, decision: Decision, call: HookCall) -> HookReply:
        """Gemini CLI's reply for a decision (see the module docstring)."""
        effect = decision.effect
        if effect is Effect.ALLOW:
            return json_reply({})
        if effect is Effect.MODIFY:
            return self._modify(decision, call)
        reason = describe_refusal(decision).strip() or "blocked by policy"
        if effect is Effect.HALT:
            return json_reply({"continue": False, "stopReason": reason, "decision": "deny",
                          "reason": reason})
        if effect is Effect.ASK:
            if os.environ.get(NATIVE_ASK_ENV, "").lower() in ("1", "true", "yes"):
                return json_reply({"decision": "ask", "reason": reason, "systemMessage": reason})
            return json_reply({"decision": "deny", "reason": needs_approval(reason, "Gemini CLI")})
        return json_reply({"decision": "deny", "reason": reason})

    def fail(self, reason: str) -> HookReply:
        """Exit code 2 with the reason on stderr: Gemini blocks the call and tells the model."""
        return HookReply(stderr=reason or "callwarden: blocked", exit_code=2)

    def _modify(self, decision: Decision, call: HookCall) -> HookReply:
        new = thaw(decision.args)
        old = call.args if isinstance(call.args, Mapping) else {}
        if any(key not in new for key in old):
            return json_reply({"decision": "deny",
                          "reason": cannot_rewrite(decision, new, "a Gemini CLI hook can "
                                                   "change or add arguments but not remove "
                                                   "them")})
        changed = {k: v for k, v in new.items() if k not in old or old[k] != v}
        if not changed:
            return json_reply({})
        return json_reply({"hookSpecificOutput": {"hookEventName": "BeforeTool",
                                             "tool_input": changed}})


GEMINI_CLI = register_dialect(GeminiCli())
