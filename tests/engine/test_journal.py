"""The execution journal: a call with side effects its caller names is written before it runs and
closed with its outcome; the same call coming back while it is still open is in doubt, and the
policy's ``on_in_doubt`` decides (engine/journal.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from callwarden import Guard
from callwarden.adapters import Enforcer
from callwarden.approvals import Status
from callwarden.audit import Auditor, CallableSink
from callwarden.engine.journal import journal_key
from callwarden.exceptions import ApprovalInvalid, ApprovalPending, PolicyError, ToolDenied
from callwarden.policyfile import compile_policy
from callwarden.state import MemoryStore, SQLiteStore

PAY = ("pay", {"iban": "DE89370400440532013000", "amount": 40})
POLICY: dict[str, Any] = {
    "version": 1,
    "timeout": "60s",
    "tools": {"pay": {"kind": "payment"}, "deploy": {"kind": "unknown"}},
    "rules": [{"id": "deploys-ask", "match": {"tool": "deploy"}, "effect": "ask"}],
}


def make(tmp_path: Path | None = None, **changes: Any) -> tuple[Guard, list[dict[str, Any]]]:
    """A guard (on SQLite when ``tmp_path`` is given) whose audit events land in a list."""
    events: list[dict[str, Any]] = []
    policy = {**POLICY, **changes}
    store = SQLiteStore(tmp_path / "state.db") if tmp_path is not None else None
    guard = Guard.from_loaded(compile_policy(policy), state=store,
                              audit=Auditor([CallableSink(events.append)], required=True))
    return guard, events


def entry(guard: Guard, call_id: str, session: str | None = "s1") -> dict[str, Any] | None:
    found = guard.engine.journal.store.get(journal_key(session, call_id))
    return None if found is None else found.value


def crash(guard: Guard, call_id: str = "call-1") -> None:
    """A call the guard let run, then nothing: the process died before the outcome."""
    assert guard.check(*PAY, call_id=call_id, session="s1").allowed


def test_a_call_with_side_effects_is_journaled_before_it_runs_and_closed_after() -> None:
    guard, _ = make()
    seen: list[Any] = []

    def pay(iban: str, amount: int) -> str:
        seen.append(entry(guard, "call-1"))
        return "paid"

    assert guard.run(*PAY, pay, call_id="call-1", session="s1") == "paid"
    assert seen[0]["state"] == "executing" and seen[0]["tool"] == "pay"
    closed = entry(guard, "call-1")
    assert closed is not None and (closed["state"], closed["outcome"]) == ("done", "ok")


def test_a_tool_that_raises_closes_its_entry_as_failed() -> None:
    guard, _ = make()

    def pay(iban: str, amount: int) -> str:
        raise RuntimeError("bank down")

    with pytest.raises(RuntimeError):
        guard.run(*PAY, pay, call_id="call-1", session="s1")
    closed = entry(guard, "call-1")
    assert closed is not None and (closed["state"], closed["outcome"]) == ("failed", "error")
    assert guard.check(*PAY, call_id="call-1", session="s1").effect == "allow"  # not in doubt


def test_the_same_call_again_while_its_entry_is_open_asks_a_person() -> None:
    guard, events = make()
    crash(guard)
    decision = guard.check(*PAY, call_id="call-1", session="s1")
    assert (decision.effect.value, decision.rule, decision.code) == ("ask", "journal", "in_doubt")
    assert decision.in_doubt
    assert "may already have run" in decision.reasons[0].message
    assert "Approve it only if it did not happen" in decision.message
    assert events[-1]["effect"] == "ask" and events[-1]["reasons"][0]["code"] == "in_doubt"
    with pytest.raises(ApprovalPending) as pending:
        guard.run(*PAY, lambda **_: "paid twice", call_id="call-1", session="s1")
    request = guard.approvals.get(pending.value.request_id)
    assert request.in_doubt and "may already have run" in request.in_doubt


def test_a_call_in_doubt_runs_once_a_person_approves_it_and_is_closed() -> None:
    guard, _ = make()
    crash(guard)
    ran: list[int] = []
    with pytest.raises(ApprovalPending) as pending:
        guard.run(*PAY, lambda **a: ran.append(1), call_id="call-1", session="s1")
    guard.approvals.approve(pending.value.request_id, by="alice")
    guard.run(*PAY, lambda **a: ran.append(1), call_id="call-1", session="s1")
    assert ran == [1]
    closed = entry(guard, "call-1")
    assert closed is not None and closed["state"] == "done"
    assert f"request {pending.value.request_id}" in closed["approval"]


@pytest.mark.parametrize("names", [None, "another-request"])
async def test_an_approval_a_framework_kept_does_not_answer_a_request_in_doubt(
        names: str | None) -> None:
    """What adapters pass on from a framework's saved state (a confirmation, an approval
    response, a resume value): it may be the approval that let the call run before a crash."""
    guard, _ = make()
    crash(guard)
    enforcer = Enforcer(guard, framework="test")
    asked = guard.check(*PAY, call_id="call-1", session="s1")
    request_id = enforcer.request(asked)
    with pytest.raises(ApprovalInvalid) as refused:
        enforcer.answer(request_id, True, by="reviewer", names=names)
    assert refused.value.code == "approval_in_doubt"
    assert f"callwarden approvals approve {request_id}" in refused.value.message
    with pytest.raises(ApprovalInvalid):
        await enforcer.aanswer(request_id, True, by="reviewer", names=names)
    assert guard.approvals.get(request_id).status is Status.PENDING
    # One that names the request (a person shown it answered), or one the caller names
    # itself, counts; so does a refusal, whatever it names.
    assert enforcer.answer(request_id, True, by="alice", names=request_id).status \
        is Status.APPROVED
    other = enforcer.request(guard.check("deploy", {"env": "prod"}, call_id="d-1",
                                         session="s1"))  # asked, not in doubt
    assert enforcer.answer(other, True, by="alice", names=None).status is Status.APPROVED
    crash(guard, "call-3")
    third = enforcer.request(guard.check(*PAY, call_id="call-3", session="s1"))
    assert (await enforcer.aanswer(third, False, by="bob", names=None)).status is Status.DENIED
    crash(guard, "call-4")
    fourth = enforcer.request(guard.check(*PAY, call_id="call-4", session="s1"))
    assert (await enforcer.aanswer(fourth, True, by="bob")).status is Status.APPROVED


def test_a_standing_grant_does_not_cover_a_call_in_doubt() -> None:
    guard, _ = make()
    with pytest.raises(ApprovalPending) as pending:
        guard.run("deploy", {"env": "prod"}, lambda env: "ok", call_id="d-1", session="s1")
    guard.approvals.approve(pending.value.request_id, by="alice")
    guard.approvals.remember(pending.value.request_id, scope="session", by="alice")
    assert guard.check("deploy", {"env": "prod"}, call_id="d-1", session="s1").effect == "ask"
    settled = guard._path.settle(guard.check("deploy", {"env": "prod"}, call_id="d-2",
                                             session="s1"))
    assert settled.allowed  # the grant covers a new call ...
    with pytest.raises(ApprovalPending):  # ... and not the one that may have run
        guard.run("deploy", {"env": "prod"}, lambda env: "again", call_id="d-2", session="s1")


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_an_approved_call_is_journaled_with_the_approval_it_used(store: str,
                                                                 tmp_path: Path) -> None:
    guard, _ = make(tmp_path if store == "sqlite" else None)
    with pytest.raises(ApprovalPending) as pending:
        guard.run("deploy", {"env": "prod"}, lambda env: "ok", call_id="d-1", session="s1")
    guard.approvals.approve(pending.value.request_id, by="alice")
    seen: list[Any] = []
    guard.run("deploy", {"env": "prod"}, lambda env: seen.append(entry(guard, "d-1")),
              call_id="d-1", session="s1")
    assert seen[0]["state"] == "executing"
    assert seen[0]["approval"] == f"approved by alice (request {pending.value.request_id})"


@pytest.mark.parametrize(("on_in_doubt", "effect", "runs"),
                         [("deny", "deny", 0), ("allow", "allow", 1), ("ask", "ask", 0)])
def test_on_in_doubt_says_what_a_call_in_doubt_gets(on_in_doubt: str, effect: str,
                                                    runs: int) -> None:
    guard, events = make(on_in_doubt=on_in_doubt)
    crash(guard)
    decision = guard.check(*PAY, call_id="call-1", session="s1")
    assert decision.effect.value == effect and decision.in_doubt
    assert events[-1]["reasons"][0]["code"] == "in_doubt"  # the audit says so either way
    ran: list[int] = []
    try:
        guard.run(*PAY, lambda **_: ran.append(1), call_id="call-1", session="s1")
    except ToolDenied as refused:
        if effect == "deny":
            assert "was not run again" in refused.decision.message
    assert len(ran) == runs


def test_a_call_in_doubt_is_never_decided_looser_than_the_policy_decides_it(
        tmp_path: Path) -> None:
    before, _ = make(tmp_path)
    crash(before)
    # Resumed under a policy that now refuses the call, and lets calls in doubt run again.
    after, _ = make(tmp_path, on_in_doubt="allow", rules=[
        {"id": "no-big", "match": {"tool": "pay"}, "if": "args.amount > 10", "effect": "deny"}])
    decision = after.check(*PAY, call_id="call-1", session="s1")
    assert (decision.effect.value, decision.rule) == ("deny", "no-big") and decision.in_doubt


def test_another_call_under_the_same_id_is_not_in_doubt() -> None:
    guard, _ = make()
    crash(guard)
    assert guard.check("pay", {"iban": "DE89370400440532013000", "amount": 41},
                       call_id="call-1", session="s1").effect == "allow"
    assert guard.check(*PAY, call_id="call-1", session="s2").effect == "allow"


@pytest.mark.parametrize("case", ["no caller id", "read-only tool", "journal off", "what-if"])
def test_what_is_not_journaled(case: str) -> None:
    guard, _ = make(journal=False) if case == "journal off" else make()
    tool, args = ("read_file", {"path": "a.txt"}) if case == "read-only tool" else PAY
    fields: dict[str, Any] = {"session": "s1"}
    if case != "no caller id":
        fields["call_id"] = "call-1"
    first = guard.query(tool, args, **fields) if case == "what-if" else \
        guard.check(tool, args, **fields)
    assert first.allowed
    assert guard.engine.journal.store.scan("journal:") == []
    assert guard.check(tool, args, **fields).effect == "allow"


def test_a_what_if_query_reports_a_call_in_doubt_and_writes_nothing() -> None:
    guard, _ = make()
    crash(guard)
    before = entry(guard, "call-1")
    assert guard.query(*PAY, call_id="call-1", session="s1").in_doubt
    assert entry(guard, "call-1") == before


class _FailingStore(MemoryStore):
    """A store whose writes of journal entries fail (a full disk, a lost connection)."""

    def compare_and_set(self, key: str, expected_version: int | None, value: Any, *,
                        ttl: float | None) -> bool:
        if key.startswith("journal:"):
            from callwarden.exceptions import StoreUnavailable

            raise StoreUnavailable("disk full")
        return super().compare_and_set(key, expected_version, value, ttl=ttl)


def test_a_call_whose_entry_cannot_be_written_does_not_run() -> None:
    guard = Guard.from_dict(POLICY, state=_FailingStore())
    ran: list[int] = []
    with pytest.raises(ToolDenied) as refused:
        guard.run(*PAY, lambda **_: ran.append(1), call_id="call-1", session="s1")
    assert ran == [] and refused.value.decision.code == "state_unavailable"
    assert guard.run(*PAY, lambda **_: "ok", session="s1") == "ok"  # an unnamed call: as ever


async def test_the_async_path_journals_and_finds_a_call_in_doubt(tmp_path: Path) -> None:
    guard, _ = make(tmp_path)

    async def pay(iban: str, amount: int) -> str:
        return "paid"

    assert await guard.arun(*PAY, pay, call_id="call-1", session="s1") == "paid"
    assert entry(guard, "call-1")["state"] == "done"  # type: ignore[index]
    assert (await guard.acheck(*PAY, call_id="call-2", session="s1")).allowed
    decision = await guard.acheck(*PAY, call_id="call-2", session="s1")
    assert decision.in_doubt and decision.effect == "ask"


def test_a_journal_on_sqlite_is_seen_by_another_process_s_guard(tmp_path: Path) -> None:
    first, _ = make(tmp_path)
    crash(first)
    second, _ = make(tmp_path)  # a new process on the same store
    assert second.check(*PAY, call_id="call-1", session="s1").in_doubt


@pytest.mark.parametrize(("journal", "message"), [
    ("yes", "must be true, false or a mapping"),
    ({"ttl": "soon"}, "soon"),
    ({"ttl": 0}, "must be longer than zero"),
    ({"keep": "1h", "when": "always"}, "unknown key"),
])
def test_journal_mistakes_are_policy_errors(journal: Any, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        Guard.from_dict({**POLICY, "journal": journal})


def test_on_in_doubt_takes_ask_deny_or_allow() -> None:
    with pytest.raises(PolicyError, match="on_in_doubt"):
        Guard.from_dict({**POLICY, "on_in_doubt": "retry"})


def test_the_journal_settings_are_inherited_through_extends(tmp_path: Path) -> None:
    base = tmp_path / "base.yaml"
    base.write_text("version: 1\non_in_doubt: deny\njournal: {ttl: 2d}\n", encoding="utf-8")
    own = tmp_path / "policy.yaml"
    own.write_text("version: 1\nextends: base.yaml\njournal: {keep: 10m}\n", encoding="utf-8")
    settings = Guard.from_file(own).engine.journal.settings
    assert (settings.on_in_doubt.value, settings.ttl, settings.keep) == ("deny", 172800.0, 600.0)
