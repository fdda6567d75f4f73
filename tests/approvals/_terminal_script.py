"""Run under a pseudo-terminal by the terminal-approver tests: asks about one call, prints the
outcome as ``RESULT <effect> <code> <args as JSON>``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _approval_support import POLICY

from callwarden import Guard, resolve_ask, thaw
from callwarden.approvals import Approvals, TerminalApprover
from callwarden.state import MemoryStore

guard = Guard.from_dict(POLICY)
decision = guard.check("deploy", {"env": "staging", "version": "3.1"}, agent="bot",
                       session="s1")
outcome = resolve_ask(guard, decision, approvals=Approvals(MemoryStore()),
                      approver=TerminalApprover(by="alice"))
print("RESULT", outcome.effect.value, outcome.code, json.dumps(thaw(outcome.args),
                                                                sort_keys=True))
print("MESSAGE", outcome.message)
