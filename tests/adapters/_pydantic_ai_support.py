"""Shared pieces for the Pydantic AI adapter tests: tools that log their calls, a scripted model."""

from __future__ import annotations

from typing import Any

from _scenario import POLICY, SECRET
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from callwarden.adapters.pydantic_ai import CallwardenCapability


class Tools:
    """The tools an agent may call; every body that runs appends (name, args) to ``ran``."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, dict[str, Any]]] = []

    def toolset(self) -> FunctionToolset[Any]:
        ran = self.ran
        toolset: FunctionToolset[Any] = FunctionToolset()

        @toolset.tool_plain
        async def read_file(path: str) -> str:
            """Reads a file."""
            ran.append(("read_file", {"path": path}))
            return SECRET if path == "config.ini" else f"contents of {path}"

        @toolset.tool_plain
        def delete_file(path: str) -> str:
            """Deletes a file."""
            ran.append(("delete_file", {"path": path}))
            return "deleted"

        @toolset.tool_plain
        async def search(query: str, limit: int) -> str:
            """Searches the index."""
            ran.append(("search", {"query": query, "limit": limit}))
            return f"{limit} results for {query}"

        @toolset.tool_plain
        def deploy(env: str) -> str:
            """Deploys the service."""
            ran.append(("deploy", {"env": env}))
            return f"deployed to {env}"

        @toolset.tool_plain
        def wipe_disk(device: str) -> str:
            """Wipes a disk."""
            ran.append(("wipe_disk", {"device": device}))
            return "wiped"

        return toolset

    def names(self) -> list[str]:
        return [name for name, _ in self.ran]


def call(call_id: str, name: str, **args: Any) -> ToolCallPart:
    return ToolCallPart(tool_name=name, args=args, tool_call_id=call_id)


class Script:
    """A scripted model: each turn is a list of tool calls or a text answer; afterwards it
    answers "done". ``seen`` keeps every request's messages, as the model received them."""

    def __init__(self, *turns: list[ToolCallPart] | str) -> None:
        self.turns = list(turns)
        self.seen: list[list[ModelMessage]] = []
        self.model = FunctionModel(self._respond)

    def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        turn = self.turns.pop(0) if self.turns else "done"
        if isinstance(turn, str):
            return ModelResponse(parts=[TextPart(turn)])
        return ModelResponse(parts=list(turn))

    def results(self) -> dict[str, ToolReturnPart]:
        """The tool results the model has been sent so far, by call id."""
        return {part.tool_call_id: part for messages in self.seen[-1:] for m in messages
                if isinstance(m, ModelRequest) for part in m.parts
                if isinstance(part, ToolReturnPart)}


def guarded(policy: Any = None, **options: Any) -> CallwardenCapability[Any]:
    return CallwardenCapability(POLICY if policy is None else policy, **options)


def agent(tools: Tools, capability: CallwardenCapability[Any], script: Script,
          **options: Any) -> Agent[None, Any]:
    options.setdefault("output_type", [str, DeferredToolRequests])
    return Agent(script.model, name="assistant", toolsets=[tools.toolset()],
                 capabilities=[capability], **options)
