"""The DeerFlow guardrail provider, driven the way DeerFlow's GuardrailMiddleware drives it.

DeerFlow is not installed here. ``DeerFlowGuardrail`` below is a small re-statement of what
bytedance/deer-flow backend/packages/harness/deerflow/guardrails/middleware.py does around
``provider.evaluate``: build a ``GuardrailRequest`` from the tool call and the run's context,
re-raise LangGraph's ``GraphBubbleUp``, turn a provider exception into a deny only when
``fail_closed``, answer a denial with an error ``ToolMessage`` built from ``reasons[0]``, and run
the tool with the original request otherwise. It runs inside a real LangChain agent with a
scripted model, so the tool bodies, the ToolMessages and the model's next request are real.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import inspect
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Protocol, runtime_checkable

import pytest
from _readme import ReadmeSection
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphBubbleUp
from langgraph.types import Command
from pydantic import Field

from callwarden import Guard
from callwarden.adapters.deerflow import GuardrailDecision, Provider

README = ReadmeSection("DeerFlow")

POLICY = {
    "version": 1,
    "default": "allow",
    "rules": [
        {"id": "no-delete", "match": {"tool": "delete_file"}, "effect": "deny",
         "message": "Deleting files is not allowed; move them to trash/ instead."},
        {"id": "cap-search", "match": {"tool": "search"}, "cap": {"limit": 5},
         "effect": "modify"},
        {"id": "deploy-asks", "match": {"tool": "deploy"}, "effect": "ask",
         "message": "Deploys need a person's go-ahead."},
        {"id": "stop-on-wipe", "match": {"tool": "wipe"}, "effect": "halt",
         "message": "Wiping is never allowed; the run is over."},
        {"id": "no-subagent-notes", "match": {"tool": "read_notes"},
         "if": "context.is_subagent", "effect": "deny", "message": "Subagents may not read notes."},
    ],
}


# -- what DeerFlow does around the provider ------------------------------------------------------

@dataclass
class GuardrailRequest:
    """The fields DeerFlow's middleware fills (provider.py GuardrailRequest)."""

    tool_name: str
    tool_input: dict[str, Any]
    agent_id: str | None = None
    thread_id: str | None = None
    is_subagent: bool = False
    timestamp: str = ""
    user_id: str | None = None
    user_role: str | None = None
    oauth_provider: str | None = None
    oauth_id: str | None = None
    run_id: str | None = None
    tool_call_id: str | None = None


@runtime_checkable
class GuardrailProvider(Protocol):
    """DeerFlow's structural provider protocol."""

    name: str

    def evaluate(self, request: Any) -> Any: ...

    async def aevaluate(self, request: Any) -> Any: ...


def resolve_provider(use: str, config: dict[str, Any]) -> Any:
    """What DeerFlow does with ``guardrails.provider``: import ``use``, call it with ``config``
    as keyword arguments, adding ``framework="deerflow"`` when the class accepts it."""
    module, _, name = use.partition(":")
    cls = getattr(importlib.import_module(module), name)
    kwargs = dict(config)
    params = inspect.signature(cls.__init__).parameters
    if "framework" not in kwargs and ("framework" in params or any(
            p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())):
        kwargs["framework"] = "deerflow"
    return cls(**kwargs)


