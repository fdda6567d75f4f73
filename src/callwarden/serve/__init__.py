"""``callwarden serve``: decisions for agents in any language, over HTTP.

``POST /v1/decide`` decides a tool call, ``POST /v1/outcome`` screens its result; the AuthZEN
evaluation API (``/access/v1/evaluation``) maps onto the same decisions; approvals are listed
and resolved at ``/v1/approvals``; ``/healthz``, ``/readyz``, ``/metrics``, ``/v1/reload`` and
``/openapi.json`` (the checked-in document, ``openapi.json``) serve operations. See
:mod:`callwarden.serve._app`; tokens and roles: :mod:`callwarden.serve._auth`.
"""

from callwarden.serve._app import MAX_BODY, Service, create_app
from callwarden.serve._auth import ROLES, Holder, Tokens

__all__ = ["MAX_BODY", "ROLES", "Holder", "Service", "Tokens", "create_app", "run"]


def run(service: Service, host: str, port: int) -> int:
    """Serves ``service`` on ``host:port`` until SIGTERM / SIGINT; SIGHUP reloads the policy."""
    from callwarden.net import serve_app

    return serve_app(create_app(service), host, port, name="callwarden serve", grace=5)
