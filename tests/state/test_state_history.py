"""Session history: an incremental summary, the same in every store."""

from __future__ import annotations

import sqlite3

import cel
import pytest
from _cluster_support import raw_client

from callwarden.state import MemoryStore, SessionHistory, SQLiteStore, StateStore
from callwarden.state._redis import RedisStore


async def record_three(api) -> None:
    await api.record("s1", "web_fetch", "allow", now=10.0)
    await api.record("s1", "bash", "deny", now=11.0)
    await api.record("s1", "web_fetch", "deny", now=12.5)


async def test_unknown_session_has_an_empty_history(api) -> None:
    assert await api.history("nobody") == SessionHistory("nobody")


async def test_history_counts_calls(api) -> None:
    await record_three(api)
    assert (await api.history("s1")).count == 3


async def test_history_tools_counts_only_calls_that_ran(api) -> None:
    await record_three(api)
    assert dict((await api.history("s1")).tools) == {"web_fetch": 1}


async def test_history_attempts_counts_calls_per_tool_whatever_their_effect(api) -> None:
    await record_three(api)
    assert dict((await api.history("s1")).attempts) == {"web_fetch": 2, "bash": 1}


async def test_history_tools_counts_modified_and_approved_calls_as_ran(api) -> None:
    await api.record("s1", "bash", "modify", now=1.0)
    await api.record("s1", "pay", "ask", now=2.0)
    await api.record("s1", "pay", "approved", now=3.0)
    assert dict((await api.history("s1")).tools) == {"bash": 1, "pay": 1}


async def test_history_counts_calls_per_effect(api) -> None:
    await record_three(api)
    assert dict((await api.history("s1")).effects) == {"allow": 1, "deny": 2}


async def test_history_counts_calls_per_tool_and_effect(api) -> None:
    await record_three(api)
    nested = (await api.history("s1")).tool_effects
    assert {t: dict(e) for t, e in nested.items()} == {
        "web_fetch": {"allow": 1, "deny": 1},
        "bash": {"deny": 1},
    }


async def test_history_keeps_first_and_last_call(api) -> None:
    await record_three(api)
    h = await api.history("s1")
    assert (h.first_time, h.last_time, h.last_tool) == (10.0, 12.5, "web_fetch")


async def test_history_keeps_last_time_per_tool(api) -> None:
    await record_three(api)
    assert dict((await api.history("s1")).last_time_by_tool) == {"web_fetch": 12.5, "bash": 11.0}


async def test_sessions_are_kept_apart(api) -> None:
    await record_three(api)
    await api.record("s2", "bash", "allow", now=20.0)
    assert (await api.history("s2")).tools == {"bash": 1}


async def test_names_with_separator_characters_round_trip(api) -> None:
    await api.record("s:1", "p:3:ab", "a:b", now=1.0)
    h = await api.history("s:1")
    assert {t: dict(e) for t, e in h.tool_effects.items()} == {"p:3:ab": {"a:b": 1}}


async def test_history_snapshot_does_not_change_afterwards(api) -> None:
    await record_three(api)
    before = await api.history("s1")
    await api.record("s1", "bash", "allow", now=13.0)
    assert (before.count, before.attempts["bash"]) == (3, 1)


async def test_history_to_cel_answers_a_cel_condition(api) -> None:
    await record_three(api)
    data = (await api.history("s1")).to_cel()
    expression = 'history.tools["web_fetch"] > 0 && history.tool_effects["bash"]["deny"] == 1'
    assert cel.evaluate(expression, {"history": data}) is True


async def test_history_to_cel_of_empty_session_answers_membership(api) -> None:
    data = (await api.history("nobody")).to_cel()
    assert cel.evaluate('!("bash" in history.tools) && history.count == 0', {"history": data})


def stored_size(store: StateStore, session: str, request: pytest.FixtureRequest) -> int:
    """How many items the store keeps for a session: must not grow with the number of calls."""
    if isinstance(store, MemoryStore):
        tally = store._history[session]
        return sum(map(len, tally.by_tool.values())) + len(tally.last_time_by_tool)
    if isinstance(store, SQLiteStore):
        db = sqlite3.connect(store._path)
        try:
            return int(
                db.execute(
                    "SELECT count(*) FROM callwarden_session_tools WHERE session = ?", (session,)
                ).fetchone()[0]
            )
        finally:
            db.close()
    assert isinstance(store, RedisStore)
    cluster = request.getfixturevalue("redis_cluster") if store._link is not None else None
    return int(raw_client(store, cluster).hlen(store._history_key(session)))


async def test_history_of_2000_calls_is_a_fixed_size_summary(
        store: StateStore, request: pytest.FixtureRequest) -> None:
    """2,000 calls over 3 tools and 2 effects: stored and returned as 6 pairs, not 2,000."""
    tools, effects = ("bash", "web_fetch", "read_file"), ("allow", "deny")
    for i in range(2_000):
        store.record("long", tools[i % 3], effects[i % 2], now=float(i))
    small = stored_size(store, "long", request)
    h = await store.ahistory("long")
    assert (h.count, sum(h.attempts.values()), len(h.attempts), len(h.effects)) == (
        2_000, 2_000, 3, 2)
    assert sum(h.tools.values()) == 1_000  # the allowed half ran
    assert sum(len(e) for e in h.tool_effects.values()) == 6
    assert small <= 6 + 3 + 4  # pairs, per-tool times, scalars: nothing per call


async def test_a_history_of_some_tools_is_the_whole_history_cut_to_them(api) -> None:
    await record_three(api)
    await api.record("s1", "pay", "ask", now=13.0)
    await api.record("s1", "pay", "approved", now=14.0)
    await api.record("s1", "ünïcode:tool", "modify", now=15.0)
    whole = await api.history("s1")
    for tools in ({"web_fetch"}, {"pay", "never-called"}, {"ünïcode:tool", "bash"}, set()):
        part = await api.history("s1", tools=tools)
        kept = tools & set(whole.attempts)
        assert (part.count, part.first_time, part.last_time, part.last_tool) == (
            whole.count, whole.first_time, whole.last_time, whole.last_tool)
        assert dict(part.tools) == {t: n for t, n in whole.tools.items() if t in kept}
        assert dict(part.attempts) == {t: n for t, n in whole.attempts.items() if t in kept}
        assert {t: dict(e) for t, e in part.tool_effects.items()} == {
            t: dict(e) for t, e in whole.tool_effects.items() if t in kept}
        assert dict(part.last_time_by_tool) == {
            t: when for t, when in whole.last_time_by_tool.items() if t in kept}
        effects: dict[str, int] = {}
        for tool in kept:
            for effect, n in whole.tool_effects[tool].items():
                effects[effect] = effects.get(effect, 0) + n
        assert dict(part.effects) == effects


async def test_a_history_of_some_tools_of_an_unknown_session_is_empty(api) -> None:
    assert await api.history("nobody", tools={"bash"}) == SessionHistory("nobody")


async def test_a_history_of_one_tool_reads_what_it_needs_of_2000(store: StateStore) -> None:
    for i in range(2000):
        store.record("big", f"tool{i}", "allow", now=float(i))
    part = store.history("big", tools={"tool7", "tool1999"})
    assert dict(part.tools) == {"tool7": 1, "tool1999": 1} and part.count == 2000
    assert part.last_tool == "tool1999" and dict(part.effects) == {"allow": 2}
