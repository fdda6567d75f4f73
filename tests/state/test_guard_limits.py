"""Limit rules and session history through a real Guard, on every store (real redis-server)."""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from pathlib import Path

import pytest
from _state_support import Clock, RedisServer, unique_prefix
from _state_workers import guard_check_many

from callwarden import Effect, Guard, PolicyError
from callwarden.state import SQLiteStore, StateStore, open_store
from callwarden.state._redis import RedisStore


def limited(*rules: dict, **settings) -> dict:
    # A generous deadline unless a test sets one: these tests are about counting, and a first
    # decision on a fresh Redis Cluster client can outlast the default second on a loaded CI
    # machine (a store timeout is a deny, which would read as a miscount).
    return {"version": 1, "rules": list(rules), "timeout": "60s", **settings}


# A generous deadline: these tests are about counting exactly, and 1,000 concurrent decisions
# on a loaded CI machine can take longer than the default second.
BUDGET_25 = limited({"id": "budget", "match": {"tool": "fetch"},
                     "limit": {"calls": 25, "per": "session"}}, timeout="60s")


async def test_a_thousand_concurrent_acheck_calls_allow_exactly_the_budget(store) -> None:
    guard = Guard.from_dict(BUDGET_25, state=store)
    decisions = await asyncio.gather(*(
        guard.acheck("fetch", {"url": "https://x"}, session="s1") for _ in range(1000)))
    assert sum(d.allowed for d in decisions) == 25
    denied = [d for d in decisions if not d.allowed]
    assert {d.rule for d in denied} == {"budget"}
    assert all(d.reasons[0].code == "limit.exceeded" for d in denied)


