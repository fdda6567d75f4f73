"""``callwarden serve`` as a process, over real HTTP: decisions, outcomes, approvals, AuthZEN,
roles, errors, reload, metrics, and two processes sharing one store."""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
from listening import CLI, TIMEOUT, ListeningProcess

OPENAPI = Path(__file__).parents[2] / "src" / "callwarden" / "serve" / "openapi.json"
SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"

POLICY = """\
version: 1
default: allow
state: sqlite:///{state}
audit: {{sinks: [{{jsonl: {audit}}}]}}
rules:
  - id: no-delete
    match: {{tool: delete_file}}
    effect: deny
    message: Deleting files is not allowed; move them to trash/ instead.
  - id: cap-search
    match: {{tool: search}}
    cap: {{limit: 5}}
    effect: modify
  - id: deploy-asks
    match: {{tool: deploy}}
    effect: ask
    message: Deploys need a person's go-ahead.
  - id: stop-wipe
    match: {{tool: wipe}}
    effect: halt
  - id: five-reads
    match: {{tool: read_file}}
    limit: {{calls: 5, per: session}}
  - id: redact-secrets
    on: output
    match: {{tool: "*"}}
    secrets: true
    effect: modify
"""

TOKENS = {"agent": "agent-token-0123456789", "approver": "approver-token-0123456789",
          "admin": "admin-token-0123456789", "alice": "alice-token-0123456789"}
TOKEN_FILE = """\
# role name token
agent    bot    agent-token-0123456789
approver carol  approver-token-0123456789
approver alice  alice-token-0123456789
admin    ops    admin-token-0123456789
"""


class Service(ListeningProcess):
    """``callwarden serve`` on a free loopback port."""

    def __init__(self, root: Path, *extra: str, policy: str = POLICY,
                 env: dict[str, str] | None = None) -> None:
        self.root = root
        self.policy = root / "policy.yaml"
        self.audit = root / "audit.jsonl"
        if not self.policy.exists():
            self.policy.write_text(policy.format(state=root / "state.db", audit=self.audit))
        tokens = root / "tokens"
        tokens.write_text(TOKEN_FILE)
        super().__init__(["serve", "--policy", str(self.policy), "--listen", "127.0.0.1:0",
                          "--tokens", str(tokens), *extra],
                         env=None if env is None else {**os.environ, **env})

    def request(self, method: str, path: str, body: Any = None, *, token: str | None = "agent",
                raw: bytes | None = None, headers: dict[str, str] | None = None
                ) -> tuple[int, Any, dict[str, str]]:
        parts = urlsplit(self.url)
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=TIMEOUT)
        sent = {"Content-Type": "application/json", **(headers or {})}
        if token is not None:
            sent["Authorization"] = f"Bearer {TOKENS.get(token, token)}"
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        try:
            connection.request(method, path, body=data, headers=sent)
            response = connection.getresponse()
            payload = response.read()
            got = {k.lower(): v for k, v in response.getheaders()}
        finally:
            connection.close()
        parsed = json.loads(payload) if got.get("content-type", "").startswith(
            "application/json") else payload.decode()
        return response.status, parsed, got

    def decide(self, tool: str, args: Any = None, token: str = "agent", **fields: Any) -> Any:
        status, body, _ = self.request("POST", "/v1/decide", {"tool": tool, "args": args or {},
                                                              **fields}, token=token)
        assert status == 200, body
        return body

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.audit.read_text().splitlines()]


DOC = json.loads(OPENAPI.read_text())


def conforms(body: Any, schema: str) -> None:
    """The body matches the OpenAPI document's schema of that name."""
    jsonschema.validate(body, {"$ref": f"#/components/schemas/{schema}",
                               "components": DOC["components"]})


# -- deciding ---------------------------------------------------------------------------------


def test_decisions_of_every_effect(service: Service) -> None:
    allowed = service.decide("read_file", {"path": "a"}, session="s1")
    denied = service.decide("delete_file", {"path": "a"})
    capped = service.decide("search", {"query": "q", "limit": 50})
    halted = service.decide("wipe", {"disk": "sda"})
    for body in (allowed, denied, capped, halted):
        conforms(body, "Decision")
    assert allowed["effect"] == "allow" and allowed["call"]["session"] == "s1"
    assert allowed["call"]["agent"] == "bot"  # the token's name, when the call names none
    assert allowed["call"]["framework"] == "service"
    named = service.decide("read_file", {"path": "a"}, session="", principal="", agent="",
                           framework="spring-ai")
    assert (named["call"]["session"], named["call"]["principal"], named["call"]["agent"],
            named["call"]["framework"]) == (None, None, "bot", "spring-ai")  # empty: none
    assert (denied["effect"], denied["rule"]) == ("deny", "no-delete")
    assert "trash/" in denied["message"]
    assert capped["effect"] == "modify" and capped["args"] == {"query": "q", "limit": 5}
    assert halted["effect"] == "halt"
    decisions = [(e["tool"], e["effect"]) for e in service.events() if e["type"] == "decision"]
    assert decisions == [("read_file", "allow"), ("delete_file", "deny"), ("search", "modify"),
                         ("wipe", "halt"), ("read_file", "allow")]


