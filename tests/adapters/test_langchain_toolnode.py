"""The plain wrappers on a bare ``langgraph.prebuilt.ToolNode`` in a hand-built graph."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any

import pytest
from _langchain_support import POLICY, SECRET, Tools, turn
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command

from callwarden import Guard, RunHalted
from callwarden.adapters.langchain import (
    CallwardenMiddleware,
    GraphRunHalted,
    atool_call_wrapper,
    tool_call_wrapper,
)
from callwarden.audit import Auditor, CallableSink

THREAD = {"configurable": {"thread_id": "thread-1"}}


def within(seconds: float, fn: Any, *args: Any) -> Any:
    """Runs ``fn`` in a thread so that a hang fails the test instead of blocking it."""
    pool = ThreadPoolExecutor(1)
    try:
        return pool.submit(fn, *args).result(timeout=seconds)
    finally:
        pool.shutdown(wait=False)


def tool_node(tools: Tools, guard: Any = POLICY, **node_options: Any) -> ToolNode:
    middleware = CallwardenMiddleware(guard)
    return ToolNode(tools.all, wrap_tool_call=tool_call_wrapper(middleware),
                    awrap_tool_call=atool_call_wrapper(middleware), **node_options)


def graph(node: ToolNode, checkpointer: Any = None) -> Any:
    """START -> tools -> END: the input's last AI message is the tool calls to run."""
    builder = StateGraph(MessagesState)
    builder.add_node("tools", node)
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    return builder.compile(checkpointer=checkpointer)


def by_id(messages: list[Any]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}


ONE_TURN = turn(("read_file", {"path": "README.md"}), ("delete_file", {"path": "/etc/hosts"}),
                ("search", {"query": "cats", "limit": 50}))


def test_a_bare_tool_node_denies_rewrites_and_allows() -> None:
    tools = Tools()
    out = within(10, graph(tool_node(tools)).invoke, {"messages": [ONE_TURN]})
    results = by_id(out["messages"])
    assert sorted(tools.ran, key=str) == [
        ("read_file", {"path": "README.md"}), ("search", {"query": "cats", "limit": 5})]
    assert results["call_delete_file"].status == "error"
    assert results["call_search"].content == "5 results for cats"


async def test_a_bare_tool_node_denies_rewrites_and_allows_async() -> None:
    tools = Tools()
    out = await asyncio.wait_for(graph(tool_node(tools)).ainvoke({"messages": [ONE_TURN]}), 10)
    assert sorted(tools.names()) == ["read_file", "search"]
    assert by_id(out["messages"])["call_delete_file"].content.startswith("Deleting files")


def test_halt_propagates_through_handle_tool_errors_true() -> None:
    tools = Tools()
    app = graph(tool_node(tools, handle_tool_errors=True))
    with pytest.raises(GraphRunHalted) as raised:
        within(10, app.invoke, {"messages": [turn(("wipe_db", {"name": "main"}))]})
    assert raised.value.decision.rule == "no-wipe"
    assert tools.ran == []


async def test_halt_propagates_through_handle_tool_errors_true_async() -> None:
    tools = Tools()
    app = graph(tool_node(tools, handle_tool_errors=True))
    with pytest.raises(RunHalted):
        await asyncio.wait_for(app.ainvoke({"messages": [turn(("wipe_db", {"name": "x"}))]}), 10)
    assert tools.ran == []


def test_halt_on_output_propagates_through_handle_tool_errors_true() -> None:
    tools = Tools()
    app = graph(tool_node(tools, handle_tool_errors=True))
    with pytest.raises(GraphRunHalted):
        within(10, app.invoke, {"messages": [turn(("dump_keys", {"name": "prod"}))]})


def test_ordinary_tool_errors_are_still_handled_by_the_tool_node() -> None:
    seen: list[dict[str, Any]] = []

    @tool
    def flaky(n: int) -> str:
        """Fails."""
        raise ValueError("flaky failed")

    guard = Guard(audit=Auditor([CallableSink(seen.append)]))
    node = ToolNode([flaky], wrap_tool_call=tool_call_wrapper(guard), handle_tool_errors=True)
    out = within(10, graph(node).invoke, {"messages": [turn(("flaky", {"n": 1}))]})
    guard.close()
    assert by_id(out["messages"])["call_flaky"].status == "error"
    assert [e["status"] for e in seen if e["type"] == "outcome"] == ["error"]


