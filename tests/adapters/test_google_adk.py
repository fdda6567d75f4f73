"""Google ADK 2.x: a real InMemoryRunner and LlmAgent driven by a scripted model, every tool call
decided by CallwardenPlugin."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from typing import Any

import pytest
from _google_adk_support import (
    POLICY,
    SECRET,
    TIMEOUT,
    Session,
    Tools,
    call,
    confirm,
    confirmations,
    model,
    plugin,
    session,
    text,
)
from _readme import ReadmeSection
from _scenario import ProcessDied
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.runners import InMemoryRunner
from google.adk.workflow import Workflow

from callwarden import Approve, Deny, Guard
from callwarden.approvals import Status

README = ReadmeSection("Google ADK")

ONE_TURN = [call("c1", "read_file", path="notes.txt"),
            call("c2", "delete_file", path="notes.txt"),
            call("c3", "search", query="callwarden", limit=50),
            call("c4", "deploy", env="qa"),
            call("c5", "wipe_disk", device="sda")]


async def run_one_turn(tools: Tools, **options: Any) -> tuple[Session, dict[str, Any]]:
    """The issue's scenario in one model turn; returns what the function responses were."""
    s = session(tools, model(ONE_TURN, "All done."), **options)
    events = await s.send("tidy up")
    responses = {p.function_response.id: p.function_response.response for e in events
                 for p in (e.content.parts if e.content else []) if p.function_response}
    return s, responses


# -- the user's request -----------------------------------------------------------------------

REQUEST_POLICY: dict[str, Any] = {
    "version": 1, "default": "allow",
    "tools": {"send_email": {"roles": {"recipient": "to"}}},
    "rules": [{"id": "strangers", "roles": {"recipient": {"in": ["request"]}},
               "effect": "deny", "message": "Send only to people the user named."}]}


async def test_a_recipient_named_in_the_users_message_runs_and_a_stranger_does_not() -> None:
    tools = Tools()
    s = session(tools, model([call("c1", "send_email", to="alice@example.com", body="Q3"),
                              call("c2", "send_email", to="mallory@evil.example", body="Q3")],
                             "Sent."), REQUEST_POLICY)
    await s.send("Please send the Q3 report to alice@example.com.")
    assert tools.ran == [("send_email", {"to": "alice@example.com", "body": "Q3"})]
    assert s.model.results_seen()["c2"] == {"error": "Send only to people the user named."}


# -- the one-turn scenario --------------------------------------------------------------------

async def test_allowed_call_runs_and_its_result_is_the_function_response() -> None:
    tools = Tools()
    _, seen = await run_one_turn(tools, approver=lambda request: True)
    assert ("read_file", {"path": "notes.txt"}) in tools.ran
    assert seen["c1"] == {"result": "contents of notes.txt"}


async def test_denied_tool_never_runs_and_the_model_gets_an_error_response() -> None:
    tools = Tools()
    _, seen = await run_one_turn(tools, approver=lambda request: True)
    assert "delete_file" not in tools.names()
    assert seen["c2"] == {"error": "Deleting files is not allowed; move them to trash/ instead."}


async def test_rewritten_call_runs_with_the_rewritten_args() -> None:
    tools = Tools()
    _, seen = await run_one_turn(tools, approver=lambda request: True)
    assert ("search", {"query": "callwarden", "limit": 5}) in tools.ran
    assert seen["c3"] == {"result": "5 results for callwarden"}


async def test_halting_call_never_runs_and_the_invocation_ends_before_the_model_again() -> None:
    tools = Tools()
    s, seen = await run_one_turn(tools, approver=lambda request: True)
    assert "wipe_disk" not in tools.names()
    assert seen["c5"]["error"].startswith("callwarden halted the run")
    assert "Wiping disks ends the session." in seen["c5"]["error"]
    assert len(s.model.requests) == 1  # "All done." was never asked for
    assert s.plugin.halts[str(s.id)].rule == "stop-on-wipe"


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_approver_approval_runs_the_call_once(kind: str) -> None:
    asked: list[str] = []

    def approve(request: Any) -> Approve:
        asked.append(request.tool)
        return Approve(by="alice")

    async def aapprove(request: Any) -> Approve:
        return approve(request)

    tools = Tools()
    _, seen = await run_one_turn(tools, approver=approve if kind == "sync" else aapprove)
    assert asked == ["deploy"]
    assert tools.ran.count(("deploy", {"env": "qa"})) == 1
    assert seen["c4"] == {"result": "deployed to qa"}


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_approver_rejection_gives_the_model_the_reason(kind: str) -> None:
    def reject(request: Any) -> Deny:
        return Deny(reason="freeze until Monday", by="alice")

    async def areject(request: Any) -> Deny:
        return reject(request)

    tools = Tools()
    _, seen = await run_one_turn(tools, approver=reject if kind == "sync" else areject)
    assert "deploy" not in tools.names()
    assert "alice denied it: freeze until Monday" in seen["c4"]["error"]


