"""The key-value area every store shares (memory, SQLite, a real Redis), sync and async."""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from _state_support import RedisServer, unique_prefix
from _state_workers import cas_increment_many

from callwarden.state import StateStore, StoredValue, open_store


class Kv:
    """Calls a store's key-value methods the sync or the async way."""

    def __init__(self, store: StateStore, mode: str) -> None:
        self.store = store
        self.mode = mode

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if self.mode == "sync":
            return getattr(self.store, name)(*args, **kwargs)
        return await getattr(self.store, "a" + name)(*args, **kwargs)

    async def get(self, key: str) -> StoredValue | None:
        return await self._call("get", key)  # type: ignore[no-any-return]

    async def put(self, key: str, value: dict[str, Any], ttl: float | None = None) -> int:
        return await self._call("put", key, value, ttl=ttl)  # type: ignore[no-any-return]

    async def cas(self, key: str, expected: int | None, value: dict[str, Any],
                  ttl: float | None = None) -> bool:
        return await self._call("compare_and_set", key, expected, value, ttl=ttl)  # type: ignore[no-any-return]

    async def delete(self, key: str) -> bool:
        return await self._call("delete", key)  # type: ignore[no-any-return]

    async def get_changed(self, key: str, known: StoredValue | None) -> StoredValue | None:
        return await self._call("get_changed", key, known)  # type: ignore[no-any-return]

    async def scan(self, prefix: str) -> list[StoredValue]:
        return await self._call("scan", prefix)  # type: ignore[no-any-return]


@pytest.fixture(params=["sync", "async"])
def kv(request: pytest.FixtureRequest, store: StateStore) -> Kv:
    return Kv(store, request.param)


async def test_missing_key_reads_as_none(kv: Kv) -> None:
    assert await kv.get("nothing") is None


async def test_put_then_get_returns_the_value_at_version_one(kv: Kv) -> None:
    await kv.put("k", {"a": 1, "b": ["x", None, 2.5], "c": {"d": True}})
    found = await kv.get("k")
    assert found == StoredValue("k", {"a": 1, "b": ["x", None, 2.5], "c": {"d": True}}, 1, None)


async def test_each_put_increments_the_version(kv: Kv) -> None:
    versions = [await kv.put("k", {"n": i}) for i in range(3)]
    assert versions == [1, 2, 3]


async def test_values_read_are_copies(kv: Kv) -> None:
    await kv.put("k", {"list": [1]})
    first = await kv.get("k")
    assert first is not None
    first.value["list"].append(2)
    again = await kv.get("k")
    assert again is not None and again.value == {"list": [1]}


async def test_unicode_keys_and_values_round_trip(kv: Kv) -> None:
    await kv.put("clé:東京", {"texte": "héllo 🌍"})
    found = await kv.get("clé:東京")
    assert found is not None and found.value == {"texte": "héllo 🌍"}


async def test_get_changed_returns_what_it_was_given_while_the_record_is_unchanged(kv: Kv
                                                                                  ) -> None:
    await kv.put("k", {"v": 1}, ttl=3600)
    first = await kv.get_changed("k", None)
    assert first is not None and first.value == {"v": 1}
    again = await kv.get_changed("k", first)
    assert again is first  # not read again: the caller's own record


async def test_get_changed_reads_a_record_written_since(kv: Kv) -> None:
    await kv.put("k", {"v": 1}, ttl=3600)
    first = await kv.get_changed("k", None)
    assert first is not None
    await kv.cas("k", first.version, {"v": 2}, ttl=3600)
    second = await kv.get_changed("k", first)
    assert second is not first and second == await kv.get("k")
    assert second is not None and second.value == {"v": 2}
    await kv.delete("k")
    assert await kv.get_changed("k", second) is None


async def test_get_changed_tells_a_record_written_again_after_it_expired(kv: Kv) -> None:
    # Expired and written again: the version starts over, the expiry moves.
    await kv.put("k", {"v": 1}, ttl=0.05)
    first = await kv.get_changed("k", None)
    await asyncio.sleep(0.3)
    await kv.put("k", {"v": 2}, ttl=3600)
    second = await kv.get_changed("k", first)
    assert first is not None and second is not None and second.version == first.version
    assert second is not first and second.value == {"v": 2}