def test_a_call_that_is_not_one_is_denied_with_the_reason(service: Service) -> None:
    """Arguments that are not an object are the guard's to judge: a deny, audited."""
    body = service.decide("read_file", ["not", "an", "object"])
    assert body["effect"] == "deny" and body["message"]


def test_an_ask_runs_once_after_approval(service: Service) -> None:
    call = {"tool": "deploy", "args": {"env": "prod"}, "session": "s1", "principal": "bob"}
    status, first, _ = service.request("POST", "/v1/decide", call)
    assert status == 200 and first["effect"] == "ask" and first["approval_request"]
    request_id = first["approval_request"]
    status, listed, _ = service.request("GET", "/v1/approvals?status=pending&session=s1",
                                        token="approver")
    assert status == 200 and [a["id"] for a in listed["approvals"]] == [request_id]
    conforms(listed, "Approvals")
    _, none, _ = service.request("GET", "/v1/approvals?session=other", token="approver")
    assert none["approvals"] == []
    status, approved, _ = service.request("POST", f"/v1/approvals/{request_id}/approve",
                                          {"comment": "ok for today"}, token="approver")
    assert status == 200 and approved["status"] == "approved"
    assert approved["resolved_by"] == "carol"
    _, second, _ = service.request("POST", "/v1/decide", call)
    _, third, _ = service.request("POST", "/v1/decide", call)
    assert second["effect"] == "allow"
    assert third["effect"] == "ask" and third["approval_request"] != request_id  # once
    status, again, _ = service.request("POST", f"/v1/approvals/{request_id}/approve", {},
                                       token="approver")
    assert status == 409 and again["error"]["code"].startswith("approval_")


def test_edit_and_approve_and_deny(service: Service) -> None:
    call = {"tool": "deploy", "args": {"env": "prod"}, "session": "s2"}
    _, asked, _ = service.request("POST", "/v1/decide", call)
    status, edited, _ = service.request(
        "POST", f"/v1/approvals/{asked['approval_request']}/approve",
        {"args": {"env": "staging"}}, token="approver")
    assert status == 200 and edited["edited_args"] == {"env": "staging"}
    _, ran, _ = service.request("POST", "/v1/decide", call)
    assert ran["effect"] == "modify" and ran["args"] == {"env": "staging"}
    _, asked, _ = service.request("POST", "/v1/decide", {**call, "session": "s3"})
    status, denied, _ = service.request(
        "POST", f"/v1/approvals/{asked['approval_request']}/deny", {"reason": "code freeze"},
        token="approver")
    assert status == 200 and denied["status"] == "denied"
    _, refused, _ = service.request("POST", "/v1/decide", {**call, "session": "s3"})
    assert refused["effect"] == "deny" and "code freeze" in refused["message"]


def test_roles(service: Service) -> None:
    _, asked, _ = service.request("POST", "/v1/decide", {
        "tool": "deploy", "args": {"env": "x"}, "principal": "alice"})
    request_id = asked["approval_request"]
    for method, path, token, body in [
            ("POST", f"/v1/approvals/{request_id}/approve", "agent", {}),  # never an agent
            ("GET", "/v1/approvals", "agent", None),
            ("POST", "/v1/decide", "approver", {"tool": "x"}),
            ("POST", "/v1/reload", "approver", None),
            ("GET", "/metrics", "agent", None)]:
        status, error, _ = service.request(method, path, body, token=token)
        assert status == 403 and error["error"]["code"] == "forbidden", (path, token)
        conforms(error, "Error")
    for token in (None, "wrong-token-0123456789"):
        status, error, headers = service.request("POST", "/v1/decide", {"tool": "x"},
                                                 token=token)
        assert status == 401 and headers["www-authenticate"].startswith("Bearer")
        assert error["error"]["code"] == "unauthorized"
    # The approver named alice may not approve a call made on alice's behalf.
    status, own, _ = service.request("POST", f"/v1/approvals/{request_id}/approve", {},
                                     token="alice")
    assert status == 403 and own["error"]["code"] == "self_approval"
    status, _, _ = service.request("POST", f"/v1/approvals/{request_id}/approve", {},
                                   token="admin")
    assert status == 200  # an admin may do what an approver may


