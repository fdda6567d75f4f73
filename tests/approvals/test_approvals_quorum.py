"""Approval policy: a quorum — a request needs ``required`` distinct approvers, one deny
vetoes unless ``veto: false`` — and caps on the requests open at once (``max_open``); on every
store, from several processes' worth of Approvals objects."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml
from _approval_support import POLICY, Clock, Tool, run_guarded

from callwarden import Guard, PolicyError, RunHalted, ToolDenied, resolve_ask
from callwarden.approvals import ApprovalPending, ApprovalRefused, Approvals, Status
from callwarden.state import StateStore

STAGING = {"env": "staging", "version": "1.4"}


def asked(guard: Guard, approvals: Approvals) -> str:
    decision = guard.check("deploy", STAGING, agent="bot")
    with pytest.raises(ApprovalPending) as raised:
        resolve_ask(guard, decision, approvals=approvals)
    return raised.value.request_id


@pytest.fixture
def two_of(store: StateStore, clock: Clock) -> Approvals:
    return Approvals(store, ttl=600, clock=clock, required=2)


def test_a_call_runs_only_once_enough_people_approved(guard, two_of) -> None:
    request_id = asked(guard, two_of)
    first = two_of.approve(request_id, by="alice")
    assert first.status is Status.PENDING and first.approved_by == ["alice"]
    tool = Tool()
    with pytest.raises(ToolDenied, match="1 of the 2 approvals"):
        run_guarded(guard, two_of, "deploy", STAGING, tool, agent="bot", approval_id=request_id)
    assert tool.calls == []
    done = two_of.approve(request_id, by="bob", comment="fine")
    assert done.status is Status.APPROVED and done.approved_by == ["alice", "bob"]
    assert done.resolved_by == "bob"
    run_guarded(guard, two_of, "deploy", STAGING, tool, agent="bot", approval_id=request_id)
    assert tool.calls == [STAGING]


def test_the_same_person_counts_once_and_the_caller_never(guard, two_of) -> None:
    request_id = asked(guard, two_of)
    two_of.approve(request_id, by="alice")
    with pytest.raises(ApprovalRefused, match="already approved"):
        two_of.approve(request_id, by="Alice")  # identities compare case-folded
    with pytest.raises(ApprovalRefused, match="made this call"):
        two_of.approve(request_id, by="bot")
    assert two_of.get(request_id).status is Status.PENDING


def test_one_deny_vetoes_by_default(guard, two_of) -> None:
    request_id = asked(guard, two_of)
    two_of.approve(request_id, by="alice")
    denied = two_of.deny(request_id, by="bob", reason="not on a Friday")
    assert denied.status is Status.DENIED
    with pytest.raises(ToolDenied, match="not on a Friday"):
        run_guarded(guard, two_of, "deploy", STAGING, Tool(), agent="bot",
                    approval_id=request_id)


def test_without_veto_a_deny_counts_against_the_quorum(guard, store, clock) -> None:
    approvals = Approvals(store, ttl=600, clock=clock, required=2, veto=False,
                          approvers=["alice", "bob", "carol"])
    request_id = asked(guard, approvals)
    held = approvals.deny(request_id, by="alice", reason="no")
    assert held.status is Status.PENDING and held.denied_by == ["alice"]
    # bob and carol can still make two: still pending; once bob says no too, they cannot
    assert approvals.deny(request_id, by="bob").status is Status.DENIED


def test_without_veto_the_quorum_can_still_approve(guard, store, clock) -> None:
    approvals = Approvals(store, ttl=600, clock=clock, required=2, veto=False)
    request_id = asked(guard, approvals)
    approvals.deny(request_id, by="alice")
    approvals.approve(request_id, by="bob")
    assert approvals.approve(request_id, by="carol").status is Status.APPROVED


def test_one_inline_approver_leaves_the_call_waiting_for_the_others(guard, two_of) -> None:
    decision = guard.check("deploy", STAGING, agent="bot")
    with pytest.raises(ApprovalPending) as raised:
        resolve_ask(guard, decision, approvals=two_of, approver=lambda request: True)
    assert two_of.get(raised.value.request_id).approved_by is not None


def test_an_edit_needs_a_quorum_of_its_own(guard, two_of) -> None:
    request_id = asked(guard, two_of)
    with pytest.raises(ApprovalRefused, match="edit"):
        two_of.approve(request_id, by="alice", edit={"env": "staging", "version": "1.5"})


def test_approvers_at_once_are_all_counted(guard, store, clock) -> None:
    """Approvers answering at the same moment through their own Approvals objects (as
    processes on one store do): every approval is recorded, none is lost."""
    request_id = asked(guard, Approvals(store, ttl=600, clock=clock, required=3))
    people = ["alice", "bob", "carol"]
    with ThreadPoolExecutor(3) as pool:
        list(pool.map(lambda who: Approvals(store, ttl=600, clock=clock, required=3)
                      .approve(request_id, by=who), people))
    final = Approvals(store, ttl=600, clock=clock).get(request_id)
    assert final.status is Status.APPROVED and sorted(final.approved_by or []) == people


@pytest.mark.parametrize(("section", "message"), [
    ({"required": 0}, "a whole number of 1 or more"),
    ({"required": "two"}, "a whole number of 1 or more"),
    ({"required": 3, "approvers": ["alice", "bob"]}, "only 2 approvers"),
    ({"veto": "yes"}, "true or false"),
])
def test_a_quorum_that_cannot_work_is_a_policy_error(section: dict, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        Guard.from_dict({**POLICY, "approvals": section})


def test_the_policy_sets_the_quorum() -> None:
    guard = Guard.from_dict({**POLICY, "approvals": {"required": 2, "veto": False}})
    request_id = asked(guard, guard.approvals)
    assert guard.approvals.get(request_id).required == 2
    assert guard.approvals.approve(request_id, by="alice").status is Status.PENDING
    with pytest.raises(ValueError, match="required"):
        Approvals(guard.approvals.store, required=0)


def test_the_quorum_holds_when_the_approvals_name_their_own_store(tmp_path) -> None:
    """approvals: {state: ...} beside required / veto / max_open / key_file: each still
    applies (the store's URL is made absolute, nothing else is dropped)."""
    key = tmp_path / "approvals.key"
    key.write_text("ab" * 32)
    key.chmod(0o600)
    section = {"state": "sqlite:///approvals.db", "required": 2, "veto": False,
               "approvers": ["alice", "bob"], "max_open": {"session": 3},
               "key_file": str(key)}
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({**POLICY, "approvals": section}))
    guard = Guard.from_file(policy)
    settings = guard.loaded.approvals
    assert (settings.required, settings.veto, settings.max_open, settings.key_file) == (
        2, False, (("session", 3),), str(key))
    assert settings.state == f"sqlite:///{tmp_path / 'approvals.db'}"
    request_id = asked(guard, guard.approvals)
    assert guard.approvals.approve(request_id, by="alice").status is Status.PENDING
    guard.close()


