"""Redis URLs read without the redis package: a cluster's, and one fit to show in an error."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["CLUSTER_SCHEMES", "ClusterAddress", "is_cluster_url", "parse_cluster_url", "redact"]

CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}
"""The schemes of a Redis Cluster URL, and how each node is reached."""


@dataclass(frozen=True, slots=True)
class ClusterAddress:
    """What a cluster URL says: the nodes to start from, TLS or not, credentials, options."""

    nodes: tuple[tuple[str, int], ...]
    scheme: str  # redis or rediss: how each node is reached
    userinfo: str  # "user:password@" as written, or ""
    query: str  # connection options, as redis-py reads them from a node URL

    def node_url(self, host: str, port: int) -> str:
        """The URL of one node, with the cluster URL's credentials and options."""
        name = f"[{host}]" if ":" in host else host
        return f"{self.scheme}://{self.userinfo}{name}:{port}/0" + (
            f"?{self.query}" if self.query else "")


def is_cluster_url(url: str) -> bool:
    """Whether ``url`` names a Redis Cluster (``redis+cluster://`` or ``rediss+cluster://``)."""
    return url.partition("://")[0].lower() in CLUSTER_SCHEMES


def parse_cluster_url(url: str) -> ClusterAddress:
    """Reads ``redis+cluster://[user:password@]host:port[,host:port...][/][?options]``.

    Raises:
        ValueError: no node, a port that is not a number, or a database other than 0.
    """
    parts = urlsplit(url)
    scheme = CLUSTER_SCHEMES[parts.scheme.lower()]
    userinfo, at, hosts = parts.netloc.rpartition("@")
    nodes = []
    for item in filter(None, (h.strip() for h in hosts.split(","))):
        if item.startswith("["):  # [IPv6]:port
            host, _, rest = item[1:].partition("]")
            port_text = rest.removeprefix(":")
        else:
            host, _, port_text = item.partition(":")
        try:
            port = int(port_text) if port_text else 6379
        except ValueError:
            raise ValueError(f"Redis Cluster URL {redact(url)!r}: {item!r} is not host:port") \
                from None
        if not host or not 0 < port < 65536:
            raise ValueError(f"Redis Cluster URL {redact(url)!r}: {item!r} is not host:port")
        nodes.append((host, port))
    if not nodes:
        raise ValueError(f"Redis Cluster URL {redact(url)!r} names no node; write "
                         "redis+cluster://host:port,host:port/")
    if parts.path not in ("", "/", "/0"):
        raise ValueError(f"Redis Cluster URL {redact(url)!r}: a cluster has database 0 only")
    return ClusterAddress(tuple(nodes), scheme, userinfo + at, parts.query)


def redact(url: str) -> str:
    """Hides a password in a URL shown in an error."""
    scheme, sep, rest = url.partition("://")
    if "@" in rest:
        rest = "***@" + rest.rsplit("@", 1)[1]
    return scheme + sep + rest