def test_bad_requests_get_json_errors(tmp_path: Path) -> None:
    service = Service(tmp_path, "--max-body", "2000")
    try:
        cases = {
            "not json": service.request("POST", "/v1/decide", raw=b"{nope"),
            "not an object": service.request("POST", "/v1/decide", [1, 2]),
            "no tool": service.request("POST", "/v1/decide", {"args": {}}),
            "bad field": service.request("POST", "/v1/decide", {"tool": "x", "session": 3}),
            "too big": service.request("POST", "/v1/decide",
                                       {"tool": "x", "args": {"a": "b" * 5000}}),
            "unknown path": service.request("GET", "/v2/nothing"),
            "wrong method": service.request("GET", "/v1/decide"),
            "unknown approval": service.request("GET", "/v1/approvals/nope", token="approver"),
            "bad status": service.request("GET", "/v1/approvals?status=maybe",
                                          token="approver"),
            "outcome of a deny": service.request("POST", "/v1/outcome", {"decision": {
                **service.decide("delete_file", {"path": "a"})}, "result": "x"}),
            "outcome without decision": service.request("POST", "/v1/outcome", {"result": 1}),
            "outcome with odd budgets": service.request("POST", "/v1/outcome", {"decision": {
                **service.decide("read_file", {"path": "b"}), "budgets": [[None, None]]},
                "result": "x"}),
            "outcome with a budget short of a field": service.request(
                "POST", "/v1/outcome", {"decision": {
                    **service.decide("read_file", {"path": "c"}),
                    "budgets": [{"rule": "five-reads", "limit": 5, "used": 1}]},
                    "result": "x"}),
        }
        expected = {"not json": 400, "not an object": 400, "no tool": 400, "bad field": 400,
                    "too big": 413, "unknown path": 404, "wrong method": 405,
                    "unknown approval": 404, "bad status": 400, "outcome of a deny": 409,
                    "outcome without decision": 400, "outcome with odd budgets": 400,
                    "outcome with a budget short of a field": 400}
        for name, (status, body, headers) in cases.items():
            assert status == expected[name], (name, status, body)
            assert headers["content-type"] == "application/json", name
            conforms(body, "Error")
        assert service.decide("read_file", {"path": "still serving"})["effect"] == "allow"
    finally:
        assert service.stop() == 0
    assert not any("Traceback" in line for line in service.said)


def test_what_json_holds_beyond_the_usual_is_answered_not_failed(service: Service) -> None:
    """A lone surrogate (sent escaped), an int past 64 bits, NaN, a UTF-16 body: decided and
    answered (and recorded); values nested past what a JSON reader follows: a 400."""
    def raw(data: bytes, path: str = "/v1/decide") -> tuple[int, Any]:
        status, body, headers = service.request("POST", path, raw=data)
        assert headers["content-type"] == "application/json"
        return status, body

    status, lone = raw(b'{"tool": "read_file", "args": {"path": "a\\ud800"}, "session": "odd"}')
    assert status == 200 and lone["args"] == {"path": "a\ud800"}, lone
    status, big = raw(b'{"tool": "search", "args": {"n": %d}, "session": "odd"}' % 2**70)
    assert status == 200 and big["args"]["n"] == 2**70
    status, nan = raw(b'{"tool": "search", "args": {"x": NaN}, "session": "odd"}')
    assert status == 200 and nan["args"]["x"] == "nan"
    status, wide = raw('{"tool": "search", "args": {"q": "caf\u00e9"}}'.encode("utf-16"))
    assert status == 200 and wide["args"]["q"] == "caf\u00e9"
    status, outcome = raw(b'{"decision": %s, "result": "b\\udfff"}' % json.dumps(lone).encode(),
                          "/v1/outcome")
    assert status == 200 and outcome["result"] == "b\udfff", outcome
    deep = b'{"tool": "search", "args": {"a": ' + b"[" * 5000 + b"]" * 5000 + b"}}"
    status, error = raw(deep)
    assert status == 400 and error["error"]["code"] == "bad_json", error
    conforms(error, "Error")
    _, found, _ = service.request("GET", "/v1/audit/events?type=decision&session=odd",
                                  token="admin")
    assert [e["args"] for e in found["events"]] == [{"path": "a\ud800"}, {"n": 2**70},
                                                    {"x": "nan"}]


# -- outcomes, AuthZEN, operations ------------------------------------------------------------


