"""The Redis store's Lua scripts, and how a script or a command is sent on one connection with
every wait bounded by a deadline (to a standalone server, or to the node of a cluster slot)."""

from __future__ import annotations

import hashlib
import itertools
import os
from collections.abc import Sequence
from time import perf_counter as _perf
from typing import Any

import redis
import redis.asyncio
from redis.exceptions import NoScriptError, ResponseError

from callwarden.state._base import Counter, CounterState, StoreUnavailable, spaced_reset
from callwarden.state._redis_deadline import until

__all__ = ["Script", "call_token", "command_within", "commands_within", "consume", "counter_tail",
           "fresh_members", "get_changed", "parse_consume", "record", "refund", "release",
           "remaining", "set_value"]

# A call's token names its entries in windowed counters, which every process shares: a 96-bit
# random prefix per process and a counter (a uuid4 would read the system's random source on
# every decision).
_TOKEN_PREFIX, _TOKENS = os.urandom(12).hex(), itertools.count(1)


def call_token() -> str:
    """The token of a call's entries (ARGV[3] of the consume script): unique across
    processes."""
    return _TOKEN_PREFIX + str(next(_TOKENS))


def _reseed_tokens() -> None:
    global _TOKEN_PREFIX, _TOKENS
    _TOKEN_PREFIX, _TOKENS = os.urandom(12).hex(), itertools.count(1)


os.register_at_fork(after_in_child=_reseed_tokens)  # a child counts from a prefix of its own

_NO_TAIL = ("0", "0")  # no spacing, no members: most counters


def counter_tail(counter: Counter) -> tuple[str, ...]:
    """The consume script's last arguments of a counter: its spacings and its members."""
    if not counter.spacing and not counter.members:
        return _NO_TAIL
    return (str(len(counter.spacing)), *(repr(float(d)) for d in counter.spacing),
            str(len(counter.members)), *counter.members)

# KEYS: two per counter, the entries ZSET and its running total (both the total for a counter
# without a window, both the members ZSET for a counter with members), then the session's
# history hash when a call is recorded.
# ARGV: now, commit, token, tolerance, TTL margin, idle TTL in ms ('' = none), number of
# counters, then the history record: '1' to record (else '0'), tool, effect, history TTL in
# ms ('' = none), the rank that effect already has ('' = none: the effect when no counter is
# exceeded); then per counter: limit, window ('' = forever), weight, always, expires_at,
# rank ('' = none) and effect recorded when it is the highest-ranked exceeded counter, the
# number of spacings and them, the number of members and them.
# Entries are token:index:weight, scored by expiry; weights travel as Python reprs so no
# digits are lost on the way. Members are themselves, scored by expiry. Returns per counter
# used, exceeded, reset_at ('' = none; the limit's, when the usage after this call's writes
# leaves no room for a call like it), the newest
# entry's expiry before this call ('' = none) and, for members, one flag per member ('1':
# the key did not hold it), all as strings: Lua numbers would come back truncated to
# integers. The caller adds the spacing's wait to reset_at.
_CONSUME = """
local now, nownum = ARGV[1], tonumber(ARGV[1])
local commit, token = ARGV[2] == '1', ARGV[3]
local tol, margin, idle = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local n = tonumber(ARGV[7])
local record, tool, effect, hist_ttl = ARGV[8] == '1', ARGV[9], ARGV[10], ARGV[11]
local best = tonumber(ARGV[12])
local at, used, hit, over, last, fresh = {}, {}, {}, {}, {}, {}
local a = 12
for i = 1, n do
  at[i] = a
  local ns = tonumber(ARGV[a + 8])
  a = a + 9 + ns + tonumber(ARGV[a + 9 + ns])
end
local blocked = false
for i = 1, n do
  local a = at[i]
  local limit, window, cost = tonumber(ARGV[a + 1]), ARGV[a + 2], tonumber(ARGV[a + 3])
  local ns = tonumber(ARGV[a + 8])
  local m0, nm = a + 9 + ns, tonumber(ARGV[a + 9 + ns])
  local zkey, skey = KEYS[2 * i - 1], KEYS[2 * i]
  last[i], fresh[i] = '', ''
  if nm > 0 then
    redis.call('ZREMRANGEBYSCORE', zkey, '-inf', now)
    local others, flags = redis.call('ZCARD', zkey), {}
    for j = 1, nm do
      if redis.call('ZSCORE', zkey, ARGV[m0 + j]) then
        others, flags[j] = others - 1, '0'
      else
        flags[j] = '1'
      end
    end
    used[i], fresh[i], cost = tostring(others), table.concat(flags), nm
  else
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
    used[i] = redis.call('GET', skey) or '0'
  end
  if window ~= '' then
    local top = redis.call('ZRANGE', zkey, -1, -1, 'WITHSCORES')
    if #top > 0 then last[i] = top[2] end
  end
  local u = tonumber(used[i])
  hit[i], over[i] = '0', false
  if u + cost - limit > tol * math.max(1, math.abs(limit)) then
    hit[i], over[i], blocked = '1', true, true
  elseif ns > 0 and last[i] ~= '' and u > 0 then
    local k = math.min(ns, math.max(1, math.floor(u + 0.5)))
    if nownum < (tonumber(last[i]) - tonumber(window)) + tonumber(ARGV[a + 8 + k]) then
      hit[i], blocked = '1', true
    end
  end
end
local allowed = commit and not blocked
local out = {}
for i = 1, n do
  local a = at[i]
  local limit, window, weight = tonumber(ARGV[a + 1]), ARGV[a + 2], ARGV[a + 3]
  local always = ARGV[a + 4] == '1'
  local ns = tonumber(ARGV[a + 8])
  local m0, nm = a + 9 + ns, tonumber(ARGV[a + 9 + ns])
  local zkey, skey = KEYS[2 * i - 1], KEYS[2 * i]
  local total = tonumber(used[i])
  local slack = tol * math.max(1, math.abs(limit))
  local reset = ''
  if nm > 0 then
    if allowed then
      local expires = tonumber(ARGV[a + 5])
      for j = 1, nm do
        local old = redis.call('ZSCORE', zkey, ARGV[m0 + j])
        if not old or tonumber(old) < expires then
          redis.call('ZADD', zkey, ARGV[a + 5], ARGV[m0 + j])
        end
      end
      local top = redis.call('ZRANGE', zkey, -1, -1, 'WITHSCORES')
      redis.call('PEXPIRE', zkey, math.ceil((tonumber(top[2]) - nownum) * 1000) + margin)
    end
    if over[i] and nm - limit <= slack then
      -- Only the other calls' members can make room: this call's own are its own.
      local own = {}
      for j = 1, nm do own[ARGV[m0 + j]] = true end
      local need, removed, start = total + nm - limit - slack, 0, 0
      while reset == '' do
        local batch = redis.call('ZRANGE', zkey, start, start + 99, 'WITHSCORES')
        if #batch == 0 then break end
        for j = 1, #batch, 2 do
          if not own[batch[j]] then
            removed = removed + 1
            if removed >= need then
              reset = batch[j + 1]
              break
            end
          end
        end
        start = start + 100
      end
    end
  else
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
    if hit[i] == '1' and window ~= '' and total + tonumber(weight) - limit > slack
        and tonumber(weight) - limit <= slack then
      -- After this call's writes: an attempt counted just now delays the reset too (and
      -- may leave no room for the next one: a spaced-out attempt's reset).
      local need, removed, start = total + tonumber(weight) - limit - slack, 0, 0
      while reset == '' do
        local batch = redis.call('ZRANGE', zkey, start, start + 99, 'WITHSCORES')
        if #batch == 0 then break end
        for j = 1, #batch, 2 do
          removed = removed + tonumber(string.match(batch[j], '[^:]*$'))
          if removed >= need then
            reset = batch[j + 1]
            break
          end
        end
        start = start + 100
      end
    end
  end
  out[5 * i - 4], out[5 * i - 3], out[5 * i - 2] = used[i], hit[i], reset
  out[5 * i - 1], out[5 * i] = last[i], fresh[i]
end
if record then
  for i = 1, n do
    local a = at[i]
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
# counter: 'w' (a window) or 't' (a total), its index in that script and its weight as sent;
# or 'm' (members), their expiry as sent, their number and the members this call added
# (those another call held since, at a later expiry, stay). A windowed entry that has left
# the window meanwhile was taken off its total then.
_REFUND = """
local token, a = ARGV[1], 2
for i = 1, #KEYS / 2 do
  local kind, zkey, skey = ARGV[a], KEYS[2 * i - 1], KEYS[2 * i]
  if kind == 'm' then
    local expires, nm = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
    for j = 1, nm do
      local score = redis.call('ZSCORE', zkey, ARGV[a + 2 + j])
      if score and tonumber(score) == expires then redis.call('ZREM', zkey, ARGV[a + 2 + j]) end
    end
    a = a + 3 + nm
  else
    local weight = ARGV[a + 2]
    if kind == 'w' then
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
    a = a + 3
  end
