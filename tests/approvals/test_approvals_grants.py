"""Remembered decisions: scoped, expiring, revocable, and never wider than asked."""

from __future__ import annotations

import pytest
from _approval_support import Tool, run_guarded

from callwarden import Effect, resolve_ask
from callwarden.approvals import (
    ApprovalInvalid,
    ApprovalPending,
    ApprovalRefused,
    Approvals,
    GrantStatus,
    Status,
)


def ask(guard, tool="deploy", args=None, **call):
    return guard.check(tool, args or {"env": "qa"}, **call)


def test_session_grant_allows_the_tool_in_that_session(guard, approvals) -> None:
    approvals.remember(ask(guard, agent="bot", session="s1"), scope="session", by="alice")
    resolved = resolve_ask(guard, ask(guard, args={"env": "dev"}, agent="bot", session="s1"),
                           approvals=approvals)
    assert (resolved.effect, resolved.code) == (Effect.ALLOW, "approval_remembered")


def test_session_grant_does_not_cover_another_session(guard, approvals) -> None:
    approvals.remember(ask(guard, agent="bot", session="s1"), scope="session", by="alice")
    with pytest.raises(ApprovalPending):
        resolve_ask(guard, ask(guard, agent="bot", session="s2"), approvals=approvals)


def test_session_grant_does_not_cover_another_tool(guard, approvals) -> None:
    approvals.remember(ask(guard, agent="bot", session="s1"), scope="session", by="alice")
    assert approvals.granted(ask(guard, "delete_user", agent="bot", session="s1")) is None


def test_agent_grant_covers_the_agent_in_any_session(guard, approvals) -> None:
    approvals.remember(ask(guard, agent="bot", session="s1"), scope="agent", by="alice")
    assert approvals.granted(ask(guard, agent="bot", session="s9")) is not None
    assert approvals.granted(ask(guard, agent="other", session="s1")) is None


def test_tool_grant_with_a_pattern_covers_matching_tools_for_everyone(guard, approvals) -> None:
    approvals.remember(ask(guard, "delete_user", agent="bot"), scope="tool", by="alice",
                       tool="delete_*")
    assert approvals.granted(ask(guard, "delete_repo", agent="other")) is not None
    assert approvals.granted(ask(guard, "deploy", agent="other")) is None


def test_grant_expires(guard, approvals, clock) -> None:
    grant = approvals.remember(ask(guard, agent="bot", session="s1"), scope="session",
                               by="alice", ttl=60)
    clock.advance(61)
    assert approvals.granted(ask(guard, agent="bot", session="s1")) is None
    [seen] = approvals.grants(include_inactive=True)
    assert (seen.id, seen.status) == (grant.id, GrantStatus.EXPIRED)


def test_revoked_grant_no_longer_applies_and_stays_visible(guard, approvals) -> None:
    grant = approvals.remember(ask(guard, agent="bot", session="s1"), scope="session", by="alice")
    approvals.revoke(grant.id)
    assert approvals.granted(ask(guard, agent="bot", session="s1")) is None
    assert (approvals.grants(), [g.status for g in approvals.grants(include_inactive=True)]) == (
        [], [GrantStatus.REVOKED])


def test_revoking_an_unknown_grant_is_not_found(approvals) -> None:
    with pytest.raises(ApprovalInvalid) as raised:
        approvals.revoke("nope")
    assert raised.value.code == "grant_not_found"


def test_grant_never_overrides_a_deny_rule(guard, approvals) -> None:
    approvals.remember(ask(guard, agent="bot", session="s1"), scope="agent", by="alice")
    tool = Tool()
    decision = guard.check("deploy", {"env": "prod"}, agent="bot", session="s1")
    assert resolve_ask(guard, decision, approvals=approvals).effect is Effect.DENY
    assert tool.calls == []


