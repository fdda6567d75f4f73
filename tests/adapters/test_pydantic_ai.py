"""Pydantic AI: a real Agent with a scripted FunctionModel, its tools behind CallwardenCapability."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from typing import Any, Literal

import pytest
from _pydantic_ai_support import (
    Script,
    Tools,
    agent,
    call,
    guarded,
)
from _readme import ReadmeSection
from _scenario import DENY_MESSAGE, POLICY, REQUEST_POLICY, SECRET, crash_after_running
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.capabilities import AbstractCapability, HandleDeferredToolCalls
from pydantic_ai.exceptions import AgentRunError, ModelRetry

from callwarden import Approve, Deny, Guard, RunHalted
from callwarden.adapters.pydantic_ai import AgentRunHalted, CallwardenCapability
from callwarden.approvals import Status

README = ReadmeSection("Pydantic AI")
TIMEOUT = 30  # a hang fails the test instead of blocking the suite

ONE_TURN = [call("c1", "read_file", path="notes.txt"),
            call("c2", "delete_file", path="notes.txt"),
            call("c3", "search", query="callwarden", limit=50),
            call("c4", "deploy", env="qa")]
HALT = call("c5", "wipe_disk", device="sda")


async def run(tools: Tools, capability: CallwardenCapability[Any], script: Script,
              prompt: str = "tidy up", **options: Any) -> Any:
    return await asyncio.wait_for(agent(tools, capability, script).run(prompt, **options),
                                  TIMEOUT)


async def run_one_turn(tools: Tools, **options: Any) -> Script:
    """The issue's scenario: one model turn asks for every effect but halt."""
    script = Script(ONE_TURN, "All done.")
    result = await run(tools, guarded(**options), script)
    assert result.output == "All done."
    return script


