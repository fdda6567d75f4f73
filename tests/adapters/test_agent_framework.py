"""Microsoft Agent Framework: a real Agent with a scripted chat client, its tool calls decided by
CallwardenMiddleware (a FunctionMiddleware)."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from _agent_framework_support import (
    POLICY,
    SECRET,
    ScriptedClient,
    Tools,
    agent,
    asks,
    call,
    guard,
    results_in,
    results_seen,
)
from _readme import ReadmeSection
from _scenario import crash_after_running
from agent_framework import AgentSession, Content, Message, MiddlewareFailure

from callwarden import Approve, Deny, Guard, RunHalted
from callwarden.adapters.agent_framework import REQUEST_KEY, AgentRunHalted, CallwardenMiddleware

README = ReadmeSection("Microsoft Agent Framework")
TIMEOUT = 30  # a hang fails the test instead of blocking the suite

ONE_TURN = asks(call("c1", "read_file", path="notes.txt"),
                call("c2", "delete_file", path="notes.txt"),
                call("c3", "search", query="callwarden", limit=50),
                call("c4", "deploy", env="qa"),
                call("c5", "wipe_disk", device="sda"))


async def run(tools: Tools, client: ScriptedClient, mw: CallwardenMiddleware,
              task: Any = "tidy up", **options: Any) -> Any:
    return await asyncio.wait_for(agent(tools, client, mw).run(task, **options), TIMEOUT)


async def one_turn(tools: Tools, **options: Any) -> tuple[dict[str, str], ScriptedClient,
                                                           CallwardenMiddleware]:
    """The issue's scenario in one model turn: what the run returned for each call."""
    client = ScriptedClient(ONE_TURN, "All done.")
    mw = guard(**options)
    response = await run(tools, client, mw)
    return results_in(response.messages), client, mw


async def paused(tools: Tools, client: ScriptedClient, mw: CallwardenMiddleware) -> Any:
    """Runs the agent until the policy's ``ask`` pauses it: (agent, session, the request)."""
    ops = agent(tools, client, mw)
    session = ops.create_session()
    response = await asyncio.wait_for(ops.run("deploy", session=session), TIMEOUT)
    [request] = response.user_input_requests
    return ops, session, request


async def resume(ops: Any, session: Any, answer: Content) -> Any:
    return await asyncio.wait_for(
        ops.run(Message(role="user", contents=[answer]), session=session), TIMEOUT)


# -- the one-turn scenario --------------------------------------------------------------------

async def test_allowed_call_runs_and_its_result_reaches_the_model() -> None:
    tools = Tools()
    seen, _, _ = await one_turn(tools, approver=lambda request: True)
    assert ("read_file", {"path": "notes.txt"}) in tools.ran
    assert seen["c1"] == "contents of notes.txt"


async def test_denied_tool_never_runs_and_the_model_reads_the_rule_message() -> None:
    tools = Tools()
    seen, _, _ = await one_turn(tools, approver=lambda request: True)
    assert "delete_file" not in tools.names()
    assert seen["c2"] == "Deleting files is not allowed; move them to trash/ instead."


async def test_a_denial_is_the_function_result_of_the_next_model_turn() -> None:
    tools = Tools()
    client = ScriptedClient(asks(call("c1", "delete_file", path="a")), "moved it instead")
    response = await run(tools, client, guard())
    assert response.text == "moved it instead" and tools.ran == []
    assert results_seen(client)["c1"].startswith("Deleting files is not allowed")


async def test_rewritten_call_runs_with_the_rewritten_arguments() -> None:
    tools = Tools()
    seen, _, _ = await one_turn(tools, approver=lambda request: True)
    assert ("search", {"query": "callwarden", "limit": 5}) in tools.ran
    assert seen["c3"] == "5 results for callwarden"


async def test_halting_call_never_runs_and_the_model_gets_no_further_turn() -> None:
    tools = Tools()
    seen, client, mw = await one_turn(tools, approver=lambda request: True)
    assert "wipe_disk" not in tools.names()
    assert seen["c5"].startswith("callwarden halted the run")
    assert "Wiping disks ends the session." in seen["c5"]
    assert len(client.requests) == 1 and client.turns == ["All done."]
    assert mw.halted is not None and mw.halted.rule == "stop-on-wipe"


async def test_calls_after_a_halt_are_refused_until_the_halt_is_cleared() -> None:
    tools = Tools()
    mw = guard()
    await run(tools, ScriptedClient(asks(call("c1", "wipe_disk", device="sda"))), mw)
    client = ScriptedClient(asks(call("c2", "read_file", path="a")), "unused")
    response = await run(tools, client, mw)
    assert tools.ran == [] and results_in(response.messages)["c2"].startswith("callwarden halted")
    mw.clear_halt()
    await run(tools, ScriptedClient(asks(call("c3", "read_file", path="a")), "done"), mw)
    assert tools.names() == ["read_file"]


