"""The Redis store on a real 3-master Redis Cluster: keys placed by hash tag, decisions across
slots counted exactly, records listed from every node, failures failing closed in time.

The conformance and concurrency suites run on the cluster too (store kind ``redis-cluster``);
this file holds what only a cluster has."""

from __future__ import annotations

import asyncio
import multiprocessing
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from _cluster_support import ClusterNode, RedisCluster
from _state_support import free_port, unique_prefix
from _state_workers import guard_policy_many

from callwarden import Effect, Guard
from callwarden.state import (
    Counter,
    CounterState,
    HistoryEntry,
    StoreUnavailable,
    check_store_url,
    open_store,
)
from callwarden.state._redis import RedisStore

T = 1_000_000.0
STORE_TIMEOUT = 5.0
# An obstacle (a frozen node, a redirection loop) is removed this long after the call starts,
# well inside the store's own timeout: a call that waited on the store instead of giving up
# at its deadline would then succeed.
RELEASED_AFTER = STORE_TIMEOUT / 2
DEADLINE = 0.1


@pytest.fixture
async def store(redis_cluster: RedisCluster) -> AsyncIterator[RedisStore]:
    """A store on the session's cluster, closed in the test's event loop."""
    opened = RedisStore(redis_cluster.url, prefix=unique_prefix(), timeout=STORE_TIMEOUT)
    try:
        yield opened
    finally:
        await opened.aclose()


def session_budget(session: str, limit: float = 50) -> Counter:
    return Counter(f"budget|session={session}", limit, None, shard=session)


def global_budget(limit: float = 60, window: float | None = None) -> Counter:
    return Counter("global-budget", limit, window)


def apart(cluster: RedisCluster, store: RedisStore, *sessions: str) -> None:
    """The sessions' keys and the global budget's are in different slots (else the decision
    would be one script and these tests would prove nothing about slots)."""
    slots = {cluster.keyslot(store._counter_keys(global_budget())[0])}
    slots |= {cluster.keyslot(store._history_key(s)) for s in sessions}
    assert len(slots) == len(sessions) + 1


def sessions_around(cluster: RedisCluster, store: RedisStore, name: str, count: int,
                    before: bool) -> list[str]:
    """``count`` session names whose slot comes before (or after) the global budget's: the
    order in which a decision's slots are counted, so which one a refusal gives back."""
    mark = cluster.keyslot(store._counter_keys(global_budget())[0])
    found = []
    for i in range(10_000):
        session = f"{name}{i}"
        slot = cluster.keyslot(store._history_key(session))
        if slot != mark and (slot < mark) == before:
            found.append(session)
            if len(found) == count:
                return found
    raise AssertionError("no such session")


def usage(store: RedisStore, counter: Counter) -> float:
    [state] = store.consume([Counter(counter.key, 1e12, counter.window, 0.0,
                                     shard=counter.shard)], now=T, commit=False)
    return state.used


# -- where the keys live ---------------------------------------------------------------------


def test_the_keys_of_one_session_share_one_slot(redis_cluster: RedisCluster,
                                                store: RedisStore) -> None:
    rate = Counter("rate|session=s1|tool=fetch", 10, 60.0, shard="s1")
    store.consume([session_budget("s1"), rate], now=T, commit=True,
                  record=HistoryEntry("s1", "fetch", "allow"))
    keys = [*store._counter_keys(session_budget("s1")), *store._counter_keys(rate),
            store._history_key("s1")]
    client = redis_cluster.client()
    try:
        assert all(client.exists(key) for key in keys)
    finally:
        client.close()
    assert len({redis_cluster.keyslot(key) for key in keys}) == 1


def test_a_counters_entries_and_total_share_a_slot(redis_cluster: RedisCluster,
                                                   store: RedisStore) -> None:
    entries, total = store._counter_keys(global_budget(window=60.0))
    assert entries != total and redis_cluster.keyslot(entries) == redis_cluster.keyslot(total)


def test_sessions_spread_over_every_node(redis_cluster: RedisCluster, store: RedisStore) -> None:
    nodes = {redis_cluster.node_serving(redis_cluster.keyslot(store._history_key(f"s{i}"))).port
             for i in range(30)}
    assert len(nodes) == 3


