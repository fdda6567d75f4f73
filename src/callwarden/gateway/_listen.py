"""``callwarden mcp --listen HOST:PORT``: the gateway served over streamable HTTP.

One endpoint, ``/mcp``, as the MCP transport specifies it:

* ``POST`` carries one JSON-RPC message. A request is answered with its response as JSON, or
  as an event stream when the gateway has more to send first (an approval put to the client's
  user, progress); a notification or a response gets ``202``.
* Protocol 2025 clients open a session with ``initialize``: the answer carries an
  ``Mcp-Session-Id`` header, each session has a gateway (and an upstream connection) of its
  own, ``GET`` opens its stream of server-initiated messages and ``DELETE`` ends it.
* Protocol 2026-07-28 clients are stateless: their requests (which carry the protocol version
  in ``_meta``) share one gateway, their ids kept apart.

Loopback only unless a bearer token is given (``--token-file`` or ``CALLWARDEN_MCP_TOKEN``);
every request then needs ``Authorization: Bearer TOKEN`` (compared in constant time). The
``Host`` and ``Origin`` headers are checked against DNS rebinding. Every error is JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import itertools
import json
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from callwarden._call import new_id
from callwarden.gateway._proxy import _error, _key
from callwarden.gateway._upstream import _META_PROTOCOL, MAX_MESSAGE, encode, load
from callwarden.net import bearer

__all__ = ["HttpFront", "Runner", "is_loopback", "serve_http"]

# What runs one session: ``runner(session_name)(reader, write)`` until the session ends.
Runner = Callable[[str], Callable[[asyncio.StreamReader, Callable[..., None]],
                                  Awaitable[int]]]

PATH = "/mcp"
_SESSION = "mcp-session-id"
_PROTOCOL = "mcp-protocol-version"
_MODERN = "2026-07-28"
_BACKLOG = 256  # server-initiated messages kept for a session's stream until it opens
_SWEEP = 5.0  # seconds between looks for idle sessions
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_ENDED = {0: "the session is over", 1: "the MCP server behind callwarden could not be reached "
          "(the gateway's log says why)", 3: "the policy halted the session"}


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) stays on this machine."""
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class _Exchange:
    """A POSTed request waiting for its answer (and what comes before it)."""

    __slots__ = ("client_id", "progress", "queue")

    def __init__(self, client_id: Any, progress: Any) -> None:
        self.client_id = client_id
        self.progress = progress  # the request's progress token, if it gave one
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()


