"""The console at ``/console``: approvals, the live decision stream, audit search and replay,
for people, in a browser.

A small bundled frontend (``console/``: one HTML page, one script, one style sheet; nothing
loaded from elsewhere at runtime) over the service's own JSON API, so the console can do
nothing a token's holder could not do with ``curl``. The token is given once at the login
form and kept in the tab's ``sessionStorage``; it travels as ``Authorization: Bearer``, never
in a cookie, so no other site can make the browser act with it (no CSRF). The pages are
served with a Content-Security-Policy that allows only the console's own script and style
(no inline script, so text from a tool call can never run as code; the script writes every
value as text) and may not be framed (no clickjacking of the approve button).

What the console needs beyond the public endpoints is here too: who a token is, an approval
request with its context for the person deciding (arguments with secrets redacted, the rule's
source line, the session's earlier calls), and the policy files a replay can pick from.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from starlette.responses import Response

from callwarden._guard import Guard
from callwarden.audit import Redactor
from callwarden.serve._audit import Filters, log_files, query

__all__ = ["HISTORY", "asset", "context", "policy_files", "policy_text", "redacted_view",
           "restore_redacted", "whoami"]

HISTORY = 50  # the session's latest calls shown beside an approval request
_ASSETS = {"": ("index.html", "text/html; charset=utf-8"),
           "app.js": ("app.js", "text/javascript; charset=utf-8"),
           "app.css": ("app.css", "text/css; charset=utf-8")}
_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
                               "img-src 'self' data:; connect-src 'self'; "
                               "form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def asset(name: str) -> Response | None:
    """One of the console's files, with the headers that keep it safe; None when unknown."""
    known = _ASSETS.get(name)
    if known is None:
        return None
    data = resources.files("callwarden.serve").joinpath("console", known[0]).read_bytes()
    return Response(data, media_type=known[1], headers=_HEADERS)


def _redactor(guard: Guard) -> Redactor:
    auditor = guard.auditor
    return auditor.redactor if auditor is not None else Redactor()


def context(guard: Guard, record: Mapping[str, Any]) -> dict[str, Any]:
    """An approval request as the person deciding sees it: its arguments (and any edited
    ones) redacted, the source line of the rule that asked, and the session's latest calls
    (from the audit log, redacted as it was written)."""
    redactor = _redactor(guard)
    shown = dict(record)
    for key in ("args", "edited_args"):
        if shown.get(key) is not None:
            shown[key], _ = redactor.redact(shown[key], key)
    session = record.get("session")
    history: list[dict[str, Any]] = []
    if session:
        wanted = Filters({"session": session, "type": "decision"})
        history = query(log_files(guard), wanted, HISTORY)
    return {"request": shown, "source_line": _source_line(guard, record.get("source")),
            "history": history}


def _source_line(guard: Guard, source: Any) -> str | None:
    """The text at ``FILE:LINE`` when the file is one the policy was read from."""
    if not isinstance(source, str):
        return None
    path, _, line = source.rpartition(":")
    if not line.isdigit() or path not in guard.loaded.files:
        return None
    with contextlib.suppress(OSError, UnicodeDecodeError):
        lines = Path(path).read_text(encoding="utf-8").splitlines()
        number = int(line)
        if 0 < number <= len(lines):
            return lines[number - 1]
    return None


def restore_redacted(edited: Any, shown: Any, original: Any) -> Any:
    """An edit made on the redacted view, with every part left as shown put back as it was:
    a secret the person did not touch keeps its real value (not the redaction marker)."""
    if edited == shown:
        return original
    if isinstance(edited, dict) and isinstance(shown, dict) and isinstance(original, dict):
        return {k: restore_redacted(v, shown[k], original[k])
                if k in shown and k in original else v for k, v in edited.items()}
    if isinstance(edited, list) and isinstance(shown, list) and isinstance(original, list):
        return [restore_redacted(v, shown[i], original[i])
                if i < len(shown) and i < len(original) else v for i, v in enumerate(edited)]
    return edited


def redacted_view(guard: Guard, args: Any) -> Any:
    """``args`` as the console shows them."""
    return _redactor(guard).redact(args, "args")[0]


def policy_files(policy: Path) -> list[dict[str, Any]]:
    """The policy files a replay may pick: the YAML files beside the served policy."""
    found = sorted({*policy.parent.glob("*.yaml"), *policy.parent.glob("*.yml")})
    return [{"name": p.name, "current": p.name == policy.name} for p in found if p.is_file()]


def policy_text(policy: Path, name: str) -> str | None:
    """The text of one of :func:`policy_files`, or None for any other name."""
    if name not in {p["name"] for p in policy_files(policy)}:
        return None
    with contextlib.suppress(OSError, UnicodeDecodeError):
        return (policy.parent / name).read_text(encoding="utf-8")
    return None


def whoami(role: str, name: str) -> dict[str, Any]:
    """Who a token is, and which pages of the console it opens."""
    pages = {"agent": [], "approver": ["approvals", "grants"],
             "admin": ["approvals", "grants", "stream", "audit", "replay"]}[role]
    return {"role": role, "name": name, "pages": pages}
