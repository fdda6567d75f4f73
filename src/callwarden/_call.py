"""The immutable snapshot of one tool call, and the read-only argument containers behind it."""

from __future__ import annotations

import copy
import datetime
import decimal
import enum
import fractions
import itertools
import json
import math
import os
import pathlib
import time
import uuid
from collections.abc import Mapping
from typing import Any, NamedTuple

from callwarden.exceptions import InvalidCall

__all__ = [
    "MAX_ARG_DEPTH", "FrozenDict", "Opaque", "ToolCall", "freeze", "freeze_args", "freeze_call_args",
    "json_safe", "new_id", "parse_args", "snapshot", "thaw",
]

MAX_ARG_DEPTH = 64

_SCALARS = (str, int, float, bool, type(None), bytes)
_SCALAR_TYPES = frozenset(_SCALARS)
# Values that cannot change once built: kept as they are. Exact types only — a subclass may add
# mutable state.
_IMMUTABLE_TYPES = frozenset({
    complex, range, datetime.date, datetime.datetime, datetime.time, datetime.timedelta,
    datetime.timezone, decimal.Decimal, fractions.Fraction, uuid.UUID, pathlib.PurePosixPath,
    pathlib.PureWindowsPath, pathlib.PosixPath, pathlib.WindowsPath,
})
_KEPT = (*_SCALARS, enum.Enum)
_PREFIX = os.urandom(4).hex()
_COUNTER = itertools.count(1)


def new_id() -> str:
    """Returns an id unique across processes: a random per-process prefix and a counter.

    A uuid4 costs more than a whole simple decision; this is under 100 nanoseconds.
    """
    return _PREFIX + str(next(_COUNTER))


class FrozenDict(dict[str, Any]):
    """A dict that refuses every mutation. JSON-serializable because it is a dict."""

    __slots__ = ()

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            "tool call arguments are read-only; build a new dict (callwarden.thaw(args)) to change them"
        )

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _read_only
    __ior__ = _read_only

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenDict:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"


class Opaque:
    """An argument value callwarden cannot freeze (any object other than plain data).

    The snapshot holds a private deep copy, so neither the caller, a policy nor the tool can
    change what the decision recorded: policies that need to look inside call ``unwrap()``,
    which returns a fresh copy each time, and ``thaw`` (hence ``run``) hands the tool a fresh
    copy too. An object that cannot be deep-copied (a lock, a socket) is kept by reference.
    Its ``repr`` is the object's, taken when the call was snapshotted.
    """

    __slots__ = ("_repr", "_value", "type_name")

    def __init__(self, value: Any) -> None:
        try:
            self._value = copy.deepcopy(value)
        except Exception:
            self._value = value
        try:
            self._repr = repr(value)[:1000]
        except Exception:
            self._repr = f"<unrepresentable {type(value).__name__}>"
        #: The qualified name of the object's type.
        self.type_name = f"{type(value).__module__}.{type(value).__qualname__}"

    def unwrap(self) -> Any:
        """Returns a fresh deep copy of the object (the object itself if it cannot be copied)."""
        try:
            return copy.deepcopy(self._value)
        except Exception:
            return self._value

    def __setattr__(self, name: str, value: Any) -> None:
        if hasattr(self, "type_name"):
            raise AttributeError("Opaque values are read-only; unwrap() returns a copy")
        object.__setattr__(self, name, value)

    def __copy__(self) -> Opaque:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Opaque:
        return self

    def __repr__(self) -> str:
        return self._repr


def freeze(value: Any, *, max_depth: int = MAX_ARG_DEPTH) -> Any:
    """Deep-copies ``value`` into read-only containers (FrozenDict, tuple).

    Plain data (str, int, float, bool, None, bytes) and immutable values (dates, Decimal, UUID,
    paths, enums...) are kept; a ``bytearray`` or ``memoryview`` becomes ``bytes``; mappings
    (a FrozenDict too: its contents are frozen again) become FrozenDicts with string keys;
    lists, tuples and sets become tuples; any other object becomes an ``Opaque`` holding a
    private deep copy.

    Raises:
        InvalidCall: on a reference cycle or nesting deeper than ``max_depth``.
    """
    return _freeze(value, 0, max_depth, set())


def freeze_args(args: Any, max_depth: int = MAX_ARG_DEPTH) -> FrozenDict:
    """Freezes a call's arguments; a flat dict of plain values takes a fast path."""
    if type(args) is dict:
        for key, value in args.items():
            if type(value) not in _SCALAR_TYPES or type(key) is not str:
                break
        else:
            return FrozenDict(args)
    frozen = _freeze(args, 0, max_depth, set())
    assert type(frozen) is FrozenDict
    return frozen


def _freeze(value: Any, depth: int, max_depth: int, path: set[int]) -> Any:
    kind = type(value)
    if kind in _SCALAR_TYPES or kind in _IMMUTABLE_TYPES or kind is Opaque or isinstance(
            value, _KEPT):
        return value
    if kind is bytearray or kind is memoryview:
        return bytes(value)
    if depth >= max_depth:
        raise InvalidCall(
            f"arguments are nested deeper than {max_depth} levels", code="args_too_deep"
        )
    ident = id(value)
    if ident in path:
        raise InvalidCall("arguments contain a reference cycle", code="args_cycle")
    path.add(ident)
    try:
        if type(value) is dict or isinstance(value, Mapping):
            return FrozenDict(
                (k if isinstance(k, str) else str(k), _freeze(v, depth + 1, max_depth, path))
                for k, v in value.items()
            )
        if isinstance(value, list | tuple | set | frozenset):
            return tuple(_freeze(v, depth + 1, max_depth, path) for v in value)
        return Opaque(value)
    finally:
        path.discard(ident)


