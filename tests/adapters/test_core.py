"""The translation every adapter shares: settle an ask, take a framework's answer, run, record."""

from __future__ import annotations

import pytest

from callwarden import ApprovalPending, Effect, Guard
from callwarden.adapters import Enforcer, as_guard, describe_refusal

POLICY = {
    "version": 1,
    "default": "allow",
    "rules": [
        {"id": "no-rm", "match": {"tool": "shell"}, "if": "args.cmd.startsWith('rm')",
         "effect": "deny", "message": "Do not delete files."},
        {"id": "deploy-asks", "match": {"tool": "deploy"}, "effect": "ask"},
        {"id": "cap-limit", "match": {"tool": "search"}, "cap": {"limit": 5}, "effect": "modify"},
    ],
}


@pytest.fixture
def enforcer() -> Enforcer:
    return Enforcer(POLICY, framework="test", agent="bot")


def test_as_guard_takes_a_guard_a_path_or_a_dict(tmp_path) -> None:
    guard = Guard.from_dict(POLICY)
    assert as_guard(guard) is guard
    path = tmp_path / "p.yaml"
    path.write_text("version: 1\ndefault: deny\n")
    assert as_guard(path).check("x", {}).effect is Effect.DENY
    assert as_guard(POLICY).check("deploy", {}).effect is Effect.ASK


def test_as_guard_rejects_anything_else() -> None:
    with pytest.raises(TypeError, match="policy file path"):
        as_guard(42)


def test_every_call_carries_the_framework_and_default_agent(enforcer) -> None:
    call = enforcer.check("search", {"q": "x"}, call_id="c1").call
    assert (call.framework, call.agent, call.call_id) == ("test", "bot", "c1")


def test_decide_without_approver_pauses_with_a_request(enforcer) -> None:
    with pytest.raises(ApprovalPending) as raised:
        enforcer.decide("deploy", {"env": "qa"}, call_id="c1")
    assert enforcer.guard.approvals.get(raised.value.request_id).tool == "deploy"


def test_an_answer_through_the_framework_resumes_the_call_once(enforcer) -> None:
    with pytest.raises(ApprovalPending) as raised:
        enforcer.decide("deploy", {"env": "qa"}, call_id="c1")
    rid = raised.value.request_id
    enforcer.answer(rid, {"approve": True, "by": "alice"}, by="reviewer")
    allowed = enforcer.decide("deploy", {"env": "qa"}, call_id="c1", approval_id=rid)
    assert allowed.effect is Effect.ALLOW
    enforcer.record_outcome(allowed, "ok", 0.0)  # it ran
    again = enforcer.decide("deploy", {"env": "qa"}, call_id="c1", approval_id=rid)
    assert again.effect is Effect.DENY  # the approval was used


def test_the_same_call_decided_again_before_its_outcome_is_asked_anew(enforcer) -> None:
    with pytest.raises(ApprovalPending) as raised:
        enforcer.decide("deploy", {"env": "qa"}, call_id="c1")
    rid = raised.value.request_id
    enforcer.answer(rid, True, by="alice")
    assert enforcer.decide("deploy", {"env": "qa"}, call_id="c1", approval_id=rid).allowed
    # No outcome came back: it may have run. Neither the used approval nor a retry runs it.
    with pytest.raises(ApprovalPending) as doubt:
        enforcer.decide("deploy", {"env": "qa"}, call_id="c1", approval_id=rid)
    assert doubt.value.decision.in_doubt and doubt.value.request_id != rid


def test_a_rejection_through_the_framework_denies_with_the_reason(enforcer) -> None:
    with pytest.raises(ApprovalPending) as raised:
        enforcer.decide("deploy", {"env": "qa"}, call_id="c1")
    enforcer.answer(raised.value.request_id, "reject", by="alice")
    denied = enforcer.decide("deploy", {"env": "qa"}, call_id="c1",
                             approval_id=raised.value.request_id)
    assert denied.effect is Effect.DENY
    assert "alice" in describe_refusal(denied)


def test_the_caller_cannot_answer_its_own_request(enforcer) -> None:
    from callwarden.approvals import ApprovalRefused

    with pytest.raises(ApprovalPending) as raised:
        enforcer.decide("deploy", {"env": "qa"}, call_id="c1")
    with pytest.raises(ApprovalRefused):
        enforcer.answer(raised.value.request_id, True, by="bot")


@pytest.mark.parametrize("answer", [None, "maybe", {"approve": "yes"}, {"approve": True, "x": 1},
                                    {"approve": True, "edit": "rm -rf /"}])
def test_a_malformed_answer_is_an_error_that_says_what_is_expected(enforcer, answer) -> None:
    with pytest.raises(ValueError, match=r"approval answer|edit"):
        enforcer.answer("r1", answer, by="alice")


def test_approver_settles_the_ask_inline() -> None:
    enforcer = Enforcer(POLICY, framework="test", approver=lambda request: True)
    assert enforcer.decide("deploy", {"env": "qa"}).effect is Effect.ALLOW


async def test_async_decide_and_answer(enforcer) -> None:
    with pytest.raises(ApprovalPending) as raised:
        await enforcer.adecide("deploy", {"env": "qa"}, call_id="c9")
    await enforcer.aanswer(raised.value.request_id, True, by="alice")
    decision = await enforcer.adecide("deploy", {"env": "qa"}, call_id="c9",
                                      approval_id=raised.value.request_id)
    assert decision.effect is Effect.ALLOW


def test_run_uses_the_effective_args(enforcer) -> None:
    decision = enforcer.decide("search", {"q": "x", "limit": 50})
    assert decision.effect is Effect.MODIFY
    shown, halt = enforcer.run(decision, lambda q, limit: f"{q}:{limit}")
    assert (shown, halt) == ("x:5", False)


async def test_arun_awaits_an_async_tool(enforcer) -> None:
    async def tool(q: str) -> str:
        return q.upper()

    shown, halt = await enforcer.arun(enforcer.decide("search", {"q": "x"}), tool)
    assert (shown, halt) == ("X", False)


def test_describe_refusal_is_the_rules_message(enforcer) -> None:
    assert describe_refusal(enforcer.decide("shell", {"cmd": "rm -rf /"})) == "Do not delete files."
