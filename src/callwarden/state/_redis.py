"""The Redis store: shared by every host that reaches the server; one round trip per decision."""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
import time
import uuid
from collections.abc import Collection, Mapping, Sequence
from time import perf_counter as _perf
from typing import Any

import redis
import redis.asyncio
import redis.asyncio.retry
import redis.retry
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError, RedisError

from callwarden.state._base import (
    DEFAULT_IDLE_TTL,
    HISTORY_EFFECTS,
    TOLERANCE,
    Counter,
    CounterState,
    HistoryEntry,
    StateStore,
    StoredValue,
    StoreUnavailable,
    check_key,
    check_ttl,
    check_version,
    decode_value,
    encode_value,
)
from callwarden.state._history import SessionHistory
from callwarden.state._redis_deadline import bounded_pool, until

__all__ = ["RedisStore"]

# Keys live this long past their newest entry's expiry (server time), so that a server clock
# slightly behind the callers' never drops usage that still counts.
_TTL_MARGIN = "1000"

# KEYS: two per counter, the entries ZSET and its running total (both the total for a counter
# without a window), then the session's history hash when a call is recorded.
# ARGV: now, commit, token, tolerance, TTL margin, idle TTL in ms ('' = none), number of
# counters, then the history record: '1' to record (else '0'), tool, effect, history TTL in
# ms ('' = none); then per counter: limit, window ('' = forever), weight, always, expires_at,
# rank ('' = none) and effect recorded when it is the highest-ranked exceeded counter.
# Members are token:index:weight, scored by expiry; weights travel as Python reprs so no
# digits are lost on the way. Returns used, exceeded, reset_at ('' = none) per counter, all
# as strings: Lua numbers would come back truncated to integers.
_CONSUME = """
local now, nownum = ARGV[1], tonumber(ARGV[1])
local commit, token = ARGV[2] == '1', ARGV[3]
local tol, margin, idle = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local n = tonumber(ARGV[7])
local record, tool, effect, hist_ttl = ARGV[8] == '1', ARGV[9], ARGV[10], ARGV[11]
local base = 11
local used, hit, reset = {}, {}, {}
local blocked = false
for i = 1, n do
  local a = base + (i - 1) * 7
  local limit, window, weight = tonumber(ARGV[a + 1]), ARGV[a + 2], tonumber(ARGV[a + 3])
  local zkey, skey = KEYS[2 * i - 1], KEYS[2 * i]
  if window ~= '' then
    local old = redis.call('ZRANGEBYSCORE', zkey, '-inf', now)
    if #old > 0 then
      redis.call('ZREMRANGEBYSCORE', zkey, '-inf', now)
      if redis.call('EXISTS', zkey) == 0 then
        redis.call('DEL', skey)
      else
        for _, m in ipairs(old) do
          redis.call('INCRBYFLOAT', skey, '-' .. string.match(m, '[^:]*$'))
        end
      end
    end
  end
  local u = redis.call('GET', skey) or '0'
  used[i], hit[i], reset[i] = u, '0', ''
  if tonumber(u) + weight - limit > tol * math.max(1, math.abs(limit)) then
    hit[i], blocked = '1', true
  end
end
local allowed = commit and not blocked
local out = {}
for i = 1, n do
  local a = base + (i - 1) * 7
  local limit, window, weight = tonumber(ARGV[a + 1]), ARGV[a + 2], ARGV[a + 3]
  local always = ARGV[a + 4] == '1'
  local zkey, skey = KEYS[2 * i - 1], KEYS[2 * i]
  local total = tonumber(used[i])
  if tonumber(weight) > 0 and (allowed or always) then
    redis.call('INCRBYFLOAT', skey, weight)
    total = total + tonumber(weight)
    if window ~= '' then
      redis.call('ZADD', zkey, ARGV[a + 5], token .. ':' .. i .. ':' .. weight)
      local top = redis.call('ZRANGE', zkey, -1, -1, 'WITHSCORES')
      local ttl = math.ceil((tonumber(top[2]) - nownum) * 1000) + margin
      redis.call('PEXPIRE', zkey, ttl)
      redis.call('PEXPIRE', skey, ttl)
    end
  end
  if window == '' and idle ~= '' then
    -- Every use of a counter without a window restarts its idle time (no-op when absent).
    redis.call('PEXPIRE', skey, idle)
  end
  local slack = tol * math.max(1, math.abs(limit))
  if hit[i] == '1' and window ~= '' and tonumber(weight) - limit <= slack then
    -- After this call's writes: an attempt counted just now delays the reset too.
    local need, removed, start = total + tonumber(weight) - limit - slack, 0, 0
    while reset[i] == '' do
      local batch = redis.call('ZRANGE', zkey, start, start + 99, 'WITHSCORES')
      if #batch == 0 then break end
      for j = 1, #batch, 2 do
        removed = removed + tonumber(string.match(batch[j], '[^:]*$'))
        if removed >= need then
          reset[i] = batch[j + 1]
          break
        end
      end
      start = start + 100
    end
  end
  out[3 * i - 2], out[3 * i - 1], out[3 * i] = used[i], hit[i], reset[i]
end
if record then
  local best = nil
  for i = 1, n do
    local a = base + (i - 1) * 7
    local rank = ARGV[a + 6]
    if hit[i] == '1' and rank ~= '' and (best == nil or tonumber(rank) > best) then
      best, effect = tonumber(rank), ARGV[a + 7]
    end
  end
  local k = KEYS[2 * n + 1]
  redis.call('HINCRBY', k, 'n', 1)
  redis.call('HSETNX', k, 'first', now)
  redis.call('HSET', k, 'last', now, 'tool', tool, 't:' .. tool, now)
  redis.call('HINCRBY', k, 'p:' .. #tool .. ':' .. tool .. effect, 1)
  if hist_ttl ~= '' then redis.call('PEXPIRE', k, hist_ttl) end
end
return out
"""

