"""``callwarden hook claude-code``: Claude Code's PreToolUse payload in, its decision JSON out."""

from __future__ import annotations

import json
import threading
import time

import pytest
from _claude_harness import (
    DENY_MESSAGE,
    POLICY,
    POLICY_YAML,
    pre_tool_use,
    run_hook_inprocess,
    run_hook_process,
)

from callwarden import Guard, freeze
from callwarden.hooks import dialect
from callwarden.hooks._claude_code import (
    APPROVE_ENV,
    ClaudeCodeDialect,
    parse_pre_tool_use,
    pre_tool_use_output,
)


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """Halt records of in-process runs go to the test's directory, not the real home."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(APPROVE_ENV, raising=False)


@pytest.fixture
def policy(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY_YAML)
    return path


def ask(payload: dict, policy) -> object:
    return run_hook_inprocess(json.dumps(payload), policy)


def bash(command: str, **extra: object) -> dict:
    return pre_tool_use("Bash", {"command": command, "description": "x"}, **extra)


def test_the_dialect_registers_as_claude_code() -> None:
    assert isinstance(dialect("claude-code"), ClaudeCodeDialect)


def test_allow_prints_nothing_so_claude_codes_own_permissions_still_apply(policy) -> None:
    result = ask(bash("ls -la"), policy)
    assert (result.stdout, result.stderr, result.code) == ("", "", 0)


def test_allow_approves_the_call_when_approval_is_switched_on(policy, monkeypatch) -> None:
    monkeypatch.setenv(APPROVE_ENV, "1")
    specific = ask(bash("ls -la"), policy).json["hookSpecificOutput"]
    assert (specific["hookEventName"], specific["permissionDecision"]) == ("PreToolUse", "allow")


def test_modify_sends_the_whole_rewritten_input(policy) -> None:
    result = ask(bash("echo hi"), policy)
    specific = result.json["hookSpecificOutput"]
    assert specific["updatedInput"] == {"command": "touch rewritten.txt", "description": "x"}
    assert "permissionDecision" not in specific
    assert result.code == 0


def test_deny_gives_the_model_the_policy_message(policy) -> None:
    result = ask(bash("rm -rf build"), policy)
    specific = result.json["hookSpecificOutput"]
    assert specific["permissionDecision"] == "deny"
    assert DENY_MESSAGE in specific["permissionDecisionReason"]
    assert result.code == 0


def test_ask_asks_claude_codes_user_with_the_reason(policy) -> None:
    specific = ask(bash("./deploy.sh prod"), policy).json["hookSpecificOutput"]
    assert specific["permissionDecision"] == "ask"
    assert "deploy-asks" in specific["permissionDecisionReason"]


def test_halt_stops_claude_and_denies_the_call(policy) -> None:
    reply = ask(bash("shutdown now"), policy).json
    assert reply["continue"] is False
    assert "stop-everything" in reply["stopReason"]
    assert reply["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_after_a_halt_later_calls_of_the_same_prompt_are_blocked(policy) -> None:
    ask(bash("shutdown now"), policy)
    result = ask(bash("ls"), policy)
    assert result.code == 2
    assert "halted" in result.stderr


def test_after_a_halt_a_new_prompt_runs_again(policy) -> None:
    ask(bash("shutdown now"), policy)
    assert ask(bash("ls", prompt_id="prompt-2"), policy).code == 0


def test_a_halt_in_one_session_leaves_other_sessions_alone(policy) -> None:
    ask(bash("shutdown now"), policy)
    assert ask(bash("ls", session_id="sess-2"), policy).code == 0


def test_other_hook_events_pass_untouched(policy) -> None:
    payload = {"session_id": "s", "hook_event_name": "PostToolUse", "tool_name": "Bash",
               "tool_input": {"command": "rm -rf /"}, "tool_response": {}}
    result = ask(payload, policy)
    assert (result.stdout, result.code) == ("", 0)


def test_malformed_json_blocks_with_exit_2(policy) -> None:
    result = run_hook_inprocess('{"tool_name": "Bash"', policy)
    assert result.code == 2
    assert "not JSON" in result.stderr


def test_missing_tool_name_blocks_with_exit_2(policy) -> None:
    payload = bash("ls")
    del payload["tool_name"]
    result = ask(payload, policy)
    assert (result.code, result.stdout) == (2, "")
    assert "tool_name" in result.stderr


def test_tool_input_that_is_not_an_object_blocks_with_exit_2(policy) -> None:
    result = ask(pre_tool_use("Bash", "rm -rf /"), policy)
    assert result.code == 2
    assert "tool_input" in result.stderr


def test_a_non_string_session_id_blocks_with_exit_2(policy) -> None:
    assert ask(bash("ls", session_id=["x"]), policy).code == 2


def test_a_missing_policy_file_blocks_with_exit_2(tmp_path) -> None:
    result = ask(bash("ls"), tmp_path / "nowhere.yaml")
    assert result.code == 2
    assert "blocked" in result.stderr


def test_no_policy_at_all_blocks_with_exit_2(monkeypatch) -> None:
    monkeypatch.delenv("CALLWARDEN_POLICY", raising=False)
    result = ask(bash("ls"), None)
    assert result.code == 2
    assert "no policy" in result.stderr


def test_a_broken_policy_file_blocks_with_exit_2(tmp_path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("version: 1\nrules:\n  - id: x\n    effect: explode\n")
    assert ask(bash("ls"), path).code == 2


def test_the_real_process_denies_with_json_on_stdout(policy, tmp_path) -> None:
    result = run_hook_process(json.dumps(bash("rm -rf build")), policy, tmp_path)
    assert result.code == 0
    assert result.json["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_the_real_process_blocks_garbage_with_exit_2(policy, tmp_path) -> None:
    result = run_hook_process(b"\xff\xfe not json", policy, tmp_path)
    assert result.code == 2
    assert result.stderr


def test_the_real_process_blocks_a_missing_policy_with_exit_2(tmp_path) -> None:
    result = run_hook_process(json.dumps(bash("ls")), tmp_path / "nowhere.yaml", tmp_path)
    assert result.code == 2


def test_parse_maps_the_payload_onto_the_call() -> None:
    call = parse_pre_tool_use(bash("ls", agent_type="code-reviewer", agent_id="a-7"))
    assert (call.tool, call.session, call.call_id, call.cwd, call.agent) == (
        "Bash", "sess-1", "toolu_01", "/tmp", "code-reviewer")
    assert call.context["permission_mode"] == "default"
    assert call.context["agent_id"] == "a-7"


def test_a_payload_without_event_name_is_taken_as_pre_tool_use() -> None:
    payload = bash("ls")
    del payload["hook_event_name"]
    assert parse_pre_tool_use(payload).tool == "Bash"


def test_an_ask_with_rewritten_arguments_shows_the_rewritten_input() -> None:
    asked = Guard.from_dict(POLICY).check("Bash", {"command": "./deploy.sh prod"})
    rewritten = asked._replace(args=freeze({"command": "ls", "timeout": 1000}))
    specific = pre_tool_use_output(rewritten)["hookSpecificOutput"]
    assert specific["permissionDecision"] == "ask"
    assert specific["updatedInput"] == {"command": "ls", "timeout": 1000}


def test_output_uses_the_clis_continue_key() -> None:
    guard = Guard.from_dict(POLICY)
    assert pre_tool_use_output(guard.check("Bash", {"command": "shutdown now"}))["continue"] \
        is False


@pytest.mark.parametrize("event", ["pretooluse", " PreToolUse", "PreToolUse ", "PRETOOLUSE",
                                   "PreToolUse2", "BeforeTool", 7, None, ["PreToolUse"], ""])
def test_an_event_it_does_not_know_blocks_the_call(policy, event) -> None:
    payload = bash("rm -rf /")
    payload["hook_event_name"] = event
    result = ask(payload, policy)
    assert (result.code, result.stdout) == (2, "")
    assert "unknown Claude Code hook event" in result.stderr


def test_a_policy_rewritten_in_place_while_hooks_run_never_lets_the_call_through(
        tmp_path) -> None:
    # A prefix of this policy is a valid policy that allows everything: a hook that read the
    # file half-written would let rm -rf / run.
    path = tmp_path / "policy.yaml"
    head = "version: 1\ndefault: allow\n"
    tail = ("rules:\n  - id: no-rm\n    match: {tool: Bash}\n"
            "    shell: {deny: ['rm -rf /']}\n    effect: deny\n")
    path.write_text(head + tail)
    stop = threading.Event()

    def rewrite_in_place() -> None:
        while not stop.is_set():
            with path.open("w") as f:  # truncates, then writes in two parts
                f.write(head)
                f.flush()
                time.sleep(0.02)
                f.write(tail)
            time.sleep(0.08)

    writer = threading.Thread(target=rewrite_in_place, daemon=True)
    writer.start()
    try:
        results = [ask(bash("rm -rf /"), path) for _ in range(60)]
    finally:
        stop.set()
        writer.join()
    let_through = [r for r in results if r.code == 0 and "deny" not in r.stdout]
    assert let_through == []
