"""smolagents 1.26: real ToolCallingAgent and CodeAgent runs with a scripted model, their tools
guarded by guard_agent."""

from __future__ import annotations

import json
import linecache
import re
import threading
import time
from typing import Any

import pytest
from _readme import ReadmeSection
from _scenario import POLICY, REQUEST_POLICY, SECRET
from _smolagents_support import (
    ScriptedModel,
    Tools,
    answer,
    asks,
    call,
    code,
    code_agent,
    last_step,
    run,
    tool_agent,
)
from smolagents import CodeAgent, FinalAnswerTool, ToolCallingAgent, tool
from smolagents.memory import ActionStep
from smolagents.monitoring import LogLevel

from callwarden import ApprovalPending, Approve, Deny, Guard, RunHalted
from callwarden.adapters.smolagents import (
    GuardedTool,
    ToolCallRefused,
    ToolGate,
    guard_agent,
    guard_tools,
)

README = ReadmeSection("smolagents")

ONE_TURN = (call("c1", "read_file", path="config.ini"),
            call("c2", "delete_file", path="notes.txt"),
            call("c3", "search", query="callwarden", limit=50),
            call("c4", "deploy", env="qa"),
            call("c5", "wipe_disk", device="sda"))

ONE_SNIPPET = """\
print(read_file(path="config.ini"))
print(search("callwarden", 50))
print(deploy(env="qa"))
try:
    delete_file(path="notes.txt")
except Exception as e:
    print("refused:", e)
wipe_disk(device="sda")
final_answer("all done")"""


def approve_all(request: Any) -> bool:
    return True


def run_tool_agent_turn(tools: Tools, **options: Any) -> tuple[str, ToolGate]:
    """The five calls in one ToolCallingAgent step: returns the step's observations (what the
    model reads next) once the halt ended the run."""
    agent = tool_agent(tools, ScriptedModel(asks(*ONE_TURN)))
    gate = guard_agent(agent, POLICY, **options)
    with pytest.raises(RunHalted, match="Wiping disks ends the session"):
        run(agent)
    return last_step(agent).observations or "", gate


def run_code_agent_snippet(tools: Tools, **options: Any) -> tuple[ActionStep, ToolGate]:
    agent = code_agent(tools, ScriptedModel(code(ONE_SNIPPET)))
    gate = guard_agent(agent, POLICY, **options)
    with pytest.raises(RunHalted, match="Wiping disks ends the session"):
        run(agent)
    return last_step(agent), gate


# -- ToolCallingAgent: the one-turn scenario ---------------------------------------------------

def test_tool_calling_agent_runs_allowed_and_rewritten_calls_and_screens_output() -> None:
    tools = Tools()
    seen, _ = run_tool_agent_turn(tools, approver=approve_all)
    assert ("read_file", {"path": "config.ini"}) in tools.ran
    assert ("search", {"query": "callwarden", "limit": 5}) in tools.ran
    assert "5 results for callwarden" in seen
    assert "9dKq3" not in seen and "REDACTED" in seen


def test_tool_calling_agent_denied_call_never_runs_and_its_observation_is_the_message() -> None:
    tools = Tools()
    seen, _ = run_tool_agent_turn(tools, approver=approve_all)
    assert "delete_file" not in tools.names()
    assert "Deleting files is not allowed; move them to trash/ instead." in seen


def test_tool_calling_agent_halt_ends_the_run_and_the_halting_call_never_runs() -> None:
    tools = Tools()
    seen, gate = run_tool_agent_turn(tools, approver=approve_all)
    assert "wipe_disk" not in tools.names()
    assert "callwarden halted the run: Wiping disks ends the session." in seen
    assert gate.halted is not None and gate.halted.rule == "stop-on-wipe"