# KEYS[1]: the session's hash. ARGV: tool, effect, now, TTL in ms ('' = keep).
# A (tool, effect) pair is the field p:<len(tool)>:<tool><effect>, unambiguous for any names.
_RECORD = """
local k, tool, effect, now = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
redis.call('HINCRBY', k, 'n', 1)
redis.call('HSETNX', k, 'first', now)
redis.call('HSET', k, 'last', now, 'tool', tool, 't:' .. tool, now)
redis.call('HINCRBY', k, 'p:' .. #tool .. ':' .. tool .. effect, 1)
if ARGV[4] ~= '' then redis.call('PEXPIRE', k, ARGV[4]) end
return 1
"""


# KEYS[1]: the record's hash (v: JSON, n: version, e: expires_at or ''). ARGV: expected version
# ('' = must not exist, '*' = any), JSON, TTL in ms ('' = none), expires_at.
# Returns the new version, or 0 when the expected version did not match. Redis drops expired
# keys by itself, so an expired record is simply absent.
_SET = """
local cur = redis.call('HGET', KEYS[1], 'n')
if ARGV[1] == '' then
  if cur then return 0 end
elseif ARGV[1] ~= '*' and cur ~= ARGV[1] then
  return 0
end
local n = (cur and tonumber(cur) or 0) + 1
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'n', n, 'e', ARGV[4])
if ARGV[3] ~= '' then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return n
"""

_GLOB_SPECIAL = re.compile(r"([\\*?\[\]])")


