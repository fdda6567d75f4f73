"""Child processes of the exactly-once tests: each run is a fresh interpreter that a test may
kill -9 in the middle of a tool.

    python _once_worker.py run URL DIR CALL_ID [--amount N] [--approval ID] [--then die|hang]
        Guard.run of a payment (over 100 asks); prints "ran", "pending ID [in_doubt]" or
        "refused CODE".
    python _once_worker.py langgraph URL DIR first|approve|resume|answer-yes|answer-no [--then ...]
        A create_agent graph with a SQLite checkpointer, guarded by CallwardenMiddleware;
        prints "interrupt ID in_doubt|asked" or "done TOOL-MESSAGE".
    python _once_worker.py agents URL DIR first|resume [--then ...]
        An OpenAI Agents SDK run whose RunState is saved to DIR/state.json at the
        interruption; "resume" loads it, approves it the SDK's way and runs it.

``--then die``: the tool does its work (a line in DIR/executions.txt), then the process kills
itself: the call ran and its outcome was never recorded. ``--then hang``: the tool writes the
line and waits to be killed. The audit log is DIR/audit.jsonl.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any


def policy(url: str, folder: Path) -> dict[str, Any]:
    return {
        "version": 1,
        "timeout": "60s",
        "state": url,
        "audit": {"sinks": [{"jsonl": str(folder / "audit.jsonl"), "fsync": True}]},
        "tools": {"pay": {"kind": "payment"}},
        "rules": [{"id": "big-payments-ask", "match": {"tool": "pay"},
                   "if": "args.amount > 100", "effect": "ask"}],
    }


def executed(folder: Path, then: str | None) -> None:
    """The tool's side effect, made durable before anything else can happen."""
    with open(folder / "executions.txt", "a", encoding="utf-8") as f:
        f.write("paid\n")
        f.flush()
        os.fsync(f.fileno())
    if then == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    if then == "hang":
        time.sleep(600)


def run(url: str, folder: Path, call_id: str, amount: int, approval: str | None,
        then: str | None) -> None:
    from callwarden import ApprovalPending, Guard, ToolDenied

    guard = Guard.from_dict(policy(url, folder))
    try:
        guard.run("pay", {"iban": "DE89370400440532013000", "amount": amount},
                  lambda iban, amount: executed(folder, then), call_id=call_id,
                  session="s1", agent="bot", approval_id=approval)
    except ApprovalPending as pending:
        print("pending", pending.request_id, "in_doubt" if pending.decision.in_doubt else "")
    except ToolDenied as refused:
        print("refused", refused.decision.code)
    else:
        print("ran")


def langgraph(url: str, folder: Path, phase: str, then: str | None) -> None:
    import sqlite3

    from langchain.agents import create_agent
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.types import Command

    from callwarden.adapters.langchain import CallwardenMiddleware

    class Model(BaseChatModel):
        """Asks for the payment once, then answers."""

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                      **kwargs: Any) -> ChatResult:
            done = any(isinstance(m, ToolMessage) for m in messages)
            message = AIMessage(content="done") if done else AIMessage(content="", tool_calls=[
                {"name": "pay", "args": {"iban": "DE89370400440532013000", "amount": 500},
                 "id": "call_pay", "type": "tool_call"}])
            return ChatResult(generations=[ChatGeneration(message=message)])

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    @tool
    def pay(iban: str, amount: int) -> str:
        """Pays an invoice."""
        executed(folder, then)
        return "paid"

    saver = SqliteSaver(sqlite3.connect(str(folder / "checkpoints.db"), check_same_thread=False))
    middleware = CallwardenMiddleware(policy(url, folder), reviewer="alice", agent="bot")
    graph = create_agent(Model(), [pay], middleware=[middleware], checkpointer=saver,
                         name="bot")
    config = {"configurable": {"thread_id": "t1"}}
    if phase == "first":
        out = graph.invoke({"messages": [("user", "pay the invoice")]}, config)
    elif phase == "approve":
        out = graph.invoke(Command(resume=True), config)
    elif phase == "resume":
        out = graph.invoke(None, config)
    else:  # answer-yes / answer-no: an answer that names the request in doubt
        pending = graph.get_state(config).interrupts[0].value
        out = graph.invoke(Command(resume={"request_id": pending["request_id"],
                                           "approve": phase == "answer-yes",
                                           "reason": "it went through before the crash"}),
                           config)
    if out.get("__interrupt__"):
        value = out["__interrupt__"][0].value
        print("interrupt", value["request_id"], "in_doubt" if value["in_doubt"] else "asked")
    else:
        tool_messages = [m for m in out["messages"] if isinstance(m, ToolMessage)]
        print("done", json.dumps(tool_messages[-1].content))


def agents(url: str, folder: Path, phase: str, then: str | None) -> None:
    from agents import Agent, Runner, RunState, function_tool, set_tracing_disabled
    from agents.testing import ScriptedModel, assistant_message, function_call

    from callwarden.adapters.openai_agents import guard_agent

    set_tracing_disabled(True)

    @function_tool
    def pay(iban: str, amount: int) -> str:
        """Pays an invoice."""
        executed(folder, then)
        return "paid"

    model = ScriptedModel([
        [function_call("pay", {"iban": "DE89370400440532013000", "amount": 500},
                       call_id="call-0")],
        [assistant_message("done")]])
    agent = guard_agent(Agent(name="bot", instructions="Pay.", model=model, tools=[pay]),
                        policy(url, folder), reviewer="alice")
    saved = folder / "state.json"

    async def go() -> None:
        if phase == "first":
            result = await Runner.run(agent, "pay the invoice")
            saved.write_text(result.to_state().to_string(), encoding="utf-8")
            print("interrupted", len(result.interruptions))
            return
        state = await RunState.from_string(agent, saved.read_text(encoding="utf-8"))
        for item in state.get_interruptions():
            state.approve(item)  # the app replays the person's approval from its own records
        await Runner.run(agent, state)
        outputs = [item["output"] for item in model.calls[-1].input
                   if isinstance(item, dict) and item.get("type") == "function_call_output"]
        print("done", json.dumps(outputs[-1]))

    asyncio.run(go())


def main(argv: list[str]) -> None:
    then = argv[argv.index("--then") + 1] if "--then" in argv else None
    approval = argv[argv.index("--approval") + 1] if "--approval" in argv else None
    amount = int(argv[argv.index("--amount") + 1]) if "--amount" in argv else 500
    command, url, folder = argv[0], argv[1], Path(argv[2])
    if command == "run":
        run(url, folder, argv[3], amount, approval, then)
    elif command == "langgraph":
        langgraph(url, folder, argv[3], then)
    else:
        agents(url, folder, argv[3], then)


if __name__ == "__main__":
    main(sys.argv[1:])
