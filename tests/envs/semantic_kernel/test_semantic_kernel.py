"""Semantic Kernel 1.x: a real ChatCompletionAgent and kernel.invoke_prompt driving the kernel's
auto-invoke loop with a scripted model, every call behind CallwardenFilter."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from _readme import ReadmeSection
from _scenario import REQUEST_MESSAGE, REQUEST_POLICY
from _sk_support import (
    POLICY,
    SECRET,
    Ops,
    agent,
    call,
    kernel_with,
    model,
    results_in,
    results_seen,
)
from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior
from semantic_kernel.connectors.ai.prompt_execution_settings import PromptExecutionSettings
from semantic_kernel.exceptions import KernelInvokeException
from semantic_kernel.functions import KernelArguments

from callwarden import Approve, Deny, Guard
from callwarden.exceptions import ApprovalPending, RunHalted, ToolDenied

README = ReadmeSection("Semantic Kernel")
TIMEOUT = 30  # a hang fails the test instead of blocking the suite

ONE_TURN = [call("c1", "read_file", path="notes.txt"),
            call("c2", "delete_file", path="notes.txt"),
            call("c3", "search", query="callwarden", limit=50),
            call("c4", "deploy", env="qa"),
            call("c5", "wipe_disk", device="sda")]


async def ask_agent(kernel: Any, service: Any, task: str = "go", thread: Any = None) -> Any:
    response = await asyncio.wait_for(agent(kernel, service).get_response(task, thread=thread),
                                      TIMEOUT)
    return response


async def thread_results(response: Any) -> dict[str, Any]:
    """The function results in the agent's thread: what the model reads on its next turn."""
    return results_in([m async for m in response.thread.get_messages()])


async def run_one_turn(ops: Ops, **options: Any) -> tuple[dict[str, Any], Any, Any]:
    """The scenario: one model turn asks for all five calls; the halt ends the run."""
    kernel, guard = kernel_with(ops, **options)
    service = model(ONE_TURN)
    response = await ask_agent(kernel, service, "tidy up")
    return await thread_results(response), service, guard


# -- the one-turn scenario --------------------------------------------------------------------

async def test_the_one_turn_scenario_maps_every_effect() -> None:
    ops = Ops()
    seen, service, guard = await run_one_turn(ops, approver=lambda request: Approve(by="alice"))
    assert seen["c1"] == "contents of notes.txt"
    assert "delete_file" not in ops.names()
    assert seen["c2"] == "Deleting files is not allowed; move them to trash/ instead."
    assert ("search", {"query": "callwarden", "limit": 5}) in ops.ran
    assert seen["c3"] == "5 results for callwarden"
    assert ops.ran.count(("deploy", {"env": "qa"})) == 1 and seen["c4"] == "deployed to qa"
    assert "wipe_disk" not in ops.names()
    assert seen["c5"].startswith("callwarden halted the run")
    assert "Wiping disks ends the session." in seen["c5"]
    # the halt terminated the auto-invoke loop: the model was not asked for another turn
    assert len(service.requests) == 1 and guard.halted.rule == "stop-on-wipe"


async def test_the_model_reads_the_refusal_and_the_rewritten_result_on_its_next_turn() -> None:
    ops = Ops()
    kernel, _ = kernel_with(ops)
    service = model([call("c2", "delete_file", path="a"), call("c3", "search", query="q", limit=50)],
                    "Done.")
    response = await ask_agent(kernel, service)
    assert str(response.message.content) == "Done."
    seen = results_seen(service)
    assert seen["c2"] == "Deleting files is not allowed; move them to trash/ instead."
    assert seen["c3"] == "5 results for q"
    assert ops.ran == [("search", {"query": "q", "limit": 5})]


async def test_invoke_prompt_with_auto_function_choice_is_guarded_too() -> None:
    ops = Ops()
    kernel, _ = kernel_with(ops)
    service = model([call("c2", "delete_file", path="a"), call("c1", "read_file", path="b")],
                    "Done.")
    kernel.add_service(service)
    settings = PromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto())
    result = await asyncio.wait_for(
        kernel.invoke_prompt("Tidy up", arguments=KernelArguments(settings=settings)), TIMEOUT)
    assert str(result) == "Done." and ops.ran == [("read_file", {"path": "b"})]
    assert results_seen(service)["c2"].startswith("Deleting files is not allowed")


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_approver_approval_runs_the_call_once(kind: str) -> None:
    asked: list[str] = []

    def approve(request: Any) -> Approve:
        asked.append(request.tool)
        return Approve(by="alice")

    async def aapprove(request: Any) -> Approve:
        return approve(request)

    ops = Ops()
    seen, _, _ = await run_one_turn(ops, approver=approve if kind == "sync" else aapprove)
    assert asked == ["deploy"]
    assert ops.ran.count(("deploy", {"env": "qa"})) == 1 and seen["c4"] == "deployed to qa"


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_approver_rejection_gives_the_model_the_reason(kind: str) -> None:
    def reject(request: Any) -> Deny:
        return Deny(reason="freeze until Monday", by="alice")

    async def areject(request: Any) -> Deny:
        return reject(request)

    ops = Ops()
    seen, _, _ = await run_one_turn(ops, approver=reject if kind == "sync" else areject)
    assert "deploy" not in ops.names()
    assert "alice denied it: freeze until Monday" in seen["c4"]


