"""Raw routes (``callwarden.net._raw``): a POST sent whole to a route the app names is
answered from the parser, everything else the ASGI way, over real loopback connections to a
real uvicorn server; and ``callwarden serve``'s decide answers the same either way."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import uvicorn
from test_serve import TIMEOUT, TOKENS, Service
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from callwarden.net._raw import RawRoute, raw_routes
from callwarden.net._writes import coalescing


class App:
    """An ASGI app that echoes bodies (``asgi:``), with one raw route, ``/raw`` (``raw:``)."""

    def __init__(self) -> None:
        self.asgi: list[tuple[str, str, bytes]] = []
        self.raw: list[bytes] = []
        self.release = asyncio.Event()
        self.release.set()
        self.raw_routes = {b"/raw": RawRoute(self.handle, 100)}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.asgi.append((scope["method"], scope["path"], body))
        answer = b"asgi:" + body
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", str(len(answer)).encode())]})
        await send({"type": "http.response.body", "body": answer})

    async def handle(self, headers: list[tuple[bytes, bytes]], body: bytes
                     ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        self.raw.append(body)
        await self.release.wait()
        if body == b"raise":
            raise RuntimeError("a bug in the handler")
        seen = dict(headers).get(b"x-seen", b"")
        answer = b"raw:" + body + seen
        return 201, [(b"content-length", str(len(answer)).encode())], answer


async def handed(app: App) -> None:
    """Until the raw handler has a request."""
    async with asyncio.timeout(TIMEOUT):
        while not app.raw:
            await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def serving(app: App, keep_alive: float = 5) -> AsyncIterator[tuple[uvicorn.Server, int]]:
    config = uvicorn.Config(app, lifespan="off", log_level="warning", access_log=False,
                            http=coalescing(raw_routes(AutoHTTPProtocol)),
                            timeout_keep_alive=keep_alive)
    server = uvicorn.Server(config)
    sock = socket.create_server(("127.0.0.1", 0))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async with asyncio.timeout(TIMEOUT):
            while not server.started:
                await asyncio.sleep(0.01)
        yield server, sock.getsockname()[1]
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, TIMEOUT)
        sock.close()


def post(path: str, body: bytes, *extra: str, version: str = "1.1") -> bytes:
    head = [f"POST {path} HTTP/{version}", "Host: t", f"Content-Length: {len(body)}", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def answers(reader: asyncio.StreamReader, count: int) -> list[tuple[int, dict[str, str],
                                                                           bytes]]:
    """``count`` answers read off a connection: status, headers, body (an interim
    ``100 Continue`` skipped)."""
    out: list[tuple[int, dict[str, str], bytes]] = []
    async with asyncio.timeout(TIMEOUT):
        while len(out) < count:
            status = int((await reader.readline()).split()[1])
            headers = {}
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                headers[name.lower()] = value.strip()
            if status == 100:
                continue
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            out.append((status, headers, body))
    return out


async def exchange(port: int, data: bytes, count: int = 1) -> list[tuple[int, dict[str, str],
                                                                          bytes]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        return await answers(reader, count)
    finally:
        writer.close()


async def test_a_post_sent_whole_to_a_raw_route_is_answered_raw_on_a_kept_alive_connection(
        ) -> None:
    app = App()
    async with serving(app) as (_, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for body in (b"one", b"two", b""):
            writer.write(post("/raw", body, "X-Seen: !"))
            (status, headers, answer), = await answers(reader, 1)
            assert (status, answer) == (201, b"raw:" + body + b"!")
            assert "date" in headers and headers.get("connection") != "close"
        writer.close()
    assert app.raw == [b"one", b"two", b""] and app.asgi == []


@pytest.mark.parametrize("request_bytes, why", [
    (b"POST /raw HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
     "chunked"),
    (post("/raw", b"x" * 101), "over the cap"),
    (post("/raw?q=1", b"abc"), "another target"),
    (post("/raw", b"abc", "Expect: 100-continue"), "expects 100-continue"),
    (b"PUT /raw HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc", "another method"),
    (post("/other", b"abc"), "another route"),
])
async def test_what_is_not_a_whole_post_to_a_raw_route_goes_the_asgi_way(
        request_bytes: bytes, why: str) -> None:
    app = App()
    async with serving(app) as (_, port):
        (status, _, answer), = await exchange(port, request_bytes)
    assert status == 200 and answer.startswith(b"asgi:"), why
    assert app.raw == [] and len(app.asgi) == 1, why


async def test_pipelined_requests_are_answered_in_order() -> None:
    """Three requests in one write: the second arrives while the first is being answered
    raw, so it waits behind it (the ASGI way, as uvicorn queues it); all answered in order."""
    app = App()
    app.release.clear()
    async with serving(app) as (_, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(post("/raw", b"a") + post("/raw", b"b") + post("/other", b"c"))
        await asyncio.sleep(0.05)
        app.release.set()
        got = await answers(reader, 3)
        writer.close()
    assert [body for _, _, body in got] == [b"raw:a", b"asgi:b", b"asgi:c"]


async def test_connection_close_and_http_1_0_close_after_the_answer() -> None:
    app = App()
    async with serving(app) as (_, port):
        for data in (post("/raw", b"bye", "Connection: close"), post("/raw", b"old",
                                                                      version="1.0")):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(data)
            (status, headers, answer), = await answers(reader, 1)
            assert answer == b"raw:" + data.rpartition(b"\r\n\r\n")[2]
            assert status == 201 and headers["connection"] == "close"
            async with asyncio.timeout(TIMEOUT):
                assert await reader.read() == b""  # the server closed it
            writer.close()
    assert app.raw == [b"bye", b"old"]


async def test_an_idle_kept_alive_connection_is_closed_after_the_keep_alive_timeout() -> None:
    """After a raw answer, a connection nothing comes on is closed once the keep-alive
    timeout has passed (not before), as uvicorn closes one after an ASGI answer."""
    app = App()
    async with serving(app, keep_alive=0.5) as (_, port):
        for first in (post("/raw", b"a"), post("/other", b"b")):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(first)
            await answers(reader, 1)
            answered = asyncio.get_running_loop().time()
            writer.write(post("/raw", b"again"))  # within the timeout: still open
            (status, _, _), = await answers(reader, 1)
            again = asyncio.get_running_loop().time()
            async with asyncio.timeout(TIMEOUT):
                assert await reader.read() == b""  # then closed, idle
            closed = asyncio.get_running_loop().time()
            writer.close()
            assert status == 201 and closed - again >= 0.5 - 0.05, (answered, again, closed)


async def test_a_handler_that_raises_is_a_500_and_the_connection_goes_on(
        capsys: pytest.CaptureFixture[str]) -> None:
    app = App()
    async with serving(app) as (_, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(post("/raw", b"raise"))
        (status, _, _), = await answers(reader, 1)
        writer.write(post("/raw", b"fine"))
        (again, _, answer), = await answers(reader, 1)
        writer.close()
    assert status == 500 and (again, answer) == (201, b"raw:fine")
    assert "RuntimeError: a bug in the handler" in capsys.readouterr().err


async def test_a_client_gone_before_its_answer_leaves_the_server_serving() -> None:
    app = App()
    app.release.clear()
    async with serving(app) as (_, port):
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(post("/raw", b"gone"))
        await writer.drain()
        await handed(app)
        writer.close()
        await asyncio.sleep(0.05)
        app.release.set()
        (status, _, answer), = await exchange(port, post("/raw", b"next"))
    assert (status, answer) == (201, b"raw:next")


async def test_a_graceful_shutdown_waits_for_a_raw_answer() -> None:
    app = App()
    app.release.clear()
    async with serving(app) as (server, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(post("/raw", b"late"))
        await handed(app)
        server.should_exit = True  # the server starts stopping while the answer is pending
        await asyncio.sleep(0.2)
        app.release.set()
        (status, _, answer), = await answers(reader, 1)
        writer.close()
    assert (status, answer) == (201, b"raw:late")


def _over_socket(service: Service, data: bytes) -> tuple[int, dict[str, str], Any]:
    parts = urlsplit(service.url)
    assert parts.port is not None

    async def run() -> tuple[int, dict[str, str], bytes]:
        (status, headers, body), = await exchange(parts.port, data)  # type: ignore[arg-type]
        return status, headers, body

    status, headers, body = asyncio.run(run())
    return status, headers, json.loads(body)


def _decide_bytes(body: bytes, *, chunked: bool, token: str | None = TOKENS["agent"]) -> bytes:
    head = ["POST /v1/decide HTTP/1.1", "Host: t", "Content-Type: application/json"]
    if token is not None:
        head.append(f"Authorization: Bearer {token}")
    if chunked:  # read by the ASGI app, not the parser
        head.append("Transfer-Encoding: chunked")
        sent = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n" if body else b"0\r\n\r\n"
    else:
        head.append(f"Content-Length: {len(body)}")
        sent = body
    return ("\r\n".join(head) + "\r\n\r\n").encode() + sent


_SAME = ("effect", "rule", "reasons", "matched", "message", "args", "approval_request")


def test_the_service_decides_the_same_raw_and_the_asgi_way(service: Service) -> None:
    cases = {
        "allowed": json.dumps({"tool": "read_file", "args": {"path": "a"}}).encode(),
        "denied": json.dumps({"tool": "delete_file", "args": {"path": "a"}}).encode(),
        "rewritten": json.dumps({"tool": "search", "args": {"q": "x", "limit": 50}}).encode(),
        "not json": b"{nope",
        "empty": b"",
        "no tool": b'{"args": {}}',
        "not an object": b"[1]",
    }
    for name, body in cases.items():
        raw = _over_socket(service, _decide_bytes(body, chunked=False))
        asgi = _over_socket(service, _decide_bytes(body, chunked=True))
        assert raw[0] == asgi[0], name
        assert raw[1]["content-type"] == asgi[1]["content-type"] == "application/json", name
        if raw[0] == 200:
            assert {k: raw[2][k] for k in _SAME} == {k: asgi[2][k] for k in _SAME}, name
        else:
            assert raw[2] == asgi[2], name
    for token in (None, "not-a-token-0123456789", TOKENS["approver"]):
        raw = _over_socket(service, _decide_bytes(b'{"tool": "x"}', chunked=False, token=token))
        asgi = _over_socket(service, _decide_bytes(b'{"tool": "x"}', chunked=True, token=token))
        assert raw[0] == asgi[0] and raw[0] in (401, 403) and raw[2] == asgi[2]
        assert raw[1].get("www-authenticate") == asgi[1].get("www-authenticate")


def test_only_the_httptools_protocol_takes_raw_routes() -> None:
    from uvicorn.protocols.http.h11_impl import H11Protocol
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    assert raw_routes(H11Protocol) is H11Protocol  # everything the ASGI way there
    raw = raw_routes(HttpToolsProtocol)
    assert issubclass(raw, HttpToolsProtocol) and raw is not HttpToolsProtocol