class DeerFlowGuardrail(AgentMiddleware):
    """Does what DeerFlow's GuardrailMiddleware does (see the module docstring)."""

    def __init__(self, provider: Any, *, fail_closed: bool = True, passport: str | None = None):
        super().__init__()
        self.provider, self.fail_closed, self.passport = provider, fail_closed, passport

    def _request(self, request: Any) -> GuardrailRequest:
        context = getattr(getattr(request, "runtime", None), "context", None)
        context = context if isinstance(context, dict) else {}
        call = request.tool_call
        return GuardrailRequest(
            tool_name=str(call.get("name", "")), tool_input=call.get("args", {}),
            agent_id=self.passport, thread_id=context.get("thread_id"),
            is_subagent=bool(context.get("is_subagent")),
            timestamp=datetime.now(UTC).isoformat(), user_id=context.get("user_id"),
            user_role=context.get("user_role"), run_id=context.get("run_id"),
            tool_call_id=call.get("id"))

    @staticmethod
    def _denied(request: Any, decision: Any) -> ToolMessage:
        name = str(request.tool_call.get("name", "unknown_tool"))
        text = decision.reasons[0].message if decision.reasons else "blocked by guardrail policy"
        code = decision.reasons[0].code if decision.reasons else "oap.denied"
        return ToolMessage(content=f"Guardrail denied: tool '{name}' was blocked ({code}). "
                                   f"Reason: {text}. Choose an alternative approach.",
                           tool_call_id=str(request.tool_call.get("id")), name=name,
                           status="error")

    def _provider_error(self) -> Any:
        return SimpleNamespace(allow=False, reasons=[SimpleNamespace(
            code="oap.evaluator_error", message="guardrail provider error (fail-closed)")])

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        try:
            decision = self.provider.evaluate(self._request(request))
        except GraphBubbleUp:
            raise
        except Exception:
            if self.fail_closed:
                return self._denied(request, self._provider_error())
            return handler(request)
        return handler(request) if decision.allow else self._denied(request, decision)

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        try:
            decision = await self.provider.aevaluate(self._request(request))
        except GraphBubbleUp:
            raise
        except Exception:
            if self.fail_closed:
                return self._denied(request, self._provider_error())
            return await handler(request)
        return await handler(request) if decision.allow else self._denied(request, decision)


# -- a scripted model and tools that record what ran -------------------------------------------

class ScriptedModel(BaseChatModel):
    """Replays scripted replies and keeps every request it received."""

    script: list[AIMessage] = Field(default_factory=list)
    requests: list[list[Any]] = Field(default_factory=list)

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        self.requests.append(list(messages))
        reply = self.script.pop(0) if self.script else AIMessage("done")
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self

    @property
    def _llm_type(self) -> str:
        return "scripted"


def calls(*specs: tuple[str, dict[str, Any]]) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"call-{name}-{i}"}
                                     for i, (name, args) in enumerate(specs)])


@pytest.fixture
def ran() -> list[tuple[str, dict[str, Any]]]:
    return []


@pytest.fixture
def tools(ran):
    @tool
    def read_notes(topic: str) -> str:
        """Reads notes."""
        ran.append(("read_notes", {"topic": topic}))
        return f"notes about {topic}"

    @tool
    def delete_file(path: str) -> str:
        """Deletes a file."""
        ran.append(("delete_file", {"path": path}))
        return "deleted"

    @tool
    def search(query: str, limit: int) -> str:
        """Searches."""
        ran.append(("search", {"query": query, "limit": limit}))
        return f"{limit} results"

    @tool
    def deploy(env: str) -> str:
        """Deploys."""
        ran.append(("deploy", {"env": env}))
        return f"deployed {env}"

    @tool
    def wipe() -> str:
        """Wipes everything."""
        ran.append(("wipe", {}))
        return "wiped"

    return [read_notes, delete_file, search, deploy, wipe]


def agent(model, tools, provider, *, fail_closed=True, checkpointer=None):
    return create_agent(model, tools, middleware=[DeerFlowGuardrail(provider,
                                                                    fail_closed=fail_closed)],
                        checkpointer=checkpointer)


def tool_messages(result) -> dict[str, str]:
    return {m.name: m.content for m in result["messages"] if isinstance(m, ToolMessage)}


def seen_by_model(model) -> dict[str, str]:
    """The tool results the model received in its latest request."""
    return {m.name: m.content for m in model.requests[-1] if isinstance(m, ToolMessage)}


CONTEXT = {"thread_id": "thread-1", "user_id": "alice", "run_id": "run-1"}
TURN = [("read_notes", {"topic": "q3"}), ("delete_file", {"path": "a.txt"}),
        ("search", {"query": "cats", "limit": 50}), ("deploy", {"env": "prod"}),
        ("wipe", {})]


# -- the scenario: one turn, every effect ----------------------------------------------