def test_a_per_session_decision_is_one_script_on_one_node(redis_cluster: RedisCluster,
                                                          store: RedisStore) -> None:
    rate = Counter("rate|session=s2", 10, 60.0, shard="s2")
    store.consume([rate], now=T, commit=True)  # discovers the cluster, loads the script
    before = _scripts_run(redis_cluster)
    for i in range(10):
        store.consume([session_budget("s2"), rate], now=T + i, commit=True,
                      record=HistoryEntry("s2", "fetch", "allow"))
    assert _scripts_run(redis_cluster) - before == 10


def _scripts_run(cluster: RedisCluster) -> int:
    total = 0
    for node in cluster.nodes:
        with node.client() as client:
            total += int(client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))
    return total


def test_a_prefix_with_braces_is_refused(redis_cluster: RedisCluster) -> None:
    with pytest.raises(ValueError, match="braces"):
        RedisStore(redis_cluster.url, prefix="app{1}:")


@pytest.mark.parametrize("url", [
    "redis+cluster://127.0.0.1:7000/",
    "redis+cluster://127.0.0.1:7000,127.0.0.1:7001,[::1]:7002/?prefix=cw:&timeout=1",
    "rediss+cluster://user:secret@node-a:6380,node-b:6380",
])
def test_cluster_urls_are_redis_stores(url: str) -> None:
    assert check_store_url(url) == "redis"


def test_the_readme_names_a_cluster_the_store_takes() -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    [line] = [text for text in readme.splitlines() if text.startswith("state: redis+cluster://")]
    assert check_store_url(line.split(": ", 1)[1]) == "redis"


