"""Exactly once through the service: a call the service allowed and no outcome ever came back
for (the client crashed) is in doubt when the client decides it again under the same call id;
``POST /v1/outcome`` closes it (engine/journal.py)."""

from __future__ import annotations

from pathlib import Path

from test_serve import Service

POLICY = """\
version: 1
state: sqlite:///{state}
audit: {{sinks: [{{jsonl: {audit}}}]}}
tools: {{pay: {{kind: payment}}}}
"""
PAY = {"iban": "DE89370400440532013000", "amount": 40}


def test_a_call_decided_again_without_an_outcome_is_asked_and_an_outcome_closes_it(
        tmp_path: Path) -> None:
    service = Service(tmp_path, policy=POLICY)
    try:
        assert service.decide("pay", PAY, call_id="c1", session="s1")["effect"] == "allow"
        again = service.decide("pay", PAY, call_id="c1", session="s1")  # a retried request
        assert again["effect"] == "ask" and again["approval_request"]
        assert again["reasons"][0]["code"] == "in_doubt"
        status, request, _ = service.request("GET", f"/v1/approvals/{again['approval_request']}",
                                             token="approver")
        assert status == 200 and "may already have run" in request["in_doubt"]
        # A call whose outcome came back is done: deciding it again is a new decision.
        done = service.decide("pay", PAY, call_id="c2", session="s1")
        status, _, _ = service.request("POST", "/v1/outcome", {"decision": done,
                                                               "result": "paid"})
        assert status == 200
        assert service.decide("pay", PAY, call_id="c2", session="s1")["effect"] == "allow"
    finally:
        assert service.stop() == 0
