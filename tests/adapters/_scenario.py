"""The one-turn scenario every framework adapter is tested with: an allowed call whose output
holds a secret, a denied, a rewritten, an asked and a halting call; and the policy of the
request tests (a recipient must be one the user named)."""

from __future__ import annotations

from typing import Any

SECRET = "aws_secret_access_key = 9dKq3LwZt8vB2nX7pR4sY6uA1cE5gH0jM3oQ8wT2"
DENY_MESSAGE = "Deleting files is not allowed; move them to trash/ instead."

POLICY: dict[str, Any] = {
    "version": 1,
    "default": "allow",
    "rules": [
        {"id": "no-delete", "match": {"tool": "delete_file"}, "effect": "deny",
         "message": DENY_MESSAGE},
        {"id": "cap-search", "match": {"tool": "search"}, "cap": {"limit": 5},
         "effect": "modify"},
        {"id": "deploy-asks", "match": {"tool": "deploy"}, "effect": "ask",
         "message": "Deploys need a human."},
        {"id": "stop-on-wipe", "match": {"tool": "wipe_disk"}, "effect": "halt",
         "message": "Wiping disks ends the session."},
        {"id": "redact-secrets", "on": "output", "match": {"tool": "read_file"},
         "secrets": True, "effect": "modify"},
    ],
}


REQUEST_MESSAGE = "Mail only people the user named."
REQUEST_POLICY: dict[str, Any] = {
    "version": 1, "default": "allow",
    "tools": {"send_email": {"roles": {"recipient": "to"}}},
    "rules": [{"id": "strangers", "roles": {"recipient": {"in": ["request"]}}, "effect": "deny",
               "message": REQUEST_MESSAGE}]}
"""Recipients of send_email must be named in the user's request (``context.request``): what
each adapter's request test runs under."""


class ProcessDied(BaseException):
    """What a tool raises to stand for the process dying inside it: no framework handles it,
    so the call records no outcome and the framework's session holds no result for it."""


def crash_after_running(guard: Any) -> None:
    """What a process killed between a tool's run and its recorded outcome leaves behind: the
    journal entries of the calls that ran are open again (``executing``), so the same calls,
    sent again by a resumed run, are in doubt."""
    store = guard.engine.journal.store
    for record in store.scan("journal:"):
        store.put(record.key, {**record.value, "state": "executing"}, ttl=3600)
