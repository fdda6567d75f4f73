"""``Auditor``: builds events and hands them to sinks, in order, never losing one silently.

What a caller is guaranteed depends on ``delivery``:

* ``"written"`` (default): ``decision()`` returns once its event has been handed to every
  sink (the JSONL sink: one ``os.write``, in the kernel's page cache), so the event of every
  call that runs is on record before the tool runs, and survives the process being killed
  (``kill -9`` included; a power loss too when the sink has ``fsync``). Callers deciding at
  the same time share the write (group commit: whoever writes takes everything queued,
  builds it with one screening pass and writes it at once). When every sink is a local
  append (``inline``: the JSONL sink), the caller writes itself, holding the commit lock,
  with no thread switch; otherwise the writer thread writes while the caller waits. When
  no confirmation comes within ``deadline`` (a stuck sink, a full queue, another caller's
  write that does not return) ``decision()`` raises ``AuditError`` and the guard refuses
  the call (``audit_failed``). A sink that raises is counted and logged, and the call goes
  on. (An inline write that itself does not return, a hung network filesystem, holds its
  own caller: ``JsonlSink(inline=False)`` trades speed for a deadline on that too.)
* ``"queued"``: ``decision()`` returns once its event is queued. A full queue makes the
  caller wait for room up to ``deadline``, then ``AuditError`` (the call is refused).
  Nothing is ever dropped while the process lives; a crash loses what was still queued.
* ``"lossy"`` (opt-in): ``decision()`` never waits. A full queue drops the event; drops are
  counted (``stats()["dropped"]``), logged, and written into the log itself as an
  ``audit_dropped`` event (at most once a second while drops go on, and on flush or close)
  saying how many events are missing and from when to when.

``required=True`` (delivery ``written`` only) also turns a sink failure into ``AuditError``,
and writes outcome and approval events before returning too. Without it, outcome and
approval events are queued (waiting for room up to ``deadline``, never dropped unless
lossy) and never raise. ``fsync`` is the sink's option, never implied: it costs one disk
flush per group commit.

Guaranteed, by delivery, for the decision event of a call that ``check`` let run:

=========  ==================  ==================  ======================================
delivery   process lives on    process killed      power lost
=========  ==================  ==================  ======================================
written    in the log          in the log          in the log with ``fsync``, else maybe not
queued     in the log          maybe not (queued)  maybe not
lossy      counted if dropped  maybe not           maybe not
=========  ==================  ==================  ======================================

The writer thread is a daemon started on first use (and again in a forked child); pending
events are flushed at interpreter exit.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from callwarden._decision import Decision
from callwarden.audit._config import DELIVERIES, AuditSettings, build_sink, parse_audit_config
from callwarden.audit._events import (
    OUTCOME_STATUSES,
    AuditEvent,
    approval_event,
    decision_event,
    decision_line,
    decision_lines,
    dropped_event,
    outcome_event,
    outcome_line,
)
from callwarden.audit._handoff import AsyncWaiter, Failures, Flush, Mark, Waiter
from callwarden.audit._redact import Redactor
from callwarden.exceptions import AuditError

__all__ = ["DELIVERIES", "AuditError", "Auditor"]

log = logging.getLogger("callwarden.audit")

_STOP = object()
_BATCH = 256  # fewer queued than this: a queued or lossy writer lingers for more
_MAX_BATCH = 1024
# With fewer events than a batch queued, a queued or lossy writer waits this long for more:
# one wake-up, one screening pass and one write then serve a batch. Never when a caller
# waits for its write (``written``): the batch is whatever queued while the last one was
# being written, which is what keeps the latency bounded.
_LINGER = 0.002
_NOTE_EVERY = 1.0  # seconds between two audit_dropped events while drops go on
_ROOM_POLL = 0.001  # how often an async caller looks for room in a full queue
_RETRY = 0.005  # a caller waiting for another's write looks again this often, at the least

# A queued item: (decision, None, waiter) for a decision event; (decision, (status, duration,
# error, time), waiter) for an outcome; (None, built event or line, waiter) for anything built
# already. ``waiter`` (a Waiter, Mark or AsyncWaiter) is None unless the caller waits.
Item = tuple[Decision | None, Any, Any]

class Auditor:
    """Records every decision and outcome to one or more sinks.

    Args:
        sinks: where events go (``JsonlSink``, ``StdoutSink``, ``SQLiteSink``, ``OTelSink``,
            ``CallableSink`` or any object with ``write(event)``).
        redactor: how payloads are redacted and bounded (default: every secret detector and
            the sensitive key names, 4 KiB strings, 64 KiB events).
        required: fail closed on sink failures too: every event is written before the call
            returns, and a failing sink raises ``AuditError``.
        delivery: ``"written"`` (default), ``"queued"`` or ``"lossy"``: what ``decision()``
            guarantees when it returns (see the module docstring).
        queue_size: events buffered for the writer thread; when full, callers wait for room
            (``lossy``: new events are dropped and counted).
        deadline: seconds a caller may wait for its write or for room in the queue (default
            1, as the decision's own); past it ``decision()`` raises ``AuditError``.

    Raises:
        TypeError: a sink has no ``write`` method.
        ValueError: a bad ``delivery``, ``queue_size`` or ``deadline``, or ``required``
            with a delivery other than ``written``.
    """

    def __init__(self, sinks: Sequence[Any], *, redactor: Redactor | None = None,
                 required: bool = False, delivery: str = "written", queue_size: int = 10_000,
                 deadline: float = 1.0) -> None:
        for sink in sinks:
            if not callable(getattr(sink, "write", None)):
                raise TypeError(f"{sink!r} is not a sink: it needs a write(event) method")
        if delivery not in DELIVERIES:
            raise ValueError(f"delivery must be one of {', '.join(DELIVERIES)}, not {delivery!r}")
        if required and delivery != "written":
            raise ValueError("a required audit is written before the call runs: "
                             f"delivery must be 'written', not {delivery!r}")
        if queue_size < 1:
            raise ValueError("queue_size must be at least 1")
        if deadline <= 0:
            raise ValueError("deadline must be positive")
        self.sinks = tuple(sinks)
        # Lines only when every sink takes them: then no event dict is ever built.
        self._lines = all(callable(getattr(s, "write_lines", None)) for s in self.sinks)
        self._batch_writers = tuple(
            (s, getattr(s, "write_lines" if self._lines else "write_many", None))
            for s in self.sinks)
        # Callers commit in their own thread only to sinks that say a write returns at once.
        self._inline = delivery == "written" and bool(self.sinks) and all(
            getattr(s, "inline", False) is True for s in self.sinks)
        # Sinks that append a line from any thread without a lock (JSONL files): then a
        # caller writes its own event with one os.write and takes no lock at all, so callers
        # in many threads never queue behind one another's write.
        appends = [getattr(s, "append_line", None) for s in self.sinks]
        self._direct: tuple[Callable[[str], None], ...] | None = (
            tuple(a for a in appends if a is not None)
            if self._inline and self._lines and all(appends) else None)
        self.redactor = redactor or Redactor()
        self.required = required
        self.delivery = delivery
        self._written_mode = delivery == "written"
        self._lossy = delivery == "lossy"
        self.queue_size = queue_size
        self.deadline = deadline
        self._lock = threading.Lock()
        self._commit_lock = threading.Lock()  # held by whoever takes items off the queue
        self._reset()
        self._closed = False
        self._written = 0
        self._dropped = 0
        self._refused = 0
        self._errors = 0
        self._last_error: str | None = None
        # Drops not yet written down as an audit_dropped event: count, first and last time.
        self._unnoted = 0
        self._drop_span = (0.0, 0.0)
        self._noted_at = 0.0
        _LIVE.add(self)

    def _reset(self) -> None:
        # A deque and a wake-up event rather than a queue.Queue: appending costs no lock, and
        # the writer is only signalled when it is idle, not once per event.
        self._pending: collections.deque[Any] = collections.deque()
        self._wake = threading.Event()
        self._room = threading.Event()  # set by the writer when it has taken a batch
        self._idle = False
        self._thread: threading.Thread | None = None

    @classmethod
    def from_config(cls, config: Any, *, base_dir: Path) -> Auditor:
        """Builds an auditor from a policy file's ``audit:`` section.

        Raises:
            ConfigError: naming the offending key (``.path`` holds it as a tuple).
        """
        return cls.from_settings(parse_audit_config(config, base_dir=base_dir))

    @classmethod
    def from_settings(cls, settings: AuditSettings) -> Auditor:
        """Opens the sinks of validated ``AuditSettings`` (a policy's parsed ``audit:``).

        Raises:
            ConfigError: a sink target is neither a function nor a sink.
            OSError: a sink's file or database cannot be created.
        """
        sinks = [build_sink(spec) for spec in settings.sinks]
        return cls(sinks, redactor=settings.redactor, required=settings.required,
                   delivery=settings.delivery, queue_size=settings.queue_size,
                   deadline=settings.deadline)

    def __repr__(self) -> str:
        return (f"Auditor({list(self.sinks)!r}, required={self.required}, "
                f"delivery={self.delivery!r})")

    # -- recording --------------------------------------------------------------------------

    def decision(self, decision: Decision) -> None:
        """Records a decision (before the tool runs).

        Raises:
            AuditError: the event was not written (``written``) or queued (``queued``)
                within ``deadline``, the auditor is closed, or (``required``) a sink failed.
        """
        if self._inline:
            self._commit_inline(decision, None)
            return
        if self._written_mode:
            self._commit((decision, None))
            return
        if self._lossy:
            pending = self._pending  # _offer, inlined: this is every lossy call's cost
            if self._thread is None or len(pending) >= self.queue_size:
                self._offer((decision, None, None))
                return
            pending.append((decision, None, None))
            if self._idle:
                self._wake.set()
            return
        self._admit((decision, None, None), refuse=True)

    def outcome(self, decision: Decision, status: str, duration: float,
                error: str | None = None, *, output_rule: str | None = None,
                output_source: str | None = None) -> None:
        """Records what happened after the tool ran.

        Args:
            decision: the decision the tool ran under.
            status: ``ok``, ``error``, ``output_blocked`` or ``output_modified``.
            duration: how long the tool ran, in seconds.
            error: the error's text when it raised.
            output_rule, output_source: the output rule that blocked or rewrote the result
                (or halted on it), and where it is written.

        Raises:
            ValueError: for an unknown status (a programming error, raised in every mode).
            AuditError: only when ``required``.
        """
        if status not in OUTCOME_STATUSES:
            raise ValueError(f"status must be one of {', '.join(OUTCOME_STATUSES)}, not {status!r}")
        self._record(decision, (status, duration, error, time.time(), output_rule, output_source))

    async def adecision(self, decision: Decision) -> None:
        """Async twin of ``decision``: waiting is awaited, the loop keeps running."""
        if self._written_mode:
            await self._acommit((decision, None))
        elif self._lossy:
            self._offer((decision, None, None))
        else:
            await self._aadmit((decision, None, None), refuse=True)

    async def aoutcome(self, decision: Decision, status: str, duration: float,
                       error: str | None = None, *, output_rule: str | None = None,
                       output_source: str | None = None) -> None:
        """Async twin of ``outcome``."""
        if status not in OUTCOME_STATUSES:
            raise ValueError(f"status must be one of {', '.join(OUTCOME_STATUSES)}, not {status!r}")
        extra = (status, duration, error, time.time(), output_rule, output_source)
        if self.required:
            await self._acommit((decision, extra))
        elif self._lossy:
            self._offer((decision, extra, None))
        else:
            await self._aadmit((decision, extra, None), refuse=False)

    def approval(self, action: str, record: Any, *, decision_id: str | None = None,
                 detail: str | None = None) -> None:
        """Records a transition of an approval request or grant (see ``approval_event``).

        Raises:
            ValueError: for an unknown action.
            AuditError: only when ``required``.
        """
        # Built here, not on the writer: transitions are rare, and the record is final now.
        event = approval_event(action, record, self.redactor, decision_id=decision_id,
                               detail=detail)
        self._record(None, event)

    def _record(self, decision: Decision | None, extra: Any) -> None:
        """An outcome or approval: written when required, else queued and never raising;
        appended by its caller when callers write their own lines (it then follows the
        caller's decision in the log, as it follows it in time)."""
        if self._direct is not None and not self._pending and not self._closed \
                and self._thread is not None:
            self._append_direct(self._build_one(decision, extra), raising=self.required)
        elif self.required:
            self._commit((decision, extra))
        elif self._lossy:
            self._offer((decision, extra, None))
        else:
            self._admit((decision, extra, None), refuse=False)

    # -- handing over -----------------------------------------------------------------------

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                thread = threading.Thread(target=self._run, name="callwarden-audit", daemon=True)
                thread.start()
                self._thread = thread

    def _push(self, item: Any) -> None:
        self._pending.append(item)
        if self._idle and (type(item) is not tuple or type(item[2]) is not Mark):
            self._wake.set()  # an inline commit is written by its own caller

    def _offer(self, item: Item) -> None:
        """Lossy: queues the item, or drops and counts it when the queue is full."""
        if self._closed:
            self._drop("closed")
            return
        if self._thread is None:
            self._start()
        if len(self._pending) >= self.queue_size:
            self._drop("queue_full")
            return
        self._push(item)

    def _admit(self, item: Item, *, refuse: bool, started: float | None = None) -> None:
        """Queues the item, waiting for room up to the deadline.

        Past it, raises ``AuditError`` when ``refuse`` (a decision: its call must not run),
        else queues it anyway: an outcome's call ran already, and it must not be lost.
        """
        if self._closed:
            if refuse:
                raise AuditError("the audit log is closed: no event can be written")
            self._drop("closed")
            return
        if self._thread is None:
            self._start()
        if len(self._pending) >= self.queue_size:
            started = time.perf_counter() if started is None else started
            if not self._wait_for_room(started) and refuse:
                with self._lock:
                    self._refused += 1
                raise AuditError(self._full_text())
        self._push(item)

    def _wait_for_room(self, started: float) -> bool:
        pending, room, size = self._pending, self._room, self.queue_size
        while len(pending) >= size:
            remaining = self.deadline - (time.perf_counter() - started)
            if remaining <= 0:
                return False
            room.clear()
            if len(pending) < size:  # the writer took a batch between the check and clear
                break
            room.wait(remaining)
        return True

    async def _aadmit(self, item: Item, *, refuse: bool,
                      started: float | None = None) -> None:
        if not self._closed and len(self._pending) >= self.queue_size:
            started = time.perf_counter() if started is None else started
            # Polled: the writer thread cannot wake a loop cheaply, and a full queue is rare.
            while (len(self._pending) >= self.queue_size
                   and time.perf_counter() - started < self.deadline):
                await asyncio.sleep(_ROOM_POLL)
        self._admit(item, refuse=refuse, started=started)

    def _commit(self, entry: tuple[Decision | None, Any]) -> None:
        """Queues the event and returns once it is written (group commit)."""
        if self._inline:
            self._commit_inline(*entry)
            return
        started = time.perf_counter()
        waiter = Waiter()
        self._admit((*entry, waiter), refuse=True, started=started)
        if not waiter.wait(self.deadline - (time.perf_counter() - started)):
            self._give_up(waiter)
        self._check(waiter)

    def _commit_inline(self, decision: Decision | None, extra: Any,
                       started: float | None = None) -> None:
        """Group commit in the callers' threads: the caller that gets the commit lock writes
        everything queued, its own event and those of callers waiting for the lock, who
        then find theirs written. No thread switch when nobody else is deciding."""
        # Built before the lock is taken: the lock covers the write only, and concurrent
        # callers build while one of them writes.
        built = self._build_one(decision, extra)
        if self._direct is not None and not self._closed and self._thread is not None \
                and not self._pending:  # what was queued before is written first, in order
            self._append_direct(built)
            return
        lock = self._commit_lock
        pending = self._pending
        if not pending and self._thread is not None and not self._closed \
                and lock.acquire(False):
            try:  # alone, the common case: nothing queued before it, nobody to tell
                shared, each = self._write([built])
            finally:
                lock.release()
            if pending:  # queued while this was written: their callers may write now
                self._pass_on()
            if self.required and (shared or each):
                self._check_failures(shared or each[0])
            return
        started = time.perf_counter() if started is None else started
        item = (None, built, Mark())
        mark = item[2]
        if self._closed or self._thread is None or len(pending) >= self.queue_size:
            self._admit(item, refuse=True, started=started)
        else:
            pending.append(item)
        # The lock is only ever taken without waiting, by a thread that is running: a thread
        # woken from a wait on it would hold it while it waits for the interpreter lock,
        # and every other caller would queue behind it.
        while True:
            if lock.acquire(False):
                try:
                    while not mark.written and pending and self._drain(_MAX_BATCH):
                        pass
                finally:
                    lock.release()
                self._pass_on()
                if mark.written:
                    break
                if self._closed:  # stopped at the stop marker
                    raise AuditError("the audit log is closed: no event can be written")
            remaining = self.deadline - (time.perf_counter() - started)
            if remaining <= 0:
                self._give_up(mark)
            # Whoever writes next writes this event and wakes us, or wakes us to write.
            if mark.wait(min(remaining, _RETRY)) and mark.written:
                break
        if mark.failures and self.required:
            self._check(mark)

    def _append_direct(self, line: str, *, raising: bool | None = None) -> None:
        """Appends the caller's own line to every sink, lock-free (see ``_direct``); a sink
        that fails raises ``AuditError`` when required (``raising``)."""
        failures: Failures = []
        for sink, append in zip(self.sinks, self._direct or (), strict=True):
            try:
                append(line)
            except Exception as e:
                failures.append((sink, e))
                self._failed(sink, e)
        if not failures:
            with self._lock:
                self._written += 1
        elif self.required if raising is None else raising:
            self._check_failures(failures)

    def _pass_on(self) -> None:
        """After a write: the caller of the next queued event writes it (or the writer
        thread, for an event nobody waits on)."""
        try:
            head = self._pending[0]
        except IndexError:
            return
        if type(head) is tuple and type(head[2]) is Mark:
            head[2].wake()
        elif self._idle:
            self._wake.set()

    async def _acommit(self, entry: tuple[Decision | None, Any]) -> None:
        if self._inline and not self._commit_lock.locked() \
                and len(self._pending) < self.queue_size:
            # A local append takes microseconds: done here, like any other quick call.
            self._commit_inline(*entry)
            return
        # Someone is writing: it, or the writer thread, writes this one while the loop runs.
        started = time.perf_counter()
        waiter = AsyncWaiter(asyncio.get_running_loop())
        await self._aadmit((*entry, waiter), refuse=True, started=started)
        try:
            await asyncio.wait_for(asyncio.shield(waiter.future),
                                   max(self.deadline - (time.perf_counter() - started), 0.0))
        except TimeoutError:
            self._give_up(waiter)
        self._check(waiter)

    def _give_up(self, waiter: Any) -> None:
        # The writer skips a cancelled event. One it took already may still be written: its
        # line then records a call that was refused, never the other way round.
        waiter.cancelled = True
        with self._lock:
            self._refused += 1
        raise AuditError(self._timeout_text())

    def _check(self, waiter: Any) -> None:
        if waiter.failures and self.required:
            self._check_failures(waiter.failures)

    @staticmethod
    def _check_failures(failures: Failures) -> None:
        sink, error = failures[0]
        raise AuditError(f"audit sink {sink!r} failed: {type(error).__name__}: {error}") \
            from error

    def _timeout_text(self) -> str:
        return (f"no audit sink confirmed the event within {self.deadline * 1000:.0f} ms "
                f"(sinks: {', '.join(repr(s) for s in self.sinks)})")

    def _full_text(self) -> str:
        return (f"the audit queue stayed full ({self.queue_size} events) for "
                f"{self.deadline * 1000:.0f} ms: a sink is stuck or too slow")

    def _drop(self, reason: str) -> None:
        now = time.time()
        with self._lock:
            self._dropped += 1
            dropped = self._dropped
            if reason == "queue_full":  # after close nothing can be written, a note neither
                self._drop_span = (self._drop_span[0] if self._unnoted else now, now)
                self._unnoted += 1
        if dropped == 1 or dropped % 10_000 == 0:
            log.warning("callwarden audit: %d event(s) dropped (%s)", dropped,
                        "queue full" if reason == "queue_full" else "auditor closed")

    # -- the writer thread ------------------------------------------------------------------

    def _run(self) -> None:
        pending, wake = self._pending, self._wake
        # Nobody waits on a queued, lossy or inline writer thread: it may let a batch gather.
        linger = not self._written_mode or self._inline
        lock = self._commit_lock
        while True:
            if not pending:
                if self._unnoted and lock.acquire(False):
                    try:
                        self._note_drops(force=False)
                    finally:
                        lock.release()
                self._idle = True
                if not pending:  # checked again after saying so: an append now wakes us
                    wake.wait(1.0)
                wake.clear()
                self._idle = False
                continue
            if linger and len(pending) < _BATCH and self._lingers(pending):
                time.sleep(_LINGER)
            # Never a blocking wait on the lock (see _commit_inline): a caller holds it only
            # while it writes, and may well write what is queued here too.
            if not lock.acquire(False):
                time.sleep(_RETRY / 10)
                continue
            try:
                if not self._drain(_MAX_BATCH):
                    pending.popleft()  # the stop marker
                    self._note_drops(force=True)
                    return
                if self._unnoted:
                    self._note_drops(force=False)
            finally:
                lock.release()
            self._pass_on()

    def _drain(self, limit: int) -> bool:
        """Takes up to ``limit`` queued items off the queue and writes them, with the commit
        lock held: everything queued goes out together, one write per sink, still in order,
        still whole lines, and everyone waiting on one of them is told at once.

        Returns:
            False when it stopped at the stop marker (left at the head of the queue).
        """
        pending = self._pending
        batch: list[Item] = []
        take, add = pending.popleft, batch.append
        running = True
        while pending and len(batch) < limit:
            item = take()
            if type(item) is tuple:
                waiter = item[2]
                if waiter is None or not waiter.cancelled:  # a cancelled caller was refused
                    add(item)
                continue
            self._deliver_batch(batch)
            batch = []
            if item is _STOP:
                pending.appendleft(item)
                running = False
                break
            self._note_drops(force=True)
            self._flush_sinks()
            item.event.set()
        if not self._room.is_set():
            self._room.set()  # callers waiting for room may queue while this batch is written
        self._deliver_batch(batch)
        return running

    @staticmethod
    def _lingers(pending: collections.deque[Any]) -> bool:
        """Whether to let a batch gather: not when someone waits on the writer."""
        try:
            last = pending[-1]
        except IndexError:
            return False
        return type(last) is tuple and last[2] is None

    def _deliver_batch(self, items: list[Item]) -> None:
        if not items:
            return
        try:
            events = self._built(items)
        except Exception as e:  # a bug, never bad input (events are built safely): keep going
            self._failed("event builder", e)
            events = [self._event(item) for item in items]
            if self._lines:
                events = [e.line() for e in events]
        shared, each = self._write(events)
        for i, item in enumerate(items):
            waiter = item[2]
            if waiter is not None:
                waiter.done(shared + each[i] if i in each else shared)

    def _built(self, items: list[Item]) -> list[Any]:
        """One event per item, in order (their JSON lines when every sink takes lines)."""
        if not self._lines:
            return [self._event(item) for item in items]
        decisions = [item[0] for item in items if item[1] is None]
        made = decision_lines(decisions, self.redactor) if decisions else []  # type: ignore[arg-type]
        if len(made) == len(items):
            return made
        next_made = iter(made).__next__
        return [next_made() if item[1] is None else self._line(item) for item in items]

    def _event(self, item: Item) -> AuditEvent:
        decision, extra, _ = item
        if decision is None:  # built already
            return extra  # type: ignore[no-any-return]
        if extra is None:
            return decision_event(decision, self.redactor)
        status, duration, error, at, rule, source = extra
        return outcome_event(decision, status, duration, error, self.redactor, at=at,
                             output_rule=rule, output_source=source)

    def _line(self, item: Item) -> str:
        decision, extra, _ = item
        if decision is not None and extra is not None:  # an outcome: its fast line
            status, duration, error, at, rule, source = extra
            return outcome_line(decision, status, duration, error, self.redactor, at=at,
                                output_rule=rule, output_source=source)
        if decision is None and type(extra) is str:  # built into its line already
            return extra
        return self._event(item).line()

    def _build_one(self, decision: Decision | None, extra: Any) -> Any:
        """One item's line (or event when a sink takes events), built by its caller."""
        if decision is None:
            return extra.line() if self._lines else extra
        item = (decision, extra, None)
        if not self._lines:
            return self._event(item)
        if extra is None:
            return decision_line(decision, self.redactor)
        return self._line(item)

    def _write(self, events: list[Any], *, count: bool = True
               ) -> tuple[Failures, dict[int, Failures]]:
        """Hands the events to every sink: (failures of the whole batch, of single events).
        ``count``: whether they count as ``written`` (a drop note does not)."""
        shared: Failures = []
        each: dict[int, Failures] = {}
        for sink, batch in self._batch_writers:
            if batch is not None and (self._lines or len(events) > 1):
                try:
                    batch(events)
                except Exception as e:
                    shared.append((sink, e))
                    self._failed(sink, e, len(events))
                continue
            for i, event in enumerate(events):
                try:
                    sink.write(event)
                except Exception as e:
                    each.setdefault(i, []).append((sink, e))
                    self._failed(sink, e)
        if count and not shared:
            self._written += len(events) - len(each)
        return shared, each

    def _note_drops(self, *, force: bool) -> None:
        """Writes an ``audit_dropped`` event for the drops since the last one."""
        if not self._unnoted or (not force and time.time() - self._noted_at < _NOTE_EVERY):
            return
        with self._lock:
            count, (first, last), total = self._unnoted, self._drop_span, self._dropped
            self._unnoted = 0
        self._noted_at = time.time()
        event = dropped_event(count, total, first, last, "queue_full")
        self._write([event.line() if self._lines else event], count=False)

    def _failed(self, where: Any, error: BaseException, events: int = 1) -> None:
        before = self._errors
        self._errors += events
        self._last_error = f"{where!r}: {type(error).__name__}: {error}"[:500]
        if not before or before // 1000 != self._errors // 1000:  # the first, then every 1000
            log.warning("callwarden audit: %s (%d error(s) so far)", self._last_error,
                        self._errors)

    def _flush_sinks(self) -> None:
        for sink in self.sinks:
            flush = getattr(sink, "flush", None)
            if flush is not None:
                try:
                    flush()
                except Exception as e:
                    self._failed(sink, e)

    # -- lifecycle --------------------------------------------------------------------------

    def flush(self, timeout: float = 5.0) -> bool:
        """Waits until every event queued so far is written (and sinks flushed).

        Returns:
            False when ``timeout`` passed first (a sink is stuck).
        """
        if self._thread is None:
            return True
        marker = Flush()
        self._push(marker)
        return marker.event.wait(timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Flushes, stops the writer thread and closes the sinks.

        Later decisions raise ``AuditError`` (``lossy``: are dropped and counted); later
        outcomes are dropped and counted.
        """
        if self._closed:
            return
        self._closed = True
        thread = self._thread
        if thread is not None:
            self.flush(timeout)
            self._push(_STOP)
            thread.join(timeout)
        for sink in self.sinks:
            close = getattr(sink, "close", None)
            if close is not None:
                try:
                    close()
                except Exception as e:
                    self._failed(sink, e)
        _LIVE.discard(self)

    def __enter__(self) -> Auditor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def stats(self) -> dict[str, Any]:
        """Counters: ``written`` (by every sink), ``dropped`` (lossy, or after close),
        ``refused`` (decisions whose event was not confirmed in time: their calls were
        refused), ``errors`` (sink failures), ``pending`` (queued), ``last_error`` (text, or
        None) and ``delivery``."""
        return {"written": self._written, "dropped": self._dropped, "refused": self._refused,
                "errors": self._errors, "pending": len(self._pending),
                "last_error": self._last_error, "delivery": self.delivery}


_LIVE: weakref.WeakSet[Auditor] = weakref.WeakSet()


def _after_fork() -> None:
    # The writer thread does not survive fork(): the child starts its own on first use.
    for auditor in list(_LIVE):
        auditor._reset()
        auditor._lock = threading.Lock()


def _at_exit() -> None:
    for auditor in list(_LIVE):
        if auditor._thread is not None and not auditor._closed:
            auditor.flush(timeout=2.0)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
atexit.register(_at_exit)