async def test_get_changed_of_an_expired_record_finds_none(kv: Kv) -> None:
    await kv.put("k", {"v": 1}, ttl=0.05)
    first = await kv.get_changed("k", None)
    assert first is not None
    await asyncio.sleep(0.3)
    assert await kv.get_changed("k", first) is None  # not the caller's record: it is gone
    assert await kv.get_changed("k", None) is None


async def test_get_changed_never_answers_with_another_keys_record(kv: Kv) -> None:
    await kv.put("a", {"v": "a"})
    await kv.put("b", {"v": "b"})
    a = await kv.get("a")
    found = await kv.get_changed("b", a)
    assert found is not None and found.key == "b" and found.value == {"v": "b"}


async def test_create_only_cas_succeeds_when_absent(kv: Kv) -> None:
    assert await kv.cas("k", None, {"v": 1})
    found = await kv.get("k")
    assert found is not None and (found.value, found.version) == ({"v": 1}, 1)


async def test_create_only_cas_fails_when_present(kv: Kv) -> None:
    await kv.put("k", {"v": 1})
    assert not await kv.cas("k", None, {"v": 2})
    found = await kv.get("k")
    assert found is not None and found.value == {"v": 1}


async def test_cas_with_the_current_version_writes_and_bumps_it(kv: Kv) -> None:
    await kv.put("k", {"v": 1})
    assert await kv.cas("k", 1, {"v": 2})
    found = await kv.get("k")
    assert found is not None and (found.value, found.version) == ({"v": 2}, 2)


async def test_cas_with_a_stale_version_writes_nothing(kv: Kv) -> None:
    await kv.put("k", {"v": 1})
    await kv.put("k", {"v": 2})
    assert not await kv.cas("k", 1, {"v": 3})
    found = await kv.get("k")
    assert found is not None and (found.value, found.version) == ({"v": 2}, 2)


async def test_cas_with_a_version_on_a_missing_key_fails(kv: Kv) -> None:
    assert not await kv.cas("k", 1, {"v": 1})
    assert await kv.get("k") is None


async def test_ttl_sets_expires_at(kv: Kv) -> None:
    before = time.time()
    await kv.put("k", {"v": 1}, ttl=3600)
    found = await kv.get("k")
    assert found is not None and found.expires_at is not None
    assert before + 3600 <= found.expires_at <= time.time() + 3600


async def test_record_disappears_after_its_ttl(kv: Kv) -> None:
    await kv.put("k", {"v": 1}, ttl=0.05)
    await asyncio.sleep(0.3)
    assert await kv.get("k") is None


async def test_expired_record_counts_as_absent_for_cas(kv: Kv) -> None:
    await kv.put("k", {"v": 1}, ttl=0.05)
    await asyncio.sleep(0.3)
    assert await kv.cas("k", None, {"v": 2})


async def test_put_without_ttl_clears_an_earlier_ttl(kv: Kv) -> None:
    await kv.put("k", {"v": 1}, ttl=0.05)
    await kv.put("k", {"v": 2})
    await asyncio.sleep(0.3)
    found = await kv.get("k")
    assert found is not None and (found.value, found.expires_at) == ({"v": 2}, None)


async def test_delete_removes_and_reports_it(kv: Kv) -> None:
    await kv.put("k", {"v": 1})
    assert (await kv.delete("k"), await kv.get("k")) == (True, None)


async def test_delete_of_a_missing_key_reports_false(kv: Kv) -> None:
    assert not await kv.delete("k")


async def test_scan_returns_only_the_prefix_sorted_by_key(kv: Kv) -> None:
    for key in ("req:b", "req:a", "grant:a", "re", "req:c"):
        await kv.put(key, {"k": key})
    assert [v.key for v in await kv.scan("req:")] == ["req:a", "req:b", "req:c"]


async def test_scan_treats_glob_characters_literally(kv: Kv) -> None:
    for key in ("a*[x]?:1", "a*[x]?:2", "ab:1", "a*y:1"):
        await kv.put(key, {"k": key})
    assert [v.key for v in await kv.scan("a*[x]?:")] == ["a*[x]?:1", "a*[x]?:2"]


async def test_scan_skips_expired_records(kv: Kv) -> None:
    await kv.put("p:short", {"v": 1}, ttl=0.05)
    await kv.put("p:long", {"v": 2})
    await asyncio.sleep(0.3)
    assert [v.key for v in await kv.scan("p:")] == ["p:long"]


