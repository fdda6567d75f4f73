"""The AutoGen GuardrailProvider protocol (microsoft/autogen #7405): callwarden as a provider,
driven through real FunctionTools, StaticWorkbench and AssistantAgent with a scripted model."""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Mapping
from typing import Any

import pytest
from _autogen_support import (
    POLICY,
    SECRET,
    Tools,
    asks,
    assistant,
    call,
    mailer,
    model,
    results_seen,
)
from _readme import ReadmeSection
from _scenario import REQUEST_POLICY
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core import CancellationToken
from autogen_core.model_context import UnboundedChatCompletionContext
from autogen_core.tools import FunctionTool, StaticWorkbench

from callwarden import Deny, Guard
from callwarden.adapters.autogen import CallwardenHaltTermination
from callwarden.adapters.autogen_guardrail import (
    CallwardenGuardrailProvider,
    Decision,
    GuardrailProvider,
    GuardrailResult,
    GuardrailTool,
    GuardrailWorkbench,
)

README = ReadmeSection("AutoGen GuardrailProvider (autogen #7405)")
TIMEOUT = 30  # a hang fails the test instead of blocking the suite
TOKEN = CancellationToken()


def guarded_tools(tools: Tools, *providers: Any) -> list[GuardrailTool]:
    return [GuardrailTool(t, providers, agent_name="assistant") for t in tools.all()]


def by_name(tools: list[GuardrailTool]) -> dict[str, GuardrailTool]:
    return {t.name: t for t in tools}


class Recorder:
    """A provider of the proposal's shape that records what it saw and answers as told."""

    def __init__(self, answer: Any = None) -> None:
        self.seen: list[dict[str, Any]] = []
        self.answer = answer

    async def evaluate(self, *, tool_name: str, args: Mapping[str, Any],
                       agent_name: str | None = None, call_id: str | None = None,
                       cancellation_token: Any = None) -> Any:
        self.seen.append({"tool": tool_name, "args": dict(args), "agent": agent_name,
                          "call_id": call_id})
        return self.answer or GuardrailResult(decision=Decision.ALLOW)


# -- the protocol, to the letter --------------------------------------------------------------

def test_the_provider_implements_the_proposed_protocol() -> None:
    provider = CallwardenGuardrailProvider(POLICY)
    assert isinstance(provider, GuardrailProvider)
    params = inspect.signature(provider.evaluate).parameters
    assert list(params) == ["tool_name", "args", "agent_name", "call_id", "cancellation_token"]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values())
    assert [d.name for d in Decision] == ["ALLOW", "DENY", "MODIFY"]
    result = GuardrailResult(decision=Decision.ALLOW)
    assert (result.reason, result.modified_args, result.metadata) == (None, None, {})


async def test_evaluate_answers_allow_deny_and_modify_with_metadata() -> None:
    provider = CallwardenGuardrailProvider(POLICY)
    allowed = await provider.evaluate(tool_name="read_file", args={"path": "a.txt"})
    denied = await provider.evaluate(tool_name="delete_file", args={"path": "a.txt"},
                                     agent_name="bot", call_id="c2")
    modified = await provider.evaluate(tool_name="search", args={"query": "q", "limit": 50})
    assert allowed.decision is Decision.ALLOW
    assert denied.decision is Decision.DENY
    assert denied.reason.startswith("Deleting files is not allowed")
    assert denied.metadata["rule"] == "no-delete" and denied.metadata["decision_id"]
    assert denied.metadata["source"] and denied.metadata["effect"] == "deny"
    assert modified.decision is Decision.MODIFY
    assert modified.modified_args == {"query": "q", "limit": 5}
    assert modified.metadata["rule"] == "cap-search"


# -- the run_json flow: one turn through a real AssistantAgent ----------------------------------

ONE_TURN = asks(call("c1", "read_file", path="config.ini"),
                call("c2", "delete_file", path="notes.txt"),
                call("c3", "search", query="callwarden", limit=50),
                call("c4", "deploy", env="qa"),
                call("c5", "wipe_disk", device="sda"))


async def run_turn(tools: Tools, provider: CallwardenGuardrailProvider) -> dict[str, Any]:
    client = model(ONE_TURN, "All done.")
    agent = assistant(StaticWorkbench(guarded_tools(tools, provider)), client,
                      reflect_on_tool_use=True)
    await asyncio.wait_for(agent.run(task="tidy up"), TIMEOUT)
    return results_seen(client)


async def test_one_turn_with_every_effect() -> None:
    tools = Tools()
    provider = CallwardenGuardrailProvider(POLICY, approver=lambda request: True)
    seen = await run_turn(tools, provider)
    # allowed, and its output screened: the secret never reaches the model
    assert ("read_file", {"path": "config.ini"}) in tools.ran
    assert SECRET not in seen["c1"].content and "[REDACTED" in seen["c1"].content
    # denied: never ran, the model reads the proposal's denial with the rule's message
    assert "delete_file" not in tools.names()
    assert seen["c2"].content.startswith("Tool call denied: Deleting files is not allowed")
    # modified: ran with the rewritten arguments
    assert ("search", {"query": "callwarden", "limit": 5}) in tools.ran
    # ask, approved inline: ran once
    assert tools.names().count("deploy") == 1
    # halt: never ran, the provider is halted
    assert "wipe_disk" not in tools.names()
    assert "halted" in seen["c5"].content
    assert provider.halted is not None and provider.halted.rule == "stop-on-wipe"