class _Script:
    """A Lua script run by EVALSHA, falling back to EVAL once the server has forgotten it."""

    __slots__ = ("sha", "source")

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest()

    def __call__(self, client: redis.Redis, keys: list[str], args: list[str]) -> Any:
        try:
            return client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            return client.eval(self.source, len(keys), *keys, *args)

    def within(self, client: redis.Redis, keys: list[str], args: list[str],
               deadline: float) -> Any:
        """Runs the script, waiting for the reply no longer than until ``deadline``.

        A connection that times out is dropped (redis-py disconnects it), so a late reply
        can never be read as the answer to another command.
        """
        pool = client.connection_pool
        with until(deadline):  # the pool wait, connect and handshake end at it too
            for attempt in (1, 2):
                _remaining(deadline)  # nothing is sent once the deadline has passed
                conn = pool.get_connection()
                try:
                    try:
                        conn.send_command("EVALSHA", self.sha, len(keys), *keys, *args)  # type: ignore[no-untyped-call]
                        return conn.read_response(timeout=_remaining(deadline))
                    except NoScriptError:
                        conn.send_command("EVAL", self.source, len(keys), *keys, *args)  # type: ignore[no-untyped-call]
                        return conn.read_response(timeout=_remaining(deadline))
                    except redis.ConnectionError:
                        # Once, like the client's own retry: a pooled connection the server
                        # dropped (a restart) is replaced.
                        conn.disconnect()  # type: ignore[no-untyped-call]
                        if attempt == 2:
                            raise
                finally:
                    pool.release(conn)
        raise AssertionError("unreachable")

    async def acall(self, client: redis.asyncio.Redis, keys: list[str], args: list[str]) -> Any:
        try:
            return await client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            return await client.eval(self.source, len(keys), *keys, *args)


def _remaining(deadline: float) -> float:
    remaining = deadline - _perf()
    if remaining <= 0:
        raise redis.TimeoutError("the deadline passed")
    return remaining


_consume = _Script(_CONSUME)
_record = _Script(_RECORD)
_set = _Script(_SET)