@pytest.mark.parametrize(("url", "message"), [
    ("redis+cluster:///", "names no node"),
    ("redis+cluster://127.0.0.1:x/", "not host:port"),
    ("redis+cluster://127.0.0.1:7000/3", "database 0 only"),
    ("redis+cluster://127.0.0.1:7000/?timeout=0", "seconds > 0"),
])
def test_bad_cluster_urls_are_refused(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_store_url(url)


# -- a decision across slots -----------------------------------------------------------------


async def _burst(store: RedisStore, mode: str, calls: list[list[Counter]]) -> list[Any]:
    """Makes the calls all at once: threads (sync) or tasks (async)."""
    if mode == "async":
        return list(await asyncio.gather(*(
            store.aconsume(counters, now=T, commit=True) for counters in calls)))
    with ThreadPoolExecutor(16) as pool:
        return list(pool.map(lambda counters: store.consume(counters, now=T, commit=True),
                             calls))


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_global_budget_across_slots_allows_exactly_its_limit(
        redis_cluster: RedisCluster, store: RedisStore, mode: str) -> None:
    """200 calls of 10 sessions (budget 50 each, never reached) against a global 60: half the
    sessions are counted before the global budget, so a refusal gives their usage back."""
    sessions = (sessions_around(redis_cluster, store, "g", 5, before=True)
                + sessions_around(redis_cluster, store, "g", 5, before=False))
    apart(redis_cluster, store, *sessions)
    calls = [[session_budget(sessions[i % 10]), global_budget(60)] for i in range(200)]
    results = await _burst(store, mode, calls)
    allowed = [i for i, r in enumerate(results) if not r[0].exceeded and not r[1].exceeded]
    assert len(allowed) == 60
    assert usage(store, global_budget()) == 60
    per_session = dict.fromkeys(sessions, 0)
    for i in allowed:
        per_session[sessions[i % 10]] += 1
    assert {s: usage(store, session_budget(s)) for s in sessions} == per_session


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_session_budgets_across_slots_give_back_the_global_usage(
        redis_cluster: RedisCluster, store: RedisStore, mode: str) -> None:
    """4 sessions x 50 calls against budgets of 10 each and a global 1000: exactly 40 pass,
    and the global budget, counted first, keeps those 40 and nothing of the 160 refused."""
    sessions = sessions_around(redis_cluster, store, "p", 4, before=False)
    apart(redis_cluster, store, *sessions)
    calls = [[global_budget(1000), session_budget(sessions[i % 4], 10)] for i in range(200)]
    results = await _burst(store, mode, calls)
    assert sum(not any(s.exceeded for s in r) for r in results) == 40
    assert usage(store, global_budget()) == 40
    assert all(usage(store, session_budget(s)) == 10 for s in sessions)


async def test_two_binding_budgets_across_slots_never_exceed_and_leave_no_reservation(
        redis_cluster: RedisCluster, store: RedisStore) -> None:
    """Both budgets run out under the burst: a call may be refused for a reservation given
    back later (failing closed), but no budget passes its limit and what stays counted is
    exactly what was allowed."""
    sessions = [f"b{i}" for i in range(8)]
    apart(redis_cluster, store, *sessions)
    calls = [[session_budget(sessions[i % 8], 20), global_budget(100)] for i in range(300)]
    results = await _burst(store, "async", calls)
    passed = [c for c, r in zip(calls, results, strict=True) if not any(s.exceeded for s in r)]
    assert 0 < len(passed) <= 100
    assert usage(store, global_budget()) == len(passed)
    for s in sessions:
        mine = sum(1 for c in passed if c[0].shard == s)
        assert mine <= 20 and usage(store, session_budget(s)) == mine


def test_a_refusal_in_a_later_slot_keeps_attempts_counted(redis_cluster: RedisCluster,
                                                          store: RedisStore) -> None:
    [session] = sessions_around(redis_cluster, store, "a", 1, before=True)
    attempts = Counter(f"attempts|session={session}", 100, 600.0, always=True, shard=session)
    spend = Counter(f"spend|session={session}", 5, 3600.0, shard=session)
    for i in range(4):
        states = store.consume([attempts, spend, global_budget(2, window=3600.0)],
                               now=T + i, commit=True)
        assert [s.exceeded for s in states] == [False, False, i >= 2]
    assert usage(store, attempts) == 4  # every attempt counts
    assert usage(store, spend) == 2     # only the allowed calls, given back when refused
    assert usage(store, global_budget(window=3600.0)) == 2


def held_by(session: str, *members: str, limit: float = 5) -> Counter:
    return Counter(f"fanout|session={session}", limit, 600.0, members=members, shard=session)


def held_count(store: RedisStore, counter: Counter) -> float:
    [state] = store.consume([Counter(counter.key, 1e12, counter.window, members=("?",),
                                     shard=counter.shard)], now=T, commit=False)
    return state.used


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_refusal_in_a_later_slot_gives_back_the_members_this_call_added(
        redis_cluster: RedisCluster, store: RedisStore, mode: str) -> None:
    """A member held before the call stays held; those the call brought are let go."""
    [session] = sessions_around(redis_cluster, store, "m", 1, before=True)
    store.consume([held_by(session, "a")], now=T, commit=True)
    store.consume([global_budget(0)], now=T, commit=True)  # the later slot refuses all
    [[fanout, refused]] = await _burst(store, mode, [[held_by(session, "a", "b", "c"),
                                                      global_budget(0)]])
    assert (fanout.exceeded, refused.exceeded) == (False, True)
    assert held_count(store, held_by(session)) == 1.0


async def test_a_slot_is_released_on_its_node(redis_cluster: RedisCluster,
                                              store: RedisStore) -> None:
    sessions = sessions_around(redis_cluster, store, "r", 2, before=True)
    slots = [held_by(s, "call-1", limit=1) for s in sessions]
    store.consume(slots, now=T, commit=True)
    store.release(slots[:1])
    await store.arelease(slots[1:])
    assert [held_count(store, c) for c in slots] == [0.0, 0.0]


def test_states_across_slots_are_those_of_one_script(redis_cluster: RedisCluster,
                                                     store: RedisStore) -> None:
    """used, exceeded, reset_at and last_at per counter, as a single server reports them."""
    rate = Counter("rate|session=r1", 2, 60.0, shard="r1")
    apart(redis_cluster, store, "r1")
    glob = global_budget(5, window=100.0)
    seen = [store.consume([rate, glob], now=T + i, commit=True) for i in range(4)]
    assert seen[0] == [CounterState(0.0, False), CounterState(0.0, False)]
    assert seen[1] == [CounterState(1.0, False, None, T), CounterState(1.0, False, None, T)]
    assert seen[2] == [CounterState(2.0, True, T + 60.0, T + 1),
                       CounterState(2.0, False, None, T + 1)]
    assert seen[3] == [CounterState(2.0, True, T + 60.0, T + 1),
                       CounterState(2.0, False, None, T + 1)]


@pytest.mark.parametrize(("hits", "expected"), [
    ((False, False, False), "allow"),
    ((True, False, False), "ask"),
    ((False, True, False), "halt"),
    ((True, True, False), "halt"),
    ((False, False, True), "deny"),
    ((True, False, True), "ask"),  # equal ranks: the first counter in order decides
])
def test_the_history_records_the_effect_of_every_slot(
        redis_cluster: RedisCluster, store: RedisStore, hits: tuple[bool, ...],
        expected: str) -> None:
    """The effect recorded is HistoryEntry.effect_for over all the counters, whichever slot
    each is in: the session's (rank 2, ask), a global one (rank 3, halt), another (rank 2,
    deny)."""
    counters = [session_budget("h", 0 if hits[0] else 9),
                Counter("global-a", 0 if hits[1] else 9, None),
                Counter("global-b", 0 if hits[2] else 9, None)]
    assert len({redis_cluster.keyslot(store._counter_keys(c)[0]) for c in counters}) == 3
    entry = HistoryEntry("h", "pay", "allow", ((2.0, "ask"), (3.0, "halt"), (2.0, "deny")))
    states = store.consume(counters, now=T, commit=True, record=entry)
    assert [s.exceeded for s in states] == list(hits)
    assert entry.effect_for(hits) == expected
    assert dict(store.history("h").tool_effects["pay"]) == {expected: 1}


async def test_a_history_in_a_slot_of_its_own_is_recorded_after_the_counters(
        redis_cluster: RedisCluster, store: RedisStore) -> None:
    entry = HistoryEntry("lonely", "fetch", "allow", ((5.0, "halt"),))
    apart(redis_cluster, store, "lonely")
    await store.aconsume([global_budget(1)], now=T, commit=True, record=entry)
    [state] = await store.aconsume([global_budget(1)], now=T, commit=True, record=entry)
    history = await store.ahistory("lonely")
    assert state.exceeded and dict(history.tool_effects["fetch"]) == {"allow": 1, "halt": 1}


# -- records ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_listing_records_reads_every_node(redis_cluster: RedisCluster, store: RedisStore,
                                                mode: str) -> None:
    keys = [f"approval:{i:03d}" for i in range(60)]
    for i, key in enumerate(keys):
        store.put(key, {"n": i}, ttl=None)
    store.put("grant:x", {"n": -1}, ttl=None)
    nodes = {redis_cluster.node_serving(redis_cluster.keyslot(store._kv_key(k))).port
             for k in keys}
    assert len(nodes) == 3  # the records are spread: a listing must ask every primary
    found = store.scan("approval:") if mode == "sync" else await store.ascan("approval:")
    assert [v.key for v in found] == keys
    assert [v.value["n"] for v in found] == list(range(60))


