"""Claude Agent SDK adapter: a policy in front of every tool call Claude Code makes.

The SDK runs the Claude Code CLI, which asks the Python process at three points:

* a ``PreToolUse`` hook callback, for every tool call (built-in tools, MCP tools, sub-agents'
  calls). callwarden decides the call there and answers with the same JSON as the
  ``callwarden hook claude-code`` command (:func:`~callwarden.hooks._claude_code.pre_tool_use_output`):
  deny → ``permissionDecision: "deny"`` with the reason the model receives, modify →
  ``updatedInput``, halt → ``continue: false``, ask → ``permissionDecision: "ask"``.
  The matcher is registered with ``on_failure="block"``: hooks fail *open* otherwise.
* ``can_use_tool``, the SDK's stand-in for the permission prompt. A hook's ``ask`` lands here,
  and callwarden settles it (a remembered grant, the approver, a ``wait`` for
  ``callwarden approvals approve ID``); still pending means the call is refused with the
  request id in the message. Calls the policy allowed but Claude Code's own rules would prompt
  for are answered with callwarden's decision too.
* a ``PostToolUse`` hook callback, which applies the policy's output rules (``on: output``)
  through ``updatedToolOutput`` and records the outcome. Claude Code only accepts a
  replacement shaped like the tool's own output, so a blocked output keeps the shape (the
  message goes in ``stdout`` / ``content`` / ``text``; other strings but ``type`` are emptied).

By default callwarden's allow is "no opinion" in the hook, so ``permission_mode`` and
``allowed_tools`` keep their meaning; ``approve_allowed=True`` makes it skip the prompt.

The user's prompt is the call's ``context.request``: a ``UserPromptSubmit`` hook callback
remembers each prompt (by session and ``prompt_id``, which every PreToolUse input carries); a
call of a prompt it did not see takes the latest prompt of the session transcript the CLI
names (``transcript_path``, as ``callwarden hook claude-code`` does). ``can_use_tool`` carries
neither, so a call only it sees (no hooks) has no request.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, cast

from callwarden._call import MAX_REQUEST_CHARS, thaw
from callwarden._decision import Decision, Effect
from callwarden._enforce import Enforcer
from callwarden._messages import describe_refusal
from callwarden.adapters._core import enforcer as enforcement_path
from callwarden.exceptions import ApprovalPending, MissingDependency
from callwarden.hooks._claude_code import EVENT, halt_key, parse_pre_tool_use, pre_tool_use_output
from callwarden.hooks._transcript import with_request

try:
    from claude_agent_sdk import (
        HookMatcher,
        PermissionResultAllow,
        PermissionResultDeny,
        ToolPermissionContext,
    )
except ImportError as e:  # pragma: no cover - depends on the environment
    raise MissingDependency("the Claude Agent SDK adapter", "claude-agent-sdk", "claude") from e

__all__ = ["ClaudeAgentGuard", "callwarden_hooks", "callwarden_options", "permission_result"]

FRAMEWORK = "claude-agent-sdk"
POST_EVENT = "PostToolUse"
PROMPT_EVENT = "UserPromptSubmit"
# Decisions kept from PreToolUse until can_use_tool / PostToolUse see the same call; bounded
# because a call may never come back (denied by Claude Code's own rules, interrupted).
_REMEMBERED = 512


class ClaudeAgentGuard:
    """The hook callbacks and the ``can_use_tool`` callback for one policy.

    Args:
        guard: A :class:`~callwarden.Guard`, a policy file path, or a policy dict.
        approver: Answers ``ask`` decisions in ``can_use_tool`` (a callback or
            ``TerminalApprover``).
        wait: Seconds ``can_use_tool`` waits for an answer given elsewhere
            (``callwarden approvals approve ID``) before refusing the call.
        agent / principal / session: Defaults for calls that do not say (Claude Code sends the
            session id and, inside a sub-agent, the agent type).
        approve_allowed: Answer an allow with ``permissionDecision: "allow"``, skipping Claude
            Code's permission rules and prompt (deny rules in settings still apply).
        timeout: Seconds the CLI gives the hook callback (the SDK's default is 60).
    """

    __slots__ = ("_decisions", "_halted", "_prompts", "approve_allowed", "enforcer", "timeout")

    def __init__(self, guard: Any, *, approver: Any = None, wait: float | None = None,
                 agent: str | None = None, principal: str | None = None,
                 session: str | None = None, approve_allowed: bool = False,
                 timeout: float | None = None) -> None:
        self.enforcer: Enforcer = enforcement_path(
            guard, framework=FRAMEWORK, approver=approver, wait=wait, agent=agent,
            principal=principal, session=session)
        self.approve_allowed = approve_allowed
        self.timeout = timeout
        # call id -> (decision, when it was made): read by can_use_tool, then PostToolUse.
        self._decisions: OrderedDict[str, tuple[Decision, float]] = OrderedDict()
        self._halted: OrderedDict[tuple[str, str], str] = OrderedDict()
        # (session, prompt id) -> the user's prompt, from UserPromptSubmit.
        self._prompts: OrderedDict[tuple[str, str], str] = OrderedDict()

    def __repr__(self) -> str:
        return f"ClaudeAgentGuard({self.enforcer!r})"

    def hooks(self) -> dict[str, list[HookMatcher]]:
        """``ClaudeAgentOptions(hooks=...)``: PreToolUse and PostToolUse matchers for every
        tool, registered to block the call if a callback fails, and a UserPromptSubmit
        matcher that remembers the user's prompt (it never blocks the prompt)."""
        matchers = {event: [HookMatcher(matcher=None, hooks=[cast(Any, callback)],
                                        timeout=self.timeout, on_failure="block")]
                    for event, callback in ((EVENT, self.pre_tool_use),
                                            (POST_EVENT, self.post_tool_use))}
        matchers[PROMPT_EVENT] = [HookMatcher(matcher=None, hooks=[
            cast(Any, self.user_prompt_submit)], timeout=self.timeout, on_failure="continue")]
        return matchers

    def options(self) -> dict[str, Any]:
        """Keyword arguments for ``ClaudeAgentOptions``: ``hooks`` and ``can_use_tool``."""
        return {"hooks": self.hooks(), "can_use_tool": self.can_use_tool}

    async def user_prompt_submit(self, input_data: Any, tool_use_id: str | None,
                                 context: Any) -> dict[str, Any]:
        """The UserPromptSubmit hook callback: remembers the prompt, the request of the
        calls made for it; no opinion on the prompt itself."""
        if isinstance(input_data, Mapping) and input_data.get("hook_event_name") == \
                PROMPT_EVENT:
            session, prompt_id = input_data.get("session_id"), input_data.get("prompt_id")
            prompt = input_data.get("prompt")
            if isinstance(session, str) and session and isinstance(prompt, str):
                self._prompts[session, prompt_id if isinstance(prompt_id, str) else ""] = \
                    prompt[-MAX_REQUEST_CHARS:]
                _trim(self._prompts)
        return {}

    async def pre_tool_use(self, input_data: Any, tool_use_id: str | None,
                           context: Any) -> dict[str, Any]:
        """The PreToolUse hook callback: decides the call, answers in the hook JSON."""
        try:
            call = parse_pre_tool_use(input_data) if isinstance(input_data, Mapping) else None
            if call is None:
                if isinstance(input_data, Mapping):
                    return {}  # another event: no opinion
                raise ValueError(f"hook input must be a mapping, got {type(input_data).__name__}")
            key = halt_key(call)
            if key is not None and key in self._halted:
                # Claude Code still runs the other calls of the halted turn: refuse them.
                return _for_sdk(_halt_output(self._halted[key]))
            call_id = call.call_id or tool_use_id
            context = dict(call.context or {})
            prompt = self._prompts.get(key) if key is not None else None
            if prompt:  # the prompt as submitted: the transcript may not be written yet
                context["request"] = prompt
            decision = await self.enforcer.acheck(call.tool, call.args, call_id=call_id,
                                                  agent=call.agent, session=call.session,
                                                  context=context)
            output = pre_tool_use_output(decision, approve_allowed=self.approve_allowed)
        except Exception as e:  # fail closed: a call we could not decide does not run
            return _blocked(f"callwarden: {type(e).__name__}: {e}; blocked")
        if decision.effect is Effect.HALT and key is not None:
            self._halted[key] = output["stopReason"]
            _trim(self._halted)
        if call_id and decision.effect in (Effect.ALLOW, Effect.MODIFY, Effect.ASK):
            self._remember(call_id, decision)
        return _for_sdk(output)

    async def post_tool_use(self, input_data: Any, tool_use_id: str | None,
                            context: Any) -> dict[str, Any]:
        """The PostToolUse hook callback: output rules on what the tool returned."""
        if not isinstance(input_data, Mapping) or input_data.get("hook_event_name") != \
                POST_EVENT:
            return {}
        call_id = input_data.get("tool_use_id") or tool_use_id
        remembered = self._decisions.pop(call_id, None) if isinstance(call_id, str) else None
        response = input_data.get("tool_response")
        decision: Decision | None = None
        try:
            if remembered is None:
                # Not seen before it ran (no PreToolUse hook): decide it now for its rules.
                decision = await self.enforcer.acheck(
                    str(input_data.get("tool_name")), input_data.get("tool_input"),
                    call_id=call_id if isinstance(call_id, str) else None,
                    context=with_request({}, input_data.get("transcript_path"),
                                         "claude-code"))
                started = time.perf_counter()
            else:
                decision, started = remembered
            screened = self.enforcer.finish(decision, response, started)
            shown, status, halt = screened.shown, str(screened.status), screened.halt
        except Exception as e:  # fail closed: output we could not screen is not shown
            shown, status, halt = (f"callwarden: {type(e).__name__}: {e}; output withheld",
                                   "output_blocked", False)
        if status == "ok":
            return {}
        if status == "output_blocked":
            shown = _fit(response, str(shown))
        specific = {"hookEventName": POST_EVENT, "updatedToolOutput": shown}
        if not halt:
            return {"hookSpecificOutput": specific}
        tool = decision.tool if decision is not None else "the tool"
        reason = f"callwarden halted the run: the output of '{tool}' broke an output rule."
        session, prompt = input_data.get("session_id"), input_data.get("prompt_id")
        if isinstance(session, str) and session:
            self._halted[session, prompt if isinstance(prompt, str) else ""] = reason
            _trim(self._halted)
        return {"continue_": False, "stopReason": reason, "hookSpecificOutput": specific}

    async def can_use_tool(self, tool_name: str, tool_input: dict[str, Any],
                           context: ToolPermissionContext) -> PermissionResultAllow | \
            PermissionResultDeny:
        """The permission callback: settles the hook's ``ask`` (or decides a call the hook
        did not see) into allow / deny."""
        call_id = getattr(context, "tool_use_id", None)
        remembered = self._decisions.get(call_id) if call_id else None
        decision = remembered[0] if remembered else None
        try:
            if decision is None or decision.tool != tool_name or \
                    thaw(decision.args) != tool_input:
                # Not the call the hook decided (no hook, or its input changed since): the
                # hook's context (the transcript, the user's request) still describes it.
                seen = thaw(decision.call.context) if decision is not None else None
                decision = await self.enforcer.acheck(tool_name, tool_input, call_id=call_id,
                                                      agent=getattr(context, "agent_id", None),
                                                      context=seen)
            decision = await self.enforcer.asettle(decision)
        except ApprovalPending as e:
            return PermissionResultDeny(message=(
                f"{describe_refusal(e.decision)} Approval request {e.request_id} is pending "
                f"(callwarden approvals approve {e.request_id}); the call was not run."))
        except Exception as e:  # fail closed
            return PermissionResultDeny(message=f"callwarden: {type(e).__name__}: {e}; blocked")
        if call_id and decision.effect.allows:
            self._remember(call_id, decision)  # the settled decision, for PostToolUse
        return permission_result(decision)

    def _remember(self, call_id: str, decision: Decision) -> None:
        self._decisions[call_id] = (decision, time.perf_counter())
        _trim(self._decisions)


def _trim(remembered: OrderedDict[Any, Any]) -> None:
    while len(remembered) > _REMEMBERED:
        remembered.popitem(last=False)


def permission_result(decision: Decision) -> PermissionResultAllow | PermissionResultDeny:
    """The ``can_use_tool`` answer for a settled decision (halt interrupts the run)."""
    if decision.effect.allows:
        return PermissionResultAllow(updated_input=thaw(decision.args))
    return PermissionResultDeny(message=describe_refusal(decision),
                                interrupt=decision.effect is Effect.HALT)


def callwarden_hooks(guard: Any, **kwargs: Any) -> dict[str, list[HookMatcher]]:
    """``ClaudeAgentOptions(hooks=callwarden_hooks("policy.yaml"))``.

    Without ``can_use_tool`` an ``ask`` is left to Claude Code's permission flow, which
    refuses it when nobody can be prompted; use :func:`callwarden_options` to settle asks.
    ``kwargs`` are :class:`ClaudeAgentGuard`'s.
    """
    return ClaudeAgentGuard(guard, **kwargs).hooks()


def callwarden_options(guard: Any, **kwargs: Any) -> dict[str, Any]:
    """``ClaudeAgentOptions(**callwarden_options("policy.yaml"), cwd=...)``: the hook plus
    ``can_use_tool``, so asks are settled by callwarden's approver / wait."""
    return ClaudeAgentGuard(guard, **kwargs).options()


def _for_sdk(output: dict[str, Any]) -> dict[str, Any]:
    # The SDK's TypedDict spells the CLI's `continue` as `continue_` and translates it back.
    if "continue" in output:
        output = {("continue_" if k == "continue" else k): v for k, v in output.items()}
    return output


_TEXT_KEYS = ("stdout", "content", "text", "output", "result")
# Discriminators Claude Code validates the output by; every other string is emptied.
_KEEP_KEYS = frozenset({"type", "mimeType", "mode"})


def _fit(original: Any, message: str) -> Any:
    """``message`` in the shape of ``original``: Claude Code rejects a replacement output that
    does not match the tool's output schema (and would then show the original)."""
    placed = False

    def walk(value: Any, key: str | None) -> Any:
        nonlocal placed
        if isinstance(value, str):
            if not placed and (key is None or key in _TEXT_KEYS):
                placed = True
                return message
            return value if key in _KEEP_KEYS else ""
        if isinstance(value, Mapping):
            ordered = sorted(value, key=lambda k: k not in _TEXT_KEYS)  # text fields first
            walked = {k: walk(value[k], str(k)) for k in ordered}
            return {k: walked[k] for k in value}
        if isinstance(value, list):
            return [walk(item, key) for item in value]
        return value

    fitted = walk(original, None)
    return fitted if placed else message


def _halt_output(reason: str) -> dict[str, Any]:
    return {"continue": False, "stopReason": reason, **_blocked(
        f"callwarden: this run was halted; no further tool calls run ({reason})")}


def _blocked(reason: str) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": EVENT, "permissionDecision": "deny",
                                   "permissionDecisionReason": reason}}
