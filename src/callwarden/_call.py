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
import threading
import time
import uuid
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from callwarden.exceptions import InvalidCall

__all__ = [
    "MAX_ARG_DEPTH", "MAX_REQUEST_CHARS", "FrozenDict", "Opaque", "ToolCall", "freeze",
    "freeze_args", "freeze_call_args", "json_safe", "new_id", "parse_args", "snapshot", "thaw",
]

MAX_ARG_DEPTH = 64
MAX_REQUEST_CHARS = 20_000
"""How much of the user's request a call's ``context.request`` keeps, at most: its end (the
adapters and hooks that read it from a conversation cut it so)."""

_SCALARS = (str, int, float, bool, type(None), bytes)
_SCALAR_TYPES = frozenset(_SCALARS)
# Values that cannot change once built: kept as they are. Exact types only — a subclass may add
# mutable state.
_IMMUTABLE_TYPES = frozenset({
    complex, range, datetime.date, datetime.datetime, datetime.time, datetime.timedelta,
    datetime.timezone, decimal.Decimal, fractions.Fraction, uuid.UUID, pathlib.PurePosixPath,
    pathlib.PureWindowsPath, pathlib.PosixPath, pathlib.WindowsPath,
})
_PLAIN_BASES = (str, int, float, bytes)
_PREFIX = os.urandom(4).hex()
_COUNTER = itertools.count(1)


def _forked() -> None:
    global _PREFIX, _COUNTER
    # A forked child counts from a prefix of its own, not on from its parent's.
    _PREFIX, _COUNTER = os.urandom(4).hex(), itertools.count(1)