def test_grant_lets_calls_run_without_asking_again(guard, approvals) -> None:
    approvals.remember(ask(guard, agent="bot", session="s1"), scope="session", by="alice")
    tool = Tool()
    for version in ("1", "2"):
        run_guarded(guard, approvals, "deploy", {"env": "qa", "version": version}, tool,
                    agent="bot", session="s1")
    assert len(tool.calls) == 2 and approvals.list() == []


def test_remember_from_an_approved_request(guard, approvals) -> None:
    rid = approvals.request(ask(guard, agent="bot", session="s1")).id
    approvals.approve(rid, by="alice")
    grant = approvals.remember(rid, scope="session", by="alice")
    assert (grant.request_id, grant.session, grant.tool) == (rid, "s1", "deploy")


def test_remember_from_a_pending_request_is_refused(guard, approvals) -> None:
    rid = approvals.request(ask(guard, agent="bot", session="s1")).id
    with pytest.raises(ApprovalInvalid) as raised:
        approvals.remember(rid, scope="session", by="alice")
    assert raised.value.code == "approval_not_approved"


def test_the_caller_cannot_grant_itself(guard, approvals) -> None:
    with pytest.raises(ApprovalRefused):
        approvals.remember(ask(guard, agent="bot", session="s1"), scope="agent", by="bot")


def test_session_scope_needs_a_session(guard, approvals) -> None:
    with pytest.raises(ValueError, match="session"):
        approvals.remember(ask(guard, agent="bot"), scope="session", by="alice")


def test_unknown_scope_is_refused(guard, approvals) -> None:
    with pytest.raises(ValueError):
        approvals.remember(ask(guard, agent="bot"), scope="forever", by="alice")


# -- who revoked, and what cannot be revoked ----------------------------------------------------


def test_a_revoked_grant_says_who_revoked_it(guard, approvals, clock) -> None:
    grant = approvals.remember(ask(guard, agent="bot", session="s1"), scope="session", by="alice")
    clock.advance(5)
    revoked = approvals.revoke(grant.id, by="carol")
    assert (revoked.status, revoked.revoked_by, revoked.revoked_at) == (
        GrantStatus.REVOKED, "carol", clock.now)
    assert revoked.by == "alice"  # who granted it stays on record


def test_revoking_a_grant_twice_is_refused_saying_who_revoked_it(guard, approvals) -> None:
    grant = approvals.remember(ask(guard, agent="bot", session="s1"), scope="session", by="alice")
    approvals.revoke(grant.id, by="carol")
    with pytest.raises(ApprovalInvalid, match="already revoked by carol") as raised:
        approvals.revoke(grant.id, by="dave")
    assert raised.value.code == "grant_already_revoked"
    [seen] = approvals.grants(include_inactive=True)
    assert seen.revoked_by == "carol"  # the first revocation stands


def test_revoking_an_expired_grant_is_refused(guard, approvals, clock) -> None:
    grant = approvals.remember(ask(guard, agent="bot", session="s1"), scope="session",
                               by="alice", ttl=60)
    clock.advance(61)
    with pytest.raises(ApprovalInvalid, match="expired") as raised:
        approvals.revoke(grant.id, by="carol")
    assert raised.value.code == "grant_expired"
    assert [g.status for g in approvals.grants(include_inactive=True)] == [GrantStatus.EXPIRED]


@pytest.mark.parametrize("ttl", [0, -1, float("nan"), float("inf"), 367 * 86400, True, "1h",
                                 10**400])
def test_a_grant_lasts_more_than_nothing_and_at_most_a_year(guard, approvals, ttl) -> None:
    with pytest.raises(ValueError, match="at most a year"):
        approvals.remember(ask(guard, agent="bot", session="s1"), scope="session", by="alice",
                           ttl=ttl)
    assert approvals.grants(include_inactive=True) == []


def test_an_unknown_scope_says_which_there_are(guard, approvals) -> None:
    with pytest.raises(ValueError, match="session, agent or tool, not 'forever'"):
        approvals.remember(ask(guard, agent="bot"), scope="forever", by="alice")


