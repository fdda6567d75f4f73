"""The Redis store: shared by every host that reaches the server (or cluster); one round trip
per decision."""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from time import perf_counter as _perf
from typing import Any, TypeVar

import redis
import redis.asyncio
import redis.asyncio.retry
import redis.retry
from redis.backoff import NoBackoff

from callwarden._flow import adrive, drive
from callwarden.state import _redis_scripts as lua
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
from callwarden.state._redis_cluster import FAILURES, ClusterLink, slot_of
from callwarden.state._redis_deadline import bounded_pool
from callwarden.state._redis_pipe import Pipe, pipelinable
from callwarden.state._redis_scripts import (
    Script,
    call_token,
    command_within,
    counter_tail,
    parse_consume,
    remaining,
)
from callwarden.state._redis_slots import Consumption, consume_across_slots
from callwarden.state._redis_url import is_cluster_url, redact

__all__ = ["RedisStore"]

# Keys live this long past their newest entry's expiry (server time), so that a server clock
# slightly behind the callers' never drops usage that still counts.
_TTL_MARGIN = "1000"
_TAGS_KEPT = 4096  # hash tags remembered per store (a digest each), then forgotten at once
_GLOB_SPECIAL = re.compile(r"([\\*?\[\]])")
_ERRORS = (*FAILURES, UnicodeEncodeError)
_T = TypeVar("_T")


