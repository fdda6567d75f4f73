"""CrewAI 1.15: a real Crew with a scripted model, its tool calls decided through CrewGuard."""

from __future__ import annotations

import io
import json
import re
import sys
import threading
from typing import Any

import pytest
from _crewai_support import (
    POLICY,
    SECRET,
    Tools,
    call,
    crew,
    guarded,
    kickoff,
    mail_crew,
    model,
    react,
    results_seen,
    transcript,
    within_timeout,
)
from _readme import ReadmeSection
from _scenario import REQUEST_MESSAGE, REQUEST_POLICY
from crewai.hooks import get_after_tool_call_hooks, get_before_tool_call_hooks
from crewai.hooks.dispatch import HookAborted

from callwarden import Approve, Deny, Guard, RunHalted
from callwarden.adapters.crewai import CrewApprovalPending, CrewGuard, CrewRunHalted, guard_crew

README = ReadmeSection("CrewAI")

# CrewAI reads its own deprecated Agent fields (function_calling_llm, allow_code_execution, ...)
# while building an Agent; pydantic's warning for them is attributed to CrewAI's warn wrapper.
pytestmark = [
    pytest.mark.filterwarnings("ignore:function_calling_llm is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:deprecated$:DeprecationWarning:crewai"),
]

FOUR = [call("c1", "read_file", path="notes.txt"),
        call("c2", "delete_file", path="notes.txt"),
        call("c3", "search", query="callwarden", limit=50),
        call("c4", "deploy", env="qa")]
ONE_TURN = [*FOUR, call("c5", "wipe_disk", device="sda")]


def run_four(tools: Tools, *, mode: str = "sync", **options: Any) -> dict[str, str]:
    """Four calls in one turn (run in parallel threads by CrewAI), then a final answer:
    returns the tool results the model read."""
    llm = model(FOUR, "All done.")
    the_crew = crew(tools, llm)
    guarded(the_crew, **options)
    kickoff(the_crew, mode=mode)
    return results_seen(llm)


# -- the one-turn scenario --------------------------------------------------------------------

def test_one_turn_allows_denies_rewrites_asks_and_halts() -> None:
    tools = Tools()
    llm = model(ONE_TURN, "All done.")
    the_crew = crew(tools, llm, sequential=True)
    guarded(the_crew, approver=lambda request: True)
    with pytest.raises(CrewRunHalted) as stopped:
        kickoff(the_crew)
    assert tools.ran == [("read_file", {"path": "notes.txt"}),
                         ("search", {"query": "callwarden", "limit": 5}),
                         ("deploy", {"env": "qa"})]
    assert stopped.value.decision.rule == "stop-on-wipe"
    assert len(llm.requests) == 1  # the model got no further turn


