"""The ask-the-policy tool: the model asks whether a call would be allowed; nothing is counted,
recorded or audited."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agents import function_tool
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool

from callwarden import Guard
from callwarden.adapters import policy_tool

POLICY: dict[str, Any] = {"version": 1, "rules": [
    {"id": "cap-search", "match": {"tool": "search"}, "cap": {"limit": 5}, "effect": "modify"},
    {"id": "no-delete", "match": {"tool": "delete_file"}, "effect": "deny",
     "message": "Deleting files is not allowed; move them to trash/ instead."},
    {"id": "deploys-ask", "match": {"tool": "deploy"}, "effect": "ask",
     "message": "Deploys need a human."},
    {"id": "one-fetch", "match": {"tool": "fetch"}, "limit": {"calls": 1, "per": "session"}},
    {"id": "strangers", "roles": {"recipient": {"in": ["request"]}}, "effect": "ask",
     "message": "Mailing someone the user did not name needs approval."},
]}


def test_it_answers_with_the_effect_and_the_models_message() -> None:
    ask = policy_tool(POLICY)
    assert ask("read_file", '{"path": "a.txt"}') == "allow"
    assert ask("search", {"query": "q", "limit": 50}).startswith("allow with changes:")
    assert ask("delete_file", '{"path": "a"}') == \
        "deny: Deleting files is not allowed; move them to trash/ instead."
    assert ask("deploy", "{}") == "needs approval: Deploys need a human."
    assert ask("", "{}").startswith("deny:") and ask("x", "{not json").startswith("deny:")


def test_it_counts_records_and_audits_nothing(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    guard = Guard.from_dict({**POLICY, "audit": {"sinks": [{"jsonl": str(log)}]}})
    ask = policy_tool(guard, session="s1")
    assert [ask("fetch", '{"url": "u"}') for _ in range(3)] == ["allow"] * 3
    assert guard.check("fetch", {"url": "u"}, session="s1").allowed  # the one real call
    assert ask("fetch", '{"url": "u"}').startswith("deny:")  # ... and now it says so
    guard.close()
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(events) == 1 and events[0]["type"] == "decision"  # only the real check


def test_fields_such_as_the_request_apply_to_every_question() -> None:
    to_carol = '{"to": "carol@example.org"}'
    assert policy_tool(POLICY)("send_email", to_carol).startswith("needs approval:")
    named = policy_tool(POLICY, request="mail carol@example.org the notes")
    assert named("send_email", to_carol) == "allow"


def test_frameworks_take_it_as_a_tool() -> None:
    ask = policy_tool(POLICY)
    schema = function_tool(ask).params_json_schema  # OpenAI Agents: a strict schema
    assert schema["required"] == ["tool", "arguments"] and not schema["additionalProperties"]

    class Scripted(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    model = Scripted(messages=iter([
        AIMessage("", tool_calls=[{"name": "check_policy", "id": "c1", "args": {
            "tool": "delete_file", "arguments": json.dumps({"path": "notes.txt"})}}]),
        AIMessage("I will move it to trash/ instead."),
    ]))
    state = create_agent(model, [tool(ask)]).invoke({"messages": [("user", "delete notes")]})
    [answer] = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert answer.content.startswith("deny: Deleting files is not allowed")
