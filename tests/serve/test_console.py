"""The console at ``/console``, driven for real in headless Chromium (Debian's ``chromium``,
by Playwright with ``executable_path``): log in, approve an agent's pending call and see the
agent's next decide allowed once, deny, edit and approve, approve and remember (a standing
grant) and revoke it on the Grants page, the live stream, audit search, replay, roles; a
screenshot of each page."""

from __future__ import annotations

import json
import shutil
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright
from test_serve import SECRET, TOKENS, Service, conforms

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
WAIT = 20_000  # ms: a loaded machine


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is needed (apt-get install chromium; scripts/test.sh "
                    "installs it)")
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(WAIT)
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda e: errors.append(str(e)))
    opened.on("dialog", lambda d: errors.append(f"dialog: {d.message}"))
    yield opened
    context.close()
    assert errors == []  # no script error, and nothing ever ran an alert()


def log_in(page: Page, service: Service, token: str) -> None:
    page.goto(f"{service.url}/console")
    page.fill("#token", TOKENS[token])
    page.click("#login-button")
    if token != "agent":  # logged in, and sent on to the first page, before the test goes on
        expect(page.locator("#logout")).to_be_visible()


def screenshot(page: Page, name: str, tmp_path: Path) -> bytes:
    """The page as PNG, checked to be a real picture of the whole viewport with something on
    it (not one flat colour); kept beside the test's files."""
    data = page.screenshot(full_page=True)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert width == 1280 and height >= 900
    chunks, at = [], 8
    while at < len(data):
        size, kind = struct.unpack(">I4s", data[at:at + 8])
        if kind == b"IDAT":
            chunks.append(data[at + 8:at + 8 + size])
        at += size + 12
    pixels = zlib.decompress(b"".join(chunks))
    assert len(set(pixels)) > 20, f"the {name} page looks blank"
    (tmp_path / f"{name}.png").write_bytes(data)
    return data


# -- approvals --------------------------------------------------------------------------------


def test_approve_a_pending_call_in_the_console(service: Service, page: Page,
                                               tmp_path: Path) -> None:
    service.decide("read_file", {"path": "notes.txt"}, session="s1")  # the session's history
    call = {"tool": "deploy", "args": {"env": "prod", "token": SECRET}, "session": "s1",
            "principal": "bob"}
    asked = service.decide(**call)
    assert asked["effect"] == "ask"
    request_id = asked["approval_request"]

    log_in(page, service, "approver")
    expect(page.locator("#who")).to_have_text("carol (approver)")
    row = page.locator(f"tr.request[data-id='{request_id}']")
    expect(row).to_contain_text("deploy")
    expect(row).to_contain_text("Deploys need a person's go-ahead.")
    screenshot(page, "approvals", tmp_path)

    row.click()
    expect(page.locator("#request-tool")).to_have_text("deploy")
    expect(page.locator("#request-rule")).to_have_text("deploy-asks")
    expect(page.locator("#request-message")).to_have_text("Deploys need a person's go-ahead.")
    expect(page.locator("#request-source")).to_contain_text("policy.yaml:")
    expect(page.locator("#source-line")).to_contain_text("id: deploy-asks")
    shown = page.locator("#request-args").inner_text()
    assert SECRET not in shown and "[REDACTED" in shown and '"env": "prod"' in shown
    expect(page.locator("#history")).to_contain_text("read_file")
    screenshot(page, "request", tmp_path)

    page.fill("#comment", "ok for today")
    page.click("#approve")
    expect(page.locator("#result")).to_have_text("approved by carol")
    expect(page.locator("#approve")).to_be_disabled()

    assert service.decide(**call)["effect"] == "allow"  # the agent's next decide: once
    again = service.decide(**call)
    assert again["effect"] == "ask" and again["approval_request"] != request_id
    _, record, _ = service.request("GET", f"/v1/approvals/{request_id}", token="admin")
    assert record["status"] == "consumed" and record["comment"] == "ok for today"


