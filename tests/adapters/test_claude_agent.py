"""The Claude Agent SDK adapter, end to end: ``query()`` runs the real bundled Claude Code CLI
against a scripted Messages API on 127.0.0.1, with callwarden's hook and ``can_use_tool``."""

from __future__ import annotations

import asyncio
import re
import threading
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from _claude_fake_api import FINAL_TEXT, FakeMessagesAPI, tool_use
from _claude_harness import (
    ALLOWED,
    ASKED,
    DENIED,
    DENY_MESSAGE,
    HALT_TURN,
    HALTING,
    ONE_TURN,
    POLICY,
    REWRITTEN,
    make_project,
    offline_env,
    pre_tool_use,
)
from _readme import ReadmeSection
from claude_agent_sdk import (
    ClaudeAgentOptions,
    PermissionResultAllow,
    PermissionResultDeny,
    ResultMessage,
    ToolPermissionContext,
    ToolResultBlock,
    UserMessage,
    query,
)

from callwarden import Approve, Deny, Effect, Guard
from callwarden.adapters import Enforcer
from callwarden.adapters.claude_agent import (
    ClaudeAgentGuard,
    _fit,
    callwarden_hooks,
    callwarden_options,
    permission_result,
)
from callwarden.audit import Auditor, CallableSink

README = ReadmeSection("Claude Agent SDK and Claude Code")
TIMEOUT = 60


class SdkRun(NamedTuple):
    api: FakeMessagesAPI
    project: Path
    messages: list[Any]

    @property
    def result(self) -> ResultMessage:
        return next(m for m in reversed(self.messages) if isinstance(m, ResultMessage))


async def run_sdk(root: Path, turns: list[list[dict[str, Any]]], *, setup: Any = None,
                  env: dict[str, str] | None = None, prompt: str = "Tidy up.",
                  **options: Any) -> SdkRun:
    """Runs ``query()`` with the user's ``prompt`` in a fresh project; ``options`` go into
    ``ClaudeAgentOptions``."""
    project = make_project(root)
    if setup is not None:
        setup(project)
    with FakeMessagesAPI(turns) as api:
        opts = ClaudeAgentOptions(cwd=str(project),
                                  env={**offline_env(api.url, root / "home"), **(env or {})},
                                  **options)

        async def collect() -> list[Any]:
            return [message async for message in query(prompt=prompt, options=opts)]

        messages = await asyncio.wait_for(collect(), TIMEOUT)
    return SdkRun(api, project, messages)


def approve(request: Any) -> Approve:
    return Approve(by="alice")


def reject(request: Any) -> Deny:
    return Deny(reason="not on a Friday", by="alice")


# -- the user's request ----------------------------------------------------------------------

REQUEST_POLICY: dict[str, Any] = {
    "version": 1, "default": "allow",
    "tools": {"Bash": {"kind": "shell", "command": "command",
                       "roles": {"recipient": "command"}}},
    "rules": [{"id": "strangers", "roles": {"recipient": {"in": ["request"]}},
               "effect": "deny", "message": "Send only to people the user named."}]}
NAMED = tool_use("Bash", {"command": "touch alice@example.com"}, "toolu_named")
STRANGER = tool_use("Bash", {"command": "touch mallory@evil.example"}, "toolu_stranger")


@pytest.mark.parametrize("wiring", [callwarden_options, callwarden_hooks])
async def test_the_users_prompt_is_the_request_a_named_recipient_runs(tmp_path, wiring) -> None:
    """The hook reads the user's latest prompt from the CLI's transcript: the recipient it
    names is written to, a stranger is refused and the model is told why."""
    options = wiring(REQUEST_POLICY)
    if wiring is callwarden_hooks:
        options = {"hooks": options, "allowed_tools": ["Bash"]}
    run = await run_sdk(tmp_path, [[NAMED, STRANGER]],
                        prompt="Send the quarterly report to alice@example.com, please.",
                        **options)
    assert (run.project / "alice@example.com").exists()
    assert not (run.project / "mallory@evil.example").exists()
    assert run.api.tool_results()[STRANGER["id"]]["is_error"] is True
    assert "Send only to people the user named." in run.api.result_text(STRANGER["id"])