def test_one_turn_with_every_effect(tools, ran) -> None:
    model = ScriptedModel(script=[calls(*TURN), AIMessage("ok")])
    result = agent(model, tools, Provider(POLICY)).invoke({"messages": [("user", "go")]},
                                                          context=CONTEXT)
    assert ran == [("read_notes", {"topic": "q3"})]
    seen = seen_by_model(model)
    assert seen["read_notes"] == "notes about q3"
    assert seen["delete_file"] == (
        "Guardrail denied: tool 'delete_file' was blocked (callwarden.deny). Reason: Deleting files is "
        "not allowed; move them to trash/ instead.. Choose an alternative approach.")
    assert 'again with these arguments instead: {"limit": 5, "query": "cats"}' in seen["search"]
    assert re.search(r"\(callwarden\.approval_pending\).*approval request \S+", seen["deploy"])
    assert "The policy halted this run" in seen["wipe"]
    assert result["messages"][-1].content == "ok"


def test_a_rewritten_call_runs_when_the_model_reissues_it(tools, ran) -> None:
    model = ScriptedModel(script=[calls(("search", {"query": "cats", "limit": 50})),
                                  calls(("search", {"query": "cats", "limit": 5})),
                                  AIMessage("ok")])
    agent(model, tools, Provider(POLICY)).invoke({"messages": [("user", "go")]})
    assert ran == [("search", {"query": "cats", "limit": 5})]
    assert seen_by_model(model)["search"] == "5 results"


async def test_one_turn_with_every_effect_async(tools, ran) -> None:
    model = ScriptedModel(script=[calls(*TURN), AIMessage("ok")])
    graph = agent(model, tools, Provider(POLICY))
    await asyncio.wait_for(graph.ainvoke({"messages": [("user", "go")]}, context=CONTEXT), 30)
    assert ran == [("read_notes", {"topic": "q3"})]
    seen = seen_by_model(model)
    assert "Deleting files is not allowed" in seen["delete_file"]
    assert "(callwarden.rewrite_required)" in seen["search"]
    assert "(callwarden.approval_pending)" in seen["deploy"]
    assert "halted" in seen["wipe"]


# -- approval through a LangGraph interrupt (interrupt: true) ----------------------------------