class RedisStore(StateStore):
    """Counters and history in Redis, shared by every process and host using the server.

    Each :meth:`consume` is one Lua script (EVALSHA), hence atomic and one round trip, which
    also records the call in its session's history when asked to. Windowed keys expire by
    themselves once their newest entry has left the window; counters without a window and
    session histories expire ``idle_ttl`` / ``history_ttl`` after their last use. A server
    that is down or slower than ``timeout`` (or the caller's deadline, if sooner) raises
    :class:`StoreUnavailable`; the store reconnects on the next call.

    Overcount window: a script sent before the deadline runs on the server even when its
    reply comes too late (a frozen or overloaded server works through what it received), so
    a decision that failed closed may still have been counted. Failing closed may overcount,
    never undercount; nothing is sent once the deadline has passed. Keys of one call must
    live on one server (no Redis Cluster).

    Args:
        url: ``redis://host:port/db``, ``rediss://...`` or ``unix://...``.
        prefix: Prepended to every key.
        timeout: Seconds to wait for a connection or a reply.
        history_ttl: Forget a session's history this many seconds after its last call
            (``None``: never).
        idle_ttl: Forget a counter without a window this many seconds after its last use
            (``None``: never).
        max_connections: Connections per client (one sync, one async per event loop).
    """

    __slots__ = (
        "_aclient",
        "_aloop",
        "_client",
        "_history_ttl_ms",
        "_idle_ttl_ms",
        "_max_connections",
        "_prefix",
        "_timeout",
        "_url",
    )

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "callwarden:",
        timeout: float = 0.5,
        history_ttl: float | None = DEFAULT_IDLE_TTL,
        idle_ttl: float | None = DEFAULT_IDLE_TTL,
        max_connections: int = 64,
    ) -> None:
        self._url = url
        self._prefix = prefix
        self._timeout = timeout
        self._max_connections = max_connections
        self._history_ttl_ms = _ms(history_ttl)
        self._idle_ttl_ms = _ms(idle_ttl)
        # One retry on connection errors only: it replaces a pooled connection the server
        # dropped (a restart) without doubling the wait on a slow server.
        self._client = redis.Redis(
            connection_pool=bounded_pool(
                url,
                max_connections=max_connections,
                timeout=timeout,
                socket_timeout=timeout,
                socket_connect_timeout=timeout / 2,
                retry=redis.retry.Retry(NoBackoff(), 1, (redis.ConnectionError,)),
            )
        )
        self._aclient: redis.asyncio.Redis | None = None
        self._aloop: asyncio.AbstractEventLoop | None = None

    # -- counters -----------------------------------------------------------------------

    def consume(
        self, counters: Sequence[Counter], *, now: float, commit: bool,
        deadline: float | None = None, record: HistoryEntry | None = None,
    ) -> list[CounterState]:
        """See :meth:`StateStore.consume`."""
        if not counters and record is None:
            return []
        keys, args = self._consume_args(counters, now, commit, record)
        try:
            if deadline is None:
                reply = _consume(self._client, keys, args)
            else:
                reply = _consume.within(self._client, keys, args, self._bound(deadline))
        except (RedisError, UnicodeEncodeError) as exc:
            raise self._unavailable(exc) from exc
        return _parse_consume(counters, reply)

    async def aconsume(
        self, counters: Sequence[Counter], *, now: float, commit: bool,
        deadline: float | None = None, record: HistoryEntry | None = None,
    ) -> list[CounterState]:
        """See :meth:`StateStore.consume`. The caller bounds the wait (``asyncio.wait_for``);
        nothing is sent once ``deadline`` has passed."""
        if not counters and record is None:
            return []
        keys, args = self._consume_args(counters, now, commit, record)
        try:
            if deadline is not None:
                _remaining(deadline)
            reply = await _consume.acall(self._async_client(), keys, args)
        except (RedisError, UnicodeEncodeError) as exc:
            raise self._unavailable(exc) from exc
        return _parse_consume(counters, reply)

    def _bound(self, deadline: float) -> float:
        """The caller's deadline, or this store's own timeout if sooner."""
        return min(deadline, _perf() + self._timeout)

    def _consume_args(
        self, counters: Sequence[Counter], now: float, commit: bool,
        record: HistoryEntry | None,
    ) -> tuple[list[str], list[str]]:
        prefix = self._prefix
        keys: list[str] = []
        args = [repr(float(now)), "1" if commit else "0", uuid.uuid4().hex, repr(TOLERANCE),
                _TTL_MARGIN, self._idle_ttl_ms, str(len(counters))]
        if record is None:
            args += ("0", "", "", "")
            ranks: tuple[tuple[float, str] | None, ...] = ()
        else:
            args += ("1", record.tool, record.effect, self._history_ttl_ms)
            ranks = record.if_exceeded
        for i, c in enumerate(counters):
            if c.window is None:
                total = f"{prefix}t:{c.key}"
                keys += (total, total)
                window = expires = ""
            else:
                keys += (f"{prefix}w:{c.key}", f"{prefix}s:{c.key}")
                window, expires = repr(float(c.window)), repr(now + c.window)
            args += (repr(float(c.limit)), window, repr(float(c.weight)), "1" if c.always else "0")
            alternative = ranks[i] if i < len(ranks) else None
            if alternative is None:
                args += (expires, "", "")
            else:
                args += (expires, repr(float(alternative[0])), alternative[1])
        if record is not None:
            keys.append(f"{prefix}h:{record.session}")
        return keys, args

    # -- history ------------------------------------------------------------------------

    def record(self, session: str, tool: str, effect: str, *, now: float,
               deadline: float | None = None) -> None:
        """See :meth:`StateStore.record`."""
        keys, args = [self._prefix + "h:" + session], self._record_args(tool, effect, now)
        try:
            if deadline is None:
                _record(self._client, keys, args)
            else:
                _record.within(self._client, keys, args, self._bound(deadline))
        except (RedisError, UnicodeEncodeError) as exc:
            raise self._unavailable(exc) from exc

    async def arecord(self, session: str, tool: str, effect: str, *, now: float,
                      deadline: float | None = None) -> None:
        """See :meth:`StateStore.record`."""
        keys, args = [self._prefix + "h:" + session], self._record_args(tool, effect, now)
        try:
            if deadline is not None:
                _remaining(deadline)
            await _record.acall(self._async_client(), keys, args)
        except (RedisError, UnicodeEncodeError) as exc:
            raise self._unavailable(exc) from exc

    def _record_args(self, tool: str, effect: str, now: float) -> list[str]:
        return [tool, effect, repr(float(now)), self._history_ttl_ms]

    def history(self, session: str, *, deadline: float | None = None,
                tools: Collection[str] | None = None) -> SessionHistory:
        """See :meth:`StateStore.history`. One ``HGETALL``, or one ``HMGET`` of the fields of
        ``tools`` when given."""
        key = self._prefix + "h:" + session
        command = ("HGETALL", key) if tools is None else ("HMGET", key, *_history_fields(tools))
        try:
            if deadline is None or deadline - _perf() >= self._timeout:
                reply = self._client.execute_command(*command)  # type: ignore[no-untyped-call]
            else:
                reply = _command_within(self._client, command, deadline)
        except (RedisError, UnicodeEncodeError) as exc:
            raise self._unavailable(exc) from exc
        return _parse_history(session, _history_reply(command, reply))

    async def ahistory(self, session: str, *, deadline: float | None = None,
                       tools: Collection[str] | None = None) -> SessionHistory:
        """See :meth:`StateStore.history`."""
        key = self._prefix + "h:" + session
        command = ("HGETALL", key) if tools is None else ("HMGET", key, *_history_fields(tools))
        try:
            reply = await self._async_client().execute_command(*command)  # type: ignore[no-untyped-call]
        except (RedisError, UnicodeEncodeError) as exc:
            raise self._unavailable(exc) from exc
        return _parse_history(session, _history_reply(command, reply))

    # -- key-value records ----------------------------------------------------------------

    def get(self, key: str) -> StoredValue | None:
        """See :meth:`StateStore.get`. One ``HMGET``."""
        check_key(key)
        try:
            fields = self._client.hmget(self._kv_key(key), "v", "n", "e")
        except (RedisError, UnicodeEncodeError) as exc:
            raise self._unavailable(exc) from exc
        return _parse_value(key, fields)

    async def aget(self, key: str) -> StoredValue | None:
        """See :meth:`StateStore.get`."""
        check_key(key)
        try:
            fields = await self._async_client().hmget(self._kv_key(key), "v", "n", "e")
        except (RedisError, UnicodeEncodeError) as exc:
            raise self._unavailable(exc) from exc
        return _parse_value(key, fields)

    def put(self, key: str, value: Mapping[str, Any], *, ttl: float | None) -> int:
        """See :meth:`StateStore.put`. One Lua script."""
        keys, args = self._set_args(key, "*", value, ttl)
        try:
            return int(_set(self._client, keys, args))
        except (RedisError, UnicodeEncodeError) as exc:
            raise self._unavailable(exc) from exc

    async def aput(self, key: str, value: Mapping[str, Any], *, ttl: float | None) -> int:
        """See :meth:`StateStore.put`."""
        keys, args = self._set_args(key, "*", value, ttl)
        try:
            return int(await _set.acall(self._async_client(), keys, args))
        except (RedisError, UnicodeEncodeError) as exc:
            raise self._unavailable(exc) from exc

    def compare_and_set(
        self, key: str, expected_version: int | None, value: Mapping[str, Any], *,
        ttl: float | None,
    ) -> bool:
        """See :meth:`StateStore.compare_and_set`. One Lua script, hence atomic."""
        check_version(expected_version)
        expected = "" if expected_version is None else str(expected_version)
        keys, args = self._set_args(key, expected, value, ttl)
        try:
            return int(_set(self._client, keys, args)) > 0
        except (RedisError, UnicodeEncodeError) as exc:
            raise self._unavailable(exc) from exc

    async def acompare_and_set(
        self, key: str, expected_version: int | None, value: Mapping[str, Any], *,
        ttl: float | None,
    ) -> bool:
        """See :meth:`StateStore.compare_and_set`."""
        check_version(expected_version)
        expected = "" if expected_version is None else str(expected_version)
        keys, args = self._set_args(key, expected, value, ttl)
        try:
            return int(await _set.acall(self._async_client(), keys, args)) > 0
        except (RedisError, UnicodeEncodeError) as exc:
            raise self._unavailable(exc) from exc

    def delete(self, key: str) -> bool:
        """See :meth:`StateStore.delete`."""
        check_key(key)
        try:
            return int(self._client.delete(self._kv_key(key))) > 0
        except (RedisError, UnicodeEncodeError) as exc:
            raise self._unavailable(exc) from exc

    async def adelete(self, key: str) -> bool:
        """See :meth:`StateStore.delete`."""
        check_key(key)
        try:
            return int(await self._async_client().delete(self._kv_key(key))) > 0
        except (RedisError, UnicodeEncodeError) as exc:
            raise self._unavailable(exc) from exc

    def scan(self, prefix: str) -> list[StoredValue]:
        """See :meth:`StateStore.scan`. ``SCAN`` with a pattern, then one pipelined read."""
        try:
            names = sorted(set(self._client.scan_iter(match=self._kv_match(prefix), count=500)))
            pipe = self._client.pipeline(transaction=False)
            for name in names:
                pipe.hmget(name, "v", "n", "e")
            replies = pipe.execute()
        except (RedisError, UnicodeEncodeError) as exc:
            raise self._unavailable(exc) from exc
        return self._parse_scan(names, replies)

    async def ascan(self, prefix: str) -> list[StoredValue]:
        """See :meth:`StateStore.scan`."""
        client = self._async_client()
        try:
            found = {name async for name in client.scan_iter(match=self._kv_match(prefix),
                                                              count=500)}
            names = sorted(found)
            pipe = client.pipeline(transaction=False)
            for name in names:
                pipe.hmget(name, "v", "n", "e")
            replies = await pipe.execute()
        except (RedisError, UnicodeEncodeError) as exc:
            raise self._unavailable(exc) from exc
        return self._parse_scan(names, replies)

    def _kv_key(self, key: str) -> str:
        return f"{self._prefix}kv:{key}"

    def _kv_match(self, prefix: str) -> str:
        return _GLOB_SPECIAL.sub(r"\\\1", f"{self._prefix}kv:{prefix}") + "*"

    def _set_args(
        self, key: str, expected: str, value: Mapping[str, Any], ttl: float | None
    ) -> tuple[list[str], list[str]]:
        check_key(key)
        check_ttl(ttl)
        text = encode_value(value)
        if ttl is None:
            return [self._kv_key(key)], [expected, text, "", ""]
        return [self._kv_key(key)], [
            expected, text, str(max(1, math.ceil(ttl * 1000))), repr(time.time() + ttl)
        ]

    def _parse_scan(self, names: list[bytes], replies: list[Any]) -> list[StoredValue]:
        skip = len(self._kv_key(""))
        out = []
        for name, fields in zip(names, replies, strict=True):
            try:
                key = name.decode()[skip:]
            except UnicodeDecodeError as exc:
                raise StoreUnavailable(f"Redis key {name!r} is not UTF-8") from exc
            value = _parse_value(key, fields)
            if value is not None:  # expired between SCAN and HMGET
                out.append(value)
        out.sort(key=lambda v: v.key)
        return out

    # -- plumbing -----------------------------------------------------------------------

    def close(self) -> None:
        """Closes the sync client's connections (use :meth:`aclose` from async code)."""
        self._client.connection_pool.disconnect()

    async def aclose(self) -> None:
        """Closes both clients' connections."""
        if self._aclient is not None and self._aloop is asyncio.get_running_loop():
            await self._aclient.aclose(close_connection_pool=True)
        self._aclient = self._aloop = None
        self.close()

    def _async_client(self) -> redis.asyncio.Redis:
        # Asyncio connections belong to the loop that opened them.
        loop = asyncio.get_running_loop()
        if self._aclient is None or self._aloop is not loop:
            self._aclient = redis.asyncio.Redis(
                connection_pool=redis.asyncio.BlockingConnectionPool.from_url(
                    self._url,
                    max_connections=self._max_connections,
                    timeout=self._timeout,
                    socket_timeout=self._timeout,
                    socket_connect_timeout=self._timeout / 2,
                    retry=redis.asyncio.retry.Retry(NoBackoff(), 1, (redis.ConnectionError,)),
                )
            )
            self._aloop = loop
        return self._aclient

    def _unavailable(self, exc: Exception) -> StoreUnavailable:
        return StoreUnavailable(f"Redis store at {_redact(self._url)} failed: {exc}")


