"""Redis connections whose every wait ends at the caller's decision deadline.

redis-py bounds each wait by a timeout of its own: the pool's wait for a free connection,
the TCP connect, and *each* ``recv`` of a reply. None of them knows the decision's deadline,
and a per-``recv`` timeout never ends a reply that trickles in one byte at a time. Here the
deadline of the exchange in progress (a context variable, set by :func:`until`) caps the pool
wait, the connect, the handshake and every read and write, so a slow, frozen or hostile
server costs a decision its deadline and no more. Without a deadline set, the store's own
``timeout`` applies as before.

Not bounded: the host name lookup (``getaddrinfo``), which Python cannot interrupt; name the
server by address, or use a resolver with a short timeout, where that matters.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

import redis
from redis.connection import parse_url

__all__ = ["bounded_node_options", "bounded_pool", "until"]

_DEADLINE: ContextVar[float | None] = ContextVar("callwarden_redis_deadline", default=None)
_perf = time.perf_counter


@contextlib.contextmanager
def until(deadline: float) -> Iterator[None]:
    """Bounds every wait on a Redis connection made inside the block by ``deadline``."""
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _capped(timeout: float | None) -> float | None:
    """``timeout``, or what is left before the deadline in force if that is sooner."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    # Past the deadline: a wait too short to succeed (0 would make a socket non-blocking).
    left = max(deadline - _perf(), 1e-6)
    return left if timeout is None else min(timeout, left)


class _DeadlineSocket:
    """A connected socket (plain or TLS) whose reads and writes end at the deadline."""

    __slots__ = ("_sock",)

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def _bounded(self, op: Any, *args: Any) -> Any:
        if _DEADLINE.get() is None:
            return op(*args)
        own = self._sock.gettimeout()
        self._sock.settimeout(_capped(own))
        try:
            return op(*args)
        finally:
            self._sock.settimeout(own)

    def recv(self, *args: Any) -> bytes:
        return self._bounded(self._sock.recv, *args)  # type: ignore[no-any-return]

    def recv_into(self, *args: Any) -> int:
        return self._bounded(self._sock.recv_into, *args)  # type: ignore[no-any-return]

    def sendall(self, *args: Any) -> None:
        self._bounded(self._sock.sendall, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class _DeadlineConnection:
    """Mixed into a redis-py connection class: the connect waits no longer than the deadline,
    and the socket it makes bounds every read and write by it."""

    socket_connect_timeout: float | None

    def _connect(self) -> Any:
        # A connection is used by one thread at a time (the pool hands it out), so its
        # connect timeout may be lowered for this connect alone.
        own = self.socket_connect_timeout
        self.socket_connect_timeout = _capped(own)
        try:
            sock = super()._connect()  # type: ignore[misc]
        finally:
            self.socket_connect_timeout = own
        return _DeadlineSocket(sock)


class _DeadlinePool(redis.BlockingConnectionPool):
    """Waits for a free connection no longer than the deadline."""

    @property
    def timeout(self) -> float | None:
        return _capped(self._pool_timeout)

    @timeout.setter
    def timeout(self, value: float | None) -> None:
        self._pool_timeout = value


_CLASSES: dict[type, type] = {}


def _bounded_class(base: type) -> type:
    cls = _CLASSES.get(base)
    if cls is None:
        cls = _CLASSES[base] = type(f"Deadline{base.__name__}", (_DeadlineConnection, base), {})
    return cls


def bounded_pool(url: str, **options: Any) -> redis.BlockingConnectionPool:
    """A blocking connection pool for ``url`` whose waits end at the deadline in force."""
    base = parse_url(url).get("connection_class", redis.Connection)  # type: ignore[no-untyped-call]
    return _DeadlinePool.from_url(url, connection_class=_bounded_class(base), **options)


def bounded_node_options(*, tls: bool) -> dict[str, Any]:
    """What a Redis Cluster client needs to give each node a pool like :func:`bounded_pool`'s
    (its ``connection_pool_class`` and ``connection_class``)."""
    base = redis.SSLConnection if tls else redis.Connection
    return {"connection_pool_class": _DeadlinePool, "connection_class": _bounded_class(base)}
