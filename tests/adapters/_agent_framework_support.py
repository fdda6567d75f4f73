"""Shared pieces for the Microsoft Agent Framework tests: tools that log their calls, a scripted
chat client (the framework's BaseChatClient with its own function-invocation layer)."""

from __future__ import annotations

import json
from typing import Any

from _scenario import POLICY, SECRET
from agent_framework import (
    Agent,
    BaseChatClient,
    ChatResponse,
    ChatResponseUpdate,
    Content,
    FunctionInvocationLayer,
    FunctionTool,
    Message,
    ResponseStream,
    tool,
)

from callwarden.adapters.agent_framework import CallwardenMiddleware


class Tools:
    """The tools an agent may call (sync and async); every body that runs appends (name, args)
    to ``ran``."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, dict[str, Any]]] = []

    def all(self) -> list[FunctionTool]:
        ran = self.ran

        async def read_file(path: str) -> str:
            ran.append(("read_file", {"path": path}))
            return SECRET if path == "config.ini" else f"contents of {path}"

        def delete_file(path: str) -> str:
            ran.append(("delete_file", {"path": path}))
            return "deleted"

        async def search(query: str, limit: int) -> str:
            ran.append(("search", {"query": query, "limit": limit}))
            return f"{limit} results for {query}"

        def deploy(env: str) -> str:
            ran.append(("deploy", {"env": env}))
            return f"deployed to {env}"

        def wipe_disk(device: str) -> str:
            ran.append(("wipe_disk", {"device": device}))
            return "wiped"

        def explode(path: str) -> str:
            ran.append(("explode", {"path": path}))
            raise OSError("disk on fire")

        functions = (read_file, delete_file, search, deploy, wipe_disk, explode)
        return [tool(f, description=f.__name__.replace("_", " ")) for f in functions]

    def names(self) -> list[str]:
        return [name for name, _ in self.ran]


class ScriptedClient(FunctionInvocationLayer[Any], BaseChatClient[Any]):
    """A chat client whose model answers from a script: each turn is a list of function calls
    or a final text. ``requests`` holds the messages the model received on each turn."""

    def __init__(self, *turns: list[Content] | str, **options: Any) -> None:
        super().__init__(**options)
        self.turns = list(turns)
        self.requests: list[list[Message]] = []

    def _inner_get_response(self, *, messages: Any, stream: bool, options: Any,
                            **kwargs: Any) -> Any:
        self.requests.append(list(messages))
        if not self.turns:
            raise AssertionError("the scripted model was asked for more turns than scripted")
        turn = self.turns.pop(0)
        contents = [Content.from_text(turn)] if isinstance(turn, str) else list(turn)
        if stream:
            async def updates() -> Any:
                yield ChatResponseUpdate(role="assistant", contents=contents)
            return ResponseStream(updates(), finalizer=ChatResponse.from_updates)

        async def response() -> ChatResponse:
            return ChatResponse(messages=[Message(role="assistant", contents=contents)])
        return response()


def call(call_id: str, name: str, **args: Any) -> Content:
    return Content.from_function_call(call_id=call_id, name=name, arguments=json.dumps(args))


def asks(*calls: Content) -> list[Content]:
    """One model turn asking for these tool calls."""
    return list(calls)


def agent(tools: Tools, client: ScriptedClient, middleware: CallwardenMiddleware) -> Agent:
    return Agent(client=client, name="ops", tools=tools.all(), middleware=[middleware])


def guard(policy: Any = None, **options: Any) -> CallwardenMiddleware:
    return CallwardenMiddleware(POLICY if policy is None else policy, agent="ops", **options)


def results_in(messages: list[Message]) -> dict[str, str]:
    """The function results in a list of messages, by call id: what the model reads."""
    return {str(c.call_id): str(c.result) for m in messages for c in m.contents
            if c.type == "function_result"}


def results_seen(client: ScriptedClient) -> dict[str, str]:
    """The function results in the model's latest request, by call id."""
    return results_in(client.requests[-1])
