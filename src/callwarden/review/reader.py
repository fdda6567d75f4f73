"""Streaming reader of JSONL audit logs: one line at a time, whatever the file's size."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from callwarden.audit._sinks import rotated_files

__all__ = ["EventReader", "expand_rotated"]


def expand_rotated(paths: Iterable[str | Path]) -> list[Path]:
    """Each path preceded by its rotated pieces (oldest first)."""
    out: list[Path] = []
    for p in paths:
        out.extend(rotated_files(p) or [Path(p)])
    return out


class EventReader:
    """Iterates over the events of one or more JSONL files, in order, in bounded memory.

    Lines that are not JSON objects (a foreign line, a line cut by a full disk) are skipped
    and counted in ``corrupt``; ``bytes_read`` and ``total_bytes`` drive progress displays.

    Args:
        paths: the files, read in the given order.
        types: only yield events of these types (``decision``, ``outcome``); None for all.
        on_progress: called as ``on_progress(bytes_read, total_bytes)`` every ~4 MiB.
    """

    def __init__(self, paths: Iterable[str | Path], *, types: Iterable[str] | None = None,
                 on_progress: Callable[[int, int], None] | None = None) -> None:
        self.paths = [Path(p) for p in paths]
        self.types = frozenset(types) if types is not None else None
        self.on_progress = on_progress
        self.corrupt = 0
        self.lines = 0
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
                        self.on_progress(self.bytes_read, self.total_bytes)
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
                    if types is None or event.get("type") in types:
                        yield event
        if self.on_progress is not None:
            self.on_progress(self.bytes_read, self.total_bytes)
