"""The Java client (``clients/java``) against a real ``callwarden serve``: compiled with javac,
its demo (``dev.callwarden.Main``) driven over stdin/stdout, every step checked against what the
service answered and what its audit log recorded; and its JSON encoder/parser checked against
Python's ``json``."""

from __future__ import annotations

import base64
import json
import queue
import random
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from test_serve import SECRET, TIMEOUT, TOKENS, Service

JAVA_SOURCES = Path(__file__).parents[2] / "clients" / "java"
FRAMEWORK = "spring-ai"  # what CallwardenClient sends as the call's framework
# Main.AWKWARD_ARGUMENTS, as Python reads it.
AWKWARD = {"text": 'café \U0001f600 "q" back\\slash\nline\ttab\x01', "big": 12345678901234567890,
           "negative": -7, "ratio": 0.25, "tiny": 1.5e-300, "flags": [True, False, None],
           "nested": {"empty": {}, "list": []}}


def jdk_tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:  # a missing JDK is a broken setup, not a reason to skip
        pytest.fail(f"{name} is not on PATH: the Java client's tests need a JDK 17 or later")
    return found


@pytest.fixture(scope="module")
def classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The client, its demo and its test helper, compiled (warnings are errors)."""
    out = tmp_path_factory.mktemp("classes")
    sources = sorted(str(p) for p in JAVA_SOURCES.rglob("*.java"))
    assert sources, f"no Java sources under {JAVA_SOURCES}"
    compiled = subprocess.run(
        [jdk_tool("javac"), "--release", "17", "-Xlint:all", "-Werror", "-encoding", "UTF-8",
         "-d", str(out), *sources], capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    return out


class JavaProcess:
    """A JVM running one class, read line by line with a deadline on every read."""

    def __init__(self, classes: Path, main: str, *args: str) -> None:
        self.process = subprocess.Popen(
            [jdk_tool("java"), "-cp", str(classes), main, *args], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8")
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.errors: list[str] = []

        def read_stdout() -> None:
            assert self.process.stdout is not None
            for line in self.process.stdout:
                self.lines.put(line)
            self.lines.put(None)  # the end of its output

        def read_stderr() -> None:
            assert self.process.stderr is not None
            self.errors.extend(self.process.stderr)

        self._readers = [threading.Thread(target=read_stdout, daemon=True),
                         threading.Thread(target=read_stderr, daemon=True)]
        for reader in self._readers:
            reader.start()

    def next_line(self) -> dict[str, Any]:
        try:
            line = self.lines.get(timeout=TIMEOUT)
        except queue.Empty:
            pytest.fail(f"no output from Java within {TIMEOUT}s; stderr: {''.join(self.errors)}")
        if line is None:
            self.process.wait(TIMEOUT)
            pytest.fail(f"Java ended (exit {self.process.returncode}) before its script did: "
                        f"{''.join(self.errors)}")
        parsed: dict[str, Any] = json.loads(line)
        return parsed

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def finish(self) -> int:
        """Closes its stdin and waits for it to exit; killed if it does not."""
        try:
            assert self.process.stdin is not None
            self.process.stdin.close()
            return self.process.wait(TIMEOUT)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            for reader in self._readers:
                reader.join(5)
            for stream in (self.process.stdout, self.process.stderr):
                assert stream is not None
                stream.close()


@dataclass
class Demo:
    """What the demo printed, step by step, and the service's audit events."""

    steps: dict[str, dict[str, Any]]
    events: list[dict[str, Any]]


@pytest.fixture(scope="module")
def demo(classes: Path, tmp_path_factory: pytest.TempPathFactory) -> Demo:
    """The demo run once against a fresh service; its ask approved over HTTP by an approver."""
    service = Service(tmp_path_factory.mktemp("serve"))
    try:
        java = JavaProcess(classes, "dev.callwarden.Main", service.url, TOKENS["agent"],
                           TOKENS["approver"])
        steps: dict[str, dict[str, Any]] = {}
        try:
            while "done" not in steps:
                line = java.next_line()
                step = line.pop("step")
                steps[step] = line
                if step == "ask":  # the demo waits on stdin until the request is approved
                    status, body, _ = service.request(
                        "POST", f"/v1/approvals/{line['approval_request']}/approve",
                        {"comment": "from test_java_client"}, token="approver")
                    assert status == 200, body
                    java.send("approved")
        finally:
            exit_code = java.finish()
        assert exit_code == 0, "".join(java.errors)
    finally:
        assert service.stop() == 0
    assert not any("Traceback" in line for line in service.said), service.said
    return Demo(steps, service.events())


