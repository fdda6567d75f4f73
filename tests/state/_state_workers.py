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
