"""Agno: a real Agent with a scripted model, every tool call behind CallwardenToolHook."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from _agno_support import (
    ONE_TURN,
    POLICY,
    SECRET,
    ScriptedModel,
    Tools,
    agent,
    hook,
    results,
)
from _readme import ReadmeSection
from _scenario import REQUEST_POLICY, crash_after_running
from agno.agent import Agent
from agno.run.agent import RunOutput
from agno.tools.function import ToolResult

from callwarden import Approve, Deny, Guard
from callwarden.adapters.agno import CallwardenToolHook
from callwarden.exceptions import ApprovalInvalid

README = ReadmeSection("Agno")
TIMEOUT = 30  # a hang fails the test instead of blocking the suite


def in_thread(fn: Callable[[], RunOutput]) -> RunOutput:
    """Runs a sync agent run in a thread joined with a timeout, so a hang fails the test."""
    box: list[Any] = []
    worker = threading.Thread(target=lambda: box.append(_outcome(fn)), daemon=True)
    worker.start()
    worker.join(TIMEOUT)
    assert not worker.is_alive(), "the run hung"
    if isinstance(box[0], BaseException):
        raise box[0]
    return box[0]


def _outcome(fn: Callable[[], RunOutput]) -> Any:
    try:
        return fn()
    except BaseException as e:
        return e


async def run(a: Agent, kind: str, task: str = "go") -> RunOutput:
    """``agent.run`` (sync) or ``agent.arun`` (async), either bounded by TIMEOUT."""
    if kind == "sync":
        return in_thread(lambda: a.run(task))
    return await asyncio.wait_for(a.arun(task), TIMEOUT)


async def one_turn(kind: str, **options: Any) -> tuple[Tools, RunOutput, CallwardenToolHook]:
    """The issue's scenario: one model turn asks for all five calls."""
    tools = Tools(kind)
    guard = hook(**options)
    out = await run(agent(guard, ScriptedModel(turns=[list(ONE_TURN), "done"]), tools), kind)
    return tools, out, guard


KINDS = pytest.mark.parametrize("kind", ["sync", "async"])


# -- the one-turn scenario, through agent.run and agent.arun -----------------------------------

@KINDS
async def test_allowed_call_runs_and_the_model_gets_its_result(kind: str) -> None:
    tools, out, _ = await one_turn(kind, approver=lambda request: True)
    assert ("read_file", {"path": "notes.txt"}) in tools.ran
    assert results(out)["c1"] == ("contents of notes.txt", False)


@KINDS
async def test_denied_tool_never_runs_and_the_model_gets_the_message_as_an_error(kind: str
                                                                                ) -> None:
    tools, out, _ = await one_turn(kind, approver=lambda request: True)
    assert "delete_file" not in tools.names()
    assert results(out)["c2"] == ("Deleting files is not allowed; move them to trash/ instead.",
                                  True)


@KINDS
async def test_rewritten_call_runs_with_the_rewritten_args(kind: str) -> None:
    tools, out, _ = await one_turn(kind, approver=lambda request: True)
    assert ("search", {"query": "callwarden", "limit": 5}) in tools.ran
    assert ("search", {"query": "callwarden", "limit": 50}) not in tools.ran
    assert results(out)["c3"] == ("5 results for callwarden", False)


@KINDS
async def test_halt_stops_the_run_and_the_model_is_not_asked_again(kind: str) -> None:
    tools = Tools(kind)
    guard = hook(approver=lambda request: True)
    model = ScriptedModel(turns=[list(ONE_TURN), "the model must not get this turn"])
    out = await run(agent(guard, model, tools), kind)
    assert "wipe_disk" not in tools.names()
    content, error = results(out)["c5"]
    assert error and content.startswith("callwarden halted the run")
    assert "Wiping disks ends the session." in content
    assert len(model.requests) == 1 and guard.halted is not None
    assert guard.halted.rule == "stop-on-wipe"


@KINDS
@pytest.mark.parametrize("answer", ["sync", "async"])
async def test_approver_approval_runs_the_call_once(kind: str, answer: str) -> None:
    asked: list[str] = []

    def approve(request: Any) -> Approve:
        asked.append(request.tool)
        return Approve(by="alice")

    async def aapprove(request: Any) -> Approve:
        return approve(request)

    tools, out, _ = await one_turn(kind, approver=approve if answer == "sync" else aapprove)
    assert asked == ["deploy"]
    assert tools.ran.count(("deploy", {"env": "qa"})) == 1
    assert results(out)["c4"] == ("deployed to qa", False)


@KINDS
async def test_approver_rejection_gives_the_model_the_reason(kind: str) -> None:
    tools, out, _ = await one_turn(kind, approver=lambda r: Deny(reason="freeze until Monday",
                                                                 by="alice"))
    assert "deploy" not in tools.names()
    content, error = results(out)["c4"]
    assert error and "alice denied it: freeze until Monday" in content