async def test_raise_on_halt_aborts_the_run_with_a_middleware_failure() -> None:
    tools = Tools()
    mw = guard(raise_on_halt=True)
    client = ScriptedClient(asks(call("c1", "wipe_disk", device="sda")), "unused")
    with pytest.raises(AgentRunHalted) as raised:
        await run(tools, client, mw)
    assert isinstance(raised.value, RunHalted) and isinstance(raised.value, MiddlewareFailure)
    assert raised.value.decision.rule == "stop-on-wipe" and tools.ran == []
    with pytest.raises(RunHalted):  # still halted: the next run aborts at its first call
        await run(tools, ScriptedClient(asks(call("c2", "read_file", path="a"))), mw)
    assert tools.ran == []


async def test_a_streaming_run_is_decided_the_same_way() -> None:
    tools = Tools()
    client = ScriptedClient(ONE_TURN, "All done.")
    mw = guard(approver=lambda request: True)
    stream = agent(tools, client, mw).run("tidy up", stream=True)

    async def consume() -> Any:
        return [update async for update in stream]

    updates = await asyncio.wait_for(consume(), TIMEOUT)
    seen = {str(c.call_id): str(c.result) for u in updates for c in u.contents
            if c.type == "function_result"}
    assert sorted(tools.names()) == ["deploy", "read_file", "search"]
    assert seen["c2"].startswith("Deleting files") and seen["c5"].startswith("callwarden halted")
    assert len(client.requests) == 1


# -- ask settled inline -----------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_approver_approval_runs_the_call_once(kind: str) -> None:
    asked: list[str] = []

    def approve(request: Any) -> Approve:
        asked.append(request.tool)
        return Approve(by="alice")

    async def aapprove(request: Any) -> Approve:
        return approve(request)

    tools = Tools()
    seen, _, _ = await one_turn(tools, approver=approve if kind == "sync" else aapprove)
    assert asked == ["deploy"] and tools.ran.count(("deploy", {"env": "qa"})) == 1
    assert seen["c4"] == "deployed to qa"


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_approver_rejection_gives_the_model_the_reason(kind: str) -> None:
    def reject(request: Any) -> Deny:
        return Deny(reason="freeze until Monday", by="alice")

    async def areject(request: Any) -> Deny:
        return reject(request)

    tools = Tools()
    seen, _, _ = await one_turn(tools, approver=reject if kind == "sync" else areject)
    assert "deploy" not in tools.names()
    assert "alice denied it" in seen["c4"] and "freeze until Monday" in seen["c4"]


async def test_wait_lets_an_answer_given_elsewhere_settle_the_call() -> None:
    tools = Tools()
    mw = guard(wait=TIMEOUT)
    approvals = mw.enforcer.guard.approvals

    async def reviewer() -> None:  # stands in for `callwarden approvals approve ID` elsewhere
        while not approvals.list("pending"):
            await asyncio.sleep(0.01)
        await approvals.aapprove(approvals.list("pending")[0].id, by="alice")

    client = ScriptedClient(asks(call("c1", "deploy", env="qa")), "deployed")
    await asyncio.wait_for(asyncio.gather(run(tools, client, mw), reviewer()), TIMEOUT)
    assert tools.ran == [("deploy", {"env": "qa"})]


# -- ask through the framework's tool approval ------------------------------------------------

async def test_ask_pauses_the_run_with_a_function_approval_request() -> None:
    tools = Tools()
    mw = guard()
    client = ScriptedClient(asks(call("c1", "deploy", env="qa")), "unused")
    _, _, request = await paused(tools, client, mw)
    assert tools.ran == [] and len(client.requests) == 1
    assert request.type == "function_approval_request" and request.function_call.name == "deploy"
    assert request.function_call.parse_arguments() == {"env": "qa"}
    assert request.additional_properties[REQUEST_KEY] == mw.enforcer.pending[0]
    assert "Deploys need a human." in request.additional_properties["reason"]


async def test_an_approval_given_with_respond_runs_the_exact_call_once() -> None:
    tools = Tools()
    mw = guard()
    client = ScriptedClient(asks(call("c1", "deploy", env="qa")), "deployed it")
    ops, session, request = await paused(tools, client, mw)
    response = await resume(ops, session, mw.respond(request, True, by="alice"))
    assert tools.ran == [("deploy", {"env": "qa"})] and response.text == "deployed it"
    assert results_seen(client)["c1"] == "deployed to qa"
    record = mw.enforcer.guard.approvals.get(request.additional_properties[REQUEST_KEY])
    assert (record.status.value, record.resolved_by) == ("consumed", "alice")
    client.turns.append("again")
    await resume(ops, session, mw.respond(request, True, by="alice"))  # a replayed answer
    assert tools.ran == [("deploy", {"env": "qa"})]