def test_a_request_in_doubt_says_the_call_may_already_have_run(service: Service,
                                                               page: Page) -> None:
    call = {"tool": "deploy", "args": {"env": "prod"}, "session": "s9", "call_id": "d1"}
    first = service.decide(**call)["approval_request"]
    status, _, _ = service.request("POST", f"/v1/approvals/{first}/approve", {},
                                   token="approver")
    assert status == 200
    assert service.decide(**call)["effect"] == "allow"  # runs ... and no outcome comes back
    asked = service.decide(**call)  # the agent, restarted, sends the same call again
    assert asked["effect"] == "ask" and asked["approval_request"] != first
    log_in(page, service, "approver")
    row = page.locator(f"tr.request[data-id='{asked['approval_request']}']")
    expect(row).to_contain_text("IN DOUBT")
    row.click()
    expect(page.locator("#request-in-doubt")).to_contain_text("may already have run")
    page.click("#deny")
    expect(page.locator("#result")).to_have_text("denied by carol")
    assert service.decide(**call)["effect"] == "deny"


def test_deny_with_a_reason(service: Service, page: Page) -> None:
    call = {"tool": "deploy", "args": {"env": "prod"}, "session": "s2"}
    request_id = service.decide(**call)["approval_request"]
    log_in(page, service, "approver")
    page.goto(f"{service.url}/console#/approvals/{request_id}")
    page.fill("#comment", "code freeze")
    page.click("#deny")
    expect(page.locator("#result")).to_have_text("denied by carol")
    refused = service.decide(**call)
    assert refused["effect"] == "deny" and "code freeze" in refused["message"]


def test_a_second_hash_change_to_the_page_on_screen_keeps_what_was_typed(
        service: Service, page: Page) -> None:
    """Logging in sends the page to #/approvals; when a link is followed meanwhile, both hash
    changes reach the request page and it must not be drawn again over the typed reason."""
    call = {"tool": "deploy", "args": {"env": "prod"}, "session": "s2b"}
    request_id = service.decide(**call)["approval_request"]
    log_in(page, service, "approver")
    page.goto(f"{service.url}/console#/approvals/{request_id}")
    page.fill("#comment", "code freeze")
    page.evaluate("""id => { location.hash = '#/approvals'; location.hash = '#/approvals/' + id; }""",
                  request_id)
    page.evaluate("() => new Promise(done => setTimeout(done, 500))")  # any redraw lands
    expect(page.locator("#comment")).to_have_value("code freeze")
    page.click("#deny")
    expect(page.locator("#result")).to_have_text("denied by carol")
    assert "code freeze" in service.decide(**call)["message"]


def test_edit_and_approve_keeps_the_secrets_left_as_shown(service: Service, page: Page) -> None:
    call = {"tool": "deploy", "args": {"env": "prod", "token": SECRET}, "session": "s3"}
    request_id = service.decide(**call)["approval_request"]
    log_in(page, service, "approver")
    page.goto(f"{service.url}/console#/approvals/{request_id}")
    page.click("#edit summary")
    edited = json.loads(page.input_value("#edit-args"))
    assert edited["token"].startswith("[REDACTED")
    page.fill("#edit-args", json.dumps({**edited, "env": "staging"}))
    page.click("#edit-approve")
    expect(page.locator("#result")).to_have_text("approved by carol")
    ran = service.decide(**call)
    # The edited call runs with the person's change and the real secret, not its marker.
    assert ran["effect"] == "modify" and ran["args"] == {"env": "staging", "token": SECRET}


def test_edit_that_is_not_json_is_refused_in_the_page(service: Service, page: Page) -> None:
    request_id = service.decide("deploy", {"env": "prod"}, session="s4")["approval_request"]
    log_in(page, service, "approver")
    page.goto(f"{service.url}/console#/approvals/{request_id}")
    page.click("#edit summary")
    page.fill("#edit-args", "{not json")
    page.click("#edit-approve")
    expect(page.locator("#result")).to_contain_text("not JSON")
    _, record, _ = service.request("GET", f"/v1/approvals/{request_id}", token="approver")
    assert record["status"] == "pending"


def test_markup_in_a_call_is_shown_as_text(service: Service, page: Page) -> None:
    hostile = "<img src=x onerror=alert(1)><script>alert(2)</script>"
    request_id = service.decide("deploy", {"env": hostile}, session=hostile,
                                agent="<b>bot</b>")["approval_request"]
    log_in(page, service, "approver")
    expect(page.locator(f"tr.request[data-id='{request_id}']")).to_contain_text("<b>bot</b>")
    page.goto(f"{service.url}/console#/approvals/{request_id}")
    expect(page.locator("#request-args")).to_contain_text("<img src=x onerror=alert(1)>")
    assert page.locator("main img, main script, main b").count() == 0
    # (the page fixture asserts no dialog opened and no script error happened)


