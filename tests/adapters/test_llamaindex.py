"""LlamaIndex 0.14: real agent workflows (FunctionAgent, AgentWorkflow) driven by LlamaIndex's
own MockFunctionCallingLLM, their tools behind a ToolGate; MCP tools from a real stdio server."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from _llamaindex_support import (
    ONE_TURN,
    POLICY,
    TIMEOUT,
    Model,
    Tools,
    agent,
    call,
    run,
)
from _readme import ReadmeSection
from _scenario import DENY_MESSAGE, REQUEST_POLICY, SECRET
from llama_index.core import VectorStoreIndex
from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent, ReActAgent
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import ChatMessage
from llama_index.core.objects import ObjectIndex
from llama_index.core.tools import FunctionTool
from llama_index.core.workflow import Context, JsonPickleSerializer
from llama_index.tools.mcp import BasicMCPClient, McpToolSpec

from callwarden import Approve, Deny, Guard
from callwarden.adapters.llamaindex import (
    GuardedTool,
    ToolApprovalRequest,
    ToolGate,
    guard_agent,
    guard_tools,
)

# LlamaIndex's workflows inspect the agent (a pydantic model) with inspect.getmembers, which
# touches pydantic's deprecated instance attributes.
pytestmark = [
    pytest.mark.filterwarnings("ignore:The `__fields(_set)?__` attribute is deprecated"
                               ":pydantic.warnings.PydanticDeprecatedSince20"),
    pytest.mark.filterwarnings("ignore:Accessing the 'model_(computed_)?fields' attribute on "
                               "the instance is deprecated"
                               ":pydantic.warnings.PydanticDeprecatedSince211"),
]

README = ReadmeSection("LlamaIndex")
SERVER = Path(__file__).parents[1] / "fixtures" / "mcp_files_server.py"


def approve_all(request: Any) -> bool:
    return True


# -- the one-turn scenario --------------------------------------------------------------------

async def test_one_turn_allows_denies_rewrites_approves_and_halts() -> None:
    """Five calls in one model turn: each is settled its own way, and the halt ends the run."""
    tools, model = Tools(), Model(ONE_TURN, "never reached")
    done = await run(agent(ToolGate(POLICY, approver=approve_all), tools, model), "tidy up")
    assert sorted(tools.ran, key=repr) == [("deploy", {"env": "qa"}),
                                           ("read_file", {"path": "notes.txt"}),
                                           ("search", {"query": "callwarden", "limit": 5})]
    out = done.outputs
    assert (out["c1"].content, out["c1"].is_error) == ("contents of notes.txt", False)
    assert (out["c2"].content, out["c2"].is_error) == (DENY_MESSAGE, True)
    assert out["c3"].content == "5 results for callwarden"
    assert out["c4"].content == "deployed to qa"
    # The halted call's output ends the run (return_direct): the model gets no second turn.
    assert done.response.startswith("callwarden halted the run")
    assert "Wiping disks ends the session." in done.response
    assert len(model.requests) == 1 and model.turns == ["never reached"]


async def test_the_model_reads_the_refusal_and_the_rewritten_result_as_tool_messages() -> None:
    tools, model = Tools(), Model(ONE_TURN[:3], "done")
    done = await run(agent(ToolGate(POLICY), tools, model), "tidy up")
    seen = model.results_seen()
    assert seen == {"c1": "contents of notes.txt", "c2": DENY_MESSAGE,
                    "c3": "5 results for callwarden"}
    assert "delete_file" not in tools.names() and done.response == "done"


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_an_approver_approval_runs_the_call_once(kind: str) -> None:
    asked: list[str] = []

    def approve(request: Any) -> Approve:
        asked.append(request.tool)
        return Approve(by="alice")

    async def aapprove(request: Any) -> Approve:
        return approve(request)

    tools, model = Tools(), Model([ONE_TURN[3]], "done")
    gate = ToolGate(POLICY, approver=approve if kind == "sync" else aapprove)
    done = await run(agent(gate, tools, model), "deploy")
    assert asked == ["deploy"] and tools.ran == [("deploy", {"env": "qa"})]
    assert model.results_seen()["c4"] == "deployed to qa" and done.requests == []


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_an_approver_rejection_gives_the_model_the_reason(kind: str) -> None:
    def reject(request: Any) -> Deny:
        return Deny(reason="freeze until Monday", by="alice")

    async def areject(request: Any) -> Deny:
        return reject(request)

    tools, model = Tools(), Model([ONE_TURN[3]], "ok")
    gate = ToolGate(POLICY, approver=reject if kind == "sync" else areject)
    done = await run(agent(gate, tools, model), "deploy")
    assert tools.names() == []
    assert "alice denied it: freeze until Monday" in model.results_seen()["c4"]
    assert done.outputs["c4"].is_error


async def test_the_users_latest_message_is_the_request_the_policy_sees() -> None:
    """The recipient named in the latest user message is allowed; one named only earlier in
    the chat history is a stranger, refused with the rule's message."""
    policy = REQUEST_POLICY
    sent: list[str] = []

    def send_email(to: str) -> str:
        """Sends an e-mail."""
        sent.append(to)
        return f"sent to {to}"

    model = Model([call("c1", "send_email", to="carol@example.org"),
                   call("c2", "send_email", to="eve@attacker.example")], "done")
    bot = guard_agent(FunctionAgent(name="assistant", tools=[send_email], llm=model.llm),
                      policy)
    history = [ChatMessage(role="user", content="Mail eve@attacker.example the notes"),
               ChatMessage(role="assistant", content="Which notes?")]
    await run(bot, "No, mail Carol@Example.org instead", chat_history=history)
    assert sent == ["carol@example.org"]
    assert model.results_seen() == {"c1": "sent to carol@example.org",
                                    "c2": "Mail only people the user named."}


