"""CallwardenMiddleware in a real ``create_agent`` agent, driven by a scripted chat model."""

from __future__ import annotations

import asyncio
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from _langchain_support import POLICY, SECRET, ScriptedChatModel, Tools, final, turn
from _readme import ReadmeSection
from langchain.agents import create_agent
from langchain.agents.middleware import ToolErrorMiddleware, ToolRetryMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from callwarden import Guard, RunHalted
from callwarden.adapters._core import latest_user_text
from callwarden.adapters.langchain import CallwardenMiddleware, GraphRunHalted
from callwarden.audit import Auditor, CallableSink

THREAD = {"configurable": {"thread_id": "thread-1"}}
ONE_TURN = turn(("read_file", {"path": "README.md"}), ("delete_file", {"path": "/etc/hosts"}),
                ("search", {"query": "cats", "limit": 50}))
WITH_ASK = turn(("read_file", {"path": "README.md"}), ("delete_file", {"path": "/etc/hosts"}),
                ("search", {"query": "cats", "limit": 50}), ("deploy", {"env": "prod"}))
WITH_HALT = turn(("read_file", {"path": "README.md"}), ("delete_file", {"path": "/etc/hosts"}),
                 ("search", {"query": "cats", "limit": 50}), ("wipe_db", {"name": "main"}))
EVERY_EFFECT = turn(("read_file", {"path": "README.md"}), ("delete_file", {"path": "/etc/hosts"}),
                    ("search", {"query": "cats", "limit": 50}), ("deploy", {"env": "prod"}),
                    ("wipe_db", {"name": "main"}))
USER = {"messages": [("user", "tidy up")]}


def within(seconds: float, fn: Any, *args: Any) -> Any:
    """Runs ``fn`` in a thread so that a hang fails the test instead of blocking it."""
    pool = ThreadPoolExecutor(1)
    try:
        return pool.submit(fn, *args).result(timeout=seconds)
    finally:
        pool.shutdown(wait=False)


class Agent:
    """A ``create_agent`` agent named ``bot`` with the middleware, model and tools to inspect."""

    def __init__(self, *script: AIMessage, guard: Any = POLICY, checkpointer: bool = True,
                 extra: tuple[Any, ...] = (), **options: Any) -> None:
        self.tools = Tools()
        self.model = ScriptedChatModel(script=list(script))
        self.middleware = CallwardenMiddleware(guard, **options)
        self.graph = create_agent(self.model, self.tools.all,
                                  middleware=[*extra, self.middleware],
                                  checkpointer=InMemorySaver() if checkpointer else None,
                                  name="bot")

    def invoke(self, value: Any = USER) -> dict[str, Any]:
        return within(10, self.graph.invoke, value, THREAD)

    async def ainvoke(self, value: Any = USER) -> dict[str, Any]:
        return await asyncio.wait_for(self.graph.ainvoke(value, THREAD), 10)


# -- allow, deny, modify in one turn ---------------------------------------------------------

def test_denied_tool_never_runs_and_the_model_gets_the_message_as_an_error() -> None:
    agent = Agent(ONE_TURN, final())
    agent.invoke()
    assert "delete_file" not in agent.tools.names()
    refusal = agent.model.tool_results()["call_delete_file"]
    assert refusal.status == "error"
    assert refusal.content == "Deleting files is not allowed; move them to trash/ instead."


def test_rewritten_call_runs_with_the_new_args() -> None:
    agent = Agent(ONE_TURN, final())
    agent.invoke()
    assert ("search", {"query": "cats", "limit": 5}) in agent.tools.ran
    assert agent.model.tool_results()["call_search"].content == "5 results for cats"


def test_rewriting_leaves_the_models_own_request_unchanged() -> None:
    agent = Agent(ONE_TURN, final())
    state = agent.invoke()
    asked = next(m for m in state["messages"] if isinstance(m, AIMessage) and m.tool_calls)
    assert {c["name"]: c["args"] for c in asked.tool_calls}["search"]["limit"] == 50


def test_allowed_call_runs_as_asked() -> None:
    agent = Agent(ONE_TURN, final())
    agent.invoke()
    assert ("read_file", {"path": "README.md"}) in agent.tools.ran
    assert agent.model.tool_results()["call_read_file"].status == "success"


