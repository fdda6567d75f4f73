"""Shared pieces for the Google ADK adapter tests: tools that log their calls, a scripted model,
and a runner that drives one session."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

from _scenario import POLICY, SECRET, ProcessDied
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.events import Event
from google.adk.models import BaseLlm, LlmRequest, LlmResponse
from google.adk.runners import InMemoryRunner
from google.genai import types
from pydantic import Field

from callwarden.adapters.google_adk import CallwardenPlugin

TIMEOUT = 30  # a hang fails the test instead of blocking the suite
CONFIRM = "adk_request_confirmation"



class Tools:
    """The tools an agent may call (sync and async); every body that runs appends (name, args)
    to ``ran``."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, dict[str, Any]]] = []
        self.dies_in: set[str] = set()  # tools whose next run kills the process (ProcessDied)

    def all(self) -> list[Any]:
        ran, dies_in = self.ran, self.dies_in

        async def read_file(path: str) -> str:
            """Reads a file."""
            ran.append(("read_file", {"path": path}))
            return SECRET if path == "config.ini" else f"contents of {path}"

        def delete_file(path: str) -> str:
            """Deletes a file."""
            ran.append(("delete_file", {"path": path}))
            return "deleted"

        async def search(query: str, limit: int) -> str:
            """Searches."""
            ran.append(("search", {"query": query, "limit": limit}))
            return f"{limit} results for {query}"

        def deploy(env: str) -> str:
            """Deploys the app."""
            ran.append(("deploy", {"env": env}))
            if "deploy" in dies_in:
                dies_in.discard("deploy")
                raise ProcessDied
            return f"deployed to {env}"

        def wipe_disk(device: str) -> str:
            """Wipes a disk."""
            ran.append(("wipe_disk", {"device": device}))
            return "wiped"

        def flaky(x: int) -> str:
            """Always fails."""
            ran.append(("flaky", {"x": x}))
            raise ConnectionError("server gone")

        def send_email(to: str, body: str) -> str:
            """Sends an e-mail."""
            ran.append(("send_email", {"to": to, "body": body}))
            return f"sent to {to}"

        return [read_file, delete_file, search, deploy, wipe_disk, flaky, send_email]

    def names(self) -> list[str]:
        return [name for name, _ in self.ran]


Call = tuple[str, str, dict[str, Any]]


def call(call_id: str, name: str, **args: Any) -> Call:
    return call_id, name, args


class ScriptedModel(BaseLlm):
    """A model that answers each request with the next scripted turn: a list of function calls
    or a text. It records every request it gets."""

    model: str = "scripted"
    turns: list[Any] = Field(default_factory=list)
    requests: list[LlmRequest] = Field(default_factory=list)

    async def generate_content_async(self, llm_request: LlmRequest, stream: bool = False
                                     ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request)
        turn = self.turns.pop(0) if self.turns else "(script ended)"
        if isinstance(turn, str):
            parts = [types.Part(text=turn)]
        else:
            parts = [types.Part(function_call=types.FunctionCall(id=i, name=n, args=a))
                     for i, n, a in turn]
        yield LlmResponse(content=types.Content(role="model", parts=parts))

    def results_seen(self) -> dict[str, dict[str, Any]]:
        """The function responses in the model's latest request, by call id."""
        return {p.function_response.id: p.function_response.response
                for c in self.requests[-1].contents for p in c.parts or []
                if p.function_response is not None}


def model(*turns: list[Call] | str) -> ScriptedModel:
    return ScriptedModel(turns=list(turns))


def text(message: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=message)])


def confirmations(events: list[Event]) -> list[types.FunctionCall]:
    """The ``adk_request_confirmation`` calls a paused run asks the user to answer."""
    return [p.function_call for e in events for p in (e.content.parts if e.content else [])
            if p.function_call is not None and p.function_call.name == CONFIRM]


def confirm(request: types.FunctionCall, confirmed: bool, **payload: Any) -> types.Content:
    """The user's answer to a confirmation request, as an ADK client sends it."""
    response: dict[str, Any] = {"confirmed": confirmed}
    if payload:
        response["payload"] = payload
    return types.Content(role="user", parts=[types.Part(function_response=types.FunctionResponse(
        id=request.id, name=CONFIRM, response=response))])


class Session:
    """One runner with the plugin, and one session to talk in."""

    def __init__(self, llm: ScriptedModel, plugin: CallwardenPlugin, tools: Tools,
                 agent: Any = None, user: str = "bob") -> None:
        self.model = llm
        self.plugin = plugin
        self.agent = agent or LlmAgent(name="assistant", model=llm, tools=tools.all())
        self.runner = InMemoryRunner(app=App(name="ops", root_agent=self.agent,
                                             plugins=[plugin]))
        self.user = user
        self.id: str | None = None

    async def send(self, message: types.Content | str) -> list[Event]:
        """Runs one invocation to its end (or pause) and returns its events."""
        if self.id is None:
            created = await self.runner.session_service.create_session(
                app_name=self.runner.app_name, user_id=self.user)
            self.id = created.id
        content = text(message) if isinstance(message, str) else message

        async def run() -> list[Event]:
            return [e async for e in self.runner.run_async(
                user_id=self.user, session_id=str(self.id), new_message=content)]

        return await asyncio.wait_for(run(), TIMEOUT)


def plugin(policy: Any = None, **options: Any) -> CallwardenPlugin:
    return CallwardenPlugin(POLICY if policy is None else policy, **options)


def session(tools: Tools, llm: ScriptedModel, policy: Any = None, **options: Any) -> Session:
    return Session(llm, plugin(policy, **options), tools)