async def test_the_users_latest_message_is_the_request_the_policy_sees() -> None:
    """With the agent's model context, a recipient named in the task is allowed and a
    stranger is denied through the proposal's flow."""
    sent: list[str] = []
    context = UnboundedChatCompletionContext()
    provider = CallwardenGuardrailProvider(REQUEST_POLICY, model_context=context)
    client = model(asks(call("c1", "send_email", to="carol@example.org"),
                        call("c2", "send_email", to="eve@attacker.example")), "Done.")
    agent = assistant(StaticWorkbench([GuardrailTool(mailer(sent), [provider])]), client,
                      model_context=context, reflect_on_tool_use=True)
    await asyncio.wait_for(agent.run(task="Mail Carol@Example.org the notes"), TIMEOUT)
    seen = results_seen(client)
    assert sent == ["carol@example.org"]
    assert seen["c1"].content == "sent to carol@example.org"
    assert seen["c2"].content == "Tool call denied: Mail only people the user named."


async def test_a_rejected_ask_gives_the_model_the_reason() -> None:
    tools = Tools()
    provider = CallwardenGuardrailProvider(POLICY, approver=lambda request: Deny("freeze week"))
    deploy = by_name(guarded_tools(tools, provider))["deploy"]
    shown = await deploy.run_json({"env": "qa"}, TOKEN, call_id="c1")
    assert "deploy" not in tools.names()
    assert shown.startswith("Tool call denied:") and "freeze week" in shown


async def test_a_pending_ask_runs_once_after_approval() -> None:
    tools = Tools()
    provider = CallwardenGuardrailProvider(POLICY)
    deploy = by_name(guarded_tools(tools, provider))["deploy"]
    first = await deploy.run_json({"env": "qa"}, TOKEN, call_id="c1")
    assert first.startswith("Tool call denied:") and "deploy" not in tools.names()
    (request_id,) = provider.pending
    assert request_id in first
    await provider.answer(request_id, True, by="alice")
    assert await deploy.run_json({"env": "qa"}, TOKEN, call_id="c2") == "deployed to qa"
    third = await deploy.run_json({"env": "qa"}, TOKEN, call_id="c3")
    assert third.startswith("Tool call denied:")
    assert tools.names() == ["deploy"]


async def test_a_halt_stops_the_team_and_refuses_later_calls() -> None:
    tools = Tools()
    provider = CallwardenGuardrailProvider(POLICY)
    client = model(asks(call("c1", "wipe_disk", device="sda")),
                   asks(call("c2", "read_file", path="a.txt")), "never")
    agent = assistant(StaticWorkbench(guarded_tools(tools, provider)), client)
    team = RoundRobinGroupChat([agent], termination_condition=CallwardenHaltTermination(
        provider) | MaxMessageTermination(10))
    result = await asyncio.wait_for(team.run(task="clean the disk"), TIMEOUT)
    assert "halted" in (result.stop_reason or "")
    assert tools.ran == []
    read = by_name(guarded_tools(tools, provider))["read_file"]
    assert "halted" in await read.run_json({"path": "a.txt"}, TOKEN)
    provider.clear_halt()
    assert await read.run_json({"path": "a.txt"}, TOKEN) == "contents of a.txt"


async def test_an_output_rule_that_halts_withholds_the_result() -> None:
    policy = {"version": 1, "rules": [{"id": "no-keys-out", "on": "output", "secrets": True,
                                       "effect": "halt", "message": "A key leaked."}]}
    tools = Tools()
    provider = CallwardenGuardrailProvider(policy)
    read = by_name(guarded_tools(tools, provider))["read_file"]
    shown = await read.run_json({"path": "config.ini"}, TOKEN)
    assert SECRET not in shown and "A key leaked." in shown
    assert provider.halted is not None


# -- the chain: providers in sequence ---------------------------------------------------------

async def test_a_deny_short_circuits_the_chain() -> None:
    tools = Tools()
    after = Recorder()
    tool = by_name(guarded_tools(tools, CallwardenGuardrailProvider(POLICY), after))
    shown = await tool["delete_file"].run_json({"path": "x"}, TOKEN, call_id="c1")
    assert shown.startswith("Tool call denied:")
    assert after.seen == [] and tools.ran == []


async def test_a_modify_feeds_the_next_provider_and_the_tool() -> None:
    tools = Tools()
    after = Recorder()
    tool = by_name(guarded_tools(tools, CallwardenGuardrailProvider(POLICY), after))
    await tool["search"].run_json({"query": "q", "limit": 50}, TOKEN, call_id="c9")
    assert after.seen == [{"tool": "search", "args": {"query": "q", "limit": 5},
                           "agent": "assistant", "call_id": "c9"}]
    assert tools.ran == [("search", {"query": "q", "limit": 5})]


