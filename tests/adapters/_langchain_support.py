"""A scripted chat model, recording tools and the policy the LangChain adapter tests share."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, tool
from langgraph.types import interrupt
from pydantic import Field

POLICY: dict[str, Any] = {
    "version": 1,
    "default": "allow",
    "rules": [
        {"id": "no-delete", "match": {"tool": "delete_file"}, "effect": "deny",
         "message": "Deleting files is not allowed; move them to trash/ instead."},
        {"id": "cap-search", "match": {"tool": "search"}, "cap": {"limit": 5},
         "effect": "modify"},
        {"id": "deploy-asks", "match": {"tool": "deploy"}, "effect": "ask",
         "message": "Deploys need a human's approval."},
        {"id": "no-wipe", "match": {"tool": "wipe_db"}, "effect": "halt",
         "message": "Wiping a database stops the run."},
        {"id": "redact-keys", "on": "output", "match": {"tool": "read_config"},
         "secrets": True, "effect": "modify"},
        {"id": "breach", "on": "output", "match": {"tool": "dump_keys"},
         "if": "args.output.contains('BEGIN RSA PRIVATE KEY')", "effect": "halt"},
    ],
}

SECRET = "aws_secret_access_key = 9dKq3LwZt8vB2nX7pR4sY6uA1cE5gH0jM3oQ8wT2"


class ScriptedChatModel(BaseChatModel):
    """Replays scripted AI messages and records every list of messages it was sent."""

    script: list[AIMessage]
    received: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        self.received.append(list(messages))
        if len(self.received) > len(self.script):
            raise AssertionError(f"the model was called {len(self.received)} times; the script "
                                 f"has {len(self.script)} turns")
        return ChatResult(generations=[ChatGeneration(message=self.script[len(self.received) - 1])])

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self

    def tool_results(self, turn: int = -1) -> dict[str, ToolMessage]:
        """The tool messages the model received in one request, by tool call id."""
        return {m.tool_call_id: m for m in self.received[turn] if isinstance(m, ToolMessage)}


def turn(*calls: tuple[str, dict[str, Any]]) -> AIMessage:
    """An AI message asking for every call at once; call ids are the tool names."""
    return AIMessage(content="", tool_calls=[
        {"name": name, "args": args, "id": f"call_{name}", "type": "tool_call"}
        for name, args in calls])


def final(text: str = "done") -> AIMessage:
    return AIMessage(content=text)


class Tools:
    """Tools that record each run (name, args) in ``ran``."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, dict[str, Any]]] = []
        ran = self.ran

        @tool
        def search(query: str, limit: int = 10) -> str:
            """Searches the web."""
            ran.append(("search", {"query": query, "limit": limit}))
            return f"{limit} results for {query}"

        @tool
        def read_file(path: str) -> str:
            """Reads a file."""
            ran.append(("read_file", {"path": path}))
            return f"contents of {path}"

        @tool
        def delete_file(path: str) -> str:
            """Deletes a file."""
            ran.append(("delete_file", {"path": path}))
            return "deleted"

        @tool
        def deploy(env: str) -> str:
            """Deploys the service."""
            ran.append(("deploy", {"env": env}))
            return f"deployed to {env}"

        @tool
        def wipe_db(name: str) -> str:
            """Wipes a database."""
            ran.append(("wipe_db", {"name": name}))
            return "wiped"

        @tool
        def read_config(name: str) -> str:
            """Reads a configuration file."""
            ran.append(("read_config", {"name": name}))
            return SECRET

        @tool
        def dump_keys(name: str) -> str:
            """Dumps keys."""
            ran.append(("dump_keys", {"name": name}))
            return "-----BEGIN RSA PRIVATE KEY-----"

        @tool
        def confirm(question: str) -> str:
            """Asks the user itself, with LangGraph's interrupt."""
            answer = interrupt({"question": question})
            ran.append(("confirm", {"answer": answer}))
            return str(answer)

        self.all: list[BaseTool] = [search, read_file, delete_file, deploy, wipe_db,
                                    read_config, dump_keys, confirm]

    def names(self) -> list[str]:
        return [name for name, _ in self.ran]
