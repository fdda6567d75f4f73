"""``callwarden demo``: a scripted agent's tool calls pushed through a policy, decision by decision."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TextIO

from callwarden._guard import Guard
from callwarden.exceptions import ToolDenied

__all__ = ["DEMO_CALLS", "DEMO_POLICY", "run_demo"]

DEMO_POLICY = Path(__file__).parent / "demo.yaml"

# What a model might ask for in one session: the tools below only describe what they would do.
DEMO_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("read_file", {"path": "README.md"}),
    ("read_file", {"path": "~/.ssh/id_rsa"}),
    ("bash", {"command": "ls -la src"}),
    ("bash", {"command": "rm -rf /"}),
    ("bash", {"command": "git push origin main"}),
    ("search_docs", {"query": "rate limits", "limit": 500}),
    ("send_money", {"amount": 500, "currency": "USD", "to": "acme"}),
    ("deploy", {"env": "prod"}),
    ("mcp__db__drop_table", {"database": "prod", "table": "users"}),
]


def _fake_tool(name: str) -> Any:
    def tool(**kwargs: Any) -> str:
        return f"{name} ran with {json.dumps(kwargs, sort_keys=True)}"

    return tool


def run_demo(policy: Path | None, out: TextIO) -> int:
    """Runs the scripted calls and prints each decision; returns 0."""
    path = policy or DEMO_POLICY
    guard = Guard.from_file(path)
    print(f"policy: {path} ({guard.engine.settings.name}, {len(guard.engine.rules)} rules)\n",
          file=out)
    for tool, args in DEMO_CALLS:
        print(f"agent -> {tool}({json.dumps(args)})", file=out)
        try:
            result = guard.run(tool, args, _fake_tool(tool), agent="demo-agent",
                               session="demo-session")
        except ToolDenied as e:
            d = e.decision
            where = f" at {d.source}" if d.source else ""
            print(f"   {d.effect.value.upper():6} rule '{d.rule}'{where}", file=out)
            print(f"          model sees: {d.message}", file=out)
            if d.effect.value == "halt":
                print("          the run stops here.", file=out)
                break
        else:
            print(f"   {'OK':6} {result}", file=out)
        print(file=out)
    return 0
