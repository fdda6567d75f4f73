"""Shared pieces for the Agno adapter tests: tools that log their calls, a scripted model."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

from _scenario import POLICY, SECRET
from agno.agent import Agent
from agno.models.base import Model
from agno.models.response import ModelResponse
from agno.run.agent import RunOutput
from agno.tools import tool

from callwarden.adapters.agno import CallwardenToolHook

Call = tuple[str, str, dict[str, Any]]  # (call id, tool name, arguments)


@dataclass
class ScriptedModel(Model):
    """An Agno model that answers each request with the next scripted turn: a list of tool
    calls, or a final text. ``requests`` keeps the messages of every request it got."""

    id: str = "scripted"
    provider: str | None = "scripted"
    turns: list[list[Call] | str] = field(default_factory=list)
    requests: list[list[Any]] = field(default_factory=list)

    def _next(self, messages: list[Any] | None) -> ModelResponse:
        self.requests.append(list(messages or []))
        if not self.turns:
            raise AssertionError("the model was asked once more than scripted")
        turn = self.turns.pop(0)
        if isinstance(turn, str):
            return ModelResponse(role="assistant", content=turn)
        return ModelResponse(role="assistant", tool_calls=[
            {"id": call_id, "type": "function",
             "function": {"name": name, "arguments": json.dumps(args)}}
            for call_id, name, args in turn])

    def invoke(self, *args: Any, messages: list[Any] | None = None, **kw: Any) -> ModelResponse:
        return self._next(messages)

    async def ainvoke(self, *args: Any, messages: list[Any] | None = None,
                      **kw: Any) -> ModelResponse:
        return self._next(messages)

    def invoke_stream(self, *args: Any, messages: list[Any] | None = None,
                      **kw: Any) -> Iterator[ModelResponse]:
        yield self._next(messages)

    async def ainvoke_stream(self, *args: Any, messages: list[Any] | None = None,
                             **kw: Any) -> AsyncIterator[ModelResponse]:
        yield self._next(messages)

    def _parse_provider_response(self, response: Any, **kwargs: Any) -> ModelResponse:
        return response

    def _parse_provider_response_delta(self, response: Any) -> ModelResponse:
        return response


class Tools:
    """The tools an agent may call; every body that runs appends (name, args) to ``ran``."""

    def __init__(self, kind: str = "sync") -> None:
        self.kind = kind
        self.ran: list[tuple[str, dict[str, Any]]] = []

    def all(self, *, confirm_deploys: bool = False) -> list[Any]:
        ran = self.ran

        def read_file(path: str) -> str:
            """Read a file."""
            ran.append(("read_file", {"path": path}))
            return SECRET if path == "config.ini" else f"contents of {path}"

        def delete_file(path: str) -> str:
            """Delete a file."""
            ran.append(("delete_file", {"path": path}))
            return "deleted"

        def search(query: str, limit: int) -> str:
            """Search."""
            ran.append(("search", {"query": query, "limit": limit}))
            return f"{limit} results for {query}"

        def deploy(env: str) -> str:
            """Deploy."""
            ran.append(("deploy", {"env": env}))
            return f"deployed to {env}"

        def wipe_disk(device: str) -> str:
            """Wipe a disk."""
            ran.append(("wipe_disk", {"device": device}))
            return "wiped"

        async def aread_file(path: str) -> str:
            """Read a file."""
            return read_file(path)

        async def adelete_file(path: str) -> str:
            """Delete a file."""
            return delete_file(path)

        async def asearch(query: str, limit: int) -> str:
            """Search."""
            return search(query, limit)

        async def adeploy(env: str) -> str:
            """Deploy."""
            return deploy(env)

        async def awipe_disk(device: str) -> str:
            """Wipe a disk."""
            return wipe_disk(device)

        tools: list[Any] = [read_file, delete_file, search, deploy, wipe_disk]
        if self.kind == "async":
            tools = [aread_file, adelete_file, asearch, adeploy, awipe_disk]
            for fn, name in zip(tools, ("read_file", "delete_file", "search", "deploy",
                                        "wipe_disk"), strict=True):
                fn.__name__ = name
        if confirm_deploys:
            tools[3] = tool(requires_confirmation=True)(tools[3])
        return tools

    def names(self) -> list[str]:
        return [name for name, _ in self.ran]


ONE_TURN: list[Call] = [("c1", "read_file", {"path": "notes.txt"}),
                        ("c2", "delete_file", {"path": "notes.txt"}),
                        ("c3", "search", {"query": "callwarden", "limit": 50}),
                        ("c4", "deploy", {"env": "qa"}),
                        ("c5", "wipe_disk", {"device": "sda"})]


def hook(policy: Any = None, **options: Any) -> CallwardenToolHook:
    return CallwardenToolHook(POLICY if policy is None else policy, **options)


def agent(guard: CallwardenToolHook, model: ScriptedModel, tools: Tools, **options: Any) -> Agent:
    return Agent(name="assistant", model=model, tools=tools.all(**options), tool_hooks=[guard],
                 telemetry=False)


def results(run: RunOutput) -> dict[str, tuple[str, bool]]:
    """The tool results the run handed to the model: call id -> (content, is error)."""
    return {str(m.tool_call_id): (str(m.content), bool(m.tool_call_error))
            for m in run.messages or [] if m.role == "tool"}
