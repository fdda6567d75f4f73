"""A reminder function for the tests: records each request it is told about (in memory, and in
the file CALLWARDEN_TEST_REMINDERS names, for a service in another process)."""

from __future__ import annotations

import os
from typing import Any

SEEN: list[str] = []


def remember_request(request: Any) -> None:
    SEEN.append(request.id)
    path = os.environ.get("CALLWARDEN_TEST_REMINDERS")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(request.id + "\n")


def broken(request: Any) -> None:
    raise RuntimeError("the chat service is down")