# -- one turn: allowed, denied, rewritten, approved ------------------------------------------


@pytest.fixture(scope="module")
def turn(tmp_path_factory):
    """One model turn asking for an allowed, a denied, a rewritten and an approval call."""
    return asyncio.run(run_sdk(tmp_path_factory.mktemp("turn"), ONE_TURN,
                               **callwarden_options(POLICY, approver=approve)))


def test_the_run_finishes(turn) -> None:
    assert turn.result.result == FINAL_TEXT
    assert turn.result.is_error is False


def test_the_allowed_call_runs(turn) -> None:
    assert (turn.project / "allowed.txt").exists()


def test_the_denied_call_does_not_run(turn) -> None:
    assert (turn.project / "keep.txt").read_text() == "precious\n"


def test_the_model_gets_the_deny_message_as_an_error_result(turn) -> None:
    assert turn.api.tool_results()[DENIED["id"]]["is_error"] is True
    assert DENY_MESSAGE in turn.api.result_text(DENIED["id"])


def test_the_rewritten_call_runs_with_the_new_input(turn) -> None:
    assert (turn.project / "rewritten.txt").exists()
    assert not (turn.project / "original.txt").exists()


def test_an_approved_call_runs_exactly_once(turn) -> None:
    assert (turn.project / "deployed.txt").read_text() == "deployed\n"
    assert turn.api.tool_results()[ASKED["id"]]["is_error"] is False


# -- approval outcomes -------------------------------------------------------------------------


async def test_a_rejected_call_does_not_run_and_the_model_sees_why(tmp_path) -> None:
    run = await run_sdk(tmp_path, [[ASKED]], **callwarden_options(POLICY, approver=reject))
    assert not (run.project / "deployed.txt").exists()
    assert "not on a Friday" in run.api.result_text(ASKED["id"])


@pytest.fixture(scope="module")
def pending(tmp_path_factory):
    """An ask with no approver: (the adapter, the run)."""
    guard = ClaudeAgentGuard(POLICY)
    run = asyncio.run(run_sdk(tmp_path_factory.mktemp("pending"), [[ASKED]], **guard.options()))
    return guard, run


def _request(pending) -> Any:
    guard, run = pending
    found = re.search(r"Approval request (\w+) is pending", run.api.result_text(ASKED["id"]))
    return guard.enforcer.guard.approvals.get(found.group(1))


def test_a_pending_approval_refuses_the_call(pending) -> None:
    assert not (pending[1].project / "deployed.txt").exists()


def test_the_refusal_names_the_pending_request(pending) -> None:
    assert _request(pending).tool == "Bash"


def test_the_pending_request_carries_claudes_session(pending) -> None:
    assert _request(pending).session == pending[1].result.session_id


async def test_an_answer_from_elsewhere_during_the_wait_runs_the_call_once(tmp_path) -> None:
    guard = ClaudeAgentGuard(POLICY, wait=30)
    approvals = guard.enforcer.guard.approvals
    stop = threading.Event()

    def reviewer() -> None:  # another terminal: `callwarden approvals approve ID`
        while not stop.is_set():
            for request in approvals.list("pending"):
                approvals.approve(request.id, by="alice")
                return
            stop.wait(0.02)

    thread = threading.Thread(target=reviewer, daemon=True)
    thread.start()
    try:
        run = await run_sdk(tmp_path, [[ASKED]], **guard.options())
    finally:
        stop.set()
        thread.join(5)
    assert (run.project / "deployed.txt").read_text() == "deployed\n"


async def test_hooks_alone_leave_an_ask_to_claude_code_which_refuses_it(tmp_path) -> None:
    run = await run_sdk(tmp_path, [[ASKED]], hooks=callwarden_hooks(POLICY),
                        allowed_tools=["Bash"])
    assert not (run.project / "deployed.txt").exists()
    assert "needs human approval" in run.api.result_text(ASKED["id"])