def decision_event(demo: Demo, decision_id: str) -> dict[str, Any]:
    [event] = [e for e in demo.events
               if e["type"] == "decision" and e["decision_id"] == decision_id]
    return event


# -- the strategy -----------------------------------------------------------------------------


def test_an_allowed_call_is_approved(demo: Demo) -> None:
    allowed = demo.steps["allow"]
    assert allowed["approved"] is True and allowed["reason"] is None
    assert (allowed["effect"], allowed["rule"]) == ("allow", "default")
    assert decision_event(demo, allowed["decision_id"])["tool"] == "read_file"


def test_a_denied_call_is_refused_with_the_rules_message(demo: Demo) -> None:
    denied = demo.steps["deny"]
    assert denied["approved"] is False
    assert denied["reason"] == "Deleting files is not allowed; move them to trash/ instead."
    assert (denied["effect"], denied["rule"]) == ("deny", "no-delete")


def test_a_modified_call_is_approved_with_the_rewritten_arguments(demo: Demo) -> None:
    modified = demo.steps["modify"]
    assert modified["approved"] is True and modified["rule"] == "cap-search"
    assert json.loads(modified["arguments"]) == {"query": "q", "limit": 5}
    assert decision_event(demo, modified["decision_id"])["args"] == {"query": "q", "limit": 50}


def test_an_ask_is_refused_naming_its_request_and_runs_once_after_approval(demo: Demo) -> None:
    asked, ran, again = demo.steps["ask"], demo.steps["approved"], demo.steps["ask_again"]
    request_id = asked["approval_request"]
    assert asked["approved"] is False and request_id and request_id in asked["reason"]
    assert asked["reason"].startswith("Deploys need a person's go-ahead.")
    assert ran["approved"] is True and ran["effect"] == "allow"
    assert again["approved"] is False and again["effect"] == "ask"
    assert again["approval_request"] not in (None, request_id)  # the approval was used up
    consumed = [e for e in demo.events if e["type"] == "approval" and e["action"] == "consumed"
                and e["request_id"] == request_id]
    assert [e["decision_id"] for e in consumed] == [ran["decision_id"]]


def test_a_person_can_deny_or_edit_through_the_client(demo: Demo) -> None:
    denied, edited = demo.steps["deny_by_person"], demo.steps["edit_and_approve"]
    assert denied["request"] in denied["pending"]
    assert demo.steps["ask_again"]["approval_request"] in denied["pending"]
    assert (denied["status"], denied["resolved_by"]) == ("denied", "carol")
    assert denied["approved"] is False and "code freeze until Monday" in denied["reason"]
    assert (edited["status"], edited["edited_args"]) == ("approved", {"env": "staging"})
    assert edited["approved"] is True and edited["effect"] == "modify"
    assert json.loads(edited["arguments"]) == {"env": "staging"}


def test_a_person_can_approve_and_remember_and_revoke_through_the_client(demo: Demo) -> None:
    """approveAndRemember: the same call runs on the approval, then on the grant; grants()
    lists it; revokeGrant() ends it (the same call is asked again) and refuses twice."""
    grant = demo.steps["grant"]
    assert (grant["scope"], grant["exact"], grant["args"], grant["by"]) == (
        "session", True, {"env": "prod"}, "carol")
    assert grant["active"] == [grant["id"]]
    assert grant["first"] is True and grant["second"] is True
    # The first ran on the approval (consumed), the second on the grant (nothing consumed).
    consumed = {e["decision_id"] for e in demo.events if e["type"] == "approval"
                and e["action"] == "consumed"}
    assert grant["first_decision"] in consumed and grant["second_decision"] not in consumed
    assert (grant["status"], grant["revoked_by"]) == ("revoked", "carol")
    assert grant["after"] is False and grant["after_effect"] == "ask"
    again = demo.steps["revoke_twice"]
    assert (again["thrown"], again["status"], again["code"]) == (True, 409,
                                                                  "grant_already_revoked")
    revoked = [e for e in demo.events if e["type"] == "approval"
               and e["action"] == "grant_revoked"]
    assert [(e["grant_id"], e["by"]) for e in revoked] == [(grant["id"], "carol")]