class RedisStore(StateStore):
    """Counters and history in Redis, shared by every process and host using the server.

    Each :meth:`consume` is one Lua script (EVALSHA), hence atomic and one round trip, which
    also records the call in its session's history when asked to. Windowed keys expire by
    themselves once their newest entry has left the window; counters without a window and
    session histories expire ``idle_ttl`` / ``history_ttl`` after their last use. A server
    that is down or slower than ``timeout`` (or the caller's deadline, if sooner) raises
    :class:`StoreUnavailable`; the store reconnects on the next call. A counter with members
    is one ZSET of its members scored by expiry, expiring with its newest member's hold;
    :meth:`release` is one script removing them.

    Overcount window: a script sent before the deadline runs on the server even when its
    reply comes too late (a frozen or overloaded server works through what it received), so
    a decision that failed closed may still have been counted. Failing closed may overcount,
    never undercount; nothing is sent once the deadline has passed.

    Redis Cluster (``redis+cluster://host:port,host:port/``): every counter and history key
    carries a hash tag, ``{`` + a digest of the counter's shard (its session when it counts per
    session, else its key) or of the session + ``}``, so a counter's entries and total share a
    slot, and a decision's per-session counters share one with that session's history: such
    a decision is still one script, on one node. A decision with counters in several slots
    (a per-session budget and a global one) is one script per slot, by slot, the history's
    slot last: a slot that refuses has what the earlier slots took for this call given back
    (exactly this call's entries); usage never exceeds a limit and never undercounts, but a
    concurrent call may see a reservation that is then given back, and be refused: failing
    closed. A node that is down, frozen or slower than the deadline, CLUSTERDOWN, or more
    than a few MOVED/ASK redirections raise :class:`StoreUnavailable` within the deadline.
    Records (approvals) are listed from every primary. On a single server the tags change
    nothing. The prefix of a cluster store may hold no braces.

    Args:
        url: ``redis://host:port/db``, ``rediss://...``, ``unix://...``, or a cluster:
            ``redis+cluster://host:port[,host:port...]/`` (``rediss+cluster://`` for TLS).
        prefix: Prepended to every key.
        timeout: Seconds to wait for a connection or a reply.
        history_ttl: Forget a session's history this many seconds after its last call
            (``None``: never).
        idle_ttl: Forget a counter without a window this many seconds after its last use
            (``None``: never).
        max_connections: Connections per client (one sync, one async per event loop); on a
            cluster, per node.
    """

    __slots__ = (
        "_aclient",
        "_aloop",
        "_client",
        "_history_ttl_ms",
        "_idle_ttl_ms",
        "_layouts",
        "_link",
        "_max_connections",
        "_pipe",
        "_pipe_loop",
        "_pipelined",
        "_prefix",
        "_tags",
        "_timeout",
        "_url",
    )

    _client: redis.Redis  # a single server's (unset for a cluster, which ``_link`` reaches)

    @property
    def deadline_bound(self) -> frozenset[Any]:
        """The async methods that end every wait at the ``deadline`` they are given, so a
        caller needs no timer of its own: on a single server over TCP or a Unix socket,
        whose pipelined connection keeps each command's deadline (see :mod:`._redis_pipe`)."""
        return _DEADLINE_BOUND if self._pipelined else frozenset()

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
        self._tags: dict[str, tuple[str, int]] = {}
        self._layouts: dict[int, _Layout] = {}
        self._link: ClusterLink | None = None
        self._aclient: redis.asyncio.Redis | None = None
        self._aloop: asyncio.AbstractEventLoop | None = None
        self._pipe: Pipe | None = None
        self._pipe_loop: asyncio.AbstractEventLoop | None = None
        self._pipelined = pipelinable(url) and not is_cluster_url(url)
        if is_cluster_url(url):
            if "{" in prefix or "}" in prefix:
                raise ValueError(f"a Redis Cluster key prefix may not hold braces, got {prefix!r}:"
                                 " the store chooses the hash tags")
            self._link = ClusterLink(url, timeout=timeout, max_connections=max_connections)
            return
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

    # -- counters -----------------------------------------------------------------------

    def consume(
        self, counters: Sequence[Counter], *, now: float, commit: bool,
        deadline: float | None = None, record: HistoryEntry | None = None,
    ) -> list[CounterState]:
        """See :meth:`StateStore.consume`."""
        if not counters and record is None:
            return []
        keys, args, slot = self._consume_args(counters, now, commit, record)
        try:
            link = self._link
            if link is not None and slot is None:
                return self._consume_across(link, counters, now, commit, deadline, record)
            reply = self._script(slot, lua.consume, keys, args, deadline)
        except _ERRORS as exc:
            raise self._unavailable(exc) from exc
        return parse_consume(counters, reply, now)

    async def aconsume(
        self, counters: Sequence[Counter], *, now: float, commit: bool,
        deadline: float | None = None, record: HistoryEntry | None = None,
    ) -> list[CounterState]:
        """See :meth:`StateStore.consume`. The caller bounds the wait (``asyncio.wait_for``);
        nothing is sent once ``deadline`` has passed."""
        if not counters and record is None:
            return []
        keys, args, slot = self._consume_args(counters, now, commit, record)
        try:
            if deadline is not None:
                remaining(deadline)
            if self._link is None or slot is not None:
                reply = await self._ascript(lua.consume, keys, args, deadline)
            else:
                plan = self._consumption(counters, now, record)

                async def run(step: Any) -> Any:
                    if deadline is not None:
                        remaining(deadline)  # nothing is sent once the deadline has passed
                    return await self._ause(
                        lambda client: step.script.acall(client, step.keys, step.args))

                return await adrive(consume_across_slots(plan, commit), run)
        except _ERRORS as exc:
            raise self._unavailable(exc) from exc
        return parse_consume(counters, reply, now)

    def _consume_across(self, link: ClusterLink, counters: Sequence[Counter], now: float,
                        commit: bool, deadline: float | None,
                        record: HistoryEntry | None) -> list[CounterState]:
        """A cluster consume over counters of several slots: one script per slot (see
        :mod:`._redis_slots`), each waiting no longer than the deadline."""
        plan = self._consumption(counters, now, record)
        return drive(consume_across_slots(plan, commit), lambda step: self._run(
            link, step.slot, step.script, step.keys, step.args, deadline))

    def _bound(self, deadline: float | None) -> float:
        """The caller's deadline, or this store's own timeout if sooner."""
        own = _perf() + self._timeout
        return own if deadline is None else min(deadline, own)

    def _script(self, slot: int | None, script: Script, keys: list[str], args: list[str],
                deadline: float | None) -> Any:
        """Runs a script on the server, or on the cluster node serving ``slot``; within the
        deadline when there is one (a cluster's: always within the store's timeout)."""
        link = self._link
        if link is not None:
            assert slot is not None, "a cluster script needs the slot of its keys"
            return self._run(link, slot, script, keys, args, deadline)
        if deadline is None:
            return script(self._client, keys, args)
        return script.within(self._client, keys, args, self._bound(deadline))

    def _run(self, link: ClusterLink, slot: int, script: Script, keys: list[str],
             args: list[str], deadline: float | None) -> Any:
        """Runs a script on the cluster node serving ``slot``, within the deadline."""
        bound = self._bound(deadline)
        return link.run(slot, bound, lambda client, asking: script.within(
            client, keys, args, bound, asking))

    def _consume_args(
        self, counters: Sequence[Counter], now: float, commit: bool,
        record: HistoryEntry | None,
    ) -> tuple[list[str], list[str], int | None]:
        """The consume script's keys and arguments, and the slot of all its keys (``None``
        when they are in several: a cluster then runs it slot by slot)."""
        keys: list[str] = []
        args = [repr(float(now)), "1" if commit else "0", call_token(), _TOLERANCE,
                _TTL_MARGIN, self._idle_ttl_ms, str(len(counters))]
        if record is None:
            args += ("0", "", "", "", "")
            ranks: tuple[tuple[float, str] | None, ...] = ()
            slot = -1
        else:
            args += ("1", record.tool, record.effect, self._history_ttl_ms, "")
            ranks = record.if_exceeded
            slot = self._tag(record.session)[1]
        for i, c in enumerate(counters):
            _, counter_slot, counter_keys, fixed, tail = self._layout(c)
            if slot != counter_slot:
                slot = counter_slot if slot == -1 else -2
            keys += counter_keys
            args += fixed
            expires = "" if c.window is None else repr(now + c.window)
            alternative = ranks[i] if i < len(ranks) else None
            if alternative is None:
                args += (expires, "", "")
            else:
                args += (expires, repr(float(alternative[0])), alternative[1])
            args += tail
        if record is not None:
            keys.append(self._history_key(record.session))
        return keys, args, slot if slot >= 0 else None

    def _layout(self, c: Counter) -> _Layout:
        """What the consume script takes of a counter whatever the time (see ``_Layout``),
        kept for a counter without members (a limit's counters are kept and used again)."""
        layout = self._layouts.get(id(c))
        if layout is not None and layout[0] is c:  # (it holds c: its id is not reused)
            return layout
        window = "" if c.window is None else repr(float(c.window))
        layout = (c, self._tag(c.key if c.shard is None else c.shard)[1], self._counter_keys(c),
                  (repr(float(c.limit)), window, repr(float(c.weight)), "1" if c.always else "0"),
                  counter_tail(c))
        if not c.members:
            if len(self._layouts) >= _TAGS_KEPT:
                self._layouts.clear()  # (as the tags)
            self._layouts[id(c)] = layout
        return layout

    def _consumption(self, counters: Sequence[Counter], now: float,
                     record: HistoryEntry | None) -> Consumption:
        """What a consume sends, laid out per counter (for one script per slot)."""
        keys, bodies, slots = [], [], []
        tails = []
        for c in counters:
            _, _, counter_keys, fixed, tail = self._layout(c)
            keys.append(counter_keys)
            slots.append(slot_of(counter_keys[1]))
            bodies.append((*fixed, "" if c.window is None else repr(now + c.window)))
            tails.append(tail)
        session = "" if record is None else record.session
        history = self._history_key(session)
        head = (repr(float(now)), call_token(), _TOLERANCE, _TTL_MARGIN, self._idle_ttl_ms)
        return Consumption(counters, keys, bodies, slots, head, self._history_ttl_ms, record,
                           history, slot_of(history), tails, now)

    def _tag(self, name: str) -> tuple[str, int]:
        """The hash tag of a shard or session name, and its cluster slot."""
        found = self._tags.get(name)
        if found is None:
            if len(self._tags) >= _TAGS_KEPT:
                self._tags.clear()
            digest = hashlib.blake2b(name.encode("utf-8", "surrogatepass"), digest_size=6)
            tag = "{" + digest.hexdigest() + "}"
            found = self._tags[name] = (tag, slot_of(tag))
        return found

    def _counter_keys(self, counter: Counter) -> tuple[str, str]:
        """A counter's entries key and total key (the same key without a window; its members
        key twice for a counter with members)."""
        tag = self._tag(counter.key if counter.shard is None else counter.shard)[0]
        if counter.members:
            held = f"{self._prefix}m:{tag}:{counter.key}"
            return held, held
        if counter.window is None:
            total = f"{self._prefix}t:{tag}:{counter.key}"
            return total, total
        return f"{self._prefix}w:{tag}:{counter.key}", f"{self._prefix}s:{tag}:{counter.key}"

    def _history_key(self, session: str) -> str:
        """The key of a session's history hash."""
        return f"{self._prefix}h:{self._tag(session)[0]}:{session}"

    def release(self, counters: Sequence[Counter], *, deadline: float | None = None) -> None:
        """See :meth:`StateStore.release`. One script (one per slot on a cluster)."""
        groups = self._release_groups(counters)
        try:
            for slot, (keys, args) in groups.items():
                self._script(slot, lua.release, keys, args, deadline)
        except _ERRORS as exc:
            raise self._unavailable(exc) from exc

    async def arelease(self, counters: Sequence[Counter], *,
                       deadline: float | None = None) -> None:
        """See :meth:`StateStore.release`."""
        groups = self._release_groups(counters)
        try:
            for keys, args in groups.values():
                if deadline is not None:
                    remaining(deadline)  # nothing is sent once the deadline has passed
                await self._ascript(lua.release, keys, args, deadline)  # a cluster: its slot's node
        except _ERRORS as exc:
            raise self._unavailable(exc) from exc

    def _release_groups(self, counters: Sequence[Counter]
                        ) -> dict[int, tuple[list[str], list[str]]]:
        """The release script's keys and arguments, per slot (one group on a server)."""
        groups: dict[int, tuple[list[str], list[str]]] = {}
        for c in counters:
            if not c.members:
                continue
            slot = -1 if self._link is None else self._tag(
                c.key if c.shard is None else c.shard)[1]
            keys, args = groups.setdefault(slot, ([], []))
            keys.append(self._counter_keys(c)[0])
            args += (str(len(c.members)), *c.members)
        return groups

    # -- history ------------------------------------------------------------------------

    def record(self, session: str, tool: str, effect: str, *, now: float,
               deadline: float | None = None) -> None:
        """See :meth:`StateStore.record`."""
        keys, args = [self._history_key(session)], self._record_args(tool, effect, now)
        try:
            slot = None if self._link is None else self._tag(session)[1]
            self._script(slot, lua.record, keys, args, deadline)
        except _ERRORS as exc:
            raise self._unavailable(exc) from exc

    async def arecord(self, session: str, tool: str, effect: str, *, now: float,
                      deadline: float | None = None) -> None:
        """See :meth:`StateStore.record`."""
        keys, args = [self._history_key(session)], self._record_args(tool, effect, now)
        try:
            if deadline is not None:
                remaining(deadline)
            await self._ascript(lua.record, keys, args, deadline)
        except _ERRORS as exc:
            raise self._unavailable(exc) from exc

    def _record_args(self, tool: str, effect: str, now: float) -> list[str]:
        return [tool, effect, repr(float(now)), self._history_ttl_ms]

    def history(self, session: str, *, deadline: float | None = None,
                tools: Collection[str] | None = None) -> SessionHistory:
        """See :meth:`StateStore.history`. One ``HGETALL``, or one ``HMGET`` of the fields of
        ``tools`` when given."""
        key = self._history_key(session)
        command = ("HGETALL", key) if tools is None else ("HMGET", key, *_history_fields(tools))
        try:
            if self._link is not None:
                reply = self._link.command(self._tag(session)[1], self._bound(deadline),
                                           *command)
            elif deadline is None or deadline - _perf() >= self._timeout:
                reply = self._client.execute_command(*command)  # type: ignore[no-untyped-call]
            else:
                reply = command_within(self._client, command, deadline)
        except _ERRORS as exc:
            raise self._unavailable(exc) from exc
        return _parse_history(session, _history_reply(command, reply))

    async def ahistory(self, session: str, *, deadline: float | None = None,
                       tools: Collection[str] | None = None) -> SessionHistory:
        """See :meth:`StateStore.history`."""
        key = self._history_key(session)
        command = ("HGETALL", key) if tools is None else ("HMGET", key, *_history_fields(tools))
        try:
            reply = await self._ause(lambda client: client.execute_command(*command))
        except _ERRORS as exc:
            raise self._unavailable(exc) from exc
        return _parse_history(session, _history_reply(command, reply))

    # -- key-value records ----------------------------------------------------------------

    def get(self, key: str) -> StoredValue | None:
        """See :meth:`StateStore.get`. One ``HMGET``."""
        check_key(key)
        name = self._kv_key(key)
        try:
            if self._link is not None:
                fields = self._link.command(slot_of(name), self._bound(None),
                                            "HMGET", name, "v", "n", "e")
            else:
                fields = self._client.hmget(name, "v", "n", "e")
        except _ERRORS as exc:
            raise self._unavailable(exc) from exc
        return _parse_value(key, fields)

    async def aget(self, key: str) -> StoredValue | None:
        """See :meth:`StateStore.get`."""
        check_key(key)
        try:
            fields = await self._ause(lambda client: client.hmget(self._kv_key(key), "v", "n",
                                                                  "e"))
        except _ERRORS as exc:
            raise self._unavailable(exc) from exc
        return _parse_value(key, fields)

    def get_changed(self, key: str, known: StoredValue | None) -> StoredValue | None:
        """See :meth:`StateStore.get_changed`. One Lua script, which leaves out the value of
        a record at the caller's version."""
        check_key(key)
        keys, args = [self._kv_key(key)], [str(known.version) if known is not None else ""]
        try:
            if self._link is not None:
                fields = self._run(self._link, slot_of(keys[0]), lua.get_changed, keys, args, None)
            else:
                fields = lua.get_changed(self._client, keys, args)
        except _ERRORS as exc:
            raise self._unavailable(exc) from exc
        found = _changed(key, known, fields)
        return self.get(key) if found is _AGAIN else found

    async def aget_changed(self, key: str, known: StoredValue | None) -> StoredValue | None:
        """See :meth:`StateStore.get_changed`."""
        check_key(key)
        keys, args = [self._kv_key(key)], [str(known.version) if known is not None else ""]
        try:
            fields = await self._ause(lambda client: lua.get_changed.acall(client, keys, args))
        except _ERRORS as exc:
            raise self._unavailable(exc) from exc
        found = _changed(key, known, fields)
        return await self.aget(key) if found is _AGAIN else found

    def put(self, key: str, value: Mapping[str, Any], *, ttl: float | None) -> int:
        """See :meth:`StateStore.put`. One Lua script."""
        keys, args = self._set_args(key, "*", value, ttl)
        try:
            return int(self._set(keys, args))
        except _ERRORS as exc:
            raise self._unavailable(exc) from exc

    async def aput(self, key: str, value: Mapping[str, Any], *, ttl: float | None) -> int:
        """See :meth:`StateStore.put`."""
        keys, args = self._set_args(key, "*", value, ttl)
        try:
            return int(await self._ause(lambda client: lua.set_value.acall(client, keys, args)))
        except _ERRORS as exc:
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
            return int(self._set(keys, args)) > 0
        except _ERRORS as exc:
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
            return int(await self._ause(lambda client: lua.set_value.acall(client, keys, args))) > 0
        except _ERRORS as exc:
            raise self._unavailable(exc) from exc

    def _set(self, keys: list[str], args: list[str]) -> Any:
        if self._link is not None:
            return self._run(self._link, slot_of(keys[0]), lua.set_value, keys, args, None)
        return lua.set_value(self._client, keys, args)

    def delete(self, key: str) -> bool:
        """See :meth:`StateStore.delete`."""
        check_key(key)
        name = self._kv_key(key)
        try:
            if self._link is not None:
                return int(self._link.command(slot_of(name), self._bound(None), "DEL", name)) > 0
            return int(self._client.delete(name)) > 0
        except _ERRORS as exc:
            raise self._unavailable(exc) from exc

    async def adelete(self, key: str) -> bool:
        """See :meth:`StateStore.delete`."""
        check_key(key)
        try:
            return int(await self._ause(lambda client: client.delete(self._kv_key(key)))) > 0
        except _ERRORS as exc:
            raise self._unavailable(exc) from exc

    def scan(self, prefix: str) -> list[StoredValue]:
        """See :meth:`StateStore.scan`. ``SCAN`` with a pattern (on every primary of a
        cluster), then pipelined reads (one per node)."""
        try:
            if self._link is not None:
                names = self._link.keys_matching(self._kv_match(prefix), self._timeout)
                replies = self._link.read_many(names, lambda name: ("HMGET", name, "v", "n", "e"),
                                               self._timeout)
            else:
                names = sorted(set(self._client.scan_iter(match=self._kv_match(prefix),
                                                          count=500)))
                pipe = self._client.pipeline(transaction=False)
                for name in names:
                    pipe.hmget(name, "v", "n", "e")
                replies = pipe.execute()
        except _ERRORS as exc:
            raise self._unavailable(exc) from exc
        return self._parse_scan(names, replies)

    async def ascan(self, prefix: str) -> list[StoredValue]:
        """See :meth:`StateStore.scan`."""

        async def read(client: Any) -> tuple[list[bytes], list[Any]]:
            found = {name async for name in client.scan_iter(match=self._kv_match(prefix),
                                                              count=500)}
            names = sorted(found)
            pipe = client.pipeline(transaction=False)
            for name in names:
                pipe.hmget(name, "v", "n", "e")
            return names, await pipe.execute()

        try:
            names, replies = await self._ause(read)
        except _ERRORS as exc:
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
        if self._link is not None:
            self._link.close()
        else:
            self._client.connection_pool.disconnect()

    async def aclose(self) -> None:
        """Closes both clients' connections."""
        if self._link is not None:
            await self._link.aclose()
            return
        if self._pipe is not None and self._pipe_loop is asyncio.get_running_loop():
            await self._pipe.aclose()
        self._pipe = self._pipe_loop = None
        if self._aclient is not None and self._aloop is asyncio.get_running_loop():
            await self._aclient.aclose(close_connection_pool=True)
        self._aclient = self._aloop = None
        self.close()

    async def _ascript(self, script: Script, keys: list[str], args: list[str],
                       deadline: float | None = None) -> Any:
        """A script on a single server through this event loop's pipelined connection (the
        decisions of a busy process share one connection and its writes: see
        :mod:`._redis_pipe`), waiting no longer than ``deadline`` or the store's timeout; on a
        cluster, or over TLS, through the asyncio client (whose waits the caller bounds)."""
        if not self._pipelined:
            return await self._ause(lambda client: script.acall(client, keys, args))
        loop = asyncio.get_running_loop()
        if self._pipe is None or self._pipe_loop is not loop:  # it belongs to its loop
            self._pipe, self._pipe_loop = Pipe(self._url, self._timeout / 2), loop
        until = self._bound(deadline)  # the caller's deadline, or the store's own bound
        try:
            return await self._pipe.script(script.sha, script.source, keys, args, until=until)
        except TimeoutError:
            raise redis.TimeoutError("no reply within the deadline" if until == deadline
                                     else f"no reply within {self._timeout} s") from None

    async def _ause(self, use: Callable[[Any], Awaitable[_T]]) -> _T:
        """``use(client)`` with the asyncio client: the server's, or the cluster's (which
        routes each command to its slot's node)."""
        if self._link is None:
            return await use(self._async_client())
        async with self._link.client() as client:
            return await use(client)

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
        return StoreUnavailable(f"Redis store at {redact(self._url)} failed: {exc}")