# -- ask without an approver: ADK's tool confirmation flow -------------------------------------

async def pause_on_deploy(tools: Tools, *after: Any) -> tuple[Session, Any]:
    s = session(tools, model([call("c1", "deploy", env="qa"), call("c2", "search", query="q",
                                                                     limit=9)], *after))
    [request] = confirmations(await s.send("deploy"))
    return s, request


async def test_ask_pauses_the_run_with_an_adk_confirmation_request() -> None:
    tools = Tools()
    s, request = await pause_on_deploy(tools, "deployed")
    original, confirmation = request.args["originalFunctionCall"], request.args["toolConfirmation"]
    assert (original["name"], original["args"]) == ("deploy", {"env": "qa"})
    assert confirmation["hint"] == "Deploys need a human."
    assert confirmation["payload"]["request_id"] == s.plugin.pending[0]
    assert tools.names() == ["search"] and len(s.model.requests) == 1  # paused, not summarized


async def test_a_confirmed_call_runs_exactly_once_and_the_model_sees_its_result() -> None:
    tools = Tools()
    s, request = await pause_on_deploy(tools, "deployed", "again")
    await s.send(confirm(request, True))
    assert s.model.results_seen()["c1"] == {"result": "deployed to qa"}
    await s.send(confirm(request, True))  # a client that sends the answer twice
    assert tools.ran.count(("deploy", {"env": "qa"})) == 1
    [approved] = s.plugin.enforcer.guard.approvals.list("consumed")
    assert approved.resolved_by == "reviewer"


async def test_a_confirmation_replayed_after_a_crash_does_not_run_the_call_again() -> None:
    tools = Tools()
    s, request = await pause_on_deploy(tools, "awaiting approval")
    tools.dies_in.add("deploy")
    with pytest.raises(ProcessDied):  # the process dies while the confirmed call runs
        await s.send(confirm(request, True))
    # The app resumes the session with the confirmation that let the call run then.
    events = await s.send(confirm(request, True))
    assert tools.ran.count(("deploy", {"env": "qa"})) == 1
    approvals = s.plugin.enforcer.guard.approvals
    [doubt] = [r for r in approvals.list() if r.in_doubt]
    assert doubt.status is Status.PENDING  # only a person's answer to it can settle it
    [said] = [p.function_response.response["error"] for e in events
              for p in (e.content.parts if e.content else []) if p.function_response]
    assert "may already have run" in said and doubt.id in said


async def test_a_rejected_confirmation_gives_the_model_the_reason() -> None:
    tools = Tools()
    s, request = await pause_on_deploy(tools, "understood")
    await s.send(confirm(request, False, reason="not on Fridays", by="carol"))
    assert "deploy" not in tools.names()
    assert "denied by carol: not on Fridays" in s.model.results_seen()["c1"]["error"]


async def test_a_confirmation_may_edit_the_call_which_the_policy_checks_again() -> None:
    tools = Tools()
    s, request = await pause_on_deploy(tools, "deployed")
    await s.send(confirm(request, True, edit={"env": "staging"}, by="carol"))
    assert tools.ran[-1] == ("deploy", {"env": "staging"})


async def test_the_sessions_own_user_cannot_approve_the_call() -> None:
    tools = Tools()
    s, request = await pause_on_deploy(tools, "ok")
    await s.send(confirm(request, True, by="bob"))  # bob is the session's user: the principal
    assert "deploy" not in tools.names()
    assert "cannot approve it" in s.model.results_seen()["c1"]["error"]


