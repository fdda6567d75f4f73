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
* An app may answer some routes straight from the HTTP parser (``app.raw_routes``, see
  :mod:`._raw`); each answer leaves in one write (:mod:`._writes`).
* SIGHUP never kills it: one that comes before the app handles SIGHUP is kept for the app to
  act on as it starts (``hangup_pending``); an app that does not handle it ignores it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from typing import Any, Literal

__all__ = ["bearer", "hangup_pending", "serve_app", "signal_all_workers"]

_supervisor: int | None = None  # in a forked worker: the process that forked it
_hangups = 0  # SIGHUPs a worker got before its app took them over


def bearer(authorization: str | None) -> bytes | None:
    """The token of an ``Authorization: Bearer TOKEN`` header, or None for any other header
    (to be compared in constant time by the caller)."""
    scheme, _, given = (authorization or "").partition(" ")
    return given.strip().encode() if scheme.lower() == "bearer" else None


def hangup_pending() -> bool:
    """Whether a SIGHUP came before the app installed its own handler (then the app acts on
    it as it starts); resets the count."""
    global _hangups
    pending, _hangups = _hangups > 0, 0
    return pending


def _count_hangup(sig: int, frame: Any) -> None:
    global _hangups
    _hangups += 1


def serve_app(make_app: Callable[[], Any], host: str, port: int, *, name: str,
              path: str = "", lifespan: Literal["auto", "on", "off"] = "auto", grace: int = 2,
              workers: int = 1, on_exit: Callable[[], Awaitable[None]] | None = None) -> int:
    """Serves the ASGI app ``make_app()`` makes on ``host:port`` until SIGTERM / SIGINT;
    returns the exit status (1 when the address cannot be had, said on stderr as
    ``NAME: ...``).

    ``workers`` > 1: that many processes, forked after the socket listens, each making its
    own app (nothing opened before the fork is shared) and taking connections from the one
    socket; this process forwards SIGTERM / SIGINT / SIGHUP to them, and when one of them
    exits, stops the others (a supervisor then restarts the service whole).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
        sock.listen(1024)  # connections wait from now on, until a server takes them
    except OSError as e:
        sock.close()
        print(f"{name}: cannot listen on {host}:{port}: {e}", file=sys.stderr)
        return 1
    shown = f"[{host.strip('[]')}]" if family == socket.AF_INET6 else host
    said = f"{name}: listening on http://{shown}:{sock.getsockname()[1]}{path}"
    if workers <= 1:
        signal.signal(signal.SIGHUP, _count_hangup)  # until the app takes it over
        return _serve(make_app(), sock, said, lifespan, grace, on_exit)
    children: list[int] = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:  # a worker: its own handlers from here on
            global _supervisor
            _supervisor = os.getppid()
            signal.signal(signal.SIGHUP, _count_hangup)  # until its app handles it
            code = 1
            try:
                code = _serve(make_app(), sock, None, lifespan, grace, on_exit)
            finally:
                os._exit(code)
        children.append(pid)

    stopping = False

    def forward(sig: int, frame: Any) -> None:
        nonlocal stopping
        stopping = stopping or sig in (signal.SIGTERM, signal.SIGINT)
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, sig)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    print(f"{said}\n{name}: {workers} workers", file=sys.stderr, flush=True)
    sock.close()
    status = 0
    while children:
        pid, code = os.wait()
        if pid in children:
            children.remove(pid)
            status = status or (1 if os.waitstatus_to_exitcode(code) else 0)
            if not stopping:  # one gone: the service stops whole (once: a second SIGTERM
                forward(signal.SIGTERM, None)  # would cut the others' shutdown short)
    return status


def signal_all_workers(sig: int) -> bool:
    """In a worker of several: sends ``sig`` to every worker (through the process that forked
    them); False in a process serving alone."""
    if _supervisor is None or os.getppid() != _supervisor:
        return False
    os.kill(_supervisor, sig)
    return True


def _serve(app: Any, sock: socket.socket, said: str | None,
           lifespan: Literal["auto", "on", "off"], grace: int,
           on_exit: Callable[[], Awaitable[None]] | None) -> int:
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            self.force_exit = self.should_exit  # a second signal: stop now
            self.should_exit = True

    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    from callwarden.net._raw import raw_routes
    from callwarden.net._writes import coalescing

    server = Server(uvicorn.Config(app, lifespan=lifespan, log_level="warning",
                                   access_log=False, timeout_graceful_shutdown=grace,
                                   proxy_headers=False,  # X-Forwarded-For: not read
                                   http=coalescing(raw_routes(AutoHTTPProtocol))))
    for sig in (signal.SIGTERM, signal.SIGINT):  # until uvicorn installs its own
        signal.signal(sig, server.handle_exit)

    async def run() -> None:
        if said is not None:
            print(said, file=sys.stderr, flush=True)
        try:
            await server.serve(sockets=[sock])
        finally:
            if on_exit is not None:
                await on_exit()

    # uvicorn's own choice of event loop (uvloop when installed: the serve extra brings it)
    with asyncio.Runner(loop_factory=server.config.get_loop_factory()) as runner:
        runner.run(run())
    return 0
