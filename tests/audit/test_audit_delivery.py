"""What a caller is guaranteed when ``decision()`` returns: written (default), queued, lossy.

By default no call runs without its decision event: the event is written before ``check``
returns, whoever else is deciding, even when the process is killed right after; a full queue
or a stuck sink makes the caller wait up to the deadline and then refuses the call. Dropping
events is opt-in (``delivery="lossy"``), counted, and noted in the log itself.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from _audit_support import POLICY, Blocked, Recorder, read_jsonl

from callwarden import ConfigError, Guard
from callwarden.audit import AuditError, Auditor, JsonlSink, load_schema
from callwarden.policyfile import load_policy_text

HERE = Path(__file__).parent


def _guard(auditor: Auditor) -> Guard:
    return Guard.from_loaded(load_policy_text(POLICY, filename="policy.yaml"), audit=auditor)


class Slow:
    """A sink taking a moment per event: far slower than deciding (a remote log service)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def write(self, event: dict[str, Any]) -> None:
        time.sleep(0.001)
        self.events.append(event)


def _decide_flat_out(guard: Guard, threads: int, calls: int) -> list[str]:
    """Decides ``calls`` calls on each of ``threads`` threads; the ids of those that ran."""
    ran: list[list[str]] = [[] for _ in range(threads)]

    def work(k: int) -> None:
        for i in range(calls):
            decision = guard.check("fetch", {"url": f"https://example.com/{k}/{i}"})
            if decision.allowed:
                ran[k].append(decision.decision_id)  # the tool would run now

    workers = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)  # liveness bound only
    return [i for ids in ran for i in ids]


def test_no_call_runs_without_its_decision_event_when_threads_decide_flat_out() -> None:
    sink = Slow()
    auditor = Auditor([sink], queue_size=4, deadline=30)
    ran = _decide_flat_out(_guard(auditor), threads=4, calls=40)
    auditor.close()
    recorded = {e["decision_id"] for e in sink.events if e["type"] == "decision"}
    assert ran and [i for i in ran if i not in recorded] == []
    assert auditor.stats()["dropped"] == 0


def test_the_decision_event_is_written_before_check_returns() -> None:
    sink = Recorder()
    with Auditor([sink]) as auditor:
        decision = _guard(auditor).check("fetch", {"url": "https://example.com"})
        assert [e["decision_id"] for e in sink.events] == [decision.decision_id]


def test_the_jsonl_line_is_in_the_file_before_check_returns(tmp_path: Path) -> None:
    with Auditor([JsonlSink(tmp_path / "a.jsonl")]) as auditor:
        decision = _guard(auditor).check("fetch", {"url": "https://example.com"})
        lines = read_jsonl(tmp_path / "a.jsonl")
        assert [e["decision_id"] for e in lines] == [decision.decision_id]


async def test_adecision_is_written_before_it_returns(tmp_path: Path) -> None:
    recorder, jsonl = Recorder(), tmp_path / "a.jsonl"
    for sink in (recorder, JsonlSink(jsonl)):
        with Auditor([sink]) as auditor:
            decision = await _guard(auditor).acheck("fetch", {"url": "https://example.com"})
            written = recorder.events if sink is recorder else read_jsonl(jsonl)
            assert [e["decision_id"] for e in written] == [decision.decision_id]


def test_every_call_that_ran_is_on_record_after_kill_9(tmp_path: Path) -> None:
    log, executed = tmp_path / "audit.jsonl", tmp_path / "executed.txt"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])])}
    worker = subprocess.Popen([sys.executable, str(HERE / "_audit_worker.py"), str(log),
                               str(executed)], env=env)
    try:
        deadline = time.monotonic() + 60  # liveness bound only
        while time.monotonic() < deadline and worker.poll() is None and (
                not executed.exists() or executed.stat().st_size < 40_000):
            time.sleep(0.05)
        assert worker.poll() is None, "the worker died on its own"
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait(30)
    ran = executed.read_text().split()
    # kill -9 can land inside a write: the kernel stops a write at a page boundary for a fatal
    # signal, so the last line may be cut. Its call had not run (a call runs once its event's
    # write returned), and every line before it is whole.
    lines = log.read_text(encoding="ascii").splitlines()
    try:
        json.loads(lines[-1])
    except ValueError:
        lines.pop()
    recorded = {json.loads(line)["decision_id"] for line in lines}
    assert len(ran) > 1000
    assert [i for i in ran if i not in recorded] == []