async def test_an_approval_given_elsewhere_lets_the_confirmed_call_run() -> None:
    tools = Tools()
    s, request = await pause_on_deploy(tools, "deployed")
    await s.plugin.answer(s.plugin.pending[0], True, by="alice")  # `callwarden approvals approve`
    await s.send(confirm(request, False))  # the earlier resolution stands
    assert tools.ran.count(("deploy", {"env": "qa"})) == 1


async def test_wait_lets_an_answer_given_elsewhere_settle_the_call() -> None:
    tools = Tools()
    s = session(tools, model([call("c1", "deploy", env="qa")], "deployed"), wait=TIMEOUT)
    approvals = s.plugin.enforcer.guard.approvals

    async def reviewer() -> None:  # stands in for `callwarden approvals approve ID` elsewhere
        while not approvals.list("pending"):
            await asyncio.sleep(0.01)
        await approvals.aapprove(approvals.list("pending")[0].id, by="alice")

    events, _ = await asyncio.wait_for(asyncio.gather(s.send("deploy"), reviewer()), TIMEOUT)
    assert tools.ran == [("deploy", {"env": "qa"})] and not confirmations(events)


# -- halt ---------------------------------------------------------------------------------------

async def test_a_halted_session_ends_its_next_run_at_once_until_the_halt_is_cleared() -> None:
    tools = Tools()
    s = session(tools, model([call("c1", "wipe_disk", device="sda")],
                             [call("c2", "read_file", path="a.txt")], "read it"))
    await s.send("wipe")
    events = await s.send("now read a.txt")
    assert len(s.model.requests) == 1
    assert "callwarden halted the run" in events[-1].content.parts[0].text
    s.plugin.clear_halt(s.id)
    await s.send("now read a.txt")
    assert tools.names() == ["read_file"]


async def test_a_halt_in_one_session_leaves_other_sessions_running() -> None:
    tools = Tools()
    llm = model([call("c1", "wipe_disk", device="sda")], [call("c2", "read_file", path="a")],
                "done")
    first = session(tools, llm)
    second = Session(llm, first.plugin, tools, agent=first.agent, user="dora")
    await first.send("wipe")
    await second.send("read")
    assert tools.names() == ["read_file"] and first.plugin.halts.keys() == {first.id}


async def test_a_halt_stops_the_rest_of_a_sequential_workflow() -> None:
    tools = Tools()
    first = LlmAgent(name="first", model=model([call("c1", "wipe_disk", device="sda")]),
                     tools=tools.all())
    second_model = model([call("c2", "read_file", path="a")], "done")
    second = LlmAgent(name="second", model=second_model, tools=tools.all())
    s = Session(first.model, plugin(), tools, agent=Workflow(name="ops",
                                                             edges=[("START", first, second)]))
    await s.send("go")
    assert tools.names() == [] and second_model.requests == []


async def test_an_output_halt_withholds_the_result_and_halts() -> None:
    policy = {"version": 1, "rules": [{"id": "leak", "on": "output", "if":
              "args.output.contains('secret_access_key')", "effect": "halt"}]}
    tools = Tools()
    s = session(tools, model([call("c1", "read_file", path="config.ini")], "summary"), policy)
    events = await s.send("read")
    shown = json.dumps([e.model_dump(mode="json") for e in events])
    assert "9dKq3" not in shown and len(s.model.requests) == 1
    assert s.plugin.halts[str(s.id)].rule == "leak"


# -- output rules and the audit log ------------------------------------------------------------

async def test_output_rules_redact_the_result_before_the_model_sees_it() -> None:
    s = session(Tools(), model([call("c1", "read_file", path="config.ini")], "ok"))
    await s.send("read")
    shown = s.model.results_seen()["c1"]["result"]
    assert SECRET not in shown and shown.startswith("aws_secret_access_key = [REDACTED")


