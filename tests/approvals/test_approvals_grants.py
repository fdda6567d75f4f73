"""Remembered decisions: scoped, expiring, revocable, and never wider than asked."""

from __future__ import annotations

import pytest
from _approval_support import Tool, run_guarded

from callwarden import Effect, resolve_ask
from callwarden.approvals import (
    ApprovalInvalid,
    ApprovalPending,
    ApprovalRefused,
    GrantStatus,
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