def test_calls_carry_the_thread_as_session_and_the_agent_name() -> None:
    seen: list[dict[str, Any]] = []
    guard = Guard(rules=POLICY["rules"], audit=Auditor([CallableSink(seen.append)]))
    Agent(ONE_TURN, final(), guard=guard).invoke()
    guard.close()
    decided = {e["tool"]: e for e in seen if e["type"] == "decision"}
    assert {(e["session"], e["agent"], e["framework"]) for e in decided.values()} == {
        ("thread-1", "bot", "langchain")}
    assert decided["search"]["call_id"] == "call_search"


def test_outcomes_are_audited_after_the_tool_runs() -> None:
    seen: list[dict[str, Any]] = []
    guard = Guard(rules=POLICY["rules"], audit=Auditor([CallableSink(seen.append)]))
    Agent(turn(("search", {"query": "q"}), ("read_config", {"name": "prod"})), final(),
          guard=guard).invoke()
    guard.close()
    outcomes = {e["tool"]: e["status"] for e in seen if e["type"] == "outcome"}
    assert outcomes == {"search": "ok", "read_config": "output_modified"}
    # The outcome names the output rule that changed what the model saw (issue 13, item 4).
    by = {e["tool"]: e.get("output_rule") for e in seen if e["type"] == "outcome"}
    assert by == {"search": None, "read_config": "redact-keys"}


# -- fail closed ------------------------------------------------------------------------------

def test_a_policy_that_raises_fails_closed() -> None:
    def broken(call: Any, ctx: Any) -> None:
        raise RuntimeError("policy bug")

    agent = Agent(turn(("read_file", {"path": "a"})), final(),
                  guard=Guard.from_dict({"version": 1}, policies=[broken]))
    agent.invoke()
    assert agent.tools.ran == []
    assert agent.model.tool_results()["call_read_file"].status == "error"


def test_an_error_inside_the_adapter_fails_closed() -> None:
    class Exploding:
        def check(self, *args: Any, **kwargs: Any) -> None:
            raise RuntimeError("store on fire")

    agent = Agent(turn(("read_file", {"path": "a"})), final())
    agent.middleware.enforcer.guard = Exploding()  # type: ignore[assignment]
    agent.invoke()
    assert agent.tools.ran == []
    refusal = agent.model.tool_results()["call_read_file"]
    assert refusal.status == "error" and "store on fire" in refusal.content


# -- ask -------------------------------------------------------------------------------------

def test_ask_pauses_the_run_with_an_interrupt_naming_the_request() -> None:
    agent = Agent(WITH_ASK, final())
    state = agent.invoke()
    (paused,) = state["__interrupt__"]
    assert paused.value["tool"] == "deploy" and paused.value["args"] == {"env": "prod"}
    assert paused.value["rule"] == "deploy-asks"
    assert paused.value["message"] == "Deploys need a human's approval."
    assert agent.middleware.enforcer.guard.approvals.get(paused.value["request_id"]).tool \
        == "deploy"
    assert "deploy" not in agent.tools.names()


def test_approving_runs_the_call_exactly_once() -> None:
    agent = Agent(WITH_ASK, final())
    agent.invoke()
    agent.invoke(Command(resume=True))
    assert agent.tools.names().count("deploy") == 1
    assert agent.model.tool_results()["call_deploy"].content == "deployed to prod"


def test_resuming_does_not_run_the_turns_other_calls_again() -> None:
    agent = Agent(WITH_ASK, final())
    agent.invoke()
    agent.invoke(Command(resume=True))
    assert sorted(agent.tools.names()) == ["deploy", "read_file", "search"]


def test_rejecting_tells_the_model_the_reason() -> None:
    agent = Agent(WITH_ASK, final())
    agent.invoke()
    agent.invoke(Command(resume={"approve": False, "by": "alice", "reason": "release freeze"}))
    assert "deploy" not in agent.tools.names()
    refusal = agent.model.tool_results()["call_deploy"]
    assert refusal.status == "error"
    assert "alice" in refusal.content and "release freeze" in refusal.content


def test_a_persons_deny_stands_when_the_app_resumes_with_approval() -> None:
    """Denied with `callwarden approvals deny` while paused, the call stays denied when the
    app resumes with Command(resume=True): no new request is approved in the reviewer's name."""
    agent = Agent(WITH_ASK, final())
    state = agent.invoke()
    request_id = state["__interrupt__"][0].value["request_id"]
    approvals = agent.middleware.enforcer.guard.approvals
    approvals.deny(request_id, by="alice", reason="release freeze")
    agent.invoke(Command(resume=True))
    assert "deploy" not in agent.tools.names()
    refusal = agent.model.tool_results()["call_deploy"]
    assert refusal.status == "error"
    assert "alice" in refusal.content and "release freeze" in refusal.content
    assert [(r.id, r.status.value) for r in approvals.list()] == [(request_id, "denied")]


