"""The state-store contract: atomic check-and-count for limits, session history, records.

Two narrow interfaces, one per user:

* :class:`LimitStore`, what the engine needs: **counters** (weighted events per key, read and
  written by ``consume``) and **session history** (an incremental summary per session, written
  by ``record`` and read by ``history``);
* :class:`RecordStore`, what approvals need: **key-value records** (small JSON objects with a
  version and an optional expiry: approval requests, remembered grants), read by ``get`` /
  ``scan`` and written by ``put`` or, atomically, ``compare_and_set``.

:class:`StateStore` is both, each kind of state under its own namespace: what the shipped
stores are, so one store can hold a deployment's limits and approvals.

Window semantics, shared by every store. An event counted at time ``t`` under a counter with
window ``w`` *expires* at ``e = t + w`` (one float addition, stored as is). At time ``now`` it
counts when ``now < e``: the boundary is exclusive, so the event stops counting at
``t + w`` exactly. Events stamped after ``now`` (another process's clock running ahead) still
count: undercounting would let calls through, overcounting only delays them. A key must always
be used with the same window, and with members or without.

A counter with **members** counts distinct members instead of weights (the calls in flight,
the recipients of a fan-out): each member of a counted call expires at ``now + w`` (one the key
holds already has its expiry moved on, never back), :meth:`LimitStore.release` removes
members, and usage is the number of members the key holds other than the call's own, which
each weigh 1. A counter with a **spacing** refuses a call that comes too soon after the newest
event in its window (a retry's backoff).
"""

from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, NamedTuple, Self

from callwarden.exceptions import StoreUnavailable

if TYPE_CHECKING:
    from callwarden.state._history import SessionHistory

__all__ = [
    "DEFAULT_IDLE_TTL",
    "HISTORY_EFFECTS",
    "RAN_EFFECTS",
    "TOLERANCE",
    "Counter",
    "CounterState",
    "HistoryEntry",
    "LimitStore",
    "RecordStore",
    "StateStore",
    "StoreUnavailable",
    "StoredValue",
    "check_key",
    "check_ttl",
    "check_version",
    "deadline_passed",
    "decode_value",
    "encode_value",
    "exceeds",
    "reset_time",
    "spaced_out",
    "spaced_reset",
    "spacing_wait",
    "unchanged",
]

TOLERANCE = 1e-9
"""Relative slack on ``used + weight > limit``, so that 3 x 0.1 fits a limit of 0.3."""

DEFAULT_IDLE_TTL = 7 * 86400.0
"""Seconds after its last use that a windowless counter or a session's history is forgotten."""

RAN_EFFECTS = frozenset({"allow", "modify", "approved"})
#: The effects the engine records in a session's history (a decision's effect, or
#: ``approved`` when an approved call runs): what a snapshot limited to some tools reads.
HISTORY_EFFECTS = ("allow", "modify", "ask", "deny", "halt", "approved")
"""Recorded effects of calls that ran: what ``history.tools`` counts."""


