"""Schemathesis against ``callwarden serve``'s OpenAPI document: server errors and schema
violations, with an admin token (every operation reachable).

Run: .venv/bin/python bench/fuzz_serve.py [EXAMPLES]   (default 100 per operation; needs
``pip install -e ".[bench]"`` for schemathesis)

``GET /v1/audit/stream`` is left out: it is an event stream that stays open by design (its
tests are in tests/serve). Prints schemathesis' summary; exits with its status.

Two findings stay, by design, both ST202 ("schema-valid request rejected"): on
``POST /v1/replay``, a ``policy`` string that is not a policy (``"0"``) is answered 422 with the
policy's problems; on ``POST /v1/decide``, a ``request`` and a ``context.request`` that differ
are answered 400 (the document says to give one, or both with the same text). Being a valid
policy, or two fields being equal, is not something a JSON Schema can say; the refusal is the
documented answer.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

CLI = Path(sys.executable).with_name("callwarden")
EXAMPLES = sys.argv[1] if len(sys.argv) > 1 else "100"
TOKEN = "fuzz-admin-token-0123456789"
POLICY = """\
version: 1
default: allow
state: sqlite:///{root}/state.db
audit: {{sinks: [{{jsonl: {root}/audit.jsonl}}]}}
rules:
  - {{id: no-delete, match: {{tool: delete_file}}, effect: deny}}
  - {{id: ask-deploy, match: {{tool: deploy}}, effect: ask}}
  - {{id: cap, match: {{tool: search}}, cap: {{limit: 5}}, effect: modify}}
  - {{id: budget, match: {{tool: "*"}}, limit: {{calls: 100000, per: session}}}}
  - {{id: redact, on: output, match: {{tool: "*"}}, secrets: true, effect: modify}}
"""


def main() -> int:
    schemathesis = Path(sys.executable).with_name("schemathesis")
    if not schemathesis.exists():
        sys.exit("fuzz_serve needs schemathesis: pip install -e '.[bench]'")
    root = Path(tempfile.mkdtemp(prefix="cw-fuzz-"))
    (root / "policy.yaml").write_text(POLICY.format(root=root))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    service = subprocess.Popen(
        [str(CLI), "serve", "--policy", str(root / "policy.yaml"), "--listen",
         f"127.0.0.1:{port}"], env={**os.environ, "CALLWARDEN_SERVE_TOKENS": f"admin ops {TOKEN}"},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert service.stderr is not None
        if "listening on" not in service.stderr.readline():
            sys.exit("the service did not start")
        return subprocess.run(
            [str(schemathesis), "run", f"http://127.0.0.1:{port}/openapi.json",
             "-H", f"Authorization: Bearer {TOKEN}", "--checks", "all", "-n", EXAMPLES,
             "--request-timeout", "10", "--exclude-path", "/v1/audit/stream",
             "--seed", "20261126"], check=False).returncode
    finally:
        service.terminate()
        service.wait(30)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