# -- standing grants --------------------------------------------------------------------------


def test_approve_and_remember_then_revoke_in_the_console(service: Service, page: Page,
                                                         tmp_path: Path) -> None:
    """Approve with "remember for this session, this exact call": the agent's same call runs
    on the approval, then on the grant, another call is still asked; the Grants page shows
    the grant (its secret redacted) and revokes it, and the same call is asked again."""
    call = {"tool": "deploy", "args": {"env": "prod", "token": SECRET}, "session": "gs1"}
    request_id = service.decide(**call)["approval_request"]
    log_in(page, service, "approver")
    page.goto(f"{service.url}/console#/approvals/{request_id}")
    expect(page.locator("#remember-scope")).to_have_value("session")  # the narrowest
    expect(page.locator("#remember-exact")).to_be_checked()
    page.select_option("#remember-ttl", "3600")
    page.click("#remember-approve")
    expect(page.locator("#result")).to_contain_text(
        "approved by carol; remembered for session gs1, this exact call, until ")
    expect(page.locator("#approve")).to_be_disabled()
    expect(page.locator("#remember-approve")).to_be_disabled()

    def effect(**changed: object) -> str:
        body = service.decide(**{**call, **changed})
        return f"{body['effect']} ({body['reasons'][0]['code']})"

    assert effect() == "allow (approved)"  # the approval runs its own call, once
    assert effect() == "allow (approval_remembered)"  # then the grant covers it
    assert effect(args={"env": "staging"}).startswith("ask")  # another call is still asked

    _, listed, _ = service.request("GET", "/v1/grants", token="approver")
    [grant] = listed["grants"]
    page.click("#nav a[data-page=grants]")
    row = page.locator(f"tr.grant[data-id='{grant['id']}']")
    expect(row.locator(".grant-scope")).to_have_text("session gs1")
    expect(row.locator(".grant-by")).to_have_text("carol")
    expect(row.locator(".grant-status")).to_have_text("active")
    shown = row.locator(".grant-args").inner_text()
    assert SECRET not in shown and "[REDACTED" in shown and '"env": "prod"' in shown
    expect(row).to_contain_text("this exact call")

    row.locator("button.revoke").click()  # asks first, in the row
    row.locator("button.keep").click()
    expect(row.locator(".grant-status")).to_have_text("active")
    assert effect() == "allow (approval_remembered)"  # kept
    row.locator("button.revoke").click()
    row.locator("button.confirm-revoke").click()
    expect(row.locator(".grant-status")).to_have_text("revoked by carol")
    expect(page.locator("#notice")).to_contain_text(f"Revoked grant {grant['id']}")
    expect(row.locator("button")).to_have_count(0)
    assert effect().startswith("ask")  # asked again
    page.click("#grant-refresh")
    expect(page.locator("#grants")).to_contain_text("No grant here.")  # active ones only
    page.select_option("#grant-status", "revoked")
    expect(page.locator(f"tr.grant[data-id='{grant['id']}']")).to_be_visible()
    revoked = [e for e in service.events() if e.get("action") == "grant_revoked"]
    assert [(e["grant_id"], e["by"]) for e in revoked] == [(grant["id"], "carol")]


def test_remember_in_the_console_offers_only_what_the_call_can_have(service: Service,
                                                                    page: Page) -> None:
    """A call made in no session by no named agent can only be remembered for anyone; a
    grant the service refuses is said in the page and nothing is approved."""
    request_id = service.decide("deploy", {"env": "qa"}, agent=None)["approval_request"]
    log_in(page, service, "approver")
    page.goto(f"{service.url}/console#/approvals/{request_id}")
    expect(page.locator("#remember-scope option[value=session]")).to_be_disabled()
    expect(page.locator("#remember-scope")).to_have_value("agent")  # the token's agent, bot
    page.uncheck("#remember-exact")
    page.select_option("#remember-scope", "tool")
    page.select_option("#remember-ttl", "900")
    page.click("#remember-approve")
    expect(page.locator("#result")).to_contain_text("remembered for anyone, until ")
    _, listed, _ = service.request("GET", "/v1/grants", token="approver")
    [grant] = listed["grants"]
    assert (grant["scope"], grant["exact"], grant["expires"] - grant["created"]) == (
        "tool", False, 900)


