"""A real Redis Cluster for the tests: three masters on loopback, made by ``redis-cli --cluster
create``, each node a redis-server of its own that a test may stop, freeze or restart."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.cluster
from _state_support import RedisServer, free_port, redis_server_binary

from callwarden.state import StateStore
from callwarden.state._redis import RedisStore

READY_WITHIN = 60.0  # seconds for a cluster to form (or heal) on a loaded machine


def redis_cli_binary() -> str:
    redis_server_binary()  # the same package brings both: say how to install it
    found = shutil.which("redis-cli")
    if found is None:
        pytest.fail("redis-cli is not installed (it comes with redis-server: "
                    "sudo apt-get install redis-server)")
    return found


class ClusterNode(RedisServer):
    """One master: cluster mode, its bus on a port of its own, nothing persisted. A node
    restarted keeps its identity (``nodes.conf``) and rejoins."""

    def __init__(self, directory: Path, node_timeout_ms: int) -> None:
        super().__init__(directory)
        self.bus_port = free_port()
        self.node_timeout_ms = node_timeout_ms

    def options(self) -> list[str]:
        return [
            "--cluster-enabled", "yes",
            "--cluster-config-file", "nodes.conf",
            "--cluster-port", str(self.bus_port),
            "--cluster-node-timeout", str(self.node_timeout_ms),
            "--save", "",
            "--appendonly", "no",
        ]  # fmt: skip

    def info(self) -> dict[str, str]:
        """``CLUSTER INFO`` as a mapping."""
        with self.client() as client:
            info = client.execute_command("CLUSTER INFO")
        return {str(k): str(v) for k, v in info.items()}


class RedisCluster:
    """``masters`` redis-servers in cluster mode, their slots spread evenly, no replicas."""

    def __init__(self, directory: Path, masters: int = 3, node_timeout_ms: int = 1000) -> None:
        self.nodes = []
        for i in range(masters):
            home = directory / f"node{i}"
            home.mkdir(parents=True, exist_ok=True)
            self.nodes.append(ClusterNode(home, node_timeout_ms))

    @property
    def url(self) -> str:
        """The store URL: every node, for the store to discover the cluster from."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes) + "/"

    def start(self) -> None:
        """Starts the nodes, joins them into one cluster and waits until it is ok (stops
        them all when it does not get there)."""
        try:
            for node in self.nodes:
                node.start()
            created = subprocess.run(
                [redis_cli_binary(), "--cluster", "create",
                 *(f"127.0.0.1:{n.port}" for n in self.nodes),
                 "--cluster-replicas", "0", "--cluster-yes"],
                capture_output=True, text=True, timeout=READY_WITHIN, check=False)
            if created.returncode != 0:
                raise RuntimeError(f"redis-cli --cluster create failed:\n{created.stdout}"
                                   f"{created.stderr}")
            self.wait_until("ok")
        except BaseException:
            self.stop()
            raise

    def wait_until(self, state: str, nodes: list[ClusterNode] | None = None) -> None:
        """Waits until every running node (or those given) says ``cluster_state:<state>``, with
        every slot assigned and every node known."""
        deadline = time.monotonic() + READY_WITHIN
        watched = nodes or [n for n in self.nodes if n.process is not None]
        while True:
            try:
                infos = [node.info() for node in watched]
                if all(i["cluster_state"] == state and i["cluster_slots_assigned"] == "16384"
                       and i["cluster_known_nodes"] == str(len(self.nodes)) for i in infos):
                    return
            except redis.RedisError:
                infos = []
            if time.monotonic() > deadline:
                raise RuntimeError(f"the cluster is not {state}: {infos}")
            time.sleep(0.05)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def restart(self, node: ClusterNode) -> None:
        """Starts a stopped node again and waits for the whole cluster to be ok."""
        node.start()
        self.wait_until("ok")

    def keyslot(self, key: str) -> int:
        """The slot of ``key``, as the cluster computes it (``CLUSTER KEYSLOT``)."""
        with self.nodes[0].client() as client:
            return int(client.execute_command("CLUSTER KEYSLOT", key))

    def node_serving(self, slot: int) -> ClusterNode:
        """The node that serves ``slot`` now."""
        with self.nodes[0].client() as client:
            for start, end, primary, *_ in client.execute_command("CLUSTER SLOTS"):
                if start <= slot <= end:
                    return next(n for n in self.nodes if n.port == int(primary[1]))
        raise LookupError(slot)

    def client(self) -> redis.cluster.RedisCluster:
        """A plain cluster client, for looking at what the store wrote."""
        node = self.nodes[0]
        return redis.cluster.RedisCluster(host="127.0.0.1", port=node.port, socket_timeout=5)


def raw_client(store: StateStore, cluster: RedisCluster | None = None) -> Any:
    """A client that reads a Redis store's keys: its own for a server, one of the cluster's."""
    assert isinstance(store, RedisStore)
    if store._link is None:
        return store._client
    assert cluster is not None
    return cluster.client()
