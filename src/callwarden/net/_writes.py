"""One write per answer: uvicorn writes an answer's status line and headers, then its body,
with two ``transport.write`` calls, and on an idle socket each is its own system call and
its own TCP segment. Here the head of an answer waits for the write that follows it (its
body) and both leave together; a head with nothing after it in the same turn of the event
loop (a streamed answer's first chunk still coming) leaves at the end of that turn.
Everything else of the transport is the transport's own."""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["coalescing"]


class _Transport:
    """A transport whose header blocks wait for the next write (or the end of the turn)."""

    __slots__ = ("_held", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._transport.write(held + bytes(data))
        elif data[-4:] == b"\r\n\r\n" and data[:5] == b"HTTP/":  # an answer's head
            self._held = bytes(data)
            self._loop.call_soon(self.flush)
        else:
            self._transport.write(data)

    def flush(self) -> None:
        held = self._held
        if held is not None:
            self._held = None
            if not self._transport.is_closing():
                self._transport.write(held)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def coalescing(protocol: type[asyncio.Protocol]) -> type[asyncio.Protocol]:
    """``protocol`` (uvicorn's HTTP protocol class) writing each answer at once."""

    class Coalescing(protocol):  # type: ignore[valid-type,misc]
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            self.transport = _Transport(transport, asyncio.get_running_loop())  # type: ignore[arg-type]

    Coalescing.__name__ = Coalescing.__qualname__ = f"Coalescing{protocol.__name__}"
    return Coalescing