@pytest.mark.parametrize("how", ["plain", "respond"])
async def test_an_approval_replayed_after_a_crash_does_not_run_the_call_again(how: str) -> None:
    tools = Tools()
    mw = guard()
    client = ScriptedClient(asks(call("c1", "deploy", env="qa")), "deployed", "awaiting approval",
                            "deployed it")
    ops, session, request = await paused(tools, client, mw)
    saved = session.to_dict()  # what the app persisted before the run went on
    answer = request.to_function_approval_response(True) if how == "plain" else \
        mw.respond(request, True, by="alice")
    await resume(ops, session, answer)
    crash_after_running(mw.enforcer.guard)  # killed before the outcome was recorded
    # The app resumes the session it saved, with the approval that let the call run then.
    restored = AgentSession.from_dict(saved)
    again = await resume(ops, restored, answer)
    assert tools.ran == [("deploy", {"env": "qa"})]
    [asked] = again.user_input_requests  # asked again, bound to the request raised in doubt
    doubt = mw.enforcer.guard.approvals.get(asked.additional_properties[REQUEST_KEY])
    assert doubt.in_doubt and doubt.status.value == "pending"
    assert "may already have run" in asked.additional_properties["reason"]
    # A person who checked that it did not happen approves the request raised in doubt.
    await resume(ops, restored, mw.respond(asked, True, by="carol"))
    assert tools.ran == [("deploy", {"env": "qa"})] * 2
    assert mw.enforcer.guard.approvals.get(doubt.id).resolved_by == "carol"


async def test_a_plain_framework_approval_is_recorded_as_the_reviewers() -> None:
    tools = Tools()
    mw = guard(reviewer="bob")
    client = ScriptedClient(asks(call("c1", "deploy", env="qa")), "deployed it")
    ops, session, request = await paused(tools, client, mw)
    await resume(ops, session, request.to_function_approval_response(True))
    assert tools.ran == [("deploy", {"env": "qa"})]
    record = mw.enforcer.guard.approvals.get(request.additional_properties[REQUEST_KEY])
    assert record.resolved_by == "bob"


async def test_a_rejection_given_with_respond_gives_the_model_the_reason() -> None:
    tools = Tools()
    mw = guard()
    client = ScriptedClient(asks(call("c1", "deploy", env="qa")), "ok, not deploying")
    ops, session, request = await paused(tools, client, mw)
    answer = mw.respond(request, {"approve": False, "reason": "freeze until Monday"}, by="alice")
    response = await resume(ops, session, answer)
    assert tools.ran == [] and response.text == "ok, not deploying"
    seen = results_seen(client)["c1"]
    assert "denied by alice: freeze until Monday" in seen and "was not approved" in seen


async def test_a_plain_framework_rejection_is_recorded_on_callwardens_request() -> None:
    tools = Tools()
    mw = guard()
    client = ScriptedClient(asks(call("c1", "deploy", env="qa")), "ok")
    ops, session, request = await paused(tools, client, mw)
    await resume(ops, session, request.to_function_approval_response(False))
    assert tools.ran == []
    record = mw.enforcer.guard.approvals.get(request.additional_properties[REQUEST_KEY])
    assert (record.status.value, record.resolved_by) == ("denied", "reviewer")


async def test_an_answer_given_with_the_cli_meanwhile_stands() -> None:
    tools = Tools()
    mw = guard()
    client = ScriptedClient(asks(call("c1", "deploy", env="qa")), "ok")
    ops, session, request = await paused(tools, client, mw)
    mw.enforcer.guard.approvals.deny(request.additional_properties[REQUEST_KEY], by="carol",
                                     reason="not this week")  # = callwarden approvals deny
    await resume(ops, session, request.to_function_approval_response(True))
    assert tools.ran == [] and "not this week" in results_seen(client)["c1"]


async def test_a_rejection_is_never_run_even_when_the_policy_no_longer_asks() -> None:
    tools = Tools()
    mw = guard()
    client = ScriptedClient(asks(call("c1", "deploy", env="qa")), "ok")
    _, session, request = await paused(tools, client, mw)
    answer = mw.respond(request, {"approve": False, "reason": "no"}, by="alice")
    relaxed = agent(tools, client, guard({"version": 1, "default": "allow"}))
    await resume(relaxed, session, answer)  # the policy now allows deploys; alice said no
    assert tools.ran == [] and "alice rejected it: no" in results_seen(client)["c1"]