async def test_calls_after_a_halt_in_the_same_batch_and_later_runs_are_refused() -> None:
    tools = Tools()
    guard = hook()
    model = ScriptedModel(turns=[[("c1", "wipe_disk", {"device": "sda"}),
                                  ("c2", "read_file", {"path": "a.txt"})],
                                 [("c3", "read_file", {"path": "b.txt"})], "done"])
    a = agent(guard, model, tools)
    first = await run(a, "sync")
    assert results(first)["c2"][0].startswith("callwarden halted the run")
    second = await run(a, "sync", "read b")
    assert results(second)["c3"][1] and tools.names() == []
    guard.clear_halt()
    model.turns[:0] = [[("c4", "read_file", {"path": "c.txt"})]]
    await run(a, "sync", "read c")
    assert tools.ran == [("read_file", {"path": "c.txt"})]


@KINDS
async def test_the_users_latest_message_is_the_request_the_policy_sees(kind: str) -> None:
    """The recipient the user named is allowed; one only in the context Agno appends to the
    user's message (the app's dependencies) is a stranger, refused with the rule's message."""
    policy = REQUEST_POLICY
    sent: list[str] = []

    def send_email(to: str) -> str:
        """Send an e-mail."""
        sent.append(to)
        return f"sent to {to}"

    async def asend_email(to: str) -> str:
        """Send an e-mail."""
        return send_email(to)

    asend_email.__name__ = "send_email"
    model = ScriptedModel(turns=[[("c1", "send_email", {"to": "carol@example.org"}),
                                  ("c2", "send_email", {"to": "eve@attacker.example"})], "done"])
    bot = Agent(name="assistant", model=model, telemetry=False,
                tools=[send_email if kind == "sync" else asend_email],
                tool_hooks=[CallwardenToolHook(policy)],
                dependencies={"archive": "eve@attacker.example"},
                add_dependencies_to_context=True)
    out = await run(bot, kind, "Mail Carol@Example.org the notes")
    assert sent == ["carol@example.org"]
    assert results(out) == {"c1": ("sent to carol@example.org", False),
                            "c2": ("Mail only people the user named.", True)}


# -- ask without an approver: pending, then resumed ----------------------------------------------

@KINDS
async def test_ask_without_approver_tells_the_model_the_pending_request_id(kind: str) -> None:
    tools = Tools(kind)
    guard = hook()
    out = await run(agent(guard, ScriptedModel(turns=[[("c1", "deploy", {"env": "qa"})],
                                                      "waiting"]), tools), kind)
    content, error = results(out)["c1"]
    assert "deploy" not in tools.names() and error and guard.pending
    assert f"Approval request {guard.pending[0]} is pending" in content
    assert f"`callwarden approvals approve {guard.pending[0]}`" in content


@KINDS
async def test_an_approved_pending_call_runs_once_when_asked_again(kind: str) -> None:
    tools = Tools(kind)
    guard = hook()
    model = ScriptedModel(turns=[[(f"c{i}", "deploy", {"env": "qa"})] if i % 2 == 0 else "ok"
                                 for i in range(6)])
    a = agent(guard, model, tools)
    await run(a, kind, "deploy")
    request_id = guard.pending[0]
    guard.enforcer.guard.approvals.approve(request_id, by="alice")  # = the CLI's approve
    again = await run(a, kind, "it is approved")
    third = await run(a, kind, "once more")
    assert tools.ran == [("deploy", {"env": "qa"})]
    assert results(again)["c2"] == ("deployed to qa", False)
    assert results(third)["c4"][1] and guard.pending != [request_id]  # a new request


@KINDS
async def test_a_rejected_pending_call_gives_the_model_the_reason_when_asked_again(kind: str
                                                                                   ) -> None:
    tools = Tools(kind)
    guard = hook()
    model = ScriptedModel(turns=[[("c1", "deploy", {"env": "qa"})], "ok",
                                 [("c2", "deploy", {"env": "qa"})], "ok"])
    a = agent(guard, model, tools)
    await run(a, kind, "deploy")
    if kind == "sync":
        guard.answer(guard.pending[0], {"approve": False, "reason": "not today"}, by="alice")
    else:
        await guard.aanswer(guard.pending[0], {"approve": False, "reason": "not today"},
                            by="alice")
    out = await run(a, kind, "retry")
    assert tools.names() == [] and "not today" in results(out)["c2"][0]