def _shared_url(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    server: RedisServer = request.getfixturevalue(
        "redis_server" if kind == "redis" else "redis_cluster")
    return f"{server.url}?prefix={unique_prefix()}"


@pytest.mark.parametrize("kind", ["sqlite", "redis", "redis-cluster"])
def test_four_processes_share_one_budget_exactly(kind, tmp_path, request) -> None:
    url = _shared_url(kind, tmp_path, request)
    policy = limited({"id": "budget", "match": {"tool": "fetch"},
                      "limit": {"calls": 100, "per": "session"}})
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(4)
    results = ctx.Queue()
    procs = [ctx.Process(target=guard_check_many, args=(url, policy, 250, barrier, results))
             for _ in range(4)]
    for p in procs:
        p.start()
    counts = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert sum(counts) == 100


def test_sliding_window_edges_with_an_injected_clock(store) -> None:
    clock = Clock()
    guard = Guard.from_dict(limited({"id": "rate", "match": {"tool": "fetch"},
                                     "limit": {"calls": 2, "window": "60s", "per": "agent"}}),
                            state=store, clock=clock)
    check = lambda: guard.check("fetch", {"url": "https://x"}, agent="a")  # noqa: E731
    assert check().allowed                 # t = 0
    clock.now += 30
    assert check().allowed                 # t = 30
    clock.now += 29.999
    d = check()                            # t = 59.999: both still in the window
    assert d.effect is Effect.DENY
    assert "frees up" in d.message
    clock.now += 0.001                     # t = 60: the first call leaves the window exactly
    assert check().allowed
    assert not check().allowed
    clock.now += 30                        # t = 90: the t=30 call leaves
    assert check().allowed
    assert guard.check("fetch", {"url": "https://x"}, agent="b").allowed  # per agent


def test_budget_is_not_consumed_by_calls_denied_by_other_rules(store) -> None:
    guard = Guard.from_dict(limited(
        {"id": "no-evil", "match": {"tool": "fetch"}, "args": {"url": "https://evil*"},
         "effect": "deny"},
        {"id": "budget", "match": {"tool": "fetch"}, "limit": {"calls": 2}}), state=store)
    for _ in range(10):
        assert guard.check("fetch", {"url": "https://evil.example"}).rule == "no-evil"
    assert guard.check("fetch", {"url": "https://ok"}).allowed
    assert guard.check("fetch", {"url": "https://ok"}).allowed
    assert guard.check("fetch", {"url": "https://ok"}).rule == "budget"


def test_attempt_cap_stops_a_retry_loop_even_of_denied_calls(store) -> None:
    guard = Guard.from_dict(limited(
        {"id": "no-rm", "match": {"tool": "bash"}, "args": {"command": "rm *"}},
        {"id": "retry-cap", "match": {"tool": "bash"}, "effect": "halt",
         "limit": {"attempts": 3, "window": "10m", "per": ["session", "tool"]}}), state=store)
    effects = [guard.check("bash", {"command": "rm -rf /"}, session="s").effect
               for _ in range(5)]
    assert effects == [Effect.DENY] * 3 + [Effect.HALT] * 2
    halted = guard.check("bash", {"command": "ls"}, session="s")
    assert halted.effect is Effect.HALT and halted.reasons[0].code == "limit.attempts"
    assert guard.check("bash", {"command": "ls"}, session="other").allowed


def test_weighted_spend_budget(store) -> None:
    guard = Guard.from_dict(limited(
        {"id": "spend", "match": {"tool": "pay"}, "effect": "ask",
         "limit": {"sum": "args.amount", "max": 100, "window": "1d", "per": "principal"}}),
        state=store)
    pay = lambda amount, who="p": guard.check("pay", {"amount": amount}, principal=who)  # noqa: E731
    assert pay(60).allowed
    assert pay(40).allowed
    d = pay(0.5)
    assert d.effect is Effect.ASK and "100 used of 100" in d.reasons[0].message
    assert pay(99, who="q").allowed
    bad = pay("lots")
    assert bad.effect is Effect.DENY and bad.reasons[0].code == "policy_error"


def test_limit_custom_message_keeps_the_reset_time(store) -> None:
    guard = Guard.from_dict(limited({"id": "b", "limit": {"calls": 0, "window": "1h"},
                                     "message": "Slow down."}), state=store)
    d = guard.check("t", {})
    assert d.message.startswith("Slow down. (limit 'b' reached")


def test_history_conditions(store) -> None:
    guard = Guard.from_dict(limited(
        {"id": "fetch-then-mail", "match": {"tool": "send_email"},
         "if": "'web_fetch' in history.tools", "effect": "ask"},
        {"id": "few-deletes", "match": {"tool": "delete_file"},
         "if": "'delete_file' in history.tools && history.tools['delete_file'] >= 3"}), state=store)
    assert guard.check("send_email", {"to": "a"}, session="s").allowed
    guard.check("web_fetch", {"url": "https://x"}, session="s")
    assert guard.check("send_email", {"to": "a"}, session="s").effect is Effect.ASK
    assert guard.check("send_email", {"to": "a"}, session="other").allowed
    effects = [guard.check("delete_file", {"path": "x"}, session="d").effect for _ in range(5)]
    assert effects == [Effect.ALLOW] * 3 + [Effect.DENY] * 2


async def test_history_conditions_async(store) -> None:
    guard = Guard.from_dict(limited(
        {"id": "fetch-then-mail", "match": {"tool": "send_email"},
         "if": "'web_fetch' in history.tools", "effect": "ask"}), state=store)
    await guard.acheck("web_fetch", {"url": "https://x"}, session="s")
    assert (await guard.acheck("send_email", {}, session="s")).effect is Effect.ASK


def test_store_down_fails_closed_within_the_deadline_then_recovers(
        own_redis_server: RedisServer) -> None:
    store = RedisStore(own_redis_server.url, prefix=unique_prefix(), timeout=0.2)
    guard = Guard.from_dict(limited({"id": "budget", "limit": {"calls": 100}},
                                    timeout="2s"), state=store)
    assert guard.check("t", {}).allowed
    own_redis_server.stop()
    started = time.monotonic()
    d = guard.check("t", {})
    assert time.monotonic() - started < 2.0
    assert d.effect is Effect.DENY and d.reasons[0].code == "state_unavailable"
    down_async = asyncio.run(guard.acheck("t", {}))
    assert down_async.reasons[0].code == "state_unavailable"
    own_redis_server.start()
    assert guard.check("t", {}).allowed
    store.close()


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_budget_survives_a_restart(kind, tmp_path, request) -> None:
    url = _shared_url(kind, tmp_path, request)
    policy = limited({"id": "budget", "limit": {"calls": 3, "per": "session"}})
    first = open_store(url, timeout=30.0)
    guard = Guard.from_dict(policy, state=first)
    assert [guard.check("t", {}, session="s").allowed for _ in range(2)] == [True, True]
    first.close()
    second = open_store(url, timeout=30.0)
    restarted = Guard.from_dict(policy, state=second)
    assert [restarted.check("t", {}, session="s").allowed for _ in range(2)] == [True, False]
    second.close()


def test_state_url_in_the_policy_file_is_relative_to_it(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(
        "version: 1\nstate: sqlite:///state.db\nrules:\n"
        "  - {id: b, limit: {calls: 1}}\n")
    guard = Guard.from_file(tmp_path / "p.yaml")
    assert isinstance(guard.engine.store, SQLiteStore)
    assert guard.check("t", {}).allowed and not guard.check("t", {}).allowed
    assert (tmp_path / "state.db").exists()
    guard.engine.store.close()


@pytest.mark.parametrize(("limit", "fragment"), [
    ({"calls": 5, "attempts": 3}, "exactly one of"),
    ({"calls": -1}, "zero or more"),
    ({"calls": 5, "per": "user"}, "cannot count per 'user'"),
    ({"calls": 5, "window": "soon"}, "not a duration"),
    ({"sum": "amount", "max": 5}, "must name an argument"),
    ({"calls": 5, "burst": 2}, "unknown key 'burst'"),
])
def test_bad_limit_config_is_a_policy_error(limit, fragment) -> None:
    with pytest.raises(PolicyError, match=fragment):
        Guard.from_dict(limited({"id": "x", "limit": limit}))


def test_limits_without_state_use_memory() -> None:
    guard = Guard.from_dict(BUDGET_25)
    assert type(guard.engine.store).__name__ == "MemoryStore"


def test_round_trips_per_limited_decision_is_one(redis_server: RedisServer) -> None:
    import redis

    prefix = unique_prefix()
    store: StateStore = RedisStore(redis_server.url, prefix=prefix)
    guard = Guard.from_dict(limited(
        {"id": "b", "limit": {"calls": 1000, "per": "session"}},
        {"id": "r", "limit": {"calls": 1000, "window": "60s", "per": "agent"}}), state=store)
    guard.check("t", {}, session="s", agent="a")
    client = redis.Redis.from_url(redis_server.url)
    before = client.info("commandstats")
    for _ in range(50):
        guard.check("t", {}, session="s", agent="a")
    after = client.info("commandstats")
    delta = {k: after[k]["calls"] - before.get(k, {"calls": 0})["calls"] for k in after}
    # One script per decision; the commands it runs inside the server are counted apart.
    assert delta.get("cmdstat_evalsha", 0) + delta.get("cmdstat_eval", 0) == 50
    client_side = {k for k, v in delta.items() if v and k not in (
        "cmdstat_evalsha", "cmdstat_eval", "cmdstat_info")}
    scripted = {"cmdstat_zadd", "cmdstat_zrangebyscore", "cmdstat_zremrangebyscore",
                "cmdstat_hget", "cmdstat_hset", "cmdstat_hincrbyfloat", "cmdstat_pexpire",
                "cmdstat_zcard", "cmdstat_hgetall", "cmdstat_hdel", "cmdstat_incrbyfloat",
                "cmdstat_get", "cmdstat_set", "cmdstat_zrange", "cmdstat_zrem", "cmdstat_hmget",
                "cmdstat_expire", "cmdstat_del", "cmdstat_exists", "cmdstat_pttl",
                "cmdstat_hincrby", "cmdstat_zscore", "cmdstat_zincrby", "cmdstat_ttl"}
    per_script = {k: delta[k] for k in client_side - scripted}
    assert not per_script, per_script
    store.close()


def test_attempt_cap_per_args_targets_identical_retries(store) -> None:
    guard = Guard.from_dict(limited({"id": "loop", "effect": "halt",
                                     "limit": {"attempts": 2, "per": ["session", "args"]}}),
                            state=store)
    same = [guard.check("t", {"q": 1}, session="s").effect for _ in range(3)]
    assert same == [Effect.ALLOW, Effect.ALLOW, Effect.HALT]
    assert guard.check("t", {"q": 2}, session="s").allowed


def test_store_failure_under_on_error_allow_does_not_override_default_deny() -> None:
    from callwarden.state import MemoryStore

    class Down(MemoryStore):
        def consume(self, *args, **kwargs):  # type: ignore[override]
            raise RuntimeError("down")

    guard = Guard.from_dict(limited({"id": "b", "limit": {"calls": 5}}, default="deny",
                                    on_error="allow"), state=Down())
    d = guard.check("t", {})
    assert d.effect is Effect.DENY and d.rule == "default"
    assert any(r.code == "state_unavailable" for r in d.reasons)


def _script_calls(client, before: dict) -> dict[str, int]:
    after = client.info("commandstats")
    delta = {k: after[k]["calls"] - before.get(k, {"calls": 0})["calls"] for k in after}
    return {k: v for k, v in delta.items() if v and k in (
        "cmdstat_evalsha", "cmdstat_eval", "cmdstat_hgetall", "cmdstat_hmget")}


LIMIT_AND_HISTORY = limited(
    {"id": "b", "limit": {"calls": 1000, "per": "session"}},
    {"id": "mail-after-fetch", "match": {"tool": "send_email"},
     "if": "'web_fetch' in history.tools", "effect": "ask"})


def test_a_decision_that_counts_and_records_history_is_one_round_trip(
        redis_server: RedisServer) -> None:
    import redis

    store = RedisStore(redis_server.url, prefix=unique_prefix())
    guard = Guard.from_dict(LIMIT_AND_HISTORY, state=store)
    guard.check("t", {}, session="s")
    client = redis.Redis.from_url(redis_server.url)
    before = client.info("commandstats")
    for _ in range(20):
        guard.check("t", {}, session="s")
    assert _script_calls(client, before) == {"cmdstat_evalsha": 20}
    assert store.history("s").count == 21
    store.close()


def test_a_decision_that_reads_history_is_two_round_trips(redis_server: RedisServer) -> None:
    import redis

    store = RedisStore(redis_server.url, prefix=unique_prefix())
    guard = Guard.from_dict(LIMIT_AND_HISTORY, state=store)
    guard.check("send_email", {}, session="s")
    client = redis.Redis.from_url(redis_server.url)
    before = client.info("commandstats")
    for _ in range(20):
        guard.check("send_email", {}, session="s")
    # The history read is one HMGET of the tool the condition names.
    assert _script_calls(client, before) == {"cmdstat_evalsha": 20, "cmdstat_hmget": 20}
    store.close()


def test_history_recorded_with_the_counters_has_the_final_effect(store) -> None:
    guard = Guard.from_dict(limited(
        {"id": "b", "match": {"tool": "t"}, "limit": {"calls": 1, "per": "session"}},
        {"id": "r", "match": {"tool": "t"}, "effect": "halt",
         "limit": {"calls": 2, "window": "1h", "per": "session"}},
        {"id": "reads", "match": {"tool": "u"}, "if": "history.count > 100"}), state=store)
    effects = [guard.check("t", {}, session="s").effect for _ in range(3)]
    assert effects == [Effect.ALLOW, Effect.DENY, Effect.DENY]
    assert dict(store.history("s").tool_effects["t"]) == {"allow": 1, "deny": 2}


def _with_combiner(policy: dict, store: StateStore, combiner: object) -> Guard:
    from callwarden.engine import Engine
    from callwarden.policyfile import compile_policy

    loaded = compile_policy(policy)
    guard = Guard.from_loaded(loaded, state=store)
    # No policy key selects another combiner: swap the engine for one that uses it.
    guard._engine = Engine(loaded.rules, settings=loaded.settings, store=store,
                           combiner=combiner)  # type: ignore[arg-type]
    return guard


FIRST_ASK_THEN_HALT = limited(
    {"id": "soft", "match": {"tool": "t"}, "effect": "ask",
     "limit": {"calls": 1, "per": "session"}},
    {"id": "hard", "match": {"tool": "t"}, "effect": "halt",
     "limit": {"calls": 1, "per": "session"}},
    {"id": "reads", "match": {"tool": "u"}, "if": "history.count > 100"})


def test_history_recorded_with_the_counters_under_first_match(store) -> None:
    from callwarden.engine.combine import FirstMatch

    guard = _with_combiner(FIRST_ASK_THEN_HALT, store, FirstMatch())
    effects = [guard.check("t", {}, session="s").effect for _ in range(2)]
    assert effects == [Effect.ALLOW, Effect.ASK]  # the first rule in order decides
    assert dict(store.history("s").tool_effects["t"]) == {"allow": 1, "ask": 1}


def test_history_under_a_custom_combiner_records_the_final_effect(store) -> None:
    from callwarden.engine.combine import StrictestWins

    class Custom(StrictestWins):
        __slots__ = ()

    guard = _with_combiner(FIRST_ASK_THEN_HALT, store, Custom())
    effects = [guard.check("t", {}, session="s").effect for _ in range(2)]
    assert effects == [Effect.ALLOW, Effect.HALT]
    assert dict(store.history("s").tool_effects["t"]) == {"allow": 1, "halt": 1}


# Conditions over history, each naming the tools it reads or not; every decision must be the
# same whether the store reads the session's whole history or only the tools named.
HISTORY_RULES = limited(
    {"id": "named", "match": {"tool": "send"},
     "if": "'fetch' in history.tools && history.attempts['fetch'] >= 2", "effect": "ask"},
    {"id": "dotted", "match": {"tool": "pay"},
     "if": "has(history.tool_effects.pay) && history.tool_effects['pay']['deny'] > 0"},
    {"id": "scalars", "match": {"tool": "late"}, "if": "history.count > 5 && "
     "history.last_tool != 'late' && 'x' in history.last_time_by_tool"},
    {"id": "any-tool", "match": {"tool": "wide"},
     "if": "history.tools.exists(t, t.startsWith('rm'))", "effect": "halt"},
    {"id": "effects", "match": {"tool": "strict"}, "if": "history.effects['deny'] >= 2"},
)
HISTORY_CALLS = ["fetch", "send", "fetch", "send", "pay", "pay", "late", "x", "late", "wide",
                 "rm_rf", "wide", "strict", "pay", "strict", "other", "send", "late"]


class _WholeHistory:
    """A store of another project's, whose history() predates the tools argument."""

    def __init__(self, inner: StateStore) -> None:
        self._inner = inner

    def history(self, session, *, deadline=None):
        return self._inner.history(session, deadline=deadline)

    async def ahistory(self, session, *, deadline=None):
        return await self._inner.ahistory(session, deadline=deadline)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def _decisions(guard: Guard) -> list[tuple[str, str | None]]:
    out = []
    for tool in HISTORY_CALLS:
        d = guard.check(tool, {}, session="h")
        out.append((d.effect.value, d.rule))
    return out


class _Asked(_WholeHistory):
    """The store as it is, noting which tools each history read asks for."""

    def __init__(self, inner: StateStore) -> None:
        super().__init__(inner)
        self.asked: list[frozenset[str] | None] = []

    def history(self, session, *, deadline=None, tools=None):
        self.asked.append(tools)
        return self._inner.history(session, deadline=deadline, tools=tools)

    async def ahistory(self, session, *, deadline=None, tools=None):
        self.asked.append(tools)
        return await self._inner.ahistory(session, deadline=deadline, tools=tools)


def test_a_history_read_of_the_tools_named_decides_as_the_whole_history(store) -> None:
    asking = _Asked(store)
    narrowed = _decisions(Guard.from_dict(HISTORY_RULES, state=asking))
    whole = _decisions(Guard.from_dict(HISTORY_RULES, state=_WholeHistory(open_store("memory"))))
    assert narrowed == whole
    assert ("ask", "named") in whole and ("deny", "dotted") in whole
    assert ("halt", "any-tool") in whole and ("deny", "effects") in whole
    assert ("deny", "scalars") in whole
    # Each tool's rules name their tools, or may read any: the store was asked for just those.
    assert set(asking.asked) == {frozenset({"fetch"}), frozenset({"pay"}), frozenset({"x"}),
                                 None}
    assert asking.asked.count(None) == 4  # wide twice, strict twice: they may read any tool