os.register_at_fork(after_in_child=_forked)


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

    The snapshot holds one private deep copy, made when the call was snapshotted, so the
    caller cannot change what the decision is about. ``unwrap()`` returns that copy, and the
    tool (``run``, ``@protect``) receives that same object: a policy inspects exactly what the
    tool will get, even from an object whose ``__deepcopy__`` answers differently each time.
    Treat what ``unwrap()`` returns as read-only. An object that cannot be deep-copied (a lock,
    a socket) is kept by reference. Its ``repr`` is the object's, taken at snapshot time.

    Copying and ``repr`` run the object's own code: they run on a helper thread, bounded by
    the decision's deadline; one that hangs or raises makes the call an invalid one (a deny).
    """

    __slots__ = ("_repr", "_value", "type_name")

    _repr: str
    _value: Any
    type_name: str

    def __init__(self, value: Any, *, deadline: float | None = None) -> None:
        kind = type(value)
        copied, text = _bounded(_copy_and_repr, value, deadline, kind)
        object.__setattr__(self, "_value", copied)
        object.__setattr__(self, "_repr", text)
        #: The qualified name of the object's type.
        object.__setattr__(self, "type_name", f"{kind.__module__}.{kind.__qualname__}")

    def unwrap(self) -> Any:
        """Returns the private copy: the object the tool receives (do not change it)."""
        return self._value

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Opaque values are read-only")

    def __copy__(self) -> Opaque:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Opaque:
        return self

    def __repr__(self) -> str:
        return self._repr


def _copy_and_repr(value: Any, kind: type) -> tuple[Any, str]:
    try:
        copied = copy.deepcopy(value)
    except Exception:  # a lock, a socket: kept as it is
        copied = value
    try:
        text = repr(value)
        text = str.__str__(text)[:1000] if isinstance(text, str) else f"<{kind.__name__}>"
    except Exception:
        text = f"<unrepresentable {kind.__name__}>"
    return copied, text


_DEFAULT_SNAPSHOT_SECONDS = 1.0


def _bounded(fn: Any, value: Any, deadline: float | None, kind: type) -> Any:
    """Runs an object's own code (copy, repr) on a daemon thread, waiting until ``deadline``.

    Raises:
        InvalidCall: it did not finish in time, or raised (``SystemExit`` included).
    """
    box: list[tuple[bool, Any]] = []

    def work() -> None:
        try:
            box.append((True, fn(value, kind)))
        except BaseException as e:  # the object's own SystemExit must not end anything
            box.append((False, e))

    remaining = (deadline - time.perf_counter()) if deadline is not None \
        else _DEFAULT_SNAPSHOT_SECONDS
    thread = threading.Thread(target=work, name="callwarden-snapshot", daemon=True)
    thread.start()
    thread.join(max(remaining, 0.001))
    if not box:
        raise InvalidCall(f"an argument of type {kind.__name__} did not copy within the "
                          "deadline", code="args_uncopyable")
    ok, result = box[0]
    if not ok:
        raise InvalidCall(f"an argument of type {kind.__name__} could not be copied "
                          f"({type(result).__name__})", code="args_uncopyable")
    return result


def freeze(value: Any, *, max_depth: int = MAX_ARG_DEPTH, deadline: float | None = None) -> Any:
    """Deep-copies ``value`` into read-only containers (FrozenDict, tuple).

    Plain data (str, int, float, bool, None, bytes) and immutable values (dates, Decimal, UUID,
    paths, enums...) are kept; a subclass of str, int, float or bytes (a ``StrEnum`` or
    ``IntEnum`` member included) becomes its plain value — what the policy checks is what the
    tool gets, whatever the subclass's ``__str__`` says; a ``bytearray`` or ``memoryview``
    becomes ``bytes``; dicts (a FrozenDict too: its contents are frozen again) become
    FrozenDicts with string keys; lists, tuples and sets become tuples; any other object
    becomes an ``Opaque`` holding a private deep copy. Containers are read through their base
    type, so a subclass's ``items()`` or ``__iter__`` cannot lie or hang.

    Raises:
        InvalidCall: on a reference cycle, nesting deeper than ``max_depth``, a mapping key
            that is not a string or number, or an object that cannot be copied by
            ``deadline`` (a ``time.perf_counter`` value; one second from now by default).
    """
    return _freeze(value, 0, max_depth, set(), deadline)


def freeze_args(args: Any, max_depth: int = MAX_ARG_DEPTH,
                deadline: float | None = None) -> FrozenDict:
    """Freezes a call's arguments; a dict of plain values and lists of them takes a fast
    path."""
    if type(args) is dict:
        flat = args
        for key, value in args.items():
            if type(key) is not str:
                break
            if type(value) in _SCALAR_TYPES:
                continue
            if type(value) is not list or not all(type(v) in _SCALAR_TYPES for v in value):
                break
            if flat is args:
                flat = dict(args)
            flat[key] = tuple(value)
        else:
            return FrozenDict(flat)
    frozen = _freeze(args, 0, max_depth, set(), deadline)
    if type(frozen) is not FrozenDict:
        raise InvalidCall("arguments must be a JSON object (a mapping)", code="args_not_object")
    return frozen


def _plain(value: Any, kind: type) -> Any:
    """The plain value of a str, int, float or bytes subclass, read without its own code."""
    if issubclass(kind, str):
        return str.__str__(value)
    if issubclass(kind, int):
        return int.__int__(value)
    if issubclass(kind, float):
        return float.__float__(value)
    return b"".join((value,))  # bytes


def _key(key: Any) -> str:
    kind = type(key)
    if kind is str:
        return key  # type: ignore[no-any-return]
    if issubclass(kind, str):
        return str.__str__(key)
    if kind in (int, float, bool) or key is None or issubclass(kind, int):
        return str(_plain(key, kind) if kind not in (bool, type(None)) else key)
    raise InvalidCall(f"argument names must be strings, not {kind.__name__}",
                      code="args_bad_key")


def _freeze(value: Any, depth: int, max_depth: int, path: set[int],
            deadline: float | None) -> Any:
    kind = type(value)
    if kind in _SCALAR_TYPES or kind in _IMMUTABLE_TYPES or kind is Opaque:
        return value
    if issubclass(kind, _PLAIN_BASES):
        return _plain(value, kind)
    if issubclass(kind, enum.Enum):
        return value  # a plain Enum member: a fixed singleton
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
        if issubclass(kind, dict) or kind is MappingProxyType:
            items = dict.items(value) if kind is not MappingProxyType else value.items()
            return FrozenDict((_key(k), _freeze(v, depth + 1, max_depth, path, deadline))
                              for k, v in items)
        if issubclass(kind, list | tuple):
            base = list if issubclass(kind, list) else tuple
            return tuple(_freeze(v, depth + 1, max_depth, path, deadline)
                         for v in base.__iter__(value))
        if issubclass(kind, set | frozenset):
            members = set.__iter__(value) if issubclass(kind, set) \
                else frozenset.__iter__(value)
            return tuple(_freeze(v, depth + 1, max_depth, path, deadline) for v in members)
        return Opaque(value, deadline=deadline)
    finally:
        path.discard(ident)


def json_safe(value: Any, *, max_depth: int = 100) -> Any:
    """Returns ``value`` as plain JSON data that any JSON encoder accepts.

    What JSON cannot hold becomes text: an ``Opaque`` its ``repr`` taken at snapshot time, an
    int too long for JSON ``<int of N bits>``, any other object its ``repr``. Containers and
    subclasses of str, int and float are read through their base types. A call's snapshot
    holds nothing else, so rendering a decision runs no argument object's own code.
    """
    if type(value) is FrozenDict:  # a call's arguments: as a rule a few strings
        for key, item in dict.items(value):
            if type(key) is not str or type(item) not in _TEXTS:
                break
        else:
            return dict(value)
    return _safe(value, 0, max_depth)


_TEXTS = frozenset({str, bool, type(None)})  # JSON as they are, whatever their value


def _safe(value: Any, depth: int, max_depth: int) -> Any:
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        # JSON encoders refuse an int of more than 4,300 digits: say what it was instead.
        return value if value.bit_length() <= _MAX_INT_BITS else \
            f"<int of {value.bit_length()} bits>"
    if kind is float:
        return value if math.isfinite(value) else repr(value)
    snapshot = kind is FrozenDict or kind is tuple  # a snapshot's own containers
    if not snapshot and issubclass(kind, _PLAIN_BASES) and not issubclass(kind, bytes):
        return _safe(_plain(value, kind), depth, max_depth)
    if depth >= max_depth:
        return "<too deep>"
    if issubclass(kind, dict):
        return {k if type(k) is str else _safe_key(k): _safe(v, depth + 1, max_depth)
                for k, v in dict.items(value)}
    if issubclass(kind, list | tuple):
        base = list if issubclass(kind, list) else tuple
        return [_safe(v, depth + 1, max_depth) for v in base.__iter__(value)]
    if issubclass(kind, set | frozenset):
        members = set.__iter__(value) if issubclass(kind, set) else frozenset.__iter__(value)
        return [_safe(v, depth + 1, max_depth) for v in members]
    if issubclass(kind, bytes):
        return _plain(value, kind).decode("utf-8", "backslashreplace")
    if kind is Opaque:
        return value._repr
    try:
        text = repr(value)
        return str.__str__(text)[:1000] if isinstance(text, str) else f"<{kind.__name__}>"
    except Exception:
        return f"<unrepresentable {kind.__name__}>"


_MAX_INT_BITS = 14_000


def _safe_key(key: Any) -> str:
    try:
        return _key(key)
    except InvalidCall:
        return f"<{type(key).__name__}>"


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
    """Returns a fresh, mutable copy of frozen arguments, for handing to a tool.

    Dicts and tuples become new dicts and lists; an ``Opaque`` becomes its private copy: the
    very object the policies inspected.
    """
    if isinstance(value, dict):
        return {k: v if type(v) in _PLAIN else thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [v if type(v) in _PLAIN else thaw(v) for v in value]
    if type(value) is Opaque:
        return value.unwrap()
    return value


# Values ``thaw`` hands over as they are (immutable): no call per argument for them.
_PLAIN = frozenset({str, int, float, bool, type(None)})


def parse_args(args: Any) -> Any:
    """Accepts a mapping, None, or a JSON object string; anything else is an InvalidCall."""
    if args is None:
        return {}
    kind = type(args)
    if kind is dict or issubclass(kind, dict) or kind is MappingProxyType:
        return args  # read through dict's own methods when frozen
    if issubclass(kind, Mapping):  # any other mapping: its own code, bounded
        return _bounded(_as_dict, args, None, kind)
    if issubclass(kind, str | bytes):
        args = _plain(args, kind)
        try:
            parsed = json.loads(args)
        except (ValueError, RecursionError) as e:
            raise InvalidCall(f"arguments are not valid JSON: {e}", code="args_not_json") from e
        if isinstance(parsed, dict):
            return parsed
    raise InvalidCall(
        f"arguments must be a JSON object (a mapping), not {kind.__name__}",
        code="args_not_object",
    )


def _as_dict(value: Any, kind: type) -> dict[Any, Any]:
    return dict(value)


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
            "context": json_safe(self.context) if self.context else {},
        }


_EMPTY = FrozenDict()


def _identity_fields(*values: Any) -> tuple[Any, ...]:
    """Checks the who/where fields of a call: strings (a str subclass becomes a plain str) or
    None; anything else is an InvalidCall, so it can never reach rule matching or a record."""
    out = []
    for name, value in zip(("call_id", "agent", "session", "principal", "framework"), values,
                           strict=True):
        if issubclass(type(value), str):
            value = str.__str__(value)
        elif value is not None or name == "call_id":
            raise InvalidCall(f"{name} must be a string or None, not {type(value).__name__}",
                              code="invalid_call_field")
        out.append(value)
    return tuple(out)


def snapshot(tool: Any, args: Any, call_id: str, agent: str | None, session: str | None,
             principal: str | None, framework: str | None, context: Mapping[str, Any] | None,
             max_depth: int = MAX_ARG_DEPTH, deadline: float | None = None) -> ToolCall:
    """``ToolCall.create`` with positional arguments, for the decision hot path.

    ``deadline`` (a ``time.perf_counter`` value) bounds the object code that copying a
    non-plain argument runs (see :class:`Opaque`).

    Raises:
        InvalidCall: when the tool name or the arguments cannot be accepted.
    """
    if type(tool) is not str:
        if not issubclass(type(tool), str):
            raise InvalidCall(f"tool name must be a string, not {type(tool).__name__}",
                              code="invalid_tool")
        tool = str.__str__(tool)
    if not tool:
        raise InvalidCall("tool name must not be empty", code="invalid_tool")
    if not ((agent is None or type(agent) is str) and (session is None or type(session) is str)
            and (principal is None or type(principal) is str)
            and (framework is None or type(framework) is str) and type(call_id) is str):
        call_id, agent, session, principal, framework = _identity_fields(
            call_id, agent, session, principal, framework)
    if type(args) is dict:
        # A flat dict of plain values (most calls) is copied as is; anything else is walked.
        for key, value in args.items():
            if type(value) not in _SCALAR_TYPES or type(key) is not str:
                frozen = freeze_args(args, max_depth, deadline)
                break
        else:
            frozen = FrozenDict(args)
    else:
        frozen = freeze_args(parse_args(args), max_depth, deadline)
    return tuple.__new__(ToolCall, (
        tool,
        frozen,
        call_id, agent, session, principal, framework,
        time.time(),
        _EMPTY if context is None or (type(context) is dict and not context)
        else _frozen_context(context, max_depth, deadline),
    ))


def _frozen_context(context: Mapping[str, Any], max_depth: int,
                    deadline: float | None) -> FrozenDict:
    """A call's context, frozen: a flat dict of plain values (the user's request, a few ids)
    is copied as it is."""
    if type(context) is dict:
        for key, value in context.items():
            if type(value) not in _SCALAR_TYPES or type(key) is not str:
                return freeze_args(context, max_depth, deadline)
        return FrozenDict(context)
    return freeze_args(parse_args(context), max_depth, deadline)
