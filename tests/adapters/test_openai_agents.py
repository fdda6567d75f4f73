"""The OpenAI Agents SDK adapter, end to end: the real ``Runner`` with the SDK's own
``ScriptedModel``, real guardrails, real approvals and ``RunState`` round trips."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
from _openai_agents_support import (
    DENY_MESSAGE,
    ONE_TURN,
    POLICY,
    Recorder,
    audited_guard,
    calls,
    make_agent,
    outputs,
    scripted,
    sent_arguments,
)
from _readme import ReadmeSection
from _scenario import REQUEST_POLICY
from agents import (
    Agent,
    FunctionTool,
    RunConfig,
    Runner,
    RunState,
    ToolExecutionConfig,
    ToolInputGuardrailTripwireTriggered,
    ToolOutputGuardrailTripwireTriggered,
    WebSearchTool,
    function_tool,
)
from agents.tool_context import ToolContext

from callwarden import Effect, Guard
from callwarden.adapters.openai_agents import FRAMEWORK, ToolGate, guard_agent, guard_tools
from callwarden.approvals import Status

README = ReadmeSection("OpenAI Agents SDK")
MAIN_README = Path(__file__).parents[2] / "README.md"
TIMEOUT = 20  # a hang fails the test instead of blocking the suite


async def run(agent: Agent[Any], start: Any, **kwargs: Any) -> Any:
    return await asyncio.wait_for(Runner.run(agent, start, **kwargs), TIMEOUT)


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def sync_loop() -> Any:
    """The loop ``Runner.run_sync`` reuses (it keeps the thread's default loop open by design):
    owned and closed by the test, so no unclosed loop leaks into the next test."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield loop
    asyncio.set_event_loop(None)
    loop.close()


@pytest.fixture
def gate() -> ToolGate:
    return ToolGate(POLICY, reviewer="alice")


# -- the one-turn scenario: allowed, denied, rewritten ------------------------------------


async def test_allowed_call_runs_and_the_model_gets_its_output(recorder, gate) -> None:
    model = scripted(calls(*ONE_TURN))
    await run(gate.agent(make_agent(recorder.tools(), model)), "go")
    assert ("read_file", {"path": "notes.txt"}) in recorder.runs
    assert outputs(model)["call-0"] == "contents of notes.txt"


async def test_denied_call_never_runs_and_the_model_gets_the_policy_message(recorder,
                                                                         gate) -> None:
    model = scripted(calls(*ONE_TURN))
    await run(gate.agent(make_agent(recorder.tools(), model)), "go")
    assert "delete_file" not in recorder.names()
    assert outputs(model)["call-1"] == DENY_MESSAGE


async def test_rewritten_call_runs_with_the_rewritten_arguments(recorder, gate) -> None:
    model = scripted(calls(*ONE_TURN))
    await run(gate.agent(make_agent(recorder.tools(), model)), "go")
    assert ("search", {"query": "invoices", "limit": 5}) in recorder.runs
    assert outputs(model)["call-2"] == "5 results for invoices"


async def test_rewriting_leaves_the_models_own_call_unchanged(recorder, gate) -> None:
    model = scripted(calls(*ONE_TURN))
    await run(gate.agent(make_agent(recorder.tools(), model)), "go")
    assert json.loads(sent_arguments(model)["call-2"]) == {"query": "invoices", "limit": 50}


def test_run_sync_applies_the_policy_the_same_way(recorder, gate, sync_loop) -> None:
    model = scripted(calls(*ONE_TURN))
    result = Runner.run_sync(gate.agent(make_agent(recorder.tools(), model)), "go")
    assert result.final_output == "done"
    # One turn's tool calls run concurrently: their order is the SDK's business.
    assert sorted(recorder.runs, key=repr) == [("read_file", {"path": "notes.txt"}),
                                               ("search", {"query": "invoices", "limit": 5})]
    assert outputs(model)["call-1"] == DENY_MESSAGE


async def test_streamed_run_applies_the_policy_the_same_way(recorder, gate) -> None:
    model = scripted(calls(*ONE_TURN))
    result = Runner.run_streamed(gate.agent(make_agent(recorder.tools(), model)), "go")

    async def drain() -> None:
        async for _ in result.stream_events():
            pass

    await asyncio.wait_for(drain(), TIMEOUT)
    assert result.final_output == "done"
    assert recorder.names() == ["read_file", "search"]
    assert outputs(model)["call-1"] == DENY_MESSAGE


async def test_each_call_is_decided_once_and_its_outcome_recorded(recorder) -> None:
    guard, events = audited_guard()
    model = scripted(calls(*ONE_TURN))
    await run(guard_agent(make_agent(recorder.tools(), model), guard), "go")
    decided = [(e["tool"], e["effect"]) for e in events if e["type"] == "decision"]
    assert sorted(decided) == [("delete_file", "deny"), ("read_file", "allow"),
                               ("search", "modify")]
    assert sorted(e["status"] for e in events if e["type"] == "outcome") == ["ok", "ok"]


async def test_calls_carry_the_framework_agent_and_call_id(recorder) -> None:
    guard, events = audited_guard()
    model = scripted(calls(("read_file", {"path": "a"})))
    await run(guard_agent(make_agent(recorder.tools(), model, name="ops"), guard), "go")
    event = next(e for e in events if e["type"] == "decision")
    assert (event["framework"], event["agent"], event["call_id"]) == (FRAMEWORK, "ops", "call-0")


# -- ask: pause, approve or reject, resume ------------------------------------------------


async def test_ask_pauses_the_run_with_an_interruption(recorder, gate) -> None:
    model = scripted(calls(("deploy", {"env": "qa"})))
    result = await run(gate.agent(make_agent(recorder.tools(), model)), "go")
    assert [item.tool_name for item in result.interruptions] == ["deploy"]
    assert recorder.runs == []
    [request] = gate.enforcer.guard.approvals.list(status="pending")
    assert (request.tool, request.args) == ("deploy", {"env": "qa"})


async def test_the_other_calls_of_the_turn_run_while_one_waits(recorder, gate) -> None:
    model = scripted(calls(*ONE_TURN, ("deploy", {"env": "qa"})))
    result = await run(gate.agent(make_agent(recorder.tools(), model)), "go")
    assert len(result.interruptions) == 1
    assert recorder.names() == ["read_file", "search"]


async def test_approve_resumes_and_runs_the_call_exactly_once(recorder, gate) -> None:
    model = scripted(calls(("deploy", {"env": "qa"})))
    agent = gate.agent(make_agent(recorder.tools(), model))
    paused = await run(agent, "go")
    state = paused.to_state()
    for item in paused.interruptions:
        state.approve(item)
    result = await run(agent, state)
    assert result.final_output == "done"
    assert recorder.runs == [("deploy", {"env": "qa"})]
    assert outputs(model)["call-0"] == "deployed to qa"


async def test_the_sdk_approval_is_recorded_on_callwardens_request(recorder, gate) -> None:
    model = scripted(calls(("deploy", {"env": "qa"})))
    agent = gate.agent(make_agent(recorder.tools(), model))
    paused = await run(agent, "go")
    state = paused.to_state()
    state.approve(paused.interruptions[0])
    await run(agent, state)
    [request] = gate.enforcer.guard.approvals.list()
    assert (request.status, request.resolved_by) == (Status.CONSUMED, "alice")


async def test_a_persons_deny_stands_when_the_app_approves_in_the_sdk(recorder, gate) -> None:
    """Denied with `callwarden approvals deny` while paused, the call stays denied when the
    app then calls state.approve(item): the person's resolution stands."""
    model = scripted(calls(("deploy", {"env": "qa"})))
    agent = gate.agent(make_agent(recorder.tools(), model))
    paused = await run(agent, "go")
    approvals = gate.enforcer.guard.approvals
    [request] = approvals.list(status="pending")
    approvals.deny(request.id, by="bob", reason="not during the freeze")
    state = paused.to_state()
    state.approve(paused.interruptions[0])
    await run(agent, state)
    assert recorder.runs == []
    told = outputs(model)["call-0"]
    assert "bob" in told and "not during the freeze" in told
    assert [(r.id, r.status) for r in approvals.list()] == [(request.id, Status.DENIED)]


async def test_reject_sends_the_model_callwardens_message_with_the_reason(recorder,
                                                                          gate) -> None:
    model = scripted(calls(("deploy", {"env": "prod"})))
    agent = gate.agent(make_agent(recorder.tools(), model))
    paused = await run(agent, "go")
    state = paused.to_state()
    gate.reject(state, paused.interruptions[0], reason="not during the freeze", by="bob")
    await run(agent, state)
    assert recorder.runs == []
    told = outputs(model)["call-0"]
    assert "bob" in told and "not during the freeze" in told and "not approved" in told
    [request] = gate.enforcer.guard.approvals.list()
    assert (request.status, request.resolved_by) == (Status.DENIED, "bob")


async def test_async_reject_records_the_refusal_too(recorder, gate) -> None:
    model = scripted(calls(("deploy", {"env": "prod"})))
    agent = gate.agent(make_agent(recorder.tools(), model))
    paused = await run(agent, "go")
    state = paused.to_state()
    await gate.areject(state, paused.interruptions[0], reason="no")
    await run(agent, state)
    assert recorder.runs == [] and "denied by alice: no" in outputs(model)["call-0"]


async def test_plain_state_reject_with_the_formatter_sends_callwardens_message(
        recorder, gate) -> None:
    model = scripted(calls(("deploy", {"env": "prod"})))
    agent = gate.agent(make_agent(recorder.tools(), model))
    config = RunConfig(tool_error_formatter=gate.tool_error_formatter)
    paused = await run(agent, "go", run_config=config)
    state = paused.to_state()
    state.reject(paused.interruptions[0])
    await run(agent, state, run_config=config)
    assert recorder.runs == []
    assert "was not approved: request " in outputs(model)["call-0"]
    assert gate.enforcer.guard.approvals.list()[0].status is Status.DENIED


async def test_plain_state_reject_without_the_formatter_still_never_runs_the_tool(
        recorder, gate) -> None:
    model = scripted(calls(("deploy", {"env": "prod"})))
    agent = gate.agent(make_agent(recorder.tools(), model))
    paused = await run(agent, "go")
    state = paused.to_state()
    state.reject(paused.interruptions[0])
    await run(agent, state)
    assert recorder.runs == [] and outputs(model)["call-0"] == "Tool execution was not approved."


async def test_an_approval_survives_a_restart_through_run_state_json(recorder,
                                                                     tmp_path) -> None:
    policy = {**POLICY, "state": f"sqlite:///{tmp_path / 'state.db'}"}
    model = scripted(calls(("deploy", {"env": "qa"})))
    first = guard_agent(make_agent(recorder.tools(), model), policy, reviewer="alice")
    saved = json.dumps((await run(first, "go")).to_state().to_json())

    # A new process: a new guard on the same store, a new agent, the state from JSON.
    again = guard_agent(make_agent(recorder.tools(), model), Guard.from_dict(policy),
                        reviewer="alice")
    state = await RunState.from_json(again, json.loads(saved))
    for item in state.get_interruptions():
        state.approve(item)
    result = await run(again, state)
    assert result.final_output == "done" and recorder.runs == [("deploy", {"env": "qa"})]
    assert Guard.from_dict(policy).approvals.list()[0].status is Status.CONSUMED


async def test_a_rejection_survives_a_restart_through_run_state_json(recorder,
                                                                     tmp_path) -> None:
    policy = {**POLICY, "state": f"sqlite:///{tmp_path / 'state.db'}"}
    model = scripted(calls(("deploy", {"env": "prod"})))
    first = guard_agent(make_agent(recorder.tools(), model), policy)
    saved = (await run(first, "go")).to_state().to_string()

    gate = ToolGate(policy)
    again = gate.agent(make_agent(recorder.tools(), model))
    state = await RunState.from_string(again, saved)
    gate.reject(state, state.get_interruptions()[0], reason="freeze", by="carol")
    await run(again, state)
    assert recorder.runs == [] and "denied by carol: freeze" in outputs(model)["call-0"]


async def test_an_approver_settles_the_ask_without_pausing(recorder) -> None:
    gate = ToolGate(POLICY, approver=lambda request: True)
    model = scripted(calls(("deploy", {"env": "qa"})))
    result = await run(gate.agent(make_agent(recorder.tools(), model)), "go")
    assert result.interruptions == [] and recorder.runs == [("deploy", {"env": "qa"})]


async def test_an_sdk_approval_the_policy_refuses_fails_closed(recorder) -> None:
    # The reviewer's name is the agent's own: callwarden refuses self-approval.
    gate = ToolGate(POLICY, reviewer="ops")
    model = scripted(calls(("deploy", {"env": "qa"})))
    agent = gate.agent(make_agent(recorder.tools(), model, name="ops"))
    paused = await run(agent, "go")
    state = paused.to_state()
    state.approve(paused.interruptions[0])
    await run(agent, state)
    assert recorder.runs == []
    assert "cannot approve it" in outputs(model)["call-0"]


async def test_always_approve_still_asks_callwarden_for_each_call(recorder, gate) -> None:
    model = scripted(calls(("deploy", {"env": "qa"})),
                     calls(("deploy", {"env": "staging"}), prefix="next"))
    agent = gate.agent(make_agent(recorder.tools(), model))
    paused = await run(agent, "go")
    state = paused.to_state()
    state.approve(paused.interruptions[0], always_approve=True)
    await run(agent, state)
    assert recorder.runs == [("deploy", {"env": "qa"}), ("deploy", {"env": "staging"})]
    assert [r.status for r in gate.enforcer.guard.approvals.list()] == [Status.CONSUMED] * 2


def _sync_needs_approval(ctx: Any, params: dict[str, Any], call_id: str) -> bool:
    return True


async def _async_needs_approval(ctx: Any, params: dict[str, Any], call_id: str) -> bool:
    return True


@pytest.mark.parametrize("own", [True, _sync_needs_approval, _async_needs_approval],
                         ids=["bool", "sync", "async"])
async def test_the_tools_own_approval_still_applies_when_the_policy_allows(recorder, gate,
                                                                           own) -> None:
    tools = [dataclasses.replace(t, needs_approval=own) if t.name == "read_file" else t
             for t in recorder.tools()]
    model = scripted(calls(("read_file", {"path": "a"}), ("delete_file", {"path": "b"})))
    result = await run(gate.agent(make_agent(tools, model)), "go")
    # The policy denies delete_file outright: nobody is asked about it.
    assert [item.tool_name for item in result.interruptions] == ["read_file"]


async def test_pre_approval_guardrails_still_pause_and_then_run_once(recorder, gate) -> None:
    config = RunConfig(tool_execution=ToolExecutionConfig(pre_approval_tool_input_guardrails=True))
    model = scripted(calls(("deploy", {"env": "qa"})))
    agent = gate.agent(make_agent(recorder.tools(), model))
    paused = await run(agent, "go", run_config=config)
    assert [item.tool_name for item in paused.interruptions] == ["deploy"]
    state = paused.to_state()
    state.approve(paused.interruptions[0])
    await run(agent, state, run_config=config)
    assert recorder.runs == [("deploy", {"env": "qa"})]


# -- halt -----------------------------------------------------------------------------------


async def test_halt_stops_the_run_with_a_tripwire(recorder, gate) -> None:
    model = scripted(calls(("wipe_database", {"name": "prod"})))
    with pytest.raises(ToolInputGuardrailTripwireTriggered) as raised:
        await run(gate.agent(make_agent(recorder.tools(), model)), "go")
    decision = raised.value.output.output_info
    assert (decision.effect, decision.message) == (Effect.HALT,
                                                   "Wiping the database ends the run.")
    assert recorder.runs == [] and len(model.calls) == 1


async def test_halt_in_a_turn_with_other_calls_stops_before_the_model_is_asked_again(
        recorder, gate) -> None:
    model = scripted(calls(*ONE_TURN, ("wipe_database", {"name": "prod"})))
    with pytest.raises(ToolInputGuardrailTripwireTriggered):
        await run(gate.agent(make_agent(recorder.tools(), model)), "go")
    assert "wipe_database" not in recorder.names() and len(model.calls) == 1


def test_halt_stops_a_sync_run_too(recorder, gate, sync_loop) -> None:
    model = scripted(calls(("wipe_database", {"name": "prod"})))
    with pytest.raises(ToolInputGuardrailTripwireTriggered):
        Runner.run_sync(gate.agent(make_agent(recorder.tools(), model)), "go")
    assert recorder.runs == []


# -- output rules ------------------------------------------------------------------------------


async def test_output_rules_replace_what_the_model_sees(recorder, gate) -> None:
    model = scripted(calls(("crm_lookup", {"customer": "ada"})))
    await run(gate.agent(make_agent(recorder.tools(), model)), "go")
    assert recorder.names() == ["crm_lookup"]
    assert outputs(model)["call-0"] == \
        "The record holds card data; ask the user for what you need."


async def test_the_outcome_names_the_output_rule_that_replaced_the_output(recorder) -> None:
    guard, events = audited_guard()
    model = scripted(calls(("crm_lookup", {"customer": "ada"})))
    await run(guard_agent(make_agent(recorder.tools(), model), guard), "go")
    [outcome] = [e for e in events if e["type"] == "outcome"]
    assert (outcome["status"], outcome["output_rule"]) == ("output_blocked", "card-data")


async def test_a_halting_output_rule_stops_the_run(recorder) -> None:
    policy = {"version": 1, "rules": [
        {"id": "breach", "on": "output", "match": {"tool": "crm_lookup"},
         "if": "args.output.contains('4111')", "effect": "halt"}]}
    model = scripted(calls(("crm_lookup", {"customer": "ada"})))
    with pytest.raises(ToolOutputGuardrailTripwireTriggered):
        await run(guard_agent(make_agent(recorder.tools(), model), policy), "go")
    assert len(model.calls) == 1


# -- failing closed ------------------------------------------------------------------------------


def _raising_policy(call: Any, ctx: Any) -> Any:
    raise RuntimeError("policy backend down")


async def test_a_policy_error_fails_closed(recorder) -> None:
    guard = Guard(policies=[_raising_policy])
    model = scripted(calls(("read_file", {"path": "a"})))
    await run(guard_agent(make_agent(recorder.tools(), model), guard), "go")
    assert recorder.runs == []
    assert "raised RuntimeError: policy backend down" in outputs(model)["call-0"]


async def test_malformed_arguments_are_refused_without_running_the_tool(recorder) -> None:
    gate = ToolGate({"version": 1, "default": "allow"})
    model = scripted(calls(("read_file", '{"path": ')))
    agent = gate.agent(make_agent(recorder.tools(), model))
    paused = await run(agent, "go")
    # The SDK pauses calls whose arguments it cannot parse; approving them is not enough.
    state = paused.to_state()
    state.approve(paused.interruptions[0])
    await run(agent, state)
    assert recorder.runs == [] and "not valid JSON" in outputs(model)["call-0"]


async def test_the_invoker_alone_refuses_a_denied_call(recorder, gate) -> None:
    [tool] = gate.tools([t for t in recorder.tools() if t.name == "delete_file"])
    ctx = ToolContext(context=None, tool_name="delete_file", tool_call_id="x1",
                      tool_arguments='{"path": "a"}')
    told = await tool.on_invoke_tool(ctx, '{"path": "a"}')
    assert told == DENY_MESSAGE and recorder.runs == []


async def test_the_invoker_alone_rewrites_arguments(recorder, gate) -> None:
    [tool] = gate.tools([t for t in recorder.tools() if t.name == "search"])
    ctx = ToolContext(context=None, tool_name="search", tool_call_id="x2",
                      tool_arguments='{"query": "q", "limit": 99}')
    assert await tool.on_invoke_tool(ctx, '{"query": "q", "limit": 99}') == "5 results for q"


# -- guarding ------------------------------------------------------------------------------------


def test_guarding_returns_copies_and_leaves_the_originals_alone(recorder) -> None:
    originals = recorder.tools()
    guarded = guard_tools(originals, POLICY)
    assert all(isinstance(t, FunctionTool) for t in guarded)
    assert all(g is not o and o.tool_input_guardrails is None and o.needs_approval is False
               for g, o in zip(guarded, originals, strict=True))


def test_guarding_twice_with_one_gate_does_not_stack(recorder, gate) -> None:
    once = gate.tools(recorder.tools())
    assert gate.tools(once) == once


def test_a_hosted_tool_cannot_be_guarded_and_says_so() -> None:
    with pytest.raises(TypeError, match="WebSearchTool"):
        guard_tools([WebSearchTool()], POLICY)


def test_a_gate_takes_no_extra_options(gate) -> None:
    with pytest.raises(TypeError, match="ToolGate"):
        guard_tools([], gate, reviewer="x")


async def test_handoff_agents_are_guarded_too(recorder, gate) -> None:
    model = scripted(calls(("delete_file", {"path": "a"})))
    helper = make_agent(recorder.tools(), model, name="helper")
    lead = gate.agent(Agent(name="lead", model=model, handoffs=[helper]))
    guarded_helper = lead.handoffs[0]
    assert isinstance(guarded_helper, Agent) and guarded_helper is not helper
    await run(guarded_helper, "go")
    assert recorder.runs == [] and outputs(model)["call-0"] == DENY_MESSAGE


async def test_guard_tools_accepts_a_policy_file(recorder, tmp_path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("version: 1\ndefault: allow\nrules:\n  - id: d\n    match: {tool: read_file}\n"
                    "    effect: deny\n    message: No reading.\n")
    model = scripted(calls(("read_file", {"path": "a"})))
    await run(make_agent(guard_tools(recorder.tools(), str(path)), model), "go")
    assert recorder.runs == [] and outputs(model)["call-0"] == "No reading."


async def test_the_users_latest_message_is_the_request_the_policy_sees() -> None:
    """A recipient the user named in the run's input is allowed; a stranger is refused."""
    policy = REQUEST_POLICY
    sent: list[str] = []

    @function_tool
    def send_email(to: str) -> str:
        """Sends an e-mail."""
        sent.append(to)
        return f"sent to {to}"

    model = scripted(calls(("send_email", {"to": "carol@example.org"}),
                           ("send_email", {"to": "eve@attacker.example"})))
    await run(guard_agent(make_agent([send_email], model), policy),
              "Mail Carol@Example.org the notes")
    assert sent == ["carol@example.org"]
    assert outputs(model) == {"call-0": "sent to carol@example.org",
                              "call-1": "Mail only people the user named."}


# -- the README section ----------------------------------------------------------------------


def test_readme_section_python_block_runs(tmp_path, monkeypatch, capsys) -> None:
    # As the README test runs it: in a directory holding the README's top policy.yaml.
    [block] = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    [policy] = re.findall(r"```yaml policy.yaml\n(.*?)```", MAIN_README.read_text(), re.S)
    (tmp_path / "policy.yaml").write_text(policy)
    monkeypatch.chdir(tmp_path)
    exec(compile(block, str(README), "exec"), {})
    assert capsys.readouterr().out.strip() == \
        "Deploy to staging; production deploys go through CI."