def test_a_stuck_sink_refuses_the_call_at_the_deadline_by_default() -> None:
    sink = Blocked()
    auditor = Auditor([sink], deadline=0.05)
    decision = _guard(auditor).check("fetch", {"url": "https://example.com"})
    assert decision.effect.value == "deny" and decision.code == "audit_failed"
    assert not sink.release.is_set()
    assert auditor.stats()["refused"] == 1
    sink.release.set()
    auditor.close()


def test_a_failing_sink_is_counted_and_the_call_goes_on_by_default() -> None:
    class Failing:
        def write(self, event: dict[str, Any]) -> None:
            raise OSError("disk on fire")

    with Auditor([Failing()]) as auditor:
        decision = _guard(auditor).check("fetch", {"url": "https://example.com"})
        assert decision.allowed
        assert auditor.stats()["errors"] == 1


def test_a_full_queue_makes_a_queued_caller_wait_for_room() -> None:
    sink = Blocked()
    auditor = Auditor([sink], delivery="queued", queue_size=1, deadline=60)
    guard = _guard(Auditor([Recorder()], delivery="lossy"))
    decisions = [guard.check("fetch", {"url": f"https://example.com/{i}"}) for i in range(3)]
    auditor.decision(decisions[0])
    assert sink.entered.wait(20)  # the writer holds the first event inside the sink
    auditor.decision(decisions[1])  # fills the queue
    third = threading.Thread(target=auditor.decision, args=(decisions[2],))
    third.start()
    third.join(0.2)
    assert third.is_alive()  # waiting for room, not dropped
    sink.release.set()
    third.join(20)
    auditor.close()
    assert [e["decision_id"] for e in sink.events] == [d.decision_id for d in decisions]
    assert auditor.stats()["dropped"] == 0


def test_a_queue_full_past_the_deadline_refuses_the_call() -> None:
    sink = Blocked()
    auditor = Auditor([sink], delivery="queued", queue_size=1, deadline=0.05)
    guard = _guard(auditor)
    guard.check("fetch", {"url": "https://example.com/1"})
    assert sink.entered.wait(20)
    guard.check("fetch", {"url": "https://example.com/2"})  # fills the queue
    refused = guard.check("fetch", {"url": "https://example.com/3"})
    assert refused.code == "audit_failed" and "stayed full" in refused.reasons[0].message
    assert auditor.stats()["refused"] == 1
    sink.release.set()
    auditor.close()


def test_outcomes_wait_for_room_and_are_never_dropped() -> None:
    sink = Blocked()
    auditor = Auditor([sink], delivery="queued", queue_size=1, deadline=0.05)
    decision = _guard(Auditor([Recorder()], delivery="lossy")).check(
        "fetch", {"url": "https://example.com"})
    for _ in range(4):
        auditor.outcome(decision, "ok", 0.01)  # the queue is full past the second
    sink.release.set()
    auditor.close()
    assert [e["type"] for e in sink.events] == ["outcome"] * 4
    assert auditor.stats()["dropped"] == 0


def _flooded(queue_size: int, calls: int) -> tuple[Auditor, Blocked]:
    """A lossy auditor whose sink is stuck on the first event while ``calls`` more arrive."""
    sink = Blocked()
    auditor = Auditor([sink], delivery="lossy", queue_size=queue_size)
    decision = _guard(Auditor([Recorder()], delivery="lossy")).check(
        "fetch", {"url": "https://example.com"})
    auditor.decision(decision)
    assert sink.entered.wait(20)
    for _ in range(calls):
        auditor.decision(decision)
    sink.release.set()
    auditor.close()
    return auditor, sink


def test_lossy_delivery_counts_drops_and_notes_them_in_the_log(tmp_path: Path) -> None:
    auditor, sink = _flooded(3, 10)
    notes = [e for e in sink.events if e["type"] == "audit_dropped"]
    assert auditor.stats()["dropped"] == 7
    assert [(n["dropped"], n["total_dropped"], n["reason"]) for n in notes] == [(7, 7, "queue_full")]
    assert len(sink.events) == 4 + 1
    jsonschema.validate(json.loads(json.dumps(notes[0])), load_schema())


def test_required_audit_needs_written_delivery(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="written"):
        Auditor([Recorder()], required=True, delivery="lossy")
    with pytest.raises(ConfigError) as info:
        Auditor.from_config({"required": True, "delivery": "queued",
                             "sinks": [{"stdout": {}}]}, base_dir=tmp_path)
    assert info.value.path == ("delivery",)  # type: ignore[attr-defined]