@dataclass(frozen=True, slots=True)
class Counter:
    """One limit to check and count: at most ``limit`` within ``window`` seconds.

    Attributes:
        key: Where usage is counted, built by the caller (``"budget:rule-id:session=s1"``).
        limit: The most usage allowed within the window.
        window: Sliding window in seconds; ``None`` counts forever.
        weight: How much this call uses (1 per call, or e.g. an amount of money).
        always: Count this call even when it is not allowed (attempt caps).
        shard: What the counter is kept with: counters of one shard, and the history of the
            session of that name, share a Redis Cluster slot, so a decision touching only them
            is one atomic step (a per-session counter passes its session). ``None``: its own
            key. A key must always be used with the same shard.
        members: Distinct strings this call holds under the key (a call's slot, the
            recipients it names); usage is then the number of members held by other calls,
            the call weighs ``len(members)``, and a member held already counts once (see the
            module docstring). Needs a window (how long a member is held), a weight of 1 and
            no ``always``.
        spacing: The least seconds between events: with ``n`` events in the window (the
            usage, for counters of weight 1), a call is exceeded unless it comes at least
            ``spacing[min(n, len(spacing)) - 1]`` after the newest of them. Needs a window.
    """

    key: str
    limit: float
    window: float | None
    weight: float = 1.0
    always: bool = False
    shard: str | None = None
    members: tuple[str, ...] = ()
    spacing: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not self.key:
            raise ValueError(f"Counter key must be a non-empty string, got {self.key!r}")
        if not _is_number(self.limit) or not math.isfinite(self.limit) or self.limit < 0:
            raise ValueError(f"Counter limit must be a finite number >= 0, got {self.limit!r}")
        if self.window is not None and (
            not _is_number(self.window) or not math.isfinite(self.window) or self.window <= 0
        ):
            raise ValueError(
                f"Counter window must be None or a finite number > 0, got {self.window!r}"
            )
        if not _is_number(self.weight) or not math.isfinite(self.weight) or self.weight < 0:
            raise ValueError(f"Counter weight must be a finite number >= 0, got {self.weight!r}")
        if self.shard is not None and not isinstance(self.shard, str):
            raise ValueError(f"Counter shard must be None or a string, got {self.shard!r}")
        if self.members or self.spacing:
            self._check_extras()

    @property
    def cost(self) -> float:
        """What this call weighs: its weight, or one per member."""
        return float(len(self.members)) if self.members else self.weight

    def _check_extras(self) -> None:
        if self.window is None:
            raise ValueError("Counter members and spacing need a window")
        members = self.members
        if members:
            if not isinstance(members, tuple) or not all(
                    isinstance(m, str) and m for m in members) or len(set(members)) != len(members):
                raise ValueError(f"Counter members must be a tuple of distinct non-empty "
                                 f"strings, got {members!r}")
            if self.weight != 1.0 or self.always or self.spacing:
                raise ValueError("Counter members go with a weight of 1, without always or "
                                 "spacing")
        spacing = self.spacing
        if spacing and (not isinstance(spacing, tuple) or not all(
                _is_number(d) and math.isfinite(d) and d >= 0 for d in spacing)):
            raise ValueError(f"Counter spacing must be a tuple of finite numbers >= 0, got "
                             f"{spacing!r}")


class CounterState(NamedTuple):
    """What :meth:`StateStore.consume` found for one :class:`Counter` (a named tuple: one is
    built per counter of every counted call, and a frozen dataclass costs several times as
    much to build).

    Attributes:
        used: Usage within the window *before* this call.
        exceeded: Whether ``used + weight > limit``.
        reset_at: When enough usage leaves the window for a call like this one to fit (and,
            with a spacing, the wait after the newest event has passed), counting this call's
            own usage when it was counted (an ``always`` counter's attempt); ``None`` when
            not exceeded, or when it never will (no window, or ``weight > limit``).
        last_at: When the newest event counted under the key before this call happened (its
            expiry minus the window; for members, the newest member's), ``None`` without
            one in the window or without a window.
    """

    used: float
    exceeded: bool
    reset_at: float | None = None
    last_at: float | None = None


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """A decided call to add to its session's history in the same atomic step as the counters.

    The effect recorded depends on what the counters find, since exceeding a limit changes the
    decision: ``effect`` when no counter is exceeded; otherwise, among the exceeded counters
    whose ``if_exceeded`` entry is a ``(rank, effect)`` pair, the effect of the highest rank
    (the first of equal ranks). ``if_exceeded`` is aligned with the counters (shorter: None).

    Attributes:
        session: The session whose history grows.
        tool: The tool called.
        effect: The effect recorded when no counter is exceeded.
        if_exceeded: Per counter, ``None`` or the ``(rank, effect)`` its exceeding decides.
    """

    session: str
    tool: str
    effect: str
    if_exceeded: tuple[tuple[float, str] | None, ...] = ()

    def effect_for(self, exceeded: Sequence[bool]) -> str:
        """Returns the effect to record, given which counters are exceeded."""
        effect, best = self.effect, -math.inf
        for hit, alternative in zip(exceeded, self.if_exceeded, strict=False):
            if hit and alternative is not None and alternative[0] > best:
                best, effect = alternative
        return effect


