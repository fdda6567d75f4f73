"""The threads user policies run on: a call that hangs costs its thread, never the decision,
the process or the other policies.

* Threads are daemons: a policy still running when the program ends does not keep the process
  alive (``callwarden check`` and ``hook`` exit at the deadline, not when the policy returns).
* A thread stuck past its deadline is replaced: the pool starts another one while fewer than
  ``max_threads`` exist, so a hung policy does not starve the others.
* A rule whose calls keep hanging is refused at once (``max_stuck`` calls still running past
  their deadline) instead of taking a thread per call until none is left; it is tried again
  as soon as one of its stuck calls returns.

Python cannot stop a thread: the stuck call runs to its end in the background.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from typing import Any

from callwarden.exceptions import CallwardenError

__all__ = ["Stuck", "Workers"]


class Stuck(CallwardenError):
    """The rule has too many calls still running past their deadline to start another."""


class Workers:
    """A growing pool of daemon threads with per-owner accounting of calls that overran.

    Args:
        max_threads: threads the pool may start in all (stuck ones included).
        max_stuck: calls of one owner (a rule) that may overrun at once before its next
            calls are refused.
    """

    def __init__(self, *, max_threads: int = 256, max_stuck: int = 2,
                 name: str = "callwarden-policy") -> None:
        self.max_threads = max_threads
        self.max_stuck = max_stuck
        self._name = name
        self._tasks: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any],
                                             tuple[Any, ...]]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        self._stuck: dict[Hashable, int] = {}

    def submit(self, owner: Hashable, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """Runs ``fn(*args)`` on a pool thread.

        Raises:
            Stuck: ``owner`` already has ``max_stuck`` calls running past their deadline.
        """
        future: Future[Any] = Future()
        with self._lock:
            stuck = self._stuck.get(owner, 0)
            if stuck >= self.max_stuck:
                raise Stuck(f"{stuck} earlier calls are still running past their deadline")
            start = self._idle == 0 and self._threads < self.max_threads
            if start:
                self._threads += 1
            else:
                self._idle -= 1
        self._tasks.put((future, fn, args))
        if start:
            threading.Thread(target=self._work, name=f"{self._name}-{self._threads}",
                             daemon=True).start()
        return future

    def overran(self, owner: Hashable, future: Future[Any]) -> None:
        """Notes that a call passed its deadline and still runs; it counts against ``owner``
        until it returns."""
        if future.done():
            return
        with self._lock:
            self._stuck[owner] = self._stuck.get(owner, 0) + 1

        def released(_: Future[Any]) -> None:
            with self._lock:
                left = self._stuck.get(owner, 1) - 1
                if left > 0:
                    self._stuck[owner] = left
                else:
                    self._stuck.pop(owner, None)

        future.add_done_callback(released)

    def stats(self) -> dict[str, int]:
        """Threads started, idle now, and calls running past their deadline."""
        with self._lock:
            return {"threads": self._threads, "idle": max(self._idle, 0),
                    "stuck": sum(self._stuck.values())}

    def _work(self) -> None:
        while True:
            future, fn, args = self._tasks.get()
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args)
                except BaseException as e:  # a policy's SystemExit must not end the thread
                    future.set_exception(e)
                else:
                    future.set_result(result)
            del future, fn, args
            with self._lock:
                self._idle += 1