# -- what an exact grant shows -----------------------------------------------------------------


def test_an_exact_grant_keeps_its_calls_arguments_to_show(guard, approvals) -> None:
    exact = approvals.remember(ask(guard, args={"env": "qa", "n": 1}, agent="bot",
                                   session="s1"), scope="session", by="alice", exact=True)
    wide = approvals.remember(ask(guard, agent="bot", session="s1"), scope="session",
                              by="alice")
    assert (exact.args, wide.args) == ({"env": "qa", "n": 1}, None)
    assert {g.id: g.args for g in approvals.grants()} == {exact.id: {"env": "qa", "n": 1},
                                                          wide.id: None}  # as stored


def test_an_exact_grant_of_an_edit_shows_the_edited_arguments(guard, approvals) -> None:
    rid = approvals.request(ask(guard, agent="bot", session="s1")).id
    approvals.approve(rid, by="alice", edit={"env": "staging"})
    grant = approvals.remember(rid, scope="session", by="alice", exact=True)
    assert grant.args == {"env": "staging"}


def test_arguments_too_long_to_keep_are_left_out_but_still_covered(guard, approvals) -> None:
    big = {"env": "qa", "blob": "x" * 10_000}
    grant = approvals.remember(ask(guard, args=big, agent="bot", session="s1"),
                               scope="session", by="alice", exact=True)
    assert grant.args is None and grant.call is not None
    assert approvals.granted(ask(guard, args=big, agent="bot", session="s1")) == grant


# -- approve and remember in one step ----------------------------------------------------------


def test_approve_and_remember_approves_and_grants(guard, approvals) -> None:
    rid = approvals.request(ask(guard, agent="bot", session="s1")).id
    request, grant = approvals.approve_and_remember(rid, scope="session", by="alice", ttl=600,
                                                    exact=True, comment="ok")
    assert request.status is Status.APPROVED and request.comment == "ok"
    assert grant is not None and (grant.request_id, grant.session, grant.by) == (rid, "s1",
                                                                                 "alice")
    assert grant.expires - grant.created == 600 and grant.call is not None


def test_approve_and_remember_refuses_a_grant_it_cannot_make_before_approving(guard,
                                                                              approvals) -> None:
    rid = approvals.request(ask(guard, agent="bot")).id  # no session
    for bad in ({"scope": "session"}, {"scope": "agent", "ttl": 0}, {"scope": "forever"}):
        with pytest.raises(ValueError):
            approvals.approve_and_remember(rid, by="alice", **bad)
    assert approvals.get(rid).status is Status.PENDING
    assert approvals.grants(include_inactive=True) == []


def test_no_standing_grant_stands_in_for_a_quorum(guard, store, clock) -> None:
    approvals = Approvals(store, ttl=600, clock=clock, required=2)
    rid = approvals.request(ask(guard, agent="bot", session="s1")).id
    with pytest.raises(ValueError, match="each call needs 2 people's approval"):
        approvals.approve_and_remember(rid, scope="session", by="alice")
    assert approvals.get(rid).status is Status.PENDING  # refused whole: nothing approved
    approvals.approve(rid, by="alice")
    approvals.approve(rid, by="bob")
    with pytest.raises(ValueError, match="approve each call"):
        approvals.remember(rid, scope="session", by="bob")
    with pytest.raises(ValueError, match="approve each call"):
        approvals.remember(ask(guard, agent="bot", session="s1"), scope="tool", by="carol")
    assert approvals.grants(include_inactive=True) == []


def test_approve_and_remember_by_the_caller_is_refused(guard, approvals) -> None:
    rid = approvals.request(ask(guard, agent="bot", session="s1")).id
    with pytest.raises(ApprovalRefused, match="made this call"):
        approvals.approve_and_remember(rid, scope="session", by="BOT")
    assert approvals.get(rid).status is Status.PENDING