async def test_scan_returns_values_and_versions(kv: Kv) -> None:
    await kv.put("p:1", {"v": 1})
    await kv.put("p:1", {"v": 2})
    [found] = await kv.scan("p:")
    assert (found.value, found.version) == ({"v": 2}, 2)


@pytest.mark.parametrize("value", [["not", "a", "dict"], {"n": float("nan")}, {"o": object()}])
async def test_values_that_are_not_json_objects_are_refused(kv: Kv, value: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        await kv.put("k", value)


@pytest.mark.parametrize("ttl", [0, -1, float("inf"), "10"])
async def test_bad_ttls_are_refused(kv: Kv, ttl: Any) -> None:
    with pytest.raises(ValueError, match="ttl"):
        await kv.put("k", {"v": 1}, ttl=ttl)


@pytest.mark.parametrize("version", [0, -1, 1.0, "1", True])
async def test_bad_expected_versions_are_refused(kv: Kv, version: Any) -> None:
    with pytest.raises(ValueError, match="expected_version"):
        await kv.cas("k", version, {"v": 1})


async def test_empty_key_is_refused(kv: Kv) -> None:
    with pytest.raises(ValueError, match="key"):
        await kv.get("")


# -- atomicity ---------------------------------------------------------------------------


def test_concurrent_create_only_cas_has_exactly_one_winner(store: StateStore) -> None:
    with ThreadPoolExecutor(16) as pool:
        wins = list(pool.map(lambda i: store.compare_and_set("once", None, {"by": i}, ttl=None),
                             range(64)))
    assert sum(wins) == 1


def test_concurrent_cas_increments_lose_no_update(store: StateStore) -> None:
    def increment(_: int) -> None:
        for _ in range(25):
            while True:
                found = store.get("n")
                version = None if found is None else found.version
                value = 0 if found is None else found.value["n"]
                if store.compare_and_set("n", version, {"n": value + 1}, ttl=None):
                    break

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(increment, range(8)))
    found = store.get("n")
    assert found is not None and found.value["n"] == 200


async def test_concurrent_acas_has_exactly_one_winner(store: StateStore) -> None:
    wins = await asyncio.gather(
        *(store.acompare_and_set("once", None, {"by": i}, ttl=None) for i in range(64))
    )
    assert sum(wins) == 1


def _run_cas_processes(url: str) -> int:
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(4), context.Queue()
    workers = [context.Process(target=cas_increment_many, args=(url, "n", 50, barrier, results))
               for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert all(worker.exitcode == 0 for worker in workers)
    assert sum(results.get(timeout=5) for _ in workers) == 200
    with open_store(url, timeout=30.0) as store:
        found = store.get("n")
    assert found is not None
    return int(found.value["n"])


def test_sqlite_cas_across_processes_loses_no_update(tmp_path: Path) -> None:
    assert _run_cas_processes(f"sqlite:///{tmp_path / 'state.db'}") == 200


def test_redis_cas_across_processes_loses_no_update(redis_server: RedisServer) -> None:
    assert _run_cas_processes(f"{redis_server.url}?prefix={unique_prefix()}") == 200


# -- persistence -------------------------------------------------------------------------


def test_sqlite_records_survive_reopening(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 'state.db'}") as store:
        store.put("k", {"v": 1}, ttl=3600)
    with open_store(f"sqlite:///{tmp_path / 'state.db'}") as store:
        found = store.get("k")
    assert found is not None and (found.value, found.version) == ({"v": 1}, 1)


def test_redis_records_expire_server_side(redis_server: RedisServer) -> None:
    prefix = unique_prefix()
    with open_store(redis_server.url, prefix=prefix, timeout=30.0) as store:
        store.put("k", {"v": 1}, ttl=60)
        ttl = redis_server.client().pttl(f"{prefix}kv:k")
    assert 0 < ttl <= 60_000


def test_kv_area_is_separate_from_counters(store: StateStore) -> None:
    from callwarden.state import Counter

    store.consume([Counter("k", 5, None)], now=1.0, commit=True)
    store.put("k", {"v": 1}, ttl=None)
    [state] = store.consume([Counter("k", 5, None)], now=1.0, commit=False)
    assert state.used == 1.0