# -- halt --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def halted(tmp_path_factory):
    """A turn whose first call halts and whose second call would otherwise run."""
    return asyncio.run(run_sdk(tmp_path_factory.mktemp("halt"), HALT_TURN,
                               **callwarden_options(POLICY)))


def test_halt_ends_the_run_without_another_model_turn(halted) -> None:
    assert len(halted.api.loop_requests) == 1
    assert halted.result is not None


def test_halt_blocks_the_other_calls_of_the_same_turn(halted) -> None:
    assert not (halted.project / "after-halt.txt").exists()


def test_the_halted_calls_result_names_the_rule(halted) -> None:
    results = [block for message in halted.messages if isinstance(message, UserMessage)
               for block in message.content if isinstance(block, ToolResultBlock)]
    halting = next(block for block in results if block.tool_use_id == HALTING["id"])
    assert halting.is_error is True
    assert "stop-everything" in str(halting.content)


# -- fail closed -------------------------------------------------------------------------------


def _broken_policy(call: Any, ctx: Any) -> None:
    raise RuntimeError("policy bug")


async def test_a_policy_error_fails_closed(tmp_path) -> None:
    guard = Guard(rules=POLICY["rules"], policies=[_broken_policy])
    run = await run_sdk(tmp_path, [[ALLOWED]], **callwarden_options(guard))
    assert not (run.project / "allowed.txt").exists()
    assert run.api.tool_results()[ALLOWED["id"]]["is_error"] is True


