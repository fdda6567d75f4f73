"""``callwarden hook codex``: Codex's PreToolUse hook, as a process and in-process."""

from __future__ import annotations

import json
import subprocess

import pytest
from _hook_support import CLI, RECOMMENDED, documented_command, run_inprocess, run_process, write_policy

from callwarden.hooks import dialect
from callwarden.hooks._codex import UPDATED_INPUT_ENV, Codex

RUNNERS = [pytest.param(run_process, id="process"), pytest.param(run_inprocess, id="inprocess")]


def pre_tool_use(tool: str, args: object, **extra: object) -> str:
    payload = {"session_id": "thread-1", "turn_id": "turn-1", "transcript_path": None,
               "cwd": "/tmp", "hook_event_name": "PreToolUse", "model": "gpt-5-codex",
               "permission_mode": "default", "tool_name": tool, "tool_input": args,
               "tool_use_id": "call-1", **extra}
    return json.dumps(payload)


def deny(reason: str) -> dict[str, object]:
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                   "permissionDecisionReason": reason}}


@pytest.fixture
def policy(tmp_path):
    return write_policy(tmp_path)


@pytest.fixture(params=RUNNERS)
def run(request):
    return request.param


def test_allow_prints_nothing_because_codex_rejects_a_bare_allow(run, policy) -> None:
    assert run("codex", pre_tool_use("read_notes", {"topic": "x"}), policy) == ("", "", 0)


def test_deny_sends_the_policy_message_to_the_model(run, policy) -> None:
    result = run("codex", pre_tool_use("delete_file", {"path": "a.txt"}), policy)
    assert result.code == 0
    assert result.json == deny("Deleting files is not allowed here; move them to trash/ instead.")


def test_modify_is_denied_with_the_rewritten_call_by_default(run, policy) -> None:
    result = run("codex", pre_tool_use("search", {"query": "cats", "limit": 50}), policy)
    reason = result.json["hookSpecificOutput"]["permissionDecisionReason"]
    assert result.json["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert reason.endswith('again with these arguments instead: {"limit": 5, "query": "cats"}')


def test_modify_uses_updated_input_when_enabled(policy) -> None:
    result = run_process("codex", pre_tool_use("search", {"query": "cats", "limit": 50}), policy,
                         {UPDATED_INPUT_ENV: "1"})
    assert result.json == {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "allow",
        "updatedInput": {"query": "cats", "limit": 5}}}


def test_modify_with_updated_input_can_remove_an_argument(policy, monkeypatch) -> None:
    monkeypatch.setenv(UPDATED_INPUT_ENV, "true")
    result = run_inprocess("codex", pre_tool_use("upload", {"file": "a", "token": "t"}), policy)
    assert result.json["hookSpecificOutput"]["updatedInput"] == {"file": "a"}


def test_modify_that_changes_nothing_prints_nothing(run, policy) -> None:
    assert run("codex", pre_tool_use("search", {"query": "c", "limit": 2}), policy).stdout == ""