def test_the_grants_page(service: Service, page: Page, tmp_path: Path) -> None:
    """A screenshot of the Grants page with a grant of each kind: one exact call in a
    session (its secret redacted), a tool for an agent, a tool for anyone, one revoked."""
    made = []
    for call, remember in (
            ({"args": {"env": "prod", "token": SECRET}, "session": "gp1"},
             {"scope": "session", "ttl": 3600, "exact": True}),
            ({"args": {"env": "qa"}, "session": "gp2", "agent": "release-bot"},
             {"scope": "agent", "ttl": 8 * 3600}),
            ({"args": {"env": "test"}, "session": "gp4"}, {"scope": "session"}),
            ({"args": {"env": "dev"}, "session": "gp3"}, {"scope": "tool", "ttl": 900})):
        request_id = service.decide("deploy", **call)["approval_request"]
        status, approved, _ = service.request("POST", f"/v1/approvals/{request_id}/approve",
                                              {"remember": remember}, token="approver")
        assert status == 200, approved
        made.append(approved["grant"]["id"])
    status, _, _ = service.request("POST", f"/v1/grants/{made[2]}/revoke", token="alice")
    assert status == 200
    log_in(page, service, "approver")
    page.goto(f"{service.url}/console#/grants")
    expect(page.locator("#grants tr.grant")).to_have_count(3)
    expect(page.locator(f"tr.grant[data-id='{made[1]}'] .grant-scope")).to_have_text(
        "agent release-bot")
    expect(page.locator(f"tr.grant[data-id='{made[3]}'] .grant-scope")).to_have_text("anyone")
    expect(page.locator(f"tr.grant[data-id='{made[3]}']")).to_contain_text("any arguments")
    page.select_option("#grant-status", "any")
    expect(page.locator("#grants tr.grant")).to_have_count(4)
    expect(page.locator(f"tr.grant[data-id='{made[2]}'] .grant-status")).to_have_text(
        "revoked by alice")
    assert SECRET not in page.locator("main").inner_text()
    page.fill("#grant-session", "gp1")
    page.dispatch_event("#grant-session", "change")
    expect(page.locator("#grants tr.grant")).to_have_count(1)
    page.fill("#grant-session", "")
    page.dispatch_event("#grant-session", "change")
    expect(page.locator("#grants tr.grant")).to_have_count(4)
    screenshot(page, "grants", tmp_path)


# -- admin pages ------------------------------------------------------------------------------


def test_live_decision_stream(service: Service, page: Page, tmp_path: Path) -> None:
    log_in(page, service, "admin")
    page.goto(f"{service.url}/console#/stream")
    expect(page.locator("#stream-state")).to_contain_text("Following")
    service.decide("delete_file", {"path": "a.txt"}, session="live")
    service.decide("read_file", {"path": "b.txt"}, session="live")
    rows = page.locator("#stream tr.event")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("read_file")  # newest first
    expect(rows.nth(1)).to_contain_text("delete_file")
    expect(rows.nth(1)).to_contain_text("no-delete")
    screenshot(page, "stream", tmp_path)
    # A filter follows the stream again with it, and keeps it.
    page.fill("#stream-tool", "read_file")
    page.click("#stream-apply")
    expect(page.locator("#stream-state")).to_contain_text("Following")
    expect(page.locator("#stream-tool")).to_have_value("read_file")
    service.decide("delete_file", {"path": "c.txt"}, session="again")
    service.decide("read_file", {"path": "d.txt"}, session="again")
    expect(rows.first).to_contain_text("again")
    expect(rows).to_have_count(1)  # the delete_file of the same moment is not shown


