"""Helpers for the audit tests: policy texts, calls, test sinks."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from callwarden import Guard

DATA = Path(__file__).parent.parent / "data"

POLICY = """\
version: 1
name: base
default: allow
tools:
  bash:   {kind: shell, command: command}
  fetch:  {kind: http, url: url}
deny:
  - "Bash(rm -rf *)"
rules:
  - id: no-prod
    match: {tool: deploy}
    args: {env: prod}
    effect: deny
    message: Deploy to staging instead.
  - id: cap-search
    match: {tool: search}
    effect: modify
    cap: {limit: 20}
  - id: watch-fetch
    match: {tool: fetch}
    args: {method: DELETE}
    effect: deny
    mode: observe
"""

# The same policy, tightened: staging deploys denied too, and a budget of 2 fetches per session.
TIGHTENED = POLICY.replace("args: {env: prod}", "args: {env: [prod, staging]}") + """\
  - id: fetch-budget
    match: {tool: fetch}
    limit: {calls: 2, per: session}
"""

CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("bash", {"command": "ls -la"}, "s1"),
    ("bash", {"command": "rm -rf /tmp/build"}, "s1"),
    ("deploy", {"env": "staging"}, "s1"),
    ("deploy", {"env": "prod"}, "s2"),
    ("search", {"q": "audit", "limit": 500}, "s2"),
    ("fetch", {"url": "https://example.com/a", "method": "GET"}, "s1"),
    ("fetch", {"url": "https://example.com/b", "method": "DELETE"}, "s1"),
    ("fetch", {"url": "https://example.com/c", "method": "GET"}, "s1"),
    ("fetch", {"url": "https://example.com/d", "method": "GET"}, "s2"),
    ("deploy", {"env": "staging"}, "s2"),
]
"""Ten calls: with TIGHTENED, two staging deploys and the third fetch of session s1 flip."""


class Recorder:
    """A sink keeping every event it is given."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def write(self, event: dict[str, Any]) -> None:
        self.events.append(json.loads(json.dumps(event)))


class Crashing:
    """A sink that always fails."""

    def write(self, event: dict[str, Any]) -> None:
        raise OSError("disk on fire")


class Blocked:
    """A sink that blocks until released (a hung network share)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        self.events: list[dict[str, Any]] = []

    def write(self, event: dict[str, Any]) -> None:
        self.entered.set()
        self.release.wait(30)
        self.events.append(event)


def make_guard() -> Guard:
    return Guard.from_yaml(POLICY, filename="policy.yaml")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="ascii").splitlines()]