def in_own_loop(fn: Any) -> Any:
    """Runs a ``run_sync`` caller on a loop this test closes (Pydantic AI keeps the thread's
    loop open for the next ``run_sync``, which a test run reports as a leak)."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return fn()
    finally:
        asyncio.set_event_loop(None)
        loop.close()


def approved_by_alice(request: Any) -> Approve:
    return Approve(by="alice")


# -- the one-turn scenario --------------------------------------------------------------------

async def test_allowed_call_runs_and_the_model_gets_its_result() -> None:
    tools = Tools()
    seen = (await run_one_turn(tools, approver=approved_by_alice)).results()
    assert ("read_file", {"path": "notes.txt"}) in tools.ran
    assert (seen["c1"].content, seen["c1"].outcome) == ("contents of notes.txt", "success")


async def test_denied_tool_never_runs_and_the_model_gets_a_failed_return_with_the_message() -> None:
    tools = Tools()
    seen = (await run_one_turn(tools, approver=approved_by_alice)).results()
    assert "delete_file" not in tools.names()
    assert (seen["c2"].content, seen["c2"].outcome) == (DENY_MESSAGE, "failed")


async def test_repeated_denials_do_not_exhaust_the_run() -> None:
    """ToolFailed spends no retry budget: a model that keeps asking is refused each time."""
    tools = Tools()
    script = Script(*([call(f"c{i}", "delete_file", path="x")] for i in range(4)), "gave up")
    result = await run(tools, guarded(), script)
    assert result.output == "gave up" and tools.names() == []


async def test_rewritten_call_runs_with_the_rewritten_args() -> None:
    tools = Tools()
    seen = (await run_one_turn(tools, approver=approved_by_alice)).results()
    assert ("search", {"query": "callwarden", "limit": 5}) in tools.ran
    assert seen["c3"].content == "5 results for callwarden"


async def test_halting_call_ends_the_run_with_agent_run_halted() -> None:
    tools = Tools()
    script = Script([*ONE_TURN[:3], HALT], "never reached")
    with pytest.raises(AgentRunHalted) as raised:
        await run(tools, guarded(), script)
    assert isinstance(raised.value, RunHalted) and isinstance(raised.value, AgentRunError)
    assert raised.value.decision.rule == "stop-on-wipe"
    assert "Wiping disks ends the session." in str(raised.value)
    assert "wipe_disk" not in tools.names()
    # The calls of the same step were decided on their own and finished; no further turn.
    assert sorted(tools.names()) == ["read_file", "search"] and len(script.seen) == 1


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_approver_approval_runs_the_call_once(kind: str) -> None:
    asked: list[str] = []

    def approve(request: Any) -> Approve:
        asked.append(request.tool)
        return Approve(by="alice")

    async def aapprove(request: Any) -> Approve:
        return approve(request)

    tools = Tools()
    seen = (await run_one_turn(tools, approver=approve if kind == "sync" else aapprove)).results()
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
    seen = (await run_one_turn(tools, approver=reject if kind == "sync" else areject)).results()
    assert "deploy" not in tools.names()
    assert seen["c4"].outcome == "failed"
    assert "alice denied it: freeze until Monday" in str(seen["c4"].content)


def test_run_sync_decides_sync_tools_too() -> None:
    tools = Tools()
    script = Script([call("c1", "delete_file", path="a"), call("c2", "deploy", env="qa")])
    capability = guarded(approver=approved_by_alice)
    result = in_own_loop(lambda: agent(tools, capability, script).run_sync("go"))
    assert result.output == "done" and tools.names() == ["deploy"]
    assert script.results()["c1"].content == DENY_MESSAGE


async def test_tools_registered_on_the_agent_are_decided_too() -> None:
    ran: list[str] = []
    script = Script([call("c1", "delete_file", path="a")], "ok")
    bot = Agent(script.model, capabilities=[guarded()])

    @bot.tool_plain
    def delete_file(path: str) -> str:
        ran.append(path)
        return "deleted"

    await asyncio.wait_for(bot.run("go"), TIMEOUT)
    assert ran == [] and script.results()["c1"].content == DENY_MESSAGE


async def test_the_users_latest_message_is_the_request_the_policy_sees() -> None:
    """The recipient named in the latest prompt is allowed; one named only in an earlier turn
    of the conversation is a stranger now."""
    policy = REQUEST_POLICY
    sent: list[str] = []
    script = Script("Noted.", [call("c1", "send_email", to="carol@example.org"),
                               call("c2", "send_email", to="eve@attacker.example")], "Done.")
    bot = Agent(script.model, capabilities=[CallwardenCapability(policy)])

    @bot.tool_plain
    def send_email(to: str) -> str:
        sent.append(to)
        return f"sent to {to}"

    first = await asyncio.wait_for(bot.run("Mail eve@attacker.example the notes"), TIMEOUT)
    await asyncio.wait_for(bot.run("No, mail Carol@Example.org instead",
                                   message_history=first.all_messages()), TIMEOUT)
    seen = script.results()
    assert sent == ["carol@example.org"]
    assert (seen["c1"].content, seen["c1"].outcome) == ("sent to carol@example.org", "success")
    assert (seen["c2"].content, seen["c2"].outcome) == ("Mail only people the user named.",
                                                        "failed")


# -- ask without an approver: Pydantic AI's deferred tool calls ---------------------------------

async def deferred(tools: Tools, capability: CallwardenCapability[Any]) -> tuple[Any, Script]:
    """Runs the one-turn scenario until it pauses on the deploy call."""
    script = Script(ONE_TURN, "All done.")
    result = await run(tools, capability, script)
    return result, script


async def test_an_ask_pauses_the_run_with_deferred_tool_requests() -> None:
    tools, capability = Tools(), guarded()
    result, _ = await deferred(tools, capability)
    requests = result.output
    assert isinstance(requests, DeferredToolRequests)
    assert [c.tool_call_id for c in requests.approvals] == ["c4"]
    assert requests.metadata["c4"] == {"request_id": capability.pending[0], "rule": "deploy-asks",
                                       "message": "Deploys need a human."}
    assert "deploy" not in tools.names()
    assert sorted(tools.names()) == ["read_file", "search"]


async def test_approving_the_deferred_call_runs_it_exactly_once() -> None:
    tools, capability = Tools(), guarded()
    result, script = await deferred(tools, capability)
    request_id = capability.pending[0]
    answers = result.output.build_results(approvals={"c4": True})
    resumed = await run(tools, capability, script, None, message_history=result.all_messages(),
                        deferred_tool_results=answers)
    assert resumed.output == "All done." and tools.ran.count(("deploy", {"env": "qa"})) == 1
    assert script.results()["c4"].content == "deployed to qa"
    record = capability.enforcer.guard.approvals.get(request_id)
    assert (record.status, record.resolved_by) == (Status.CONSUMED, "pydantic-ai-reviewer")
    assert capability.pending == []


async def test_a_run_resumed_after_a_crash_does_not_run_the_approved_call_again() -> None:
    tools, capability = Tools(), guarded()
    result, script = await deferred(tools, capability)
    answers = result.output.build_results(approvals={"c4": True})
    history = result.all_messages()
    await run(tools, capability, script, None, message_history=history,
              deferred_tool_results=answers)
    crash_after_running(capability.enforcer.guard)
    # The app resumes from what it saved before the crash, with the same approval.
    again = await run(tools, capability, Script(ONE_TURN, "All done."), None,
                      message_history=history, deferred_tool_results=answers)
    assert tools.ran.count(("deploy", {"env": "qa"})) == 1
    assert isinstance(again.output, DeferredToolRequests)  # deferred to a person again
    request = capability.enforcer.guard.approvals.get(again.output.metadata["c4"]["request_id"])
    assert request.in_doubt and request.status is Status.PENDING


async def test_rejecting_the_deferred_call_gives_the_model_the_reason_and_records_it() -> None:
    tools, capability = Tools(), guarded(reviewer="alice")
    result, script = await deferred(tools, capability)
    request_id = capability.pending[0]
    answers = DeferredToolResults(approvals={"c4": ToolDenied("freeze until Monday")})
    await run(tools, capability, script, None, message_history=result.all_messages(),
              deferred_tool_results=answers)
    assert "deploy" not in tools.names()
    assert (script.results()["c4"].content, script.results()["c4"].outcome) == (
        "freeze until Monday", "denied")
    record = capability.enforcer.guard.approvals.get(request_id)
    assert (record.status, record.resolved_by, record.comment) == (
        Status.DENIED, "alice", "freeze until Monday")
    assert capability.pending == []


async def test_an_approved_edit_is_decided_again_and_runs_with_the_edited_args() -> None:
    tools, capability = Tools(), guarded()
    result, script = await deferred(tools, capability)
    answers = DeferredToolResults(approvals={"c4": ToolApproved(override_args={"env": "staging"})})
    await run(tools, capability, script, None, message_history=result.all_messages(),
              deferred_tool_results=answers)
    assert [r for r in tools.ran if r[0] == "deploy"] == [("deploy", {"env": "staging"})]


async def test_an_approval_cannot_smuggle_an_edit_past_a_deny_rule() -> None:
    policy = {**POLICY, "rules": [*POLICY["rules"], {
        "id": "no-prod", "match": {"tool": "deploy"}, "if": "args.env == 'prod'",
        "effect": "deny", "message": "Never deploy to prod from an agent."}]}
    tools, capability = Tools(), guarded(policy)
    result, script = await deferred(tools, capability)
    answers = DeferredToolResults(approvals={"c4": ToolApproved(override_args={"env": "prod"})})
    await run(tools, capability, script, None, message_history=result.all_messages(),
              deferred_tool_results=answers)
    assert "deploy" not in tools.names()
    assert "Never deploy to prod" in str(script.results()["c4"].content)


async def test_a_handle_deferred_tool_calls_capability_answers_inline() -> None:
    answered: list[str] = []

    def handle(ctx: Any, requests: DeferredToolRequests) -> DeferredToolResults:
        answered.extend(c.tool_call_id for c in requests.approvals)
        return requests.build_results(approve_all=True)

    tools, capability = Tools(), guarded()
    script = Script([call("c1", "deploy", env="qa")], "ok")
    bot = Agent(script.model, toolsets=[tools.toolset()],
                capabilities=[HandleDeferredToolCalls(handler=handle), capability])
    result = await asyncio.wait_for(bot.run("go"), TIMEOUT)
    assert result.output == "ok" and answered == ["c1"]
    assert tools.ran == [("deploy", {"env": "qa"})] and capability.pending == []


async def test_an_approval_refused_by_the_policy_approvers_list_does_not_run() -> None:
    policy = {**POLICY, "approvals": {"approvers": ["alice"]}}
    tools, capability = Tools(), guarded(policy)  # the default reviewer is not alice
    result, script = await deferred(tools, capability)
    await run(tools, capability, script, None, message_history=result.all_messages(),
              deferred_tool_results=result.output.build_results(approve_all=True))
    assert "deploy" not in tools.names()
    assert "was not approved" in str(script.results()["c4"].content)


async def test_without_defer_the_model_is_told_the_pending_request() -> None:
    tools, capability = Tools(), guarded(defer=False)
    script = Script([call("c1", "deploy", env="qa")], "waiting",
                    [call("c2", "deploy", env="qa")], "deployed")
    first = await run(tools, capability, script, "deploy")
    request_id = capability.pending[0]
    assert first.output == "waiting" and tools.names() == []
    assert f"Approval request {request_id} is pending" in str(script.results()["c1"].content)
    capability.enforcer.guard.approvals.approve(request_id, by="alice")  # = the CLI
    await run(tools, capability, script, "it is approved", message_history=first.all_messages())
    assert tools.ran == [("deploy", {"env": "qa"})]


async def test_wait_lets_an_answer_given_elsewhere_settle_the_call() -> None:
    tools, capability = Tools(), guarded(wait=TIMEOUT)
    approvals = capability.enforcer.guard.approvals

    async def reviewer() -> None:  # stands in for `callwarden approvals approve ID` elsewhere
        while not approvals.list("pending"):
            await asyncio.sleep(0.01)
        await approvals.aapprove(approvals.list("pending")[0].id, by="alice")

    script = Script([call("c1", "deploy", env="qa")], "ok")
    await asyncio.wait_for(asyncio.gather(run(tools, capability, script), reviewer()), TIMEOUT)
    assert tools.ran == [("deploy", {"env": "qa"})]


# -- halt --------------------------------------------------------------------------------------

async def test_a_halted_capability_refuses_later_runs_until_the_halt_is_cleared() -> None:
    tools, capability = Tools(), guarded()
    with pytest.raises(AgentRunHalted):
        await run(tools, capability, Script([HALT]))
    script = Script([call("c2", "read_file", path="a.txt")], "ok")
    with pytest.raises(AgentRunHalted):
        await run(tools, capability, script)
    assert tools.names() == [] and len(script.seen) == 1  # refused, and no further turn
    capability.clear_halt()
    await run(tools, capability, Script([call("c3", "read_file", path="a.txt")], "ok"))
    assert tools.names() == ["read_file"]


async def test_a_halt_in_one_run_does_not_end_a_concurrent_run_that_made_no_call() -> None:
    tools, capability = Tools(), guarded()
    quiet = agent(tools, capability, Script("just text"))
    results = await asyncio.wait_for(asyncio.gather(
        run(tools, capability, Script([HALT])), quiet.run("hi"), return_exceptions=True), TIMEOUT)
    assert isinstance(results[0], AgentRunHalted) and results[1].output == "just text"


async def test_a_halt_ends_an_iterated_run_too() -> None:
    tools, capability = Tools(), guarded()
    nodes = []

    async def drive() -> None:
        async with agent(tools, capability, Script([HALT], "never")).iter("go") as running:
            async for node in running:
                nodes.append(type(node).__name__)

    with pytest.raises(AgentRunHalted):
        await asyncio.wait_for(drive(), TIMEOUT)
    assert nodes[-1] == "CallToolsNode" and tools.names() == []


def test_a_halt_ends_run_sync_without_hanging() -> None:
    tools, capability = Tools(), guarded()
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            in_own_loop(lambda: agent(tools, capability, Script([HALT])).run_sync("go"))
            outcome.append(None)
        except BaseException as e:
            outcome.append(e)

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(TIMEOUT)
    assert not worker.is_alive() and isinstance(outcome[0], AgentRunHalted)


# -- failing closed ---------------------------------------------------------------------------

async def test_a_policy_that_raises_fails_closed() -> None:
    def broken(call: Any, ctx: Any) -> Any:
        raise RuntimeError("policy bug")

    tools = Tools()
    script = Script([call("c1", "read_file", path="a.txt")], "ok")
    await run(tools, guarded(Guard(rules=[], policies=[broken])), script)
    assert tools.names() == [] and script.results()["c1"].outcome == "failed"


async def test_an_error_while_deciding_fails_closed(monkeypatch) -> None:
    async def explode(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("store down")

    tools, capability = Tools(), guarded()
    monkeypatch.setattr(capability.enforcer.guard, "acheck", explode)
    script = Script([call("c1", "read_file", path="a.txt")], "ok")
    await run(tools, capability, script)
    assert tools.names() == []
    assert "could not decide it (RuntimeError: store down)" in str(script.results()["c1"].content)


async def test_a_rewrite_the_tool_schema_rejects_is_refused_not_run() -> None:
    ran: list[int] = []
    script = Script([call("c1", "search", query="q", limit=50)], "ok")
    bot = Agent(script.model, capabilities=[guarded()])

    @bot.tool_plain
    def search(query: str, limit: Literal[50, 100]) -> str:
        ran.append(limit)
        return "results"

    await asyncio.wait_for(bot.run("go"), TIMEOUT)
    assert ran == []
    assert "only with rewritten arguments" in str(script.results()["c1"].content)


class Meddler(AbstractCapability[Any]):
    """Another capability: rewrites search's limit before the tool runs, keeps what it sees."""

    def __init__(self) -> None:
        self.saw: list[Any] = []

    async def before_tool_execute(self, ctx: Any, *, call: Any, tool_def: Any,
                                  args: dict[str, Any]) -> dict[str, Any]:
        return {**args, "limit": 500} if call.tool_name == "search" else args

    async def after_tool_execute(self, ctx: Any, *, call: Any, tool_def: Any,
                                 args: dict[str, Any], result: Any) -> Any:
        self.saw.append(result)
        return result