def test_an_unreachable_service_refuses_the_call_without_an_exception(demo: Demo) -> None:
    unreachable = demo.steps["unreachable"]
    assert unreachable["approved"] is False
    assert "could not be reached" in unreachable["reason"]
    assert (unreachable["error"], unreachable["status"]) == ("unreachable", 0)


# -- the client -------------------------------------------------------------------------------


def test_an_outcome_comes_back_with_the_secret_redacted(demo: Demo) -> None:
    screened = demo.steps["outcome"]
    assert (screened["status"], screened["rule"], screened["halt"]) == (
        "output_modified", "redact-secrets", False)
    assert screened["result"]["lines"] == 1 and screened["result"]["text"].startswith("TOKEN=")
    assert SECRET not in json.dumps(screened) and "ghp_" not in screened["result"]["text"]
    outcome = [e for e in demo.events if e["type"] == "outcome"]
    assert [(e["decision_id"], e["status"]) for e in outcome] == [
        (screened["decision_id"], "output_modified")]


def test_arguments_reach_the_service_and_come_back_unchanged(demo: Demo) -> None:
    """Escapes, a surrogate pair, a control character, a 64-bit overflow and nesting survive
    the client's encoder (the audit log has them) and its parser (the decision's args)."""
    assert demo.steps["roundtrip"] == {"effect": "allow", "args": AWKWARD}
    [sent] = [e for e in demo.events if e["type"] == "decision" and e["tool"] == "echo"
              and e["effect"] == "allow"]
    assert sent["args"] == AWKWARD


def test_arguments_that_are_not_json_are_left_to_the_service_to_deny(demo: Demo) -> None:
    not_json = demo.steps["not_json"]
    assert not_json["effect"] == "deny" and "not valid JSON" in not_json["message"]


def test_service_errors_carry_status_code_and_message(demo: Demo) -> None:
    expected = {"wrong_token": (401, "unauthorized"), "forbidden": (403, "forbidden"),
                "approve_twice": (409, "approval_already_resolved")}
    for step, (status, code) in expected.items():
        error = demo.steps[step]
        assert (error["thrown"], error["status"], error["code"]) == (True, status, code), step
        assert error["message"], step


def test_no_answer_throws_rather_than_deciding(demo: Demo) -> None:
    thrown = demo.steps["unreachable_decide"]
    assert (thrown["thrown"], thrown["status"], thrown["code"]) == (True, 0, "unreachable")


def test_every_decision_is_audited_with_the_framework_the_client_sends(demo: Demo) -> None:
    decisions = [e for e in demo.events if e["type"] == "decision"]
    assert {e["framework"] for e in decisions} == {FRAMEWORK}
    printed = {line["decision_id"] for line in demo.steps.values() if "decision_id" in line}
    assert printed <= {e["decision_id"] for e in decisions}
    # allow, deny, modify, 3 x deploy, outcome's read, 2 x echo, 2 x 2 x deploy by a person,
    # 4 x deploy remembered; the wrong token's and the unreachable service's calls were never
    # decided.
    assert len(decisions) == 18
    assert {e["call_id"] for e in decisions} >= {"call-1", "call-2", "call-3", "call-4"}


# -- JSON -------------------------------------------------------------------------------------