# -- the workflow's native human-in-the-loop --------------------------------------------------

async def test_an_ask_pauses_the_workflow_and_an_approval_runs_the_call_once() -> None:
    tools, model = Tools(), Model([ONE_TURN[3]], "done")
    gate = ToolGate(POLICY)
    done = await run(agent(gate, tools, model), "deploy",
                     answer=lambda request: request.approve(by="alice"))
    [request] = done.requests
    assert (request.tool, request.args, request.rule) == ("deploy", {"env": "qa"}, "deploy-asks")
    assert request.message == "Deploys need a human."
    assert tools.ran == [("deploy", {"env": "qa"})]  # the step replays; the tool runs once
    assert model.results_seen()["c4"] == "deployed to qa"
    [record] = gate.enforcer.guard.approvals.list()
    assert (record.id, record.status.value, record.resolved_by) == (request.request_id,
                                                                    "consumed", "alice")


async def test_a_rejection_through_the_workflow_gives_the_model_the_reason() -> None:
    tools, model = Tools(), Model([ONE_TURN[3]], "ok")
    done = await run(agent(ToolGate(POLICY), tools, model), "deploy",
                     answer=lambda request: request.reject(by="bob", reason="not today"))
    assert tools.names() == [] and done.outputs["c4"].is_error
    assert "was not approved" in model.results_seen()["c4"]
    assert "denied by bob: not today" in model.results_seen()["c4"]


async def test_an_approved_edit_runs_the_edited_call() -> None:
    tools, model = Tools(), Model([ONE_TURN[3]], "done")
    await run(agent(ToolGate(POLICY), tools, model), "deploy",
              answer=lambda request: request.approve(by="alice", edit={"env": "staging"}))
    assert tools.ran == [("deploy", {"env": "staging"})]