@pytest.mark.parametrize("order", ["meddler first", "callwarden first"])
async def test_the_policy_decides_after_other_capabilities_and_screens_before_them(
        order: str) -> None:
    tools, meddler = Tools(), Meddler()
    script = Script([call("c1", "search", query="q", limit=3),
                     call("c2", "read_file", path="config.ini")], "ok")
    capabilities = [meddler, guarded()] if order == "meddler first" else [guarded(), meddler]
    bot = Agent(script.model, toolsets=[tools.toolset()], capabilities=capabilities)
    await asyncio.wait_for(bot.run("go"), TIMEOUT)
    assert ("search", {"query": "q", "limit": 5}) in tools.ran
    assert not any("9dKq3" in str(seen) for seen in meddler.saw) and len(meddler.saw) == 2


# -- output rules and the audit ----------------------------------------------------------------

async def test_output_rules_redact_the_result_before_the_model_sees_it() -> None:
    script = Script([call("c1", "read_file", path="config.ini")], "ok")
    await run(Tools(), guarded(), script)
    content = str(script.results()["c1"].content)
    assert "9dKq3" not in content and "REDACTED" in content


async def test_an_output_halt_withholds_the_result_and_ends_the_run() -> None:
    policy = {"version": 1, "rules": [{"id": "leak", "on": "output", "if":
              "args.output.contains('secret_access_key')", "effect": "halt"}]}
    tools, capability = Tools(), guarded(policy)
    bot = agent(tools, capability, Script([call("c1", "read_file", path="config.ini")]))
    with pytest.raises(AgentRunHalted) as raised:
        await asyncio.wait_for(bot.run("go"), TIMEOUT)
    assert SECRET not in str(raised.value) and capability.halted is not None
    assert capability.halted.rule == "leak"


