"""Standing grants through ``callwarden serve``: approve and remember, list, revoke; roles,
JSON errors, the audit; over real HTTP against the process."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from listening import TIMEOUT
from test_serve import POLICY, SECRET, Service, conforms

CALL = {"tool": "deploy", "args": {"env": "prod", "token": SECRET}, "session": "g1"}
REMEMBER = {"scope": "session", "ttl": 3600, "exact": True}


def asked(service: Service, **call: Any) -> str:
    body = service.decide(**{**CALL, **call})
    assert body["effect"] == "ask", body
    return str(body["approval_request"])


def effect(service: Service, **call: Any) -> str:
    """The decision's effect and the code of its first reason."""
    body = service.decide(**{**CALL, **call})
    return f"{body['effect']} ({body['reasons'][0]['code'] if body['reasons'] else '-'})"


def grants(service: Service, query: str = "", token: str = "approver") -> list[dict[str, Any]]:
    status, body, _ = service.request("GET", f"/v1/grants{query}", token=token)
    assert status == 200, body
    conforms(body, "Grants")
    return list(body["grants"])


def test_approve_and_remember_then_revoke(service: Service) -> None:
    """Approved with remember (this session, this exact call, an hour): the call runs on the
    approval, then on the grant, another call is still asked; revoked, it is asked again."""
    request_id = asked(service)
    status, approved, _ = service.request("POST", f"/v1/approvals/{request_id}/approve",
                                          {"comment": "for today", "remember": REMEMBER},
                                          token="approver")
    assert status == 200, approved
    conforms(approved, "Approved")
    grant = approved["grant"]
    assert (approved["status"], grant["scope"], grant["session"], grant["by"], grant["exact"]) == (
        "approved", "session", "g1", "carol", True)
    assert grant["expires"] - grant["created"] == 3600 and grant["request_id"] == request_id
    assert SECRET not in json.dumps(approved["grant"])  # redacted as a pending request's are
    [listed] = grants(service)
    assert listed["id"] == grant["id"] and listed["args"]["env"] == "prod"
    assert listed["args"]["token"].startswith("[REDACTED")

    assert effect(service) == "allow (approved)"  # the approval runs its own call once
    assert effect(service) == "allow (approval_remembered)"  # then the grant
    assert effect(service) == "allow (approval_remembered)"
    assert effect(service, args={"env": "staging"}).startswith("ask")  # not this exact call
    assert effect(service, session="g2").startswith("ask")  # not this session

    status, revoked, _ = service.request("POST", f"/v1/grants/{grant['id']}/revoke",
                                         token="alice")
    assert status == 200, revoked
    conforms(revoked, "Grant")
    assert (revoked["status"], revoked["revoked_by"], revoked["by"]) == ("revoked", "alice",
                                                                         "carol")
    assert effect(service).startswith("ask")
    assert grants(service) == []
    assert [g["status"] for g in grants(service, "?status=revoked")] == ["revoked"]
    status, again, _ = service.request("POST", f"/v1/grants/{grant['id']}/revoke",
                                       token="approver")
    assert status == 409 and again["error"]["code"] == "grant_already_revoked"
    assert "already revoked by alice" in again["error"]["message"]
    conforms(again, "Error")
    events = [(e["action"], e.get("by")) for e in service.events() if e["type"] == "approval"
              and e["action"].startswith("grant_")]
    assert events == [("grant_created", "carol"), ("grant_used", "carol"),
                      ("grant_used", "carol"), ("grant_revoked", "alice")]


def test_a_tool_grant_covers_other_arguments_and_callers(service: Service) -> None:
    request_id = asked(service, session="g3")
    status, approved, _ = service.request("POST", f"/v1/approvals/{request_id}/approve",
                                          {"remember": {"scope": "tool"}}, token="approver")
    assert status == 200 and approved["grant"]["exact"] is False
    assert approved["grant"]["args"] is None and approved["grant"]["session"] is None
    # the default ttl: the approvals' own (an hour)
    assert approved["grant"]["expires"] - approved["grant"]["created"] == 3600
    service.decide(**{**CALL, "session": "g3"})  # the approval's own call
    assert effect(service, args={"env": "qa"}, session="other").endswith("(approval_remembered)")


def test_grants_are_filtered(service: Service) -> None:
    for session, scope in (("f1", "session"), ("f2", "session"), ("f3", "tool")):
        request_id = asked(service, session=session)
        status, _, _ = service.request("POST", f"/v1/approvals/{request_id}/approve",
                                       {"remember": {"scope": scope}}, token="approver")
        assert status == 200
    assert len(grants(service)) == 3
    assert [g["session"] for g in grants(service, "?session=f2")] == ["f2"]
    assert [g["scope"] for g in grants(service, "?tool=deploy")] == ["session", "session",
                                                                      "tool"]
    assert grants(service, "?tool=delete_file") == []
    assert grants(service, "?agent=someone-else") == []
    assert len(grants(service, "?agent=&session=")) == 3  # empty filters: none
    assert grants(service, "?status=expired") == []
    assert len(grants(service, "?status=any")) == 3
    assert len(grants(service, token="admin")) == 3  # an admin may do what an approver may
    for bad in ("?status=maybe", "?status="):
        status, error, _ = service.request("GET", f"/v1/grants{bad}", token="approver")
        assert status == 400 and error["error"]["code"] == "bad_request", bad