def test_respond_refuses_an_approval_request_callwarden_did_not_make() -> None:
    native = Content.from_function_approval_request(
        id="x", function_call=Content.from_function_call(call_id="c1", name="deploy", id="x"))
    with pytest.raises(ValueError, match="not an approval request made by callwarden"):
        guard().respond(native, False)


# -- failing closed ---------------------------------------------------------------------------

async def test_a_policy_that_raises_fails_closed() -> None:
    def broken(call: Any, ctx: Any) -> Any:
        raise RuntimeError("policy bug")

    tools = Tools()
    client = ScriptedClient(asks(call("c1", "read_file", path="a.txt")), "ok")
    await run(tools, client, guard(Guard(rules=[], policies=[broken])))
    assert tools.ran == [] and "raised RuntimeError: policy bug" in results_seen(client)["c1"]


async def test_an_error_inside_the_adapter_fails_closed_with_a_clear_message(monkeypatch) -> None:
    async def explode(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("store down")

    tools = Tools()
    mw = guard()
    monkeypatch.setattr(mw.enforcer.guard, "acheck", explode)
    client = ScriptedClient(asks(call("c1", "read_file", path="a.txt")), "ok")
    await run(tools, client, mw)
    assert tools.ran == []
    assert "could not decide it (RuntimeError: store down)" in results_seen(client)["c1"]


# -- output rules and the audit log -----------------------------------------------------------

async def test_output_rules_redact_the_result_before_the_model_sees_it() -> None:
    client = ScriptedClient(asks(call("c1", "read_file", path="config.ini")), "ok")
    await run(Tools(), client, guard())
    seen = results_seen(client)["c1"]
    assert "9dKq3" not in seen and "REDACTED" in seen


async def test_an_output_halt_withholds_the_result_and_halts() -> None:
    policy = {"version": 1, "rules": [{"id": "leak", "on": "output", "if":
              "args.output.contains('secret_access_key')", "effect": "halt"}]}
    mw = guard(policy)
    client = ScriptedClient(asks(call("c1", "read_file", path="config.ini")), "unused")
    response = await run(Tools(), client, mw)
    assert SECRET not in results_in(response.messages)["c1"] and len(client.requests) == 1
    assert mw.halted is not None and mw.halted.rule == "leak"


async def test_a_failing_tool_is_recorded_and_the_model_gets_the_frameworks_error(tmp_path) -> None:
    log = tmp_path / "audit.jsonl"
    mw = guard({**POLICY, "audit": {"sinks": [{"jsonl": str(log)}]}})
    client = ScriptedClient(asks(call("c1", "explode", path="a")), "ok")
    await run(Tools(), client, mw)
    mw.enforcer.guard.close()
    outcome = [e for e in map(json.loads, log.read_text().splitlines()) if e["type"] == "outcome"]
    assert [(e["status"], "disk on fire" in e["error"]) for e in outcome] == [("error", True)]
    assert results_seen(client)["c1"].startswith("Error: Function failed.")


async def test_the_audit_log_names_the_rules_the_session_and_the_outcome(tmp_path) -> None:
    log = tmp_path / "audit.jsonl"
    mw = guard({**POLICY, "audit": {"sinks": [{"jsonl": str(log)}], "required": True}})
    client = ScriptedClient(asks(call("c1", "search", query="q", limit=50),
                                 call("c2", "read_file", path="config.ini")), "ok")
    ops = agent(Tools(), client, mw)
    session = ops.create_session()
    await asyncio.wait_for(ops.run("go", session=session), TIMEOUT)
    mw.enforcer.guard.close()
    events = {(e["type"], e["call_id"]): e for e in map(json.loads, log.read_text().splitlines())}
    search = events[("decision", "c1")]
    assert (search["effect"], search["rule"], search["framework"]) == \
        ("modify", "cap-search", "agent-framework")
    assert search["args"] == {"query": "q", "limit": 50} and search["session"] == session.session_id
    assert events[("outcome", "c1")]["status"] == "ok"
    read = events[("outcome", "c2")]
    assert (read["status"], read["output_rule"]) == ("output_modified", "redact-secrets")


# -- the README example ----------------------------------------------------------------------

def test_the_readme_example_runs_and_prints_what_it_says(tmp_path, monkeypatch, capsys) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) == 1
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks[0], str(README), "exec"), {"__name__": "__main__"})
    promised = [line[2:] for line in blocks[0].splitlines() if line.startswith("# ") and "->" in line]
    assert capsys.readouterr().out.splitlines() == promised