def test_ask_is_denied_with_an_approval_message(run, policy) -> None:
    result = run("codex", pre_tool_use("deploy", {"env": "prod"}), policy)
    reason = result.json["hookSpecificOutput"]["permissionDecisionReason"]
    assert result.json["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert reason.startswith("Deploys need a person's go-ahead.")
    assert "approval" in reason
    assert result.json["systemMessage"] == "callwarden: Deploys need a person's go-ahead."


def test_halt_is_a_deny_telling_the_model_to_stop(run, policy) -> None:
    result = run("codex", pre_tool_use("wipe", {}), policy)
    message = "Wiping is never allowed; the run is over."
    assert result.json == {
        **deny(f"{message} The policy halted this run: stop working on the task and report "
               "to the user."),
        "systemMessage": f"callwarden halted the run: {message}"}


def test_no_reply_uses_a_field_codex_rejects(run, policy) -> None:
    """continue, stopReason, suppressOutput and permissionDecision "ask" make Codex fail open."""
    for tool in ("delete_file", "deploy", "wipe", "search", "upload"):
        stdout = run("codex", pre_tool_use(tool, {"limit": 9, "token": "x"}), policy).stdout
        reply = json.loads(stdout) if stdout else {}
        assert not {"continue", "stopReason", "suppressOutput", "decision"} & set(reply)
        assert reply.get("hookSpecificOutput", {}).get("permissionDecision") in (None, "deny")


def test_other_codex_events_pass_untouched(run, policy) -> None:
    payload = json.dumps({"hook_event_name": "PostToolUse", "tool_name": "delete_file",
                          "tool_input": {}, "tool_response": "ok"})
    assert run("codex", payload, policy) == ("", "", 0)


def test_call_fields_come_from_the_payload() -> None:
    call = Codex().parse(json.loads(pre_tool_use("Bash", {"command": "ls"}, agent_id="sub-1")))
    assert call is not None
    assert (call.session, call.cwd, call.call_id, call.agent) == ("thread-1", "/tmp", "call-1",
                                                                  "sub-1")
    assert call.context == {"hook_event": "PreToolUse", "turn_id": "turn-1",
                            "model": "gpt-5-codex", "permission_mode": "default"}


@pytest.mark.parametrize("command", ["rm -rf /", "rm -rf ~", "sudo rm -rf --no-preserve-root /"])
def test_recommended_policy_denies_destructive_shell_commands(run, tmp_path, command) -> None:
    policy = write_policy(tmp_path, RECOMMENDED)
    result = run("codex", pre_tool_use("Bash", {"command": command}), policy)
    assert result.code == 0
    assert result.json["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_recommended_policy_denies_reading_credentials_through_bash(tmp_path) -> None:
    policy = write_policy(tmp_path, RECOMMENDED)
    result = run_inprocess("codex", pre_tool_use("Bash", {"command": "cat ~/.ssh/id_rsa"}), policy)
    assert result.json["hookSpecificOutput"]["permissionDecision"] == "deny"


# -- fail closed: exit code 2 with a non-empty reason on stderr --------------------------------

@pytest.mark.parametrize("stdin,why", [
    ("{not json", "not JSON"),
    ("[]", "must be a JSON object"),
    ("null", "must be a JSON object"),
    ("", "not JSON"),
    (json.dumps({"hook_event_name": "PreToolUse", "tool_input": {}}), "tool_name"),
    (json.dumps({"hook_event_name": "PreToolUse", "tool_name": 7, "tool_input": {}}),
     "tool_name"),
    (json.dumps({"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": ["ls"]}),
     "must be an object"),
    (json.dumps({"hook_event_name": "PreToolUse", "tool_name": "Bash"}),
     "must be an object, got nothing"),
    (json.dumps({"hook_event_name": "BeforeTool", "tool_name": "x", "tool_input": {}}),
     "unknown Codex hook event"),
    (json.dumps({"tool_name": "Bash", "tool_input": {"command": "ls"}}), "unknown Codex hook event"),
])
def test_bad_input_blocks_with_exit_code_2(policy, stdin, why) -> None:
    result = run_inprocess("codex", stdin, policy)
    assert (result.stdout, result.code) == ("", 2)
    assert why in result.stderr


def test_undecodable_input_blocks_the_process(policy) -> None:
    result = run_process("codex", b"\xff\xfe{", policy)
    assert (result.stdout, result.code) == ("", 2)
    assert result.stderr.strip()


def test_missing_policy_blocks(monkeypatch) -> None:
    monkeypatch.delenv("CALLWARDEN_POLICY", raising=False)
    result = run_inprocess("codex", pre_tool_use("read_notes", {}), None)
    assert result.code == 2
    assert "no policy" in result.stderr


def test_missing_policy_file_blocks_the_process(tmp_path) -> None:
    result = run_process("codex", pre_tool_use("read_notes", {}), tmp_path / "nope.yaml")
    assert (result.stdout, result.code) == ("", 2)
    assert result.stderr.strip()


def test_broken_policy_blocks(run, tmp_path) -> None:
    policy = write_policy(tmp_path, "version: 1\nrules:\n  - id: x\n    effect: maybe\n")
    result = run("codex", pre_tool_use("read_notes", {}), policy)
    assert (result.stdout, result.code) == ("", 2)
    assert "blocked" in result.stderr


def test_the_dialect_is_registered_under_its_cli_name() -> None:
    assert isinstance(dialect("codex"), Codex)


def test_documented_settings_run_the_hook(policy) -> None:
    event, program, *args = documented_command("Codex")
    assert (event, program) == ("PreToolUse", "callwarden")
    args[args.index("/path/to/policy.yaml")] = str(policy)
    done = subprocess.run([str(CLI), *args], input=pre_tool_use("delete_file", {"path": "a"}),
                          capture_output=True, text=True, timeout=60, check=False)
    assert json.loads(done.stdout) == deny("Deleting files is not allowed here; move them to "
                                           "trash/ instead.")