# -- a real Guard in several processes ------------------------------------------------------


@pytest.mark.parametrize(("session_limit", "global_limit", "expected"), [
    (40, 1000, 80),  # the session budgets decide: 2 sessions x 40
    (1000, 70, 70),  # the global one does
])
def test_a_guard_in_four_processes_keeps_budgets_across_slots_exactly(
        redis_cluster: RedisCluster, session_limit: int, global_limit: int,
        expected: int) -> None:
    url = f"{redis_cluster.url}?prefix={unique_prefix()}&timeout=30"
    policy = {"version": 1, "state": url, "timeout": "60s", "rules": [
        {"id": "per-session", "match": {"tool": "fetch"},
         "limit": {"calls": session_limit, "per": "session"}},
        {"id": "everyone", "match": {"tool": "fetch"}, "limit": {"calls": global_limit}},
    ]}
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=guard_policy_many,
                         args=(policy, ["alpha", "beta"], 50, barrier, results))
             for _ in range(4)]
    for p in procs:
        p.start()
    counts = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert all(p.exitcode == 0 for p in procs)
    assert sum(sum(c.values()) for c in counts) == expected
    guard = Guard.from_dict(policy)
    try:  # and the store holds exactly that: the next call is refused by the binding budget
        decision = guard.check("fetch", {"url": "https://x"}, session="alpha")
        assert decision.effect is Effect.DENY
        assert decision.rule == ("per-session" if session_limit < global_limit else "everyone")
    finally:
        guard.close()


# -- failures: a cluster of this module's own, free to be broken ------------------------------


@pytest.fixture(scope="module")
def own_cluster() -> Iterator[RedisCluster]:
    with tempfile.TemporaryDirectory(prefix="callwarden-own-cluster-") as directory:
        cluster = RedisCluster(Path(directory))
        cluster.start()
        try:
            yield cluster
        finally:
            cluster.stop()