@pytest.mark.parametrize("verdict", ["approve", "reject"])
def test_tool_calling_agent_approver_runs_once_or_gives_the_reason(verdict: str) -> None:
    asked: list[str] = []

    def approver(request: Any) -> Any:
        asked.append(request.tool)
        return Approve(by="alice") if verdict == "approve" else \
            Deny(reason="freeze until Monday", by="alice")

    tools = Tools()
    seen, _ = run_tool_agent_turn(tools, approver=approver)
    assert asked == ["deploy"]
    if verdict == "approve":
        assert tools.ran.count(("deploy", {"env": "qa"})) == 1 and "deployed to qa" in seen
    else:
        assert "deploy" not in tools.names() and "freeze until Monday" in seen


def test_the_model_reads_the_refusal_in_its_next_turn() -> None:
    tools = Tools()
    model = ScriptedModel(asks(call("c1", "delete_file", path="a.txt")), answer("ok"))
    agent = tool_agent(tools, model)
    guard_agent(agent, POLICY)
    assert run(agent) == "ok"
    assert tools.names() == []
    assert "Observation:\nDeleting files is not allowed" in model.seen[1]


def mailer(sent: list[str]) -> Any:
    @tool
    def send_email(to: str) -> str:
        """Sends an e-mail.

        Args:
            to: The recipient.
        """
        sent.append(to)
        return f"sent to {to}"

    return send_email


def test_the_users_latest_message_is_the_request_the_policy_sees() -> None:
    """The recipient named in the latest task is allowed; one named only in an earlier task of
    the conversation is a stranger, and the model reads the rule's message."""
    sent: list[str] = []
    model = ScriptedModel(answer("noted", "a1"),
                          asks(call("c1", "send_email", to="carol@example.org"),
                               call("c2", "send_email", to="eve@attacker.example")),
                          answer("done", "a2"))
    agent = ToolCallingAgent(tools=[mailer(sent)], model=model, verbosity_level=LogLevel.OFF)
    guard_agent(agent, REQUEST_POLICY)
    run(agent, "Mail eve@attacker.example the notes")
    assert run(agent, "No, mail Carol@Example.org instead", reset=False) == "done"
    assert sent == ["carol@example.org"]
    assert "sent to carol@example.org" in model.seen[2]
    assert "Mail only people the user named." in model.seen[2]


def test_a_managed_agents_task_is_not_the_users_request() -> None:
    """The managing model's task for a managed agent names eve: the user did not, so the
    managed agent's call to eve is refused."""
    sent: list[str] = []
    helper_model = ScriptedModel(asks(call("h1", "send_email", to="eve@attacker.example")),
                                 answer("tried", "h2"))
    helper = ToolCallingAgent(tools=[mailer(sent)], model=helper_model, name="helper",
                              description="sends mail", verbosity_level=LogLevel.OFF)
    model = ScriptedModel(asks(call("m1", "helper", task="Mail eve@attacker.example")),
                          answer("done", "m2"))
    agent = ToolCallingAgent(tools=[], model=model, managed_agents=[helper],
                             verbosity_level=LogLevel.OFF)
    guard_agent(agent, REQUEST_POLICY)
    assert run(agent, "Mail Carol@Example.org the notes") == "done"
    assert sent == []
    assert "Mail only people the user named." in helper_model.seen[1]


# -- CodeAgent: the same scenario as generated code -----------------------------------------

def test_code_agent_governs_tools_called_from_code_like_tool_calls() -> None:
    tools = Tools()
    step, gate = run_code_agent_snippet(tools, approver=approve_all)
    logs = step.observations or ""
    assert tools.ran == [("read_file", {"path": "config.ini"}),
                         ("search", {"query": "callwarden", "limit": 5}),
                         ("deploy", {"env": "qa"})]
    assert "9dKq3" not in logs and "REDACTED" in logs and "5 results for callwarden" in logs
    assert "refused: Deleting files is not allowed; move them to trash/ instead." in logs
    assert "ToolCallRefused: callwarden halted the run" in str(step.error)
    assert gate.halted is not None and not step.is_final_answer


def test_code_agent_denied_call_stops_the_snippet_and_the_model_reads_why() -> None:
    tools = Tools()
    model = ScriptedModel(code('delete_file(path="a.txt")\nprint(read_file(path="b.txt"))'),
                          code('final_answer("gave up")'))
    agent = code_agent(tools, model)
    guard_agent(agent, POLICY)
    assert run(agent) == "gave up"
    assert tools.names() == []  # nothing after the denied line ran either
    assert ("Code execution failed at line 'delete_file(path=\"a.txt\")' due to: "
            "ToolCallRefused: Deleting files is not allowed") in model.seen[1]