def json_safe(value: Any, *, max_depth: int = 100) -> Any:
    """Returns ``value`` as plain JSON data; what JSON cannot hold becomes its ``repr``."""
    return _safe(value, 0, max_depth)


def _safe(value: Any, depth: int, max_depth: int) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if depth >= max_depth:
        return "<too deep>"
    if isinstance(value, Mapping):
        return {str(k): _safe(v, depth + 1, max_depth) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_safe(v, depth + 1, max_depth) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    try:
        text = repr(value)
    except Exception:
        text = f"<unrepresentable {type(value).__name__}>"
    return text[:1000]


def freeze_call_args(args: Any) -> FrozenDict:
    """Freezes arguments given as a mapping or a JSON object string (``parse_args``).

    Raises:
        InvalidCall: not a JSON object, a cycle, or nesting too deep.
    """
    frozen = freeze(parse_args(args))
    if type(frozen) is not FrozenDict:  # a Mapping subclass whose items() lie
        raise InvalidCall("arguments must be a JSON object (a mapping)", code="args_not_object")
    return frozen


def thaw(value: Any) -> Any:
    """Returns a fresh, mutable deep copy of frozen arguments, for handing to a tool.

    Dicts and tuples become dicts and lists; an ``Opaque`` becomes a fresh copy of its object,
    so a tool cannot change what the decision recorded.
    """
    if isinstance(value, dict):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    if type(value) is Opaque:
        return value.unwrap()
    return value


def parse_args(args: Any) -> Any:
    """Accepts a mapping, None, or a JSON object string; anything else is an InvalidCall."""
    if args is None:
        return {}
    if isinstance(args, Mapping):
        return args if type(args) is dict else dict(args)
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


class _ToolCallFields(NamedTuple):
    tool: str
    args: FrozenDict
    call_id: str
    agent: str | None
    session: str | None
    principal: str | None
    framework: str | None
    timestamp: float
    context: FrozenDict


class ToolCall(_ToolCallFields):
    """An immutable snapshot of one tool call: nothing downstream can change what was asked.

    Attributes:
        tool: the tool name.
        args: the arguments, deep-copied into read-only containers.
        call_id: the framework's id for the call (or a generated one).
        agent, session, principal, framework: who made the call, in which conversation, on
            whose behalf, through which framework (None when unknown).
        timestamp: when the call was snapshotted (seconds since the epoch).
        context: free-form read-only context (e.g. the user's request).
    """

    __slots__ = ()

    def __new__(
        cls,
        tool: str,
        args: Any = None,
        call_id: str | None = None,
        agent: str | None = None,
        session: str | None = None,
        principal: str | None = None,
        framework: str | None = None,
        timestamp: float | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> ToolCall:
        return tuple.__new__(cls, (
            tool,
            args if type(args) is FrozenDict else freeze_args(parse_args(args)),
            call_id or new_id(),
            agent, session, principal, framework,
            time.time() if timestamp is None else timestamp,
            context if type(context) is FrozenDict else (
                freeze_args(context) if context else _EMPTY),
        ))

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
        return snapshot(tool, args, call_id or new_id(), agent, session, principal, framework,
                        context, max_depth)

    def replace_args(self, args: FrozenDict) -> ToolCall:
        """Returns the same call with other (already frozen) arguments."""
        return tuple.__new__(ToolCall, (self[0], args, *self[2:]))

    def to_dict(self) -> dict[str, Any]:
        """Returns a JSON-safe dict of the call."""
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


_EMPTY = FrozenDict()


def _identity_fields(*values: Any) -> tuple[Any, ...]:
    """Checks the who/where fields of a call: strings (a str subclass becomes a plain str) or
    None; anything else is an InvalidCall, so it can never reach rule matching or a record."""
    out = []
    for name, value in zip(("call_id", "agent", "session", "principal", "framework"), values,
                           strict=True):
        if isinstance(value, str):
            value = str.__str__(value)
        elif value is not None or name == "call_id":
            raise InvalidCall(f"{name} must be a string or None, not {type(value).__name__}",
                              code="invalid_call_field")
        out.append(value)
    return tuple(out)


def snapshot(tool: Any, args: Any, call_id: str, agent: str | None, session: str | None,
             principal: str | None, framework: str | None, context: Mapping[str, Any] | None,
             max_depth: int = MAX_ARG_DEPTH) -> ToolCall:
    """``ToolCall.create`` with positional arguments, for the decision hot path.

    Raises:
        InvalidCall: when the tool name or the arguments cannot be accepted.
    """
    if type(tool) is not str or not tool:
        raise InvalidCall(f"tool name must be a non-empty string, got {tool!r:.80}",
                          code="invalid_tool")
    if not ((agent is None or type(agent) is str) and (session is None or type(session) is str)
            and (principal is None or type(principal) is str)
            and (framework is None or type(framework) is str) and type(call_id) is str):
        call_id, agent, session, principal, framework = _identity_fields(
            call_id, agent, session, principal, framework)
    if type(args) is dict:
        # A flat dict of plain values (most calls) is copied as is; anything else is walked.
        for key, value in args.items():
            if type(value) not in _SCALAR_TYPES or type(key) is not str:
                frozen = freeze_args(args, max_depth)
                break
        else:
            frozen = FrozenDict(args)
    else:
        frozen = freeze_args(parse_args(args), max_depth)
    return tuple.__new__(ToolCall, (
        tool,
        frozen,
        call_id, agent, session, principal, framework,
        time.time(),
        freeze_args(parse_args(context), max_depth) if context else _EMPTY,
    ))
