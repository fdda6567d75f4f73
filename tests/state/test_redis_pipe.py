"""The Redis store's pipelined connection (``_redis_pipe.Pipe``) against a real redis-server:
replies matched to their callers in order under concurrency, scripts with the NOSCRIPT
fallback, a caller that stops waiting, a server that goes away and comes back, AUTH and
SELECT, and errors that leave the stream in step; each with hiredis's reader and with the
parser used without it."""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path
from typing import Any

import hiredis
import pytest
import redis
from _state_support import RedisServer

from callwarden.state import _redis_pipe
from callwarden.state._redis_pipe import Pipe, _Replies, pipelinable
from callwarden.state._redis_scripts import Script

ECHO = "return {KEYS[1], ARGV[1], tonumber(ARGV[2]) * 2}"


@pytest.fixture(autouse=True, params=["hiredis", "python"])
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test twice: replies read by hiredis (the redis extra installs it), and by the
    parser a Redis install without it uses."""
    assert _redis_pipe.hiredis is not None, "the redis extra installs hiredis"
    if request.param == "python":
        monkeypatch.setattr(_redis_pipe, "hiredis", None)
        monkeypatch.setattr(_redis_pipe, "_encode", _redis_pipe._encode_here)
    return str(request.param)


STREAM = (b"*3\r\n$3\r\nabc\r\n:-5\r\n-ERR inner\r\n+OK\r\n$-1\r\n*-1\r\n"
          b"-NOSCRIPT No matching script\r\n$0\r\n\r\n*2\r\n*1\r\n:1\r\n$4\r\n\r\n\r\n\r\n"
          b":12345678901\r\n")


def _plain(reply: Any) -> Any:
    if isinstance(reply, list):
        return [_plain(r) for r in reply]
    if isinstance(reply, Exception):
        return (type(reply).__name__, str(reply))
    return reply


def test_replies_cut_anywhere_read_the_same(reader: str) -> None:
    expected = [[b"abc", -5, ("ResponseError", "ERR inner")], b"OK", None, None,
                ("NoScriptError", "NOSCRIPT No matching script"), b"", [[1], b"\r\n\r\n"],
                12345678901]
    assert [_plain(r) for r in _Replies().feed(STREAM)] == expected
    for cut in range(1, len(STREAM)):
        replies = _Replies()
        got = replies.feed(STREAM[:cut]) + replies.feed(STREAM[cut:])
        assert [_plain(r) for r in got] == expected, cut


def test_what_is_not_a_reply_or_too_big_is_refused(reader: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="RESP2"):
        _Replies().feed(b"?what\r\n")
    monkeypatch.setattr(_redis_pipe, "_MAX_REPLY", 1000)
    replies = _Replies()
    replies.feed(b"$5000\r\n" + b"x" * 600)
    with pytest.raises(ValueError, match="512 MiB"):
        replies.feed(b"x" * 600)
    # Many small replies whose reads end inside the next one: more than the cap in all, but
    # no reply near it.
    stream, steady, got = (b"$40\r\n" + b"y" * 40 + b"\r\n") * 60, _Replies(), []
    for at in range(0, len(stream), 30):
        got += steady.feed(stream[at:at + 30])
    assert len(stream) > 1000 and got == [b"y" * 40] * 60


def test_commands_are_written_alike_with_and_without_hiredis() -> None:
    commands = [("EVALSHA", "a" * 40, "2", "cw:{s}:k", "cw:{s}:h", "1.5", "", "1e+300"),
                ("SET", "clé", b"\xff\x00raw", 7, -3, 10**20), ("PING",),
                ("ECHO", "x\r\n$5\r\n*2\r\n")]
    for command in commands:
        assert hiredis.pack_command(command) == _redis_pipe._encode_here(command)
    assert _redis_pipe._encode_here(("SET", "é", 7)) == \
        b"*3\r\n$3\r\nSET\r\n$2\r\n\xc3\xa9\r\n$1\r\n7\r\n"


async def test_a_command_that_cannot_be_written_fails_alone(redis_server: RedisServer) -> None:
    """An argument Redis cannot be sent (a lone surrogate has no UTF-8) fails its caller
    before anything is sent or awaited, so the replies of the others stay in step."""
    pipe = Pipe(redis_server.url, 5.0)
    try:
        await pipe.call("SET", "pipe-kept", "mine")
        results = await asyncio.gather(
            pipe.call("ECHO", "first"), pipe.call("ECHO", "x\ud800"),
            pipe.call("GET", "pipe-kept"), return_exceptions=True)
        assert results[0] == b"first" and results[2] == b"mine", results
        assert isinstance(results[1], UnicodeEncodeError)
        assert await pipe.call("ECHO", "after") == b"after"
    finally:
        await pipe.aclose()


async def test_replies_reach_their_callers_under_concurrency(redis_server: RedisServer) -> None:
    pipe = Pipe(redis_server.url, 5.0)
    script = Script(ECHO)
    try:
        replies = await asyncio.gather(*(
            pipe.script(script.sha, script.source, [f"k{i}"], [f"v{i}", str(i)])
            for i in range(2000)))
        assert replies == [[f"k{i}".encode(), f"v{i}".encode(), 2 * i] for i in range(2000)]
        assert await pipe.call("PING") == b"PONG"
        assert await pipe.call("GET", "callwarden-pipe-missing") is None
        # Everything went down one connection.
        with redis.Redis.from_url(redis_server.url) as client:
            used = [c for c in client.client_list() if c.get("cmd") in ("evalsha", "eval", "get",
                                                                        "ping")]
        assert len(used) == 1
    finally:
        await pipe.aclose()


async def test_replies_cut_across_reads_and_bytes_that_look_like_replies(
        redis_server: RedisServer) -> None:
    """Replies far bigger than one read (so cut anywhere, an array's items too), holding CRLF
    and what looks like RESP inside their strings, reach their callers whole and in step."""
    pipe = Pipe(redis_server.url, 10.0)
    script = Script("return {ARGV[1], string.rep(ARGV[2], tonumber(ARGV[3])), 7}")
    odd = "x\r\n$5\r\n*2\r\n:-1\r\n"
    try:
        sizes = [1, 3000, 70_000, 5, 200_000, 0, 9]
        replies = await asyncio.gather(*(
            pipe.script(script.sha, script.source, [], [f"c{i}", odd, str(n)])
            for i, n in enumerate(sizes)))
        assert replies == [[f"c{i}".encode(), (odd * n).encode(), 7]
                           for i, n in enumerate(sizes)]
        assert await pipe.call("PING") == b"PONG"  # still in step after them
    finally:
        await pipe.aclose()


async def test_an_error_reply_fails_its_caller_alone(redis_server: RedisServer) -> None:
    pipe = Pipe(redis_server.url, 5.0)
    try:
        results = await asyncio.gather(
            pipe.call("PING"), pipe.call("EVAL", "return redis.error_reply('nope')", "0"),
            pipe.call("EVALSHA", "0" * 40, "0"),
            pipe.call("EVAL", "return {1, redis.error_reply('inner'), 3}", "0"),
            pipe.call("PING"), return_exceptions=True)
        assert results[0] == b"PONG" and results[4] == b"PONG"
        assert isinstance(results[1], redis.ResponseError) and "nope" in str(results[1])
        assert isinstance(results[2], redis.exceptions.NoScriptError)
        assert isinstance(results[3], list) and results[3][0] == 1 and results[3][2] == 3
    finally:
        await pipe.aclose()


async def test_a_caller_that_stops_waiting_does_not_take_another_reply(
        own_redis_server: RedisServer) -> None:
    pipe = Pipe(own_redis_server.url, 5.0)
    try:
        await pipe.call("SET", "a", "1")
        slow = asyncio.ensure_future(pipe.call("EVAL", "redis.call('SET', 'b', '2') return 'slow'", "0"))
        await asyncio.sleep(0)  # sent
        own_redis_server.pause()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                await pipe.call("GET", "a")
        slow.cancel()
        own_redis_server.resume()
        assert await pipe.call("GET", "b") == b"2"  # the late replies were dropped in order
        assert await pipe.call("GET", "a") == b"1"
    finally:
        await pipe.aclose()


async def test_each_command_waits_until_its_own_deadline(own_redis_server: RedisServer) -> None:
    """``until``: on a server that stopped answering, each caller stops waiting at its own
    deadline (never before it), whatever order they were sent in; their late replies are
    dropped in order once the server answers again; a deadline already passed sends nothing."""
    pipe = Pipe(own_redis_server.url, 5.0)
    try:
        await pipe.call("SET", "n", "0")
        own_redis_server.pause()
        start = time.perf_counter()
        ended: dict[float, float] = {}
        waits = [0.6, 0.2, 0.4]

        async def incr(wait: float) -> Any:
            try:
                return await pipe.call("INCR", "n", until=start + wait)
            finally:
                ended[wait] = time.perf_counter()

        results = await asyncio.wait_for(asyncio.gather(
            *(incr(w) for w in waits), return_exceptions=True), 30)
        assert all(isinstance(r, TimeoutError) for r in results), results
        assert all(ended[w] >= start + w for w in waits), (start, ended)
        own_redis_server.resume()
        # They were sent before the deadlines passed, so they ran; their replies were dropped.
        assert await pipe.call("GET", "n", until=time.perf_counter() + 30) == b"3"
        with pytest.raises(TimeoutError):
            await pipe.call("INCR", "n", until=time.perf_counter() - 1)
        assert await pipe.call("GET", "n") == b"3"  # nothing was sent for it
    finally:
        own_redis_server.resume()
        await pipe.aclose()


async def test_a_server_that_goes_away_fails_then_reconnects(
        own_redis_server: RedisServer) -> None:
    pipe = Pipe(own_redis_server.url, 1.0)
    try:
        assert await pipe.call("PING") == b"PONG"
        own_redis_server.stop()
        with pytest.raises(redis.ConnectionError):
            await pipe.call("PING")
        with pytest.raises(redis.ConnectionError):  # nothing listens: the open fails
            await pipe.call("PING")
        own_redis_server.start()
        assert await pipe.call("PING") == b"PONG"
    finally:
        await pipe.aclose()


async def test_an_open_cut_short_is_tried_again(own_redis_server: RedisServer) -> None:
    """A caller whose deadline ends while the connection is being opened (here: SELECT never
    answered) leaves nothing half-open behind: the next command opens it afresh."""
    pipe = Pipe(own_redis_server.url.rsplit("/", 1)[0] + "/1", 5.0)
    try:
        own_redis_server.pause()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                await pipe.call("PING")
        own_redis_server.resume()
        assert await asyncio.wait_for(pipe.call("PING"), 5) == b"PONG"
    finally:
        own_redis_server.resume()
        await pipe.aclose()


async def test_password_and_database(tmp_path: Path) -> None:
    server = RedisServer(tmp_path)
    server.start()
    try:
        subprocess.run(["redis-cli", "-p", str(server.port), "CONFIG", "SET", "requirepass",
                        "s3cret"], check=True, capture_output=True)
        pipe = Pipe(f"redis://:s3cret@127.0.0.1:{server.port}/3", 5.0)
        await pipe.call("SET", "where", "db3")
        with redis.Redis(port=server.port, password="s3cret", db=3) as client:
            assert client.get("where") == b"db3"
        await pipe.aclose()
        wrong = Pipe(f"redis://:nope@127.0.0.1:{server.port}/0", 5.0)
        with pytest.raises(redis.ConnectionError, match=r"WRONGPASS|invalid"):
            await wrong.call("PING")
        await wrong.aclose()
    finally:
        server.stop()


def test_which_urls_it_speaks() -> None:
    assert pipelinable("redis://h:1/0") and pipelinable("unix:///tmp/r.sock")
    assert not pipelinable("rediss://h:1/0")


def test_call_tokens_are_unique_in_a_process_and_across_processes(reader: str) -> None:
    """A call's entries in a shared windowed counter are named by its token: no two calls,
    in one process or in two (forked workers included), may share one."""
    import sys

    from callwarden.state._redis_scripts import call_token

    here = {call_token() for _ in range(10_000)}
    assert len(here) == 10_000
    program = ("import os; from callwarden.state._redis_scripts import call_token; "
               "a = call_token(); pid = os.fork()\n"
               "if pid == 0:\n    print(call_token(), flush=True); os._exit(0)\n"
               "os.waitpid(pid, 0); print(a, call_token())")
    runs = [subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                           check=True, timeout=60).stdout.split() for _ in range(2)]
    tokens = [t for run in runs for t in run]
    assert len(tokens) == 6 and len(set(tokens)) == 6 and not here & set(tokens)
    prefixes = {t[:24] for t in tokens}  # each process its own prefix, the child's too
    assert len(prefixes) == 4
