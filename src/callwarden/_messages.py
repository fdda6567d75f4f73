"""Every sentence the model reads: what was blocked, why, and what to do instead.

The engine, the enforcement path, the approvals flow, the adapters and the hooks all phrase
their refusals here, so the model gets the same words whichever framework it runs in, and a
change of wording is made once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from callwarden._decision import Effect

if TYPE_CHECKING:
    from callwarden._decision import Decision, Reason

__all__ = [
    "DO_NOT_RETRY",
    "approval_pending",
    "cannot_rewrite",
    "decision_message",
    "describe_refusal",
    "halted",
    "in_doubt_message",
    "invalid_call",
    "needs_approval",
    "not_approved",
    "not_audited",
    "output_unscreened",
    "output_withheld",
    "policy_answer",
    "undecided",
]

DO_NOT_RETRY = "Do not retry the same call; choose another way to reach the goal or ask the user."

# The rewritten call shown to the model is capped: it goes into the model's context.
_MAX_SHOWN = 4000


def decision_message(effect: Effect, tool: str, rule: str, custom: str | None,
                     reasons: tuple[Reason, ...]) -> str:
    """The message of a decision: the deciding rule's own ``message``, else a sentence built
    from the effect and the first reason."""
    if custom:
        return custom
    why = reasons[0].message if reasons else "blocked by policy"
    if effect is Effect.DENY:
        return f"The call to '{tool}' was blocked by policy rule '{rule}': {why}. {DO_NOT_RETRY}"
    if effect is Effect.ASK:
        return f"The call to '{tool}' needs human approval (rule '{rule}'): {why}."
    if effect is Effect.HALT:
        return f"The run was halted by policy rule '{rule}': {why}."
    if effect is Effect.MODIFY:
        return f"The call to '{tool}' was allowed with rewritten arguments: {why}."
    return ""


def invalid_call(tool: str, error: object) -> str:
    """The message for a call whose arguments could not be accepted."""
    return (f"The call to '{tool}' was rejected: {error}. Send the arguments as a JSON object "
            "of plain values.")


def not_audited(tool: str) -> str:
    """The message for a call refused because the required audit log could not be written."""
    return (f"The call to '{tool}' was not run: the audit log required by the policy could not "
            "be written. Try again later or tell the user.")


def not_approved(tool: str, why: str) -> str:
    """The message for an ``ask`` that ended without an approval (denied, expired, refused)."""
    return f"The call to '{tool}' was not approved: {why}. {DO_NOT_RETRY}"


def describe_refusal(decision: Decision) -> str:
    """The text the model receives for a call that did not run (never empty)."""
    if decision.message:
        return decision.message
    why = decision.reasons[0].message if decision.reasons else "blocked by policy"
    return f"The call to '{decision.call.tool}' was not run ({decision.effect.value}): {why}."


def approval_pending(decision: Decision, request_id: str) -> str:
    """The model's text for a call that waits for a person's approval."""
    why = f" {decision.message}" if decision.message else ""
    tool = decision.call.tool
    return (f"The call to '{tool}' needs a person's approval and was not run:{why} Approval "
            f"request {request_id} is pending (`callwarden approvals approve {request_id}`). "
            "Tell the user it awaits approval; once approved, the same call with the same "
            "arguments runs once.")


def halted(decision: Decision) -> str:
    """The model's text for a call refused because the run was halted."""
    return (f"callwarden halted the run: {describe_refusal(decision)} No further tool calls "
            "will run; stop and tell the user.")


def needs_approval(reason: str, agent: str) -> str:
    """The model's text for an ``ask`` the agent's hook cannot put to a person."""
    return (f"{reason} This call needs a person's approval, which the {agent} hook cannot "
            "ask for. Do not retry it: tell the user what you want to run and why, so they "
            "can run it themselves or approve it in the policy.")


def cannot_rewrite(decision: Decision, args: Mapping[str, Any], why: str) -> str:
    """The model's text for a rewrite the agent's framework cannot apply."""
    shown = json.dumps(args, ensure_ascii=False, default=str, sort_keys=True)
    if len(shown) > _MAX_SHOWN:
        shown = shown[:_MAX_SHOWN] + " ... (truncated)"
    note = f" ({decision.message})" if decision.message else ""
    return (f"The policy allows '{decision.call.tool}' only with rewritten arguments{note}, "
            f"and {why}. Call '{decision.call.tool}' again with these arguments instead: "
            f"{shown}")


def undecided(tool: str, error: BaseException) -> str:
    """The model's text when callwarden itself failed to decide a call (it did not run)."""
    return (f"The call to '{tool}' was not run: callwarden could not decide it "
            f"({type(error).__name__}: {error}).")


def output_withheld(tool: str, rule: str, detail: str | None) -> str:
    """The text that replaces a tool's output an output rule blocked."""
    return f"The output of '{tool}' was withheld by policy rule '{rule}': {detail or 'blocked'}."


def policy_answer(decision: Decision) -> str:
    """The answer of the ask-the-policy tool: the effect the call would get, and the message
    the model would read — never the policy's rules."""
    effect = decision.effect
    if effect is Effect.ALLOW:
        return "allow"
    if effect is Effect.MODIFY:
        return f"allow with changes: {decision.message}"
    label = "needs approval" if effect is Effect.ASK else effect.value
    return f"{label}: {decision.message}"


def output_unscreened(tool: str, error: BaseException | str) -> str:
    """The text that replaces a tool's output that could not be screened (fail closed)."""
    why = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    return f"The output of '{tool}' was withheld: it could not be checked ({why})."


def tool_changed(server: str, tool: str) -> str:
    """The model's text for a call to an MCP tool whose definition changed since it was
    pinned (a "rug pull" until someone reviews it)."""
    return (f"The tool '{tool}' of the MCP server '{server}' is not what it was when first "
            "seen (its description or input schema changed), so calls to it are refused "
            f"until someone reviews it and runs `callwarden mcp accept {server} {tool}`. Do "
            "not retry it; tell the user.")


def in_doubt_message(tool: str, effect: Effect, why: str, original: str | None) -> str:
    """The message of a call in doubt (started before, no outcome recorded): what a person
    approving it, or the model refused it, reads."""
    if effect is Effect.ASK:
        text = (f"The call to '{tool}' needs human approval before it runs again: {why}. "
                "Approve it only if it did not happen.")
        return f"{text} {original}" if original else text
    if effect is Effect.HALT:
        return f"The run was halted: the call to '{tool}' is in doubt ({why})."
    return (f"The call to '{tool}' was not run again: {why}. Check whether it happened "
            "before doing anything else, or tell the user.")
