"""``Auditor``: builds events and delivers them to sinks, without ever holding up a decision.

Two delivery rules:

* ``required=False`` (default): ``decision()`` / ``outcome()`` append the decision to a
  bounded queue and return at once (well under a microsecond); one writer thread builds the
  events (redaction included) and writes them to every sink in order, in batches: when
  every sink takes lines (``write_lines``: the JSONL and stdout sinks), a batch is built
  straight into JSON lines, with one screening pass over all its payloads
  (``decision_lines``). A full queue drops the event and counts it; a failing sink is
  counted and logged. Nothing raises, nothing blocks.
* ``required=True``: the event is built in the caller's thread and written by the writer
  thread while the caller waits at most ``deadline``; any sink failure or a missed deadline
  raises ``AuditError``, and the guard turns the decision into a deny (fail closed).

The writer thread is a daemon started on first use (and again in a forked child); pending
events are flushed at interpreter exit.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import logging
import os
import threading
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from callwarden._decision import Decision
from callwarden.audit._config import AuditSettings, build_sink, parse_audit_config
from callwarden.audit._events import (
    OUTCOME_STATUSES,
    AuditEvent,
    approval_event,
    decision_event,
    decision_lines,
    outcome_event,
    outcome_line,
)
from callwarden.audit._redact import Redactor
from callwarden.exceptions import AuditError

__all__ = ["AuditError", "Auditor"]

log = logging.getLogger("callwarden.audit")

_STOP = object()
_BATCH = 256  # fewer queued than this: the writer lingers for more
_MAX_BATCH = 1024
# With fewer events than a batch queued, the writer waits this long for more: one wake-up,
# one screening pass and one write then serve a batch, instead of a few events each.
_LINGER = 0.002



class _Flush:
    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event = threading.Event()


class _Waiter:
    """Lets a caller wait (with a timeout) for the writer thread to confirm one event."""

    __slots__ = ("_lock", "cancelled", "failures")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()
        self.cancelled = False
        self.failures: list[tuple[Any, BaseException]] = []

    def done(self, failures: list[tuple[Any, BaseException]]) -> None:
        self.failures = failures
        self._lock.release()

    def wait(self, timeout: float) -> bool:
        return self._lock.acquire(timeout=max(timeout, 0.0))


class _AsyncWaiter:
    """The same, resolved on an event loop: the loop keeps running while it waits."""

    __slots__ = ("cancelled", "failures", "future", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.future: asyncio.Future[None] = loop.create_future()
        self.cancelled = False
        self.failures: list[tuple[Any, BaseException]] = []

    def done(self, failures: list[tuple[Any, BaseException]]) -> None:
        self.failures = failures
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
            self.loop.call_soon_threadsafe(self._resolve)

    def _resolve(self) -> None:
        if not self.future.done():
            self.future.set_result(None)


class Auditor:
    """Records every decision and outcome to one or more sinks.

    Args:
        sinks: where events go (``JsonlSink``, ``StdoutSink``, ``SQLiteSink``, ``OTelSink``,
            ``CallableSink`` or any object with ``write(event)``).
        redactor: how payloads are redacted and bounded (default: every secret detector and
            the sensitive key names, 4 KiB strings, 64 KiB events).
        required: fail closed: write synchronously and raise ``AuditError`` on failure.
        queue_size: events buffered for the writer thread before new ones are dropped.
        deadline: seconds a required write may take.
    """

    def __init__(self, sinks: Sequence[Any], *, redactor: Redactor | None = None,
                 required: bool = False, queue_size: int = 10_000, deadline: float = 0.2) -> None:
        for sink in sinks:
            if not callable(getattr(sink, "write", None)):
                raise TypeError(f"{sink!r} is not a sink: it needs a write(event) method")
        if queue_size < 1:
            raise ValueError("queue_size must be at least 1")
        if deadline <= 0:
            raise ValueError("deadline must be positive")
        self.sinks = tuple(sinks)
        # Lines only when every sink takes them: then no event dict is ever built.
        self._lines = all(callable(getattr(s, "write_lines", None)) for s in self.sinks)
        self.redactor = redactor or Redactor()
        self.required = required
        self.queue_size = queue_size
        self.deadline = deadline
        self._lock = threading.Lock()
        self._reset()
        self._closed = False
        self._written = 0
        self._dropped = 0
        self._errors = 0
        self._last_error: str | None = None
        _LIVE.add(self)

    def _reset(self) -> None:
        # A deque and a wake-up event rather than a queue.Queue: appending costs no lock, and
        # the writer is only signalled when it is idle, not once per event.
        self._pending: collections.deque[Any] = collections.deque()
        self._wake = threading.Event()
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
                   queue_size=settings.queue_size, deadline=settings.deadline)

    def __repr__(self) -> str:
        return f"Auditor({list(self.sinks)!r}, required={self.required})"

    # -- recording --------------------------------------------------------------------------

    def decision(self, decision: Decision) -> None:
        """Records a decision (before the tool runs).

        Raises:
            AuditError: only when ``required``: a sink failed or missed the deadline.
        """
        if self.required:
            self._write_now((decision, None))
            return
        pending = self._pending  # _enqueue, inlined: this is every audited call's cost
        if self._thread is None or len(pending) >= self.queue_size:
            self._enqueue((decision, None))
            return
        pending.append((decision, None))
        if self._idle:
            self._wake.set()

    def outcome(self, decision: Decision, status: str, duration: float,
                error: str | None = None) -> None:
        """Records what happened after the tool ran.

        Args:
            decision: the decision the tool ran under.
            status: ``ok``, ``error``, ``output_blocked`` or ``output_modified``.
            duration: how long the tool ran, in seconds.
            error: the error's text when it raised.

        Raises:
            ValueError: for an unknown status (a programming error, raised in both modes).
            AuditError: only when ``required``.
        """
        if status not in OUTCOME_STATUSES:
            raise ValueError(f"status must be one of {', '.join(OUTCOME_STATUSES)}, not {status!r}")
        extra = (status, duration, error, time.time())
        if self.required:
            self._write_now((decision, extra))
        else:
            self._enqueue((decision, extra))

    async def adecision(self, decision: Decision) -> None:
        """Async twin of ``decision``: a required write is awaited, the loop keeps running."""
        if self.required:
            await self._awrite_now((decision, None))
        else:
            self._enqueue((decision, None))

    async def aoutcome(self, decision: Decision, status: str, duration: float,
                       error: str | None = None) -> None:
        """Async twin of ``outcome``."""
        if status not in OUTCOME_STATUSES:
            raise ValueError(f"status must be one of {', '.join(OUTCOME_STATUSES)}, not {status!r}")
        item = (decision, (status, duration, error, time.time()))
        if self.required:
            await self._awrite_now(item)
        else:
            self._enqueue(item)

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
        if self.required:
            self._write_now((None, event))
        else:
            self._enqueue((None, event))

    def _build(self, item: tuple[Decision | None, Any]) -> AuditEvent:
        decision, extra = item
        if decision is None:  # built already
            return extra  # type: ignore[no-any-return]
        if extra is None:
            return decision_event(decision, self.redactor)
        status, duration, error, at = extra
        return outcome_event(decision, status, duration, error, self.redactor, at=at)

    # -- delivery ---------------------------------------------------------------------------

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                thread = threading.Thread(target=self._run, name="callwarden-audit", daemon=True)
                thread.start()
                self._thread = thread

    def _enqueue(self, item: Any) -> None:
        if self._thread is None:
            if self._closed:
                self._drop()
                return
            self._start()
        pending = self._pending
        if len(pending) >= self.queue_size:
            self._drop()
            return
        pending.append(item)
        if self._idle:
            self._wake.set()

    def _post(self, item: Any) -> None:
        """Queues a control item (flush, stop, a confirmed write): never dropped."""
        self._pending.append(item)
        if self._idle:
            self._wake.set()

    def _drop(self) -> None:
        with self._lock:
            self._dropped += 1
            dropped = self._dropped
        if dropped == 1 or dropped % 10_000 == 0:
            log.warning("callwarden audit: %d event(s) dropped (queue full or auditor closed)",
                        dropped)

    def _prepare(self, item: Any, waiter: Any) -> None:
        try:
            event = self._build(item)
        except Exception as e:
            raise AuditError(f"the audit event could not be built: {type(e).__name__}: {e}") from e
        if self._closed:
            raise AuditError("the auditor is closed")
        if self._thread is None:
            self._start()
        if len(self._pending) >= self.queue_size:
            raise AuditError(f"the audit queue is full ({self.queue_size} events): a sink is "
                             "stuck or too slow")
        self._post((event, waiter))

    def _write_now(self, item: Any) -> None:
        started = time.perf_counter()
        waiter = _Waiter()
        self._prepare(item, waiter)
        if not waiter.wait(self.deadline - (time.perf_counter() - started)):
            waiter.cancelled = True
            raise AuditError(self._timeout_text())
        self._raise_failures(waiter)

    async def _awrite_now(self, item: Any) -> None:
        waiter = _AsyncWaiter(asyncio.get_running_loop())
        self._prepare(item, waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter.future), self.deadline)
        except TimeoutError:
            waiter.cancelled = True
            raise AuditError(self._timeout_text()) from None
        self._raise_failures(waiter)

    def _timeout_text(self) -> str:
        return (f"no audit sink confirmed the event within {self.deadline * 1000:.0f} ms "
                f"(sinks: {', '.join(repr(s) for s in self.sinks)})")

    @staticmethod
    def _raise_failures(waiter: Any) -> None:
        if waiter.failures:
            sink, error = waiter.failures[0]
            raise AuditError(f"audit sink {sink!r} failed: {type(error).__name__}: {error}") \
                from error

    def _run(self) -> None:
        pending, wake = self._pending, self._wake
        while True:
            if not pending:
                self._idle = True
                if not pending:  # checked again after saying so: an append now wakes us
                    wake.wait(1.0)
                wake.clear()
                self._idle = False
                continue
            if len(pending) < _BATCH and self._lingers(pending):
                time.sleep(_LINGER)
            # Everything queued goes out together (up to _MAX_BATCH): one write per sink,
            # still in order, still whole lines. Each write lets the deciding thread take
            # the interpreter lock, and getting it back costs a thread switch.
            batch: list[Any] = []
            take, add = pending.popleft, batch.append
            while pending and len(batch) < _MAX_BATCH:
                item = take()
                if type(item) is tuple and item[1] is None:  # a decision: most items
                    add(item)
                    continue
                if item is _STOP:
                    self._deliver_batch(batch)
                    return
                if type(item) is _Flush:
                    self._deliver_batch(batch)
                    batch = []
                    self._flush_sinks()
                    item.event.set()
                    continue
                first, second = item
                if type(second) is _Waiter or type(second) is _AsyncWaiter:
                    self._deliver_batch(batch)
                    batch = []
                    if second.cancelled:  # its caller gave up and failed closed: not written
                        self._drop()
                        continue
                    second.done(self._deliver(first))
                    continue
                add(item)
            self._deliver_batch(batch)

    @staticmethod
    def _lingers(pending: collections.deque[Any]) -> bool:
        """Whether to let a batch gather: not when someone waits on the writer."""
        try:
            last = pending[-1]
        except IndexError:
            return False
        return type(last) is tuple and not (type(last[1]) is _Waiter
                                            or type(last[1]) is _AsyncWaiter)

    def _built(self, items: list[Any]) -> list[Any]:
        """The batch's events, or their JSON lines when every sink takes lines."""
        if not self._lines:
            return [e for e in map(self._build_counted, items) if e is not None]
        decisions = [d for d, extra in items if extra is None and d is not None]
        try:
            made = decision_lines(decisions, self.redactor)
        except Exception:  # one bad decision: build them one by one, and count it
            return [line for line in map(self._line_counted, items) if line is not None]
        if len(made) == len(items):
            return made
        lines, next_made = [], iter(made).__next__
        for item in items:
            if item[1] is None and item[0] is not None:
                lines.append(next_made())
            elif (line := self._line_counted(item)) is not None:
                lines.append(line)
        return lines

    def _line_counted(self, item: tuple[Decision | None, Any]) -> str | None:
        decision, extra = item
        try:
            if decision is not None and extra is not None:  # an outcome: its fast line
                status, duration, error, at = extra
                return outcome_line(decision, status, duration, error, self.redactor, at=at)
            return self._build(item).line()
        except Exception as e:
            self._failed("event builder", e)
            return None

    def _build_counted(self, item: Any) -> Any:
        try:
            return self._build(item)
        except Exception as e:
            self._failed("event builder", e)
            return None

    def _deliver(self, event: dict[str, Any]) -> list[tuple[Any, BaseException]]:
        failures: list[tuple[Any, BaseException]] = []
        for sink in self.sinks:
            try:
                sink.write(event)
            except Exception as e:
                failures.append((sink, e))
                self._failed(sink, e)
        if not failures:
            self._written += 1
        return failures

    def _deliver_batch(self, items: list[Any]) -> None:
        if not items:
            return
        events = self._built(items)
        if not events:
            return
        if self._lines:
            failed = 0
            for sink in self.sinks:
                try:
                    sink.write_lines(events)
                except Exception as e:
                    failed = len(events)
                    self._failed(sink, e)
                    self._errors += len(events) - 1
            self._written += len(events) - failed
            return
        if len(events) == 1:
            self._deliver(events[0])
            return
        failed = 0
        for sink in self.sinks:
            many = getattr(sink, "write_many", None)
            if many is not None:
                try:
                    many(events)
                except Exception as e:
                    failed = len(events)
                    self._failed(sink, e)
                    self._errors += len(events) - 1
                continue
            for event in events:
                try:
                    sink.write(event)
                except Exception as e:
                    failed += 1
                    self._failed(sink, e)
        self._written += max(0, len(events) - failed)

    def _failed(self, where: Any, error: BaseException) -> None:
        self._errors += 1
        self._last_error = f"{where!r}: {type(error).__name__}: {error}"[:500]
        if self._errors == 1 or self._errors % 1000 == 0:
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
        marker = _Flush()
        self._post(marker)
        return marker.event.wait(timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Flushes, stops the writer thread and closes the sinks. Later events are dropped."""
        if self._closed:
            return
        self._closed = True
        thread = self._thread
        if thread is not None:
            self.flush(timeout)
            self._post(_STOP)
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
        """Counters: ``written`` (by every sink), ``dropped``, ``errors`` (sink failures),
        ``pending`` (queued), ``last_error`` (text, or None)."""
        return {"written": self._written, "dropped": self._dropped, "errors": self._errors,
                "pending": len(self._pending), "last_error": self._last_error}


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