@pytest.mark.parametrize("mode", ["sync", "async", "kickoff_async"])
def test_the_model_reads_each_decision_in_its_tool_results(mode: str) -> None:
    tools = Tools()
    seen = run_four(tools, mode=mode, approver=lambda request: True)
    assert seen["c1"] == "contents of notes.txt"
    assert seen["c2"] == "Deleting files is not allowed; move them to trash/ instead."
    assert seen["c3"] == "5 results for callwarden"
    assert seen["c4"] == "deployed to qa"
    assert sorted(tools.names()) == ["deploy", "read_file", "search"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_halting_call_stops_the_crew_without_running(mode: str) -> None:
    tools = Tools()
    llm = model(ONE_TURN, "All done.")
    the_crew = crew(tools, llm)
    guard = guarded(the_crew, approver=lambda request: True)
    with pytest.raises(CrewRunHalted) as stopped:
        kickoff(the_crew, mode=mode)
    assert isinstance(stopped.value, RunHalted) and isinstance(stopped.value, HookAborted)
    assert "Wiping disks ends the session." in stopped.value.reason
    assert "wipe_disk" not in tools.names() and "delete_file" not in tools.names()
    assert guard.halted is not None and len(llm.requests) == 1


def test_a_halted_guard_stops_the_next_run_until_cleared() -> None:
    tools = Tools()
    llm = model([call("c1", "wipe_disk", device="sda")], [call("c2", "read_file", path="a")],
                [call("c3", "read_file", path="a")], "done")
    the_crew = crew(tools, llm)
    guard = guarded(the_crew)
    with pytest.raises(CrewRunHalted):
        kickoff(the_crew)
    with pytest.raises(CrewRunHalted):
        kickoff(the_crew)
    assert tools.names() == []
    guard.clear_halt()
    kickoff(the_crew)
    assert tools.names() == ["read_file"]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_approver_approval_runs_the_call_once(kind: str) -> None:
    asked: list[str] = []

    def approve(request: Any) -> Approve:
        asked.append(request.tool)
        return Approve(by="alice")

    async def aapprove(request: Any) -> Approve:
        return approve(request)

    tools = Tools()
    seen = run_four(tools, approver=approve if kind == "sync" else aapprove)
    assert asked == ["deploy"] and tools.ran.count(("deploy", {"env": "qa"})) == 1
    assert seen["c4"] == "deployed to qa"


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_approver_rejection_gives_the_model_the_reason(kind: str) -> None:
    def reject(request: Any) -> Deny:
        return Deny(reason="freeze until Monday", by="alice")

    async def areject(request: Any) -> Deny:
        return reject(request)

    tools = Tools()
    seen = run_four(tools, approver=reject if kind == "sync" else areject)
    assert "deploy" not in tools.names()
    assert "alice denied it: freeze until Monday" in seen["c4"]


# -- the ReAct text format (a model without native function calling) ------------------------

def test_react_steps_are_decided_too() -> None:
    tools = Tools()
    llm = model(react("delete_file", path="notes.txt"),
                react("search", query="callwarden", limit=50),
                "Thought: done\nFinal Answer: tidy", native=False)
    the_crew = crew(tools, llm)
    guarded(the_crew)
    kickoff(the_crew)
    assert tools.ran == [("search", {"query": "callwarden", "limit": 5})]
    assert "Deleting files is not allowed; move them to trash/ instead." in transcript(llm)
    assert "5 results for callwarden" in transcript(llm)


def test_react_halt_stops_the_crew() -> None:
    tools = Tools()
    llm = model(react("wipe_disk", device="sda"), "Thought: x\nFinal Answer: y", native=False)
    the_crew = crew(tools, llm)
    guarded(the_crew)
    with pytest.raises(CrewRunHalted):
        kickoff(the_crew, mode="async")
    assert tools.names() == [] and len(llm.requests) == 1


# -- approval without an approver: pending, then asked again ----------------------------------

def test_ask_without_approver_tells_the_model_the_pending_request_id() -> None:
    tools = Tools()
    llm = model([call("c1", "deploy", env="qa")], "waiting")
    the_crew = crew(tools, llm)
    guard = guarded(the_crew)
    kickoff(the_crew)
    assert tools.names() == [] and len(guard.pending) == 1
    assert f"Approval request {guard.pending[0]} is pending" in results_seen(llm)["c1"]


def test_an_approved_pending_call_runs_once_when_asked_again() -> None:
    tools = Tools()
    llm = model(*([call(f"c{i}", "deploy", env="qa")] if i % 2 == 0 else "ok"
                  for i in range(6)))
    the_crew = crew(tools, llm)
    guard = guarded(the_crew)
    kickoff(the_crew)
    first = guard.pending[0]
    guard.enforcer.guard.approvals.approve(first, by="alice")  # = callwarden approvals approve
    kickoff(the_crew)
    kickoff(the_crew)
    assert tools.ran == [("deploy", {"env": "qa"})]
    assert guard.pending and guard.pending[0] != first  # the third call is a new request


def test_a_rejected_pending_call_gives_the_model_the_reason_when_asked_again() -> None:
    tools = Tools()
    llm = model([call("c1", "deploy", env="qa")], "ok", [call("c2", "deploy", env="qa")], "ok")
    the_crew = crew(tools, llm)
    guard = guarded(the_crew)
    kickoff(the_crew)
    guard.answer(guard.pending[0], {"approve": False, "reason": "not today"}, by="alice")
    kickoff(the_crew)
    assert tools.names() == [] and "not today" in results_seen(llm)["c2"]


def test_wait_lets_an_answer_given_elsewhere_settle_the_call() -> None:
    tools = Tools()
    llm = model([call("c1", "deploy", env="qa")], "ok")
    the_crew = crew(tools, llm)
    guard = guarded(the_crew, wait=20)
    approvals = guard.enforcer.guard.approvals

    def reviewer() -> None:  # stands in for `callwarden approvals approve ID` elsewhere
        for _ in range(2000):
            waiting = approvals.list("pending")
            if waiting:
                approvals.approve(waiting[0].id, by="alice")
                return
            threading.Event().wait(0.01)

    helper = threading.Thread(target=reviewer, daemon=True)
    helper.start()
    kickoff(the_crew)
    helper.join(5)
    assert tools.ran == [("deploy", {"env": "qa"})]


def test_stop_on_pending_stops_the_crew_and_the_approved_call_runs_on_the_next_kickoff() -> None:
    tools = Tools()
    llm = model([call("c1", "deploy", env="qa")], [call("c2", "deploy", env="qa")], "ok")
    the_crew = crew(tools, llm)
    guard = guarded(the_crew, stop_on_pending=True)
    with pytest.raises(CrewApprovalPending) as paused:
        kickoff(the_crew)
    assert paused.value.request_id == guard.pending[0] and len(llm.requests) == 1
    guard.answer(paused.value.request_id, True, by="alice")
    kickoff(the_crew)
    assert tools.ran == [("deploy", {"env": "qa"})]
    assert results_seen(llm)["c2"] == "deployed to qa"


@pytest.mark.parametrize(("typed", "runs"), [("approve\n", True), ("not on a Friday\n", False)])
def test_human_input_asks_at_the_console(monkeypatch, typed: str, runs: bool) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(typed))  # the person types at the console
    tools = Tools()
    llm = model([call("c1", "deploy", env="qa")], "ok")
    the_crew = crew(tools, llm)
    guard = guarded(the_crew, human_input=True, reviewer="alice")
    kickoff(the_crew)
    seen = results_seen(llm)["c1"]
    if runs:
        assert tools.ran == [("deploy", {"env": "qa"})] and seen == "deployed to qa"
    else:
        assert tools.names() == [] and "denied by alice: not on a Friday" in seen
    [request] = guard.enforcer.guard.approvals.list()
    assert request.resolved_by == "alice"