async def test_the_audit_log_names_the_rules_and_the_outcomes(tmp_path) -> None:
    log = tmp_path / "audit.jsonl"
    policy = {**POLICY, "audit": {"sinks": [{"jsonl": str(log)}], "required": True}}
    capability = guarded(policy)
    script = Script([call("c1", "search", query="q", limit=50)],
                    [call("c2", "read_file", path="config.ini")], "ok")
    await run(Tools(), capability, script)
    capability.enforcer.guard.close()
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(e["type"], e["effect"], e["call_id"], e.get("rule"), e["framework"]
             if e["type"] == "decision" else e["status"]) for e in events] == [
        ("decision", "modify", "c1", "cap-search", "pydantic-ai"),
        ("outcome", "modify", "c1", "cap-search", "ok"),
        ("decision", "allow", "c2", "default", "pydantic-ai"),
        ("outcome", "allow", "c2", "default", "output_modified")]
    assert events[0]["args"] == {"query": "q", "limit": 50}
    assert events[0]["agent"] == "assistant" and events[0]["session"]
    assert events[3]["output_rule"] == "redact-secrets"


async def test_a_tool_that_fails_is_recorded_as_an_error_outcome(tmp_path) -> None:
    log = tmp_path / "audit.jsonl"
    capability = guarded({"version": 1, "audit": {"sinks": [{"jsonl": str(log)}]}})
    script = Script([call("c1", "flaky")], "ok")
    bot = Agent(script.model, capabilities=[capability])

    @bot.tool_plain(retries=3)
    def flaky() -> str:
        raise ModelRetry("try later")

    await asyncio.wait_for(bot.run("go"), TIMEOUT)
    capability.enforcer.guard.close()
    outcomes = [e for e in map(json.loads, log.read_text().splitlines()) if e["type"] == "outcome"]
    assert [(e["call_id"], e["status"]) for e in outcomes] == [("c1", "error")]
    assert script.results()["c1"].outcome == "retried"


# -- the README example ----------------------------------------------------------------------

def test_the_readme_example_runs_and_prints_what_it_says(tmp_path, monkeypatch, capsys) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) == 1
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks[0], str(README), "exec"), {"__name__": "__main__"})
    promised = [line[2:] for line in blocks[0].splitlines() if line.startswith("# ") and "->" in line]
    assert capsys.readouterr().out.splitlines() == promised