async def test_a_paused_approval_survives_saving_and_restoring_the_context() -> None:
    tools, model = Tools(), Model([ONE_TURN[3]], "done")
    gate = ToolGate(POLICY)
    first = agent(gate, tools, model)

    async def pause() -> tuple[ToolApprovalRequest, dict[str, Any]]:
        handler = first.run(user_msg="deploy")
        async for event in handler.stream_events():
            if isinstance(event, ToolApprovalRequest):
                break
        saved = handler.ctx.to_dict(serializer=JsonPickleSerializer())
        await handler.cancel_run()
        return event, saved

    request, saved = await asyncio.wait_for(pause(), TIMEOUT)
    assert tools.ran == []
    # A new process: a new agent and gate over the same policy and approvals store.
    later = agent(ToolGate(gate.enforcer.guard), tools, model)
    handler = later.run(ctx=Context.from_dict(later, saved, serializer=JsonPickleSerializer()))
    handler.ctx.send_event(request.approve(by="alice"))
    await asyncio.wait_for(handler, TIMEOUT)
    assert tools.ran == [("deploy", {"env": "qa"})]


async def test_an_unanswered_pause_times_out_as_not_approved() -> None:
    tools, model = Tools(), Model([ONE_TURN[3]], "ok")
    done = await run(agent(ToolGate(POLICY, answer_timeout=0.05), tools, model), "deploy")
    assert tools.names() == [] and len(done.requests) == 1
    assert "nobody answered approval request" in model.results_seen()["c4"]


# -- approval without a pause: pending, then resumed --------------------------------------------

async def test_without_pause_the_model_is_told_the_pending_request_id() -> None:
    tools, model = Tools(), Model([ONE_TURN[3]], "waiting")
    gate = ToolGate(POLICY, pause=False)
    done = await run(agent(gate, tools, model), "deploy")
    assert tools.names() == [] and done.requests == [] and len(gate.pending) == 1
    assert f"Approval request {gate.pending[0]} is pending" in model.results_seen()["c4"]


async def test_a_pending_call_approved_elsewhere_runs_once_when_asked_again() -> None:
    tools = Tools()
    gate = ToolGate(POLICY, pause=False)
    model = Model([ONE_TURN[3]], "waiting", [call("c9", "deploy", env="qa")], "done",
                  [call("c10", "deploy", env="qa")], "again")
    await run(agent(gate, tools, model), "deploy")
    gate.enforcer.guard.approvals.approve(gate.pending[0], by="alice")  # = the CLI
    await run(agent(gate, tools, model), "it is approved")
    await run(agent(gate, tools, model), "once more")
    assert tools.ran == [("deploy", {"env": "qa"})]
    assert "is pending" in model.results_seen()["c10"]  # the third call is a new request


async def test_wait_lets_an_answer_given_elsewhere_settle_the_call() -> None:
    tools, model = Tools(), Model([ONE_TURN[3]], "done")
    gate = ToolGate(POLICY, wait=TIMEOUT)
    approvals = gate.enforcer.guard.approvals

    async def reviewer() -> None:  # stands in for `callwarden approvals approve ID` elsewhere
        while not approvals.list("pending"):
            await asyncio.sleep(0.01)
        await approvals.aapprove(approvals.list("pending")[0].id, by="alice")

    done, _ = await asyncio.gather(run(agent(gate, tools, model), "deploy"), reviewer())
    assert tools.ran == [("deploy", {"env": "qa"})] and done.requests == []


# -- halt -------------------------------------------------------------------------------------

async def test_after_a_halt_every_run_ends_at_its_first_call_until_cleared() -> None:
    tools = Tools()
    gate = ToolGate(POLICY)
    model = Model([call("c1", "wipe_disk", device="sda")],
                  [call("c2", "read_file", path="a.txt")],
                  [call("c3", "read_file", path="a.txt")], "read it")
    first = await run(agent(gate, tools, model), "wipe")
    assert gate.halted is not None and gate.halted.rule == "stop-on-wipe"
    second = await run(agent(gate, tools, model), "read")
    assert second.response.startswith("callwarden halted the run") and tools.names() == []
    gate.clear_halt()
    third = await run(agent(gate, tools, model), "read")
    assert tools.names() == ["read_file"] and third.response == "read it"
    assert first.response == second.response