def test_the_cli_says_how_many_approvals_a_request_has(tmp_path, guard, capsys) -> None:
    from callwarden.cli import main
    from callwarden.state import open_store

    url = f"sqlite:///{tmp_path / 'state.db'}"
    with open_store(url) as store:
        request_id = Approvals(store, required=2).request(
            guard.check("deploy", STAGING, agent="bot")).id
    assert main(["approvals", "approve", request_id, "--by", "alice", "--state", url]) == 0
    assert "1 of 2 approvals (alice); still pending" in capsys.readouterr().out
    assert main(["approvals", "show", request_id, "--state", url]) == 0
    assert "quorum:  1 of 2 approvals (alice)" in capsys.readouterr().out
    assert main(["approvals", "approve", request_id, "--by", "bob", "--state", url]) == 0
    assert f"approved {request_id} by bob" in capsys.readouterr().out


# -- caps on open requests (approval fatigue) ---------------------------------------------------


def test_past_the_cap_on_open_requests_an_ask_is_a_deny(guard, store, clock) -> None:
    approvals = Approvals(store, ttl=600, clock=clock, max_open=[("session", 2)])

    def ask(version: str, session: str = "s1") -> str:
        decision = guard.check("deploy", {"env": "staging", "version": version}, agent="bot",
                               session=session)
        try:
            resolve_ask(guard, decision, approvals=approvals)
        except ApprovalPending as e:
            return e.request_id
        raise AssertionError("not asked")

    first, _ = ask("1"), ask("2")
    capped = resolve_ask(guard, guard.check("deploy", {"env": "staging", "version": "3"},
                                            agent="bot", session="s1"), approvals=approvals)
    assert capped.effect.value == "deny" and capped.reasons[0].code == "approval_cap"
    assert "2 calls of this session are already waiting" in capped.message
    assert ask("1")  # the same call asked again is the request it has, not a new one
    assert ask("3", session="s2")  # another session has its own cap
    approvals.deny(first, by="alice")
    assert ask("3")  # one answered: room for one more


