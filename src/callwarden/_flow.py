"""One source of truth, two drivers: logic that waits on I/O is written once, as a generator.

A flow is a generator that yields *steps* — a user policy to run under the deadline, a
state-store read, a sleep, a question to an approver, a re-check of an edited call — and gets
each step's result sent back. A step carries its synchronous and its asynchronous twin
(``run()`` / ``arun()``); :func:`drive` runs a flow synchronously, :func:`adrive` awaits it. An
exception a step raises is thrown back into the flow, which may handle it.

The decision engine, the approvals store and what an ``ask`` becomes (``_settle``) are all
written this way: httpx's ``auth_flow`` + ``sync_auth_flow`` / ``async_auth_flow`` shape,
never a hand-copied async twin.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Generator
from typing import Any, NamedTuple, Protocol, TypeVar

__all__ = ["Flow", "Step", "Stepping", "adrive", "drive", "sleep"]

T = TypeVar("T")


class Stepping(Protocol):
    """What a flow yields: an operation with a synchronous and an asynchronous twin."""

    def run(self) -> Any: ...

    def arun(self) -> Awaitable[Any]: ...


class Step(NamedTuple):
    """A step made of two plain callables (``sync(*args, **kwargs)`` and its async twin)."""

    sync: Callable[..., Any]
    async_: Callable[..., Awaitable[Any]]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = {}  # noqa: RUF012 - never mutated

    def run(self) -> Any:
        """Runs the synchronous twin."""
        return self.sync(*self.args, **self.kwargs)

    def arun(self) -> Awaitable[Any]:
        """Starts the asynchronous twin (the driver awaits it)."""
        return self.async_(*self.args, **self.kwargs)


Flow = Generator[Stepping, Any, T]


def drive(flow: Generator[Any, Any, T], run: Callable[[Any], Any] | None = None) -> T:
    """Runs a flow synchronously and returns its result; each step by ``step.run()``, or by
    ``run(step)`` when the caller runs its steps itself (the Redis store, on its clients)."""
    try:
        step = next(flow)
        while True:
            try:
                result = step.run() if run is None else run(step)
            except Exception as exc:
                step = flow.throw(exc)
            else:
                step = flow.send(result)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def adrive(flow: Generator[Any, Any, T],
                 run: Callable[[Any], Awaitable[Any]] | None = None) -> T:
    """Runs a flow, awaiting each step (``step.arun()``, or ``run(step)``): the event loop is
    never blocked."""
    try:
        step = next(flow)
        while True:
            try:
                result = await (step.arun() if run is None else run(step))
            except Exception as exc:
                step = flow.throw(exc)
            else:
                step = flow.send(result)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def sleep(seconds: float) -> Step:
    """A step that waits (``time.sleep`` / ``asyncio.sleep``)."""
    return Step(time.sleep, asyncio.sleep, (seconds,))