def test_audit_search(service: Service, page: Page, tmp_path: Path) -> None:
    service.decide("delete_file", {"path": "a.txt"}, session="x1")
    service.decide("read_file", {"path": "b.txt"}, session="x1")
    service.decide("delete_file", {"path": "c.txt"}, session="x2")
    log_in(page, service, "admin")
    page.goto(f"{service.url}/console#/audit")
    expect(page.locator("#audit-results tr.event")).to_have_count(3)
    page.fill("#audit-tool", "delete_file")
    page.select_option("#audit-effect", "deny")
    page.click("#audit-search")
    expect(page.locator("#audit-count")).to_have_text("2 events, newest first")
    rows = page.locator("#audit-results tr.event")
    expect(rows.nth(0)).to_contain_text("c.txt")
    expect(rows.nth(1)).to_contain_text("a.txt")
    page.fill("#audit-session", "x1")
    page.click("#audit-search")
    expect(page.locator("#audit-count")).to_have_text("1 event, newest first")
    page.fill("#audit-since", "not a time")
    page.click("#audit-search")
    expect(page.locator("#audit-count")).to_contain_text("ISO 8601")
    screenshot(page, "audit", tmp_path)


STRICT = """\
version: 1
default: allow
rules:
  - id: no-reads
    match: {tool: read_file}
    effect: deny
"""


def test_replay_a_picked_and_an_uploaded_policy(service: Service, page: Page,
                                                tmp_path: Path) -> None:
    service.decide("read_file", {"path": "a.txt"})
    service.decide("search", {"query": "q"})
    (service.root / "strict.yaml").write_text(STRICT)
    log_in(page, service, "admin")
    page.goto(f"{service.url}/console#/replay")
    expect(page.locator("#policy-pick option")).to_have_count(2)
    expect(page.locator("#policy-text")).to_have_value(service.policy.read_text())
    page.click("#replay")  # the served policy over its own log: nothing changes
    expect(page.locator("#replay-summary")).to_contain_text("2 decisions")
    expect(page.locator("#replay-summary")).to_contain_text("0 would change")

    page.select_option("#policy-pick", "strict.yaml")
    expect(page.locator("#policy-text")).to_have_value(STRICT)
    page.click("#replay")
    expect(page.locator("#replay-summary")).to_contain_text("1 would change")
    change = page.locator("#replay-changes tbody tr")
    expect(change).to_have_count(1)
    expect(change).to_contain_text("read_file")
    expect(change).to_contain_text("no-reads")
    expect(page.locator("#replay-transitions")).to_contain_text("allow->deny")
    screenshot(page, "replay", tmp_path)

    upload = tmp_path / "broken.yaml"
    upload.write_text("version: 1\nrules:\n  - id: x\n    effect: maybe\n")
    page.set_input_files("#policy-file", str(upload))
    expect(page.locator("#policy-text")).to_have_value(upload.read_text())
    page.click("#replay")
    expect(page.locator("#replay-error")).to_have_text("the candidate policy has problems")
    expect(page.locator("#replay-problems li").first).to_contain_text("effect")


# -- who may see what -------------------------------------------------------------------------


def test_an_approver_sees_approvals_and_grants_only(service: Service, page: Page) -> None:
    log_in(page, service, "approver")
    expect(page.locator("#nav a[data-page=approvals]")).to_be_visible()
    expect(page.locator("#nav a[data-page=grants]")).to_be_visible()
    for hidden in ("stream", "audit", "replay"):
        expect(page.locator(f"#nav a[data-page={hidden}]")).to_be_hidden()
    page.goto(f"{service.url}/console#/audit")
    expect(page.locator("main h1")).to_have_text("Not for this token")


def test_an_agent_token_or_a_wrong_one_does_not_open_the_console(service: Service,
                                                                  page: Page,
                                                                  tmp_path: Path) -> None:
    log_in(page, service, "agent")
    expect(page.locator("#notice")).to_contain_text("the console is for approvers and admins")
    expect(page.locator("#nav")).to_be_hidden()
    page.fill("#token", "not-a-token-of-this-service")
    page.click("#login-button")
    expect(page.locator("#notice")).to_contain_text("log in again")
    screenshot(page, "login", tmp_path)


def test_log_out_forgets_the_token(service: Service, page: Page) -> None:
    log_in(page, service, "admin")
    expect(page.locator("#who")).to_have_text("ops (admin)")
    page.click("#logout")
    expect(page.locator("#token")).to_be_visible()
    assert page.evaluate("sessionStorage.length") == 0
    page.reload()
    expect(page.locator("#token")).to_be_visible()