async def test_another_providers_deny_keeps_callwarden_from_recording_a_run(tmp_path) -> None:
    log = tmp_path / "audit.jsonl"
    tools = Tools()
    veto = Recorder(GuardrailResult(decision=Decision.DENY, reason="not today"))
    provider = CallwardenGuardrailProvider({**POLICY, "audit": {"sinks": [{"jsonl": str(log)}]}})
    read = by_name(guarded_tools(tools, provider, veto))["read_file"]
    assert await read.run_json({"path": "a"}, TOKEN) == "Tool call denied: not today"
    provider.enforcer.guard.close()
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["type"] for e in events] == ["decision"]  # no outcome: the tool never ran
    assert tools.ran == []


# -- fail closed ------------------------------------------------------------------------------

def _raises(call: Any, ctx: Any) -> Any:
    raise RuntimeError("policy bug")


async def test_a_policy_error_fails_closed() -> None:
    tools = Tools()
    provider = CallwardenGuardrailProvider(Guard(rules=[], policies=[_raises]))
    read = by_name(guarded_tools(tools, provider))["read_file"]
    shown = await read.run_json({"path": "a"}, TOKEN)
    assert shown.startswith("Tool call denied:") and tools.ran == []


async def test_a_provider_that_raises_or_answers_nonsense_denies() -> None:
    class Broken:
        async def evaluate(self, **kwargs: Any) -> Any:
            raise ConnectionError("store down")

    tools = Tools()
    for provider in (Broken(), Recorder(answer="yes")):
        read = by_name(guarded_tools(tools, provider))["read_file"]
        shown = await read.run_json({"path": "a"}, TOKEN)
        assert shown.startswith("Tool call denied: guardrail provider error"), shown
    assert tools.ran == []


async def test_a_store_error_while_deciding_is_a_deny(monkeypatch) -> None:
    tools = Tools()
    provider = CallwardenGuardrailProvider(POLICY)

    async def down(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("store down")

    monkeypatch.setattr(provider.enforcer.guard, "acheck", down)
    result = await provider.evaluate(tool_name="read_file", args={"path": "a"})
    assert result.decision is Decision.DENY and "store down" in result.reason
    read = by_name(guarded_tools(tools, provider))["read_file"]
    assert "store down" in await read.run_json({"path": "a"}, TOKEN)
    assert tools.ran == []


def test_wrapping_needs_a_tool_and_providers_of_the_protocol() -> None:
    with pytest.raises(TypeError, match="BaseTool"):
        GuardrailTool(lambda: 1, [])  # type: ignore[arg-type]
    tool = FunctionTool(lambda: "x", description="x", name="x")
    with pytest.raises(TypeError, match="not a GuardrailProvider"):
        GuardrailTool(tool, [object()])


# -- the audit and the workbench ----------------------------------------------------------------

async def test_the_audit_names_the_rule_and_the_outcome(tmp_path) -> None:
    log = tmp_path / "audit.jsonl"
    policy = {**POLICY, "audit": {"sinks": [{"jsonl": str(log)}], "required": True}}
    tools = Tools()
    provider = CallwardenGuardrailProvider(policy)
    tool = by_name(guarded_tools(tools, provider))
    await tool["search"].run_json({"query": "q", "limit": 50}, TOKEN, call_id="c3")
    await tool["read_file"].run_json({"path": "config.ini"}, TOKEN, call_id="c1")
    provider.enforcer.guard.close()
    events = [json.loads(line) for line in log.read_text().splitlines()]
    decisions = [e for e in events if e["type"] == "decision"]
    outcomes = [e for e in events if e["type"] == "outcome"]
    assert [(d["rule"], d["call_id"], d["framework"], d["agent"]) for d in decisions] == [
        ("cap-search", "c3", "autogen", "assistant"), ("default", "c1", "autogen", "assistant")]
    assert [(o["status"], o.get("output_rule")) for o in outcomes] == [
        ("ok", None), ("output_modified", "redact-secrets")]


async def test_the_workbench_wrapper_runs_the_same_flow() -> None:
    tools = Tools()
    provider = CallwardenGuardrailProvider(POLICY)
    workbench = GuardrailWorkbench(StaticWorkbench(tools.all()), [provider])
    denied = await workbench.call_tool("delete_file", {"path": "x"})
    capped = await workbench.call_tool("search", {"query": "q", "limit": 50})
    secret = await workbench.call_tool("read_file", {"path": "config.ini"})
    assert denied.is_error and denied.to_text().startswith("Tool call denied: Deleting")
    assert capped.to_text() == "5 results for q"
    assert SECRET not in secret.to_text() and not secret.is_error
    assert [t["name"] for t in await workbench.list_tools()] == [t.name for t in tools.all()]
    assert tools.names() == ["search", "read_file"]


def test_the_readme_example_runs() -> None:
    block = README.read_text().split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(block, str(README), "exec"), {"__name__": "__main__"})
