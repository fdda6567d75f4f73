"""The service's view of the audit trail: query the policy's JSONL logs, follow new decisions
as they are written (server-sent events), replay a candidate policy over the logs.

The logs read are the policy's ``jsonl`` sinks (with their rotated pieces): what every worker
on this host writes. Workers on other hosts write their own; a shared sink (OpenTelemetry) is
queried where it lands.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from callwarden._guard import Guard
from callwarden.exceptions import AuditLogError
from callwarden.review import EventReader, expand_rotated, replay_events

__all__ = ["FILTERS", "MAX_EVENTS", "Filters", "follow", "live_log", "log_files", "query",
           "replay_text"]

_SECONDS = re.compile(r"[0-9]+(\.[0-9]+)?")  # seconds since the epoch, as the schema says
FILTERS = ("type", "session", "tool", "effect", "rule", "agent")
MAX_EVENTS = 10_000
_POLL = 0.2  # seconds between looks at the log's end when following it


def _jsonl(guard: Guard) -> list[Path]:
    audit = guard.loaded.audit
    return [Path(s.options["path"]) for s in (audit.sinks if audit else ())
            if s.kind == "jsonl" and "path" in s.options]


def log_files(guard: Guard) -> list[Path]:
    """The policy's JSONL logs, each preceded by its rotated pieces; none without one."""
    return expand_rotated(_jsonl(guard))


def live_log(guard: Guard) -> Path | None:
    """The file the policy's first JSONL sink writes now, or None."""
    paths = _jsonl(guard)
    return paths[0] if paths else None


class Filters:
    """Which events a query or a stream wants: field equalities and a time window."""

    def __init__(self, params: Mapping[str, str]) -> None:
        self.equal = {k: params[k] for k in FILTERS if params.get(k)}
        self.since = _instant(params.get("since"), "since")
        self.until = _instant(params.get("until"), "until")

    def __call__(self, event: Mapping[str, Any]) -> bool:
        if any(str(event.get(k)) != v for k, v in self.equal.items()):
            return False
        if self.since is None and self.until is None:
            return True
        when = event.get("time")
        if not isinstance(when, str):
            return False
        return (self.since is None or when >= self.since) and \
            (self.until is None or when < self.until)


def _instant(value: str | None, name: str) -> str | None:
    """A time bound as the log writes times (ISO 8601, UTC): from seconds since the epoch or
    an ISO 8601 time."""
    if not value:
        return None
    if _SECONDS.fullmatch(value):
        try:
            when = dt.datetime.fromtimestamp(float(value), dt.UTC)
        except (OverflowError, OSError, ValueError):  # beyond the calendar: its end
            return "9999"
    else:
        try:  # RFC 3339 allows a lower-case t and z
            when = dt.datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"'{name}' must be seconds since the epoch or an ISO 8601 "
                             "time") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
    try:
        return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    except (OverflowError, ValueError):  # an offset that leaves the calendar
        return "9999" if when.year > 1 else "0000"


def query(paths: list[Path], wanted: Filters, limit: int) -> list[dict[str, Any]]:
    """The last ``limit`` events that match, oldest first."""
    found: deque[dict[str, Any]] = deque(maxlen=limit)
    for event in EventReader([p for p in paths if p.exists()]):
        if wanted(event):
            found.append(event)
    return list(found)


async def follow(path: Path | None, wanted: Filters,
                 gone: Callable[[], Awaitable[bool]]) -> AsyncIterator[bytes]:
    """Server-sent events: each matching event written to ``path`` from now on, until the
    client leaves; a comment every few seconds keeps proxies from closing the stream."""
    yield b": callwarden audit stream\n\n"
    offset = path.stat().st_size if path is not None and path.exists() else 0
    partial = b""
    quiet = 0.0
    while not await gone():
        await asyncio.sleep(_POLL)
        quiet += _POLL
        if path is None or not path.exists():
            continue
        size = path.stat().st_size
        if size < offset:  # rotated: the live file starts again
            offset, partial = 0, b""
        if size == offset:
            if quiet >= 10:
                quiet = 0.0
                yield b": keep-alive\n\n"
            continue
        with open(path, "rb") as f:
            f.seek(offset)
            chunk = f.read(size - offset)
        offset = size
        lines = (partial + chunk).split(b"\n")
        partial = lines.pop()  # a line still being written
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and wanted(event):
                quiet = 0.0
                yield (f"event: {event.get('type', 'event')}\ndata: ".encode()
                       + json.dumps(event, separators=(",", ":")).encode() + b"\n\n")


def replay_text(policy_text: str, base_dir: Path, paths: list[Path],
                show: int) -> dict[str, Any]:
    """Re-decides the logged decisions with a candidate policy (YAML text; relative paths
    from ``base_dir``), on a store of its own: what would change.

    Raises:
        PolicyError: the candidate has problems.
        AuditLogError: there is no decision to replay.
    """
    from callwarden.policyfile import load_policy_text

    live = [p for p in paths if p.exists()]
    if not live:
        raise AuditLogError("the policy has no JSONL audit log to replay (audit: sinks: "
                            "[{jsonl: PATH}])")
    loaded = load_policy_text(policy_text, filename="<candidate>", base_dir=base_dir)
    guard = Guard.from_loaded(loaded, audit=False, state="memory")
    try:
        report = replay_events(guard, EventReader(live), show=show)
    finally:
        guard.close()
    if not report.decisions:
        raise AuditLogError("the audit log holds no decision to replay")
    return dict(report.to_dict())

