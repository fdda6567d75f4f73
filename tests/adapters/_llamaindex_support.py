"""Shared pieces for the LlamaIndex adapter tests: tools that log their calls, a scripted model
(LlamaIndex's own ``MockFunctionCallingLLM``), and a run that answers approval requests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from _scenario import POLICY as SCENARIO_POLICY
from _scenario import SECRET
from llama_index.core.agent.workflow import FunctionAgent, ToolCallResult
from llama_index.core.base.llms.types import ToolCallBlock
from llama_index.core.llms import ChatMessage, MessageRole
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.tools import FunctionTool, ToolOutput

from callwarden.adapters.llamaindex import ToolApprovalRequest, ToolApprovalResponse, ToolGate

TIMEOUT = 30  # a hang fails the test instead of blocking the suite


# The scenario's policy, with the halt rule also matching the workflow test's `wipe` tool.
POLICY: dict[str, Any] = {**SCENARIO_POLICY, "rules": [
    {**rule, "match": {"tool": ["wipe_disk", "wipe"]}} if rule["id"] == "stop-on-wipe" else rule
    for rule in SCENARIO_POLICY["rules"]]}

Call = tuple[str, str, dict[str, Any]]


def call(call_id: str, name: str, **args: Any) -> Call:
    return (call_id, name, args)


ONE_TURN = [call("c1", "read_file", path="notes.txt"),
            call("c2", "delete_file", path="notes.txt"),
            call("c3", "search", query="callwarden", limit=50),
            call("c4", "deploy", env="qa"),
            call("c5", "wipe_disk", device="sda")]


class Tools:
    """The tools an agent may call; every body that runs appends (name, args) to ``ran``."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, dict[str, Any]]] = []

    def all(self) -> list[FunctionTool]:
        ran = self.ran

        async def read_file(path: str) -> str:
            """Reads a file."""
            ran.append(("read_file", {"path": path}))
            return SECRET if path == "config.ini" else f"contents of {path}"

        def delete_file(path: str) -> str:
            """Deletes a file."""
            ran.append(("delete_file", {"path": path}))
            return "deleted"

        async def search(query: str, limit: int) -> str:
            """Searches the index."""
            ran.append(("search", {"query": query, "limit": limit}))
            return f"{limit} results for {query}"

        def deploy(env: str) -> str:
            """Deploys the service."""
            ran.append(("deploy", {"env": env}))
            return f"deployed to {env}"

        def wipe_disk(device: str) -> str:
            """Wipes a disk."""
            ran.append(("wipe_disk", {"device": device}))
            return "wiped"

        return [FunctionTool.from_defaults(f)
                for f in (read_file, delete_file, search, deploy, wipe_disk)]

    def names(self) -> list[str]:
        return [name for name, _ in self.ran]


class Model:
    """A scripted function-calling model: each turn is a list of tool calls or a final text.
    ``requests`` holds the messages it received, turn by turn."""

    def __init__(self, *turns: list[Call] | str) -> None:
        self.turns = list(turns)
        self.requests: list[list[ChatMessage]] = []
        self.llm = MockFunctionCallingLLM(response_generator=self._respond)

    def _respond(self, messages: Any, **kwargs: Any) -> ChatMessage:
        self.requests.append(list(messages))
        if not self.turns:
            raise AssertionError("the model was asked for more turns than scripted")
        turn = self.turns.pop(0)
        if isinstance(turn, str):
            return ChatMessage(role=MessageRole.ASSISTANT, content=turn)
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=[
            ToolCallBlock(tool_call_id=i, tool_name=name, tool_kwargs=args)
            for i, name, args in turn])

    def results_seen(self) -> dict[str, str]:
        """The tool results in the model's latest request, by call id."""
        return {m.additional_kwargs["tool_call_id"]: m.content or ""
                for m in self.requests[-1] if m.role == MessageRole.TOOL}


def agent(gate: ToolGate, tools: Tools, model: Model, **options: Any) -> FunctionAgent:
    built = FunctionAgent(name="assistant", tools=tools.all(), llm=model.llm, **options)
    return cast("FunctionAgent", gate.agent(built))


Answer = Callable[[ToolApprovalRequest], ToolApprovalResponse | None]


@dataclass
class Run:
    """One workflow run: its final response, the tools' outputs by call id, the approval
    requests it streamed."""

    response: str
    outputs: dict[str, ToolOutput] = field(default_factory=dict)
    requests: list[ToolApprovalRequest] = field(default_factory=list)


async def run(workflow: Any, task: str, answer: Answer | None = None, **kwargs: Any) -> Run:
    """Runs the workflow to its end, answering approval requests with ``answer``."""

    async def drive() -> Run:
        handler = workflow.run(user_msg=task, **kwargs)
        outputs: dict[str, ToolOutput] = {}
        requests: list[ToolApprovalRequest] = []
        async for event in handler.stream_events():
            if isinstance(event, ToolCallResult):
                outputs[event.tool_id] = event.tool_output
            elif isinstance(event, ToolApprovalRequest):
                requests.append(event)
                response = answer(event) if answer is not None else None
                if response is not None:
                    handler.ctx.send_event(response)
        result = await handler
        return Run(str(result.response.content or ""), outputs, requests)

    return await asyncio.wait_for(drive(), TIMEOUT)
