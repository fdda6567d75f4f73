"""The Redis store's Lua scripts, and how a script or a command is sent on one connection with
every wait bounded by a deadline (to a standalone server, or to the node of a cluster slot)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from time import perf_counter as _perf
from typing import Any

import redis
import redis.asyncio
from redis.exceptions import NoScriptError, ResponseError

from callwarden.state._base import Counter, CounterState, StoreUnavailable
from callwarden.state._redis_deadline import until

__all__ = ["Script", "command_within", "commands_within", "consume", "get_changed",
           "parse_consume", "record", "refund", "remaining", "set_value"]

# KEYS: two per counter, the entries ZSET and its running total (both the total for a counter
# without a window), then the session's history hash when a call is recorded.
# ARGV: now, commit, token, tolerance, TTL margin, idle TTL in ms ('' = none), number of
# counters, then the history record: '1' to record (else '0'), tool, effect, history TTL in
# ms ('' = none), the rank that effect already has ('' = none: the effect when no counter is
# exceeded); then per counter: limit, window ('' = forever), weight, always, expires_at,
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
local best = tonumber(ARGV[12])
local base = 12
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

# Gives back what a consume script counted for a call that another slot then refused.
# KEYS: two per counter, as the consume script took them. ARGV: the call's token, then per
# counter: its index in that script, '1' when it has a window (else ''), and its weight as
# sent. A windowed entry that has left the window meanwhile was taken off its total then.
_REFUND = """
local token = ARGV[1]
for i = 1, #KEYS / 2 do
  local a = 1 + (i - 1) * 3
  local weight, zkey, skey = ARGV[a + 3], KEYS[2 * i - 1], KEYS[2 * i]
  if ARGV[a + 2] == '1' then
    if redis.call('ZREM', zkey, token .. ':' .. ARGV[a + 1] .. ':' .. weight) == 1 then
      if redis.call('EXISTS', zkey) == 0 then
        redis.call('DEL', skey)
      else
        redis.call('INCRBYFLOAT', skey, '-' .. weight)
      end
    end
  elseif redis.call('EXISTS', skey) == 1 then
    redis.call('INCRBYFLOAT', skey, '-' .. weight)
  end
end
return 1
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


# KEYS[1]: a record's hash. ARGV[1]: the version the caller holds. Returns v, n, e as HMGET
# does, with v left out ('') when the version is the caller's (its expiry is then compared by
# the caller), and nothing when there is no record.
_CHANGED = """
local f = redis.call('HMGET', KEYS[1], 'n', 'e')
if not f[1] then return {} end
if f[1] == ARGV[1] then return {'', f[1], f[2] or ''} end
return redis.call('HMGET', KEYS[1], 'v', 'n', 'e')
"""


class Script:
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
               deadline: float, asking: bool = False) -> Any:
        """Runs the script, waiting for the reply no longer than until ``deadline``.

        A connection that times out is dropped, so a late reply can never be read as the
        answer to another command. ``asking``: the cluster node was named by an ASK
        redirection (the script is preceded by ASKING).
        """
        pool = client.connection_pool
        with until(deadline):  # the pool wait, connect and handshake end at it too
            for attempt in (1, 2):
                remaining(deadline)  # nothing is sent once the deadline has passed
                conn = pool.get_connection()
                try:
                    try:
                        if asking:
                            _ask(conn, deadline)
                        conn.send_command("EVALSHA", self.sha, len(keys), *keys, *args)  # type: ignore[no-untyped-call]
                        return _read(conn, deadline)
                    except NoScriptError:
                        if asking:
                            _ask(conn, deadline)
                        conn.send_command("EVAL", self.source, len(keys), *keys, *args)  # type: ignore[no-untyped-call]
                        return _read(conn, deadline)
                    except redis.ConnectionError:
                        # Once, like the client's own retry: a pooled connection the server
                        # dropped (a restart) is replaced.
                        conn.disconnect()  # type: ignore[no-untyped-call]
                        if attempt == 2:
                            raise
                finally:
                    pool.release(conn)
        raise AssertionError("unreachable")

    async def acall(self, client: Any, keys: list[str], args: list[str]) -> Any:
        """Runs the script through an asyncio client (a server's or a cluster's)."""
        try:
            return await client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            return await client.eval(self.source, len(keys), *keys, *args)


def _ask(conn: Any, deadline: float) -> None:
    """Says the next command follows an ASK redirection (one command only)."""
    conn.send_command("ASKING")
    _read(conn, deadline)


def _read(conn: Any, deadline: float) -> Any:
    """The reply to what was just sent on ``conn``. A connection left before its reply came
    (the deadline passed in between) is dropped: that reply must never answer another
    command. An error reply was read whole: the connection stays."""
    try:
        return conn.read_response(timeout=remaining(deadline))
    except ResponseError:
        raise
    except BaseException:
        conn.disconnect()
        raise


def remaining(deadline: float) -> float:
    """Seconds left before ``deadline``; raises a Redis timeout once it has passed."""
    left = deadline - _perf()
    if left <= 0:
        raise redis.TimeoutError("the deadline passed")
    return left


def command_within(client: redis.Redis, command: Sequence[Any], deadline: float,
                   asking: bool = False) -> Any:
    """Sends one command and reads its raw reply, waiting no longer than until ``deadline``."""
    pool = client.connection_pool
    remaining(deadline)
    with until(deadline):
        conn = pool.get_connection()
        try:
            if asking:
                _ask(conn, deadline)
            conn.send_command(*command)  # type: ignore[no-untyped-call]
            return _read(conn, deadline)
        finally:
            pool.release(conn)


def commands_within(client: redis.Redis, commands: Sequence[Sequence[Any]],
                    deadline: float) -> list[Any]:
    """Sends commands in one write and reads their raw replies, waiting no longer than until
    ``deadline``; an error reply comes back in its place (a redirection among them)."""
    pool = client.connection_pool
    remaining(deadline)
    with until(deadline):
        conn = pool.get_connection()
        try:
            conn.send_packed_command(conn.pack_commands(commands))  # type: ignore[no-untyped-call]
            replies: list[Any] = []
            for _ in commands:
                try:
                    replies.append(_read(conn, deadline))
                except ResponseError as exc:  # read whole: the connection is still in step
                    replies.append(exc)
            return replies
        finally:
            pool.release(conn)


consume = Script(_CONSUME)
refund = Script(_REFUND)
record = Script(_RECORD)
set_value = Script(_SET)
get_changed = Script(_CHANGED)


def parse_consume(counters: Sequence[Counter], reply: list[bytes]) -> list[CounterState]:
    """The counters' states from a consume script's reply."""
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
