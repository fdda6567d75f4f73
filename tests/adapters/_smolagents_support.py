"""Shared pieces for the smolagents adapter tests: tools that log their calls, a scripted model,
agents built on them, and a run that fails instead of hanging."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from _scenario import SECRET
from smolagents import CodeAgent, ToolCallingAgent, tool
from smolagents.memory import ActionStep
from smolagents.models import (
    ChatMessage,
    ChatMessageToolCall,
    ChatMessageToolCallFunction,
    MessageRole,
    Model,
)
from smolagents.monitoring import LogLevel

TIMEOUT = 30  # a hang fails the test instead of blocking the suite



class Tools:
    """The tools an agent may call; every body that runs appends (name, args) to ``ran``."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, dict[str, Any]]] = []

    def all(self) -> list[Any]:
        ran = self.ran

        @tool
        def read_file(path: str) -> str:
            """Reads a file.

            Args:
                path: The file to read.
            """
            ran.append(("read_file", {"path": path}))
            return SECRET if path == "config.ini" else f"contents of {path}"

        @tool
        def delete_file(path: str) -> str:
            """Deletes a file.

            Args:
                path: The file to delete.
            """
            ran.append(("delete_file", {"path": path}))
            return "deleted"

        @tool
        def search(query: str, limit: int) -> str:
            """Searches the web.

            Args:
                query: What to look for.
                limit: How many results.
            """
            ran.append(("search", {"query": query, "limit": limit}))
            return f"{limit} results for {query}"

        @tool
        def deploy(env: str) -> str:
            """Deploys the service.

            Args:
                env: The environment.
            """
            ran.append(("deploy", {"env": env}))
            return f"deployed to {env}"

        @tool
        def wipe_disk(device: str) -> str:
            """Wipes a disk.

            Args:
                device: The device.
            """
            ran.append(("wipe_disk", {"device": device}))
            return "wiped"

        return [read_file, delete_file, search, deploy, wipe_disk]

    def names(self) -> list[str]:
        return [name for name, _ in self.ran]


class ScriptedModel(Model):
    """A smolagents model that answers with scripted messages and keeps what it was sent."""

    def __init__(self, *turns: ChatMessage) -> None:
        super().__init__(model_id="scripted")
        self.turns = list(turns)
        self.seen: list[str] = []

    def generate(self, messages: list[Any], stop_sequences: Any = None,
                 response_format: Any = None, tools_to_call_from: Any = None,
                 **kwargs: Any) -> ChatMessage:
        self.seen.append(_text(messages))
        if not self.turns:
            raise AssertionError("the scripted model ran out of turns")
        return self.turns.pop(0)


def _text(messages: list[Any]) -> str:
    parts = []
    for message in messages:
        content = message.content if isinstance(message, ChatMessage) else message["content"]
        if isinstance(content, list):
            parts.extend(str(block.get("text", "")) for block in content)
        else:
            parts.append(str(content))
    return "\n".join(parts)


def call(call_id: str, name: str, **args: Any) -> ChatMessageToolCall:
    return ChatMessageToolCall(id=call_id, type="function",
                               function=ChatMessageToolCallFunction(name=name, arguments=args))


def asks(*calls: ChatMessageToolCall) -> ChatMessage:
    """One ToolCallingAgent model turn asking for these tool calls."""
    return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=list(calls))


def answer(text: str, call_id: str = "end") -> ChatMessage:
    return asks(call(call_id, "final_answer", answer=text))


def code(source: str) -> ChatMessage:
    """One CodeAgent model turn running this code."""
    return ChatMessage(role=MessageRole.ASSISTANT,
                       content=f"Thought: do it.\n<code>\n{source}\n</code>")


def tool_agent(tools: Tools, model: ScriptedModel, **options: Any) -> ToolCallingAgent:
    return ToolCallingAgent(tools=tools.all(), model=model, verbosity_level=LogLevel.OFF,
                            **options)


def code_agent(tools: Tools, model: ScriptedModel, **options: Any) -> CodeAgent:
    return CodeAgent(tools=tools.all(), model=model, verbosity_level=LogLevel.OFF, **options)


def run(agent: Any, task: str = "tidy up", **options: Any) -> Any:
    """``agent.run(task)`` in a worker thread: a hang fails after TIMEOUT seconds."""
    pool = ThreadPoolExecutor(1)
    try:
        return pool.submit(agent.run, task, **options).result(timeout=TIMEOUT)
    finally:
        pool.shutdown(wait=False)  # after a timeout, leave the stuck run behind


def last_step(agent: Any) -> ActionStep:
    return [s for s in agent.memory.steps if isinstance(s, ActionStep)][-1]