class _Session:
    """One MCP session: its gateway runs on a line reader fed by the POSTs."""

    def __init__(self, session_id: str, stateless: bool) -> None:
        self.id = session_id
        self.stateless = stateless  # protocol 2026: ids are kept apart per request
        self.reader = asyncio.StreamReader(limit=MAX_MESSAGE)
        self.exchanges: dict[str, _Exchange] = {}
        self.stream: asyncio.Queue[dict[str, Any] | None] | None = None  # the GET stream
        self.backlog: deque[dict[str, Any]] = deque(maxlen=_BACKLOG)
        self.used = time.monotonic()
        self.task: asyncio.Task[int] | None = None
        self._ids = itertools.count()

    def feed(self, message: dict[str, Any]) -> None:
        self.used = time.monotonic()
        if self.reader.at_eof():  # ended meanwhile: what it owed is answered by _ended
            return
        self.reader.feed_data(encode(message))

    def internal_id(self, client_id: Any) -> Any:
        """The id a request travels under: the client's own in a session, a fresh one when
        stateless requests from many clients share the gateway."""
        return f"http-{next(self._ids)}" if self.stateless else client_id

    def cancelled(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """A stateless client's cancellation, for the one request under way with that id
        (None when there is not exactly one: it was answered, or clients' ids collide)."""
        params = message.get("params")
        given = params.get("requestId") if isinstance(params, dict) else None
        found = [k for k, e in self.exchanges.items() if e.client_id == given]
        if len(found) != 1:
            return None
        return {**message, "params": {**params, "requestId": json.loads(found[0])}}  # type: ignore[dict-item]

    def write(self, message: dict[str, Any], related: Any = None) -> None:
        """A message from the gateway toward the client: a response to the POST that asked,
        anything else to the stream of the request it relates to, else the session's own
        stream (kept for it until it opens)."""
        if "method" not in message:
            exchange = self.exchanges.get(_key(message.get("id")))
            if exchange is not None:
                exchange.queue.put_nowait({**message, "id": exchange.client_id})
                return
        target = self.exchanges.get(_key(related)) if related is not None else None
        params = message.get("params")
        token = params.get("progressToken") if isinstance(params, dict) else None
        if target is None and token is not None:
            target = next((e for e in self.exchanges.values() if e.progress == token), None)
        if target is None and self.stream is None and self.exchanges:
            target = next(reversed(self.exchanges.values()))
        if target is not None:
            target.queue.put_nowait(message)
        else:
            self.stream_or_keep(message)

    def stream_or_keep(self, message: dict[str, Any]) -> None:
        """Onto the session's stream, or kept for it until it opens."""
        if self.stream is not None:
            self.stream.put_nowait(message)
        else:
            self.backlog.append(message)

    def close(self) -> None:
        if not self.reader.at_eof():
            self.reader.feed_eof()


class HttpFront:
    """The ASGI application: MCP's streamable HTTP transport in front of gateway sessions.

    Args:
        runner: Makes the gateway of a new session, given the session's name.
        token: The bearer token every request must carry (None: no token, loopback only).
        origins: ``Origin`` values allowed besides loopback ones.
        max_sessions: Sessions open at once; past it ``initialize`` gets 429.
        idle: Seconds without a request after which a session is closed.
        deadline: Seconds a POST waits for its answer before it gets an error.
        session: The callwarden session every call counts in (default: one per MCP session).
    """

    def __init__(self, runner: Runner, *, token: str | None = None,
                 origins: Iterable[str] = (), max_sessions: int = 32, idle: float = 3600.0,
                 deadline: float = 300.0, session: str | None = None) -> None:
        self._runner = runner
        self._token = token.encode() if token else None
        self._origins = {o.rstrip("/").lower() for o in origins}
        self._max = max_sessions
        self._idle = idle
        self._deadline = deadline
        self._name = session
        self._sessions: dict[str, _Session] = {}
        self._shared: _Session | None = None
        self._sweeper: asyncio.Task[None] | None = None

    # -- sessions -------------------------------------------------------------------------

    def _open(self, stateless: bool) -> _Session:
        session = _Session(new_id(), stateless)
        run = self._runner(self._name or f"mcp-{session.id}")
        session.task = asyncio.ensure_future(run(session.reader, session.write))
        session.task.add_done_callback(lambda _: self._ended(session))
        if stateless:
            self._shared = session
        else:
            self._sessions[session.id] = session
        if self._sweeper is None:
            self._sweeper = asyncio.ensure_future(self._sweep())
        return session

    def _ended(self, session: _Session) -> None:
        """A session's gateway returned: what it still owed gets an error."""
        self._sessions.pop(session.id, None)
        if self._shared is session:
            self._shared = None
        task = session.task
        status = task.result() if task is not None and not task.cancelled() \
            and task.exception() is None else 1
        why = _ENDED.get(status, "the session is over")
        for exchange in list(session.exchanges.values()):
            exchange.queue.put_nowait(_error(exchange.client_id, -32002, f"callwarden: {why}"))
        if session.stream is not None:
            session.stream.put_nowait(None)

    def _close(self, session: _Session) -> None:
        """Ends a session: no request reaches it from now on; its gateway finishes what it
        owes and stops its upstream."""
        self._sessions.pop(session.id, None)
        if self._shared is session:
            self._shared = None
        session.close()

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(min(_SWEEP, self._idle))
            now = time.monotonic()
            for session in [*self._sessions.values(), *filter(None, [self._shared])]:
                if not session.exchanges and session.stream is None \
                        and now - session.used > self._idle:
                    self._close(session)

    async def aclose(self) -> None:
        """Ends every session (their upstreams stop)."""
        if self._sweeper is not None:
            self._sweeper.cancel()
        sessions = [*self._sessions.values(), *filter(None, [self._shared])]
        for session in sessions:
            self._close(session)
        tasks = [s.task for s in sessions if s.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=15.0)

    # -- HTTP -----------------------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[Any]],
                       send: Callable[[Any], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            return
        started = False

        async def sending(event: Any) -> None:
            nonlocal started
            started = True
            await send(event)

        try:
            await self._serve(scope, receive, sending)
        except Exception as e:  # a failure of the gateway's own: still a JSON answer
            print(f"callwarden mcp: {type(e).__name__}: {e}", file=sys.stderr)
            if not started:
                await _reply(send, 500, _error(None, -32603, f"callwarden: {type(e).__name__}: "
                                                             f"{e}"))

    async def _serve(self, scope: dict[str, Any], receive: Callable[[], Awaitable[Any]],
                     send: Callable[[Any], Awaitable[None]]) -> None:
        headers: dict[str, str] = {}
        for name, value in scope.get("headers", []):
            headers[name.decode("latin-1").lower()] = value.decode("latin-1")
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await _reply(send, *refusal)
            return
        method = scope["method"]
        if method == "POST":
            await self._post(headers, receive, send)
        elif method == "GET":
            await self._get(headers, receive, send)
        elif method == "DELETE":
            session = self._sessions.get(headers.get(_SESSION, ""))
            if session is None:
                await _reply(send, 404, _error(None, -32001, "callwarden: no such session"))
                return
            self._close(session)
            await _reply(send, 200, None)
        else:
            await _reply(send, 405, _error(None, -32600, f"callwarden: {method} is not served "
                                                         "here (POST, GET, DELETE)"),
                         [(b"allow", b"POST, GET, DELETE")])

    def _refusal(self, scope: dict[str, Any],
                 headers: dict[str, str]) -> tuple[int, dict[str, Any], list[Any]] | None:
        """Why a request is refused before it is read (status, body, headers), if it is."""
        if self._token is not None:
            given = bearer(headers.get("authorization"))
            if given is None or not hmac.compare_digest(given, self._token):
                return 401, _error(None, -32001, "callwarden: give Authorization: Bearer "
                                                 "TOKEN (the gateway's token)"), \
                    [(b"www-authenticate", b'Bearer realm="callwarden"')]
        host = urlsplit(f"//{headers.get('host', '')}").hostname or ""
        if self._token is None and not is_loopback(host):
            return 403, _error(None, -32001, f"callwarden: Host {host!r} is not this "
                                             "machine (DNS rebinding)"), []
        origin = headers.get("origin")
        if origin is not None and origin.rstrip("/").lower() not in self._origins \
                and not is_loopback(urlsplit(origin).hostname or ""):
            return 403, _error(None, -32001, f"callwarden: Origin {origin!r} is not allowed "
                                             "(--allow-origin)"), []
        if scope.get("path", "").rstrip("/") != PATH:
            return 404, _error(None, -32601, f"callwarden: MCP is served at {PATH}"), []
        return None

    async def _post(self, headers: dict[str, str], receive: Callable[[], Awaitable[Any]],
                    send: Callable[[Any], Awaitable[None]]) -> None:
        if "json" not in headers.get("content-type", "application/json").lower():
            await _reply(send, 415, _error(None, -32700, "callwarden: send Content-Type: "
                                                         "application/json"))
            return
        body = await _body(receive)
        if body is None:
            return  # the client left
        if isinstance(body, int):
            await _reply(send, 413, _error(None, -32700, f"callwarden: a message over "
                                                         f"{MAX_MESSAGE} bytes"))
            return
        try:
            message = load(body)
        except ValueError as e:
            await _reply(send, 400, _error(None, -32700, f"callwarden: not JSON ({e})"))
            return
        if isinstance(message, list):
            await _reply(send, 400, _error(None, -32600, "callwarden: send one JSON-RPC "
                                                         "message per POST (no batches)"))
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            await _reply(send, 400, _error(None, -32600, "callwarden: not a JSON-RPC 2.0 "
                                                         "message object"))
            return
        session = self._session_for(headers, message)
        if isinstance(session, tuple):
            await _reply(send, *session)
            return
        method = message.get("method")
        if not isinstance(method, str) or "id" not in message:
            if session.stateless and method == "notifications/cancelled":
                message = session.cancelled(message)  # under the id its request travels
            if message is not None:
                session.feed(message)
            await _reply(send, 202, None)
            return
        await self._exchange(session, message, headers, receive, send)

    def _session_for(self, headers: dict[str, str], message: dict[str, Any]
                     ) -> _Session | tuple[int, dict[str, Any]]:
        """The session a message belongs to (opened for ``initialize``), or why none."""
        given = headers.get(_SESSION)
        if given is not None:
            session = self._sessions.get(given)
            if session is None:
                return 404, _error(message.get("id"), -32001, "callwarden: no such session "
                                                              "(ended, or never opened): "
                                                              "initialize again")
            return session
        method = message.get("method")
        if method == "initialize":
            if len(self._sessions) >= self._max:
                return 429, _error(message.get("id"), -32001,
                                   f"callwarden: {self._max} sessions are open; end one "
                                   "(DELETE) or try later")
            return self._open(stateless=False)
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        if headers.get(_PROTOCOL) == _MODERN or method == "server/discover" \
                or (isinstance(meta, dict) and _META_PROTOCOL in meta):
            return self._shared or self._open(stateless=True)
        return 400, _error(message.get("id"), -32600, "callwarden: no Mcp-Session-Id: send "
                                                      "initialize first")

    async def _exchange(self, session: _Session, message: dict[str, Any],
                        headers: dict[str, str], receive: Callable[[], Awaitable[Any]],
                        send: Callable[[Any], Awaitable[None]]) -> None:
        """Feeds a request to the session's gateway and answers the POST with what comes
        back for it: the response alone as JSON, or an event stream ending with it."""
        client_id = message["id"]
        internal = session.internal_id(client_id)
        key = _key(internal)
        if key in session.exchanges:
            await _reply(send, 400, _error(client_id, -32600, "callwarden: a request with "
                                                              "this id is under way"))
            return
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        exchange = _Exchange(client_id, meta.get("progressToken")
                             if isinstance(meta, dict) else None)
        session.exchanges[key] = exchange
        extra = [] if session.stateless else [(_SESSION.encode(), session.id.encode())]
        accept = headers.get("accept", "*/*").lower()
        streams = "text/event-stream" in accept or "*/*" in accept
        gone = asyncio.ensure_future(_disconnected(receive))
        try:
            session.feed({**message, "id": internal} if session.stateless else message)
            first = await _next(exchange, gone, self._deadline)
            while first is not None and "method" in first and not streams:
                session.stream_or_keep(first)  # this POST takes JSON only
                first = await _next(exchange, gone, self._deadline)
            if first is None:
                return
            if "method" not in first and ("json" in accept or "*/*" in accept):
                await _reply(send, 200, first, extra)
                return
            await send({"type": "http.response.start", "status": 200, "headers": [
                (b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"),
                *extra]})
            message_out: dict[str, Any] | None = first
            while message_out is not None:
                await send({"type": "http.response.body", "more_body": True,
                            "body": b"event: message\ndata: " + encode(message_out) + b"\n"})
                if "method" not in message_out:
                    break
                message_out = await _next(exchange, gone, self._deadline)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            gone.cancel()
            session.exchanges.pop(key, None)
            session.used = time.monotonic()

    async def _get(self, headers: dict[str, str], receive: Callable[[], Awaitable[Any]],
                   send: Callable[[Any], Awaitable[None]]) -> None:
        """The session's stream of server-initiated messages."""
        session = self._sessions.get(headers.get(_SESSION, ""))
        if session is None:
            status = 404 if _SESSION in headers else 405
            await _reply(send, status, _error(None, -32001, "callwarden: GET needs an open "
                                                            "session (Mcp-Session-Id)"))
            return
        if "text/event-stream" not in headers.get("accept", "").lower():
            await _reply(send, 406, _error(None, -32600, "callwarden: GET serves "
                                                         "text/event-stream only"))
            return
        if session.stream is not None:
            await _reply(send, 409, _error(None, -32600, "callwarden: this session's stream "
                                                         "is already open"))
            return
        stream: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        session.stream = stream
        while session.backlog:
            stream.put_nowait(session.backlog.popleft())
        gone = asyncio.ensure_future(_disconnected(receive))
        try:
            await send({"type": "http.response.start", "status": 200, "headers": [
                (b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"),
                (_SESSION.encode(), session.id.encode())]})
            await send({"type": "http.response.body", "body": b": callwarden\n\n",
                        "more_body": True})
            while True:
                item = asyncio.ensure_future(stream.get())
                await asyncio.wait({item, gone}, return_when=asyncio.FIRST_COMPLETED)
                if not item.done():
                    item.cancel()
                    break
                message = item.result()
                if message is None:
                    break
                await send({"type": "http.response.body", "more_body": True,
                            "body": b"event: message\ndata: " + encode(message) + b"\n"})
            with contextlib.suppress(Exception):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            gone.cancel()
            if session.stream is stream:
                session.stream = None


async def _next(exchange: _Exchange, gone: asyncio.Future[None],
                deadline: float) -> dict[str, Any] | None:
    """The next message for a POST; None when its client left; an error past the deadline."""
    item: asyncio.Future[Any] = asyncio.ensure_future(exchange.queue.get())
    done, _ = await asyncio.wait([item, gone], timeout=deadline,
                                 return_when=asyncio.FIRST_COMPLETED)
    if item in done:
        message: dict[str, Any] = item.result()
        return message
    item.cancel()
    if gone in done:
        return None
    return _error(exchange.client_id, -32002, f"callwarden: no answer within {deadline:g} s")


async def _disconnected(receive: Callable[[], Awaitable[Any]]) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _body(receive: Callable[[], Awaitable[Any]]) -> bytes | int | None:
    """The request body; its size when over the cap; None when the client left."""
    body = bytearray()
    while True:
        event = await receive()
        if event["type"] == "http.disconnect":
            return None
        body += event.get("body", b"")
        if len(body) > MAX_MESSAGE:
            return len(body)
        if not event.get("more_body"):
            return bytes(body)


async def _reply(send: Callable[[Any], Awaitable[None]], status: int,
                 body: dict[str, Any] | None, headers: list[Any] | None = None) -> None:
    payload = b"" if body is None else encode(body)
    out = [*(headers or [])]
    if body is not None:
        out.append((b"content-type", b"application/json"))
    await send({"type": "http.response.start", "status": status,
                "headers": [*out, (b"content-length", str(len(payload)).encode())]})
    await send({"type": "http.response.body", "body": payload})


def serve_http(front: HttpFront, host: str, port: int) -> int:
    """Serves ``front`` on ``host:port`` until SIGTERM / SIGINT, then ends every session;
    returns the exit status."""
    from callwarden.net import serve_app

    return serve_app(lambda: front, host, port, name="callwarden mcp", path=PATH,
                     lifespan="off", on_exit=front.aclose)