def test_ask_in_a_tool_node_graph_pauses_and_resumes_once() -> None:
    tools = Tools()
    app = graph(tool_node(tools), checkpointer=InMemorySaver())
    state = within(10, app.invoke, {"messages": [turn(("deploy", {"env": "prod"}))]}, THREAD)
    assert state["__interrupt__"][0].value["tool"] == "deploy"
    assert tools.ran == []
    state = within(10, app.invoke, Command(resume=True), THREAD)
    assert tools.ran == [("deploy", {"env": "prod"})]
    assert by_id(state["messages"])["call_deploy"].content == "deployed to prod"


async def test_ask_in_a_tool_node_graph_pauses_and_resumes_once_async() -> None:
    tools = Tools()
    app = graph(tool_node(tools), checkpointer=InMemorySaver())
    state = await asyncio.wait_for(
        app.ainvoke({"messages": [turn(("deploy", {"env": "prod"}))]}, THREAD), 10)
    assert "__interrupt__" in state and tools.ran == []
    await asyncio.wait_for(app.ainvoke(Command(resume={"approve": True, "by": "alice"}),
                                       THREAD), 10)
    assert tools.ran == [("deploy", {"env": "prod"})]


def test_ask_without_a_checkpointer_pauses_and_never_runs_the_tool() -> None:
    tools = Tools()
    state = within(10, graph(tool_node(tools)).invoke,
                   {"messages": [turn(("deploy", {"env": "prod"}))]})
    assert state["__interrupt__"][0].value["tool"] == "deploy"
    assert tools.ran == []


def test_a_sync_wrapper_alone_also_serves_the_async_path() -> None:
    tools = Tools()
    node = ToolNode(tools.all, wrap_tool_call=tool_call_wrapper(POLICY))
    out = asyncio.run(asyncio.wait_for(graph(node).ainvoke({"messages": [ONE_TURN]}), 10))
    assert sorted(tools.names()) == ["read_file", "search"]
    assert by_id(out["messages"])["call_delete_file"].status == "error"


def test_wrappers_built_from_one_middleware_share_its_guard() -> None:
    middleware = CallwardenMiddleware(POLICY)
    sync, async_ = tool_call_wrapper(middleware), atool_call_wrapper(middleware)
    assert sync.__self__ is async_.__self__ is middleware  # type: ignore[attr-defined]


def test_options_go_to_the_middleware_not_to_a_shared_one() -> None:
    with pytest.raises(TypeError, match="CallwardenMiddleware"):
        tool_call_wrapper(CallwardenMiddleware(POLICY), approver=lambda request: True)


def test_an_unregistered_tool_is_still_decided_first() -> None:
    node = ToolNode([], wrap_tool_call=tool_call_wrapper(POLICY))
    message = AIMessage(content="", tool_calls=[
        {"name": "delete_file", "args": {"path": "x"}, "id": "c1", "type": "tool_call"}])
    out = within(10, graph(node).invoke, {"messages": [message]})
    assert by_id(out["messages"])["c1"].content.startswith("Deleting files is not allowed")


def test_output_rules_screen_the_messages_a_tool_returns_in_a_command() -> None:
    @tool
    def lookup(name: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
        """Looks a secret up and answers with a Command."""
        return Command(update={"messages": [ToolMessage(SECRET, tool_call_id=tool_call_id)]})

    guard = Guard(rules=[{"id": "redact", "on": "output", "match": {"tool": "lookup"},
                          "secrets": True, "effect": "modify"}])
    node = ToolNode([lookup], wrap_tool_call=tool_call_wrapper(guard))
    out = within(10, graph(node).invoke, {"messages": [turn(("lookup", {"name": "db"}))]})
    shown = by_id(out["messages"])["call_lookup"].content
    assert "9dKq3" not in shown and "REDACTED" in shown