@pytest.mark.parametrize("verdict", ["approve", "reject"])
def test_code_agent_approver_runs_once_or_raises_the_reason(verdict: str) -> None:
    answer_ = (lambda r: Approve(by="alice")) if verdict == "approve" else \
        (lambda r: Deny(reason="freeze until Monday", by="alice"))
    tools = Tools()
    model = ScriptedModel(code('final_answer(deploy(env="qa"))'),
                          code('final_answer("no deploy")'))
    agent = code_agent(tools, model)
    guard_agent(agent, POLICY, approver=answer_)
    result = run(agent)
    if verdict == "approve":
        assert result == "deployed to qa" and tools.names() == ["deploy"]
    else:
        assert result == "no deploy" and tools.names() == []
        assert "ToolCallRefused: The call to 'deploy' was not approved" in model.seen[1]
        assert "freeze until Monday" in model.seen[1]


def test_code_agent_positional_arguments_are_decided_by_name() -> None:
    tools = Tools()
    agent = code_agent(tools, ScriptedModel(code('final_answer(search("q", 99))')))
    guard_agent(agent, POLICY)
    assert run(agent) == "5 results for q"
    assert tools.ran == [("search", {"query": "q", "limit": 5})]


# -- approval without an approver: pending, then asked again ----------------------------------

def test_a_pending_request_is_named_and_the_same_call_runs_once_after_approval() -> None:
    tools = Tools()
    model = ScriptedModel(*(asks(call(f"c{i}", "deploy", env="qa")) for i in range(3)),
                          answer("done"))
    agent = tool_agent(tools, model, max_steps=4)
    gate = guard_agent(agent, POLICY)
    approvals = gate.enforcer.guard.approvals
    seen: list[str] = []

    def reviewer(step: Any, agent: Any) -> None:  # approves between the first two steps
        seen.append(step.observations or "")
        if len(seen) == 1:
            approvals.approve(gate.pending[0], by="alice")  # = callwarden approvals approve

    agent.step_callbacks.register(ActionStep, reviewer)
    run(agent)
    assert re.search(r"Approval request \S+ is pending", seen[0])
    assert tools.ran == [("deploy", {"env": "qa"})]  # once, for the approved request
    assert seen[1] == "deployed to qa" and "is pending" in seen[2]  # the third is a new request


def test_a_rejected_pending_call_gives_the_model_the_reason_when_asked_again() -> None:
    tools = Tools()
    agent = tool_agent(tools, ScriptedModel(asks(call("c1", "deploy", env="qa")),
                                            asks(call("c2", "deploy", env="qa")),
                                            answer("ok")))
    gate = guard_agent(agent, POLICY)
    agent.step_callbacks.register(
        ActionStep, lambda step, agent: gate.pending and gate.answer(
            gate.pending[0], {"approve": False, "reason": "not today"}, by="alice"))
    run(agent)
    assert tools.names() == [] and "not today" in (agent.memory.steps[2].observations or "")


def test_wait_lets_an_answer_given_elsewhere_settle_the_call() -> None:
    tools = Tools()
    agent = tool_agent(tools, ScriptedModel(asks(call("c1", "deploy", env="qa")),
                                            answer("ok")))
    gate = guard_agent(agent, POLICY, wait=20)
    approvals = gate.enforcer.guard.approvals

    def reviewer() -> None:  # stands in for `callwarden approvals approve ID` elsewhere
        deadline = time.monotonic() + 20
        while not approvals.list("pending") and time.monotonic() < deadline:
            time.sleep(0.01)
        approvals.approve(approvals.list("pending")[0].id, by="alice")

    thread = threading.Thread(target=reviewer)
    thread.start()
    run(agent)
    thread.join(20)
    assert tools.ran == [("deploy", {"env": "qa"})]