class _ExplodingEnforcer(Enforcer):
    async def acheck(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("store down")


async def test_an_error_inside_the_adapter_blocks_the_call(tmp_path) -> None:
    guard = ClaudeAgentGuard(_ExplodingEnforcer(POLICY, framework="claude-agent-sdk"))
    run = await run_sdk(tmp_path, [[ALLOWED]], **guard.options())
    assert not (run.project / "allowed.txt").exists()
    assert "store down" in run.api.result_text(ALLOWED["id"])


@pytest.mark.parametrize("event", ["PreToolUse", "PostToolUse"])
def test_the_hook_matchers_block_when_a_callback_fails(event) -> None:
    (matcher,) = callwarden_hooks(POLICY)[event]
    assert (matcher.on_failure, matcher.matcher) == ("block", None)


async def test_a_malformed_hook_input_is_denied() -> None:
    output = await ClaudeAgentGuard(POLICY).pre_tool_use(pre_tool_use("Bash", "ls"), None, {})
    assert output["hookSpecificOutput"]["permissionDecision"] == "deny"


# -- allow: whose permission rules decide ------------------------------------------------------


async def test_hooks_alone_leave_allowed_calls_to_claude_codes_permissions(tmp_path) -> None:
    run = await run_sdk(tmp_path, [[ALLOWED]], hooks=callwarden_hooks(POLICY))
    assert not (run.project / "allowed.txt").exists()


async def test_approve_allowed_lets_callwardens_allow_skip_the_prompt(tmp_path) -> None:
    run = await run_sdk(tmp_path, [[ALLOWED, DENIED]],
                        hooks=callwarden_hooks(POLICY, approve_allowed=True))
    assert (run.project / "allowed.txt").exists()
    assert (run.project / "keep.txt").exists()


async def test_hooks_alone_still_rewrite_and_deny(tmp_path) -> None:
    run = await run_sdk(tmp_path, [[DENIED, REWRITTEN]], hooks=callwarden_hooks(POLICY),
                        allowed_tools=["Bash"])
    assert (run.project / "keep.txt").exists()
    assert (run.project / "rewritten.txt").exists()


async def test_bypass_permissions_does_not_bypass_deny_or_ask(tmp_path) -> None:
    # IS_SANDBOX lets the CLI accept bypassPermissions when the tests run as root.
    run = await run_sdk(tmp_path, [[DENIED, ASKED]], hooks=callwarden_hooks(POLICY),
                        permission_mode="bypassPermissions", env={"IS_SANDBOX": "1"})
    assert (run.project / "keep.txt").exists()
    assert not (run.project / "deployed.txt").exists()


# -- can_use_tool on its own -------------------------------------------------------------------


async def test_can_use_tool_decides_a_call_the_hook_never_saw() -> None:
    result = await ClaudeAgentGuard(POLICY).can_use_tool(
        "Bash", {"command": "rm -rf x"}, ToolPermissionContext(tool_use_id="t1"))
    assert isinstance(result, PermissionResultDeny)
    assert DENY_MESSAGE in result.message


async def test_can_use_tool_interrupts_the_run_on_halt() -> None:
    result = await ClaudeAgentGuard(POLICY).can_use_tool(
        "Bash", {"command": "shutdown now"}, ToolPermissionContext(tool_use_id="t1"))
    assert isinstance(result, PermissionResultDeny)
    assert result.interrupt is True


def test_permission_result_allows_with_the_effective_arguments() -> None:
    decision = Guard.from_dict(POLICY).check("Bash", {"command": "echo hi"})
    assert decision.effect is Effect.MODIFY
    result = permission_result(decision)
    assert isinstance(result, PermissionResultAllow)
    assert result.updated_input == {"command": "touch rewritten.txt"}


# -- output rules (PostToolUse) ---------------------------------------------------------------

SECRET = "aws_secret_access_key = 9dKq3LwZt8vB2nX7pR4sY6uA1cE5gH0jM3oQ8wT2"
CARD_MESSAGE = "The output held card data; ask the user for what you need."
OUTPUT_POLICY = {"version": 1, "default": "allow", "rules": [
    {"id": "redact-secrets", "on": "output", "match": {"kind": "shell"}, "secrets": True,
     "effect": "modify"},
    {"id": "no-cards", "on": "output", "match": {"tool": "Bash"},
     "content": {"detect": ["card_number"]}, "effect": "deny", "message": CARD_MESSAGE}]}
READ_SECRET = tool_use("Bash", {"command": "cat config.txt"}, "toolu_secret")
READ_CARD = tool_use("Bash", {"command": "cat card.txt"}, "toolu_card")


@pytest.fixture(scope="module")
def screened(tmp_path_factory):
    """A turn reading a file with a secret and a file with a card number."""
    return asyncio.run(run_sdk(tmp_path_factory.mktemp("output"), [[READ_SECRET, READ_CARD]],
                               setup=_secret_files, **callwarden_options(OUTPUT_POLICY)))


def _secret_files(project: Path) -> None:
    (project / "config.txt").write_text(SECRET + "\n")
    (project / "card.txt").write_text("card 4111 1111 1111 1111\n")


def test_secrets_in_a_tools_output_are_redacted_before_the_model_sees_them(screened) -> None:
    text = screened.api.result_text(READ_SECRET["id"])
    assert "9dKq3" not in text
    assert "REDACTED" in text


def test_a_blocked_output_is_replaced_by_the_rules_message(screened) -> None:
    text = screened.api.result_text(READ_CARD["id"])
    assert CARD_MESSAGE in text
    assert "4111" not in text


def test_fit_keeps_the_tools_output_shape() -> None:
    original = {"stdout": "card 4111", "stderr": "x", "interrupted": False}
    assert _fit(original, "no") == {"stdout": "no", "stderr": "", "interrupted": False}


def test_fit_keeps_content_block_types() -> None:
    original = [{"type": "text", "text": "card 4111"}]
    assert _fit(original, "no") == [{"type": "text", "text": "no"}]


async def test_an_output_halt_stops_the_run() -> None:
    policy = {"version": 1, "rules": [
        {"id": "stop", "on": "output", "match": {"tool": "Bash"}, "effect": "halt"}]}
    reply = await ClaudeAgentGuard(policy).post_tool_use(
        {**pre_tool_use("Bash", {"command": "ls"}), "hook_event_name": "PostToolUse",
         "tool_response": {"stdout": "a", "stderr": "", "interrupted": False}}, "toolu_01", {})
    assert reply["continue_"] is False
    assert reply["hookSpecificOutput"]["updatedToolOutput"]["stdout"] != "a"


CONFIDENTIAL = {"version": 1, "rules": [
    {"id": "no-confidential", "on": "output", "args": {"output": "*CONFIDENTIAL*"},
     "effect": "deny", "message": "That output is confidential."}]}
MCP_RESULT = {"content": [{"type": "text", "text": "memo: CONFIDENTIAL plans"}],
              "structuredContent": {"memo": "CONFIDENTIAL plans"}}


@pytest.mark.parametrize("response", [
    MCP_RESULT,
    [{"type": "text", "text": "memo: CONFIDENTIAL plans"}],
    {"stdout": "CONFIDENTIAL plans", "stderr": "", "interrupted": False},
], ids=["mcp-structured", "content-blocks", "bash"])
async def test_a_text_output_rule_blocks_structured_results_too(response: Any) -> None:
    """An MCP tool's structured result is screened as text too: once it passed untouched."""
    reply = await ClaudeAgentGuard(CONFIDENTIAL).post_tool_use(
        {**pre_tool_use("mcp__docs__read", {"id": "7"}), "hook_event_name": "PostToolUse",
         "tool_response": response}, "toolu_01", {})
    shown = reply["hookSpecificOutput"]["updatedToolOutput"]
    assert "CONFIDENTIAL" not in str(shown) and "That output is confidential." in str(shown)


async def test_the_outcome_names_the_output_rule_that_blocked_the_result() -> None:
    events: list[dict[str, Any]] = []
    guard = Guard(rules=CONFIDENTIAL["rules"], audit=Auditor([CallableSink(events.append)]))
    await ClaudeAgentGuard(guard).post_tool_use(
        {**pre_tool_use("mcp__docs__read", {"id": "7"}), "hook_event_name": "PostToolUse",
         "tool_response": MCP_RESULT}, "toolu_01", {})
    guard.close()
    [outcome] = [e for e in events if e["type"] == "outcome"]
    assert (outcome["status"], outcome["output_rule"]) == ("output_blocked", "no-confidential")


# -- README ------------------------------------------------------------------------------------


def test_the_readme_example_runs(tmp_path, monkeypatch) -> None:
    block = re.search(r"```python\n(.*?)```", README.read_text(), re.S).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(block, str(README), "exec"), {"__name__": "__readme__"})