async def test_wait_lets_an_answer_given_elsewhere_settle_the_call() -> None:
    tools = Tools("async")
    guard = hook(wait=TIMEOUT)
    approvals = guard.enforcer.guard.approvals

    async def reviewer() -> None:  # stands in for `callwarden approvals approve ID` elsewhere
        while not approvals.list("pending"):
            await asyncio.sleep(0.01)
        await approvals.aapprove(approvals.list("pending")[0].id, by="alice")

    a = agent(guard, ScriptedModel(turns=[[("c1", "deploy", {"env": "qa"})], "done"]), tools)
    await asyncio.wait_for(asyncio.gather(a.arun("deploy"), reviewer()), TIMEOUT)
    assert tools.ran == [("deploy", {"env": "qa"})]


# -- Agno's own confirmation pause (requires_confirmation tools) --------------------------------

@KINDS
async def test_a_confirmed_pause_records_the_approval_and_runs_the_call_once(kind: str) -> None:
    tools = Tools(kind)
    guard = hook()
    model = ScriptedModel(turns=[[("c1", "deploy", {"env": "qa"})], "deployed"])
    a = agent(guard, model, tools, confirm_deploys=True)
    paused = await run(a, kind, "deploy")
    assert paused.is_paused and tools.names() == []
    [requirement] = paused.active_requirements
    guard.confirm(requirement, run=paused, by="alice")
    if kind == "sync":
        done = in_thread(lambda: a.continue_run(run_response=paused,
                                                requirements=paused.requirements))
    else:
        done = await asyncio.wait_for(
            a.acontinue_run(run_response=paused, requirements=paused.requirements), TIMEOUT)
    assert tools.ran == [("deploy", {"env": "qa"})]
    assert results(done)["c1"] == ("deployed to qa", False)
    [request] = guard.enforcer.guard.approvals.list()
    assert (request.status, request.resolved_by) == ("consumed", "alice")


def test_a_call_in_doubt_is_not_confirmed_through_agno() -> None:
    tools = Tools()
    guard = hook()
    model = ScriptedModel(turns=[[("c1", "deploy", {"env": "qa"})], "deployed", "again"])
    a = agent(guard, model, tools, confirm_deploys=True)
    paused = in_thread(lambda: a.run("deploy"))
    [requirement] = paused.active_requirements
    guard.confirm(requirement, run=paused, by="alice")
    in_thread(lambda: a.continue_run(run_response=paused, requirements=paused.requirements))
    crash_after_running(guard.enforcer.guard)  # killed before the outcome was recorded
    # The app shows the paused run it saved again, and a person confirms it again.
    with pytest.raises(ApprovalInvalid) as refused:
        guard.confirm(requirement, run=paused, by="alice")
    assert refused.value.code == "approval_in_doubt"
    [doubt] = [r for r in guard.enforcer.guard.approvals.list() if r.in_doubt]
    assert doubt.status == "pending" and doubt.id in refused.value.message
    in_thread(lambda: a.continue_run(run_response=paused, requirements=paused.requirements))
    assert tools.ran == [("deploy", {"env": "qa"})]


async def test_a_rejected_pause_gives_the_model_the_reason() -> None:
    tools = Tools()
    guard = hook()
    a = agent(guard, ScriptedModel(turns=[[("c1", "deploy", {"env": "qa"})], "ok"]), tools,
              confirm_deploys=True)
    paused = await run(a, "sync", "deploy")
    [requirement] = paused.active_requirements
    guard.reject(requirement, run=paused, reason="not on a Friday", by="alice")
    done = in_thread(lambda: a.continue_run(run_response=paused,
                                            requirements=paused.requirements))
    content, error = results(done)["c1"]
    assert tools.names() == [] and error and "not on a Friday" in content
    [request] = guard.enforcer.guard.approvals.list()
    assert request.status == "denied"


# -- failing closed ---------------------------------------------------------------------------

@KINDS
async def test_a_policy_that_raises_fails_closed(kind: str) -> None:
    def broken(call: Any, ctx: Any) -> Any:
        raise RuntimeError("policy bug")

    tools = Tools(kind)
    guard = hook(Guard(rules=[], policies=[broken]))
    out = await run(agent(guard, ScriptedModel(turns=[[("c1", "read_file", {"path": "a"})],
                                                      "ok"]), tools), kind)
    assert tools.names() == [] and results(out)["c1"][1]