def test_pause_on_pending_ends_the_run_and_a_resumed_run_runs_the_call_once() -> None:
    tools = Tools()
    model = ScriptedModel(asks(call("c1", "deploy", env="qa")),
                          asks(call("c2", "deploy", env="qa")), answer("deployed"))
    agent = tool_agent(tools, model)
    gate = guard_agent(agent, POLICY, pause_on_pending=True)
    with pytest.raises(ApprovalPending) as paused:
        run(agent)
    assert paused.value.request_id == gate.pending[0] and tools.names() == []
    gate.enforcer.guard.approvals.approve(paused.value.request_id, by="alice")
    assert run(agent, "go on", reset=False) == "deployed"
    assert tools.ran == [("deploy", {"env": "qa"})]
    assert "is pending" in model.seen[1]  # the resumed run kept the paused step in memory


def test_code_agent_pending_call_raises_the_request_into_the_code() -> None:
    tools = Tools()
    model = ScriptedModel(code('deploy(env="qa")'), code('final_answer(deploy(env="qa"))'))
    agent = code_agent(tools, model)
    gate = guard_agent(agent, POLICY)
    agent.step_callbacks.register(
        ActionStep, lambda step, agent: gate.pending and gate.answer(gate.pending[0], True,
                                                                     by="alice"))
    assert run(agent) == "deployed to qa"
    assert "ToolCallRefused: The call to 'deploy' needs a person's approval" in model.seen[1]
    assert tools.names() == ["deploy"]


# -- halt -----------------------------------------------------------------------------------

def test_a_halted_gate_refuses_later_runs_until_cleared() -> None:
    tools = Tools()
    model = ScriptedModel(asks(call("c1", "wipe_disk", device="sda")),
                          asks(call("c2", "read_file", path="a.txt")),
                          asks(call("c3", "read_file", path="a.txt")), answer("read"))
    agent = tool_agent(tools, model)
    gate = guard_agent(agent, POLICY)
    with pytest.raises(RunHalted):
        run(agent)
    with pytest.raises(RunHalted):  # the next run stops after its first step
        run(agent, "read")
    assert tools.names() == [] and "callwarden halted the run" in last_step(agent).observations
    gate.clear_halt()
    assert run(agent, "read") == "read" and tools.names() == ["read_file"]


def test_a_final_answer_in_the_halting_step_does_not_end_the_run_normally() -> None:
    tools = Tools()
    agent = code_agent(tools, ScriptedModel(code(
        'try:\n    wipe_disk(device="sda")\nexcept Exception:\n    pass\nfinal_answer("fine")')))
    guard_agent(agent, POLICY)
    with pytest.raises(RunHalted):
        run(agent)
    assert agent.interrupt_switch and tools.names() == []


def test_an_output_rule_that_halts_withholds_the_result_and_halts() -> None:
    policy = {"version": 1, "rules": [{"id": "leak", "on": "output", "if":
              "args.output.contains('secret_access_key')", "effect": "halt"}]}
    tools = Tools()
    agent = tool_agent(tools, ScriptedModel(asks(call("c1", "read_file", path="config.ini"))))
    gate = guard_agent(agent, policy)
    with pytest.raises(RunHalted):
        run(agent)
    assert SECRET not in (last_step(agent).observations or "") and gate.halted is not None


# -- failing closed -------------------------------------------------------------------------

def test_a_policy_that_raises_fails_closed() -> None:
    def broken(call: Any, ctx: Any) -> Any:
        raise RuntimeError("policy bug")

    tools = Tools()
    agent = tool_agent(tools, ScriptedModel(asks(call("c1", "read_file", path="a")),
                                            answer("ok")))
    guard_agent(agent, Guard(rules=[], policies=[broken]))
    run(agent)
    assert tools.names() == [] and "policy bug" in (agent.memory.steps[1].observations or "")