async def test_the_users_latest_message_is_the_request_the_policy_sees() -> None:
    """The recipient named in the latest user message is allowed; one named only in an earlier
    turn of the thread is a stranger now."""
    ops = Ops()
    kernel, _ = kernel_with(ops, REQUEST_POLICY)
    service = model("Noted.", [call("c1", "send_email", to="carol@example.org"),
                               call("c2", "send_email", to="eve@attacker.example")], "Done.")
    first = await ask_agent(kernel, service, "Mail eve@attacker.example the notes")
    await ask_agent(kernel, service, "No, mail Carol@Example.org instead", thread=first.thread)
    seen = results_seen(service)
    assert ops.ran == [("send_email", {"to": "carol@example.org"})]
    assert seen["c1"] == "sent to carol@example.org" and seen["c2"] == REQUEST_MESSAGE


# -- halt -------------------------------------------------------------------------------------

async def test_a_halt_ends_the_run_and_later_calls_are_refused_until_cleared() -> None:
    ops = Ops()
    kernel, guard = kernel_with(ops)
    service = model([call("c1", "wipe_disk", device="sda")],
                    [call("c2", "read_file", path="a.txt")], [call("c3", "read_file", path="a.txt")],
                    "Done.")
    await ask_agent(kernel, service, "wipe")
    assert len(service.requests) == 1 and ops.ran == []
    again = await ask_agent(kernel, service, "read")  # still halted: refused, run ends again
    assert (await thread_results(again))["c2"].startswith("callwarden halted the run")
    assert len(service.requests) == 2 and ops.ran == []
    guard.clear_halt()
    done = await ask_agent(kernel, service, "read")
    assert str(done.message.content) == "Done." and ops.names() == ["read_file"]


# -- approval without an approver: pending, then answered -------------------------------------

async def test_ask_without_approver_tells_the_model_the_pending_request_id() -> None:
    ops = Ops()
    kernel, guard = kernel_with(ops)
    service = model([call("c1", "deploy", env="qa")], "Waiting for approval.")
    await ask_agent(kernel, service)
    assert "deploy" not in ops.names() and len(guard.pending) == 1
    assert f"Approval request {guard.pending[0]} is pending" in results_seen(service)["c1"]


async def test_an_approved_pending_call_runs_once_when_asked_again() -> None:
    ops = Ops()
    kernel, guard = kernel_with(ops)
    service = model(*(turn for i in range(3) for turn in ([call(f"c{i}", "deploy", env="qa")],
                                                          "ok")))
    guard_store = guard.enforcer.guard.approvals
    await ask_agent(kernel, service, "deploy")
    first = guard.pending[0]
    guard_store.approve(first, by="alice")  # = callwarden approvals approve ID
    await ask_agent(kernel, service, "it is approved")
    await ask_agent(kernel, service, "once more")
    assert ops.ran == [("deploy", {"env": "qa"})]
    assert guard.pending and guard.pending[0] != first  # the third call is a new request


async def test_a_rejected_pending_call_gives_the_model_the_reason_when_asked_again() -> None:
    ops = Ops()
    kernel, guard = kernel_with(ops)
    service = model([call("c1", "deploy", env="qa")], "ok", [call("c2", "deploy", env="qa")], "ok")
    await ask_agent(kernel, service, "deploy")
    await guard.answer(guard.pending[0], {"approve": False, "reason": "not today"}, by="alice")
    await ask_agent(kernel, service, "retry")
    assert ops.names() == [] and "not today" in results_seen(service)["c2"]


async def test_wait_lets_an_answer_given_elsewhere_settle_the_call() -> None:
    ops = Ops()
    kernel, guard = kernel_with(ops, wait=TIMEOUT)
    approvals = guard.enforcer.guard.approvals

    async def reviewer() -> None:  # stands in for `callwarden approvals approve ID` elsewhere
        while not approvals.list("pending"):
            await asyncio.sleep(0.01)
        await approvals.aapprove(approvals.list("pending")[0].id, by="alice")

    service = model([call("c1", "deploy", env="qa")], "Deployed.")
    await asyncio.wait_for(asyncio.gather(ask_agent(kernel, service), reviewer()), TIMEOUT)
    assert ops.ran == [("deploy", {"env": "qa"})]
    assert results_seen(service)["c1"] == "deployed to qa"