def json_echo(classes: Path, texts: list[str]) -> list[str]:
    """JsonEcho's answer to each text: ``ok <json>`` or ``error <message>``."""
    sent = "".join(base64.b64encode(t.encode()).decode() + "\n" for t in texts)
    done = subprocess.run([jdk_tool("java"), "-cp", str(classes), "dev.callwarden.JsonEcho"],
                          input=sent, capture_output=True, text=True, encoding="utf-8",
                          timeout=TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr
    *answers, last = done.stdout.split("\n")  # not splitlines(): U+2028 stays in a line
    assert last == "" and len(answers) == len(texts), done.stderr
    return answers


CHARACTERS = ['a', 'Z', '0', ' ', '"', '\\', '/', '\b', '\f', '\n', '\r', '\t', '\x00', '\x1f',
              '\x7f', 'é', '€', '\u2028', '\ufeff', '\U0001f600', '\U00010000', '\U0010ffff']
LONE_SURROGATES = ['\ud800', '\udbff', '\udc00', '\udfff']


def random_value(rng: random.Random, characters: list[str], depth: int = 0) -> Any:
    kind = rng.randrange(7 if depth < 4 else 5)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.choice([0, -1, 2**63 - 1, -(2**63), 2**63, -(2**64) - 1, 10**30,
                           rng.randint(-10**6, 10**6)])
    if kind == 2:
        return rng.choice([0.1, -2.5e-8, 5e-324, 1.7976931348623157e308, -0.0, 2e23,
                           rng.uniform(-1e6, 1e6), rng.random() * 10 ** rng.randint(-300, 300)])
    if kind in (3, 4):
        return random_text(rng, characters)
    if kind == 5:
        return [random_value(rng, characters, depth + 1) for _ in range(rng.randrange(5))]
    return {random_text(rng, characters) if rng.random() < 0.5 else f"k{i}":
            random_value(rng, characters, depth + 1) for i in range(rng.randrange(5))}


def random_text(rng: random.Random, characters: list[str]) -> str:
    return "".join(rng.choice(characters) for _ in range(rng.randrange(12)))


def canonical(value: Any) -> str:
    """One text per value: key order, integer size and float bits all show."""
    return json.dumps(value, ensure_ascii=True)


def test_json_reads_what_python_writes_and_writes_it_back(classes: Path) -> None:
    rng = random.Random(20240611)  # fixed: a failure reproduces
    values = [random_value(rng, CHARACTERS) for _ in range(300)]
    texts = [json.dumps(v, ensure_ascii=rng.random() < 0.5,
                        indent=rng.choice([None, 2, "\t", "\r\n"])) for v in values]
    # Lone surrogates have no UTF-8 form: Python sends them escaped, as JSON allows.
    lone = [random_value(rng, CHARACTERS + LONE_SURROGATES) for _ in range(100)]
    values += lone
    texts += [json.dumps(v, ensure_ascii=True) for v in lone]
    fixed = {'{"a": 1, "a": 2}': {"a": 2}, '"\\u00e9\\uD83D\\uDE00\\/"': "é\U0001f600/",
             " \t\r\n[ 1 , -0 , 1E2 , 1e-2 , 1.5E+3 ] ": [1, 0, 100.0, 0.01, 1500.0],
             "1e400": float("inf"), "123456789012345678901234567890.5": 1.2345678901234568e29,
             "[" * 512 + "]" * 512: json.loads("[" * 512 + "]" * 512)}
    values += list(fixed.values())
    texts += list(fixed)
    for text, value, answer in zip(texts, values, json_echo(classes, texts), strict=True):
        assert answer.startswith("ok "), (text, answer)
        assert canonical(json.loads(answer[3:])) == canonical(value), text


def test_json_refuses_what_is_not_json(classes: Path) -> None:
    texts = ["", " ", "{", "}", "[1,]", "[,1]", '{"a": 1,}', '{"a" 1}', "{1: 2}", "{'a': 1}",
             "01", "-01", "1.", ".5", "+1", "-", "1e", "1e+", "0x10", "tru", "nul", "True",
             "NaN", "Infinity", "-Infinity", '"\\x"', '"\\u12"', '"\\u12g4"',
             '"\\u\u0660\u0660\u0664\u0661"', '"a\tb"', '"a\nb"', '"\x00"', '"open', '"\\',
             "[1] 2", "[1]]", "\u00a01", "\ufeff1", "1 // c", "/* c */ 1",
             "[" * 100000,
             # Valid JSON nested past Json.MAX_DEPTH: refused, where recursion would overflow.
             "[" * 513 + "]" * 513, '{"a":' * 100000 + "1" + "}" * 100000]
    for text, answer in zip(texts, json_echo(classes, texts), strict=True):
        assert answer.startswith("error JSON: "), (text[:40], answer)