def _ms(seconds: float | None) -> str:
    """A TTL as the script takes it: milliseconds, or '' for none."""
    if seconds is None:
        return ""
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"a TTL must be None or a finite number of seconds > 0, got {seconds!r}")
    return str(max(1, math.ceil(seconds * 1000)))


def _command_within(client: redis.Redis, command: tuple[str, ...], deadline: float) -> Any:
    pool = client.connection_pool
    _remaining(deadline)
    with until(deadline):
        conn = pool.get_connection()
        try:
            conn.send_command(*command)  # type: ignore[no-untyped-call]
            return conn.read_response(timeout=_remaining(deadline))
        finally:
            pool.release(conn)


_SCALARS = ("n", "first", "last", "tool")


def _history_fields(tools: Collection[str]) -> list[str]:
    """The hash fields of a history limited to ``tools``: the scalars, then per tool its last
    time and one pair field per recorded effect (see the record script)."""
    fields = list(_SCALARS)
    for tool in sorted(set(tools)):
        head = f"p:{len(tool.encode())}:{tool}"
        fields.append("t:" + tool)
        fields += [head + effect for effect in HISTORY_EFFECTS]
    return fields


def _history_reply(command: tuple[str, ...], reply: Any) -> Mapping[Any, Any]:
    """The hash fields a history command answered, as HGETALL gives them."""
    if command[0] == "HMGET":
        names = [name.encode() for name in command[2:]]
        if reply[0] is None:  # no "n": the session has no history
            return {}
        return {name: value for name, value in zip(names, reply, strict=True)
                if value is not None}
    # HGETALL: a map (RESP3, or redis-py's reply callback) or a flat list (RESP2, raw).
    if isinstance(reply, dict):
        return reply
    return dict(zip(reply[::2], reply[1::2], strict=True))