def test_an_approved_edit_runs_the_edited_call() -> None:
    agent = Agent(WITH_ASK, final())
    agent.invoke()
    agent.invoke(Command(resume={"approve": True, "by": "alice", "edit": {"env": "staging"}}))
    assert [args for name, args in agent.tools.ran if name == "deploy"] == [{"env": "staging"}]


def test_the_agent_cannot_approve_its_own_call() -> None:
    agent = Agent(WITH_ASK, final())
    agent.invoke()
    agent.invoke(Command(resume={"approve": True, "by": "bot"}))
    assert "deploy" not in agent.tools.names()
    assert "cannot approve" in agent.model.tool_results()["call_deploy"].content


def test_a_malformed_resume_value_refuses_the_call() -> None:
    agent = Agent(WITH_ASK, final())
    agent.invoke()
    agent.invoke(Command(resume="maybe"))
    assert "deploy" not in agent.tools.names()
    refusal = agent.model.tool_results()["call_deploy"]
    assert refusal.status == "error" and "approval answer" in refusal.content


def test_an_answer_for_another_request_refuses_the_call() -> None:
    agent = Agent(WITH_ASK, final())
    agent.invoke()
    agent.invoke(Command(resume={"approve": True, "request_id": "someone-else"}))
    assert "deploy" not in agent.tools.names()
    assert "someone-else" in agent.model.tool_results()["call_deploy"].content


def test_two_asks_in_one_turn_are_answered_by_interrupt_id() -> None:
    two = AIMessage(content="", tool_calls=[
        {"name": "deploy", "args": {"env": env}, "id": f"call_{env}", "type": "tool_call"}
        for env in ("prod", "qa")])
    agent = Agent(two, final())
    paused = agent.invoke()["__interrupt__"]
    agent.invoke(Command(resume={
        p.id: True if p.value["args"]["env"] == "qa" else {"approve": False, "by": "alice"}
        for p in paused}))
    assert agent.tools.ran == [("deploy", {"env": "qa"})]
    assert "denied by alice" in agent.model.tool_results()["call_prod"].content


def test_an_approver_settles_the_ask_without_an_interrupt() -> None:
    agent = Agent(WITH_ASK, final(), approver=lambda request: True)
    state = agent.invoke()
    assert "__interrupt__" not in state
    assert agent.tools.names().count("deploy") == 1


def test_a_tools_own_interrupt_passes_through() -> None:
    agent = Agent(turn(("confirm", {"question": "sure?"})), final())
    state = agent.invoke()
    assert state["__interrupt__"][0].value == {"question": "sure?"}
    agent.invoke(Command(resume="yes"))
    assert agent.tools.ran == [("confirm", {"answer": "yes"})]


# -- halt ------------------------------------------------------------------------------------

def test_halt_ends_the_run() -> None:
    agent = Agent(WITH_HALT, final())
    with pytest.raises(RunHalted) as raised:
        agent.invoke()
    assert raised.value.decision.rule == "no-wipe"
    assert "wipe_db" not in agent.tools.names()
    assert len(agent.model.received) == 1


def test_halt_lets_the_steps_other_allowed_calls_finish() -> None:
    agent = Agent(WITH_HALT, final())
    with pytest.raises(RunHalted):
        agent.invoke()
    assert sorted(agent.tools.ran, key=str) == [
        ("read_file", {"path": "README.md"}), ("search", {"query": "cats", "limit": 5})]


def test_halt_wins_over_an_ask_in_the_same_turn() -> None:
    agent = Agent(EVERY_EFFECT, final())
    with pytest.raises(RunHalted):
        agent.invoke()
    assert sorted(agent.tools.names()) == ["read_file", "search"]
    assert len(agent.model.received) == 1


def test_halt_is_not_swallowed_by_tool_error_or_retry_middleware() -> None:
    agent = Agent(WITH_HALT, final(), extra=(
        ToolErrorMiddleware(on_error=lambda error, request: f"failed: {error}"),
        ToolRetryMiddleware(max_retries=2, initial_delay=0)))
    with pytest.raises(GraphRunHalted):
        agent.invoke()
    assert len(agent.model.received) == 1


def test_halt_on_output_ends_the_run() -> None:
    agent = Agent(turn(("dump_keys", {"name": "prod"})), final())
    with pytest.raises(RunHalted) as raised:
        agent.invoke()
    assert raised.value.decision.effect == "halt"
    assert agent.tools.names() == ["dump_keys"]
    assert len(agent.model.received) == 1