# -- failing closed ---------------------------------------------------------------------------

def test_a_policy_that_raises_fails_closed() -> None:
    def broken(call: Any, ctx: Any) -> Any:
        raise RuntimeError("policy bug")

    tools = Tools()
    llm = model([call("c1", "read_file", path="a.txt")], "ok")
    the_crew = crew(tools, llm)
    guarded(the_crew, Guard(rules=[], policies=[broken]))
    kickoff(the_crew)
    assert tools.names() == []
    assert "rule 'broken' raised RuntimeError: policy bug" in results_seen(llm)["c1"]


def test_an_error_while_deciding_fails_closed_with_the_reason(monkeypatch) -> None:
    def explode(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("store down")

    tools = Tools()
    llm = model([call("c1", "read_file", path="a.txt")], "ok")
    the_crew = crew(tools, llm)
    guard = guarded(the_crew)
    monkeypatch.setattr(guard.enforcer.guard, "check", explode)
    kickoff(the_crew)
    assert tools.names() == []
    assert "callwarden could not decide it (RuntimeError: store down)" in results_seen(llm)["c1"]


def test_an_output_that_cannot_be_screened_is_withheld(monkeypatch) -> None:
    def explode(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("screen down")

    llm = model([call("c1", "read_file", path="config.ini")], "ok")
    the_crew = crew(Tools(), llm)
    guard = guarded(the_crew)
    monkeypatch.setattr(guard.enforcer.guard, "check_output", explode)
    kickoff(the_crew)
    seen = results_seen(llm)["c1"]
    assert SECRET not in seen and "could not be checked (RuntimeError: screen down)" in seen


# -- output rules and the audit log -----------------------------------------------------------

def test_output_rules_redact_the_result_before_the_model_sees_it() -> None:
    llm = model([call("c1", "read_file", path="config.ini")], "ok")
    the_crew = crew(Tools(), llm)
    guarded(the_crew)
    kickoff(the_crew)
    seen = results_seen(llm)["c1"]
    assert "9dKq3" not in seen and "REDACTED" in seen


def test_an_output_halt_withholds_the_result_and_stops_the_crew() -> None:
    policy = {"version": 1, "rules": [{"id": "leak", "on": "output", "if":
              "args.output.contains('secret_access_key')", "effect": "halt"}]}
    llm = model([call("c1", "read_file", path="config.ini")], "ok")
    the_crew = crew(Tools(), llm)
    guard = guarded(the_crew, policy)
    with pytest.raises(CrewRunHalted) as stopped:
        kickoff(the_crew)
    assert SECRET not in str(stopped.value) and guard.halted is not None
    assert len(llm.requests) == 1


def test_the_audit_log_names_the_rules_and_the_outcomes(tmp_path) -> None:
    log = tmp_path / "audit.jsonl"
    policy = {**POLICY, "audit": {"sinks": [{"jsonl": str(log)}], "required": True}}
    llm = model([call("c1", "search", query="q", limit=50)], [call("c2", "read_file",
                                                                   path="config.ini")], "ok")
    the_crew = crew(Tools(), llm)
    guard = guarded(the_crew, policy)
    kickoff(the_crew)
    guard.enforcer.guard.close()
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(e["type"], e["effect"], e["rule"], e["framework"] if e["type"] == "decision"
             else e["status"]) for e in events] == [
        ("decision", "modify", "cap-search", "crewai"), ("outcome", "modify", "cap-search", "ok"),
        ("decision", "allow", "default", "crewai"),
        ("outcome", "allow", "default", "output_modified")]
    assert events[0]["args"] == {"query": "q", "limit": 50}
    assert events[0]["agent"] == "assistant" and events[3]["output_rule"] == "redact-secrets"


# -- installing: per crew, per agent, and out again -------------------------------------------

def test_a_guard_leaves_other_crews_alone() -> None:
    tools, other_tools = Tools(), Tools()
    the_crew = crew(tools, model([call("c1", "delete_file", path="a")], "ok"))
    other = crew(other_tools, model([call("c1", "delete_file", path="a")], "ok"))
    guarded(the_crew)
    kickoff(the_crew)
    kickoff(other)
    assert tools.names() == [] and other_tools.names() == ["delete_file"]


def test_a_guard_can_cover_chosen_agents() -> None:
    tools = Tools()
    the_crew = crew(tools, model([call("c1", "delete_file", path="a")], "ok"))
    with CrewGuard(POLICY, agents=[the_crew.agents[0]]):
        kickoff(the_crew)
    assert tools.names() == []


def test_uninstall_takes_the_hooks_out_of_crewai() -> None:
    tools = Tools()
    the_crew = crew(tools, model([call("c1", "delete_file", path="a")], "ok"))
    guard = guard_crew(the_crew, POLICY)
    assert guard.before_tool_call in get_before_tool_call_hooks() and guard.installed
    guard.uninstall()
    assert guard.before_tool_call not in get_before_tool_call_hooks()
    assert guard.after_tool_call not in get_after_tool_call_hooks()
    kickoff(the_crew)
    assert tools.names() == ["delete_file"]


def test_a_guard_used_as_a_context_manager_installs_once_and_leaves() -> None:
    with CrewGuard(POLICY) as guard:
        guard.install()
        assert get_before_tool_call_hooks().count(guard.before_tool_call) == 1
    assert guard.before_tool_call not in get_before_tool_call_hooks()


def test_a_standalone_agent_kickoff_is_guarded_too() -> None:
    tools = Tools()
    llm = model([call("c1", "delete_file", path="a"), call("c2", "search", query="q", limit=9)],
                "ok")
    agent = crew(tools, llm).agents[0]
    with CrewGuard(POLICY, agents=[agent]):
        within_timeout(lambda: agent.kickoff("Tidy up the project."))
    assert tools.ran == [("search", {"query": "q", "limit": 5})]
    assert results_seen(llm)["c1"].startswith("Deleting files is not allowed")


# -- the user's request: context.request ------------------------------------------------------

MAIL_BOTH = [call("c1", "send_email", to="carol@example.org"),
             call("c2", "send_email", to="eve@attacker.example")]


def test_the_kickoff_inputs_in_the_task_description_are_the_request() -> None:
    """A recipient the user gave as a kickoff input is allowed; a stranger is refused."""
    tools, llm = Tools(), model(MAIL_BOTH, "Mailed Carol.")
    the_crew = mail_crew(tools, llm)
    guarded(the_crew, REQUEST_POLICY)
    kickoff(the_crew, inputs={"who": "Carol@Example.org"})
    assert tools.ran == [("send_email", {"to": "carol@example.org"})]
    seen = results_seen(llm)
    assert seen["c1"] == "sent to carol@example.org" and seen["c2"] == REQUEST_MESSAGE


def test_a_coworkers_delegated_task_is_not_the_request() -> None:
    """The delegating model names a stranger in the coworker's task: the coworker's calls are
    decided against the kickoff inputs, so only the recipient the user gave is mailed."""
    tools = Tools()
    delegate = call("d1", "delegate_work_to_coworker", coworker="mailer", context="the notes",
                    task="Mail the notes to carol@example.org and eve@attacker.example.")
    llm, mailer = model([delegate], "Delegated."), model(MAIL_BOTH, "Mailed Carol.")
    the_crew = mail_crew(tools, llm, coworker=mailer)
    guarded(the_crew, REQUEST_POLICY)
    kickoff(the_crew, inputs={"who": "Carol@Example.org"})
    assert tools.ran == [("send_email", {"to": "carol@example.org"})]
    seen = results_seen(mailer)
    assert seen["c1"] == "sent to carol@example.org" and seen["c2"] == REQUEST_MESSAGE


def test_crewai_chat_takes_the_latest_user_message_not_the_assistants() -> None:
    """``crewai chat`` appends the whole conversation to the task description; only what the
    user said counts."""
    tools, llm = Tools(), model(MAIL_BOTH, "Mailed Carol.")
    the_crew = mail_crew(tools, llm)
    guarded(the_crew, REQUEST_POLICY)
    chat = [{"role": "user", "content": "Please mail the notes to Carol@Example.org"},
            {"role": "assistant", "content": "Shall I copy eve@attacker.example too?"}]
    kickoff(the_crew, inputs={"who": "carol@example.org", "crew_chat_messages": json.dumps(chat)})
    assert tools.ran == [("send_email", {"to": "carol@example.org"})]
    assert results_seen(llm)["c2"] == REQUEST_MESSAGE


# -- the README example ----------------------------------------------------------------------

def test_the_readme_example_runs(tmp_path, monkeypatch) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) == 1
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks[0], str(README), "exec"), {"__name__": "__main__"})