def test_an_outcome_is_screened_and_recorded(service: Service) -> None:
    decision = service.decide("read_file", {"path": ".env"})
    status, screened, _ = service.request("POST", "/v1/outcome", {
        "decision": decision, "result": {"text": f"TOKEN={SECRET}", "lines": 1},
        "duration_ms": 12})
    assert status == 200
    conforms(screened, "Screened")
    assert screened["status"] == "output_modified" and screened["rule"] == "redact-secrets"
    assert SECRET not in json.dumps(screened["result"])
    assert screened["result"]["lines"] == 1
    outcome = [e for e in service.events() if e["type"] == "outcome"]
    assert [(e["tool"], e["status"], e["decision_id"]) for e in outcome] == [
        ("read_file", "output_modified", decision["decision_id"])]
    _, plain, _ = service.request("POST", "/v1/outcome", {"decision": decision,
                                                          "result": "fine"})
    assert plain == {"status": "ok", "result": "fine", "halt": False, "rule": None,
                     "source": None}
    for duration in ({}, "12", -1, True):
        status, error, _ = service.request("POST", "/v1/outcome", {
            "decision": decision, "result": "fine", "duration_ms": duration})
        assert status == 400 and "duration_ms" in error["error"]["message"], duration
    # The decision sent back needs only what the outcome reads (the DecisionIn schema) ...
    bare = {"decision_id": decision["decision_id"], "effect": "allow",
            "call": {"tool": "read_file"}, "args": None}
    status, screened, _ = service.request("POST", "/v1/outcome", {"decision": bare,
                                                                  "result": "fine"})
    assert status == 200 and screened["status"] == "ok"
    # ... and those fields with their types.
    for broken in ({**bare, "rule": 5}, {**bare, "call": {"tool": "t", "session": 1}},
                   {**bare, "reasons": ["x"]}, {**bare, "args": [1]}):
        status, error, _ = service.request("POST", "/v1/outcome", {"decision": broken})
        assert status == 400 and error["error"]["code"] == "bad_request", broken


def test_authzen_evaluations(service: Service) -> None:
    evaluation = {"subject": {"type": "user", "id": "bob", "properties": {"agent": "bot"}},
                  "action": {"name": "delete_file"},
                  "resource": {"type": "file", "id": "a", "properties": {"path": "a"}},
                  "context": {"session": "z1"}}
    status, denied, _ = service.request("POST", "/access/v1/evaluation", evaluation)
    assert status == 200 and denied["decision"] is False
    conforms(denied, "EvaluationResult")
    assert denied["context"]["rule"] == "no-delete" and "trash/" in \
        denied["context"]["reason_user"]["en"]
    status, batch, _ = service.request("POST", "/access/v1/evaluations", {
        **evaluation, "evaluations": [
            {"action": {"name": "read_file"}},
            {"action": {"name": "search"}, "resource": {"properties": {"query": "q",
                                                                       "limit": 99}}},
            {"action": {"name": "deploy"}}]})
    assert status == 200
    conforms(batch, "EvaluationResults")
    read, search, deploy = batch["evaluations"]
    assert read["decision"] is True and search["decision"] is True
    assert search["context"]["args"] == {"query": "q", "limit": 5}
    assert deploy["decision"] is False and deploy["context"]["approval_request"]
    # An item that is not an evaluation is refused alone, the others still answered.
    status, mixed, _ = service.request("POST", "/access/v1/evaluations", {
        "subject": {"id": "bob"}, "resource": {"properties": {}},
        "evaluations": [{"action": {"name": ""}}, {"action": {"name": "read_file"}}]})
    assert status == 200
    refused, answered = mixed["evaluations"]
    assert refused["decision"] is False and refused["context"]["error"]["code"] == "bad_request"
    assert answered["decision"] is True
    principals = {e["principal"] for e in service.events() if e["type"] == "decision"}
    assert principals == {"bob"}
    for path, body in (("/access/v1/evaluation", {**evaluation, "resource": {
                           "properties": [None]}}),
                       ("/access/v1/evaluations", {**evaluation, "evaluations": None})):
        status, error, _ = service.request("POST", path, body)
        assert status == 400 and error["error"]["code"] == "bad_request", path


REQUEST_RULES = """\
tools:
  send_email: {{roles: {{recipient: to}}}}
"""
STRANGERS = """\
  - id: strangers
    roles: {{recipient: {{in: [request]}}}}
    effect: deny
    message: Send only to people the user named.
"""