def _parse_consume(counters: Sequence[Counter], reply: list[bytes]) -> list[CounterState]:
    try:
        states = []
        for i in range(len(counters)):
            reset = reply[3 * i + 2]
            states.append(
                CounterState(
                    float(reply[3 * i]), reply[3 * i + 1] == b"1", float(reset) if reset else None
                )
            )
        return states
    except (ValueError, IndexError, TypeError) as exc:
        raise StoreUnavailable(f"Redis store gave an unexpected reply: {reply!r}") from exc


def _parse_history(session: str, fields: Mapping[Any, Any]) -> SessionHistory:
    if not fields:
        return SessionHistory(session)
    try:
        pairs: list[tuple[str, str, int]] = []
        last_by_tool: dict[str, float] = {}
        for name, value in fields.items():
            if name.startswith(b"p:"):
                length, _, rest = name[2:].partition(b":")
                size = int(length)
                pairs.append((rest[:size].decode(), rest[size:].decode(), int(value)))
            elif name.startswith(b"t:"):
                last_by_tool[name[2:].decode()] = float(value)
        return SessionHistory.from_pairs(
            session,
            pairs,
            count=int(fields[b"n"]),
            first_time=float(fields[b"first"]),
            last_time=float(fields[b"last"]),
            last_tool=fields[b"tool"].decode(),
            last_time_by_tool=last_by_tool,
        )
    except (KeyError, ValueError, UnicodeDecodeError) as exc:
        raise StoreUnavailable(f"Redis session history {session!r} is malformed") from exc


def _parse_value(key: str, fields: list[Any]) -> StoredValue | None:
    text, version, expires = fields
    if text is None:
        return None
    try:
        return StoredValue(key, decode_value(text), int(version),
                           float(expires) if expires else None)
    except (TypeError, ValueError) as exc:
        raise StoreUnavailable(f"Redis record {key!r} is malformed") from exc


def _redact(url: str) -> str:
    """Hides a password in a URL shown in an error."""
    scheme, sep, rest = url.partition("://")
    if "@" in rest:
        rest = "***@" + rest.rsplit("@", 1)[1]
    return scheme + sep + rest
