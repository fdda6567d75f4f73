"""Worker processes for the multi-process tests (importable by spawned children)."""

from __future__ import annotations

import time
from typing import Any

from callwarden.state import Counter, open_store


def consume_many(url: str, key: str, limit: int, calls: int, barrier: Any, results: Any) -> None:
    """Opens its own store, waits for the others, then consumes ``calls`` times.

    The generous timeout keeps a starved machine (CI on two cores) from turning lock waits into
    StoreUnavailable: this test is about exactness, the failure tests cover deadlines.
    """
    store = open_store(url, timeout=30.0)
    try:
        barrier.wait()
        allowed = 0
        for _ in range(calls):
            [state] = store.consume([Counter(key, limit, 3600.0)], now=time.time(), commit=True)
            allowed += not state.exceeded
        results.put(allowed)
    finally:
        store.close()


def hold_many(url: str, key: str, limit: int, calls: int, barrier: Any, results: Any) -> None:
    """Opens its own store, waits for the others, then tries to hold a slot ``calls`` times
    (a member of its own each time, never released); reports how many it got."""
    import os

    store = open_store(url, timeout=30.0)
    try:
        barrier.wait()
        got = 0
        for i in range(calls):
            slot = Counter(key, limit, 3600.0, members=(f"{os.getpid()}-{i}",))
            [state] = store.consume([slot], now=time.time(), commit=True)
            got += not state.exceeded
        results.put(got)
    finally:
        store.close()


def guard_check_many(url: str, policy: dict[str, Any], calls: int, barrier: Any,
                     results: Any) -> None:
    """Builds a Guard on the shared store and makes ``calls`` decisions; reports allowed ones."""
    from callwarden import Guard

    store = open_store(url, timeout=30.0)
    try:
        guard = Guard.from_dict(policy, state=store)
        barrier.wait()
        allowed = sum(guard.check("fetch", {"url": "https://x"}, session="s").allowed
                      for _ in range(calls))
        results.put(allowed)
    finally:
        store.close()


def cas_increment_many(url: str, key: str, times: int, barrier: Any, results: Any) -> None:
    """Increments a key-value counter ``times`` times with compare-and-set retry loops."""
    store = open_store(url, timeout=30.0)
    try:
        barrier.wait()
        for _ in range(times):
            while True:
                found = store.get(key)
                version = None if found is None else found.version
                value = 0 if found is None else found.value["n"]
                if store.compare_and_set(key, version, {"n": value + 1}, ttl=None):
                    break
        results.put(times)
    finally:
        store.close()


def guard_policy_many(policy: dict[str, Any], sessions: list[str], calls: int, barrier: Any,
                      results: Any) -> None:
    """Builds a Guard from a policy that names its own ``state:`` store, and makes ``calls``
    decisions, one session after the other; reports the allowed ones per session."""
    from callwarden import Guard

    guard = Guard.from_dict(policy)
    try:
        barrier.wait()
        allowed = dict.fromkeys(sessions, 0)
        for i in range(calls):
            session = sessions[i % len(sessions)]
            allowed[session] += guard.check("fetch", {"url": "https://x"}, session=session).allowed
        results.put(allowed)
    finally:
        guard.close()