def test_the_users_request_decides_who_may_be_written_to(tmp_path: Path) -> None:
    """``request`` (or ``context.request``, or AuthZEN's ``context.request``) is the user's
    latest message: a recipient it names is allowed, a stranger is denied with the message."""
    policy = POLICY.replace("rules:\n", REQUEST_RULES + "rules:\n" + STRANGERS)
    service = Service(tmp_path, policy=policy)
    asked = "Please send the Q3 report to alice@example.com."
    try:
        for given in ({"request": asked}, {"context": {"request": asked}},
                      {"request": asked, "context": {"request": asked, "ticket": "T-1"}}):
            named = service.decide("send_email", {"to": "alice@example.com"}, **given)
            stranger = service.decide("send_email", {"to": "mallory@evil.example"}, **given)
            conforms(stranger, "Decision")
            assert named["effect"] == "allow", given
            assert (stranger["effect"], stranger["rule"]) == ("deny", "strangers"), given
            assert stranger["message"] == "Send only to people the user named."
            assert stranger["call"]["context"]["request"] == asked
        assert service.decide("send_email", {"to": "alice@example.com"})["effect"] == "deny"
        evaluation = {"subject": {"type": "user", "id": "bob"},
                      "action": {"name": "send_email"}, "context": {"request": asked}}
        for to, allowed in (("alice@example.com", True), ("mallory@evil.example", False)):
            status, answer, _ = service.request("POST", "/access/v1/evaluation", {
                **evaluation, "resource": {"type": "email", "properties": {"to": to}}})
            assert status == 200 and answer["decision"] is allowed, answer
            conforms(answer, "EvaluationResult")
        assert "Send only to people" in answer["context"]["reason_user"]["en"]
        for bad in ({"request": 5}, {"context": {"request": ["x"]}},
                    {"request": asked, "context": {"request": "something else"}}):
            status, error, _ = service.request("POST", "/v1/decide", {
                "tool": "send_email", "args": {"to": "alice@example.com"}, **bad})
            assert status == 400 and "request" in error["error"]["message"], bad
        status, error, _ = service.request("POST", "/access/v1/evaluation", {
            **evaluation, "resource": {"properties": {"to": "a@b.example"}},
            "context": {"request": 5}})
        assert status == 400 and "request" in error["error"]["message"]
    finally:
        assert service.stop() == 0
    for schema in ("ToolCall", "Evaluation"):
        assert "request" in DOC["components"]["schemas"][schema]["properties"]["context"][
            "properties"]
    assert DOC["components"]["schemas"]["ToolCall"]["properties"]["request"]["type"] == [
        "string", "null"]


def test_health_readiness_metrics_and_the_openapi_document(service: Service) -> None:
    service.decide("read_file", {"path": "a"})
    service.decide("delete_file", {"path": "a"})
    service.decide("deploy", {"env": "p"})
    assert service.request("GET", "/healthz", token=None)[:2] == (200, {"status": "ok"})
    status, ready, _ = service.request("GET", "/readyz", token=None)
    assert status == 200 and ready["status"] == "ready"
    status, metrics, _ = service.request("GET", "/metrics", token="admin")
    assert status == 200
    assert 'callwarden_decisions_total{effect="deny",rule="no-delete"} 1' in metrics
    assert 'callwarden_decisions_total{effect="allow",rule="default"} 1' in metrics
    assert "callwarden_decision_seconds_count 3" in metrics
    assert "callwarden_approvals_pending 1" in metrics
    status, served, _ = service.request("GET", "/openapi.json", token=None)
    assert status == 200 and served == DOC


def test_every_route_is_in_the_openapi_document() -> None:
    from callwarden.serve import Service as App
    from callwarden.serve import Tokens, create_app
    from callwarden.serve._app import MAX_BODY

    documented = {(path, method.upper()) for path, item in DOC["paths"].items()
                  for method in item}
    service = App.__new__(App)  # the routes only: no policy loaded, nothing served
    service.tokens = Tokens.parse(TOKEN_FILE)
    service.max_body = MAX_BODY
    routes = {(r.path, m) for r in create_app(service).app.routes  # type: ignore[attr-defined]
              for m in r.methods - {"HEAD"}}  # type: ignore[attr-defined]
    assert routes == documented


def test_reload_keeps_the_old_policy_when_the_new_one_is_broken(service: Service) -> None:
    assert service.decide("search", {"query": "q", "limit": 50})["effect"] == "modify"
    text = service.policy.read_text()
    service.policy.write_text(text + "  - {id: no-search, match: {tool: search}, "
                                      "effect: deny}\n")
    status, reloaded, _ = service.request("POST", "/v1/reload", token="admin")
    assert status == 200 and reloaded["reloaded"] is True
    assert service.decide("search", {"query": "q", "limit": 50})["effect"] == "deny"
    service.policy.write_text(text + "  - {id: broken, effect: nope}\n")
    status, refused, _ = service.request("POST", "/v1/reload", token="admin")
    assert status == 422 and refused["error"]["code"] == "policy_error"
    assert any("nope" in p for p in refused["error"]["problems"])
    assert service.decide("search", {"query": "q", "limit": 50})["effect"] == "deny"  # the old one stands
    # SIGHUP reloads too.
    service.policy.write_text(text)
    service.process.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + TIMEOUT
    while service.decide("search", {"query": "q", "limit": 50})["effect"] != "modify":
        assert time.monotonic() < deadline, "SIGHUP did not reload the policy"
        time.sleep(0.05)
    assert any("policy reloaded" in line for line in service.said)