async def test_only_the_halted_call_ends_the_run_not_a_sibling_that_ran() -> None:
    """The agent reads tool.metadata.return_direct after each call, in that call's task."""
    gate = ToolGate(POLICY)
    by_name = {t.metadata.name: t for t in gate.tools(Tools().all())}
    sibling_ran, halted = asyncio.Event(), asyncio.Event()

    async def sibling() -> bool:
        output = await by_name["read_file"].acall(path="a.txt")
        sibling_ran.set()
        await halted.wait()  # the halt happens while this call's step is still finishing
        return output.content == "contents of a.txt" and by_name["read_file"].metadata.return_direct

    async def halting() -> bool:
        await sibling_ran.wait()
        output = await by_name["wipe_disk"].acall(device="sda")
        halted.set()
        return output.content.startswith("callwarden halted") and \
            by_name["wipe_disk"].metadata.return_direct

    ends_run = await asyncio.wait_for(asyncio.gather(sibling(), halting()), TIMEOUT)
    assert ends_run == [False, True] and gate.halted is not None


# -- failing closed ---------------------------------------------------------------------------

async def test_a_policy_that_raises_fails_closed() -> None:
    def broken(call: Any, ctx: Any) -> Any:
        raise RuntimeError("policy bug")

    tools, model = Tools(), Model([call("c1", "read_file", path="a.txt")], "ok")
    done = await run(agent(ToolGate(Guard(rules=[], policies=[broken])), tools, model), "go")
    assert tools.names() == [] and done.outputs["c1"].is_error


