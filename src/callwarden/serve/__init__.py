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
    import socket
    import sys

    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP_NODELAY
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
        sock.listen(1024)
    except OSError as e:
        print(f"callwarden serve: cannot listen on {host}:{port}: {e}", file=sys.stderr)
        return 1
    shown = f"[{host.strip('[]')}]" if family == socket.AF_INET6 else host

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: object) -> None:
            self.force_exit = self.should_exit
            self.should_exit = True  # exit 0 after a clean stop, not by the signal again

    server = Server(uvicorn.Config(create_app(service), log_level="warning",
                                   access_log=False, timeout_graceful_shutdown=5))
    print(f"callwarden serve: listening on http://{shown}:{sock.getsockname()[1]}",
          file=sys.stderr, flush=True)
    server.run(sockets=[sock])
    return 0
