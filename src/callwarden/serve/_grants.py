"""Standing grants over HTTP: ``GET /v1/grants``, ``POST /v1/grants/{id}/revoke``, and the
``remember`` member of ``POST /v1/approvals/{id}/approve`` ("approve, and don't ask again").

The rules are the approvals' own (``approve_and_remember``, ``revoke``: who may grant, what a
scope needs, how long a grant may last); what is here reads the request's fields and shows a
grant the way the console shows a pending request, its exact call's arguments redacted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from callwarden._guard import Guard
from callwarden.serve._console import redacted_view

__all__ = ["SCOPES", "STATUSES", "listed", "remember_options", "view", "wanted"]

SCOPES = ("session", "agent", "tool")
STATUSES = ("active", "revoked", "expired", "any")
_REMEMBER = ("scope", "ttl", "exact")
_FILTERS = ("session", "agent", "tool")
_EXAMPLE = '{"scope": "session", "ttl": 3600, "exact": true}'


def remember_options(raw: Any) -> dict[str, Any] | None:
    """An approval's ``remember`` as the keywords of ``approve_and_remember`` (None without
    one); the ttl's range is the approvals' to check.

    Raises:
        ValueError: it is not ``{scope, ttl?, exact?}`` of the right types (says which).
    """
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ValueError(f"'remember' must be an object, e.g. {_EXAMPLE}")
    unknown = sorted(str(k) for k in raw if k not in _REMEMBER)
    if unknown:
        raise ValueError(f"'remember' takes scope, ttl and exact, not {', '.join(unknown)}")
    scope = raw.get("scope")
    if not isinstance(scope, str) or scope not in SCOPES:
        raise ValueError(f"'remember.scope' must be session, agent or tool, e.g. {_EXAMPLE}")
    ttl = raw.get("ttl")
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int | float)):
        raise ValueError("'remember.ttl' must be the seconds the grant lasts (a number; "
                         "absent: the approvals' ttl)")
    exact = raw.get("exact", False)
    if not isinstance(exact, bool):
        raise ValueError("'remember.exact' must be true (this exact call only) or false (every "
                         "call of the tool)")
    return {"scope": scope, "ttl": ttl, "exact": exact}


def wanted(params: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """The status (``active`` unless asked) and the filters of a grants listing.

    Raises:
        ValueError: a status that is none of ``STATUSES``.
    """
    status = params.get("status", "active")
    if status not in STATUSES:
        raise ValueError(f"status {status!r} is none of {', '.join(STATUSES)}")
    return status, {k: params.get(k) or "" for k in _FILTERS}


def listed(guard: Guard, grants: Iterable[Any], status: str,
           filters: Mapping[str, str]) -> list[dict[str, Any]]:
    """The grants with that status (any: every one) that pass the filters, as shown: bound to
    that session or agent, covering that tool (a grant's tool may be a glob: the grant's own
    test, as when it covers a call)."""
    session, agent, tool = (filters.get(k, "") for k in _FILTERS)
    return [view(guard, g) for g in grants
            if (status == "any" or g.status.value == status)
            and (not session or g.session == session) and (not agent or g.agent == agent)
            and (not tool or g.covers_tool(tool))]


def view(guard: Guard, grant: Any) -> dict[str, Any]:
    """A grant as the service answers it: its exact call's arguments redacted as a pending
    request's are, and whether it is one exact call."""
    shown = dict(grant.to_dict())
    if shown.get("args") is not None:
        shown["args"] = redacted_view(guard, shown["args"])
    shown["exact"] = grant.call is not None
    return shown
