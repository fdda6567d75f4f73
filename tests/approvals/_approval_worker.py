"""Child processes of the approval tests: each stage runs in a fresh interpreter.

    python _approval_worker.py request URL            -> prints the pending request's id
    python _approval_worker.py resume URL ID MARKER   -> runs the call with the approval;
                                                         prints the effect and code
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _approval_support import POLICY

CALL: dict[str, Any] = {"tool": "deploy", "args": {"env": "staging", "version": "2.0"},
                        "agent": "bot", "session": "s1"}


def _approvals(url: str) -> Any:
    from callwarden.approvals import Approvals
    from callwarden.state import open_store

    return Approvals(open_store(url, timeout=30.0), ttl=3600)


def request(url: str) -> None:
    from callwarden import Guard, resolve_ask
    from callwarden.approvals import ApprovalPending

    guard = Guard.from_dict(POLICY)
    decision = guard.check(CALL["tool"], CALL["args"], agent=CALL["agent"],
                           session=CALL["session"])
    try:
        resolve_ask(guard, decision, approvals=_approvals(url))
    except ApprovalPending as pending:
        print(pending.request_id)
        return
    raise SystemExit("expected the call to wait for approval")


def resume(url: str, request_id: str, marker: str) -> None:
    from callwarden import Guard, resolve_ask, thaw

    guard = Guard.from_dict(POLICY)
    decision = guard.check(CALL["tool"], CALL["args"], agent=CALL["agent"],
                           session=CALL["session"])
    decision = resolve_ask(guard, decision, approvals=_approvals(url), approval_id=request_id)
    if decision.allowed:
        with open(marker, "a", encoding="utf-8") as f:
            f.write(repr(sorted(thaw(decision.args).items())) + "\n")
    print(decision.effect.value, decision.code)


def resolve_racing(url: str, request_id: str, action: str, by: str, barrier: Any,
                   results: Any) -> None:
    """Approves or denies after the barrier; reports whether it won."""
    from callwarden.approvals import ApprovalError

    approvals = _approvals(url)
    barrier.wait()
    try:
        if action == "approve":
            approvals.approve(request_id, by=by)
        else:
            approvals.deny(request_id, by=by, reason="race")
    except ApprovalError:
        results.put((action, False))
    else:
        results.put((action, True))
    finally:
        approvals.store.close()


def consume_racing(url: str, request_id: str, barrier: Any, results: Any) -> None:
    """Presents the approved call after the barrier; reports whether it was allowed."""
    from callwarden import Guard, resolve_ask

    guard = Guard.from_dict(POLICY)
    approvals = _approvals(url)
    decision = guard.check(CALL["tool"], CALL["args"], agent=CALL["agent"],
                           session=CALL["session"])
    barrier.wait()
    results.put(resolve_ask(guard, decision, approvals=approvals,
                            approval_id=request_id).allowed)
    approvals.store.close()


if __name__ == "__main__":
    stage, *rest = sys.argv[1:]
    {"request": request, "resume": resume}[stage](*rest)
