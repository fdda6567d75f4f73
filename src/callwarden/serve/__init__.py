"""``callwarden serve``: decisions for agents in any language, over HTTP.

``POST /v1/decide`` decides a tool call, ``POST /v1/outcome`` screens its result; the AuthZEN
evaluation API (``/access/v1/evaluation``) maps onto the same decisions; approvals are listed
and resolved at ``/v1/approvals`` (approving may remember a standing grant), and grants are
listed and revoked at ``/v1/grants``; ``/healthz``, ``/readyz``, ``/metrics``, ``/v1/reload`` and
``/openapi.json`` (the checked-in document, ``openapi.json``) serve operations. See
:mod:`callwarden.serve._app`; tokens and roles: :mod:`callwarden.serve._auth`.
"""

from collections.abc import Callable

from callwarden.serve._app import MAX_BODY, Service, create_app
from callwarden.serve._auth import ROLES, Holder, Tokens

__all__ = ["MAX_BODY", "ROLES", "Holder", "Service", "Tokens", "create_app", "run"]


def run(make: Callable[[], Service], host: str, port: int, *, workers: int = 1) -> int:
    """Serves the service ``make()`` makes on ``host:port`` until SIGTERM / SIGINT; SIGHUP
    reloads the policy. ``workers``: processes, each loading the policy itself and sharing
    the policy's store."""
    from callwarden.net import serve_app

    return serve_app(lambda: create_app(make(), own_process=True), host, port,
                     name="callwarden serve", grace=5, workers=workers)