def deadline_passed(deadline: float | None, now: float) -> bool:
    """Whether ``now`` (a :func:`time.perf_counter` value) is past ``deadline``."""
    return deadline is not None and now > deadline


def exceeds(used: float, weight: float, limit: float) -> bool:
    """Returns whether ``used + weight > limit``, with :data:`TOLERANCE` for float sums."""
    scale = abs(limit)  # not max(1.0, ...): a builtin call costs more than the comparison
    return used + weight - limit > TOLERANCE * (scale if scale > 1.0 else 1.0)


def reset_time(
    entries: Iterable[tuple[float, float]], used: float, weight: float, limit: float
) -> float | None:
    """Returns when the call fits, given ``(expires_at, weight)`` entries oldest first."""
    if exceeds(0.0, weight, limit):
        return None
    need = used + weight - limit - TOLERANCE * max(1.0, abs(limit))
    removed = 0.0
    for expires_at, entry_weight in entries:
        removed += entry_weight
        if removed >= need:
            return expires_at
    return None


def spacing_wait(spacing: Sequence[float], events: float) -> float:
    """The least seconds after the newest of ``events`` earlier events (>= 1) a call may come."""
    return spacing[min(len(spacing), max(1, int(events + 0.5))) - 1]


def spaced_out(counter: Counter, used: float, last_at: float | None, now: float) -> bool:
    """Whether a call comes sooner after the newest event than ``counter.spacing`` allows."""
    return bool(counter.spacing) and last_at is not None and used > 0 \
        and now < last_at + spacing_wait(counter.spacing, used)


def spaced_reset(counter: Counter, used: float, reset_at: float | None, last_at: float | None,
                 now: float, counted: bool) -> float | None:
    """The ``reset_at`` of an exceeded counter with a spacing: the later of its limit's
    (``reset_at``, computed when the usage after this call leaves no room for another; None
    then: never) and the end of the wait after the newest event, this call's when it was
    ``counted`` (an attempt)."""
    if not counter.spacing:
        return reset_at
    events = used + counter.weight if counted else used
    full = exceeds(events, counter.weight, counter.limit)
    if full and reset_at is None:
        return None
    newest = last_at if not counted else now if last_at is None else max(last_at, now)
    if newest is None or events <= 0:
        return reset_at
    ready = newest + spacing_wait(counter.spacing, events)
    return ready if not full or reset_at is None else max(reset_at, ready)


@dataclass(frozen=True, slots=True)
class StoredValue:
    """One key-value record as read from a store.

    Attributes:
        key: The record's key.
        value: A fresh copy of the stored JSON object (changing it changes nothing stored).
        version: 1 when created, plus one per write: what :meth:`StateStore.compare_and_set`
            compares.
        expires_at: When the record disappears (seconds since the epoch), or ``None``.
    """

    key: str
    value: dict[str, Any]
    version: int
    expires_at: float | None = None


