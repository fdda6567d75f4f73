"""The Redis store: shared by every host that reaches the server; one round trip per decision."""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import redis
import redis.asyncio
import redis.asyncio.retry
import redis.retry
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError, RedisError

from callwarden.state._base import (
    TOLERANCE,
    Counter,
    CounterState,
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

__all__ = ["RedisStore"]

# Keys live this long past their newest entry's expiry (server time), so that a server clock
# slightly behind the callers' never drops usage that still counts.
_TTL_MARGIN_MS = 1000

# KEYS: two per counter, the entries ZSET and its running total (both the total for a counter
# without a window). ARGV: now, commit, token, tolerance, TTL margin, then per counter:
# limit, window ('' = forever), weight, always, expires_at. Members are token:index:weight,
# scored by expiry; weights travel as Python reprs so no digits are lost on the way.
# Returns used, exceeded, reset_at ('' = none) per counter, all as strings: Lua numbers would
# come back truncated to integers.
_CONSUME = """
local now, nownum = ARGV[1], tonumber(ARGV[1])
local commit, token = ARGV[2] == '1', ARGV[3]
local tol, margin = tonumber(ARGV[4]), tonumber(ARGV[5])
local n = #KEYS / 2
local used, hit, reset = {}, {}, {}
local blocked = false
for i = 1, n do
  local a = 5 + (i - 1) * 5
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
  local un = tonumber(u)
  local slack = tol * math.max(1, math.abs(limit))
  used[i], hit[i], reset[i] = u, '0', ''
  if un + weight - limit > slack then
    hit[i], blocked = '1', true
    if window ~= '' and weight - limit <= slack then
      local need, removed, start = un + weight - limit - slack, 0, 0
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
  end
end
local allowed = commit and not blocked
local out = {}
for i = 1, n do
  local a = 5 + (i - 1) * 5
  local window, weight, always = ARGV[a + 2], ARGV[a + 3], ARGV[a + 4] == '1'
  if tonumber(weight) > 0 and (allowed or always) then
    local zkey, skey = KEYS[2 * i - 1], KEYS[2 * i]
    redis.call('INCRBYFLOAT', skey, weight)
    if window ~= '' then
      redis.call('ZADD', zkey, ARGV[a + 5], token .. ':' .. i .. ':' .. weight)
      local top = redis.call('ZRANGE', zkey, -1, -1, 'WITHSCORES')
      local ttl = math.ceil((tonumber(top[2]) - nownum) * 1000) + margin
      redis.call('PEXPIRE', zkey, ttl)
      redis.call('PEXPIRE', skey, ttl)
    end
  end
  out[3 * i - 2], out[3 * i - 1], out[3 * i] = used[i], hit[i], reset[i]
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

    async def acall(self, client: redis.asyncio.Redis, keys: list[str], args: list[str]) -> Any:
        try:
            return await client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            return await client.eval(self.source, len(keys), *keys, *args)


_consume = _Script(_CONSUME)
_record = _Script(_RECORD)
_set = _Script(_SET)


class RedisStore(StateStore):
    """Counters and history in Redis, shared by every process and host using the server.

    Each :meth:`consume` is one Lua script (EVALSHA), hence atomic and one round trip. Windowed
    keys expire by themselves once their newest entry has left the window. A server that is
    down or slower than ``timeout`` raises :class:`StoreUnavailable`; the store reconnects on
    the next call. A call that fails after reaching the server may have been counted: failing
    closed may overcount, never undercount. Keys of one call must live on one server (no
    Redis Cluster).

    Args:
        url: ``redis://host:port/db``, ``rediss://...`` or ``unix://...``.
        prefix: Prepended to every key.
        timeout: Seconds to wait for a connection or a reply.
        history_ttl: Forget a session's history this many seconds after its last call.
        max_connections: Connections per client (one sync, one async per event loop).
    """

    __slots__ = (
        "_aclient",
        "_aloop",
        "_client",
        "_history_ttl_ms",
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
        history_ttl: float | None = None,
        max_connections: int = 64,
    ) -> None:
        self._url = url
        self._prefix = prefix
        self._timeout = timeout
        self._max_connections = max_connections
        self._history_ttl_ms = "" if history_ttl is None else str(math.ceil(history_ttl * 1000))
        # One retry on connection errors only: it replaces a pooled connection the server
        # dropped (a restart) without doubling the wait on a slow server.
        self._client = redis.Redis(
            connection_pool=redis.BlockingConnectionPool.from_url(
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
        self, counters: Sequence[Counter], *, now: float, commit: bool
    ) -> list[CounterState]:
        """See :meth:`StateStore.consume`."""
        if not counters:
            return []
        keys, args = self._consume_args(counters, now, commit)
        try:
            reply = _consume(self._client, keys, args)
        except (RedisError, UnicodeEncodeError) as exc:
            raise self._unavailable(exc) from exc
        return _parse_consume(counters, reply)

    async def aconsume(
        self, counters: Sequence[Counter], *, now: float, commit: bool
    ) -> list[CounterState]:
        """See :meth:`StateStore.consume`."""
        if not counters:
            return []
        keys, args = self._consume_args(counters, now, commit)
        try:
            reply = await _consume.acall(self._async_client(), keys, args)
        except (RedisError, UnicodeEncodeError) as exc:
            raise self._unavailable(exc) from exc
        return _parse_consume(counters, reply)

    def _consume_args(
        self, counters: Sequence[Counter], now: float, commit: bool
    ) -> tuple[list[str], list[str]]:
        prefix = self._prefix
        keys: list[str] = []
        args = [repr(float(now)), "1" if commit else "0", uuid.uuid4().hex, repr(TOLERANCE)]
        args.append(str(_TTL_MARGIN_MS))
        for c in counters:
            if c.window is None:
                total = f"{prefix}t:{c.key}"
                keys += (total, total)
                window = expires = ""
            else:
                keys += (f"{prefix}w:{c.key}", f"{prefix}s:{c.key}")
                window, expires = repr(float(c.window)), repr(now + c.window)
            args += (repr(float(c.limit)), window, repr(float(c.weight)), "1" if c.always else "0")
            args.append(expires)
        return keys, args

    # -- history ------------------------------------------------------------------------

    def record(self, session: str, tool: str, effect: str, *, now: float) -> None:
        """See :meth:`StateStore.record`."""
        keys, args = [self._prefix + "h:" + session], self._record_args(tool, effect, now)
        try:
            _record(self._client, keys, args)
        except (RedisError, UnicodeEncodeError) as exc:
            raise self._unavailable(exc) from exc

    async def arecord(self, session: str, tool: str, effect: str, *, now: float) -> None:
        """See :meth:`StateStore.record`."""
        keys, args = [self._prefix + "h:" + session], self._record_args(tool, effect, now)
        try:
            await _record.acall(self._async_client(), keys, args)
        except (RedisError, UnicodeEncodeError) as exc:
            raise self._unavailable(exc) from exc

    def _record_args(self, tool: str, effect: str, now: float) -> list[str]:
        return [tool, effect, repr(float(now)), self._history_ttl_ms]

    def history(self, session: str) -> SessionHistory:
        """See :meth:`StateStore.history`."""
        try:
            fields = self._client.hgetall(self._prefix + "h:" + session)
        except (RedisError, UnicodeEncodeError) as exc:
            raise self._unavailable(exc) from exc
        return _parse_history(session, fields)

    async def ahistory(self, session: str) -> SessionHistory:
        """See :meth:`StateStore.history`."""
        try:
            fields = await self._async_client().hgetall(self._prefix + "h:" + session)
        except (RedisError, UnicodeEncodeError) as exc:
            raise self._unavailable(exc) from exc
        return _parse_history(session, fields)

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
