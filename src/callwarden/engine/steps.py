"""The steps a decision flow yields to its driver: a user policy, a state-store operation.

Each has a synchronous and an asynchronous twin (``run`` / ``arun``, see :mod:`callwarden._flow`)
and never raises: a store failure comes back as a :class:`StoreFailure`, a failing policy as
its rule's error verdict, so the flow decides what a failure means (``on_error``).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from callwarden.engine.user import run_policy_async, run_policy_sync

if TYPE_CHECKING:
    from callwarden._decision import Verdict
    from callwarden.conditions.base import Subject
    from callwarden.engine.engine import Engine
    from callwarden.engine.rules import Rule

__all__ = ["PolicyStep", "StoreFailure", "StoreStep", "never_blocks"]

_perf = time.perf_counter


class PolicyStep:
    """A user policy the driver must run under the deadline."""

    __slots__ = ("deadline", "engine", "rule", "subject")

    def __init__(self, engine: Engine, rule: Rule, subject: Subject, deadline: float) -> None:
        self.engine = engine
        self.rule = rule
        self.subject = subject
        self.deadline = deadline

    def run(self) -> Verdict | None:
        return run_policy_sync(self.engine, self.rule, self.subject, self.deadline)

    async def arun(self) -> Verdict | None:
        return await run_policy_async(self.engine, self.rule, self.subject, self.deadline)


class StoreFailure:
    """What a store step returns instead of raising: the flow turns it into ``on_error``."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def __str__(self) -> str:
        return f"{type(self.error).__name__}: {self.error}" if str(self.error) else \
            type(self.error).__name__


def never_blocks(store: Any) -> bool:
    """Whether a store's class says its steps never wait (the memory store; not inherited,
    so a subclass with I/O of its own is treated as any other)."""
    return type(store).__dict__.get("never_blocks") is True


def bounds_itself(store: Any, method: Any) -> bool:
    """Whether ``method`` of ``store`` is one the store says ends every wait at the
    ``deadline`` it is given (``store.deadline_bound``: those functions; a subclass's own
    override is not one of them)."""
    bound: frozenset[Any] = getattr(store, "deadline_bound", frozenset())
    return bool(bound) and getattr(method, "__func__", None) in bound


class StoreStep:
    """A state-store operation with sync and async twins; failures are returned, not raised."""

    __slots__ = ("afn", "args", "deadline", "fn", "kwargs")

    def __init__(self, fn: Any, afn: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                 deadline: float) -> None:
        self.fn = fn
        self.afn = afn
        self.args = args
        self.kwargs = kwargs
        self.deadline = deadline

    def run(self) -> Any:
        # The store bounds its own waits by the deadline (passed in kwargs) and writes
        # nothing once it has passed.
        if _perf() > self.deadline:
            return StoreFailure(TimeoutError("the deadline passed before the state store was "
                                             "reached"))
        try:
            return self.fn(*self.args, **self.kwargs)
        except Exception as e:  # StoreUnavailable, or a store bug: both fail closed
            return StoreFailure(e)

    async def arun(self) -> Any:
        # A store class that says its steps never wait (the memory store; not inherited, so a
        # subclass with async I/O of its own is awaited as any other) runs inline: no task,
        # no timer.
        store = getattr(self.fn, "__self__", None)
        if never_blocks(store):
            return self.run()
        remaining = self.deadline - _perf()
        if remaining <= 0:
            return StoreFailure(TimeoutError("the deadline passed before the state store was "
                                             "reached"))
        if bounds_itself(store, self.afn) and self.kwargs.get("deadline") == self.deadline:
            try:  # the store ends its own waits at the deadline: no timer here
                return await self.afn(*self.args, **self.kwargs)
            except Exception as e:
                return StoreFailure(e)
        try:
            # asyncio.timeout awaits the step in this task (wait_for would wrap it in a task
            # of its own, scheduled and run a loop turn later: the cost of a Redis round trip
            # on a busy service).
            async with asyncio.timeout(remaining):
                return await self.afn(*self.args, **self.kwargs)
        except TimeoutError:
            return StoreFailure(TimeoutError("the state store did not answer within the deadline"))
        except Exception as e:
            return StoreFailure(e)