async def test_a_retry_of_an_approved_call_runs_once_then_asks_again() -> None:
    """The refusal says to run `callwarden approvals approve ID`; the model's retry of the same
    call (a new tool_use_id) then runs once, and the one after that asks again."""
    guard = ClaudeAgentGuard(POLICY)
    command = {"command": "./deploy.sh prod"}

    async def attempt(n: int) -> Any:
        call_id = f"toolu_retry_{n}"
        await guard.pre_tool_use(pre_tool_use("Bash", command, tool_use_id=call_id), call_id,
                                 None)
        return await guard.can_use_tool("Bash", command,
                                        ToolPermissionContext(tool_use_id=call_id))

    first = await attempt(1)
    assert isinstance(first, PermissionResultDeny)
    request_id = re.search(r"Approval request (\w+) is pending", first.message).group(1)
    guard.enforcer.guard.approvals.approve(request_id, by="alice")
    assert isinstance(await attempt(2), PermissionResultAllow)
    third = await attempt(3)
    assert isinstance(third, PermissionResultDeny) and request_id not in third.message


async def test_a_retry_of_a_denied_call_gets_the_persons_reason() -> None:
    guard = ClaudeAgentGuard(POLICY)
    command = {"command": "./deploy.sh prod"}
    ctx = ToolPermissionContext(tool_use_id="toolu_a")
    first = await guard.can_use_tool("Bash", command, ctx)
    request_id = re.search(r"Approval request (\w+) is pending", first.message).group(1)
    guard.enforcer.guard.approvals.deny(request_id, by="alice", reason="not this week")
    again = await guard.can_use_tool("Bash", command, ToolPermissionContext(tool_use_id="toolu_b"))
    assert isinstance(again, PermissionResultDeny)
    assert "alice" in again.message and "not this week" in again.message