end
return 1
"""

# Removes members from their keys (a call's slots once it has finished). KEYS: the members
# ZSETs. ARGV: per key the number of its members, then them. Returns how many were held.
_RELEASE = """
local a, removed = 1, 0
for i = 1, #KEYS do
  local nm = tonumber(ARGV[a])
  for j = 1, nm do removed = removed + redis.call('ZREM', KEYS[i], ARGV[a + j]) end
  a = a + 1 + nm
end
return removed
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
release = Script(_RELEASE)
record = Script(_RECORD)
set_value = Script(_SET)
get_changed = Script(_CHANGED)


def parse_consume(counters: Sequence[Counter], reply: list[bytes],
                  now: float) -> list[CounterState]:
    """The counters' states from a consume script's reply (a spacing's wait added to the
    reset time here, where no digit of the times is lost)."""
    try:
        states = []
        for i, counter in enumerate(counters):
            used_text, hit, reset_text, last = reply[5 * i:5 * i + 4]
            used, exceeded = float(used_text), hit == b"1"
            reset = float(reset_text) if reset_text else None
            last_at = float(last) - counter.window if last and counter.window else None
            if exceeded and counter.spacing:
                reset = spaced_reset(counter, used, reset, last_at, now,
                                     counter.always and counter.weight > 0)
            states.append(CounterState(used, exceeded, reset, last_at))
        return states
    except (ValueError, IndexError, TypeError) as exc:
        raise StoreUnavailable(f"Redis store gave an unexpected reply: {reply!r}") from exc


def fresh_members(counters: Sequence[Counter], reply: list[bytes]) -> list[tuple[str, ...]]:
    """Per counter, the members its key did not hold before a consume script (what the call
    added when it was counted)."""
    return [tuple(m for m, flag in zip(c.members, reply[5 * i + 4].decode(), strict=True)
                  if flag == "1") if c.members else ()
            for i, c in enumerate(counters)]
