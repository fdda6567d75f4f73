"""Shared pieces for the CrewAI adapter tests: tools that log their calls, a scripted model,
and a kickoff that fails instead of hanging."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from typing import Any

from _scenario import POLICY, SECRET
from crewai import Agent, Crew, Task
from crewai.llms.base_llm import BaseLLM
from crewai.tools import BaseTool, tool
from pydantic import Field

from callwarden.adapters.crewai import CrewGuard

TIMEOUT = 30  # a hang fails the test instead of blocking the suite



class Tools:
    """The tools an agent may call; every body that runs appends (name, args) to ``ran``."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()  # a turn's calls may run in parallel threads

    def _log(self, name: str, **args: Any) -> None:
        with self._lock:
            self.ran.append((name, args))

    def all(self, *, sequential: bool = False) -> list[BaseTool]:
        log = self._log

        @tool("read_file")
        def read_file(path: str) -> str:
            """Reads a file."""
            log("read_file", path=path)
            return SECRET if path == "config.ini" else f"contents of {path}"

        @tool("delete_file")
        def delete_file(path: str) -> str:
            """Deletes a file."""
            log("delete_file", path=path)
            return "deleted"

        @tool("search")
        def search(query: str, limit: int) -> str:
            """Searches the index."""
            log("search", query=query, limit=limit)
            return f"{limit} results for {query}"

        @tool("deploy")
        def deploy(env: str) -> str:
            """Deploys the service."""
            log("deploy", env=env)
            return f"deployed to {env}"

        @tool("wipe_disk")
        def wipe_disk(device: str) -> str:
            """Wipes a disk."""
            log("wipe_disk", device=device)
            return "wiped"

        tools = [read_file, delete_file, search, deploy, wipe_disk]
        if sequential:
            # CrewAI runs a turn's native calls in parallel threads unless a tool has a usage
            # cap (AgentExecutor._should_parallelize_native_tool_calls); one by one, every
            # call before the halting one has run when the crew stops.
            for t in tools:
                t.max_usage_count = 1000
        return tools

    def mail(self) -> list[BaseTool]:
        """Only ``send_email``, for the request tests."""
        log = self._log

        @tool("send_email")
        def send_email(to: str) -> str:
            """Sends an e-mail."""
            log("send_email", to=to)
            return f"sent to {to}"

        return [send_email]

    def names(self) -> list[str]:
        return [name for name, _ in self.ran]


class ScriptedLLM(BaseLLM):
    """A CrewAI model that answers from a script: a list of tool calls (native function
    calling) or a text (a final answer, or a ReAct step when ``native`` is False).

    ``requests`` holds the messages of every call; once the script ends it answers a final
    text, so a test can tell how many turns the model was given.
    """

    script: list[Any] = Field(default_factory=list)
    requests: list[list[dict[str, Any]]] = Field(default_factory=list)
    native: bool = True

    def call(self, messages: Any, tools: Any = None, callbacks: Any = None,
             available_functions: Any = None, from_task: Any = None, from_agent: Any = None,
             response_model: Any = None) -> Any:
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        self.requests.append([dict(m) for m in messages])
        if not self.script:
            return "Final Answer: the script ended." if not self.native else "the script ended"
        return self.script.pop(0)

    async def acall(self, *args: Any, **kwargs: Any) -> Any:
        return self.call(*args, **kwargs)

    def supports_function_calling(self) -> bool:
        return self.native


def call(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    """One native (OpenAI-format) tool call."""
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)}}


def react(name: str, **args: Any) -> str:
    """One ReAct step asking for a tool."""
    return f"Thought: I should use {name}.\nAction: {name}\nAction Input: {json.dumps(args)}"


def model(*turns: Any, native: bool = True) -> ScriptedLLM:
    return ScriptedLLM(model="scripted", script=list(turns), requests=[], native=native)


def crew(tools: Tools, llm: ScriptedLLM, *, sequential: bool = False, role: str = "assistant",
         **agent_options: Any) -> Crew:
    """A one-agent, one-task crew whose agent has every tool."""
    agent = Agent(role=role, goal="tidy the project", backstory="a careful assistant",
                  llm=llm, tools=tools.all(sequential=sequential), verbose=False,
                  **agent_options)
    task = Task(description="Tidy up the project.", expected_output="a summary", agent=agent)
    return Crew(agents=[agent], tasks=[task], verbose=False)


def mail_crew(tools: Tools, llm: ScriptedLLM, coworker: ScriptedLLM | None = None) -> Crew:
    """A crew whose one task is "Mail the notes to {who}."; with a ``coworker`` model its agent
    has no tools and delegates to a "mailer" coworker that has ``send_email``."""
    if coworker is None:
        agent = Agent(role="assistant", goal="mail people", backstory="a careful assistant",
                      llm=llm, tools=tools.mail(), verbose=False)
        agents = [agent]
    else:
        agent = Agent(role="coordinator", goal="get mail sent", backstory="a coordinator",
                      llm=llm, tools=[], allow_delegation=True, verbose=False)
        agents = [agent, Agent(role="mailer", goal="mail people", backstory="a mailer",
                               llm=coworker, tools=tools.mail(), verbose=False)]
    task = Task(description="Mail the notes to {who}.", expected_output="who was mailed",
                agent=agent)
    return Crew(agents=agents, tasks=[task], verbose=False)


def guarded(the_crew: Crew, policy: Any = None, **options: Any) -> CrewGuard:
    """A guard for this crew only, installed."""
    return CrewGuard(POLICY if policy is None else policy, crew=the_crew, **options).install()


def kickoff(the_crew: Crew, *, mode: str = "sync", inputs: dict[str, Any] | None = None
            ) -> Any:
    """Runs the crew (``sync``: kickoff, ``async``: akickoff, else ``kickoff_async``) and
    returns its output, or raises what it raised; see :func:`within_timeout`."""
    if mode == "sync":
        return within_timeout(lambda: the_crew.kickoff(inputs=inputs))
    if mode == "async":
        return within_timeout(lambda: asyncio.run(the_crew.akickoff(inputs=inputs)))
    return within_timeout(lambda: asyncio.run(the_crew.kickoff_async(inputs=inputs)))


def within_timeout(run: Callable[[], Any]) -> Any:
    """Runs ``run`` in a thread: its result, or what it raised; still going after TIMEOUT
    fails the test instead of hanging it."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["result"] = run()
        except BaseException as e:  # handed to the test's thread
            outcome["error"] = e

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(TIMEOUT)
    if thread.is_alive():
        raise AssertionError(f"the run did not return within {TIMEOUT} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def results_seen(llm: ScriptedLLM) -> dict[str, str]:
    """The tool results in the model's latest request, by call id."""
    return {m["tool_call_id"]: m["content"] for m in llm.requests[-1] if m.get("role") == "tool"}


def transcript(llm: ScriptedLLM) -> str:
    """Everything the model was sent in its latest request (ReAct observations included)."""
    return "\n".join(str(m.get("content")) for m in llm.requests[-1])
