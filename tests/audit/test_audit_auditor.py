"""The Auditor: delivery to sinks, failing and slow sinks, drops, required mode, config."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from _audit_support import CALLS, Blocked, Crashing, Recorder, read_jsonl

from callwarden import ConfigError, Guard
from callwarden.audit import (
    AuditError,
    Auditor,
    CallableSink,
    JsonlSink,
    Redactor,
    SQLiteSink,
    StdoutSink,
)


def _decide_all(guard: Guard, auditor: Auditor) -> list[Any]:
    decisions = []
    for tool, args, session in CALLS:
        decision = guard.check(tool, args, session=session)
        auditor.decision(decision)
        decisions.append(decision)
    return decisions


def test_every_sink_receives_every_event_in_order(guard: Guard) -> None:
    first, second = Recorder(), Recorder()
    with Auditor([first, second]) as auditor:
        decisions = _decide_all(guard, auditor)
        auditor.outcome(decisions[0], "ok", 0.01)
        assert auditor.flush()
    ids = [d.decision_id for d in decisions] + [decisions[0].decision_id]
    assert [e["decision_id"] for e in first.events] == ids
    assert first.events == second.events
    assert first.events[-1]["type"] == "outcome"


def test_stats_count_written_events(guard: Guard) -> None:
    with Auditor([Recorder()]) as auditor:
        _decide_all(guard, auditor)
        auditor.flush()
        assert auditor.stats()["written"] == len(CALLS)


def test_a_crashing_sink_does_not_change_the_decision_and_is_counted(guard: Guard) -> None:
    recorder = Recorder()
    with Auditor([Crashing(), recorder]) as auditor:
        decision = guard.check("deploy", {"env": "prod"})
        auditor.decision(decision)  # does not raise
        auditor.flush()
        stats = auditor.stats()
    assert decision.effect.value == "deny"
    assert stats["errors"] == 1 and stats["written"] == 0
    assert "disk on fire" in stats["last_error"]
    assert len(recorder.events) == 1  # the healthy sink still got it


def test_a_crashing_sink_raises_audit_error_when_audit_is_required(guard: Guard) -> None:
    with Auditor([Crashing()], required=True) as auditor, \
            pytest.raises(AuditError, match="disk on fire"):
        auditor.decision(guard.check("bash", {"command": "ls"}))


def test_required_audit_writes_before_returning(guard: Guard) -> None:
    recorder = Recorder()
    with Auditor([recorder], required=True) as auditor:
        decision = guard.check("bash", {"command": "ls"})
        auditor.decision(decision)
        assert [e["decision_id"] for e in recorder.events] == [decision.decision_id]


def test_a_slow_sink_does_not_block_a_lossy_caller(guard: Guard) -> None:
    sink = Blocked()
    auditor = Auditor([sink], delivery="lossy", deadline=0.05)
    returned = threading.Event()

    def call() -> None:
        for tool, args, session in CALLS:
            auditor.decision(guard.check(tool, args, session=session))
        returned.set()

    worker = threading.Thread(target=call)
    worker.start()
    worker.join(20)  # liveness bound only: the sink stays blocked until released below
    assert returned.is_set() and not sink.release.is_set()
    sink.release.set()
    auditor.close()
    assert len(sink.events) == len(CALLS)


def test_a_slow_sink_fails_closed_at_the_deadline_when_required(guard: Guard) -> None:
    sink = Blocked()
    auditor = Auditor([sink], required=True, deadline=0.05)
    with pytest.raises(AuditError, match="within 50 ms"):
        auditor.decision(guard.check("bash", {"command": "ls"}))
    assert not sink.release.is_set()  # it gave up while the sink was still stuck
    sink.release.set()
    auditor.close()


def test_a_full_lossy_queue_drops_and_counts_events(guard: Guard) -> None:
    sink = Blocked()
    auditor = Auditor([sink], queue_size=3, delivery="lossy")
    decision = guard.check("bash", {"command": "ls"})
    auditor.decision(decision)
    assert sink.entered.wait(20)  # the writer holds one event inside the sink
    for _ in range(10):
        auditor.decision(decision)
    assert auditor.stats()["dropped"] == 7
    sink.release.set()
    auditor.close()
    stats = auditor.stats()
    assert stats["written"] + stats["dropped"] == 11


def test_decisions_after_close_are_refused_by_default(guard: Guard) -> None:
    auditor = Auditor([Recorder()])
    auditor.close()
    with pytest.raises(AuditError, match="closed"):
        auditor.decision(guard.check("bash", {"command": "ls"}))


def test_events_after_close_are_dropped_not_raised_when_lossy(guard: Guard) -> None:
    auditor = Auditor([Recorder()], delivery="lossy")
    auditor.close()
    auditor.decision(guard.check("bash", {"command": "ls"}))
    assert auditor.stats()["dropped"] == 1


def test_outcome_with_unknown_status_raises_value_error(guard: Guard) -> None:
    with Auditor([Recorder()]) as auditor, pytest.raises(ValueError):
        auditor.outcome(guard.check("bash", {"command": "ls"}), "done", 0.1)


async def test_adecision_records_without_blocking(guard: Guard) -> None:
    recorder = Recorder()
    with Auditor([recorder]) as auditor:
        await auditor.adecision(guard.check("bash", {"command": "ls"}))
        await auditor.aoutcome(guard.check("bash", {"command": "ls"}), "ok", 0.1)
        auditor.flush()
    assert [e["type"] for e in recorder.events] == ["decision", "outcome"]


async def test_required_adecision_keeps_the_loop_running_and_fails_closed(guard: Guard) -> None:
    sink = Blocked()
    auditor = Auditor([sink], required=True, deadline=0.1)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    with pytest.raises(AuditError):
        await auditor.adecision(guard.check("bash", {"command": "ls"}))
    task.cancel()
    assert ticks > 1
    sink.release.set()
    auditor.close()


async def test_required_adecision_writes_before_returning(guard: Guard) -> None:
    recorder = Recorder()
    with Auditor([recorder], required=True) as auditor:
        await auditor.adecision(guard.check("bash", {"command": "ls"}))
        assert len(recorder.events) == 1


def test_callable_sink_with_a_sync_function(guard: Guard) -> None:
    seen: list[str] = []
    with Auditor([CallableSink(lambda e: seen.append(e["tool"]))]) as auditor:
        auditor.decision(guard.check("bash", {"command": "ls"}))
    assert seen == ["bash"]


def test_callable_sink_with_an_async_function(guard: Guard) -> None:
    seen: list[str] = []

    async def ship(event: dict[str, Any]) -> None:
        await asyncio.sleep(0)
        seen.append(event["tool"])

    with Auditor([CallableSink(ship)]) as auditor:
        auditor.decision(guard.check("bash", {"command": "ls"}))
    assert seen == ["bash"]


def test_stdout_sink_prints_one_json_line(guard: Guard, capsys: pytest.CaptureFixture[str]) -> None:
    with Auditor([StdoutSink()]) as auditor:
        auditor.decision(guard.check("bash", {"command": "ls"}))
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and '"tool":"bash"' in lines[0]


def test_sqlite_sink_stores_queryable_rows(guard: Guard, tmp_path: Path) -> None:
    import sqlite3

    with Auditor([SQLiteSink(tmp_path / "audit.db")]) as auditor:
        _decide_all(guard, auditor)
    conn = sqlite3.connect(tmp_path / "audit.db")
    rows = conn.execute("SELECT effect, count(*) FROM audit_events GROUP BY effect").fetchall()
    conn.close()
    assert dict(rows) == {"allow": 7, "deny": 2, "modify": 1}


def test_a_non_sink_is_refused() -> None:
    with pytest.raises(TypeError, match="write"):
        Auditor([object()])


# -- configuration ------------------------------------------------------------------------


def test_from_config_list_of_sinks(tmp_path: Path, guard: Guard) -> None:
    auditor = Auditor.from_config(
        [{"jsonl": "logs/a.jsonl", "rotate_bytes": "1MB", "fsync": True}, {"stdout": {}},
         {"sqlite": "a.db"}], base_dir=tmp_path)
    jsonl = auditor.sinks[0]
    assert isinstance(jsonl, JsonlSink)
    assert (jsonl.path, jsonl.rotate_bytes, jsonl.fsync) == (tmp_path / "logs/a.jsonl",
                                                             1_000_000, True)
    assert isinstance(auditor.sinks[1], StdoutSink) and isinstance(auditor.sinks[2], SQLiteSink)
    assert not auditor.required
    auditor.decision(guard.check("bash", {"command": "ls"}))
    auditor.close()
    assert len(read_jsonl(tmp_path / "logs/a.jsonl")) == 1


def test_from_config_mapping_with_options(tmp_path: Path) -> None:
    (tmp_path / "hooks.py").write_text(
        "events = []\n"
        "def ship(event):\n    events.append(event)\n"
        "def scrub(path, text):\n    return None\n")
    auditor = Auditor.from_config({
        "required": True, "deadline": "50ms", "queue_size": 10,
        "redact": {"keys": ["ssn"], "patterns": {"ticket": "TCK-[0-9]+"},
                   "callback": "hooks.py:scrub", "max_bytes": "16KiB"},
        "sinks": [{"jsonl": {"path": "a.jsonl", "rotate_interval": "1d"}},
                  {"callable": "hooks.py:ship"}],
    }, base_dir=tmp_path)
    assert auditor.required and auditor.deadline == 0.05 and auditor.queue_size == 10
    assert auditor.sinks[0].rotate_interval == 86400
    assert isinstance(auditor.sinks[1], CallableSink)
    assert auditor.redactor.max_bytes == 16384 and auditor.redactor.sensitive_key("user_SSN")
    auditor.close()


@pytest.mark.parametrize(("config", "path", "text"), [
    ("logs/a.jsonl", (), "list of sinks"),
    ([], (), "non-empty list"),
    ({"sinks": []}, ("sinks",), "non-empty list"),
    ([{"jsonl": "a.jsonl", "rotate_bytes": "lots"}], (0, "rotate_bytes"), "not a size"),
    ([{"jsonl": "a.jsonl", "fsync": "yes"}], (0, "fsync"), "true or false"),
    ([{"jsonl": "a.jsonl", "rotate_byte": 10}], (0, "rotate_byte"), "unknown key"),
    ([{"jsonl": None}], (0, "jsonl"), "needs a file path"),
    ([{"kafka": "x"}], (0, "kafka"), "unknown key"),
    ([{"jsonl": "a", "stdout": {}}], (0,), "exactly one"),
    ([{"callable": "no_such_module_xyz:fn"}], (0, "callable"), "No module"),
    ({"sinks": [{"stdout": {}}], "required": "yes"}, ("required",), "true or false"),
    ({"sinks": [{"stdout": {}}], "deadline": "soon"}, ("deadline",), "duration"),
    ({"sinks": [{"stdout": {}}], "redact": {"detectors": ["awz"]}}, ("redact", "detectors"),
     "unknown detector"),
    ({"sinks": [{"stdout": {}}], "redact": {"patterns": {"p": "(a+)+"}}},
     ("redact", "patterns"), "nests quantifiers"),
    ({"sinks": [{"stdout": {}}], "retention": 3}, ("retention",), "unknown key"),
])
def test_bad_config_raises_config_error_with_its_key(tmp_path: Path, config: Any,
                                                     path: tuple[Any, ...], text: str) -> None:
    with pytest.raises(ConfigError, match=text) as info:
        Auditor.from_config(config, base_dir=tmp_path)
    assert info.value.path == path  # type: ignore[attr-defined]


def test_config_error_suggests_the_closest_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        Auditor.from_config([{"jsonl": "a.jsonl", "fsnyc": True}], base_dir=tmp_path)
    assert info.value.hint == "did you mean 'fsync'?"


def test_default_redactor_is_on() -> None:
    assert Auditor([Recorder()]).redactor.sensitive_key("Authorization")
    assert isinstance(Auditor([Recorder()], redactor=Redactor.off()).redactor, Redactor)