def test_two_service_processes_share_one_budget(tmp_path: Path) -> None:
    """Two processes on one SQLite store: a budget of 5 reads per session holds exactly,
    whichever process the 24 concurrent calls reach."""
    one, two = Service(tmp_path), Service(tmp_path)
    try:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            effects = list(pool.map(
                lambda i: (one if i % 2 else two).decide("read_file", {"path": f"f{i}"},
                                                         session="shared")["effect"],
                range(24)))
    finally:
        assert one.stop() == 0 and two.stop() == 0
    assert effects.count("allow") == 5 and effects.count("deny") == 19


def test_usage_errors(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY.format(state=tmp_path / "s.db", audit=tmp_path / "a.jsonl"))
    env = {k: v for k, v in os.environ.items() if k != "CALLWARDEN_SERVE_TOKENS"}

    def run(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(CLI), "serve", "--policy", str(policy), *args],
                              capture_output=True, text=True, timeout=TIMEOUT,
                              env={**env, **extra}, check=False)

    no_tokens = run("--listen", "127.0.0.1:0")
    assert no_tokens.returncode == 2 and "--tokens" in no_tokens.stderr
    bad = tmp_path / "tokens"
    bad.write_text("agent bot\n")
    assert "tokens:1: write ROLE NAME TOKEN" in run("--tokens", str(bad)).stderr
    bad.write_text("root bot abcdefghijklmnopqrstuvwxyz\n")
    assert "role 'root'" in run("--tokens", str(bad)).stderr
    short = run("--listen", "127.0.0.1:0", CALLWARDEN_SERVE_TOKENS="agent bot short")
    assert short.returncode == 2 and "shorter than 16" in short.stderr
    listen = run("--listen", "nowhere", CALLWARDEN_SERVE_TOKENS=TOKEN_FILE)
    assert listen.returncode == 2 and "HOST:PORT" in listen.stderr
    policy.write_text("version: 1\nrules: [{id: x, effect: nope}]\n")
    broken = run("--listen", "127.0.0.1:0", CALLWARDEN_SERVE_TOKENS=TOKEN_FILE)
    assert broken.returncode == 2 and "nope" in broken.stderr


# -- the audit trail ----------------------------------------------------------------------------


def test_audit_query(service: Service) -> None:
    service.decide("read_file", {"path": "a"}, session="q1")
    service.decide("delete_file", {"path": "a"}, session="q1")
    service.decide("delete_file", {"path": "b"}, session="q2")
    status, found, _ = service.request("GET", "/v1/audit/events?type=decision&effect=deny",
                                       token="admin")
    assert status == 200
    conforms(found, "Events")
    assert [(e["session"], e["args"]["path"]) for e in found["events"]] == [("q1", "a"),
                                                                            ("q2", "b")]
    _, last, _ = service.request("GET", "/v1/audit/events?type=decision&limit=1",
                                 token="admin")
    assert [e["session"] for e in last["events"]] == ["q2"]
    _, by_rule, _ = service.request("GET", "/v1/audit/events?rule=no-delete&session=q2",
                                    token="admin")
    assert len(by_rule["events"]) == 1
    _, future, _ = service.request("GET", "/v1/audit/events?since=4102444800", token="admin")
    assert future["events"] == []
    _, beyond, _ = service.request("GET", "/v1/audit/events?since=1" + "0" * 30,
                                   token="admin")  # past the calendar's end: nothing, no error
    assert beyond["events"] == []
    _, window, _ = service.request(
        "GET", "/v1/audit/events?type=decision&since=2000-01-01T00:00:00Z&until=4102444800",
        token="admin")
    assert len(window["events"]) == 3
    for bad in ("limit=0", "limit=x", "since=yesterday", "until=-2.3e%2B16", "since=1e5"):
        status, error, _ = service.request("GET", f"/v1/audit/events?{bad}", token="admin")
        assert status == 400 and error["error"]["code"] == "bad_request", bad
    assert service.request("GET", "/v1/audit/events", token="approver")[0] == 403


def test_the_audit_stream_carries_new_decisions(service: Service) -> None:
    service.decide("read_file", {"path": "before"})  # written before: not streamed
    parts = urlsplit(service.url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=TIMEOUT)
    try:
        connection.request("GET", "/v1/audit/stream?type=decision&session=live", headers={
            "Authorization": f"Bearer {TOKENS['admin']}"})
        response = connection.getresponse()
        assert response.status == 200
        assert response.getheader("content-type", "").startswith("text/event-stream")
        assert response.readline().startswith(b": callwarden")
        service.decide("read_file", {"path": "elsewhere"}, session="other")
        service.decide("delete_file", {"path": "x"}, session="live")
        lines = []
        while not lines or not lines[-1].startswith(b"data: "):
            line = response.readline()
            if line.strip() and not line.startswith(b":"):
                lines.append(line)
    finally:
        connection.close()
    assert lines[0] == b"event: decision\n"
    event = json.loads(lines[1][len(b"data: "):])
    assert (event["tool"], event["effect"], event["session"]) == ("delete_file", "deny", "live")


