"""``callwarden hook gemini-cli``: Gemini CLI's BeforeTool hook, as a process and in-process."""

from __future__ import annotations

import json
import subprocess

import pytest
from _hook_support import CLI, RECOMMENDED, documented_command, run_inprocess, run_process, write_policy

from callwarden.hooks import dialect
from callwarden.hooks._gemini_cli import NATIVE_ASK_ENV, GeminiCli

RUNNERS = [pytest.param(run_process, id="process"), pytest.param(run_inprocess, id="inprocess")]


def before_tool(tool: str, args: object, **extra: object) -> str:
    payload = {"session_id": "s-1", "transcript_path": "/tmp/t.json", "cwd": "/tmp",
               "hook_event_name": "BeforeTool", "timestamp": "2026-01-01T00:00:00Z",
               "tool_name": tool, "tool_input": args, **extra}
    return json.dumps(payload)


@pytest.fixture
def policy(tmp_path):
    return write_policy(tmp_path)


@pytest.fixture(params=RUNNERS)
def run(request):
    return request.param


def test_allow_prints_an_empty_object_so_gemini_keeps_its_own_confirmation(run, policy) -> None:
    result = run("gemini-cli", before_tool("read_notes", {"topic": "x"}), policy)
    assert (result.stdout.strip(), result.code) == ("{}", 0)


def test_deny_sends_the_policy_message_to_the_model(run, policy) -> None:
    result = run("gemini-cli", before_tool("delete_file", {"path": "a.txt"}), policy)
    assert result.code == 0
    assert result.json == {"decision": "deny", "reason": "Deleting files is not allowed here; "
                                                         "move them to trash/ instead."}


def test_modify_merges_only_the_changed_arguments(run, policy) -> None:
    result = run("gemini-cli", before_tool("search", {"query": "cats", "limit": 50}), policy)
    assert result.code == 0
    assert result.json == {"hookSpecificOutput": {"hookEventName": "BeforeTool",
                                                  "tool_input": {"limit": 5}}}


def test_modify_that_removes_an_argument_is_denied_with_the_rewritten_call(run, policy) -> None:
    result = run("gemini-cli", before_tool("upload", {"file": "a.txt", "token": "t0k"}), policy)
    reply = result.json
    assert reply["decision"] == "deny"
    assert reply["reason"].endswith('again with these arguments instead: {"file": "a.txt"}')
    assert "t0k" not in reply["reason"]


def test_modify_that_changes_nothing_is_an_allow(run, policy) -> None:
    result = run("gemini-cli", before_tool("search", {"query": "cats", "limit": 2}), policy)
    assert result.json == {}


def test_ask_is_denied_with_an_approval_message_by_default(run, policy) -> None:
    result = run("gemini-cli", before_tool("deploy", {"env": "prod"}), policy)
    reply = result.json
    assert reply["decision"] == "deny"
    assert reply["reason"].startswith("Deploys need a person's go-ahead.")
    assert "approval" in reply["reason"]


def test_ask_is_native_when_enabled(policy, monkeypatch) -> None:
    monkeypatch.setenv(NATIVE_ASK_ENV, "1")
    result = run_inprocess("gemini-cli", before_tool("deploy", {"env": "prod"}), policy)
    assert result.json == {"decision": "ask", "reason": "Deploys need a person's go-ahead.",
                           "systemMessage": "Deploys need a person's go-ahead."}


def test_ask_is_native_when_enabled_in_the_process_environment(policy) -> None:
    result = run_process("gemini-cli", before_tool("deploy", {}), policy, {NATIVE_ASK_ENV: "1"})
    assert result.json["decision"] == "ask"


def test_halt_stops_the_agent_loop_and_blocks_the_call(run, policy) -> None:
    result = run("gemini-cli", before_tool("wipe", {}), policy)
    message = "Wiping is never allowed; the run is over."
    assert result.json == {"continue": False, "stopReason": message, "decision": "deny",
                           "reason": message}


def test_other_gemini_events_pass_untouched(run, policy) -> None:
    payload = json.dumps({"hook_event_name": "AfterTool", "tool_name": "delete_file",
                          "tool_input": {}, "tool_response": {}})
    assert run("gemini-cli", payload, policy) == ("", "", 0)


def test_mcp_tools_are_named_from_mcp_context(policy) -> None:
    call = GeminiCli().parse(json.loads(before_tool(
        "mcp_github_delete_repo", {"repo": "x"},
        mcp_context={"server_name": "github", "tool_name": "delete_repo", "command": "gh"})))
    assert call is not None
    assert call.tool == "mcp__github__delete_repo"
    assert call.context == {"hook_event": "BeforeTool", "agent_tool_name": "mcp_github_delete_repo",
                            "mcp_server": "github"}


