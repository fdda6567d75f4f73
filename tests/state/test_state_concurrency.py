"""Exactness under concurrency: N contenders against a limit of K get exactly K allowed."""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from _state_support import RedisServer, unique_prefix
from _state_workers import consume_many

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


def run_processes(url: str, key: str) -> int:
    """Runs 4 spawned processes x 250 calls against a limit of 100; returns how many passed."""
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(4), context.Queue()
    workers = [
        context.Process(target=consume_many, args=(url, key, 100, 250, barrier, results))
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
    with open_store(url) as store:
        [state] = store.consume([Counter("k", 100, 3600.0)], now=time.time(), commit=False)
    assert state.used == 100.0
