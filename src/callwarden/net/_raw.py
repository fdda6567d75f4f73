"""Raw routes: requests an app answers straight from uvicorn's HTTP parser, without ASGI.

For a request of a few hundred bytes, ASGI's machinery costs more than the answer: a scope,
a request-response cycle with its event, ``receive`` and ``send`` messages, and the checks of
each. An app may name routes it answers raw (``app.raw_routes``: the exact request target →
a :class:`RawRoute`); a ``POST`` to one of them with a ``Content-Length`` within the route's
cap is read whole by the parser and handed to the route's handler, whose answer (status,
headers, body) leaves in one write. Everything else goes the ASGI way, unchanged: another
method or target, a chunked body, ``Expect: 100-continue``, a body over the cap (the ASGI app
then answers 413), an upgrade, a request pipelined behind one still being answered, a server
with a concurrency limit.

Keep-alive, ``Connection: close``, HTTP/1.0, graceful shutdown and pipelining stay uvicorn's:
the raw request stands in uvicorn's request-cycle slot with the attributes uvicorn reads there.
The keep-alive timeout is kept with one timer per connection (uvicorn sets one after each
answer and cancels it when the next request comes: a timer made and dropped per request).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NamedTuple

__all__ = ["RawRoute", "raw_routes"]

Headers = list[tuple[bytes, bytes]]
#: (the request's headers, names lower-cased; its body) -> (status, headers, body)
RawHandler = Callable[[Headers, bytes], Awaitable[tuple[int, Headers, bytes]]]


class RawRoute(NamedTuple):
    """A route answered raw: its handler, and the largest body it is handed (a bigger one
    goes the ASGI way, whose app says why it refuses it)."""

    handler: RawHandler
    max_body: int


class _Unused:
    """uvicorn sets its cycle's event when data or a disconnect comes; nothing waits here."""

    __slots__ = ()

    def set(self) -> None:
        return None


_UNUSED = _Unused()


class _RawCycle:
    """A raw request, in the slot of uvicorn's request-response cycle (what it reads there:
    ``response_complete``, ``keep_alive``, ``disconnected``, ``message_event``)."""

    __slots__ = ("body", "disconnected", "headers", "keep_alive", "message_event",
                 "response_complete", "route")

    def __init__(self, route: RawRoute, headers: Headers, keep_alive: bool) -> None:
        self.route = route
        self.headers = headers
        self.keep_alive = keep_alive
        self.body = bytearray()
        self.response_complete = False
        self.disconnected = False
        self.message_event = _UNUSED


def _declared_length(headers: Headers) -> int | None:
    """The Content-Length of a body sent whole (None when chunked, absent or unreadable)."""
    length = None
    for name, value in headers:
        if name == b"content-length":
            if length is not None or not value.isdigit():
                return None
            length = int(value)
        elif name == b"transfer-encoding" or name == b"expect":
            return None
    return length


def _routes_of(app: Any) -> Mapping[bytes, RawRoute]:
    """The raw routes of an app, through the wrappers uvicorn may put around it (the proxy
    headers and message logger middlewares keep the app they wrap as ``app``)."""
    for _ in range(4):
        routes = getattr(app, "raw_routes", None)
        if isinstance(routes, Mapping):
            return routes
        app = getattr(app, "app", None)
    return {}


