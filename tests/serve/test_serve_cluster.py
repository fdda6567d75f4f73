"""``callwarden serve`` scaled out: four workers deciding on a real Redis Cluster (the session's,
tests/conftest.py) keep a per-session budget and a global one exactly under 200 concurrent
decisions."""

from __future__ import annotations

import concurrent.futures
import uuid
from pathlib import Path
from typing import Any

import pytest
from test_serve import Service

POLICY = """\
version: 1
default: allow
timeout: 30s
state: {state}
rules:
  - id: per-session
    match: {{tool: fetch}}
    limit: {{calls: {session_limit}, per: session}}
  - id: everyone
    match: {{tool: fetch}}
    limit: {{calls: {global_limit}}}
"""


@pytest.mark.parametrize(("sessions", "global_limit", "allowed", "binding"), [
    (2, 1000, 100, "per-session"),  # 2 sessions x 100 calls, 50 each
    (10, 80, 80, "everyone"),       # 10 sessions x 20 calls, 80 in all
])
def test_workers_on_a_cluster_keep_both_budgets_exactly(
        tmp_path: Path, redis_cluster: Any, sessions: int, global_limit: int, allowed: int,
        binding: str) -> None:
    state = f"{redis_cluster.url}?prefix=serve-{uuid.uuid4().hex[:12]}:&timeout=10"
    (tmp_path / "policy.yaml").write_text(POLICY.format(
        state=state, session_limit=50, global_limit=global_limit))
    service = Service(tmp_path, "--workers", "4")
    try:
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            bodies = list(pool.map(lambda i: service.decide(
                "fetch", {"url": f"https://example.com/{i}"}, session=f"s{i % sessions}"),
                range(200)))
        effects = [body["effect"] for body in bodies]
        assert effects.count("allow") == allowed
        refused = [body for body in bodies if body["effect"] != "allow"]
        assert {body["rule"] for body in refused} == {binding}
        assert all(body["effect"] == "deny" for body in refused)
        # What stays counted is what was allowed: one more call is refused by the same rule.
        after = service.decide("fetch", {"url": "https://example.com/x"}, session="s0")
        assert (after["effect"], after["rule"]) == ("deny", binding)
    finally:
        assert service.stop() == 0
        # Four workers stop cleanly: each gets one SIGTERM, none is cut short (a traceback).
        assert not any("Traceback" in line for line in service.said), service.said