@pytest.mark.parametrize("kind", ["tool_calling", "code"])
def test_an_error_while_deciding_fails_closed(kind: str, monkeypatch) -> None:
    def explode(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("store down")

    tools = Tools()
    if kind == "tool_calling":
        agent: Any = tool_agent(tools, ScriptedModel(asks(call("c1", "read_file", path="a")),
                                                     answer("ok")))
    else:
        agent = code_agent(tools, ScriptedModel(code('read_file(path="a")'),
                                                code('final_answer("ok")')))
    gate = guard_agent(agent, POLICY)
    monkeypatch.setattr(gate.enforcer.guard, "check", explode)
    assert run(agent) == "ok"
    assert tools.names() == []
    assert "could not decide it (RuntimeError: store down)" in agent.model.seen[1]


def test_the_audit_log_names_the_rule_and_the_outcome(tmp_path) -> None:
    log = tmp_path / "audit.jsonl"
    policy = {**POLICY, "audit": {"sinks": [{"jsonl": str(log)}], "required": True}}
    tools = Tools()
    agent = tool_agent(tools, ScriptedModel(asks(call("c1", "search", query="q", limit=50)),
                                            asks(call("c2", "delete_file", path="x")),
                                            answer("ok")))
    gate = guard_agent(agent, policy)
    run(agent)
    gate.enforcer.guard.close()
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(e["type"], e["effect"], e["rule"], e.get("status"), e["framework"])
            for e in events] == [("decision", "modify", "cap-search", None, "smolagents"),
                                 ("outcome", "modify", "cap-search", "ok", "smolagents"),
                                 ("decision", "deny", "no-delete", None, "smolagents")]
    assert events[0]["args"] == {"query": "q", "limit": 50}


# -- wiring --------------------------------------------------------------------------------

def test_guard_tools_with_the_step_callback_works_without_guard_agent() -> None:
    tools = Tools()
    gate = ToolGate(POLICY)
    agent = CodeAgent(tools=guard_tools(tools.all(), gate), step_callbacks=[gate.step_callback()],
                      model=ScriptedModel(code('wipe_disk(device="sda")')), verbosity_level=-1)
    with pytest.raises(RunHalted):
        run(agent)
    assert tools.names() == []


def test_guard_agent_keeps_final_answer_and_guards_managed_agents() -> None:
    helper_tools, tools = Tools(), Tools()
    helper = tool_agent(helper_tools, ScriptedModel(), name="helper", description="helps")
    agent = tool_agent(tools, ScriptedModel(), managed_agents=[helper])
    gate = guard_agent(agent, POLICY)
    assert isinstance(agent.tools["final_answer"], FinalAnswerTool)
    assert all(isinstance(t, GuardedTool) and t.gate is gate
               for t in (*agent.tools.values(), *helper.tools.values())
               if t.name != "final_answer")
    guard_agent(agent, gate)  # guarding twice changes nothing
    assert agent.tools["read_file"].inner.name == "read_file"
    assert len(agent.step_callbacks._callbacks[ActionStep]) == 2  # monitor + callwarden


def test_a_remote_executor_and_serialization_are_refused() -> None:
    tools = Tools()
    guarded = guard_tools(tools.all(), POLICY)[0]
    with pytest.raises(NotImplementedError, match="remote executor"):
        guarded.to_dict()
    with pytest.raises(TypeError, match="smolagents agent"):
        guard_agent(object(), POLICY)


def test_a_direct_call_raises_tool_call_refused_with_the_decision() -> None:
    delete = guard_tools(Tools().all(), POLICY)[1]
    with pytest.raises(ToolCallRefused) as refused:
        delete("x")
    assert refused.value.decision is not None and refused.value.decision.rule == "no-delete"


# -- the README example ----------------------------------------------------------------------

def test_the_readme_example_runs_and_prints_what_it_says(tmp_path, monkeypatch,
                                                          capsys) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) == 1
    monkeypatch.chdir(tmp_path)
    # smolagents' @tool reads its function's source (inspect.getsource): let it find the block.
    name = str(README)
    monkeypatch.setitem(linecache.cache, name,
                        (len(blocks[0]), None, blocks[0].splitlines(True), name))
    exec(compile(blocks[0], name, "exec"), {"__name__": "__main__"})
    assert capsys.readouterr().out.splitlines() == [
        "Staging is deployed; production goes through CI.", "halted by no-wipes"]
