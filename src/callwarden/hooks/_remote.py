"""``callwarden hook AGENT --server URL``: the decision comes from ``callwarden serve``.

The hook posts the call to ``URL/v1/decide`` with the agent token in
``CALLWARDEN_SERVER_TOKEN`` and renders the answer as it would its own decision. Fails closed:
a service that cannot be reached, answers late (``CALLWARDEN_SERVER_TIMEOUT`` seconds, default
10), refuses the token or answers something that is not a decision blocks the call with the
reason. Paths in the call are the agent's: the hook sends its working directory as
``context.cwd``; the service's policy resolves relative paths against its own workspace
(``workspace: {root: ...}``).
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from callwarden._decision import Decision

if TYPE_CHECKING:
    import urllib.error

__all__ = ["SERVER_ENV", "decide_remote"]

SERVER_ENV = "CALLWARDEN_SERVER"
TOKEN_ENV = "CALLWARDEN_SERVER_TOKEN"
TIMEOUT_ENV = "CALLWARDEN_SERVER_TIMEOUT"


def decide_remote(server: str, tool: str, args: Any, *, framework: str, cwd: str | None,
                  **fields: Any) -> Decision:
    """The service's decision on one call.

    Raises:
        RuntimeError: the service could not be asked, or did not answer with a decision (the
            message says why).
    """
    if not server.startswith(("http://", "https://")):
        raise RuntimeError(f"--server {server!r} is not an http(s):// URL")
    token = os.environ.get(TOKEN_ENV, "")
    if not token:
        raise RuntimeError(f"no token for {server}: set {TOKEN_ENV} (an agent token of the "
                           "service)")
    try:
        timeout = float(os.environ.get(TIMEOUT_ENV) or 10)
    except ValueError:
        timeout = 10.0
    context = dict(fields.pop("context", None) or {})
    if cwd:
        context.setdefault("cwd", cwd)
    body = {"tool": tool, "args": args, "framework": framework, "context": context,
            **{k: v for k, v in fields.items() if v is not None}}
    # Imported here: urllib.request (http.client, email, ssl) costs every hook process that
    # decides by itself far more than the rest of this module, and only --server needs it.
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        server.rstrip("/") + "/v1/decide", data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            answer = json.loads(response.read(4 * 1024 * 1024))
    except urllib.error.HTTPError as e:
        raise RuntimeError(f"{server} refused the call: HTTP {e.code} "
                           f"{_error_message(e)}") from None
    except (OSError, ValueError) as e:
        raise RuntimeError(f"{server} did not answer ({type(e).__name__}: {e})") from None
    try:
        return Decision.from_dict(answer)
    except ValueError as e:
        raise RuntimeError(f"{server} did not answer with a decision: {e}") from None


def _error_message(error: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(error.read(65536))
        return str(body["error"]["message"])
    except Exception:
        return str(error.reason)
