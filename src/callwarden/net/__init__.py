"""Serving HTTP (``callwarden mcp --listen``, ``callwarden serve``): one place for the
listening socket, uvicorn and the signals.

* The socket is made here, with ``IPPROTO_TCP`` named: asyncio then sets ``TCP_NODELAY`` on
  each connection (with protocol 0 it does not, and every answer waits out the client's
  delayed ACK: ~40 ms a request).
* It listens before the address is said on stderr, so a client that reads the address can
  connect at once (port 0 picks a free port; the one picked is said).
* SIGTERM / SIGINT stop the server cleanly, whenever they come: before uvicorn serves (a
  service manager may stop it at once) and after; the process then exits 0, after what the
  caller cleans up (``on_exit``). uvicorn itself would raise the signal again and skip that.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from typing import Any, Literal

__all__ = ["serve_app"]


def serve_app(app: Any, host: str, port: int, *, name: str, path: str = "",
              lifespan: Literal["auto", "on", "off"] = "auto", grace: int = 2,
              on_exit: Callable[[], Awaitable[None]] | None = None) -> int:
    """Serves the ASGI ``app`` on ``host:port`` until SIGTERM / SIGINT; returns the exit
    status (1 when the address cannot be had, said on stderr as ``NAME: ...``)."""
    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
        sock.listen(1024)  # connections wait from now on, until the server takes them
    except OSError as e:
        sock.close()
        print(f"{name}: cannot listen on {host}:{port}: {e}", file=sys.stderr)
        return 1
    shown = f"[{host.strip('[]')}]" if family == socket.AF_INET6 else host

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            self.force_exit = self.should_exit  # a second signal: stop now
            self.should_exit = True

    server = Server(uvicorn.Config(app, lifespan=lifespan, log_level="warning",
                                   access_log=False, timeout_graceful_shutdown=grace))
    for sig in (signal.SIGTERM, signal.SIGINT):  # until uvicorn installs its own
        signal.signal(sig, server.handle_exit)

    async def run() -> None:
        print(f"{name}: listening on http://{shown}:{sock.getsockname()[1]}{path}",
              file=sys.stderr, flush=True)
        try:
            await server.serve(sockets=[sock])
        finally:
            if on_exit is not None:
                await on_exit()

    asyncio.run(run())
    return 0