def test_an_agent_token_can_never_approve_list_or_revoke(service: Service) -> None:
    request_id = asked(service, session="r1")
    status, approved, _ = service.request("POST", f"/v1/approvals/{request_id}/approve",
                                          {"remember": REMEMBER}, token="approver")
    grant_id = approved["grant"]["id"]
    for method, path, body in (
            ("GET", "/v1/grants", None),
            ("POST", f"/v1/grants/{grant_id}/revoke", None),
            ("POST", f"/v1/approvals/{asked(service, session='r2')}/approve",
             {"remember": REMEMBER})):
        status, error, _ = service.request(method, path, body, token="agent")
        assert status == 403 and error["error"]["code"] == "forbidden", path
    status, _, _ = service.request("GET", "/v1/grants", token=None)
    assert status == 401
    assert [g["status"] for g in grants(service)] == ["active"]
    status, error, _ = service.request("POST", "/v1/grants/nope/revoke", token="approver")
    assert status == 404 and error["error"]["code"] == "grant_not_found"
    conforms(error, "Error")


def test_the_caller_cannot_remember_its_own_call(service: Service) -> None:
    request_id = asked(service, session="self", principal="alice")
    status, error, _ = service.request("POST", f"/v1/approvals/{request_id}/approve",
                                       {"remember": REMEMBER}, token="alice")
    assert status == 403 and error["error"]["code"] == "self_approval"
    assert grants(service) == []


@pytest.mark.parametrize("remember", [
    5, "session", [], {"scope": "forever"}, {"ttl": 60}, {"scope": "session", "ttl": 0},
    {"scope": "session", "ttl": -5}, {"scope": "session", "ttl": "1h"},
    {"scope": "session", "ttl": 367 * 86400}, {"scope": "session", "ttl": True},
    {"scope": "session", "exact": "yes"}, {"scope": "session", "for": "1h"},
])
def test_a_remember_that_is_not_one_is_refused_and_approves_nothing(service: Service,
                                                                    remember: Any) -> None:
    request_id = asked(service, session="bad")
    status, error, _ = service.request("POST", f"/v1/approvals/{request_id}/approve",
                                       {"remember": remember}, token="approver")
    assert status == 400 and error["error"]["code"] == "bad_request", (remember, error)
    conforms(error, "Error")
    _, record, _ = service.request("GET", f"/v1/approvals/{request_id}", token="approver")
    assert record["status"] == "pending"


def test_a_session_grant_of_a_call_without_a_session_approves_nothing(service: Service) -> None:
    request_id = asked(service, session=None)
    status, error, _ = service.request("POST", f"/v1/approvals/{request_id}/approve",
                                       {"remember": {"scope": "session"}}, token="approver")
    assert status == 400
    assert error["error"]["message"].endswith("needs a call made in a session; nothing was "
                                              "approved")
    _, record, _ = service.request("GET", f"/v1/approvals/{request_id}", token="approver")
    assert record["status"] == "pending"
    status, error, _ = service.request("POST", "/v1/approvals/nope/approve",
                                       {"remember": REMEMBER}, token="approver")
    assert status == 404 and error["error"]["code"] == "approval_not_found"


def test_an_expired_grant_cannot_be_revoked(service: Service) -> None:
    request_id = asked(service, session="short")
    _, approved, _ = service.request("POST", f"/v1/approvals/{request_id}/approve",
                                     {"remember": {"scope": "session", "ttl": 0.2}},
                                     token="approver")
    grant_id = approved["grant"]["id"]
    deadline = time.monotonic() + TIMEOUT
    while not grants(service, "?status=expired"):
        assert time.monotonic() < deadline, "the grant did not expire"
        time.sleep(0.1)
    status, error, _ = service.request("POST", f"/v1/grants/{grant_id}/revoke",
                                       token="approver")
    assert status == 409 and error["error"]["code"] == "grant_expired"


def test_under_a_quorum_no_approval_remembers(tmp_path: Path) -> None:
    service = Service(tmp_path, policy=POLICY.replace("rules:", "approvals: {{required: 2}}\n"
                                                                "rules:", 1))
    try:
        request_id = asked(service, session="q1")
        status, error, _ = service.request("POST", f"/v1/approvals/{request_id}/approve",
                                           {"remember": REMEMBER}, token="approver")
        assert status == 400 and "approve each call" in error["error"]["message"]
        status, first, _ = service.request("POST", f"/v1/approvals/{request_id}/approve", {},
                                           token="approver")
        assert status == 200 and first["status"] == "pending"  # the refusal approved nothing
        assert grants(service) == []
    finally:
        assert service.stop() == 0
