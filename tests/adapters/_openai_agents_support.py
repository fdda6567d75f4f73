"""Shared pieces of the OpenAI Agents SDK adapter tests: tools that record their runs, the
policy, the one-turn script for the SDK's own ``ScriptedModel``, and what the model was sent."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agents import Agent, FunctionTool, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from callwarden import Guard
from callwarden.audit import Auditor, CallableSink

# No API key and no network here: the SDK's trace exporter would only log that it skipped.
set_tracing_disabled(True)

POLICY: dict[str, Any] = {
    "version": 1,
    "default": "allow",
    "rules": [
        {"id": "no-delete", "match": {"tool": "delete_file"}, "effect": "deny",
         "message": "Deleting files is not allowed; move the file to ./trash instead."},
        {"id": "cap-search", "match": {"tool": "search"}, "cap": {"limit": 5},
         "effect": "modify"},
        {"id": "deploys-ask", "match": {"tool": "deploy"}, "effect": "ask",
         "message": "Deploys need a human's approval."},
        {"id": "stop-on-wipe", "match": {"tool": "wipe_database"}, "effect": "halt",
         "message": "Wiping the database ends the run."},
        {"id": "card-data", "on": "output", "match": {"tool": "crm_lookup"},
         "content": {"detect": ["card_number"]}, "effect": "deny",
         "message": "The record holds card data; ask the user for what you need."},
    ],
}

DENY_MESSAGE = "Deleting files is not allowed; move the file to ./trash instead."


class Recorder:
    """The tools of the scenario; each appends (tool, args) to ``runs`` when its body runs."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, dict[str, Any]]] = []

    def tools(self) -> list[FunctionTool]:
        runs = self.runs

        @function_tool
        def read_file(path: str) -> str:
            """Reads a file."""
            runs.append(("read_file", {"path": path}))
            return f"contents of {path}"

        @function_tool
        def delete_file(path: str) -> str:
            """Deletes a file."""
            runs.append(("delete_file", {"path": path}))
            return f"deleted {path}"

        @function_tool
        async def search(query: str, limit: int = 10) -> str:
            """Searches the index."""
            runs.append(("search", {"query": query, "limit": limit}))
            return f"{limit} results for {query}"

        @function_tool
        def deploy(env: str) -> str:
            """Deploys the service."""
            runs.append(("deploy", {"env": env}))
            return f"deployed to {env}"

        @function_tool
        def wipe_database(name: str) -> str:
            """Drops every table."""
            runs.append(("wipe_database", {"name": name}))
            return "wiped"

        @function_tool
        def crm_lookup(customer: str) -> str:
            """Looks a customer up."""
            runs.append(("crm_lookup", {"customer": customer}))
            return f"{customer}: card 4111 1111 1111 1111"

        return [read_file, delete_file, search, deploy, wipe_database, crm_lookup]

    def names(self) -> list[str]:
        return [name for name, _ in self.runs]


def calls(*specs: tuple[str, dict[str, Any]], prefix: str = "call") -> list[Any]:
    """One model turn asking for each (tool, args), with call ids ``call-0``, ``call-1``..."""
    return [function_call(name, args, call_id=f"{prefix}-{i}")
            for i, (name, args) in enumerate(specs)]


ONE_TURN = (
    ("read_file", {"path": "notes.txt"}),
    ("delete_file", {"path": "notes.txt"}),
    ("search", {"query": "invoices", "limit": 50}),
)
"""The allowed, denied and rewritten calls of the required scenario (ids call-0..call-2)."""


def scripted(*turns: Sequence[Any], final: str = "done") -> ScriptedModel:
    """The SDK's own scripted model: each turn's output items, then a final message."""
    return ScriptedModel([list(turn) for turn in turns] + [[assistant_message(final)]])


def outputs(model: ScriptedModel, call_index: int = -1) -> dict[str, Any]:
    """The tool outputs the model received in one request, by call id."""
    items = model.calls[call_index].input
    return {item["call_id"]: item["output"] for item in items
            if isinstance(item, dict) and item.get("type") == "function_call_output"}


def sent_arguments(model: ScriptedModel, call_index: int = -1) -> dict[str, str]:
    """The function-call items the model is shown in one request, by call id."""
    items = model.calls[call_index].input
    return {item["call_id"]: item["arguments"] for item in items
            if isinstance(item, dict) and item.get("type") == "function_call"}


def make_agent(tools: list[FunctionTool], model: ScriptedModel, name: str = "ops") -> Agent[Any]:
    return Agent(name=name, instructions="Do the job.", model=model, tools=tools)


def audited_guard(policy: dict[str, Any] | None = None) -> tuple[Guard, list[dict[str, Any]]]:
    """A guard whose audit events land in a list (written synchronously)."""
    events: list[dict[str, Any]] = []
    spec = dict(policy or POLICY)
    guard = Guard(rules=spec["rules"], default=spec.get("default", "allow"),
                  audit=Auditor([CallableSink(events.append)], required=True))
    return guard, events