@pytest.fixture
def healed(own_cluster: RedisCluster) -> Iterator[RedisCluster]:
    """The cluster, made whole again after the test (stopped nodes restarted, frozen ones
    resumed, slots stable)."""
    yield own_cluster
    for node in own_cluster.nodes:
        if node.process is not None:
            node.resume()
    for node in own_cluster.nodes:
        if node.process is None:
            node.start()
    own_cluster.wait_until("ok")


def _on(cluster: RedisCluster, store: RedisStore, node: ClusterNode, prefix: str) -> Counter:
    """A counter whose keys the given node serves."""
    for i in range(1000):
        counter = Counter(f"{prefix}{i}", 1000, None)
        if cluster.node_serving(cluster.keyslot(store._counter_keys(counter)[0])) is node:
            return counter
    raise AssertionError("no key found for the node")


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_stopped_node_fails_closed_within_the_deadline_then_recovers(
        healed: RedisCluster, mode: str) -> None:
    store = RedisStore(healed.url, prefix=unique_prefix(), timeout=STORE_TIMEOUT)
    try:
        victim = healed.nodes[1]
        counter = _on(healed, store, victim, "down")
        await _consume(store, mode, [counter], deadline=None)
        victim.stop()
        started = time.perf_counter()
        with pytest.raises(StoreUnavailable, match="Redis store"):
            await _consume(store, mode, [counter], deadline=started + DEADLINE)
        assert time.perf_counter() - started < RELEASED_AFTER
        healed.restart(victim)
        [state] = await _consume(store, mode, [counter], deadline=None)
        assert not state.exceeded  # it reconnects (the node kept nothing: no persistence)
    finally:
        await store.aclose()


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_frozen_node_fails_closed_within_the_deadline(healed: RedisCluster,
                                                              mode: str) -> None:
    store = RedisStore(healed.url, prefix=unique_prefix(), timeout=STORE_TIMEOUT)
    try:
        victim = healed.nodes[2]
        counter = _on(healed, store, victim, "frozen")
        await _consume(store, mode, [counter], deadline=None)
        victim.pause()
        timer = threading.Timer(RELEASED_AFTER, victim.resume)
        timer.start()
        try:
            started = time.perf_counter()
            with pytest.raises(StoreUnavailable):
                await _consume(store, mode, [counter], deadline=started + DEADLINE)
            assert time.perf_counter() - started < RELEASED_AFTER
        finally:
            timer.join()
    finally:
        await store.aclose()