def test_replay_a_candidate_policy_over_the_log(service: Service) -> None:
    service.decide("read_file", {"path": "a"})
    service.decide("search", {"query": "q", "limit": 50})
    candidate = service.policy.read_text().replace(
        "  - id: cap-search", "  - {id: no-reads, match: {tool: read_file}, effect: deny}\n"
                              "  - id: cap-search")
    status, report, _ = service.request("POST", "/v1/replay", {"policy": candidate},
                                        token="admin")
    assert status == 200, report
    conforms(report, "ReplayReport")
    assert report["decisions"] == 2 and report["changed"] == 1
    assert report["transitions"] == {"allow->deny": 1}
    assert report["changes"][0]["new_rule"] == "no-reads"
    # The replay decided on a store of its own: the live budget is untouched.
    reads = [service.decide("read_file", {"path": f"r{i}"}, session="s")["effect"]
             for i in range(5)]
    assert reads == ["allow"] * 5
    status, broken, _ = service.request("POST", "/v1/replay",
                                        {"policy": "version: 1\nrules: [{id: x, effect: no}]"},
                                        token="admin")
    assert status == 422 and broken["error"]["problems"]
    assert service.request("POST", "/v1/replay", {"policy": 3}, token="admin")[0] == 400
    assert service.request("POST", "/v1/replay", {"policy": candidate}, token="agent")[0] == 403


def test_a_stop_right_after_start_is_clean(tmp_path: Path) -> None:
    """SIGTERM as soon as the address is said (a service manager stopping it at once): a
    clean exit 0, not death by the signal."""
    for _ in range(3):
        service = Service(tmp_path)
        assert service.stop() == 0


def test_workers_share_the_store_reload_together_and_stop_together(tmp_path: Path) -> None:
    service = Service(tmp_path, "--workers", "2")
    try:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            effects = list(pool.map(
                lambda i: service.decide("read_file", {"path": f"f{i}"},
                                         session="w")["effect"], range(24)))
        assert effects.count("allow") == 5 and effects.count("deny") == 19
        text = service.policy.read_text()
        service.policy.write_text(text + "  - {id: no-search, match: {tool: search}, "
                                          "effect: deny}\n")
        service.process.send_signal(signal.SIGHUP)  # to every worker
        deadline = time.monotonic() + TIMEOUT
        while True:  # every worker answers with the new policy: 20 calls in a row
            effects = [service.decide("search", {"query": "q"})["effect"] for _ in range(20)]
            if set(effects) == {"deny"}:
                break
            assert time.monotonic() < deadline, f"a worker kept the old policy: {service.said}"
            time.sleep(0.1)
        service.policy.write_text(text)  # POST /v1/reload at one worker reloads them all
        status, reloaded, _ = service.request("POST", "/v1/reload", token="admin")
        assert status == 200 and reloaded["workers"] is True
        deadline = time.monotonic() + TIMEOUT
        while True:
            effects = [service.decide("search", {"query": "q"})["effect"] for _ in range(20)]
            if set(effects) == {"allow"}:
                break
            assert time.monotonic() < deadline, f"a worker kept the old policy: {service.said}"
            time.sleep(0.1)
        children = [int(p) for p in Path(f"/proc/{service.process.pid}/task/"
                                         f"{service.process.pid}/children").read_text().split()]
        assert len(children) == 2
    finally:
        code = service.stop()
    assert code == 0 and any("2 workers" in line for line in service.said)
    assert all(not Path(f"/proc/{child}").exists() or
               "zombie" in Path(f"/proc/{child}/status").read_text().lower()
               for child in children)


def test_a_quorum_of_approvers_through_the_service(tmp_path: Path) -> None:
    """approvals: {required: 2}: carol's approval leaves the request pending (the answer says
    who approved), the call still asks; alice's approves it, and the call is allowed once."""
    policy = POLICY.replace("rules:", "approvals: {{required: 2}}\nrules:", 1)
    service = Service(tmp_path, policy=policy)
    try:
        call = {"tool": "deploy", "args": {"env": "prod"}, "session": "q1"}
        _, first, _ = service.request("POST", "/v1/decide", call)
        request_id = first["approval_request"]
        status, once, _ = service.request("POST", f"/v1/approvals/{request_id}/approve", {},
                                          token="approver")
        assert status == 200 and (once["status"], once["approved_by"], once["required"]) == (
            "pending", ["carol"], 2)
        conforms(once, "Approval")
        status, again, _ = service.request("POST", f"/v1/approvals/{request_id}/approve", {},
                                           token="approver")
        assert status == 403 and again["error"]["code"] == "already_answered"
        assert service.request("POST", "/v1/decide", call)[1]["effect"] == "ask"
        _, done, _ = service.request("POST", f"/v1/approvals/{request_id}/approve", {},
                                     token="alice")
        assert (done["status"], done["approved_by"]) == ("approved", ["carol", "alice"])
        assert service.request("POST", "/v1/decide", call)[1]["effect"] == "allow"
    finally:
        assert service.stop() == 0