@pytest.mark.parametrize("delivery", ["written", "queued", "lossy"])
def test_delivery_is_read_from_the_audit_section(tmp_path: Path, delivery: str) -> None:
    auditor = Auditor.from_config({"delivery": delivery, "sinks": [{"jsonl": "a.jsonl"}]},
                                  base_dir=tmp_path)
    assert auditor.delivery == delivery and auditor.stats()["delivery"] == delivery
    auditor.close()


def test_an_unknown_delivery_is_a_config_error_with_its_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="written, queued, lossy") as info:
        Auditor.from_config({"delivery": "drop", "sinks": [{"stdout": {}}]}, base_dir=tmp_path)
    assert info.value.path == ("delivery",)  # type: ignore[attr-defined]


def test_a_jsonl_sink_can_be_written_from_the_auditors_thread(tmp_path: Path) -> None:
    auditor = Auditor.from_config([{"jsonl": "a.jsonl", "inline": False}], base_dir=tmp_path)
    assert auditor.sinks[0].inline is False
    decision = _guard(auditor).check("fetch", {"url": "https://example.com"})
    assert [e["decision_id"] for e in read_jsonl(tmp_path / "a.jsonl")] == [decision.decision_id]
    auditor.close()


def test_concurrent_callers_each_find_their_own_event_written(tmp_path: Path) -> None:
    auditor = Auditor([JsonlSink(tmp_path / "a.jsonl")], deadline=30)
    ran = _decide_flat_out(_guard(auditor), threads=4, calls=500)
    auditor.close()
    lines = read_jsonl(tmp_path / "a.jsonl")
    assert sorted(e["decision_id"] for e in lines) == sorted(ran)
    assert auditor.stats()["written"] == 4 * 500


async def test_async_callers_wait_for_their_write_and_keep_the_loop_running(
        tmp_path: Path) -> None:
    auditor = Auditor([JsonlSink(tmp_path / "a.jsonl")], deadline=30)
    guard = _guard(auditor)
    decisions = await asyncio.gather(*(guard.acheck("fetch", {"url": f"https://e.com/{i}"})
                                       for i in range(50)))
    recorded = {e["decision_id"] for e in read_jsonl(tmp_path / "a.jsonl")}
    assert {d.decision_id for d in decisions} <= recorded
    auditor.close()


def test_async_callers_on_a_stuck_sink_are_refused_at_the_deadline() -> None:
    sink = Blocked()
    auditor = Auditor([sink], deadline=0.05)
    guard = _guard(auditor)

    async def decide() -> Any:
        return await guard.acheck("fetch", {"url": "https://example.com"})

    decision = asyncio.run(decide())
    assert decision.code == "audit_failed"
    sink.release.set()
    auditor.close()


def test_a_refused_decision_raises_audit_error_from_the_auditor() -> None:
    sink = Blocked()
    auditor = Auditor([sink], deadline=0.05)
    decision = _guard(Auditor([Recorder()], delivery="lossy")).check(
        "fetch", {"url": "https://example.com"})
    with pytest.raises(AuditError, match="within 50 ms"):
        auditor.decision(decision)
    sink.release.set()
    auditor.close()


def test_a_policy_file_chooses_the_delivery(tmp_path: Path) -> None:
    text = POLICY + "audit:\n  delivery: lossy\n  sinks: [{jsonl: audit.jsonl}]\n"
    guard = Guard.from_yaml(text, base_dir=tmp_path, filename="policy.yaml")
    assert guard.auditor.delivery == "lossy"
    guard.close()
    default = Guard.from_yaml(POLICY + "audit: [{jsonl: audit.jsonl}]\n", base_dir=tmp_path)
    assert default.auditor.delivery == "written" and default.auditor.deadline == 1.0
    default.close()


def test_the_summary_says_how_many_events_a_lossy_log_is_missing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from callwarden.cli import main
    from callwarden.review import summarize

    _, sink = _flooded(2, 6)
    log = tmp_path / "audit.jsonl"
    log.write_text("".join(json.dumps(e) + "\n" for e in sink.events))
    summary = summarize(log)
    assert (summary.decisions, summary.dropped) == (3, 4)
    assert summary.to_dict()["dropped"] == 4
    assert main(["audit", "summary", str(log)]) == 0
    assert "warning: 4 events were dropped (delivery: lossy)" in capsys.readouterr().out