# The async methods whose waits end at their deadline on a pipelined server (see
# ``RedisStore.deadline_bound``): the three a decision's writes go through.
_DEADLINE_BOUND = frozenset({RedisStore.aconsume, RedisStore.arecord, RedisStore.arelease})


def _ms(seconds: float | None) -> str:
    """A TTL as the script takes it: milliseconds, or '' for none."""
    if seconds is None:
        return ""
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"a TTL must be None or a finite number of seconds > 0, got {seconds!r}")
    return str(max(1, math.ceil(seconds * 1000)))


_TOLERANCE = repr(TOLERANCE)
# A counter, its slot, its keys, its limit, window, weight and always, its tail (_layout).
_Layout = tuple[Counter, int, tuple[str, str], tuple[str, str, str, str], tuple[str, ...]]


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


_AGAIN: Any = object()


def _changed(key: str, known: StoredValue | None, fields: Any) -> Any:
    """What the get-changed script's reply says: the record, ``known`` (unchanged), or
    ``_AGAIN`` (the same version with another expiry: written again after it expired, rare)."""
    if not fields:
        return None
    if fields[0] != b"":
        return _parse_value(key, fields)
    found = _parse_value(key, [b"{}", *fields[1:]])
    if known is not None and found is not None and known.key == key \
            and found.expires_at == known.expires_at:
        return known
    return _AGAIN


def _parse_value(key: str, fields: list[Any]) -> StoredValue | None:
    text, version, expires = fields
    if text is None:
        return None
    try:
        return StoredValue(key, decode_value(text), int(version),
                           float(expires) if expires else None)
    except (TypeError, ValueError) as exc:
        raise StoreUnavailable(f"Redis record {key!r} is malformed") from exc
