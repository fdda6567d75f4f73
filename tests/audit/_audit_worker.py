"""A process that decides calls as fast as it can and "runs" each allowed one, until killed.

Run: python _audit_worker.py LOG EXECUTED [delivery]. Every allowed call's decision id is
appended to EXECUTED (one os.write, as a tool's side effect would be) after ``check``
returns and before the next call: the test kills this process with SIGKILL and checks that
every call that ran has its decision event in LOG.
"""

from __future__ import annotations

import os
import sys

from _audit_support import POLICY

from callwarden import Guard
from callwarden.audit import Auditor, JsonlSink
from callwarden.policyfile import load_policy_text


def main() -> None:
    log, executed = sys.argv[1], sys.argv[2]
    delivery = sys.argv[3] if len(sys.argv) > 3 else None
    auditor = Auditor([JsonlSink(log)]) if delivery is None \
        else Auditor([JsonlSink(log)], delivery=delivery)
    guard = Guard.from_loaded(load_policy_text(POLICY, filename="policy.yaml"), audit=auditor)
    fd = os.open(executed, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    i = 0
    while True:
        i += 1
        decision = guard.check("fetch", {"url": f"https://example.com/{i}", "method": "GET"})
        if decision.allowed:
            os.write(fd, f"{decision.decision_id}\n".encode())


if __name__ == "__main__":
    main()