# -- the console's own endpoints, over plain HTTP ---------------------------------------------


def test_console_files_are_served_with_a_strict_policy(service: Service) -> None:
    for path, kind in (("/console", "text/html"), ("/console/app.js", "text/javascript"),
                       ("/console/app.css", "text/css")):
        status, _, headers = service.request("GET", path, token=None)
        assert status == 200 and headers["content-type"].startswith(kind)
        csp = headers["content-security-policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert headers["x-frame-options"] == "DENY"
    status, body, _ = service.request("GET", "/console/../openapi.json", token=None)
    assert status in (200, 404)  # a client's path normalisation; never a file of another kind
    status, body, _ = service.request("GET", "/console/secrets.txt", token=None)
    assert status == 404 and body["error"]["code"] == "not_found"


def test_whoami(service: Service) -> None:
    for token, role, name, pages in (("agent", "agent", "bot", []),
                                     ("approver", "approver", "carol", ["approvals", "grants"]),
                                     ("admin", "admin", "ops", ["approvals", "grants", "stream",
                                                                "audit", "replay"])):
        status, body, _ = service.request("GET", "/v1/whoami", token=token)
        assert status == 200 and body == {"role": role, "name": name, "pages": pages}
        conforms(body, "Holder")
    status, _, _ = service.request("GET", "/v1/whoami", token="wrong-token-0123456789")
    assert status == 401


def test_approval_context_is_redacted(service: Service) -> None:
    service.decide("read_file", {"path": "x"}, session="ctx")
    request_id = service.decide("deploy", {"token": SECRET}, session="ctx")["approval_request"]
    status, body, _ = service.request("GET", f"/v1/approvals/{request_id}/context",
                                      token="approver")
    assert status == 200
    conforms(body, "ApprovalContext")
    assert SECRET not in json.dumps(body)
    assert body["request"]["args"]["token"].startswith("[REDACTED")
    assert body["source_line"].strip().endswith("id: deploy-asks")
    assert [(e["tool"], e["effect"]) for e in body["history"]] == [("read_file", "allow"),
                                                                   ("deploy", "ask")]
    status, _, _ = service.request("GET", f"/v1/approvals/{request_id}/context", token="agent")
    assert status == 403
    status, body, _ = service.request("GET", "/v1/approvals/nope/context", token="approver")
    assert status == 404


def test_policy_files_for_replay(service: Service) -> None:
    (service.root / "candidate.yml").write_text(STRICT)
    (service.root / "notes.txt").write_text("not a policy")
    status, body, _ = service.request("GET", "/v1/policies", token="admin")
    assert status == 200 and body["policies"] == [
        {"name": "candidate.yml", "current": False}, {"name": "policy.yaml", "current": True}]
    conforms(body, "PolicyFiles")
    status, body, _ = service.request("GET", "/v1/policies/candidate.yml", token="admin")
    assert status == 200 and body == {"name": "candidate.yml", "text": STRICT}
    conforms(body, "PolicyFile")
    for name in ("notes.txt", "..%2Fpolicy.yaml", "tokens"):
        status, body, _ = service.request("GET", f"/v1/policies/{name}", token="admin")
        assert status == 404, name
    status, _, _ = service.request("GET", "/v1/policies", token="approver")
    assert status == 403



def test_restore_redacted_puts_back_only_what_was_left_as_shown() -> None:
    from callwarden.serve._console import restore_redacted

    original = {"env": "prod", "token": SECRET, "hosts": ["a", SECRET], "nested": {"k": SECRET}}
    shown = {"env": "prod", "token": "[R]", "hosts": ["a", "[R]"], "nested": {"k": "[R]"}}
    assert restore_redacted(shown, shown, original) == original
    edited = {"env": "staging", "token": "[R]", "hosts": ["b", "[R]", "c"],
              "nested": {"k": "new"}, "extra": "[R]"}
    assert restore_redacted(edited, shown, original) == {
        "env": "staging", "token": SECRET, "hosts": ["b", SECRET, "c"], "nested": {"k": "new"},
        "extra": "[R]"}  # a key the call did not have is the person's own text
    assert restore_redacted({"token": "typed"}, shown, original) == {"token": "typed"}