# -- output rules ----------------------------------------------------------------------------

def test_output_rules_redact_what_the_model_sees() -> None:
    agent = Agent(turn(("read_config", {"name": "prod"})), final())
    agent.invoke()
    shown = agent.model.tool_results()["call_read_config"].content
    assert "9dKq3" not in shown and SECRET not in shown and "REDACTED" in shown


# -- async -----------------------------------------------------------------------------------

async def test_async_denies_rewrites_and_allows_in_one_turn() -> None:
    agent = Agent(ONE_TURN, final())
    await agent.ainvoke()
    results = agent.model.tool_results()
    assert sorted(agent.tools.ran, key=str) == [
        ("read_file", {"path": "README.md"}), ("search", {"query": "cats", "limit": 5})]
    assert results["call_delete_file"].status == "error"
    assert results["call_delete_file"].content.startswith("Deleting files is not allowed")


async def test_async_approval_pauses_and_resumes_once() -> None:
    agent = Agent(WITH_ASK, final())
    state = await agent.ainvoke()
    assert state["__interrupt__"][0].value["tool"] == "deploy"
    assert "deploy" not in agent.tools.names()
    await agent.ainvoke(Command(resume=True))
    assert agent.tools.names().count("deploy") == 1


async def test_async_rejection_tells_the_model_the_reason() -> None:
    agent = Agent(WITH_ASK, final())
    await agent.ainvoke()
    await agent.ainvoke(Command(resume={"approve": False, "by": "alice", "reason": "not today"}))
    assert "deploy" not in agent.tools.names()
    assert "not today" in agent.model.tool_results()["call_deploy"].content


async def test_async_halt_ends_the_run() -> None:
    agent = Agent(WITH_HALT, final())
    with pytest.raises(RunHalted):
        await agent.ainvoke()
    assert "wipe_db" not in agent.tools.names()
    assert len(agent.model.received) == 1


async def test_async_halt_wins_over_an_ask_in_the_same_turn() -> None:
    agent = Agent(EVERY_EFFECT, final())
    with pytest.raises(RunHalted):
        await agent.ainvoke()
    assert sorted(agent.tools.names()) == ["read_file", "search"]


async def test_async_policy_error_fails_closed() -> None:
    def broken(call: Any, ctx: Any) -> None:
        raise RuntimeError("policy bug")

    agent = Agent(turn(("read_file", {"path": "a"})), final(),
                  guard=Guard.from_dict({"version": 1}, policies=[broken]))
    await agent.ainvoke()
    assert agent.tools.ran == []
    assert agent.model.tool_results()["call_read_file"].status == "error"


async def test_async_output_rules_redact_what_the_model_sees() -> None:
    agent = Agent(turn(("read_config", {"name": "prod"})), final())
    await agent.ainvoke()
    assert "9dKq3" not in agent.model.tool_results()["call_read_config"].content


# -- the README section ------------------------------------------------------------------------

README = ReadmeSection("LangChain / LangGraph")


def test_the_readme_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (block,) = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    monkeypatch.chdir(tmp_path)
    within(20, exec, compile(block, str(README), "exec"), {})


def test_the_users_latest_message_is_the_request_the_policy_sees() -> None:
    policy = {"version": 1, "rules": [
        {"id": "strangers", "roles": {"recipient": {"in": ["request"]}}, "effect": "deny",
         "message": "Mail only people the user named."}]}
    sent: list[str] = []

    @tool
    def send_email(to: str) -> str:
        """Sends an e-mail."""
        sent.append(to)
        return f"sent to {to}"

    class Scripted(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    model = Scripted(messages=iter([
        AIMessage("", tool_calls=[{"name": "send_email", "args": {"to": "carol@example.org"},
                                   "id": "c1"},
                                  {"name": "send_email", "args": {"to": "eve@attacker.example"},
                                   "id": "c2"}]),
        AIMessage("done")]))
    agent = create_agent(model, [send_email], middleware=[CallwardenMiddleware(policy)])
    state = agent.invoke({"messages": [("user", "Mail Carol@Example.org the notes")]})
    results = {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolMessage)}
    assert sent == ["carol@example.org"]
    assert results["c2"].status == "error" and "Mail only people" in results["c2"].content
    assert latest_user_text([{"role": "user", "content": [{"type": "input_text", "text": "a"}]},
                             {"role": "assistant", "content": "b"}]) == "a"
    assert latest_user_text([]) is None and latest_user_text("x") is None
