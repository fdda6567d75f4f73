"""The immutable snapshot of one tool call, and the read-only argument containers behind it."""

from __future__ import annotations

import copy
import itertools
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from callwarden.exceptions import InvalidCall

__all__ = ["MAX_ARG_DEPTH", "FrozenDict", "ToolCall", "freeze", "new_id", "parse_args", "thaw"]

MAX_ARG_DEPTH = 64

_SCALARS = (str, int, float, bool, type(None), bytes)
_PREFIX = os.urandom(4).hex()
_COUNTER = itertools.count(1)


def new_id() -> str:
    """Returns an id unique across processes: a random per-process prefix and a counter.

    A uuid4 costs more than a whole simple decision; this is a few hundred nanoseconds.
    """
    return f"{_PREFIX}{next(_COUNTER):012x}"


class FrozenDict(dict[str, Any]):
    """A dict that refuses every mutation. JSON-serializable because it is a dict."""

    __slots__ = ()

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            "tool call arguments are read-only; build a new dict (callwarden.thaw(args)) to change them"
        )

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _read_only
    __ior__ = _read_only  # type: ignore[assignment]

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenDict:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"


def freeze(value: Any, *, max_depth: int = MAX_ARG_DEPTH) -> Any:
    """Deep-copies ``value`` into read-only containers (FrozenDict, tuple).

    Raises:
        InvalidCall: on a reference cycle or nesting deeper than ``max_depth``.
    """
    return _freeze(value, 0, max_depth, set())


def _freeze(value: Any, depth: int, max_depth: int, path: set[int]) -> Any:
    if isinstance(value, _SCALARS) or type(value) is FrozenDict:
        return value
    if depth >= max_depth:
        raise InvalidCall(
            f"arguments are nested deeper than {max_depth} levels", code="args_too_deep"
        )
    ident = id(value)
    if ident in path:
        raise InvalidCall("arguments contain a reference cycle", code="args_cycle")
    path.add(ident)
    try:
        if isinstance(value, Mapping):
            return FrozenDict(
                (k if isinstance(k, str) else str(k), _freeze(v, depth + 1, max_depth, path))
                for k, v in value.items()
            )
        if isinstance(value, list | tuple | set | frozenset):
            return tuple(_freeze(v, depth + 1, max_depth, path) for v in value)
        try:
            return copy.deepcopy(value)
        except Exception:
            # An object that cannot be copied (a lock, a socket) is kept by reference: the
            # decision still records its repr, and no rule can see inside it anyway.
            return value
    finally:
        path.discard(ident)


def thaw(value: Any) -> Any:
    """Returns a fresh, mutable deep copy of frozen arguments, for handing to a tool."""
    if isinstance(value, dict):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value


def parse_args(args: Any) -> Any:
    """Accepts a mapping, None, or a JSON object string; anything else is an InvalidCall."""
    if args is None:
        return {}
    if isinstance(args, Mapping):
        return args
    if isinstance(args, str | bytes):
        try:
            parsed = json.loads(args)
        except (ValueError, RecursionError) as e:
            raise InvalidCall(f"arguments are not valid JSON: {e}", code="args_not_json") from e
        if isinstance(parsed, dict):
            return parsed
    raise InvalidCall(
        f"arguments must be a JSON object (a mapping), not {type(args).__name__}",
        code="args_not_object",
    )


@dataclass(frozen=True, slots=True)
class ToolCall:
    """An immutable snapshot of one tool call: nothing downstream can change what was asked."""

    tool: str
    args: FrozenDict
    call_id: str = field(default_factory=new_id)
    agent: str | None = None
    session: str | None = None
    principal: str | None = None
    framework: str | None = None
    timestamp: float = field(default_factory=time.time)
    context: FrozenDict = field(default_factory=FrozenDict)

    @classmethod
    def create(
        cls,
        tool: str,
        args: Any = None,
        *,
        call_id: str | None = None,
        agent: str | None = None,
        session: str | None = None,
        principal: str | None = None,
        framework: str | None = None,
        context: Mapping[str, Any] | None = None,
        max_depth: int = MAX_ARG_DEPTH,
    ) -> ToolCall:
        """Snapshots a call, deep-copying ``args`` and ``context`` into read-only containers.

        Raises:
            InvalidCall: when the tool name or the arguments cannot be accepted.
        """
        if not isinstance(tool, str) or not tool:
            raise InvalidCall(f"tool name must be a non-empty string, got {tool!r:.80}",
                              code="invalid_tool")
        frozen_args = freeze(parse_args(args), max_depth=max_depth)
        frozen_ctx = freeze(context, max_depth=max_depth) if context else FrozenDict()
        return cls(
            tool=tool,
            args=frozen_args,
            call_id=call_id or new_id(),
            agent=agent,
            session=session,
            principal=principal,
            framework=framework,
            context=frozen_ctx,
        )

    def replace_args(self, args: FrozenDict) -> ToolCall:
        """Returns the same call with other (already frozen) arguments."""
        return ToolCall(self.tool, args, self.call_id, self.agent, self.session, self.principal,
                        self.framework, self.timestamp, self.context)

    def to_dict(self) -> dict[str, Any]:
        """Returns a JSON-safe dict of the call."""
        from callwarden._jsonsafe import json_safe

        return {
            "tool": self.tool,
            "args": json_safe(self.args),
            "call_id": self.call_id,
            "agent": self.agent,
            "session": self.session,
            "principal": self.principal,
            "framework": self.framework,
            "timestamp": self.timestamp,
            "context": json_safe(self.context),
        }
