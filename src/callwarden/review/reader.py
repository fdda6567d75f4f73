"""Streaming reader of JSONL audit logs: one line at a time, whatever the file's size."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from callwarden.audit._sinks import rotated_files
from callwarden.exceptions import AuditLogError

__all__ = ["AuditLogError", "EventReader", "expand_rotated", "require_events"]


def expand_rotated(paths: Iterable[str | Path]) -> list[Path]:
    """Each path preceded by its rotated pieces (oldest first)."""
    out: list[Path] = []
    for p in paths:
        out.extend(rotated_files(p) or [Path(p)])
    return out


def require_events(paths: Iterable[str | Path], types: Iterable[str],
                   name: str | Path | None = None) -> None:
    """Checks that ``paths`` (one log, with its rotated pieces, or several logs) hold at least
    one event whose ``type`` is in ``types``; reads only up to the first one.

    A check that passes on nothing is no check: a CI gate (``replay --fail-on any``) must not
    pass because its log path was mistyped or the file was empty.

    Args:
        paths: the files, as the reader would read them.
        types: the event types that count (``decision``, ``outcome``).
        name: what to call the files in the error (default: the file names).

    Raises:
        AuditLogError: saying what is wrong (unreadable, empty, not JSON, no such events).
    """
    files = [Path(p) for p in paths]
    wanted = frozenset(types)
    label = str(name) if name is not None else ", ".join(map(str, files)) or "(no file)"
    lines = 0
    seen: Counter[str] = Counter()
    first_bad: str | None = None
    for path in files:
        try:
            with open(path, "rb") as f:
                for number, raw in enumerate(f, 1):
                    if not raw.strip():
                        continue
                    lines += 1
                    try:
                        event = json.loads(raw)
                    except ValueError:
                        event = None
                    if not isinstance(event, dict):
                        if first_bad is None:
                            text = raw.strip().decode("utf-8", "replace")
                            first_bad = f"{path}:{number}: {text[:60]}{'…' if len(text) > 60 else ''}"
                        continue
                    kind = event.get("type")
                    if kind in wanted:
                        return
                    seen[kind if isinstance(kind, str) else "untyped"] += 1
        except OSError as e:
            raise AuditLogError(f"cannot read the audit log {path}: {e.strerror or e}") from e
    wanted_text = " or ".join(sorted(wanted))
    if not lines:
        raise AuditLogError(f"{label} is empty: it holds no audit events")
    if not seen:
        raise AuditLogError(f"{label} is not a JSONL audit log: none of its {lines} lines is a "
                            f"JSON object ({first_bad})")
    kinds = ", ".join(f"{n} {kind}" for kind, n in seen.most_common(5))
    raise AuditLogError(f"{label} holds no {wanted_text} events (its JSON lines: {kinds}); "
                        "is it a callwarden audit log?")


class EventReader:
    """Iterates over the events of one or more JSONL files, in order, in bounded memory.

    Lines that are not JSON objects (a foreign line, a line cut by a full disk) are skipped
    and counted in ``corrupt``; ``bytes_read``, ``total_bytes`` and ``events`` drive progress
    displays.

    Args:
        paths: the files, read in the given order.
        types: only yield events of these types (``decision``, ``outcome``); None for all.
        on_progress: called as ``on_progress(bytes_read, total_bytes, events)`` every ~4 MiB
            and once at the end (``events``: JSON events read so far, of any type).
    """

    def __init__(self, paths: Iterable[str | Path], *, types: Iterable[str] | None = None,
                 on_progress: Callable[[int, int, int], None] | None = None) -> None:
        self.paths = [Path(p) for p in paths]
        self.types = frozenset(types) if types is not None else None
        self.on_progress = on_progress
        self.corrupt = 0
        self.lines = 0
        self.events = 0
        self.bytes_read = 0
        self.total_bytes = sum(p.stat().st_size for p in self.paths if p.exists())

    def __iter__(self) -> Iterator[dict[str, Any]]:
        types = self.types
        loads = json.loads
        report_at = 1 << 22
        for path in self.paths:
            with open(path, "rb") as f:
                for raw in f:
                    self.lines += 1
                    self.bytes_read += len(raw)
                    if self.on_progress is not None and self.bytes_read >= report_at:
                        report_at = self.bytes_read + (1 << 22)
                        self.on_progress(self.bytes_read, self.total_bytes, self.events)
                    if not raw.startswith(b"{"):
                        if raw.strip():
                            self.corrupt += 1
                        continue
                    try:
                        event = loads(raw)
                    except ValueError:
                        self.corrupt += 1
                        continue
                    if not isinstance(event, dict):
                        self.corrupt += 1
                        continue
                    self.events += 1
                    if types is None or event.get("type") in types:
                        yield event
        if self.on_progress is not None:
            self.on_progress(self.bytes_read, self.total_bytes, self.events)
