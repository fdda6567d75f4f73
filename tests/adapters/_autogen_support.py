"""Shared pieces for the AutoGen adapter tests: tools that log their calls, a scripted model."""

from __future__ import annotations

import json
from typing import Any

from _scenario import POLICY, SECRET
from autogen_agentchat.agents import AssistantAgent
from autogen_core import FunctionCall
from autogen_core.models import CreateResult, FunctionExecutionResult, ModelInfo, RequestUsage
from autogen_core.models import FunctionExecutionResultMessage as ResultMessage
from autogen_core.tools import FunctionTool, StaticStreamWorkbench
from autogen_ext.models.replay import ReplayChatCompletionClient

from callwarden.adapters.autogen import GuardedWorkbench


class Tools:
    """The tools an agent may call; every body that runs appends (name, args) to ``ran``."""

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

        return [FunctionTool(f, description=f.__name__.replace("_", " "))
                for f in (read_file, delete_file, search, deploy, wipe_disk)]

    def names(self) -> list[str]:
        return [name for name, _ in self.ran]




def mailer(sent: list[str]) -> FunctionTool:
    """A send_email tool that appends each recipient it mails to ``sent``."""

    def send_email(to: str) -> str:
        sent.append(to)
        return f"sent to {to}"

    return FunctionTool(send_email, description="send an e-mail")


def call(call_id: str, name: str, **args: Any) -> FunctionCall:
    return FunctionCall(id=call_id, name=name, arguments=json.dumps(args))


def asks(*calls: FunctionCall) -> CreateResult:
    """One model turn asking for these tool calls."""
    return CreateResult(finish_reason="function_calls", content=list(calls),
                        usage=RequestUsage(prompt_tokens=0, completion_tokens=0), cached=False)


def model(*turns: CreateResult | str) -> ReplayChatCompletionClient:
    info = ModelInfo(vision=False, function_calling=True, json_output=False, family="unknown",
                     structured_output=False)
    return ReplayChatCompletionClient(list(turns), model_info=info)


def guarded(tools: Tools, policy: Any = None, **options: Any) -> GuardedWorkbench:
    return GuardedWorkbench(StaticStreamWorkbench(tools.all()),
                            POLICY if policy is None else policy, agent="assistant", **options)


def assistant(workbench: Any, client: ReplayChatCompletionClient, **options: Any) -> AssistantAgent:
    return AssistantAgent("assistant", model_client=client, workbench=workbench, **options)


def results_seen(client: ReplayChatCompletionClient) -> dict[str, FunctionExecutionResult]:
    """The tool results in the model's latest request, by call id."""
    messages = client.create_calls[-1]["messages"]
    return {r.call_id: r for m in messages if isinstance(m, ResultMessage) for r in m.content}
