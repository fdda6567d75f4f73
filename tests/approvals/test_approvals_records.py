"""The request and grant records: JSON both ways, digests, listing, the policy section."""

from __future__ import annotations

import json

import pytest

from callwarden import ConfigError, Guard
from callwarden.approvals import (
    ApprovalRequest,
    Approvals,
    Grant,
    Status,
    call_digest,
    decision_digest,
    parse_config,
)
from callwarden.state import MemoryStore


def test_request_round_trips_through_json(guard, memory_approvals) -> None:
    request = memory_approvals.request(guard.check("deploy", {"env": "qa", "n": [1, 2.5]},
                                                   agent="bot", session="s1"))
    again = ApprovalRequest.from_dict(json.loads(json.dumps(request.to_dict())))
    assert again == request


def test_resolved_request_round_trips_through_json(guard, memory_approvals) -> None:
    rid = memory_approvals.request(guard.check("deploy", {"env": "qa"}, agent="bot")).id
    request = memory_approvals.approve(rid, by="alice", edit={"env": "dev"}, comment="ok")
    again = ApprovalRequest.from_dict(json.loads(json.dumps(request.to_dict())))
    assert (again, again.status) == (request, Status.APPROVED)


def test_grant_round_trips_through_json(guard, memory_approvals) -> None:
    grant = memory_approvals.remember(guard.check("deploy", {}, agent="bot", session="s1"),
                                      scope="session", by="alice")
    assert Grant.from_dict(json.loads(json.dumps(grant.to_dict()))) == grant


def test_record_from_a_newer_writer_ignores_unknown_fields(guard, memory_approvals) -> None:
    request = memory_approvals.request(guard.check("deploy", {}, agent="bot"))
    assert ApprovalRequest.from_dict({**request.to_dict(), "added_later": 1}) == request


def test_digest_ignores_argument_order() -> None:
    assert call_digest("t", {"a": 1, "b": 2}, None, None, "p") == \
        call_digest("t", {"b": 2, "a": 1}, None, None, "p")


@pytest.mark.parametrize("change", [
    {"tool": "u"}, {"args": {"a": 2}}, {"principal": "x"}, {"session": "s"}, {"policy": "q"},
])
def test_digest_covers_tool_args_principal_session_and_policy(change) -> None:
    base = {"tool": "t", "args": {"a": 1}, "principal": None, "session": None, "policy": "p"}
    assert call_digest(**base) != call_digest(**{**base, **change})


def test_digest_of_a_decision_is_stable_across_checks(guard) -> None:
    first = guard.check("deploy", {"env": "qa"}, agent="bot", session="s")
    second = guard.check("deploy", {"env": "qa"}, agent="bot", session="s")
    assert decision_digest(first) == decision_digest(second)


def test_only_ask_decisions_make_requests(guard, memory_approvals) -> None:
    with pytest.raises(ValueError, match="ask"):
        memory_approvals.request(guard.check("rm", {}))


def test_list_filters_by_status_and_orders_oldest_first(guard, memory_approvals, clock) -> None:
    ids = []
    for env in ("a", "b", "c"):
        ids.append(memory_approvals.request(guard.check("deploy", {"env": env}, agent="bot")).id)
        clock.advance(1)
    memory_approvals.deny(ids[1], by="alice")
    assert ([r.id for r in memory_approvals.list()],
            [r.id for r in memory_approvals.list("pending")]) == (ids, [ids[0], ids[2]])


def test_list_shows_expired_requests_as_expired(guard, memory_approvals, clock) -> None:
    memory_approvals.request(guard.check("deploy", {}, agent="bot"))
    clock.advance(601)
    assert [r.status for r in memory_approvals.list()] == [Status.EXPIRED]


def test_cancel_withdraws_a_pending_request(guard, memory_approvals) -> None:
    rid = memory_approvals.request(guard.check("deploy", {}, agent="bot")).id
    assert memory_approvals.cancel(rid).status is Status.CANCELLED


# -- the policy section ----------------------------------------------------------------


def test_from_config_reads_ttl_approvers_and_on_expiry() -> None:
    approvals = Approvals.from_config(
        {"ttl": "30m", "approvers": ["alice", "bob"], "on_expiry": "ask",
         "state": "sqlite:///x.db"}, MemoryStore())
    assert (approvals.ttl, approvals.approvers, approvals.on_expiry) == (
        1800.0, ["alice", "bob"], "ask")


def test_from_config_defaults() -> None:
    approvals = Approvals.from_config(None, MemoryStore())
    assert (approvals.ttl, approvals.approvers, approvals.on_expiry) == (3600.0, None, "deny")


@pytest.mark.parametrize(("config", "key"), [
    ({"ttl": "soon"}, "ttl"),
    ({"ttl": 0}, "ttl"),
    ({"approvers": []}, "approvers"),
    ({"approvers": ["alice", 3]}, "approvers"),
    ({"on_expiry": "allow"}, "on_expiry"),
    ({"state": 5}, "state"),
    ({"aprovers": ["alice"]}, "aprovers"),
])
def test_bad_config_names_the_key(config, key) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(config)
    assert raised.value.key == key and (raised.value.hint or "")


def test_config_that_is_not_a_mapping_is_refused() -> None:
    with pytest.raises(ConfigError, match="mapping"):
        parse_config(["ttl", "30m"])  # type: ignore[arg-type]


def test_a_single_approver_name_is_a_list_of_one() -> None:
    assert parse_config({"approvers": "alice"}).approvers == ("alice",)


def test_constructor_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="on_expiry"):
        Approvals(MemoryStore(), on_expiry="allow")


def test_guard_is_unaffected_by_records(guard: Guard) -> None:
    assert guard.check("deploy", {"env": "qa"}).effect.value == "ask"
