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

The connection is an asyncio protocol: the replies are parsed as their bytes arrive, in the
event loop's own callback (by hiredis's C reader when it is installed, as the ``redis`` extra
does; else by the parser here), and each caller is woken with its reply there and then.

Fails closed: a connection that cannot be opened, breaks, or is closed by the server fails
every command waiting on it (``redis.ConnectionError``); the next command opens a new one. A
command already sent is never sent again (it may have run: failing is an overcount at worst).
Only the commands the store sends are spoken: RESP2 requests, and the replies Lua scripts give.
"""

from __future__ import annotations

import asyncio
import collections
import math
import socket
from time import perf_counter as _perf
from typing import Any

import redis
from redis.connection import parse_url
from redis.exceptions import NoScriptError, ResponseError

try:  # the redis extra brings it: replies parsed in C
    import hiredis
except ImportError:  # pragma: no cover - redis installed without the extra
    hiredis = None  # type: ignore[assignment]

__all__ = ["Pipe"]

_CRLF = b"\r\n"
_MAX_WAITING = 10_000  # commands in flight on one connection before it is given up
_MAX_REPLY = 512 << 20  # bytes of one reply, at most (Redis's own bound of a bulk string)


_ONLY_STR = {str}


def _encode_here(args: tuple[Any, ...]) -> bytes:
    """A command as RESP2 bytes (without hiredis: its ``pack_command`` writes the same in C)."""
    if set(map(type, args)) == _ONLY_STR:  # a script's keys and arguments, as a rule
        text = f"*{len(args)}\r\n" + "".join([f"${len(arg)}\r\n{arg}\r\n" for arg in args])
        if text.isascii():  # then a length in characters is one in bytes
            return text.encode()
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        parts += (b"$%d\r\n" % len(data), data, _CRLF)
    return b"".join(parts)


_encode = hiredis.pack_command if hiredis is not None else _encode_here


def pipelinable(url: str) -> bool:
    """Whether ``url`` names a server this connection can speak to (plain TCP or a Unix
    socket; TLS goes through redis-py)."""
    return url.partition(":")[0].lower() in ("redis", "unix")


class _Replies:
    """Whole replies out of the bytes that arrive, in order: hiredis's reader when installed,
    else :func:`_take`. An error reply is its exception (``NoScriptError`` for
    NOSCRIPT), inside an array too, so the stream stays in step."""

    __slots__ = ("_buffer", "_reader", "_unfinished")

    def __init__(self) -> None:
        self._reader = hiredis.Reader(replyError=ResponseError) if hiredis is not None \
            else None
        self._buffer = bytearray()
        self._unfinished = 0  # bytes of a reply not yet whole (the reader's, at most this)

    def feed(self, data: bytes) -> list[Any]:
        """The replies ``data`` completes.

        Raises:
            ValueError: bytes that are not RESP2, or a reply over 512 MiB.
        """
        reader = self._reader
        if reader is None:
            return self._parse(data)
        reader.feed(data)
        replies = []
        try:
            while (reply := reader.gets()) is not False:
                if type(reply) is ResponseError and str(reply).startswith("NOSCRIPT"):
                    reply = NoScriptError(str(reply))
                replies.append(reply)
        except hiredis.ProtocolError as e:
            raise ValueError(f"not a RESP2 reply: {e}") from None
        # What is left after a whole reply came within ``data``; else the reply grows on.
        self._unfinished = (len(data) if reader.has_data() else 0) if replies \
            else self._unfinished + len(data)
        if self._unfinished > _MAX_REPLY:
            raise ValueError("a reply over 512 MiB")
        return replies

    def _parse(self, data: bytes) -> list[Any]:
        buffer = self._buffer
        buffer += data
        replies, at = [], 0
        try:
            while (taken := _take(buffer, at)) is not None:
                reply, at = taken
                replies.append(reply)
        except RecursionError:
            raise ValueError("a reply nested too deeply") from None
        del buffer[:at]
        if len(buffer) > _MAX_REPLY:
            raise ValueError("a reply over 512 MiB")
        return replies


class _Link(asyncio.Protocol):
    """One connection: what is sent in this loop turn, and the callers waiting for replies
    (with their deadlines), in the order their commands were sent."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.waiting: collections.deque[tuple[asyncio.Future[Any], float]] = \
            collections.deque()
        self.outgoing: list[bytes] = []
        self.replies = _Replies()
        self.broken: Exception | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            replies = self.replies.feed(data)
        except ValueError as e:
            return self.fail(redis.ConnectionError(f"the Redis connection broke: {e}"))
        waiting = self.waiting
        for reply in replies:
            if not waiting:
                return self.fail(redis.ConnectionError("a reply came that nothing asked for"))
            waiter = waiting.popleft()[0]
            if waiter.done():  # its caller gave up (deadline): the reply is dropped
                continue
            if isinstance(reply, ResponseError):
                waiter.set_exception(reply)
            else:
                waiter.set_result(reply)
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.fail(redis.ConnectionError("the Redis server closed the connection" if exc is None
                                        else f"the Redis connection broke: {exc}"))

    def usable(self) -> bool:
        return self.broken is None and self.transport is not None \
            and not self.transport.is_closing()

    def flush(self) -> None:
        outgoing, self.outgoing = self.outgoing, []
        if self.broken is None and self.transport is not None and outgoing:
            self.transport.write(b"".join(outgoing))

    def fail(self, error: Exception) -> None:
        """Gives the connection up: what waits on it fails with ``error``."""
        if self.broken is None:
            self.broken = error
        if self.transport is not None:
            self.transport.abort()
        self.outgoing = []
        waiting, self.waiting = self.waiting, collections.deque()
        for waiter, _ in waiting:
            if not waiter.done():
                waiter.set_exception(error)


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
        self._link: _Link | None = None
        self._opening: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf  # when the timer fires (inf: none is set)

    # -- what the store calls ----------------------------------------------------------------

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
        link = self._link
        if link is None or not link.usable():
            left = until - _perf()
            if left <= 0:
                raise TimeoutError("the deadline passed before Redis was reached")
            async with asyncio.timeout(None if left == math.inf else left):
                await self._open()  # opening is rare: it has a timer of its own
            link = self._link
            assert link is not None
        loop = self._loop
        assert loop is not None
        if until <= _perf():
            raise TimeoutError("the deadline passed before the command was sent")
        # Written before anything is queued: a command that cannot be (an argument with no
        # UTF-8) fails alone, and no caller waits for a reply that will not come.
        command = _encode(args)
        reply: asyncio.Future[Any] = loop.create_future()
        link.waiting.append((reply, until))
        if until < self._timer_at:
            self._arm(until)
        if not link.outgoing:
            loop.call_soon(link.flush)
        link.outgoing.append(command)
        if len(link.waiting) > _MAX_WAITING:  # a server that stopped answering long ago
            link.fail(redis.ConnectionError("the Redis server stopped answering"))
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
        for waiter, until in self._link.waiting if self._link is not None else ():
            if waiter.done():
                continue
            if until <= now:
                waiter.set_exception(TimeoutError("Redis did not answer within the deadline"))
            elif until < soonest:
                soonest = until
        if soonest < math.inf:
            self._arm(soonest)

    async def aclose(self) -> None:
        """Closes the connection; commands still waiting fail."""
        link, self._link = self._link, None
        if self._timer is not None:
            self._timer.cancel()
            self._timer, self._timer_at = None, math.inf
        if link is not None:
            link.fail(redis.ConnectionError("the Redis store was closed"))

    # -- the connection ----------------------------------------------------------------------

    async def _open(self) -> None:
        if self._opening is not None:  # another command is opening it: wait for that
            await asyncio.shield(self._opening)
            return
        loop = asyncio.get_running_loop()
        opening = self._opening = loop.create_future()
        link = None
        try:
            async with asyncio.timeout(self._connect_timeout):
                link = await self._connect(loop)
                await self._hello(link, loop)
        except BaseException as exc:  # its opener cancelled too: the next command tries again
            self._opening = None
            error = redis.ConnectionError(f"cannot connect to Redis: {exc or type(exc).__name__}")
            if link is not None:
                link.fail(error)
            opening.set_exception(error)
            opening.exception()  # retrieved: the waiters re-raise it
            if isinstance(exc, OSError | TimeoutError | ResponseError | redis.ConnectionError):
                raise error from exc
            raise
        old, self._loop, self._link = self._link, loop, link
        if old is not None:
            old.fail(redis.ConnectionError("the Redis connection was replaced"))
        self._opening = None
        opening.set_result(None)

    async def _connect(self, loop: asyncio.AbstractEventLoop) -> _Link:
        options = self._options
        if "path" in options:
            _, link = await loop.create_unix_connection(_Link, options["path"])
            return link
        _, link = await loop.create_connection(_Link, options.get("host", "localhost"),
                                               int(options.get("port", 6379)))
        assert link.transport is not None
        sock = link.transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return link

    async def _hello(self, link: _Link, loop: asyncio.AbstractEventLoop) -> None:
        """AUTH and SELECT, as the URL asks, before anything is pipelined."""
        options = self._options
        commands: list[tuple[Any, ...]] = []
        if options.get("password") is not None:
            user = options.get("username")
            commands.append(("AUTH", user, options["password"]) if user
                            else ("AUTH", options["password"]))
        if int(options.get("db", 0) or 0):
            commands.append(("SELECT", int(options["db"])))
        for command in commands:
            written = _encode(command)
            answer: asyncio.Future[Any] = loop.create_future()
            link.waiting.append((answer, math.inf))
            link.outgoing.append(written)
            link.flush()
            await answer  # an error reply raises


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