@KINDS
async def test_an_error_inside_the_adapter_fails_closed(kind: str, monkeypatch) -> None:
    def explode(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("store down")

    async def aexplode(*args: Any, **kwargs: Any) -> Any:
        explode()

    tools = Tools(kind)
    guard = hook()
    monkeypatch.setattr(guard.enforcer.guard, "check", explode)
    monkeypatch.setattr(guard.enforcer.guard, "acheck", aexplode)
    out = await run(agent(guard, ScriptedModel(turns=[[("c1", "read_file", {"path": "a"})],
                                                      "ok"]), tools), kind)
    assert tools.names() == []
    assert "could not decide it (RuntimeError: store down)" in results(out)["c1"][0]


# -- output rules and the audit log --------------------------------------------------------------

@KINDS
async def test_output_rules_redact_the_result_before_the_model_sees_it(kind: str) -> None:
    model = ScriptedModel(turns=[[("c1", "read_file", {"path": "config.ini"})], "ok"])
    await run(agent(hook(), model, Tools(kind)), kind)
    [shown] = [m.content for m in model.requests[-1] if m.role == "tool"]
    assert "9dKq3" not in shown and "REDACTED" in shown


async def test_an_output_halt_withholds_the_result_and_halts() -> None:
    policy = {"version": 1, "rules": [{"id": "leak", "on": "output", "if":
              "args.output.contains('secret_access_key')", "effect": "halt"}]}
    guard = hook(policy)
    model = ScriptedModel(turns=[[("c1", "read_file", {"path": "config.ini"})], "never"])
    out = await run(agent(guard, model, Tools()), "sync")
    content, error = results(out)["c1"]
    assert error and SECRET not in content and guard.halted is not None
    assert len(model.requests) == 1


async def test_the_audit_log_names_the_rule_and_the_call(tmp_path) -> None:
    log = tmp_path / "audit.jsonl"
    guard = hook({**POLICY, "audit": {"sinks": [{"jsonl": str(log)}], "required": True}})
    model = ScriptedModel(turns=[[("c3", "search", {"query": "q", "limit": 50})], "ok"])
    await run(agent(guard, model, Tools()), "sync")
    guard.enforcer.guard.close()
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(e["type"], e["effect"], e["rule"], e["call_id"]) for e in events] == [
        ("decision", "modify", "cap-search", "c3"), ("outcome", "modify", "cap-search", "c3")]
    assert events[0]["framework"] == "agno" and events[0]["agent"] == "assistant"
    assert events[0]["args"] == {"query": "q", "limit": 50} and events[1]["status"] == "ok"


async def test_the_outcome_names_the_output_rule(tmp_path) -> None:
    log = tmp_path / "audit.jsonl"
    policy = {"version": 1, "audit": {"sinks": [{"jsonl": str(log)}]}, "rules": [
        {"id": "leak", "on": "output", "if": "args.output.contains('secret_access_key')",
         "effect": "deny", "message": "withheld"}]}
    guard = hook(policy)
    out = await run(agent(guard, ScriptedModel(turns=[[("c1", "read_file",
                                                        {"path": "config.ini"})], "ok"]),
                          Tools()), "sync")
    guard.enforcer.guard.close()
    assert results(out)["c1"] == ("withheld", True)
    [outcome] = [e for e in map(json.loads, log.read_text().splitlines())
                 if e["type"] == "outcome"]
    assert (outcome["status"], outcome["output_rule"]) == ("output_blocked", "leak")


def test_a_streamed_result_is_screened_and_a_tool_result_keeps_its_shape() -> None:
    def read_file(path: str) -> Iterator[str]:
        """Read a file in chunks."""
        yield SECRET[:20]
        yield SECRET[20:]

    def read_notes(path: str) -> ToolResult:
        """Read notes."""
        return ToolResult(content=f"notes: {SECRET}")

    policy = {"version": 1, "rules": [{"id": "redact", "on": "output", "secrets": True,
                                       "effect": "modify"}]}
    model = ScriptedModel(turns=[[("c1", "read_file", {"path": "x"}),
                                  ("c2", "read_notes", {"path": "y"})], "ok"])
    a = Agent(model=model, tools=[read_file, read_notes], tool_hooks=[hook(policy)],
              telemetry=False)
    out = in_thread(lambda: a.run("go"))
    seen = results(out)
    assert "9dKq3" not in seen["c1"][0] and "REDACTED" in seen["c1"][0]
    assert "9dKq3" not in seen["c2"][0] and seen["c2"][0].startswith("notes: ")


def test_an_unchanged_streamed_result_reaches_the_model_whole() -> None:
    def count(n: int) -> Iterator[str]:
        """Count."""
        yield from (str(i) for i in range(n))

    model = ScriptedModel(turns=[[("c1", "count", {"n": 4})], "ok"])
    a = Agent(model=model, tools=[count], tool_hooks=[hook(POLICY)], telemetry=False)
    assert results(in_thread(lambda: a.run("go")))["c1"] == ("0123", False)


# -- the README example ----------------------------------------------------------------------

def test_the_readme_example_runs_and_prints_what_it_says(tmp_path, monkeypatch, capsys) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) == 1
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks[0], str(README), "exec"), {"__name__": "__main__"})
    promised = [line[2:] for line in blocks[0].splitlines() if line.startswith("# ") and "->" in line]
    assert capsys.readouterr().out.splitlines() == promised