async def test_the_audit_log_names_the_rules_and_the_call_as_asked(tmp_path) -> None:
    log = tmp_path / "audit.jsonl"
    policy = {**POLICY, "audit": {"sinks": [{"jsonl": str(log)}], "required": True}}
    s = session(Tools(), model([call("c3", "search", query="q", limit=50),
                                call("c6", "read_file", path="config.ini")], "ok"), policy)
    await s.send("go")
    s.plugin.enforcer.guard.close()
    events = [json.loads(line) for line in log.read_text().splitlines()]
    decisions = {e["call_id"]: e for e in events if e["type"] == "decision"}
    outcomes = {e["call_id"]: e for e in events if e["type"] == "outcome"}
    assert decisions["c3"]["rule"] == "cap-search" and decisions["c3"]["framework"] == "google-adk"
    assert decisions["c3"]["args"] == {"query": "q", "limit": 50}
    assert (decisions["c3"]["session"], decisions["c3"]["principal"]) == (s.id, "bob")
    assert outcomes["c3"]["status"] == "ok"
    assert (outcomes["c6"]["status"], outcomes["c6"]["output_rule"]) == ("output_modified",
                                                                       "redact-secrets")


async def test_a_tool_that_raises_is_recorded_and_adk_handles_the_error(tmp_path) -> None:
    log = tmp_path / "audit.jsonl"
    s = session(Tools(), model([call("c1", "flaky", x=1)], "ok"),
                {**POLICY, "audit": {"sinks": [{"jsonl": str(log)}]}})
    with pytest.raises(ConnectionError):
        await s.send("go")
    s.plugin.enforcer.guard.close()
    [outcome] = [e for e in map(json.loads, log.read_text().splitlines())
                 if e["type"] == "outcome"]
    assert outcome["status"] == "error" and "server gone" in outcome["error"]


# -- failing closed -----------------------------------------------------------------------------

async def test_a_policy_that_raises_fails_closed() -> None:
    def broken(call: Any, ctx: Any) -> Any:
        raise RuntimeError("policy bug")

    tools = Tools()
    s = session(tools, model([call("c1", "read_file", path="a.txt")], "ok"),
                Guard(rules=[], policies=[broken]))
    await s.send("go")
    assert tools.names() == [] and "error" in s.model.results_seen()["c1"]


async def test_an_error_inside_the_plugin_fails_closed_without_ending_the_run(monkeypatch) -> None:
    async def explode(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("store down")

    tools = Tools()
    s = session(tools, model([call("c1", "read_file", path="a.txt")], "ok"))
    monkeypatch.setattr(s.plugin.enforcer.guard, "acheck", explode)
    await s.send("go")
    assert tools.names() == []
    assert "could not decide it (RuntimeError: store down)" in \
        s.model.results_seen()["c1"]["error"]


async def test_an_output_that_cannot_be_screened_is_withheld(monkeypatch) -> None:
    def explode(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("detector crashed")

    s = session(Tools(), model([call("c1", "read_file", path="config.ini")], "ok"))
    monkeypatch.setattr(s.plugin.enforcer.guard, "check_output", explode)
    await s.send("go")
    shown = s.model.results_seen()["c1"]
    assert "9dKq3" not in json.dumps(shown) and "could not be checked" in shown["error"]


# -- the sync Runner.run path --------------------------------------------------------------------

def test_the_sync_runner_path_enforces_the_same_way() -> None:
    tools = Tools()
    llm = model([call("c2", "delete_file", path="x"), call("c3", "search", query="q", limit=99)],
                "ok")
    agent = LlmAgent(name="assistant", model=llm, tools=tools.all())
    runner = InMemoryRunner(app=App(name="ops", root_agent=agent, plugins=[plugin()]))
    created = asyncio.run(runner.session_service.create_session(app_name=runner.app_name,
                                                                user_id="bob"))
    done: list[Any] = []
    worker = threading.Thread(target=lambda: done.extend(runner.run(
        user_id="bob", session_id=created.id, new_message=text("go"))), daemon=True)
    worker.start()
    worker.join(TIMEOUT)
    assert not worker.is_alive() and done
    assert tools.ran == [("search", {"query": "q", "limit": 5})]
    assert "not allowed" in llm.results_seen()["c2"]["error"]


# -- the README example -------------------------------------------------------------------------

def test_the_readme_example_runs_and_prints_what_it_says(tmp_path, monkeypatch, capsys) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) == 1
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks[0], str(README), "exec"), {"__name__": "__main__"})
    promised = [line[2:] for line in blocks[0].splitlines() if line.startswith("# ") and "->" in line]
    assert capsys.readouterr().out.splitlines() == promised