def run_to_interrupt(tools, provider, tool_call):
    model = ScriptedModel(script=[calls(tool_call), AIMessage("ok")])
    graph = agent(model, tools, provider, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t-1"}}
    first = graph.invoke({"messages": [("user", "go")]}, config, context=CONTEXT)
    return model, graph, config, first


def test_ask_pauses_the_run_with_an_interrupt(tools, ran) -> None:
    _, _, _, first = run_to_interrupt(tools, Provider(POLICY, interrupt=True),
                                      ("deploy", {"env": "prod"}))
    (pause,) = first["__interrupt__"]
    assert pause.value["type"] == "callwarden.approval"
    assert (pause.value["tool"], pause.value["args"]) == ("deploy", {"env": "prod"})
    assert pause.value["request_id"]
    assert ran == []


def test_approved_call_runs_exactly_once_after_resume(tools, ran) -> None:
    model, graph, config, _ = run_to_interrupt(tools, Provider(POLICY, interrupt=True),
                                               ("deploy", {"env": "prod"}))
    graph.invoke(Command(resume={"approve": True, "by": "bob"}), config, context=CONTEXT)
    assert ran == [("deploy", {"env": "prod"})]
    assert seen_by_model(model)["deploy"] == "deployed prod"


def test_rejected_call_tells_the_model_the_reason(tools, ran) -> None:
    model, graph, config, _ = run_to_interrupt(tools, Provider(POLICY, interrupt=True),
                                               ("deploy", {"env": "prod"}))
    graph.invoke(Command(resume={"approve": False, "by": "bob", "reason": "freeze week"}),
                 config, context=CONTEXT)
    assert ran == []
    assert "freeze week" in seen_by_model(model)["deploy"]


async def test_approved_call_runs_exactly_once_after_resume_async(tools, ran) -> None:
    model = ScriptedModel(script=[calls(("deploy", {"env": "qa"})), AIMessage("ok")])
    graph = agent(model, tools, Provider(POLICY, interrupt=True), checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t-2"}}
    first = await asyncio.wait_for(graph.ainvoke({"messages": [("user", "go")]}, config,
                                                 context=CONTEXT), 30)
    assert first["__interrupt__"]
    await asyncio.wait_for(graph.ainvoke(Command(resume=True), config, context=CONTEXT), 30)
    assert ran == [("deploy", {"env": "qa"})]


class ProcessDied(BaseException):
    """The process dying inside a tool: LangGraph saves no result for the task."""


def test_a_resume_value_replayed_after_a_crash_does_not_run_the_call_again(ran) -> None:
    @tool
    def deploy(env: str) -> str:
        """Deploys."""
        ran.append(("deploy", {"env": env}))
        if len(ran) == 1:
            raise ProcessDied
        return f"deployed {env}"

    model, graph, config, _ = run_to_interrupt([deploy], Provider(POLICY, interrupt=True),
                                               ("deploy", {"env": "prod"}))
    with pytest.raises(ProcessDied):
        graph.invoke(Command(resume={"approve": True, "by": "bob"}), config, context=CONTEXT)
    # Resumed from the checkpoint: LangGraph replays the answer that let the call run then.
    again = graph.invoke(None, config, context=CONTEXT)
    assert ran == [("deploy", {"env": "prod"})]
    (pause,) = again["__interrupt__"]
    assert pause.value["type"] == "callwarden.approval" and pause.value["in_doubt"]
    graph.invoke(Command(resume={"approve": True, "by": "carol",
                                 "request_id": pause.value["request_id"]}),
                 config, context=CONTEXT)
    assert ran == [("deploy", {"env": "prod"})] * 2
    assert seen_by_model(model)["deploy"] == "deployed prod"


def test_halt_pauses_the_run_and_stays_denied_on_resume(tools, ran) -> None:
    model, graph, config, first = run_to_interrupt(tools, Provider(POLICY, interrupt=True),
                                                   ("wipe", {}))
    assert first["__interrupt__"][0].value["type"] == "callwarden.halt"
    graph.invoke(Command(resume=True), config, context=CONTEXT)
    assert ran == []
    assert "halted" in seen_by_model(model)["wipe"]


def test_interrupt_outside_a_graph_fails_closed() -> None:
    decision = Provider(POLICY, interrupt=True).evaluate(
        GuardrailRequest(tool_name="deploy", tool_input={"env": "prod"}, tool_call_id="c1"))
    assert decision.allow is False
    assert decision.reasons[0].code == "callwarden.adapter_error"


# -- fail closed -----------------------------------------------------------------------------

def _raises(call, ctx):
    raise RuntimeError("policy bug")


@pytest.mark.parametrize("fail_closed", [True, False])
def test_a_policy_error_fails_closed_even_when_deerflow_would_fail_open(tools, ran,
                                                                       fail_closed) -> None:
    guard = Guard(rules=[], policies=[_raises])
    model = ScriptedModel(script=[calls(("read_notes", {"topic": "x"})), AIMessage("ok")])
    agent(model, tools, Provider(guard), fail_closed=fail_closed).invoke(
        {"messages": [("user", "go")]})
    assert ran == []
    assert "policy_error" in seen_by_model(model)["read_notes"]


def test_a_malformed_request_is_denied_not_raised() -> None:
    decision = Provider(POLICY).evaluate(SimpleNamespace(tool_name=None, tool_input={}))
    assert decision.allow is False
    assert decision.reasons[0].code == "callwarden.adapter_error"


def test_a_malformed_request_also_gives_the_oap_evaluator_error() -> None:
    decision = Provider(POLICY).evaluate(SimpleNamespace(tool_name=None, tool_input={}))
    assert [r.code for r in decision.reasons] == ["callwarden.adapter_error",
                                                  "oap.evaluator_error"]


# -- an OAP passport as the policy (DeerFlow's second provider option) -------------------------

PASSPORT = Path(__file__).parent.parent / "fixtures" / "oap" / "passport.json"


def passport_provider(tmp_path: Path, **changes: Any) -> Provider:
    passport = {**json.loads(PASSPORT.read_text()), **changes}
    (tmp_path / "passport.json").write_text(json.dumps(passport))
    (tmp_path / "policy.yaml").write_text(
        "version: 1\nextends: oap:passport.json\nrules:\n"
        "  - {id: bash-budget, match: {tool: bash}, limit: {calls: 3, per: session}}\n")
    return Provider(str(tmp_path / "policy.yaml"))


def codes(provider: Provider, tool: str, **args: Any) -> list[str]:
    decision = provider.evaluate(GuardrailRequest(tool_name=tool, tool_input=args,
                                                  thread_id="t1"))
    return [r.code for r in decision.reasons]


def test_a_passport_gives_oap_reason_codes_beside_callwardens(tmp_path: Path) -> None:
    provider = passport_provider(tmp_path)
    assert codes(provider, "bash", command="git status") == ["default_allow", "oap.allowed"]
    assert codes(provider, "bash", command="curl x") == ["oap.command_not_allowed",
                                                         "shell.not_allowed"]
    assert codes(provider, "bash", command="r''m -fr /") == ["oap.blocked_pattern",
                                                             "shell.denied"]
    assert codes(provider, "write_file", path="/work/a")[0] == "oap.tool_not_allowed"
    assert codes(provider, "bash", command="ls", timeout=9000)[0] == "oap.limit_exceeded"
    # a limit of the policy's own: callwarden's code first, OAP's nearest beside it
    for _ in range(2):
        codes(provider, "bash", command="ls")
    assert codes(provider, "bash", command="ls")[:2] == ["limit.exceeded", "oap.limit_exceeded"]


def test_a_suspended_passport_blocks_the_agent_in_deerflow(tmp_path: Path, ran) -> None:
    @tool
    def bash(command: str) -> str:
        """Runs a shell command."""
        ran.append(("bash", {"command": command}))
        return "ok"

    model = ScriptedModel(script=[calls(("bash", {"command": "git status"})), AIMessage("ok")])
    agent(model, [bash], passport_provider(tmp_path, status="revoked")).invoke(
        {"messages": [("user", "go")]})
    assert ran == []
    seen = seen_by_model(model)["bash"]
    assert "blocked (oap.passport_suspended)" in seen and "is revoked" in seen


async def test_a_malformed_request_is_denied_not_raised_async() -> None:
    decision = await Provider(POLICY).aevaluate(GuardrailRequest(tool_name="", tool_input={}))
    assert decision.allow is False


def test_non_object_tool_input_is_denied() -> None:
    decision = Provider(POLICY).evaluate(GuardrailRequest(tool_name="read_notes",
                                                          tool_input="rm -rf /"))  # type: ignore[arg-type]
    assert decision.allow is False


# -- the protocol, directly ----------------------------------------------------------------------

def test_loads_the_way_deerflow_resolves_providers(tmp_path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("version: 1\nrules:\n  - {id: no-delete, match: {tool: delete_file}, "
                    "effect: deny}\n")
    provider = resolve_provider("callwarden.adapters.deerflow:Provider", {"policy": str(path)})
    assert isinstance(provider, GuardrailProvider)
    assert (provider.name, provider.enforcer.framework) == ("callwarden", "deerflow")
    assert provider.evaluate(GuardrailRequest("delete_file", {"path": "x"})).allow is False


def test_a_broken_policy_fails_when_deerflow_builds_the_agent(tmp_path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("version: 1\nrules:\n  - {id: x, effect: maybe}\n")
    with pytest.raises(Exception, match="maybe"):
        resolve_provider("callwarden.adapters.deerflow:Provider", {"policy": str(path)})


def test_without_a_policy_the_provider_says_how_to_configure_it(monkeypatch) -> None:
    monkeypatch.delenv("CALLWARDEN_POLICY", raising=False)
    with pytest.raises(TypeError, match=r"guardrails\.provider\.config\.policy"):
        Provider()


def test_allow_has_deerflow_decision_shape() -> None:
    decision = Provider(POLICY).evaluate(GuardrailRequest("read_notes", {"topic": "x"}))
    assert isinstance(decision, GuardrailDecision)
    assert decision.allow is True
    assert decision.policy_id == "default"
    assert decision.metadata["effect"] == "allow"
    assert decision.reasons[0].code and decision.reasons[0].message


def test_deny_names_its_rule_and_reason() -> None:
    decision = Provider(POLICY).evaluate(GuardrailRequest("delete_file", {"path": "a"}))
    assert (decision.allow, decision.policy_id) == (False, "no-delete")
    assert decision.reasons[0].message.startswith("Deleting files is not allowed")
    assert decision.metadata["decision_id"]


def test_modify_is_denied_with_the_rewritten_arguments_in_metadata() -> None:
    decision = Provider(POLICY).evaluate(GuardrailRequest("search", {"query": "q", "limit": 9}))
    assert decision.allow is False
    assert decision.metadata["rewritten_args"] == {"query": "q", "limit": 5}


def test_halt_is_marked_in_metadata() -> None:
    decision = Provider(POLICY).evaluate(GuardrailRequest("wipe", {}))
    assert decision.allow is False
    assert decision.metadata["halt"] is True


def test_ask_is_settled_by_a_configured_approver() -> None:
    provider = Provider(POLICY, approver=lambda request: True)
    assert provider.evaluate(GuardrailRequest("deploy", {"env": "qa"}, user_id="alice")).allow


def test_approver_can_be_given_as_an_import_path() -> None:
    provider = Provider(POLICY, approver=f"{__name__}:reject_everything")
    decision = provider.evaluate(GuardrailRequest("deploy", {"env": "qa"}, user_id="alice"))
    assert decision.allow is False


def reject_everything(request: Any) -> bool:
    return False


def test_request_fields_become_the_call() -> None:
    seen = []

    def record(call, ctx):
        seen.append(call)

    provider = Provider(Guard(rules=POLICY["rules"], policies=[record]))
    provider.evaluate(GuardrailRequest(
        "read_notes", {"topic": "x"}, agent_id="passport.json", thread_id="t-9",
        user_id="alice", user_role="admin", run_id="r-1", tool_call_id="call-7"))
    (call,) = seen
    assert (call.agent, call.session, call.principal, call.call_id, call.framework) == (
        "passport.json", "t-9", "alice", "call-7", "deerflow")
    assert call.context["run_id"] == "r-1"
    assert call.context["user_role"] == "admin"


def test_subagent_calls_are_visible_to_conditions() -> None:
    provider = Provider(POLICY)
    assert provider.evaluate(GuardrailRequest("read_notes", {"topic": "x"})).allow
    denied = provider.evaluate(GuardrailRequest("read_notes", {"topic": "x"}, is_subagent=True))
    assert denied.reasons[0].message == "Subagents may not read notes."


async def test_aevaluate_matches_evaluate() -> None:
    provider = Provider(POLICY)
    for name, args in TURN:
        sync = provider.evaluate(GuardrailRequest(name, args, tool_call_id=f"s-{name}"))
        asyn = await provider.aevaluate(GuardrailRequest(name, args, tool_call_id=f"a-{name}"))
        assert (sync.allow, sync.policy_id) == (asyn.allow, asyn.policy_id)


def test_readme_example_runs(tmp_path, monkeypatch) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) == 1
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks[0], str(README), "exec"), {"__name__": "readme"})


def test_a_retry_of_an_approved_call_is_allowed_once_then_asks_again() -> None:
    """The refusal names the request to approve; the model's retry of the same call (a new
    tool call id) is then allowed once, and the one after that asks again."""
    provider = Provider(POLICY)

    def attempt(n: int) -> Any:
        return provider.evaluate(GuardrailRequest("deploy", {"env": "prod"}, thread_id="t-9",
                                                  user_id="u", tool_call_id=f"call-{n}"))

    first = attempt(1)
    assert first.allow is False
    request_id = first.metadata["approval_request_id"]
    provider.enforcer.guard.approvals.approve(request_id, by="alice")
    assert attempt(2).allow is True
    third = attempt(3)
    assert third.allow is False and third.metadata["approval_request_id"] != request_id


def test_a_retry_of_a_denied_call_gets_the_persons_reason() -> None:
    provider = Provider(POLICY)
    request = GuardrailRequest("deploy", {"env": "prod"}, thread_id="t-8", user_id="u",
                               tool_call_id="call-1")
    request_id = provider.evaluate(request).metadata["approval_request_id"]
    provider.enforcer.guard.approvals.deny(request_id, by="alice", reason="freeze week")
    again = provider.evaluate(dataclasses.replace(request, tool_call_id="call-2"))
    assert again.allow is False and "freeze week" in again.reasons[0].message

