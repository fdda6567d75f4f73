"""An answer's head and body leave in one write (``callwarden.net._writes``), over a real
loopback connection: the head waits for the body, or for the end of the event loop's turn
when nothing follows it, and nothing held is lost when the connection closes."""

from __future__ import annotations

import asyncio
import http.client
import socket
from typing import Any
from urllib.parse import urlsplit

import uvicorn
from test_serve import TIMEOUT, Service
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from callwarden.net._writes import _Transport, coalescing

HEAD = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"


class Counted:
    """A real transport, with the writes that reach it counted."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))
        self.transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


async def _connected() -> tuple[Counted, _Transport, socket.socket]:
    """A transport over one end of a loopback TCP connection, and the other end."""
    loop = asyncio.get_running_loop()
    listener = socket.create_server(("127.0.0.1", 0))
    peer = socket.create_connection(listener.getsockname())
    ours, _ = listener.accept()
    listener.close()
    ours.setblocking(False)
    transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)
    counted = Counted(transport)  # type: ignore[arg-type]
    peer.settimeout(TIMEOUT)
    return counted, _Transport(counted, loop), peer  # type: ignore[arg-type]


def _read(peer: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = peer.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


async def test_a_head_and_its_body_leave_in_one_write() -> None:
    counted, transport, peer = await _connected()
    transport.write(HEAD)
    assert counted.writes == []  # held for the body
    transport.write(b"ok")
    assert counted.writes == [HEAD + b"ok"]
    assert await asyncio.to_thread(_read, peer, len(HEAD) + 2) == HEAD + b"ok"
    transport.close()
    peer.close()


async def test_a_head_with_nothing_after_it_leaves_at_the_end_of_the_turn() -> None:
    counted, transport, peer = await _connected()
    transport.write(HEAD)
    await asyncio.sleep(0)  # the turn ends
    assert counted.writes == [HEAD]
    transport.write(b"ok")  # a streamed body's chunk, later: on its own
    assert counted.writes == [HEAD, b"ok"]
    assert await asyncio.to_thread(_read, peer, len(HEAD) + 2) == HEAD + b"ok"
    transport.close()
    peer.close()


async def test_what_is_not_a_head_is_written_at_once_and_close_sends_what_is_held() -> None:
    counted, transport, peer = await _connected()
    transport.write(b"chunk\r\n\r\n")  # ends like a head, is not one
    assert counted.writes == [b"chunk\r\n\r\n"]
    transport.write(HEAD)
    transport.close()  # a connection closed after its last head: the head still goes
    assert counted.writes[-1] == HEAD
    # then the end of the stream
    assert await asyncio.to_thread(_read, peer, 100) == b"chunk\r\n\r\n" + HEAD
    peer.close()


async def test_abort_drops_what_is_held() -> None:
    counted, transport, peer = await _connected()
    transport.write(HEAD)
    transport.abort()
    await asyncio.sleep(0)
    assert counted.writes == []
    assert await asyncio.to_thread(_read, peer, 100) == b""  # reset or closed, nothing written
    peer.close()


def test_the_protocol_is_uvicorns_own_with_its_transport_wrapped() -> None:
    protocol = coalescing(AutoHTTPProtocol)
    assert issubclass(protocol, AutoHTTPProtocol)
    assert protocol.__name__ == f"Coalescing{AutoHTTPProtocol.__name__}"
    config = uvicorn.Config(app=None, http=protocol)
    config.load()
    assert config.http_protocol_class is protocol


def test_the_service_answers_whole_on_kept_alive_connections(service: Service) -> None:
    """Several answers on one connection, a HEAD (a head alone) among them, each whole."""
    parts = urlsplit(service.url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=TIMEOUT)
    try:
        for method in ("GET", "HEAD", "GET"):
            connection.request(method, "/healthz")
            response = connection.getresponse()
            body = response.read()
            assert response.status == 200
            assert (body == b"") == (method == "HEAD")
            assert response.getheader("content-length")
    finally:
        connection.close()
