"""The MCP server behind the gateway: a process speaking MCP over its stdin / stdout, or a
server at a URL speaking streamable HTTP (through the MCP SDK's client transport)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

__all__ = ["MAX_MESSAGE", "NOT_TEXT", "HttpUpstream", "ProcessUpstream", "Upstream", "encode", "load",
           "not_text", "read_line"]

_META_PROTOCOL = "io.modelcontextprotocol/protocolVersion"
MAX_MESSAGE = 16 * 1024 * 1024  # one JSON-RPC message (a line) at most
_STOP_GRACE = 2.0  # seconds the server gets to exit after its stdin closes


class Upstream(Protocol):
    """Where the gateway forwards: JSON-RPC messages (dicts) out and in."""

    async def start(self) -> None:
        """Connects (raises when the server cannot be reached)."""

    def send(self, message: dict[str, Any]) -> None:
        """Sends a message (without waiting)."""

    def messages(self) -> AsyncIterator[dict[str, Any] | None]:
        """The server's messages until it goes away; None for one that could not be read."""

    async def stop(self) -> None:
        """Disconnects (stops a server process)."""


def encode(message: Mapping[str, Any]) -> bytes:
    """A JSON-RPC message as one line of UTF-8; a lone surrogate (which a client may send
    escaped, in an id or a name) leaves escaped as it came, so every message can be sent."""
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode() + b"\n"
    except UnicodeEncodeError:
        return json.dumps(message, separators=(",", ":")).encode() + b"\n"


NOT_TEXT = ("callwarden: the message holds a lone surrogate (such as \\ud800): not text, which "
            "no MCP server reads, so it is not passed on; send text")


def load(line: bytes | str) -> Any:
    """A JSON-RPC message read from JSON.

    Raises:
        ValueError: not JSON, or nested past what the JSON reader takes (its RecursionError).
    """
    try:
        return json.loads(line)
    except RecursionError:
        raise ValueError("its values are nested too deeply") from None


def not_text(value: Any) -> str | None:
    """A string in ``value`` (a message read from JSON) that is not text: one holding a lone
    surrogate, which no UTF-8 reader takes; None when every string is text. Walked with a
    stack of its own, so a message nested as deep as JSON allows is walked too."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if not item.isascii():
                try:
                    item.encode()
                except UnicodeEncodeError:
                    return item
        elif isinstance(item, Mapping):
            pending += item.keys()
            pending += item.values()
        elif isinstance(item, list | tuple):
            pending += item
    return None


async def read_line(reader: asyncio.StreamReader, limit: int) -> bytes | Exception | None:
    """The next line; None at the end; an exception for a line over ``limit`` bytes (the
    rest of it is skipped)."""
    try:
        return await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as e:
        return e.partial or None
    except asyncio.LimitOverrunError as e:
        await reader.readexactly(e.consumed)
        while True:  # drop the rest of the oversized line
            try:
                await reader.readuntil(b"\n")
                break
            except asyncio.LimitOverrunError as more:
                await reader.readexactly(more.consumed)
            except asyncio.IncompleteReadError:
                break
        return ValueError(f"a message longer than {limit} bytes was dropped")


class ProcessUpstream:
    """An MCP server started as a process, over its stdin / stdout."""

    def __init__(self, command: list[str], env: Mapping[str, str] | None = None) -> None:
        self.command = command
        self.env = dict(env) if env is not None else None
        self._process: asyncio.subprocess.Process | None = None

    def __str__(self) -> str:
        return " ".join(self.command)

    async def start(self) -> None:
        self._process = await asyncio.create_subprocess_exec(
            *self.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            limit=MAX_MESSAGE, env=self.env)

    def send(self, message: dict[str, Any]) -> None:
        assert self._process is not None and self._process.stdin is not None
        if not self._process.stdin.is_closing():
            self._process.stdin.write(encode(message))

    async def messages(self) -> AsyncIterator[dict[str, Any] | None]:
        assert self._process is not None and self._process.stdout is not None
        while True:
            line = await read_line(self._process.stdout, MAX_MESSAGE)
            if line is None:
                return
            if isinstance(line, Exception) or not line.strip():
                yield None
                continue
            try:
                message = load(line)
            except ValueError:
                yield None
                continue
            yield message if isinstance(message, dict) else None

    async def stop(self) -> None:
        """Closes the server's stdin, then stops it if it does not exit by itself."""
        process = self._process
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(Exception):
            assert process.stdin is not None
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), _STOP_GRACE)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()


