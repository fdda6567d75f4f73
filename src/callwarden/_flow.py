"""One source of truth, two drivers: approval logic is written once as generators.

A flow yields :class:`Step` values (a store read, a sleep, a question to an approver, a policy
check), each carrying its sync and its async twin; :func:`drive` runs them synchronously,
:func:`adrive` awaits them. An exception raised by a step is thrown back into the flow, which
may handle it. That is the shape of the engine's decision flow and of httpx's ``auth_flow``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Generator
from typing import Any, NamedTuple, TypeVar

__all__ = ["Flow", "Step", "adrive", "drive", "sleep"]

T = TypeVar("T")


class Step(NamedTuple):
    """One operation of a flow, with its sync and async twins and their arguments."""

    sync: Callable[..., Any]
    async_: Callable[..., Awaitable[Any]]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = {}  # noqa: RUF012 - never mutated


Flow = Generator[Step, Any, T]


def drive(flow: Flow[T]) -> T:
    """Runs a flow synchronously and returns its result."""
    try:
        step = next(flow)
        while True:
            try:
                result = step.sync(*step.args, **step.kwargs)
            except Exception as exc:
                step = flow.throw(exc)
            else:
                step = flow.send(result)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def adrive(flow: Flow[T]) -> T:
    """Runs a flow, awaiting each step: the event loop is never blocked."""
    try:
        step = next(flow)
        while True:
            try:
                result = await step.async_(*step.args, **step.kwargs)
            except Exception as exc:
                step = flow.throw(exc)
            else:
                step = flow.send(result)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def sleep(seconds: float) -> Step:
    """A step that waits (``time.sleep`` / ``asyncio.sleep``)."""
    return Step(time.sleep, asyncio.sleep, (seconds,))