def test_the_service_reminds_approvers_of_requests_left_waiting(tmp_path: Path) -> None:
    """approvals: {remind: ...}: the running service calls the reminder for a request left
    waiting (every CALLWARDEN_REMIND_EVERY seconds; a minute by default), once."""
    reminders = tmp_path / "reminded.txt"
    policy = POLICY.replace(
        "rules:", "approvals: {{remind: {{after: 1ms, call: '_reminders:remember_request'}}}}"
        "\nrules:", 1)
    support = Path(__file__).parents[1] / "approvals"
    service = Service(tmp_path, policy=policy, env={
        "CALLWARDEN_REMIND_EVERY": "0.2", "CALLWARDEN_TEST_REMINDERS": str(reminders),
        "PYTHONPATH": os.pathsep.join([str(support), os.environ.get("PYTHONPATH", "")])})
    try:
        _, asked, _ = service.request("POST", "/v1/decide", {"tool": "deploy",
                                                             "args": {"env": "prod"}})
        request_id = asked["approval_request"]
        deadline = time.monotonic() + 30
        while not (reminders.exists() and reminders.read_text().strip()):
            assert time.monotonic() < deadline, "no reminder within 30 s"
            time.sleep(0.1)
        time.sleep(0.6)  # three more rounds: it is reminded once (no every:)
        assert reminders.read_text().split() == [request_id]
    finally:
        assert service.stop() == 0


def test_an_outcome_lets_go_of_the_calls_slot_of_a_concurrent_limit(tmp_path: Path) -> None:
    """limit: {concurrent: 1}: a second export waits for the first, whose outcome (sent back
    with the decision /v1/decide answered) frees its slot; an error outcome frees it too."""
    policy = POLICY.replace("rules:\n", "rules:\n  - id: one-export-at-a-time\n"
                            "    match: {{tool: export}}\n"
                            "    limit: {{concurrent: 1, per: session}}\n", 1)
    service = Service(tmp_path, policy=policy)
    try:
        first = service.decide("export", {"table": "a"}, session="e1")
        waiting = service.decide("export", {"table": "b"}, session="e1")
        assert first["effect"] == "allow" and first["budgets"][0]["remaining"] == 0
        assert (waiting["effect"], waiting["rule"]) == ("deny", "one-export-at-a-time")
        assert "calls in flight" in waiting["message"] and waiting["budgets"][0]["reset_at"]
        status, _, _ = service.request("POST", "/v1/outcome", {"decision": first,
                                                               "result": "exported"})
        assert status == 200
        second = service.decide("export", {"table": "b"}, session="e1")
        assert second["effect"] == "allow"
        status, _, _ = service.request("POST", "/v1/outcome", {
            "decision": second, "result": "disk full", "failed": True})
        assert status == 200 and service.decide("export", {}, session="e1")["effect"] == "allow"
    finally:
        assert service.stop() == 0


async def test_a_replaced_policy_is_let_go_and_the_loaded_one_kept_out_of_collection(
        tmp_path: Path, monkeypatch: Any) -> None:
    """The service keeps what it loaded out of the garbage collector's full passes (each was
    a ~30 ms pause under load), and a policy replaced by a reload is still let go once the
    decisions that had it are done."""
    import asyncio
    import gc
    import weakref

    from callwarden.serve import Service as App
    from callwarden.serve import Tokens, _app, create_app

    monkeypatch.setattr(_app, "_RETIRE", 0.05)
    policy = tmp_path / "policy.yaml"
    policy.write_text("version: 1\nrules: [{id: d, match: {tool: x}, effect: deny}]\n")
    mounted = App(policy, Tokens.parse(TOKEN_FILE))
    among_others = create_app(mounted).app  # type: ignore[attr-defined]
    async with among_others.router.lifespan_context(among_others):
        assert gc.get_freeze_count() == 0  # mounted among other apps: its host's collector
    service = App(policy, Tokens.parse(TOKEN_FILE))
    app = create_app(service, own_process=True).app  # type: ignore[attr-defined]
    try:
        async with app.router.lifespan_context(app):
            assert gc.get_freeze_count() > 0
            old = weakref.ref(service.guard)
            policy.write_text("version: 1\nrules: []\n")
            assert service.reload() == (True, [])
            deadline = time.monotonic() + TIMEOUT
            while old() is not None:
                assert time.monotonic() < deadline, "the replaced policy was never let go"
                await asyncio.sleep(0.05)
            assert gc.get_freeze_count() > 0  # the policy now loaded, kept out again
            assert service.guard.check("x", {}).allowed
    finally:
        gc.unfreeze()  # the test process as it was
