"""A Redis Cluster as the Redis store reaches it: slot by slot, every wait ending at a deadline.

The URL names one or more nodes to discover the cluster from::

    redis+cluster://10.0.0.1:6379,10.0.0.2:6379/?prefix=cw:
    rediss+cluster://user:secret@node-a:6380,node-b:6380/   (TLS)

redis-py's cluster clients know the topology (which node serves which of the 16384 slots,
from ``CLUSTER SLOTS``) and keep a pool of connections per node. Synchronous commands are
routed here rather than by ``redis.cluster.RedisCluster.execute_command``, which retries,
refreshes the topology and sleeps (0.25 s on CLUSTERDOWN) on its own, past any deadline: a
command goes to its slot's node on a connection of that node's pool (so the pool wait, the
connect and every read and write end at the deadline, see :mod:`._redis_deadline`), follows
at most :data:`MAX_HOPS` MOVED / ASK / TRYAGAIN redirections, and fails on anything else
(node down or frozen, CLUSTERDOWN, a slot nobody serves). After such a failure the topology
is read again before a later command, at most every :data:`REFRESH_EVERY` seconds, within
that command's deadline. Asynchronous commands go through ``redis.asyncio.cluster.RedisCluster``
as they are: its caller bounds the wait (``asyncio.wait_for``), which cancels whatever it does.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable
from time import perf_counter as _perf
from typing import Any, TypeVar

import redis
import redis.asyncio.cluster
import redis.asyncio.retry
import redis.cluster
import redis.retry
from redis.backoff import NoBackoff
from redis.crc import key_slot
from redis.exceptions import (
    AskError,
    ClusterDownError,
    ClusterError,
    MovedError,
    RedisClusterException,
    RedisError,
    SlotNotCoveredError,
    TryAgainError,
)

from callwarden.state._redis_deadline import bounded_node_options, until
from callwarden.state._redis_scripts import command_within, commands_within, remaining
from callwarden.state._redis_url import parse_cluster_url

__all__ = ["FAILURES", "MAX_HOPS", "REFRESH_EVERY", "ClusterLink", "slot_of"]

MAX_HOPS = 5
"""Redirections one command follows before the store gives up on it (a MOVED / ASK loop)."""

REFRESH_EVERY = 0.5
"""Seconds at least between two readings of the topology after failures."""

FAILURES = (RedisError, RedisClusterException)
"""What a cluster command may raise when the cluster fails it (the store says unavailable)."""

_TRY_AGAIN_PAUSE = 0.01  # a slot being migrated: its keys are moving right now
_T = TypeVar("_T")


def slot_of(key: str) -> int:
    """The cluster slot of ``key`` (of its hash tag, when it has one)."""
    return int(key_slot(key.encode("utf-8", "surrogatepass")))


class ClusterLink:
    """Connections to one Redis Cluster: routed synchronous commands, an asyncio client.

    Args:
        url: ``redis+cluster://...`` or ``rediss+cluster://...``.
        timeout: Seconds to wait for a connection or a reply (the pool wait, per node).
        max_connections: Connections per node (sync), and in flight per event loop (async).
    """

    def __init__(self, url: str, *, timeout: float, max_connections: int) -> None:
        self.address = parse_cluster_url(url)
        self._timeout = timeout
        self._max_connections = max_connections
        self._lock = threading.Lock()
        self._cluster: redis.cluster.RedisCluster | None = None
        self._stale = False  # a failure suggests the topology may have changed
        self._next_refresh = 0.0
        self._failed: str | None = None  # the node that failed last: asked last on a refresh
        self._asked: dict[str, redis.cluster.ClusterNode] = {}  # ASK targets outside the map
        # Per event loop (asyncio connections belong to the loop that opened them): the loop,
        # its client, and the operations it may have in flight.
        self._async: tuple[asyncio.AbstractEventLoop, redis.asyncio.cluster.RedisCluster,
                           asyncio.Semaphore] | None = None

    # -- synchronous: routed here --------------------------------------------------------

    def run(self, slot: int, deadline: float, send: Callable[[redis.Redis, bool], _T]) -> _T:
        """Calls ``send(node_client, asking)`` for the node serving ``slot``, following
        redirections, until it answers; gives up at ``deadline``.

        Raises:
            RedisError, RedisClusterException: the cluster failed the command (see
                :data:`FAILURES`), or the deadline passed.
        """
        cluster = self._topology(deadline)
        manager = cluster.nodes_manager
        node: redis.cluster.ClusterNode | None = None
        asking = False
        for _ in range(MAX_HOPS):
            try:
                if node is None:
                    node = manager.get_node_from_slot(slot)
                return send(cluster.get_redis_connection(node), asking)
            except MovedError as exc:  # the slot has a new owner: note it, ask that one
                manager.move_slot(exc)
                node, asking = None, False
            except AskError as exc:  # the key is being migrated: ask the target this once
                node, asking = self._ask_node(cluster, exc.host, exc.port), True
            except TryAgainError:  # a multi-key command while its keys are moving
                node, asking = None, False
                time.sleep(min(_TRY_AGAIN_PAUSE, remaining(deadline)))
            except (redis.ConnectionError, redis.TimeoutError, ClusterDownError,
                    SlotNotCoveredError):
                self._stale, self._failed = True, None if node is None else node.name
                raise
        raise ClusterError(f"slot {slot}: more than {MAX_HOPS} redirections (MOVED/ASK loop)")

    def command(self, slot: int, deadline: float, *command: Any) -> Any:
        """Sends one command for ``slot`` and returns its raw reply (see :meth:`run`)."""
        return self.run(slot, deadline, lambda client, asking: command_within(
            client, command, deadline, asking))

    def keys_matching(self, pattern: str, timeout: float) -> list[bytes]:
        """The keys matching ``pattern`` on every primary (``SCAN`` on each, each round trip
        waiting no longer than ``timeout``)."""
        cluster = self._topology(_perf() + timeout)
        found: set[bytes] = set()
        for node in cluster.get_primaries():  # type: ignore[no-untyped-call]
            client = cluster.get_redis_connection(node)
            cursor: Any = 0
            while True:
                try:
                    cursor, names = command_within(
                        client, ("SCAN", cursor, "MATCH", pattern, "COUNT", 500),
                        _perf() + timeout)
                except (redis.ConnectionError, redis.TimeoutError):
                    self._stale, self._failed = True, node.name
                    raise
                found.update(names)
                if int(cursor) == 0:
                    break
        return sorted(found)

    def read_many(self, keys: list[bytes], command: Callable[[bytes], tuple[Any, ...]],
                  timeout: float) -> list[Any]:
        """``command(key)`` for each key, one write per node; a key whose slot moved meanwhile
        is asked again on its own. Returns the raw replies in the order of ``keys``."""
        cluster = self._topology(_perf() + timeout)
        by_node: dict[str, list[int]] = {}
        nodes: dict[str, redis.cluster.ClusterNode] = {}
        for i, key in enumerate(keys):
            node = cluster.nodes_manager.get_node_from_slot(int(key_slot(key)))
            nodes[node.name] = node
            by_node.setdefault(node.name, []).append(i)
        replies: list[Any] = [None] * len(keys)
        for name, indexes in by_node.items():
            client = cluster.get_redis_connection(nodes[name])
            try:
                batch = commands_within(client, [command(keys[i]) for i in indexes],
                                        _perf() + timeout)
            except (redis.ConnectionError, redis.TimeoutError):
                self._stale, self._failed = True, name
                raise
            for i, reply in zip(indexes, batch, strict=True):
                if isinstance(reply, AskError | TryAgainError):  # MOVED is an AskError too
                    reply = self.command(int(key_slot(keys[i])), _perf() + timeout,
                                         *command(keys[i]))
                elif isinstance(reply, Exception):
                    raise reply
                replies[i] = reply
        return replies

    def _topology(self, deadline: float) -> redis.cluster.RedisCluster:
        """The cluster client: discovered on first use, read again after a failure (at most
        every :data:`REFRESH_EVERY` seconds), each within ``deadline``."""
        cluster = self._cluster
        if cluster is None:
            if not self._lock.acquire(timeout=remaining(deadline)):
                raise redis.TimeoutError("the deadline passed while the cluster was discovered")
            try:
                if self._cluster is None:
                    with until(deadline):
                        self._cluster = self._connect()
                return self._cluster
            finally:
                self._lock.release()
        if self._stale and _perf() >= self._next_refresh and self._lock.acquire(blocking=False):
            try:
                self._next_refresh = _perf() + REFRESH_EVERY
                with until(deadline):
                    cluster.nodes_manager.initialize(last_failed_node_name=self._failed)
                self._stale = False
            except FAILURES:
                pass  # the map at hand is the best there is; a later failure asks again
            finally:
                self._lock.release()
        return cluster

    def _connect(self) -> redis.cluster.RedisCluster:
        (host, port), *others = self.address.nodes
        options = bounded_node_options(tls=self.address.scheme == "rediss")
        return redis.cluster.RedisCluster(
            # A redis:// URL even for TLS: the pool's connection class (TLS, bounded) is ours.
            url=self.address.node_url(host, port).replace("rediss://", "redis://", 1),
            startup_nodes=[redis.cluster.ClusterNode(h, p)  # type: ignore[no-untyped-call]
                           for h, p in others],
            max_connections=self._max_connections,
            timeout=self._timeout,  # the wait for a free connection of a node
            socket_timeout=self._timeout,
            socket_connect_timeout=self._timeout / 2,
            # Nothing retried behind the store's back: it fails closed, the next call retries.
            retry=redis.retry.Retry(NoBackoff(), 0),
            require_full_coverage=False,  # slots served are usable while others are not
            **options,
        )

    def _ask_node(self, cluster: redis.cluster.RedisCluster, host: str,
                  port: int) -> redis.cluster.ClusterNode:
        node = cluster.get_node(host=host, port=port)  # type: ignore[no-untyped-call]
        if node is not None:
            return node  # type: ignore[no-any-return]
        with self._lock:  # a node the map does not know yet (joining, importing a slot)
            name = f"{host}:{port}"
            if name not in self._asked:
                self._asked[name] = redis.cluster.ClusterNode(  # type: ignore[no-untyped-call]
                    host, port, redis.cluster.PRIMARY)
            return self._asked[name]

    # -- asynchronous: redis-py's cluster client -------------------------------------------

    @contextlib.asynccontextmanager
    async def client(self) -> AsyncIterator[Any]:
        """The asyncio cluster client of the running event loop, for one operation.

        Operations in flight are capped at ``max_connections`` per loop: a node's connections
        are not a blocking pool in redis-py's asyncio client, so a burst waits here (no
        longer than ``timeout``) instead of failing.
        """
        loop = asyncio.get_running_loop()
        if self._async is None or self._async[0] is not loop:
            self._async = (loop, self._async_client(), asyncio.Semaphore(self._max_connections))
        _, client, in_flight = self._async
        try:
            async with asyncio.timeout(self._timeout):
                await in_flight.acquire()
        except TimeoutError:
            raise redis.TimeoutError("no connection to the cluster was free in time") from None
        try:
            # Discovered before the first command (and again after a failure): a command sent
            # before would go to any node, and be redirected.
            await client.initialize()
            yield client
        finally:
            in_flight.release()

    def _async_client(self) -> redis.asyncio.cluster.RedisCluster:
        (host, port), *others = self.address.nodes
        return redis.asyncio.cluster.RedisCluster.from_url(
            self.address.node_url(host, port),
            startup_nodes=[redis.asyncio.cluster.ClusterNode(h, p) for h, p in others],
            max_connections=self._max_connections,
            socket_timeout=self._timeout,
            socket_connect_timeout=self._timeout / 2,
            retry=redis.asyncio.retry.Retry(NoBackoff(), 0),
            require_full_coverage=False,
            # A MOVED patches the map; never a full refresh that closes every connection,
            # those of commands in flight included (a refresh follows a failure instead).
            reinitialize_steps=0,
        )

    # -- closing ----------------------------------------------------------------------------

    def close(self) -> None:
        """Closes the synchronous connections."""
        with self._lock:
            cluster, self._cluster = self._cluster, None
            asked, self._asked = list(self._asked.values()), {}
        if cluster is not None:
            cluster.close()
        for node in asked:
            if node.redis_connection is not None:
                node.redis_connection.close()

    async def aclose(self) -> None:
        """Closes the running loop's asyncio client, then the synchronous connections."""
        if self._async is not None and self._async[0] is asyncio.get_running_loop():
            await self._async[1].aclose()
        self._async = None
        self.close()

