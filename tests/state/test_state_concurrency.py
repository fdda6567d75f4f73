"""Exactness under concurrency: N contenders against a limit of K get exactly K allowed."""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from _state_support import RedisServer, unique_prefix
from _state_workers import consume_many, hold_many

from callwarden.state import Counter, StateStore, open_store

T = 1_000_000.0


async def test_concurrent_aconsume_allows_exactly_the_limit(store: StateStore) -> None:
    counter = [Counter("burst", 25, 60.0)]
    results = await asyncio.gather(
        *(store.aconsume(counter, now=T, commit=True) for _ in range(1000))
    )
    assert sum(not r[0].exceeded for r in results) == 25


async def test_concurrent_aconsume_counts_exactly_the_limit(store: StateStore) -> None:
    counter = [Counter("burst", 25, 60.0)]
    await asyncio.gather(*(store.aconsume(counter, now=T, commit=True) for _ in range(1000)))
    [state] = await store.aconsume(counter, now=T, commit=False)
    assert state.used == 25.0


def test_concurrent_threads_allow_exactly_the_limit(store: StateStore) -> None:
    counter = [Counter("burst", 25, 60.0)]

    def worker(_: int) -> int:
        return sum(not store.consume(counter, now=T, commit=True)[0].exceeded for _ in range(25))

    with ThreadPoolExecutor(16) as pool:
        assert sum(pool.map(worker, range(16))) == 25


def test_concurrent_threads_respect_a_weighted_budget(store: StateStore) -> None:
    """40 threads spending 2.5 each against a budget of 50: exactly 20 spend."""
    counter = [Counter("spend", 50, None, weight=2.5)]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: store.consume(counter, now=T, commit=True), range(40)))
    assert sum(not r[0].exceeded for r in results) == 20


def slot(member: str, limit: float = 3) -> Counter:
    return Counter("in-flight", limit, 600.0, members=(member,))


async def test_concurrent_acquirers_of_three_slots_get_exactly_three(store: StateStore) -> None:
    results = await asyncio.gather(
        *(store.aconsume([slot(f"call-{i}")], now=T, commit=True) for i in range(300)))
    assert sum(not r[0].exceeded for r in results) == 3
    [state] = await store.aconsume([slot("query")], now=T, commit=False)
    assert state.used == 3.0


def test_concurrent_threads_get_exactly_three_slots(store: StateStore) -> None:
    def worker(n: int) -> int:
        return sum(not store.consume([slot(f"t{n}-{i}")], now=T, commit=True)[0].exceeded
                   for i in range(20))

    with ThreadPoolExecutor(16) as pool:
        assert sum(pool.map(worker, range(16))) == 3


def test_holders_and_releasers_at_once_never_hold_more_than_the_limit(
        store: StateStore) -> None:
    """Each thread takes a slot, holds it a moment and releases it, over and over: the calls
    in flight (counted here, down before each release) never pass 3, and every slot is let go
    in the end."""
    lock, running, most = threading.Lock(), [0], [0]

    def worker(n: int) -> int:
        got = 0
        for i in range(30):
            mine = slot(f"t{n}-{i}")
            if store.consume([mine], now=T, commit=True)[0].exceeded:
                continue
            got += 1
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            with lock:
                running[0] -= 1
            store.release([mine])
        return got

    with ThreadPoolExecutor(8) as pool:
        got = sum(pool.map(worker, range(8)))
    [state] = store.consume([slot("query")], now=T, commit=False)
    assert got >= 3 and most[0] <= 3 and state.used == 0.0


async def test_concurrent_fan_outs_count_each_value_once(store: StateStore) -> None:
    """100 calls at once over 20 values (5 calls per value) against a fan-out of 10: every
    call whose value is held passes, and exactly 10 values are held."""
    fanout = [Counter("fanout", 10, 600.0, members=(f"v{i % 20}",)) for i in range(100)]
    results = await asyncio.gather(*(store.aconsume([c], now=T, commit=True) for c in fanout))
    passed = {c.members for c, r in zip(fanout, results, strict=True) if not r[0].exceeded}
    [state] = await store.aconsume([Counter("fanout", 10, 600.0, members=("?",))], now=T,
                                   commit=False)
    assert len(passed) == 10 and state.used == 10.0


def run_processes(url: str, key: str, target: object = consume_many) -> int:
    """Runs 4 spawned processes x 250 calls against a limit of 100; returns how many passed."""
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(4), context.Queue()
    workers = [
        context.Process(target=target, args=(url, key, 100, 250, barrier, results))
        for _ in range(4)
    ]
    for worker in workers:
        worker.start()
    try:
        allowed = sum(results.get(timeout=120) for _ in workers)
    finally:
        for worker in workers:
            worker.join(30)
    assert all(worker.exitcode == 0 for worker in workers)
    return allowed


def shared_url(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'shared.db'}"
    server: RedisServer = request.getfixturevalue(
        "redis_server" if kind == "redis" else "redis_cluster")
    return f"{server.url}?prefix={unique_prefix()}"


@pytest.mark.parametrize("kind", ["sqlite", "redis", "redis-cluster"])
def test_processes_allow_exactly_the_limit(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    assert run_processes(shared_url(kind, tmp_path, request), "k") == 100


@pytest.mark.parametrize("kind", ["sqlite", "redis", "redis-cluster"])
def test_processes_leave_exactly_the_limit_counted(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = shared_url(kind, tmp_path, request)
    run_processes(url, "k")
    with open_store(url, timeout=30.0) as store:  # a first cluster discovery, loaded
        [state] = store.consume([Counter("k", 100, 3600.0)], now=time.time(), commit=False)
    assert state.used == 100.0


@pytest.mark.parametrize("kind", ["sqlite", "redis", "redis-cluster"])
def test_processes_hold_exactly_the_slots_there_are(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    assert run_processes(shared_url(kind, tmp_path, request), "slots", hold_many) == 100
