"""A decision whose counters live in several Redis Cluster slots: counted slot by slot, given
back when a later slot refuses.

No script spans two slots, so such a decision is one consume script per slot, in a fixed
order (by slot; the slot of the session's history last, because the effect it records
depends on every counter). Each script checks its counters and takes this call's usage when
none of them is exceeded and no earlier slot refused, as one script does for a whole
decision. When a later slot refuses (or fails), what the earlier ones took is given back: the
refund script removes exactly this call's entries (``token:index:weight``) from windowed
counters and lowers each total by this call's weight; of a counter with members, it removes
those the call brought (the script says which its key did not hold), unless another call has
held one since (a later expiry). A member held before and held again by the refused call keeps
its later expiry: an overcount. ``always`` counters stay counted, as they would in one
script.

Never more than the limit: every slot checks the usage it holds, reservations of calls still
in flight included. Never less: a call counts in every slot before it is allowed, and only a
refused call is given back. The cost is that a call may see a reservation that is then given
back, and be refused although the limit was not reached in the end: failing closed. A refund
that cannot be sent (the node failed, the deadline passed) leaves the usage counted: an
overcount, never an undercount.

The flow is written once, as a generator of :class:`Step` s; ``callwarden._flow``'s
``drive`` and ``adrive`` run it with a synchronous or an asynchronous client.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any

from callwarden.state._base import Counter, CounterState, HistoryEntry
from callwarden.state._redis_scripts import (
    Script,
    consume,
    fresh_members,
    parse_consume,
    refund,
)

__all__ = ["Consumption", "Step", "consume_across_slots"]

Flow = Generator["Step", Any, list[CounterState]]


@dataclass(frozen=True, slots=True)
class Step:
    """One script to run on the node serving ``slot``."""

    slot: int
    script: Script
    keys: list[str]
    args: list[str]


@dataclass(frozen=True, slots=True)
class Consumption:
    """What one consume sends, per counter, as the store laid it out.

    Attributes:
        counters: The counters, in the caller's order.
        keys: Per counter, its entries key and its total key.
        bodies: Per counter, the script's arguments limit, window, weight, always, expires_at.
        slots: Per counter, its slot.
        head: now, the call's token, tolerance, TTL margin, idle TTL (the script's header
            without commit and count).
        history_ttl: The history's TTL argument.
        record: The call to record in its session's history, or ``None``.
        history_key: That history's key.
        history_slot: Its slot.
        tails: Per counter, the script's arguments after its rank and effect (its spacings
            and its members).
        now: The call's time.
    """

    counters: Sequence[Counter]
    keys: list[tuple[str, str]]
    bodies: list[tuple[str, str, str, str, str]]
    slots: list[int]
    head: tuple[str, str, str, str, str]
    history_ttl: str
    record: HistoryEntry | None
    history_key: str
    history_slot: int
    tails: list[tuple[str, ...]]
    now: float


def consume_across_slots(plan: Consumption, commit: bool) -> Flow:
    """Consumes ``plan`` slot by slot; returns one state per counter, as one script would."""
    groups: dict[int, list[int]] = {}
    for i, slot in enumerate(plan.slots):
        groups.setdefault(slot, []).append(i)
    order = sorted(groups)
    if plan.record is not None:
        if plan.history_slot in groups:
            order.remove(plan.history_slot)
        order.append(plan.history_slot)
    priorities = _priorities(plan.record, len(plan.counters))
    found: dict[int, CounterState] = {}
    blocked = False
    best: tuple[int, str] | None = None  # the exceeded counter whose effect is recorded
    taken: list[Step] = []
    try:
        for slot in order:
            members = groups.get(slot, [])
            counting = commit and not blocked
            last = plan.record is not None and slot == plan.history_slot
            step = _consume_step(plan, slot, members, counting, last, priorities, best)
            sent = [plan.counters[i] for i in members]
            reply = yield step
            replies = parse_consume(sent, reply, plan.now)
            refused = False
            for i, state in zip(members, replies, strict=True):
                found[i] = state
                if state.exceeded:
                    refused = True
                    mine = priorities[i]
                    if mine is not None and (best is None or mine[0] > best[0]):
                        best = mine
            if refused:
                blocked = True
            elif counting and (back := _refund_step(plan, slot, members,
                                                    fresh_members(sent, reply))) is not None:
                taken.append(back)
    except Exception:
        yield from _give_back(taken)
        raise
    if blocked:
        yield from _give_back(taken)
    return [found[i] for i in range(len(plan.counters))]


def _consume_step(plan: Consumption, slot: int, members: list[int], counting: bool,
                  recording: bool, priorities: list[tuple[int, str] | None],
                  best: tuple[int, str] | None) -> Step:
    """The consume script of one slot's counters; ``recording``, it also records the call,
    knowing the highest-ranked exceeded counter of the slots before (``best``)."""
    now, token, tolerance, margin, idle = plan.head
    args = [now, "1" if counting else "0", token, tolerance, margin, idle, str(len(members))]
    keys: list[str] = []
    record = plan.record if recording else None
    if record is not None:
        effect, rank = (record.effect, "") if best is None else (best[1], str(best[0]))
        args += ("1", record.tool, effect, plan.history_ttl, rank)
    else:
        args += ("0", "", "", "", "")
    for i in members:
        keys += plan.keys[i]
        args += plan.bodies[i]
        mine = priorities[i] if record is not None else None
        args += ("", "") if mine is None else (str(mine[0]), mine[1])
        args += plan.tails[i]
    if record is not None:
        keys.append(plan.history_key)
    return Step(slot, consume, keys, args)


def _refund_step(plan: Consumption, slot: int, members: list[int],
                 fresh: list[tuple[str, ...]]) -> Step | None:
    """The refund of what one slot's script took for this call (its ``always`` counters stay
    counted; of a counter with members, those its key did not hold before: ``fresh``, per
    member of the slot); ``None`` when it took nothing that can be given back."""
    keys: list[str] = []
    args = [plan.head[1]]
    for index, (i, added) in enumerate(zip(members, fresh, strict=True), 1):
        counter = plan.counters[i]
        if counter.members:
            if added:
                keys += plan.keys[i]
                args += ("m", plan.bodies[i][4], str(len(added)), *added)
            continue
        if counter.always or counter.weight <= 0:
            continue
        keys += plan.keys[i]
        args += ("t" if counter.window is None else "w", str(index), plan.bodies[i][2])
    return Step(slot, refund, keys, args) if keys else None


def _give_back(taken: list[Step]) -> Generator[Step, Any, None]:
    for step in taken:
        try:
            yield step
        except Exception:
            continue  # left counted: an overcount, never an undercount


def _priorities(record: HistoryEntry | None, n: int) -> list[tuple[int, str] | None]:
    """Per counter, its rank in deciding the recorded effect as a unique integer (higher wins),
    with the effect, so that a script seeing only some counters picks as
    :meth:`HistoryEntry.effect_for` does over all: the highest rank, the first of equal ones."""
    out: list[tuple[int, str] | None] = [None] * n
    if record is None:
        return out
    ranked = sorted((-alternative[0], i, alternative[1])
                    for i, alternative in enumerate(record.if_exceeded[:n])
                    if alternative is not None)
    for position, (_, i, effect) in enumerate(ranked):
        out[i] = (len(ranked) - position, effect)
    return out