def raw_routes(protocol: type[asyncio.Protocol]) -> type[asyncio.Protocol]:
    """``protocol`` (uvicorn's HTTP protocol class) answering its app's raw routes; a
    protocol other than uvicorn's httptools one is returned as it is."""
    try:
        from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
    except ImportError:  # no httptools: the h11 protocol, everything the ASGI way
        return protocol
    if not issubclass(protocol, HttpToolsProtocol):
        return protocol

    class Raw(protocol):  # type: ignore[valid-type,misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.raw: Mapping[bytes, RawRoute] = _routes_of(self.app)
            self.active_at = 0.0  # when data last came or an answer last left (loop time)
            self.idle_timer: asyncio.TimerHandle | None = None

        def data_received(self, data: bytes) -> None:
            self.active_at = self.loop.time()
            super().data_received(data)

        def connection_lost(self, exc: Exception | None) -> None:
            if self.idle_timer is not None:
                self.idle_timer.cancel()
                self.idle_timer = None
            super().connection_lost(exc)

        def on_headers_complete(self) -> None:
            route = self.raw.get(self.url) if self.raw else None
            parser, current = self.parser, getattr(self, "cycle", None)
            if route is None or parser.get_method() != b"POST" or parser.should_upgrade() \
                    or self.limit_concurrency is not None \
                    or (current is not None and not current.response_complete):
                return super().on_headers_complete()  # type: ignore[no-any-return]
            length = _declared_length(self.headers)
            if length is None or length > route.max_body:
                return super().on_headers_complete()  # type: ignore[no-any-return]
            self.cycle = _RawCycle(route, self.headers, parser.get_http_version() != "1.0"
                                   and parser.should_keep_alive())
            return None

        def on_body(self, body: bytes) -> None:
            cycle = self.cycle
            if type(cycle) is _RawCycle:
                cycle.body += body  # within the cap: read whole, reading never paused
            else:
                super().on_body(body)

        def on_message_complete(self) -> None:
            cycle = self.cycle
            if type(cycle) is not _RawCycle:
                return super().on_message_complete()  # type: ignore[no-any-return]
            task = self.loop.create_task(self.answer(cycle))
            self.tasks.add(task)  # a graceful shutdown waits for it, as for an ASGI request
            task.add_done_callback(self.tasks.discard)
            return None

        async def answer(self, cycle: _RawCycle) -> None:
            try:
                status, headers, body = await cycle.route.handler(cycle.headers,
                                                                  bytes(cycle.body))
            except Exception as e:  # a handler answers its own errors: this is a bug
                print(f"a raw route raised {type(e).__name__}: {e}", file=sys.stderr)
                status, headers, body = 500, [(b"content-type", b"text/plain"),
                                              (b"content-length", b"21")], \
                    b"Internal Server Error"
            if cycle.disconnected or self.transport.is_closing():
                cycle.response_complete = True
                return
            head = [STATUS_LINE[status]]
            for name, value in (*self.server_state.default_headers, *headers):
                head += (name, b": ", value, b"\r\n")
            if not cycle.keep_alive:
                head.append(b"connection: close\r\n")
            head += (b"\r\n", body)
            self.transport.write(b"".join(head))
            cycle.response_complete = True
            if not cycle.keep_alive:
                self.transport.close()
            self.answered()

        def answered(self) -> None:
            """uvicorn's completion step, but with one keep-alive timer per connection, not
            one set and cancelled per request: it closes the connection once nothing has come
            or left for the keep-alive timeout."""
            if self.pipeline:  # a request waits behind this one: uvicorn starts it
                return self.on_response_complete()  # type: ignore[no-any-return]
            self.server_state.total_requests += 1
            if self.transport.is_closing():
                return None
            self.flow.resume_reading()
            self.active_at = self.loop.time()
            if self.idle_timer is None:
                self.idle_timer = self.loop.call_later(self.timeout_keep_alive, self.idle_check)
            return None

        def idle_check(self) -> None:
            self.idle_timer = None
            cycle = self.cycle
            if self.transport.is_closing() or (cycle is not None and
                                               not cycle.response_complete):
                return  # closed, or a request is being answered: its answer sets the timer
            idle = self.loop.time() - self.active_at
            if idle >= self.timeout_keep_alive:
                self.transport.close()
            else:
                self.idle_timer = self.loop.call_later(self.timeout_keep_alive - idle,
                                                       self.idle_check)

    Raw.__name__ = Raw.__qualname__ = f"Raw{protocol.__name__}"
    return Raw