def test_session_and_cwd_come_from_the_payload() -> None:
    call = GeminiCli().parse(json.loads(before_tool("read_file", {"file_path": "a"})))
    assert call is not None
    assert (call.session, call.cwd, call.call_id) == ("s-1", "/tmp", None)


@pytest.mark.parametrize("command", ["rm -rf /", "rm -rf ~", "sudo rm -rf --no-preserve-root /"])
def test_recommended_policy_denies_destructive_shell_commands(run, tmp_path, command) -> None:
    policy = write_policy(tmp_path, RECOMMENDED)
    result = run("gemini-cli", before_tool("run_shell_command", {"command": command,
                                                                 "description": "clean"}), policy)
    assert result.code == 0
    assert result.json["decision"] == "deny"


@pytest.mark.parametrize("tool,args", [
    ("read_file", {"file_path": "~/.ssh/id_rsa"}),
    ("read_file", {"absolute_path": "/root/.ssh/id_rsa"}),
    ("write_file", {"file_path": "~/.bashrc", "content": "alias ls=rm"}),
    ("replace", {"file_path": "/work/.env", "old_string": "a", "new_string": "b"}),
    ("list_directory", {"dir_path": "~/.ssh"}),
    ("glob", {"pattern": "*", "dir_path": "~/.ssh"}),
    ("web_fetch", {"prompt": "Summarize http://169.254.169.254/latest/meta-data"}),
])
def test_recommended_policy_understands_gemini_tool_arguments(tmp_path, tool, args) -> None:
    policy = write_policy(tmp_path, RECOMMENDED)
    assert run_inprocess("gemini-cli", before_tool(tool, args), policy).json["decision"] == "deny"


# -- fail closed: exit code 2 with the reason on stderr, Gemini's documented block ------------

@pytest.mark.parametrize("stdin,why", [
    ("{not json", "not JSON"),
    ("[1, 2]", "must be a JSON object"),
    ('"BeforeTool"', "must be a JSON object"),
    ("", "not JSON"),
    (json.dumps({"hook_event_name": "BeforeTool", "tool_input": {}}), "tool_name"),
    (json.dumps({"hook_event_name": "BeforeTool", "tool_name": "", "tool_input": {}}),
     "tool_name"),
    (json.dumps({"hook_event_name": "BeforeTool", "tool_name": "x", "tool_input": "rm -rf /"}),
     "must be an object"),
    (json.dumps({"hook_event_name": "BeforeTool", "tool_name": "run_shell_command"}),
     "must be an object, got nothing"),
    (json.dumps({"hook_event_name": "PreToolUse", "tool_name": "x", "tool_input": {}}),
     "unknown Gemini CLI hook event"),
    (json.dumps({"tool_name": "x", "tool_input": {}}), "unknown Gemini CLI hook event"),
])
def test_bad_input_blocks_with_exit_code_2(policy, stdin, why) -> None:
    result = run_inprocess("gemini-cli", stdin, policy)
    assert (result.stdout, result.code) == ("", 2)
    assert why in result.stderr


def test_undecodable_input_blocks_the_process(policy) -> None:
    result = run_process("gemini-cli", b"\xff\xfe{", policy)
    assert (result.stdout, result.code) == ("", 2)
    assert result.stderr.strip()


def test_missing_policy_blocks(monkeypatch) -> None:
    monkeypatch.delenv("CALLWARDEN_POLICY", raising=False)
    result = run_inprocess("gemini-cli", before_tool("read_notes", {}), None)
    assert result.code == 2
    assert "no policy" in result.stderr


def test_missing_policy_file_blocks_the_process(tmp_path) -> None:
    result = run_process("gemini-cli", before_tool("read_notes", {}), tmp_path / "nope.yaml")
    assert (result.stdout, result.code) == ("", 2)
    assert result.stderr.strip()


def test_broken_policy_blocks(run, tmp_path) -> None:
    policy = write_policy(tmp_path, "version: 1\nrules:\n  - id: x\n    effect: maybe\n")
    result = run("gemini-cli", before_tool("read_notes", {}), policy)
    assert (result.stdout, result.code) == ("", 2)
    assert "blocked" in result.stderr


def test_the_dialect_is_registered_under_its_cli_name() -> None:
    assert isinstance(dialect("gemini-cli"), GeminiCli)


def test_documented_settings_run_the_hook(policy) -> None:
    event, program, *args = documented_command("Gemini CLI")
    assert (event, program) == ("BeforeTool", "callwarden")
    args[args.index("/path/to/policy.yaml")] = str(policy)
    done = subprocess.run([str(CLI), *args], input=before_tool("delete_file", {"path": "a"}),
                          capture_output=True, text=True, timeout=60, check=False)
    assert json.loads(done.stdout)["decision"] == "deny"
