"""State stores: where limits count, session history accumulates and approvals are kept.

Pick one by URL with :func:`open_store`::

    store = open_store("sqlite:///callwarden.db")
    [budget] = store.consume([Counter("budget:s1", limit=25, window=None)], now=time.time(),
                             commit=True)
    if budget.exceeded: ...

==========================================  ==========================================
``memory`` / ``memory://``                  this process only (the default; a test double)
``sqlite:///relative.db``                   processes of one host, survives restarts
``sqlite:////absolute/path.db``
``redis://host:port/db?prefix=cw:``         every host reaching the server (``redis`` extra)
``redis+cluster://host:port,host:port/``    every host reaching a Redis Cluster, discovered
                                            from the nodes named (``rediss+cluster``: TLS)
==========================================  ==========================================

Query parameters configure the store: ``prefix`` (Redis key prefix, default ``callwarden:``;
SQLite table prefix, default ``callwarden_``), ``timeout`` (seconds to wait for a lock or a
reply), ``idle_ttl`` (seconds after its last use that a counter without a window is
forgotten, default 7 days) and ``history_ttl`` (the same for a session's history), both
``none`` to keep forever.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from callwarden.exceptions import MissingDependency
from callwarden.state._base import (
    Counter,
    CounterState,
    HistoryEntry,
    LimitStore,
    RecordStore,
    StateStore,
    StoredValue,
    StoreUnavailable,
)
from callwarden.state._history import SessionHistory
from callwarden.state._memory import MemoryStore
from callwarden.state._redis_url import CLUSTER_SCHEMES, parse_cluster_url
from callwarden.state._sqlite import SQLiteStore

if TYPE_CHECKING:
    from callwarden.state._redis import RedisStore

__all__ = [
    "Counter",
    "CounterState",
    "HistoryEntry",
    "LimitStore",
    "MemoryStore",
    "RecordStore",
    "RedisStore",
    "SQLiteStore",
    "SessionHistory",
    "StateStore",
    "StoreUnavailable",
    "StoredValue",
    "check_store_url",
    "open_store",
]

# Query parameters that configure the store rather than the connection.
_FLOAT_OPTIONS = ("timeout", "history_ttl", "idle_ttl", "sweep_every")
_TTL_OPTIONS = ("history_ttl", "idle_ttl")
_STORE_OPTIONS = ("prefix", *_FLOAT_OPTIONS, "max_connections")
_REDIS_SCHEMES = ("redis", "rediss", "unix", *CLUSTER_SCHEMES)
_UNKNOWN = ("Unknown state store {url!r}: use memory, sqlite:///path.db, redis://host:port/db "
            "or redis+cluster://host:port,host:port/")


def check_store_url(url: str) -> str:
    """Checks a store URL without opening anything; returns its kind.

    Returns:
        ``memory``, ``sqlite`` or ``redis``.

    Raises:
        ValueError: the URL names no known store, or has an unknown or invalid option.
    """
    scheme = _scheme(url)
    if scheme == "memory":
        _options(url, {}, strict=True)
        return "memory"
    if scheme == "sqlite":
        _sqlite_path(url)
        _options(url, {}, strict=True)
        return "sqlite"
    if scheme in _REDIS_SCHEMES:
        rest, _ = _options(url, {}, strict=False)
        if scheme in CLUSTER_SCHEMES:
            parse_cluster_url(rest)
        return "redis"
    raise ValueError(_UNKNOWN.format(url=url))


def _scheme(url: str) -> str:
    return url.partition(":")[0].lower() if "://" in url else url.lower()


def _sqlite_path(url: str) -> str:
    parts = urlsplit(url)
    if parts.netloc:
        raise ValueError(
            f"SQLite URL {url!r} has a host; write sqlite:///relative.db or "
            "sqlite:////absolute/path.db"
        )
    path = unquote(parts.path[1:])
    if not path:
        raise ValueError(f"SQLite URL {url!r} names no file; write sqlite:///callwarden.db")
    return os.path.expanduser(path)  # sqlite:///~/.local/state/callwarden/state.db


def open_store(url: str, **options: Any) -> StateStore:
    """Opens the state store a URL names.

    Options (``prefix``, ``timeout``, ``idle_ttl``, ``history_ttl`` ...) go to the store's constructor; they
    may also be given as query parameters (``redis://localhost:6379/0?prefix=cw:``). Keyword
    arguments win over the URL.

    Raises:
        ValueError: The URL names no known store.
        ImportError: The store needs a package that is not installed.
    """
    scheme = _scheme(url)
    if scheme == "memory":
        return MemoryStore(**_options(url, options, strict=True)[1])
    if scheme == "sqlite":
        path = _sqlite_path(url)
        _, opts = _options(url, options, strict=True)
        return SQLiteStore(path, **opts)
    if scheme in _REDIS_SCHEMES:
        try:
            from callwarden.state._redis import RedisStore
        except ImportError as exc:
            raise MissingDependency("the Redis state store", "redis", "redis") from exc
        rest, opts = _options(url, options, strict=False)
        return RedisStore(rest, **opts)
    raise ValueError(_UNKNOWN.format(url=url))


def _options(url: str, options: dict[str, Any], *, strict: bool) -> tuple[str, dict[str, Any]]:
    """Splits the store's options out of a URL's query; returns the URL without them."""
    parts = urlsplit(url)
    found: dict[str, Any] = {}
    kept = []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name in _STORE_OPTIONS:
            found[name] = _convert(name, value)
        elif strict:
            raise ValueError(f"Unknown option {name!r} in state store URL {url!r}")
        else:
            kept.append((name, value))
    found.update(options)
    return urlunsplit(parts._replace(query=urlencode(kept))), found


def _convert(name: str, value: str) -> Any:
    if name in _TTL_OPTIONS and value.lower() == "none":
        return None
    try:
        if name in _FLOAT_OPTIONS:
            seconds = float(value)
            if not math.isfinite(seconds) or seconds <= 0:
                raise ValueError
            return seconds
        if name == "max_connections":
            return int(value)
    except ValueError:
        raise ValueError(
            f"State store option {name}={value!r} must be a number of seconds > 0"
            + (" or none" if name in _TTL_OPTIONS else "")
        ) from None
    return value


def __getattr__(name: str) -> Any:
    # RedisStore imports the optional redis package: only on first use.
    if name == "RedisStore":
        from callwarden.state._redis import RedisStore

        return RedisStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
