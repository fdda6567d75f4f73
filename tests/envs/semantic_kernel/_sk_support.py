"""Shared pieces for the Semantic Kernel tests: a plugin whose functions log their calls, and a
scripted chat completion service driving the kernel's real auto-invoke loop."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from _scenario import POLICY, SECRET
from semantic_kernel import Kernel
from semantic_kernel.agents import ChatCompletionAgent
from semantic_kernel.connectors.ai.chat_completion_client_base import ChatCompletionClientBase
from semantic_kernel.contents import (
    AuthorRole,
    ChatHistory,
    ChatMessageContent,
    FunctionCallContent,
    FunctionResultContent,
    StreamingChatMessageContent,
    StreamingTextContent,
)
from semantic_kernel.functions import kernel_function

from callwarden.adapters.semantic_kernel import CallwardenFilter

PLUGIN = "ops"



class Ops:
    """The plugin the model calls; every body that runs appends (name, args) to ``ran``."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, dict[str, Any]]] = []

    @kernel_function(description="Reads a file.")
    async def read_file(self, path: str) -> str:
        self.ran.append(("read_file", {"path": path}))
        return SECRET if path == "config.ini" else f"contents of {path}"

    @kernel_function(description="Deletes a file.")
    def delete_file(self, path: str) -> str:
        self.ran.append(("delete_file", {"path": path}))
        return "deleted"

    @kernel_function(description="Searches.")
    async def search(self, query: str, limit: int) -> str:
        self.ran.append(("search", {"query": query, "limit": limit}))
        return f"{limit} results for {query}"

    @kernel_function(description="Deploys the service.")
    def deploy(self, env: str) -> str:
        self.ran.append(("deploy", {"env": env}))
        return f"deployed to {env}"

    @kernel_function(description="Wipes a disk.")
    def wipe_disk(self, device: str) -> str:
        self.ran.append(("wipe_disk", {"device": device}))
        return "wiped"

    @kernel_function(description="Sends an e-mail.")
    def send_email(self, to: str) -> str:
        self.ran.append(("send_email", {"to": to}))
        return f"sent to {to}"

    @kernel_function(description="Always fails.")
    def flaky(self, what: str) -> str:
        self.ran.append(("flaky", {"what": what}))
        raise ConnectionError(f"server gone ({what})")

    @kernel_function(description="Streams the last lines of a log.")
    async def tail(self, path: str) -> Any:
        self.ran.append(("tail", {"path": path}))
        for line in ("line one\n", SECRET + "\n", "line three\n"):
            yield line

    def names(self) -> list[str]:
        return [name for name, _ in self.ran]


class ScriptedChat(ChatCompletionClientBase):
    """A chat completion service that answers with scripted turns: a list of function calls
    or a text. ``requests`` holds the chat history of every request the kernel made."""

    SUPPORTS_FUNCTION_CALLING = True
    turns: list[Any]
    requests: list[list[Any]]

    async def _inner_get_chat_message_contents(self, chat_history: ChatHistory,
                                               settings: Any) -> list[ChatMessageContent]:
        self.requests.append(list(chat_history.messages))
        if not self.turns:
            raise AssertionError("the model was asked for a turn the script does not have")
        turn = self.turns.pop(0)
        if isinstance(turn, str):
            return [ChatMessageContent(role=AuthorRole.ASSISTANT, content=turn)]
        return [ChatMessageContent(role=AuthorRole.ASSISTANT, items=list(turn))]


    async def _inner_get_streaming_chat_message_contents(
            self, chat_history: ChatHistory, settings: Any,
            function_invoke_attempt: int = 0) -> AsyncIterator[list[StreamingChatMessageContent]]:
        self.requests.append(list(chat_history.messages))
        turn = self.turns.pop(0)
        items: list[Any] = ([StreamingTextContent(choice_index=0, text=turn)]
                            if isinstance(turn, str) else list(turn))
        yield [StreamingChatMessageContent(role=AuthorRole.ASSISTANT, choice_index=0,
                                           items=items)]


def call(call_id: str, name: str, **args: Any) -> FunctionCallContent:
    return FunctionCallContent(id=call_id, name=f"{PLUGIN}-{name}", arguments=json.dumps(args))


def model(*turns: Any) -> ScriptedChat:
    return ScriptedChat(ai_model_id="scripted", turns=list(turns), requests=[])


def kernel_with(ops: Ops, policy: Any = None, **options: Any) -> tuple[Kernel, CallwardenFilter]:
    kernel = Kernel()
    kernel.add_plugin(ops, PLUGIN)
    guard = CallwardenFilter(POLICY if policy is None else policy, agent="assistant", **options)
    return kernel, guard.add_to(kernel)


def agent(kernel: Kernel, service: ScriptedChat) -> ChatCompletionAgent:
    return ChatCompletionAgent(kernel=kernel, service=service, name="assistant",
                               instructions="Help the user.")


def results_in(messages: list[Any]) -> dict[str, Any]:
    """The function results among these messages, by call id."""
    return {item.id: item.result for m in messages for item in m.items
            if isinstance(item, FunctionResultContent)}


def results_seen(service: ScriptedChat) -> dict[str, Any]:
    """The function results in the model's latest request, by call id."""
    return results_in(service.requests[-1])
