"""The TypeScript client (``clients/typescript``) against a real ``callwarden serve``: its node
tests (``node:test``) run on the committed JavaScript in ``dist/``, with the service's URL and
tokens in the environment; the OpenAI Agents JS guardrails too when ``npm ci`` installed the
SDK."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from test_serve import TOKENS, Service

PACKAGE = Path(__file__).parents[2] / "clients" / "typescript"
NODE_TIMEOUT = 300  # the whole node run; each of its requests has a deadline of its own
FRAMEWORK = "openai-agents-js"  # what the guardrails send as the call's framework
SDK_INSTALLED = (PACKAGE / "node_modules" / "@openai" / "agents" / "package.json").exists()


def node() -> str:
    """The node executable, 20 or later (a missing node is a broken setup, not a skip)."""
    found = shutil.which("node")
    if found is None:
        pytest.fail("node is not on PATH: the TypeScript client's tests need Node.js 20 or later")
    version = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=60,
                             check=True).stdout.strip()
    if int(version.lstrip("v").split(".")[0]) < 20:
        pytest.fail(f"node {version} is too old: the TypeScript client's tests need Node.js 20+")
    return found


def run_node_tests(service: Service, *files: str) -> str:
    """Runs ``node --test`` on the files (paths under the package); fails unless every test
    passed. Returns node's report."""
    env = {**os.environ, "CALLWARDEN_URL": service.url,
           "CALLWARDEN_AGENT_TOKEN": TOKENS["agent"],
           "CALLWARDEN_APPROVER_TOKEN": TOKENS["approver"]}
    # A session of its own, so that a hung run is ended with every process node started.
    process = subprocess.Popen([node(), "--test", "--test-reporter=tap", *files], cwd=PACKAGE,
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, start_new_session=True)
    try:
        report, _ = process.communicate(timeout=NODE_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        report, _ = process.communicate()
        pytest.fail(f"node --test did not finish within {NODE_TIMEOUT}s:\n{report}")
    counts = {k: int(v) for k, v in re.findall(r"^# (tests|pass|fail) (\d+)$", report, re.M)}
    assert process.returncode == 0, f"node --test exited {process.returncode}:\n{report}"
    assert counts.get("fail") == 0 and counts.get("tests", 0) > 0, report
    return report


def test_the_client_has_no_runtime_dependencies() -> None:
    """The package depends on nothing but node's own fetch: no dependencies, no imports."""
    package = (PACKAGE / "package.json").read_text()
    assert '"dependencies"' not in package
    assert not re.search(r"^\s*import\b", (PACKAGE / "dist" / "index.js").read_text(), re.M)


def test_the_typescript_client(service: Service) -> None:
    """Decide, modify, ask → approve → once, edit-and-approve, deny with a reason, redaction,
    guard() failing closed, errors; and dist/ is src/ compiled (when TypeScript is installed:
    that node test skips itself otherwise)."""
    report = run_node_tests(service, "test/client.test.mjs", "test/dist.test.mjs")
    decided = [e for e in service.events() if e["type"] == "decision"]
    assert {"allow", "modify", "deny", "ask", "halt"} <= {e["effect"] for e in decided}, report
    outcomes = [e for e in service.events() if e["type"] == "outcome"]
    assert "output_modified" in {e["status"] for e in outcomes}, report


def test_the_openai_agents_guardrails(service: Service) -> None:
    """The input and output tool guardrails in a real @openai/agents run with a scripted
    model (the SDK from ``npm ci`` in clients/typescript, which scripts/test.sh runs)."""
    assert SDK_INSTALLED, "@openai/agents is not installed: run `npm ci` in clients/typescript"
    report = run_node_tests(service, "test/openai-agents.test.mjs")
    ours = [e for e in service.events() if e["type"] == "decision"
            and e.get("framework") == FRAMEWORK]
    assert {"allow", "modify", "deny", "ask", "halt"} <= {e["effect"] for e in ours}, report
    assert all(e["call_id"].startswith("call-") for e in ours)  # the scripted model's call ids