async def test_a_guard_check_on_a_frozen_node_is_denied_within_its_deadline(
        healed: RedisCluster) -> None:
    store = RedisStore(healed.url, prefix=unique_prefix(), timeout=STORE_TIMEOUT)
    guard = Guard.from_dict({"version": 1, "timeout": "100ms", "rules": [
        {"id": "b", "limit": {"calls": 5, "per": "session"}},
        {"id": "g", "limit": {"calls": 1000}}]}, state=store)
    try:
        # Discover the cluster and open connections (sync and async) before the clock matters.
        warm = [Counter("b|session=s", 5, None, shard="s"), Counter("g", 1000, None)]
        store.consume(warm, now=T, commit=False)
        await store.aconsume(warm, now=T, commit=False)
        for node in healed.nodes:
            node.pause()
        timer = threading.Timer(RELEASED_AFTER, lambda: [n.resume() for n in healed.nodes])
        timer.start()
        try:
            decisions = [guard.check("t", {}, session="s"),
                         await guard.acheck("t", {}, session="s")]
            released = not timer.is_alive()
        finally:
            timer.join()
        assert not released  # both answered before the nodes were released
        for decision in decisions:
            assert decision.effect is Effect.DENY
            assert decision.reasons[0].code in {"state_unavailable", "policy_timeout"}
    finally:
        await store.aclose()


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_clusterdown_fails_closed_at_once(healed: RedisCluster, mode: str) -> None:
    """With a node gone, the others declare the cluster down: a key they serve fails too."""
    store = RedisStore(healed.url, prefix=unique_prefix(), timeout=STORE_TIMEOUT)
    try:
        healthy, victim = healed.nodes[0], healed.nodes[1]
        counter = _on(healed, store, healthy, "alive")
        await _consume(store, mode, [counter], deadline=None)
        victim.stop()
        healed.wait_until("fail", nodes=[healthy])
        started = time.perf_counter()
        with pytest.raises(StoreUnavailable, match=r"CLUSTERDOWN|down"):
            await _consume(store, mode, [counter], deadline=started + 1.0)
        assert time.perf_counter() - started < RELEASED_AFTER
    finally:
        await store.aclose()


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_redirection_loop_fails_closed_within_the_deadline(healed: RedisCluster,
                                                                   mode: str) -> None:
    """A slot its owner says is migrating to a node that is not importing it: ASK there,
    MOVED back, forever."""
    store = RedisStore(healed.url, prefix=unique_prefix(), timeout=STORE_TIMEOUT)
    owner, other = healed.nodes[0], healed.nodes[1]
    counter = _on(healed, store, owner, "loop")
    slot = healed.keyslot(store._counter_keys(counter)[0])
    with other.client() as client:
        other_id = client.execute_command("CLUSTER MYID")
    try:
        await _consume(store, mode, [Counter("warm", 1, None)], deadline=None)
        with owner.client() as client:
            client.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", other_id)
        started = time.perf_counter()
        with pytest.raises(StoreUnavailable, match=r"redirect|TTL"):
            await _consume(store, mode, [counter], deadline=started + 1.0)
        assert time.perf_counter() - started < RELEASED_AFTER
    finally:
        with owner.client() as client:
            client.execute_command("CLUSTER SETSLOT", slot, "STABLE")
        await store.aclose()
    with RedisStore(healed.url, prefix=unique_prefix()) as fresh:
        assert not fresh.consume([counter], now=T, commit=True)[0].exceeded


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_slot_moved_to_another_node_is_followed(healed: RedisCluster, mode: str) -> None:
    """Resharding while the store holds the old map: it follows MOVED and counts on."""
    store = RedisStore(healed.url, prefix=unique_prefix(), timeout=STORE_TIMEOUT)
    source, target = healed.nodes[0], healed.nodes[2]
    session = next(f"m{i}" for i in range(10_000) if healed.node_serving(
        healed.keyslot(store._history_key(f"m{i}"))) is source)
    slot = healed.keyslot(store._history_key(session))
    record = HistoryEntry(session, "fetch", "allow")
    try:
        for i in range(3):
            await _consume(store, mode, [session_budget(session)], deadline=None,
                           record=record, now=T + i)
        _migrate(healed, slot, source, target)
        states = [await _consume(store, mode, [session_budget(session)], deadline=None,
                                 record=record, now=T + 3 + i) for i in range(2)]
        assert [s[0].used for s in states] == [3.0, 4.0]
        assert healed.node_serving(slot) is target
        assert store.history(session).count == 5
    finally:
        await store.aclose()


def _migrate(cluster: RedisCluster, slot: int, source: ClusterNode, target: ClusterNode) -> None:
    """Moves one slot and its keys, as ``redis-cli --cluster reshard`` does."""
    with source.client() as src, target.client() as dst:
        source_id, target_id = src.execute_command("CLUSTER MYID"), \
            dst.execute_command("CLUSTER MYID")
        dst.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", source_id)
        src.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", target_id)
        while keys := src.execute_command("CLUSTER GETKEYSINSLOT", slot, 100):
            src.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *keys)
        for node in cluster.nodes:
            with node.client() as client:
                client.execute_command("CLUSTER SETSLOT", slot, "NODE", target_id)
    cluster.wait_until("ok")


async def _consume(store: RedisStore, mode: str, counters: list[Counter], *,
                   deadline: float | None, record: HistoryEntry | None = None,
                   now: float = T) -> list[CounterState]:
    if mode == "sync":
        return store.consume(counters, now=now, commit=True, deadline=deadline, record=record)
    if deadline is None:
        return await store.aconsume(counters, now=now, commit=True, record=record)
    # As the engine does: the caller bounds the wait.
    remaining = max(deadline - time.perf_counter(), 1e-3)
    try:
        return await asyncio.wait_for(
            store.aconsume(counters, now=now, commit=True, deadline=deadline, record=record),
            remaining)
    except TimeoutError as exc:
        raise StoreUnavailable("the deadline passed") from exc


def test_an_unreachable_cluster_fails_closed() -> None:
    store = open_store(f"redis+cluster://127.0.0.1:{free_port()}/", timeout=0.2)
    started = time.perf_counter()
    with pytest.raises(StoreUnavailable, match="Redis store"):
        store.consume([Counter("k", 1, None)], now=T, commit=True)
    with pytest.raises(StoreUnavailable):
        store.get("k")
    assert time.perf_counter() - started < RELEASED_AFTER
    store.close()

