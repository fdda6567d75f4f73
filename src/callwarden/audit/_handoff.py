"""How a caller waits for its audit event: the objects a queued item carries.

A caller that must know its event was written (``delivery="written"``, or required) puts one
of these in the queue with the event; whoever writes the event calls ``done(failures)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

__all__ = ["AsyncWaiter", "Failures", "Flush", "Mark", "Waiter"]

Failures = list[tuple[Any, BaseException]]
"""``(sink, error)`` for each sink that failed to write an event."""


class Flush:
    """A marker in the queue: set once everything queued before it is written."""

    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event = threading.Event()


class Waiter:
    """Lets a caller wait (with a timeout) for the writer thread to confirm one event."""

    __slots__ = ("_lock", "cancelled", "failures")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()
        self.cancelled = False
        self.failures: Failures = []

    def done(self, failures: Failures) -> None:
        self.failures = failures
        self._lock.release()

    def wait(self, timeout: float) -> bool:
        return self._lock.acquire(timeout=max(timeout, 0.0))


class Mark:
    """A caller's hold on its event when callers write themselves: set by whoever writes it.

    Its lock is released to wake the caller: when the event is written, or when the caller
    should look again whether it can take the commit lock and write itself.
    """

    __slots__ = ("_lock", "cancelled", "failures", "written")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()
        self.cancelled = False
        self.written = False
        self.failures: Failures = []

    def done(self, failures: Failures) -> None:
        self.failures = failures
        self.written = True
        self.wake()

    def wake(self) -> None:
        with contextlib.suppress(RuntimeError):  # woken already
            self._lock.release()

    def wait(self, timeout: float) -> bool:
        return self._lock.acquire(timeout=max(timeout, 0.0))


class AsyncWaiter:
    """A ``Waiter`` resolved on an event loop: the loop keeps running while it waits."""

    __slots__ = ("cancelled", "failures", "future", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.future: asyncio.Future[None] = loop.create_future()
        self.cancelled = False
        self.failures: Failures = []

    def done(self, failures: Failures) -> None:
        self.failures = failures
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
            self.loop.call_soon_threadsafe(self._resolve)

    def _resolve(self) -> None:
        if not self.future.done():
            self.future.set_result(None)
