"""Shared pieces of the approval tests (importable by child processes too)."""

from __future__ import annotations

from typing import Any

POLICY: dict[str, Any] = {
    "version": 1,
    "name": "approvals-test",
    "rules": [
        {"id": "ask-deploy", "match": {"tool": "deploy"}, "effect": "ask",
         "message": "Deploys need a human."},
        {"id": "no-prod", "match": {"tool": "deploy"}, "args": {"env": "prod"}, "effect": "deny",
         "message": "Never deploy to prod from an agent."},
        {"id": "ask-delete", "match": {"tool": "delete_*"}, "effect": "ask"},
        {"id": "no-rm", "match": {"tool": "rm"}, "effect": "deny"},
    ],
}

T0 = 1_000_000.0


class Clock:
    """A wall clock the test moves by hand."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Tool:
    """A tool that records each execution."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, **args: Any) -> str:
        self.calls.append(args)
        return "done"


def run_guarded(guard: Any, approvals: Any, tool: str, args: dict[str, Any], fn: Any,
                **options: Any) -> Any:
    """What Guard.run will do once wired: decide, resolve an ask, run only when allowed."""
    from callwarden import resolve_ask, thaw
    from callwarden._enforce import raise_unless_allowed

    approval_id = options.pop("approval_id", None)
    approver = options.pop("approver", None)
    wait = options.pop("wait", None)
    decision = guard.check(tool, args, **options)
    decision = resolve_ask(guard, decision, approvals=approvals, approver=approver, wait=wait,
                           approval_id=approval_id)
    raise_unless_allowed(decision)
    return fn(**thaw(decision.args))
