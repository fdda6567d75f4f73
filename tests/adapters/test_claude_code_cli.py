"""The real Claude Code CLI (bundled with claude-agent-sdk) with ``callwarden hook claude-code``
as its PreToolUse hook, in ``.claude/settings.json``, against a scripted Messages API."""

from __future__ import annotations

import pytest
from _claude_fake_api import FINAL_TEXT, tool_use
from _claude_harness import (
    ALLOWED,
    ASKED,
    DENIED,
    DENY_MESSAGE,
    HALT_TURN,
    HALTING,
    ONE_TURN,
    POLICY_YAML,
    REWRITTEN,
    hook_settings,
    run_cli,
)

# The user's request as data: a recipient the user named may be written to, a stranger not.
REQUEST_POLICY = """\
version: 1
default: allow
tools:
  Bash: {kind: shell, command: command, roles: {recipient: command}}
rules:
  - id: strangers
    roles: {recipient: {in: [request]}}
    effect: deny
    message: Send only to people the user named.
"""
NAMED = tool_use("Bash", {"command": "touch alice@example.com"}, "toolu_named")
STRANGER = tool_use("Bash", {"command": "touch mallory@evil.example"}, "toolu_stranger")


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    path = tmp_path_factory.mktemp("policy") / "policy.yaml"
    path.write_text(POLICY_YAML)
    return path


@pytest.fixture(scope="module")
def turn(tmp_path_factory, policy):
    """One model turn asking for an allowed, a denied, a rewritten and an approval call."""
    return run_cli(tmp_path_factory.mktemp("turn"), ONE_TURN, hook_settings(policy))


@pytest.fixture(scope="module")
def halted(tmp_path_factory, policy):
    """A turn whose first call halts and whose second call would otherwise run."""
    return run_cli(tmp_path_factory.mktemp("halt"), HALT_TURN, hook_settings(policy))


def test_the_run_finishes(turn) -> None:
    assert turn.code == 0, turn.stderr
    assert turn.result["result"] == FINAL_TEXT


def test_the_allowed_call_runs(turn) -> None:
    assert (turn.project / "allowed.txt").exists()


def test_the_denied_call_does_not_run(turn) -> None:
    assert (turn.project / "keep.txt").read_text() == "precious\n"


def test_the_model_gets_the_deny_message_as_an_error_result(turn) -> None:
    result = turn.api.tool_results()[DENIED["id"]]
    assert result["is_error"] is True
    assert DENY_MESSAGE in turn.api.result_text(DENIED["id"])


def test_the_rewritten_call_runs_with_the_new_input(turn) -> None:
    assert (turn.project / "rewritten.txt").exists()
    assert not (turn.project / "original.txt").exists()
    assert turn.api.tool_results()[REWRITTEN["id"]]["is_error"] is False


def test_an_ask_without_anyone_to_prompt_is_refused_with_the_reason(turn) -> None:
    assert not (turn.project / "deployed.txt").exists()
    assert "needs human approval" in turn.api.result_text(ASKED["id"])


def test_the_allowed_calls_result_reaches_the_model(turn) -> None:
    assert turn.api.tool_results()[ALLOWED["id"]]["is_error"] is False


def test_halt_stops_the_run_without_another_model_turn(halted) -> None:
    assert halted.code == 0, halted.stderr
    assert len(halted.api.loop_requests) == 1


def test_halt_blocks_the_other_calls_of_the_same_turn(halted) -> None:
    assert not (halted.project / "after-halt.txt").exists()


def test_the_halted_call_is_reported_as_blocked(halted) -> None:
    events = [e for e in halted.events if e.get("type") == "user"]
    blocks = [b for e in events for b in e["message"]["content"]]
    halting = next(b for b in blocks if b.get("tool_use_id") == HALTING["id"])
    assert halting["is_error"] is True
    assert "stop-everything" in str(halting["content"])


def test_a_missing_policy_blocks_every_call(tmp_path) -> None:
    run = run_cli(tmp_path, [[ALLOWED]], hook_settings(tmp_path / "no-such-policy.yaml"))
    assert not (run.project / "allowed.txt").exists()
    assert "blocked" in run.api.result_text(ALLOWED["id"])


def test_a_hook_that_cannot_start_blocks_the_call(tmp_path) -> None:
    """``onFailure: block`` in the settings: a missing command does not fail open."""
    settings = hook_settings("unused", command=str(tmp_path / "no-such-callwarden"))
    run = run_cli(tmp_path, [[ALLOWED]], settings)
    assert not (run.project / "allowed.txt").exists()
    assert run.api.tool_results()[ALLOWED["id"]]["is_error"] is True


def test_without_approval_mode_claude_codes_own_permissions_still_decide(policy,
                                                                          tmp_path) -> None:
    run = run_cli(tmp_path, [[ALLOWED]], hook_settings(policy), args=())
    assert not (run.project / "allowed.txt").exists()


def test_approval_mode_lets_callwardens_allow_skip_the_prompt(policy, tmp_path) -> None:
    run = run_cli(tmp_path, [[ALLOWED, DENIED]], hook_settings(policy), args=(),
                  env={"CALLWARDEN_CLAUDE_APPROVE": "1"})
    assert (run.project / "allowed.txt").exists()
    assert (run.project / "keep.txt").exists()



def test_the_request_is_the_users_prompt_from_the_transcript(tmp_path) -> None:
    """The hook reads the user's latest prompt from Claude Code's transcript: the recipient
    it names is allowed, a stranger is refused and the model is told why."""
    policy = tmp_path / "request.yaml"
    policy.write_text(REQUEST_POLICY)
    run = run_cli(tmp_path, [[NAMED, STRANGER]], hook_settings(policy),
                  prompt="Send the quarterly report to alice@example.com, please.",
                  transcript=True)
    assert run.code == 0, run.stderr
    assert (run.project / "alice@example.com").exists()
    assert not (run.project / "mallory@evil.example").exists()
    assert run.api.tool_results()[STRANGER["id"]]["is_error"] is True
    assert "Send only to people the user named." in run.api.result_text(STRANGER["id"])