@pytest.mark.parametrize(("section", "message"), [
    ({"max_open": {"tool": 3}}, "cannot cap open requests per 'tool'"),
    ({"max_open": {"session": 0}}, "a whole number of 1 or more"),
    ({"max_open": 5}, "must map session and/or agent"),
])
def test_a_cap_that_cannot_work_is_a_policy_error(section: dict, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        Guard.from_dict({**POLICY, "approvals": section})


def test_the_policy_sets_the_cap() -> None:
    guard = Guard.from_dict({**POLICY, "approvals": {"max_open": {"agent": 1}}})
    asked(guard, guard.approvals)
    second = guard.check("deploy", {"env": "staging", "version": "9"}, agent="bot")
    other = resolve_ask(guard, second, approvals=guard.approvals)
    assert other.reasons[0].code == "approval_cap"


# -- what an approval that nobody answered gets (on_timeout) ------------------------------------


def timing_out(on_timeout: str) -> tuple[Guard, Clock]:
    clock = Clock()
    rules = [{"id": "ask-deploy", "match": {"tool": "deploy"}, "effect": "ask",
              "on_timeout": on_timeout, "message": "Deploys need a human."}]
    return Guard.from_dict({"version": 1, "rules": rules, "approvals": {"ttl": "10m"}},
                           clock=clock), clock


@pytest.mark.parametrize(("on_timeout", "outcome"), [
    ("allow", "ran"), ("deny", ToolDenied), ("halt", RunHalted)])
def test_an_unanswered_request_gets_what_the_rule_says(on_timeout: str, outcome: object) -> None:
    guard, clock = timing_out(on_timeout)
    request_id = asked(guard, guard.approvals)
    clock.advance(601)  # past the request's ten minutes, nobody answered
    tool = Tool()
    if outcome == "ran":
        run_guarded(guard, guard.approvals, "deploy", STAGING, tool, agent="bot",
                    approval_id=request_id)
        assert tool.calls == [STAGING]
        return
    with pytest.raises(outcome) as raised:  # type: ignore[call-overload]
        run_guarded(guard, guard.approvals, "deploy", STAGING, tool, agent="bot",
                    approval_id=request_id)
    assert tool.calls == [] and "expired" in raised.value.decision.reasons[0].message


def test_an_answered_request_is_not_a_timeout() -> None:
    guard, clock = timing_out("allow")
    request_id = asked(guard, guard.approvals)
    guard.approvals.deny(request_id, by="alice", reason="no")
    clock.advance(601)
    with pytest.raises(ToolDenied, match="denied"):
        run_guarded(guard, guard.approvals, "deploy", STAGING, Tool(), agent="bot",
                    approval_id=request_id)


@pytest.mark.parametrize(("rule", "message"), [
    ({"effect": "deny", "on_timeout": "allow"}, "only a rule that asks"),
    ({"effect": "ask", "on_timeout": "later"}, "on_timeout"),
])
def test_a_timeout_that_cannot_work_is_a_policy_error(rule: dict, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        Guard.from_dict({"version": 1, "rules": [{"id": "r", **rule}]})


# -- standing grants of one exact call ----------------------------------------------------------


def test_a_grant_of_one_exact_call_covers_only_that_call(guard, approvals) -> None:
    request_id = asked_in(guard, approvals, session="s1")
    approvals.approve(request_id, by="alice")
    grant = approvals.remember(request_id, scope="session", by="alice", ttl=3600, exact=True)
    assert grant.call is not None

    def effect(args: dict, session: str = "s1") -> str:
        decision = guard.check("deploy", args, agent="bot", session=session)
        try:
            resolved = resolve_ask(guard, decision, approvals=approvals)
        except ApprovalPending:
            return "pending"
        return f"{resolved.effect.value} ({resolved.reasons[0].code})"

    assert effect(STAGING) == "allow (approved)"  # the approval runs its own call, once
    assert effect(STAGING) == "allow (approval_remembered)"  # the grant: again, for an hour
    assert effect(STAGING) == "allow (approval_remembered)"
    assert effect({**STAGING, "version": "1.5"}) == "pending"  # other arguments
    assert effect(STAGING, session="s2") == "pending"  # another session
    approvals.revoke(grant.id)
    assert effect(STAGING) == "pending"  # nothing left behind the grant


def test_a_grant_revoked_before_its_call_ran_leaves_the_approval_standing(guard,
                                                                          approvals) -> None:
    """Approved and remembered, the grant revoked before the agent came back: the person's
    approval of that call still stands (once); the grant covers nothing more."""
    request_id = asked_in(guard, approvals, session="s1")
    approvals.approve(request_id, by="alice")
    grant = approvals.remember(request_id, scope="session", by="alice", exact=True)
    approvals.revoke(grant.id, by="carol")
    decision = guard.check("deploy", STAGING, agent="bot", session="s1")
    assert resolve_ask(guard, decision, approvals=approvals).reasons[0].code == "approved"
    with pytest.raises(ApprovalPending):
        resolve_ask(guard, guard.check("deploy", STAGING, agent="bot", session="s1"),
                    approvals=approvals)


def test_an_exact_grant_of_an_edited_approval_covers_the_edit(guard, approvals) -> None:
    request_id = asked_in(guard, approvals, session="s1")
    edited = {"env": "staging", "version": "1.3"}
    approvals.approve(request_id, by="alice", edit=edited)
    approvals.remember(request_id, scope="session", by="alice", exact=True)
    decision = guard.check("deploy", edited, agent="bot", session="s1")
    assert resolve_ask(guard, decision, approvals=approvals).effect.value == "allow"
    with pytest.raises(ValueError, match="call's own tool"):
        approvals.remember(request_id, scope="session", by="alice", exact=True, tool="*")


def test_the_cli_remembers_an_exact_call_for_a_while(tmp_path, guard, capsys) -> None:
    from callwarden.cli import main
    from callwarden.state import open_store

    url = f"sqlite:///{tmp_path / 'state.db'}"
    with open_store(url) as store:
        request_id = Approvals(store).request(
            guard.check("deploy", STAGING, agent="bot", session="s1")).id
    assert main(["approvals", "approve", request_id, "--by", "alice", "--state", url,
                 "--remember", "session", "--for", "1h", "--exact"]) == 0
    said = capsys.readouterr().out
    assert "remembered as" in said and "this exact call for this session" in said
    assert main(["approvals", "grants", "--state", url]) == 0
    assert "(one exact call)" in capsys.readouterr().out
    with open_store(url) as store:
        covered = Approvals(store).granted(guard.check("deploy", STAGING, agent="bot",
                                                       session="s1"))
        other = Approvals(store).granted(guard.check("deploy", {**STAGING, "version": "2"},
                                                     agent="bot", session="s1"))
    assert covered is not None and other is None
    assert main(["approvals", "approve", request_id, "--exact", "--state", url]) == 2


def asked_in(guard: Guard, approvals: Approvals, **call: str) -> str:
    decision = guard.check("deploy", STAGING, agent="bot", **call)
    with pytest.raises(ApprovalPending) as raised:
        resolve_ask(guard, decision, approvals=approvals)
    return raised.value.request_id


# -- reminders for requests left waiting --------------------------------------------------------


def test_requests_left_waiting_are_reminded_once_or_every_so_often(guard, store, clock) -> None:
    seen: list[str] = []
    approvals = Approvals(store, ttl=3600, clock=clock, reminder=lambda r: seen.append(r.id),
                          remind_after=600, remind_every=1800)
    request_id = asked(guard, approvals)
    assert approvals.remind() == [] and seen == []  # not waiting ten minutes yet
    clock.advance(601)
    assert [r.id for r in approvals.remind()] == [request_id] and seen == [request_id]
    assert approvals.remind() == []  # reminded: not again before every
    clock.advance(1800)
    assert [r.id for r in approvals.remind()] == [request_id]
    approvals.approve(request_id, by="alice")
    clock.advance(1800)
    assert approvals.remind() == [] and seen == [request_id] * 2  # answered: no more


def test_a_failing_reminder_never_decides_anything(guard, store, clock) -> None:
    def down(request: object) -> None:
        raise RuntimeError("the chat service is down")

    approvals = Approvals(store, ttl=3600, clock=clock, reminder=down, remind_after=0)
    request_id = asked(guard, approvals)
    assert approvals.remind() == []
    assert approvals.get(request_id).status is Status.PENDING
    assert approvals.get(request_id).reminded_at is None  # tried again next time


def test_the_cli_reminds_from_the_policys_remind_section(tmp_path, guard, capsys,
                                                         monkeypatch) -> None:
    from _reminders import SEEN

    from callwarden.cli import main
    from callwarden.state import open_store

    (tmp_path / "policy.yaml").write_text(
        "version: 1\nstate: sqlite:///state.db\n"
        "approvals: {remind: {after: 1ms, call: '_reminders:remember_request'}}\n")
    url = f"sqlite:///{tmp_path / 'state.db'}"
    with open_store(url) as store:
        request_id = Approvals(store).request(guard.check("deploy", STAGING, agent="bot")).id
    monkeypatch.chdir(tmp_path)
    assert main(["approvals", "remind", "--policy", "policy.yaml"]) == 0
    assert f"reminded {request_id}  deploy" in capsys.readouterr().out
    assert request_id in SEEN
    assert main(["approvals", "remind", "--policy", "policy.yaml"]) == 0
    assert "nothing to remind" in capsys.readouterr().out
    (tmp_path / "bare.yaml").write_text("version: 1\nstate: sqlite:///state.db\n")
    assert main(["approvals", "remind", "--policy", "bare.yaml"]) == 2
    assert "no approvals: {remind: ...} section" in capsys.readouterr().err


@pytest.mark.parametrize(("section", "message"), [
    ({"remind": {"after": "10m"}}, "module:function"),
    ({"remind": {"call": "x:y", "soon": 1}}, "unknown key 'soon'"),
    ({"remind": {"call": "x:y", "after": "later"}}, "remind"),
])
def test_a_reminder_that_cannot_work_is_a_policy_error(section: dict, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        Guard.from_dict({**POLICY, "approvals": section})