async def test_an_error_while_deciding_fails_closed(monkeypatch) -> None:
    async def explode(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("store down")

    tools, model = Tools(), Model([call("c1", "read_file", path="a.txt")], "ok")
    gate = ToolGate(POLICY)
    monkeypatch.setattr(gate.enforcer.guard, "acheck", explode)
    await run(agent(gate, tools, model), "go")
    assert tools.names() == []
    assert "could not decide it (RuntimeError: store down)" in model.results_seen()["c1"]


async def test_a_tool_that_raises_reaches_the_model_as_an_error_and_is_audited(tmp_path) -> None:
    log = tmp_path / "audit.jsonl"

    def flaky(path: str) -> str:
        """Always fails."""
        raise ConnectionError("server gone")

    gate = ToolGate({**POLICY, "audit": {"sinks": [{"jsonl": str(log)}]}})
    model = Model([call("c1", "flaky", path="a")], "ok")
    await run(FunctionAgent(tools=gate.tools([flaky]), llm=model.llm), "go")
    gate.enforcer.guard.close()
    assert "server gone" in model.results_seen()["c1"]
    outcome = [e for e in map(json.loads, log.read_text().splitlines()) if e["type"] == "outcome"]
    assert outcome[0]["status"] == "error"


# -- output rules and the audit ---------------------------------------------------------------

async def test_output_rules_redact_the_result_before_the_model_sees_it() -> None:
    tools, model = Tools(), Model([call("c1", "read_file", path="config.ini")], "ok")
    done = await run(agent(ToolGate(POLICY), tools, model), "go")
    seen = model.results_seen()["c1"]
    assert "9dKq3" not in seen and "REDACTED" in seen
    assert "9dKq3" not in str(done.outputs["c1"].raw_output)  # nor in what the app streams


async def test_an_output_halt_withholds_the_result_and_ends_the_run() -> None:
    policy = {"version": 1, "rules": [{"id": "leak", "on": "output", "if":
              "args.output.contains('secret_access_key')", "effect": "halt"}]}
    tools, model = Tools(), Model([call("c1", "read_file", path="config.ini")], "never")
    gate = ToolGate(policy)
    done = await run(agent(gate, tools, model), "go")
    assert tools.names() == ["read_file"] and SECRET not in done.response
    assert done.response.startswith("callwarden halted the run") and gate.halted is not None
    assert len(model.requests) == 1


async def test_the_audit_log_names_the_rules_and_the_agent(tmp_path) -> None:
    log = tmp_path / "audit.jsonl"
    gate = ToolGate({**POLICY, "audit": {"sinks": [{"jsonl": str(log)}], "required": True}})
    model = Model([call("c3", "search", query="q", limit=50),
                   call("c1", "read_file", path="config.ini")], "ok")
    await run(agent(gate, Tools(), model), "go")
    gate.enforcer.guard.close()
    events = [json.loads(line) for line in log.read_text().splitlines()]
    decided = {e["tool"]: e for e in events if e["type"] == "decision"}
    assert (decided["search"]["rule"], decided["search"]["effect"]) == ("cap-search", "modify")
    assert decided["search"]["args"] == {"query": "q", "limit": 50}
    assert {e["framework"] for e in decided.values()} == {"llamaindex"}
    assert {e["agent"] for e in decided.values()} == {"assistant"}
    outcomes = [e for e in events if e["type"] == "outcome"]
    assert sorted((e["status"], e.get("output_rule")) for e in outcomes) == [
        ("ok", None), ("output_modified", "redact-secrets")]


# -- the sync path, AgentWorkflow, guard_agent ------------------------------------------------

def test_the_sync_path_decides_too() -> None:
    tools = Tools()
    by_name = {t.metadata.name: t for t in guard_tools(tools.all(), POLICY)}
    assert by_name["delete_file"].call(path="x").is_error
    assert by_name["search"].call(query="q", limit=99).content == "5 results for q"
    pending = by_name["deploy"].call(env="qa")
    assert pending.is_error and "is pending" in pending.content
    assert by_name["read_file"](path="config.ini").content.count("REDACTED") == 1
    assert tools.names() == ["search", "read_file"]


async def test_guard_agent_guards_every_agent_of_an_agent_workflow(tmp_path) -> None:
    log = tmp_path / "audit.jsonl"
    tools = Tools()
    model = Model(ONE_TURN[:3], "done")
    ops = FunctionAgent(name="ops", description="does ops", tools=tools.all(), llm=model.llm)
    workflow = guard_agent(AgentWorkflow(agents=[ops]),
                           {**POLICY, "audit": {"sinks": [{"jsonl": str(log)}]}})
    assert all(isinstance(t, GuardedTool) for t in ops.tools or [])
    await run(workflow, "tidy up")
    assert sorted(tools.names()) == ["read_file", "search"]
    assert model.results_seen()["c2"] == DENY_MESSAGE
    agents = {json.loads(line)["agent"] for line in log.read_text().splitlines()}
    assert agents == {"ops"}


# ReActAgent's own step asks ctx.is_running, which llama-index-workflows deprecates.
@pytest.mark.filterwarnings("ignore:is_running called from within a step:DeprecationWarning")
async def test_a_react_agent_reads_the_refusal_as_its_observation() -> None:
    tools = Tools()
    model = Model('Thought: delete it.\nAction: delete_file\nAction Input: {"path": "a.txt"}',
                  "Thought: I can answer.\nAnswer: a.txt stays")
    done = await run(ToolGate(POLICY).agent(ReActAgent(name="r", tools=tools.all(),
                                                       llm=model.llm)), "go")
    assert tools.names() == [] and done.response == "a.txt stays"
    assert model.requests[-1][-1].content == f"Observation: {DENY_MESSAGE}"


async def test_tools_from_a_tool_retriever_come_back_guarded() -> None:
    tools = Tools()
    model = Model([call("c2", "delete_file", path="x"), call("c1", "read_file", path="a")], "ok")
    index = ObjectIndex.from_objects(tools.all(), index_cls=VectorStoreIndex,
                                     embed_model=MockEmbedding(embed_dim=8))
    retrieving = FunctionAgent(name="r", llm=model.llm,
                               tool_retriever=index.as_retriever(similarity_top_k=5))
    await run(ToolGate(POLICY).agent(retrieving), "go")
    assert tools.ran == [("read_file", {"path": "a"})]
    assert model.results_seen()["c2"] == DENY_MESSAGE


def test_guarded_tools_keep_the_inner_tools_schema() -> None:
    [inner] = Tools().all()[:1]
    [guarded] = guard_tools([inner], POLICY)
    assert guarded.metadata == inner.metadata and not guarded.metadata.return_direct
    assert guarded.metadata.to_openai_tool() == inner.metadata.to_openai_tool()
    assert guarded.inner is inner


def test_only_tools_and_functions_can_be_guarded() -> None:
    with pytest.raises(TypeError, match="LlamaIndex tool or a function"):
        ToolGate(POLICY).tool(42)
    with pytest.raises(TypeError, match="AgentWorkflow"):
        ToolGate(POLICY).agent(FunctionTool.from_defaults(lambda: None, name="x"))


# -- MCP: a real server over stdio through llama-index-tools-mcp --------------------------------

def _mcp_tools(log: Path) -> McpToolSpec:
    log.touch()
    return McpToolSpec(BasicMCPClient(sys.executable, args=[str(SERVER), str(log)],
                                      timeout=TIMEOUT))


def _ran(log: Path) -> list[tuple[str, dict[str, Any]]]:
    return [(row["tool"], row["args"]) for row in map(json.loads, log.read_text().splitlines())]


async def test_mcp_tools_are_allowed_denied_rewritten_and_halted(tmp_path) -> None:
    log = tmp_path / "ran.jsonl"
    mcp_tools = await asyncio.wait_for(_mcp_tools(log).to_tool_list_async(), TIMEOUT)
    model = Model([call("m1", "read_file", path="notes.txt"),
                   call("m2", "delete_file", path="notes.txt"),
                   call("m3", "search", query="invoices", limit=50),
                   call("m4", "wipe", disk="sda")], "never")
    gate = ToolGate(POLICY)
    done = await run(FunctionAgent(tools=gate.tools(mcp_tools), llm=model.llm), "go")
    assert sorted(_ran(log), key=repr) == [("read_file", {"path": "notes.txt"}),
                                           ("search", {"query": "invoices", "limit": 5})]
    assert done.outputs["m2"].content == DENY_MESSAGE and done.outputs["m2"].is_error
    assert "5 results for invoices" in done.outputs["m3"].content
    assert done.response.startswith("callwarden halted the run") and gate.halted is not None


async def test_an_mcp_call_pauses_for_approval_and_reaches_the_server_once(tmp_path) -> None:
    log = tmp_path / "ran.jsonl"
    mcp_tools = await asyncio.wait_for(_mcp_tools(log).to_tool_list_async(), TIMEOUT)
    model = Model([call("m1", "deploy", env="qa"), call("m2", "env_dump")], "done")
    policy = {**POLICY, "rules": [*POLICY["rules"], {
        "id": "redact-mcp", "on": "output", "match": {"tool": "env_dump"}, "secrets": True,
        "effect": "modify"}]}
    done = await run(FunctionAgent(tools=guard_tools(mcp_tools, policy), llm=model.llm), "go",
                     answer=lambda request: request.approve(by="alice"))
    assert [r.tool for r in done.requests] == ["deploy"]
    assert sorted(_ran(log), key=repr) == [("deploy", {"env": "qa"}), ("env_dump", {})]
    seen = model.results_seen()
    assert "deployed to qa" in seen["m1"]
    assert "ghp_A1b2" not in seen["m2"] and "HOME=/home/dev" in seen["m2"]


# -- the README example ----------------------------------------------------------------------

def test_the_readme_example_runs_and_prints_what_it_says(tmp_path, monkeypatch, capsys) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) == 1
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks[0], str(README), "exec"), {"__name__": "__main__"})
    promised = [line[2:] for line in blocks[0].splitlines() if line.startswith("# ") and "->" in line]
    assert capsys.readouterr().out.splitlines() == promised
