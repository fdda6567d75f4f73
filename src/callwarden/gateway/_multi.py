"""``callwarden mcp --config servers.json``: several MCP servers behind one gateway.

The servers come from a config in the ``mcpServers`` format clients use (``command`` /
``args`` / ``env``, or ``url`` / ``headers``). The client sees one server, named
``callwarden``, offering every server's tools as ``SERVER__TOOL``; the policy sees them as
``mcp__SERVER__TOOL``. Each server has a gateway of its own (``Gateway``: decisions, pins,
screening, timeouts); this router answers the handshake, merges ``tools/list``, sends each
``tools/call`` to its server, and carries the servers' own requests (sampling, elicitation,
roots) to the client and the answers back. Every page of each server's ``tools/list`` is read
and offered as one. The servers' resources and prompts are not offered.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from callwarden import __version__
from callwarden._call import new_id
from callwarden._guard import Guard
from callwarden.gateway._proxy import Gateway, _error, _Forwarded, server_slug
from callwarden.gateway._upstream import (
    MAX_MESSAGE,
    NOT_TEXT,
    HttpUpstream,
    ProcessUpstream,
    Upstream,
    load,
    not_text,
    read_line,
)

__all__ = ["Router", "load_servers"]

_SEPARATOR = "__"
_NOT_OFFERED = -32601
_HANDSHAKE_TIMEOUT = 60.0
_PAGES = 100  # tools/list pages read from one server at most


def load_servers(text: str) -> dict[str, Upstream]:
    """The upstreams of an ``mcpServers`` config, by their names in tool names.

    Raises:
        ValueError: not such a config, or a server that is neither a command nor a URL.
    """
    try:
        config = json.loads(text)
    except ValueError as e:
        raise ValueError(f"not JSON ({e})") from None
    servers = config.get("mcpServers") if isinstance(config, dict) else None
    if not isinstance(servers, dict) or not servers:
        raise ValueError("no 'mcpServers' object with at least one server")
    out: dict[str, Upstream] = {}
    for name, server in servers.items():
        slug = server_slug(name)
        if slug in out:
            raise ValueError(f"two servers are named {slug!r} in tool names")
        if not isinstance(server, Mapping):
            raise ValueError(f"{name}: not an object")
        if isinstance(server.get("command"), str) and server["command"]:
            args, env = server.get("args", []), server.get("env", {})
            if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                raise ValueError(f"{name}: 'args' must be a list of strings")
            if not isinstance(env, Mapping) or not all(isinstance(v, str) for v in env.values()):
                raise ValueError(f"{name}: 'env' must map names to strings")
            out[slug] = ProcessUpstream([server["command"], *args],
                                        env={**os.environ, **env} if env else None)
        elif isinstance(server.get("url"), str) and server["url"]:
            headers = server.get("headers", {})
            if not isinstance(headers, Mapping) or not all(
                    isinstance(v, str) for v in headers.values()):
                raise ValueError(f"{name}: 'headers' must map names to strings")
            out[slug] = HttpUpstream(server["url"], headers)
        else:
            raise ValueError(f"{name}: give a 'command' or a 'url'")
    return out


class Router:
    """One MCP endpoint in front of several servers, each decided by the same policy."""

    def __init__(self, guard: Guard, upstreams: Mapping[str, Upstream], *,
                 hide_refused: bool | None = None, call_timeout: float = 120.0,
                 session: str | None = None, pin: bool | None = None) -> None:
        session = session or f"mcp-{new_id()}"
        self._upstreams = dict(upstreams)
        self._cores = {name: Gateway(guard, server=name, hide_refused=hide_refused,
                                     call_timeout=call_timeout, session=session, pin=pin)
                       for name in upstreams}
        self._timeout = call_timeout
        self._write: Callable[..., None] = lambda *_, **__: None
        self._awaited: dict[str, asyncio.Future[Any]] = {}  # our requests to the servers
        self._relayed: dict[str, tuple[str, Any]] = {}  # the servers' requests to the client
        self._live: set[str] = set()
        self._jobs: set[asyncio.Task[None]] = set()  # handshakes and listings under way

    async def serve(self, client: asyncio.StreamReader, write: Callable[..., None]) -> int:
        """Runs until the client leaves, a call halts the session, or every server is gone."""
        self._write = write
        started: list[str] = []
        tasks: list[asyncio.Future[Any]] = []
        try:
            for name, upstream in self._upstreams.items():
                try:
                    await upstream.start()
                except Exception as e:
                    print(f"callwarden mcp: cannot reach the MCP server {name} ({upstream}): "
                          f"{e}", file=sys.stderr)
                    return 1
                started.append(name)
                core = self._cores[name]
                core._to_server = upstream.send
                core._to_client = self._from(name)
                self._live.add(name)
                tasks.append(asyncio.ensure_future(self._watch(name, upstream)))
            reading = asyncio.ensure_future(self._from_client(client))
            halts = [asyncio.ensure_future(c._ended.wait()) for c in self._cores.values()]
            tasks += [reading, *halts]
            await asyncio.wait([reading, *halts], return_when=asyncio.FIRST_COMPLETED)
            if reading.done() and not any(h.done() for h in halts):
                # The client left: what it is owed still reaches it (bounded).
                drained = asyncio.ensure_future(self._drained())
                tasks.append(drained)
                await asyncio.wait([drained], timeout=min(self._timeout, 10.0))
        finally:
            for task in [*tasks, *self._jobs]:
                task.cancel()
            for name in started:
                core = self._cores[name]
                for call in core._calls:
                    call.cancel()
                core._fail_pending("the MCP server behind callwarden is gone; the call's "
                                   "outcome is unknown")
                await self._upstreams[name].stop()
        halted = any(c._halted is not None for c in self._cores.values())
        return 3 if halted else 0

    async def _drained(self) -> None:
        while self._jobs or any(c._pending or c._calls for c in self._cores.values()):
            await asyncio.sleep(0.01)

    async def _watch(self, name: str, upstream: Upstream) -> None:
        """A server's messages; when it goes, the calls it owed fail and its tools go."""
        core = self._cores[name]
        try:
            await core._from_server(upstream)
        finally:
            self._live.discard(name)
            core._fail_pending(f"the MCP server {name} behind callwarden is gone; the call's "
                               "outcome is unknown")

    def _from(self, name: str) -> Callable[..., None]:
        """What a server's gateway sends toward the client, routed."""
        def route(message: dict[str, Any], related: Any = None) -> None:
            msg_id = message.get("id")
            if "method" not in message and isinstance(msg_id, str) \
                    and msg_id in self._awaited:
                self._awaited.pop(msg_id).set_result(message)  # answers our own request
                return
            if "method" in message and "id" in message and not str(msg_id).startswith(
                    "callwarden-"):
                relayed = f"callwarden-relay-{new_id()}"  # a server's request to the client
                self._relayed[relayed] = (name, msg_id)
                message = {**message, "id": relayed}
            self._write(message, related=related)
        return route

    # -- the client's messages ------------------------------------------------------------

    async def _from_client(self, reader: asyncio.StreamReader) -> None:
        while True:
            line = await read_line(reader, MAX_MESSAGE)
            if line is None:
                return
            if isinstance(line, Exception) or not line.strip():
                if isinstance(line, Exception):
                    self._write(_error(None, -32700, f"callwarden: {line}"))
                continue
            try:
                message = load(line)
            except ValueError as e:
                self._write(_error(None, -32700, f"callwarden: not JSON ({e})"))
                continue
            if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
                msg_id = message.get("id") if isinstance(message, dict) else None
                self._write(_error(msg_id, -32600,
                                   "callwarden: not a JSON-RPC 2.0 message object"))
                continue
            if not_text(message) is not None:
                if "id" in message:
                    self._write(_error(message["id"], -32600, NOT_TEXT))
                continue
            await self._route(message)

    async def _route(self, message: dict[str, Any]) -> None:
        method, msg_id = message.get("method"), message.get("id")
        if method is None:  # the client's answer to a request
            if isinstance(msg_id, str) and msg_id in self._relayed:
                name, original = self._relayed.pop(msg_id)
                if name in self._live:
                    self._cores[name]._to_server({**message, "id": original})
                return
            for core in self._cores.values():
                if isinstance(msg_id, str) and msg_id in core._answers:
                    core._answers.pop(msg_id).set_result(message)
                    return
            return
        if "id" not in message:  # a notification: every server hears it
            for name in self._live:
                self._cores[name]._to_server(message)
            return
        if method in ("initialize", "server/discover"):
            self._spawn(self._handshake(message), msg_id)
        elif method == "tools/list":
            self._spawn(self._list(message), msg_id)
        elif method == "tools/call":
            await self._call(message)
        elif method == "ping":
            self._write({"jsonrpc": "2.0", "id": msg_id, "result": {}})
        else:
            self._write(_error(msg_id, _NOT_OFFERED, f"callwarden: {method!r} is not offered "
                                                     "by a gateway in front of several servers"))

    def _spawn(self, job: Coroutine[Any, Any, None], msg_id: Any) -> None:
        """Runs a request's work as a task; a failure answers it with an error."""
        async def guarded() -> None:
            try:
                await job
            except Exception as e:
                with contextlib.suppress(Exception):
                    self._write(_error(msg_id, -32603, f"callwarden: {type(e).__name__}: {e}"))

        task = asyncio.ensure_future(guarded())
        self._jobs.add(task)
        task.add_done_callback(self._jobs.discard)

    def _ask(self, name: str, message: dict[str, Any]) -> asyncio.Future[Any]:
        """Sends a request to one server (through its gateway); its answer, to come."""
        core = self._cores[name]
        ask_id = f"callwarden-{name}-{new_id()}"
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._awaited[ask_id] = answer
        core._track(_Forwarded(message["method"], ask_id))
        core._to_server({**message, "id": ask_id})
        return answer

    async def _ask_all(self, message: dict[str, Any]) -> dict[str, Any]:
        """Sends a request to every live server (through its gateway); their answers."""
        asked = {name: self._ask(name, message) for name in sorted(self._live)}
        answers = {}
        for name, future in asked.items():
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                answers[name] = await asyncio.wait_for(future, _HANDSHAKE_TIMEOUT)
        return answers

    async def _rest_of(self, name: str, message: dict[str, Any],
                       answer: dict[str, Any]) -> list[Any]:
        """A server's tools after its first page of ``tools/list`` (its ``nextCursor`` pages,
        up to ``_PAGES`` of them)."""
        tools: list[Any] = []
        result = answer.get("result")
        for _ in range(_PAGES):
            cursor = result.get("nextCursor") if isinstance(result, dict) else None
            if not isinstance(cursor, str) or not cursor or name not in self._live:
                break
            params = message.get("params")
            page = {**message, "params": {**(params if isinstance(params, dict) else {}),
                                          "cursor": cursor}}
            try:
                reply = await asyncio.wait_for(self._ask(name, page), _HANDSHAKE_TIMEOUT)
            except (TimeoutError, asyncio.CancelledError):
                break
            result = reply.get("result")
            if isinstance(result, dict) and isinstance(result.get("tools"), list):
                tools += result["tools"]
        return tools

    async def _handshake(self, message: dict[str, Any]) -> None:
        if message["method"] == "initialize":
            self._note_client(message.get("params"))
        answers = await self._ask_all(message)
        first = next((a.get("result") for a in answers.values()
                      if isinstance(a.get("result"), dict)), None)
        if first is None:
            self._write(_error(message["id"], -32603,
                               "callwarden: no MCP server behind the gateway answered"))
            return
        info = {"name": "callwarden", "version": __version__}
        result = {**first, "capabilities": {"tools": {"listChanged": True}}}
        if "serverInfo" in first:
            result["serverInfo"] = info
        meta = first.get("_meta")
        if isinstance(meta, dict) and "io.modelcontextprotocol/serverInfo" in meta:
            result["_meta"] = {**meta, "io.modelcontextprotocol/serverInfo": info}
        self._write({"jsonrpc": "2.0", "id": message["id"], "result": result})

    def _note_client(self, params: Any) -> None:
        for core in self._cores.values():
            core._learn_client(params)

    async def _list(self, message: dict[str, Any]) -> None:
        answers = await self._ask_all(message)
        tools = []
        first: dict[str, Any] = {}
        for name, answer in sorted(answers.items()):
            result = answer.get("result")
            if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
                continue
            first = first or result
            for tool in result["tools"] + await self._rest_of(name, message, answer):
                if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                    tools.append({**tool, "name": f"{name}{_SEPARATOR}{tool['name']}"})
        result = {k: v for k, v in first.items() if k != "nextCursor"}
        self._write({"jsonrpc": "2.0", "id": message["id"], "result": {**result,
                                                                     "tools": tools}})

    async def _call(self, message: dict[str, Any]) -> None:
        params = message.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        server, sep, tool = name.partition(_SEPARATOR) if isinstance(name, str) else ("", "", "")
        if not sep or server not in self._cores or not tool:
            self._write(_error(message["id"], -32602,
                               f"callwarden: no tool {name!r}: tools are named SERVER__TOOL"))
            return
        if server not in self._live:
            self._write(_error(message["id"], -32002,
                               f"callwarden: the MCP server {server} is gone"))
            return
        core = self._cores[server]
        routed = {**message, "params": {**params, "name": tool}}  # type: ignore[dict-item]
        task = asyncio.ensure_future(core._call_safely(routed))
        core._calls.add(task)
        task.add_done_callback(core._calls.discard)