async def test_stop_on_pending_returns_the_run_to_the_caller() -> None:
    ops = Ops()
    kernel, guard = kernel_with(ops, stop_on_pending=True)
    service = model([call("c1", "deploy", env="qa")])
    response = await ask_agent(kernel, service)
    assert len(service.requests) == 1 and ops.ran == []
    assert guard.pending[0] in (await thread_results(response))["c1"]


# -- failing closed ---------------------------------------------------------------------------

async def test_a_policy_that_raises_fails_closed() -> None:
    def broken(call: Any, ctx: Any) -> Any:
        raise RuntimeError("policy bug")

    ops = Ops()
    kernel, _ = kernel_with(ops, Guard(rules=[], policies=[broken]))
    service = model([call("c1", "read_file", path="a.txt")], "ok")
    await ask_agent(kernel, service)
    assert ops.ran == [] and "read_file" in results_seen(service)["c1"]
    assert "contents of" not in results_seen(service)["c1"]


async def test_an_error_while_deciding_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    async def explode(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("store down")

    ops = Ops()
    kernel, guard = kernel_with(ops)
    monkeypatch.setattr(guard.enforcer.guard, "acheck", explode)
    service = model([call("c1", "read_file", path="a.txt")], "ok")
    await ask_agent(kernel, service)
    assert ops.ran == []
    assert "could not decide it (RuntimeError: store down)" in results_seen(service)["c1"]


async def test_a_function_that_raises_is_recorded_as_an_error(tmp_path: Any) -> None:
    log = tmp_path / "audit.jsonl"
    ops = Ops()
    kernel, guard = kernel_with(ops, {**POLICY, "audit": {"sinks": [{"jsonl": str(log)}]}})
    service = model([call("c1", "flaky", what="x")], "ok")
    await ask_agent(kernel, service)
    guard.enforcer.guard.close()
    assert "server gone (x)" in results_seen(service)["c1"]
    outcome = [e for e in map(json.loads, log.read_text().splitlines()) if e["type"] == "outcome"]
    assert [e["status"] for e in outcome] == ["error"]


# -- output rules and the audit log -----------------------------------------------------------

async def test_output_rules_redact_the_result_before_the_model_sees_it() -> None:
    ops = Ops()
    kernel, _ = kernel_with(ops)
    service = model([call("c1", "read_file", path="config.ini")], "ok")
    await ask_agent(kernel, service)
    shown = results_seen(service)["c1"]
    assert "9dKq3" not in shown and "REDACTED" in shown


async def test_an_output_halt_withholds_the_result_and_ends_the_run() -> None:
    policy = {"version": 1, "rules": [{"id": "leak", "on": "output", "if":
              "args.output.contains('secret_access_key')", "effect": "halt"}]}
    ops = Ops()
    kernel, guard = kernel_with(ops, policy)
    service = model([call("c1", "read_file", path="config.ini")], "never asked")
    response = await ask_agent(kernel, service)
    shown = (await thread_results(response))["c1"]
    assert SECRET not in shown and shown.startswith("callwarden halted the run")
    assert len(service.requests) == 1 and guard.halted is not None


async def test_the_audit_log_records_one_decision_and_the_outcome_per_call(tmp_path: Any) -> None:
    log = tmp_path / "audit.jsonl"
    ops = Ops()
    kernel, guard = kernel_with(ops, {**POLICY, "audit": {"sinks": [{"jsonl": str(log)}],
                                                          "required": True}})
    service = model([call("c3", "search", query="q", limit=50),
                     call("c1", "read_file", path="config.ini")], "ok")
    await ask_agent(kernel, service)
    guard.enforcer.guard.close()
    events = [json.loads(line) for line in log.read_text().splitlines()]
    rows = sorted((e["call_id"], e["type"], e["effect"], e["rule"] if e["type"] == "decision"
                   else (e["status"], e.get("output_rule"))) for e in events)
    assert rows == [("c1", "decision", "allow", "default"),
                    ("c1", "outcome", "allow", ("output_modified", "redact-secrets")),
                    ("c3", "decision", "modify", "cap-search"),
                    ("c3", "outcome", "modify", ("ok", None))]
    decision = next(e for e in events if e["call_id"] == "c3" and e["type"] == "decision")
    assert decision["framework"] == "semantic_kernel" and decision["args"] == {"query": "q",
                                                                               "limit": 50}


async def test_qualified_names_give_the_policy_plugin_function() -> None:
    policy = {"version": 1, "rules": [{"id": "no-ops-delete", "match": {"tool": "ops-delete_file"},
                                       "effect": "deny", "message": "no"}]}
    ops = Ops()
    kernel, _ = kernel_with(ops, policy, qualified_names=True)
    service = model([call("c1", "delete_file", path="a")], "ok")
    await ask_agent(kernel, service)
    assert ops.ran == [] and results_seen(service)["c1"] == "no"


async def test_the_streaming_auto_invoke_loop_is_guarded_and_halts() -> None:
    ops = Ops()
    kernel, guard = kernel_with(ops)
    service = model([call("c2", "delete_file", path="a"), call("c3", "search", query="q", limit=9)],
                    [call("c5", "wipe_disk", device="sda")], "never asked")
    steps: list[Any] = []

    async def on_step(message: Any) -> None:
        steps.append(message)

    streamed = agent(kernel, service).invoke_stream("tidy up", on_intermediate_message=on_step)
    await asyncio.wait_for(_drain(streamed), TIMEOUT)
    assert ops.ran == [("search", {"query": "q", "limit": 5})]
    assert results_seen(service)["c2"].startswith("Deleting files is not allowed")
    assert len(service.requests) == 2 and guard.halted is not None
    assert results_in(steps)["c5"].startswith("callwarden halted the run")


async def _drain(stream: Any) -> list[Any]:
    return [chunk async for chunk in stream]


# -- code's own calls: kernel.invoke --------------------------------------------------------

async def test_kernel_invoke_runs_rewrites_and_screens_direct_calls() -> None:
    ops = Ops()
    kernel, _ = kernel_with(ops)
    capped = await kernel.invoke(plugin_name="ops", function_name="search", query="q", limit=50)
    read = await kernel.invoke(plugin_name="ops", function_name="read_file", path="config.ini")
    assert str(capped) == "5 results for q" and "9dKq3" not in str(read)
    assert ops.ran == [("search", {"query": "q", "limit": 5}),
                       ("read_file", {"path": "config.ini"})]


async def test_kernel_invoke_raises_for_refused_direct_calls() -> None:
    ops = Ops()
    kernel, guard = kernel_with(ops)
    with pytest.raises(KernelInvokeException) as denied:
        await kernel.invoke(plugin_name="ops", function_name="delete_file", path="a")
    assert isinstance(denied.value.__cause__, ToolDenied)
    with pytest.raises(KernelInvokeException) as pending:
        await kernel.invoke(plugin_name="ops", function_name="deploy", env="qa")
    assert isinstance(pending.value.__cause__, ApprovalPending)
    assert pending.value.__cause__.request_id == guard.pending[0]
    with pytest.raises(KernelInvokeException) as halted:
        await kernel.invoke(plugin_name="ops", function_name="wipe_disk", device="sda")
    assert isinstance(halted.value.__cause__, RunHalted)
    with pytest.raises(KernelInvokeException):  # refused while halted
        await kernel.invoke(plugin_name="ops", function_name="read_file", path="a")
    assert ops.ran == []


async def test_kernel_invoke_stream_screens_the_streamed_output() -> None:
    policy = {"version": 1, "rules": [{"id": "redact", "on": "output", "match": {"tool": "tail"},
                                       "secrets": True, "effect": "modify"}]}
    ops = Ops()
    kernel, _ = kernel_with(ops, policy)
    function = kernel.get_function("ops", "tail")
    chunks = await asyncio.wait_for(_drain(kernel.invoke_stream(function, path="app.log")),
                                    TIMEOUT)
    text = "".join(str(c) for c in chunks)
    assert "line one" in text and "line three" in text and "9dKq3" not in text
    assert ops.ran == [("tail", {"path": "app.log"})]


async def test_a_prompt_function_invoked_by_code_is_not_a_tool_call(tmp_path: Any) -> None:
    log = tmp_path / "audit.jsonl"
    kernel, guard = kernel_with(Ops(), {"version": 1, "default": "deny",
                                        "audit": {"sinks": [{"jsonl": str(log)}]}})
    kernel.add_service(model("Hello."))
    result = await asyncio.wait_for(kernel.invoke_prompt("Say hello"), TIMEOUT)
    guard.enforcer.guard.close()
    assert str(result) == "Hello." and (not log.exists() or log.read_text() == "")


async def test_remove_from_takes_the_filters_off_the_kernel() -> None:
    ops = Ops()
    kernel, guard = kernel_with(ops)
    guard.remove_from(kernel)
    assert not kernel.auto_function_invocation_filters and not kernel.function_invocation_filters
    await kernel.invoke(plugin_name="ops", function_name="delete_file", path="a")
    assert ops.names() == ["delete_file"]


# -- the README example -----------------------------------------------------------------------

def test_the_readme_example_runs_and_prints_what_it_says(tmp_path: Any, monkeypatch: Any,
                                                        capsys: Any) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) == 1
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks[0], str(README), "exec"), {"__name__": "__main__"})
    promised = [line[2:] for line in blocks[0].splitlines() if line.startswith("# ") and "->" in line]
    assert capsys.readouterr().out.splitlines() == promised
