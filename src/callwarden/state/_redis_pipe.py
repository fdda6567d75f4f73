"""One pipelined connection per event loop for the Redis store's scripts (auto-pipelining).

redis-py's asyncio client takes a pooled connection per command and sends it alone, so under
concurrency each decision pays a connection checkout, its own write and its own read, and a
busy process opens dozens of connections. Here every script a process's decisions run goes
down one connection: the commands of one turn of the event loop leave in one write, and the
replies, which Redis sends in order, are matched to their callers in that order. A reply that
comes after its caller stopped waiting (its deadline passed) is read and dropped, so a late
reply is never taken for another command's.

Each command waits until a deadline of its own (``until``), kept by the pipe: one timer for the
soonest deadline of all that wait, not a timer per command (``asyncio.timeout`` around each
would schedule and cancel one on every decision).

Fails closed: a connection that cannot be opened, breaks, or is closed by the server fails
every command waiting on it (``redis.ConnectionError``); the next command opens a new one. A
command already sent is never sent again (it may have run: failing is an overcount at worst).
Only the commands the store sends are spoken: RESP2 requests, and the replies Lua scripts give.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import math
import socket
from time import perf_counter as _perf
from typing import Any

import redis
from redis.connection import parse_url
from redis.exceptions import NoScriptError, ResponseError

__all__ = ["Pipe"]

_CRLF = b"\r\n"
_MAX_WAITING = 10_000  # commands in flight on one connection before it is given up
_READ_SIZE = 1 << 16  # bytes a read of the replies asks for
_MAX_REPLY = 512 << 20  # bytes of one reply, at most (Redis's own bound of a bulk string)


def _encode(args: tuple[Any, ...]) -> bytes:
    if all(type(arg) is str for arg in args):  # a script's keys and arguments, as a rule
        text = f"*{len(args)}\r\n" + "".join([f"${len(arg)}\r\n{arg}\r\n" for arg in args])
        if text.isascii():  # then a length in characters is one in bytes
            return text.encode()
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        parts += (b"$%d\r\n" % len(data), data, _CRLF)
    return b"".join(parts)


def pipelinable(url: str) -> bool:
    """Whether ``url`` names a server this connection can speak to (plain TCP or a Unix
    socket; TLS goes through redis-py)."""
    return url.partition(":")[0].lower() in ("redis", "unix")


class Pipe:
    """Scripts and commands over one connection, pipelined.

    Args:
        url: ``redis://[user:password@]host:port/db`` or ``unix:///path?db=N``.
        connect_timeout: Seconds to open the connection and say hello.
    """

    def __init__(self, url: str, connect_timeout: float) -> None:
        self._options = parse_url(url)  # type: ignore[no-untyped-call]
        self._connect_timeout = connect_timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._opening: asyncio.Future[None] | None = None
        # (reply, its caller's deadline), in the order the commands were sent
        self._waiting: collections.deque[tuple[asyncio.Future[Any], float]] = \
            collections.deque()
        self._outgoing: list[bytes] = []
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf  # when the timer fires (inf: none is set)

    # -- what the store calls ----------------------------------------------------------------

    async def evalsha(self, sha: str, numkeys: int, *keys_and_args: Any) -> Any:
        return await self.call("EVALSHA", sha, str(numkeys), *keys_and_args)

    async def eval(self, source: str, numkeys: int, *keys_and_args: Any) -> Any:
        return await self.call("EVAL", source, str(numkeys), *keys_and_args)

    async def script(self, sha: str, source: str, keys: list[str], args: list[str], *,
                     until: float | None = None) -> Any:
        """A Lua script by its SHA1, sent whole when the server does not have it."""
        try:
            return await self.call("EVALSHA", sha, str(len(keys)), *keys, *args, until=until)
        except NoScriptError:
            return await self.call("EVAL", source, str(len(keys)), *keys, *args, until=until)

    async def call(self, *args: Any, until: float | None = None) -> Any:
        """Sends one command (with the others of this loop turn) and waits for its reply, no
        later than ``until`` (a ``time.perf_counter()`` time; None: as long as the caller
        waits); nothing is sent once that has passed.

        Raises:
            TimeoutError: ``until`` passed first.
            redis.ConnectionError: no connection, or it broke before the reply.
            redis.ResponseError: the server's error reply (``NoScriptError`` for NOSCRIPT).
        """
        if until is None:
            until = math.inf
        if self._writer is None or self._writer.is_closing():
            left = until - _perf()
            if left <= 0:
                raise TimeoutError("the deadline passed before Redis was reached")
            async with asyncio.timeout(None if left == math.inf else left):
                await self._open()  # opening is rare: it has a timer of its own
        loop = self._loop
        assert loop is not None
        if until <= _perf():
            raise TimeoutError("the deadline passed before the command was sent")
        reply: asyncio.Future[Any] = loop.create_future()
        self._waiting.append((reply, until))
        if until < self._timer_at:
            self._arm(until)
        if not self._outgoing:
            loop.call_soon(self._flush)
        self._outgoing.append(_encode(args))
        if len(self._waiting) > _MAX_WAITING:  # a server that stopped answering long ago
            self._drop(redis.ConnectionError("the Redis server stopped answering"))
        return await reply

    def _arm(self, at: float) -> None:
        """The timer, for ``at`` (sooner than the one set, if any)."""
        if self._timer is not None:
            self._timer.cancel()
        assert self._loop is not None
        self._timer_at = at
        self._timer = self._loop.call_later(max(at - _perf(), 0.0), self._expire)

    def _expire(self) -> None:
        """The timer fired: the commands whose deadline has passed stop waiting (their
        replies will be dropped); the timer is set again for the soonest of the others."""
        self._timer, self._timer_at = None, math.inf
        now, soonest = _perf(), math.inf
        for waiter, until in self._waiting:
            if waiter.done():
                continue
            if until <= now:
                waiter.set_exception(TimeoutError("Redis did not answer within the deadline"))
            elif until < soonest:
                soonest = until
        if soonest < math.inf and self._loop is not None:
            self._arm(soonest)

    async def aclose(self) -> None:
        """Closes the connection; commands still waiting fail."""
        writer, task = self._writer, self._reader_task
        self._writer = self._reader_task = None
        self._fail(redis.ConnectionError("the Redis store was closed"))
        if task is not None:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    # -- the connection ----------------------------------------------------------------------

    async def _open(self) -> None:
        if self._opening is not None:  # another command is opening it: wait for that
            await asyncio.shield(self._opening)
            return
        loop = asyncio.get_running_loop()
        opening = self._opening = loop.create_future()
        writer = None
        try:
            async with asyncio.timeout(self._connect_timeout):
                reader, writer = await self._connect()
                await self._hello(reader, writer)
        except BaseException as exc:  # its opener cancelled too: the next command tries again
            if writer is not None:
                writer.close()
            self._opening = None
            error = redis.ConnectionError(f"cannot connect to Redis: {exc or type(exc).__name__}")
            opening.set_exception(error)
            opening.exception()  # retrieved: the waiters re-raise it
            if isinstance(exc, OSError | TimeoutError | ResponseError |
                          asyncio.IncompleteReadError):
                raise error from exc
            raise
        self._loop, self._writer = loop, writer
        self._reader_task = loop.create_task(self._read(reader, writer))
        self._opening = None
        opening.set_result(None)

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        options = self._options
        if "path" in options:
            return await asyncio.open_unix_connection(options["path"])
        reader, writer = await asyncio.open_connection(options.get("host", "localhost"),
                                                       int(options.get("port", 6379)))
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return reader, writer

    async def _hello(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """AUTH and SELECT, as the URL asks, before anything is pipelined."""
        options = self._options
        commands: list[tuple[Any, ...]] = []
        if options.get("password") is not None:
            user = options.get("username")
            commands.append(("AUTH", user, options["password"]) if user
                            else ("AUTH", options["password"]))
        if int(options.get("db", 0) or 0):
            commands.append(("SELECT", int(options["db"])))
        buffer = bytearray()
        for command in commands:
            writer.write(_encode(command))
            while (taken := _take(buffer, 0)) is None:
                data = await reader.read(_READ_SIZE)
                if not data:
                    raise asyncio.IncompleteReadError(bytes(buffer), None)
                buffer += data
            answer, at = taken
            del buffer[:at]
            if isinstance(answer, ResponseError):
                raise answer

    def _flush(self) -> None:
        outgoing, self._outgoing = self._outgoing, []
        writer = self._writer
        if writer is None or writer.is_closing():
            self._fail(redis.ConnectionError("the Redis connection closed"))
            return
        writer.write(b"".join(outgoing))

    async def _read(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """The replies, in the order of the commands: what arrived is read at once and every
        whole reply in it is parsed there and then (one wake-up for the replies to a turn's
        commands); a reply cut across reads waits for the rest."""
        error: Exception = redis.ConnectionError("the Redis server closed the connection")
        buffer = bytearray()
        try:
            while True:
                data = await reader.read(_READ_SIZE)
                if not data:
                    break
                buffer += data
                at = 0
                while (taken := _take(buffer, at)) is not None:
                    reply, at = taken
                    if not self._waiting:
                        raise redis.ConnectionError("a reply came that nothing asked for")
                    waiter = self._waiting.popleft()[0]
                    if waiter.done():  # its caller gave up (deadline): drop the reply
                        continue
                    if isinstance(reply, ResponseError):
                        waiter.set_exception(reply)
                    else:
                        waiter.set_result(reply)
                del buffer[:at]
                if len(buffer) > _MAX_REPLY:
                    raise redis.ConnectionError("a reply over 512 MiB")
        except asyncio.CancelledError:
            raise
        except (OSError, redis.ConnectionError, ValueError, RecursionError) as exc:
            error = redis.ConnectionError(f"the Redis connection broke: {exc}")
        writer.close()
        if self._writer is writer:
            self._writer = self._reader_task = None
            self._fail(error)

    def _drop(self, error: Exception) -> None:
        """Gives the connection up: what waits on it fails, the next command opens another."""
        writer, task = self._writer, self._reader_task
        self._writer = self._reader_task = None
        if task is not None:
            task.cancel()
        if writer is not None:
            writer.close()
        self._fail(error)

    def _fail(self, error: Exception) -> None:
        waiting, self._waiting = self._waiting, collections.deque()
        self._outgoing = []
        for waiter, _ in waiting:
            if not waiter.done():
                waiter.set_exception(error)


def _take(buffer: bytearray, at: int) -> tuple[Any, int] | None:
    """The RESP2 reply that starts at ``at`` in ``buffer`` and where the next one starts;
    None when it is not all there yet. An error reply is returned as its exception (inside an
    array too), so the stream stays in step."""
    end = buffer.find(_CRLF, at)
    if end < 0:
        return None
    kind, rest, after = buffer[at], bytes(buffer[at + 1:end]), end + 2
    if kind == 0x24:  # $
        size = int(rest)
        if size < 0:
            return None, after
        if len(buffer) < after + size + 2:
            return None
        return bytes(buffer[after:after + size]), after + size + 2
    if kind == 0x3A:  # :
        return int(rest), after
    if kind == 0x2A:  # *
        count = int(rest)
        if count < 0:
            return None, after
        items = []
        for _ in range(count):
            taken = _take(buffer, after)
            if taken is None:
                return None
            item, after = taken
            items.append(item)
        return items, after
    if kind == 0x2B:  # +
        return rest, after
    if kind == 0x2D:  # -
        text = rest.decode(errors="replace")
        return (NoScriptError(text) if text.startswith("NOSCRIPT") else ResponseError(text)), \
            after
    raise ValueError(f"not a RESP2 reply: {bytes(buffer[at:at + 40])!r}")