def encode_value(value: Mapping[str, Any]) -> str:
    """Serializes a record's value as compact JSON.

    Raises:
        TypeError: ``value`` is not a mapping, or holds what JSON cannot.
        ValueError: ``value`` holds NaN or infinity, or a reference cycle.
    """
    if not isinstance(value, Mapping):
        raise TypeError(f"a stored value must be a JSON object (a dict), not {type(value).__name__}")
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def decode_value(text: str | bytes) -> dict[str, Any]:
    """Parses what :func:`encode_value` wrote.

    Raises:
        StoreUnavailable: The stored text is not a JSON object (a corrupted record).
    """
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise StoreUnavailable(f"a stored record is not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise StoreUnavailable("a stored record is not a JSON object")
    return value


def check_ttl(ttl: float | None) -> None:
    """Rejects a TTL that is not ``None`` or a finite number of seconds above zero."""
    if ttl is not None and (not _is_number(ttl) or not math.isfinite(ttl) or ttl <= 0):
        raise ValueError(f"ttl must be None or a finite number of seconds > 0, got {ttl!r}")


def check_version(version: int | None) -> None:
    """Rejects an expected version that is not ``None`` or an integer >= 1."""
    if version is not None and (type(version) is not int or version < 1):
        raise ValueError(f"expected_version must be None or an integer >= 1, got {version!r}")


def check_key(key: str) -> None:
    """Rejects a key that is not a non-empty string."""
    if not isinstance(key, str) or not key:
        raise ValueError(f"a key must be a non-empty string, got {key!r}")


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def unchanged(known: StoredValue | None, found: StoredValue | None) -> StoredValue | None:
    """``known`` when ``found`` is the same record (key, version and expiry), else ``found``."""
    if found is not None and known is not None and found.key == known.key \
            and found.version == known.version and found.expires_at == known.expires_at:
        return known
    return found


class _Store:
    """What every store shares: closing (also as a context manager, sync or async)."""

    __slots__ = ()

    #: True for a store whose operations never wait (on I/O, or on a lock held longer than
    #: microseconds): the engine then runs them inline on the async path, with no task or
    #: timer around them. Read from the class that sets it, never inherited.
    never_blocks: bool = False

    def close(self) -> None:
        """Releases connections and files. The store must not be used afterwards."""

    async def aclose(self) -> None:
        """Async twin of :meth:`close`."""
        self.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class LimitStore(_Store, ABC):
    """Where limits count and session history accumulates: what the engine needs.

    One abstract method per operation, each with an ``a``-prefixed async twin of the same
    semantics.
    """

    __slots__ = ()

    @abstractmethod
    def consume(
        self, counters: Sequence[Counter], *, now: float, commit: bool,
        deadline: float | None = None, record: HistoryEntry | None = None,
    ) -> list[CounterState]:
        """Checks every counter and counts this call, atomically as a whole.

        Usage of a counter is the sum of the weights counted under its key that have not
        expired at ``now``, or the number of members other calls hold (see the module
        docstring). ``always`` counters are counted in every case. The others are counted
        only when ``commit`` is true and no counter is exceeded: all or nothing.

        Args:
            counters: The limits that apply to this call (may be empty with ``record``).
            now: The call's time, in seconds (``time.time()``).
            commit: Count the call (``False`` only checks, apart from ``always`` counters).
            deadline: A :func:`time.perf_counter` value: wait no longer, write nothing after.
            record: The call to add to its session's history in the same atomic step (one
                round trip for a decision's counters and its history).

        Returns:
            One :class:`CounterState` per counter, in the same order.

        Raises:
            StoreUnavailable: The store failed or the deadline passed; nothing is known about
                the limits.
        """

    @abstractmethod
    async def aconsume(
        self, counters: Sequence[Counter], *, now: float, commit: bool,
        deadline: float | None = None, record: HistoryEntry | None = None,
    ) -> list[CounterState]:
        """Async twin of :meth:`consume`."""

    @abstractmethod
    def release(self, counters: Sequence[Counter], *, deadline: float | None = None) -> None:
        """Removes each counter's members from its key (a call's slots once it has finished);
        a member the key does not hold (released already, expired, never taken) is skipped.

        Raises:
            StoreUnavailable: The store failed or the deadline passed; the members may or may
                not have been removed (they expire with their window).
        """

    @abstractmethod
    async def arelease(self, counters: Sequence[Counter], *,
                       deadline: float | None = None) -> None:
        """Async twin of :meth:`release`."""

    @abstractmethod
    def record(self, session: str, tool: str, effect: str, *, now: float,
               deadline: float | None = None) -> None:
        """Adds one decided call to a session's history, in constant time.

        Raises:
            StoreUnavailable: The store failed.
        """

    @abstractmethod
    async def arecord(self, session: str, tool: str, effect: str, *, now: float,
                      deadline: float | None = None) -> None:
        """Async twin of :meth:`record`."""

    @abstractmethod
    def history(self, session: str, *, deadline: float | None = None,
                tools: Collection[str] | None = None) -> SessionHistory:
        """Returns a snapshot of a session's history; cost does not grow with its length.

        Args:
            tools: When given, the snapshot holds only these tools: ``tools``, ``attempts``,
                ``tool_effects`` and ``last_time_by_tool`` name no other, and ``effects``
                sums their decisions (those recorded with an effect of
                :data:`HISTORY_EFFECTS`) only; ``count`` and the first, last and last tool are
                the session's. The cost then grows with ``len(tools)``, not with the number
                of tools the session called. The engine asks for this when every condition
                reading the history names the tools it reads.

        Raises:
            StoreUnavailable: The store failed.
        """

    @abstractmethod
    async def ahistory(self, session: str, *, deadline: float | None = None,
                       tools: Collection[str] | None = None) -> SessionHistory:
        """Async twin of :meth:`history`."""


class RecordStore(_Store, ABC):
    """Versioned JSON records with compare-and-set: what approvals and grants are kept in.

    One abstract method per operation, each with an ``a``-prefixed async twin of the same
    semantics.
    """

    __slots__ = ()

    @abstractmethod
    def get(self, key: str) -> StoredValue | None:
        """Returns the record under ``key``, or ``None`` when there is none or it has expired.

        Raises:
            StoreUnavailable: The store failed.
        """

    @abstractmethod
    async def aget(self, key: str) -> StoredValue | None:
        """Async twin of :meth:`get`."""

    def get_changed(self, key: str, known: StoredValue | None) -> StoredValue | None:
        """:meth:`get`, or ``known`` itself when it is still the record (the same version and
        expiry; a record written with a ttl gets a new expiry on every write). Stores that can
        tell without reading the value do, so a large record read again and again is decoded
        once; the caller shares ``known`` then and must not change it.

        Raises:
            StoreUnavailable: The store failed.
        """
        return unchanged(known, self.get(key))

    async def aget_changed(self, key: str, known: StoredValue | None) -> StoredValue | None:
        """Async twin of :meth:`get_changed`."""
        return unchanged(known, await self.aget(key))

    @abstractmethod
    def put(self, key: str, value: Mapping[str, Any], *, ttl: float | None) -> int:
        """Writes ``value`` under ``key`` whatever is there, and returns its new version.

        Args:
            key: Where to write.
            value: A JSON object.
            ttl: Seconds (of the store's clock) until the record disappears; ``None``: never.

        Raises:
            StoreUnavailable: The store failed; the write may or may not have happened.
        """

    @abstractmethod
    async def aput(self, key: str, value: Mapping[str, Any], *, ttl: float | None) -> int:
        """Async twin of :meth:`put`."""

    @abstractmethod
    def compare_and_set(
        self, key: str, expected_version: int | None, value: Mapping[str, Any], *,
        ttl: float | None,
    ) -> bool:
        """Writes ``value`` only if the record is still at ``expected_version``, atomically.

        ``expected_version=None`` means "only if there is no record" (an expired record counts
        as none). Of several writers holding the same version, exactly one succeeds.

        Returns:
            Whether the value was written.

        Raises:
            StoreUnavailable: The store failed; the write may or may not have happened.
        """

    @abstractmethod
    async def acompare_and_set(
        self, key: str, expected_version: int | None, value: Mapping[str, Any], *,
        ttl: float | None,
    ) -> bool:
        """Async twin of :meth:`compare_and_set`."""

    @abstractmethod
    def delete(self, key: str) -> bool:
        """Removes the record under ``key``; returns whether there was one.

        Raises:
            StoreUnavailable: The store failed.
        """

    @abstractmethod
    async def adelete(self, key: str) -> bool:
        """Async twin of :meth:`delete`."""

    @abstractmethod
    def scan(self, prefix: str) -> list[StoredValue]:
        """Returns the live records whose key starts with ``prefix``, sorted by key.

        Not a snapshot: records written during the scan may or may not appear.

        Raises:
            StoreUnavailable: The store failed.
        """

    @abstractmethod
    async def ascan(self, prefix: str) -> list[StoredValue]:
        """Async twin of :meth:`scan`."""


class StateStore(LimitStore, RecordStore):
    """Both interfaces in one store, shared by the processes using it: what the shipped stores
    (memory, SQLite, Redis) are. Pick one with :func:`callwarden.state.open_store`."""

    __slots__ = ()