class HttpUpstream:
    """An MCP server at a URL, over streamable HTTP (the MCP SDK's client transport), with
    extra request headers (e.g. ``Authorization``)."""

    def __init__(self, url: str, headers: Mapping[str, str] | None = None) -> None:
        self.url = url
        self.headers = dict(headers or {})
        self._stack = contextlib.AsyncExitStack()
        self._outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._failed = asyncio.Event()
        self._streams: Any = None
        self._pump: asyncio.Task[None] | None = None
        self._param_headers: dict[str, dict[tuple[str, ...], str]] = {}

    def __str__(self) -> str:
        return self.url

    async def start(self) -> None:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        client = await self._stack.enter_async_context(
            create_mcp_http_client(headers=self.headers))
        self._streams = await self._stack.enter_async_context(
            streamable_http_client(self.url, http_client=client))
        self._pump = asyncio.ensure_future(self._send_all())

    def send(self, message: dict[str, Any]) -> None:
        self._outbox.put_nowait(message)

    async def _send_all(self) -> None:
        from mcp.shared.message import ClientMessageMetadata, SessionMessage
        from mcp_types.jsonrpc import jsonrpc_message_adapter

        write = self._streams[1]
        try:
            while True:
                message = await self._outbox.get()
                try:
                    parsed = jsonrpc_message_adapter.validate_python(message)
                except ValueError:
                    continue  # not a JSON-RPC message the transport can carry
                headers = self._headers(message)
                await write.send(SessionMessage(parsed, metadata=ClientMessageMetadata(
                    headers=headers) if headers else None))
        except Exception:  # the transport is gone: the gateway ends, failing what it owed
            self._failed.set()

    def _headers(self, message: dict[str, Any]) -> dict[str, str]:
        """The headers a request of protocol 2026-07-28 or later mirrors (its version, method,
        name and the ``Mcp-Param-*`` of the arguments it is sent with, which may be the
        policy's rewrite); none for an earlier protocol's."""
        from mcp.shared.inbound import (
            MCP_METHOD_HEADER,
            MCP_NAME_HEADER,
            MCP_PROTOCOL_VERSION_HEADER,
            NAME_BEARING_METHODS,
            encode_header_value,
            mcp_param_headers,
        )

        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        version = meta.get(_META_PROTOCOL) if isinstance(meta, dict) else None
        method = message.get("method")
        if not isinstance(version, str) or not isinstance(method, str):
            return {}
        headers = {MCP_PROTOCOL_VERSION_HEADER: version, MCP_METHOD_HEADER: method}
        name = params.get(NAME_BEARING_METHODS.get(method, ""))  # type: ignore[union-attr]
        if isinstance(name, str):
            headers[MCP_NAME_HEADER] = encode_header_value(name)
        arguments = params.get("arguments")  # type: ignore[union-attr]
        if method == "tools/call" and isinstance(name, str) and isinstance(arguments, dict) \
                and name in self._param_headers:
            headers.update(mcp_param_headers(self._param_headers[name], arguments))
        return headers

    def _learn_tools(self, message: dict[str, Any]) -> None:
        """Which arguments each listed tool mirrors into ``Mcp-Param-*`` headers."""
        from mcp.shared.inbound import find_invalid_x_mcp_header, x_mcp_header_map

        result = message.get("result")
        tools = result.get("tools") if isinstance(result, dict) else None
        for tool in tools if isinstance(tools, list) else ():
            if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                schema = tool.get("inputSchema")
                if find_invalid_x_mcp_header(schema) is None:
                    self._param_headers[tool["name"]] = x_mcp_header_map(schema)

    async def messages(self) -> AsyncIterator[dict[str, Any] | None]:
        from mcp_types.jsonrpc import jsonrpc_message_adapter

        read = self._streams[0]
        while not self._failed.is_set():
            receive = asyncio.ensure_future(read.receive())
            failed = asyncio.ensure_future(self._failed.wait())
            try:
                await asyncio.wait({receive, failed}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                failed.cancel()
                if not receive.done():
                    receive.cancel()
            if receive.cancelled() or receive.exception() is not None:
                return  # the stream ended, or the transport failed
            item = receive.result()
            if isinstance(item, Exception):
                yield None
                continue
            message = jsonrpc_message_adapter.dump_python(item.message, by_alias=True,
                                                          mode="json", exclude_unset=True)
            self._learn_tools(message)
            yield message

    async def stop(self) -> None:
        import anyio

        if self._pump is not None:
            self._pump.cancel()
        # In the task that entered the transport (its cancel scopes require it), bounded.
        with anyio.move_on_after(_STOP_GRACE), contextlib.suppress(Exception):
            await self._stack.aclose()
