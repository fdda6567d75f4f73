"""Session history: an incremental summary of the calls decided in one session.

Stores keep one running count per ``(tool, effect)`` pair plus a few scalars, so recording is
constant time and a snapshot costs the number of distinct pairs, never the number of calls.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from callwarden.state._base import RAN_EFFECTS

__all__ = ["HistoryTally", "SessionHistory"]

_EMPTY: Mapping[Any, Any] = MappingProxyType({})


def _empty() -> Mapping[Any, Any]:
    return _EMPTY


@dataclass(frozen=True, slots=True)
class SessionHistory:
    """A read-only snapshot of one session's history.

    Every decision is recorded with its effect; an ``ask`` that a person approved is recorded
    once more as ``approved`` when it runs.

    Attributes:
        session: The session it describes.
        count: Decisions recorded (attempts, whatever their effect).
        tools: Calls per tool name that *ran*: recorded as ``allow``, ``modify`` or
            ``approved`` (a denied or pending call is not in it).
        attempts: Decisions per tool name, whatever their effect.
        effects: Decisions per effect (``allow``, ``deny``, ``approved`` ...).
        tool_effects: Decisions per tool, then per effect: ``tool_effects["bash"]["deny"]``.
        last_tool: The tool recorded last, or ``None``.
        last_time: When the last decision was recorded, or ``None``.
        first_time: When the first decision was recorded, or ``None``.
        last_time_by_tool: When each tool was last recorded.
    """

    session: str
    count: int = 0
    tools: Mapping[str, int] = field(default_factory=_empty)
    attempts: Mapping[str, int] = field(default_factory=_empty)
    effects: Mapping[str, int] = field(default_factory=_empty)
    tool_effects: Mapping[str, Mapping[str, int]] = field(default_factory=_empty)
    last_tool: str | None = None
    last_time: float | None = None
    first_time: float | None = None
    last_time_by_tool: Mapping[str, float] = field(default_factory=_empty)

    @classmethod
    def from_pairs(
        cls,
        session: str,
        pairs: Iterable[tuple[str, str, int]],
        *,
        count: int,
        first_time: float | None,
        last_time: float | None,
        last_tool: str | None,
        last_time_by_tool: Mapping[str, float],
    ) -> SessionHistory:
        """Builds a snapshot from ``(tool, effect, count)`` rows, as the stores keep them."""
        tools: dict[str, int] = {}
        attempts: dict[str, int] = {}
        effects: dict[str, int] = {}
        nested: dict[str, dict[str, int]] = {}
        for tool, effect, n in pairs:
            attempts[tool] = attempts.get(tool, 0) + n
            if effect in RAN_EFFECTS:
                tools[tool] = tools.get(tool, 0) + n
            effects[effect] = effects.get(effect, 0) + n
            nested.setdefault(tool, {})[effect] = n
        return cls(
            session=session,
            count=count,
            tools=MappingProxyType(tools),
            attempts=MappingProxyType(attempts),
            effects=MappingProxyType(effects),
            tool_effects=MappingProxyType({t: MappingProxyType(e) for t, e in nested.items()}),
            last_tool=last_tool,
            last_time=last_time,
            first_time=first_time,
            last_time_by_tool=MappingProxyType(dict(last_time_by_tool)),
        )

    def to_cel(self) -> dict[str, Any]:
        """Returns plain data for CEL conditions, e.g. ``history.tools["web_fetch"] > 0``.

        A tool or effect never seen is absent from its map; write ``"x" in history.tools``
        to test for it.
        """
        return {
            "session": self.session,
            "count": self.count,
            "tools": dict(self.tools),
            "attempts": dict(self.attempts),
            "effects": dict(self.effects),
            "tool_effects": {t: dict(e) for t, e in self.tool_effects.items()},
            "last_tool": self.last_tool,
            "last_time": self.last_time,
            "first_time": self.first_time,
            "last_time_by_tool": dict(self.last_time_by_tool),
        }


class HistoryTally:
    """The mutable running summary behind a :class:`SessionHistory` (in-process stores)."""

    __slots__ = ("by_tool", "count", "first_time", "last_time", "last_time_by_tool",
                 "last_tool")

    def __init__(self) -> None:
        self.count = 0
        self.first_time: float | None = None
        self.last_time: float | None = None
        self.last_tool: str | None = None
        self.by_tool: dict[str, dict[str, int]] = {}  # tool -> effect -> decisions
        self.last_time_by_tool: dict[str, float] = {}

    def add(self, tool: str, effect: str, now: float) -> None:
        """Counts one call, in constant time."""
        self.count += 1
        if self.first_time is None:
            self.first_time = now
        self.last_time = now
        self.last_tool = tool
        effects = self.by_tool.get(tool)
        if effects is None:
            effects = self.by_tool[tool] = {}
        effects[effect] = effects.get(effect, 0) + 1
        self.last_time_by_tool[tool] = now

    def snapshot(self, session: str, tools: Collection[str] | None = None) -> SessionHistory:
        """Returns an immutable copy, costing the number of distinct ``(tool, effect)`` pairs
        (of ``tools`` only, when given: see :meth:`LimitStore.history`)."""
        by_tool = self.by_tool
        names = by_tool if tools is None else [t for t in tools if t in by_tool]
        last = self.last_time_by_tool
        return SessionHistory.from_pairs(
            session,
            ((t, e, n) for t in names for e, n in by_tool[t].items()),
            count=self.count,
            first_time=self.first_time,
            last_time=self.last_time,
            last_tool=self.last_tool,
            last_time_by_tool=last if tools is None else {t: last[t] for t in names},
        )
