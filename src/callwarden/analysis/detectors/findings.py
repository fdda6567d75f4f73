"""Findings: where a detector matched, never what it matched.

A :class:`Finding` carries the detector, the category, the span and the JSON path; a
:class:`Findings` list also says whether the scan was complete. Neither holds matched text,
so both are safe to log, to put in an audit event and to show to a model.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

Span = tuple[int, int]
DEFAULT_REPLACEMENT = "[REDACTED:{detector}]"
PathPart = str | int


@dataclass(frozen=True, slots=True)
class Finding:
    """Where a detector matched. Holds no matched text, so its repr is safe to log.

    Attributes:
        detector: the detector's name (``aws_access_key_id``, ``email`` ...).
        category: ``secret``, ``pii`` or ``custom``.
        start: offset of the first matched character in the scanned string.
        end: offset just past the match.
        path: where the string sits in a scanned structure (``args.body``, ``args.to[1]``);
            empty for a bare string.
        in_key: True when the match is in a mapping key rather than its value.
    """

    detector: str
    category: str
    start: int
    end: int
    path: str = ""
    in_key: bool = False
    parts: tuple[PathPart, ...] = field(default=(), repr=False)

    @property
    def span(self) -> Span:
        """``(start, end)`` of the match."""
        return (self.start, self.end)

    def describe(self) -> str:
        """``"detector in path"``: a one-line, value-free description."""
        where = self.path or "text"
        return f"{self.detector} in {where}{' (key)' if self.in_key else ''}"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe record for audit events (no value)."""
        return {"detector": self.detector, "category": self.category, "path": self.path,
                "start": self.start, "end": self.end, "in_key": self.in_key}


def redact_spans(text: str, findings: Iterable[Finding], replacement: str) -> str:
    """``text`` with each finding's span replaced by ``replacement`` (``{detector}`` and
    ``{category}`` filled in); overlapping spans are replaced once."""
    spans = sorted((f.start, f.end, f.detector, f.category) for f in findings)
    out: list[str] = []
    pos = 0
    for start, end, det, cat in spans:
        if end <= pos:
            continue
        start = max(start, pos)
        out.append(text[pos:start])
        out.append(replacement.format(detector=det, category=cat))
        pos = end
    out.append(text[pos:])
    return "".join(out)


class Findings(list[Finding]):
    """A list of findings that also says whether the scan was complete.

    Attributes:
        truncated: True when some text was not scanned (a string over the size cap, the total
            budget spent, nesting too deep, a value that cannot be read as text).
        notes: why, one short line per cause, without values.
        unscanned: the paths (as parts) of values not fully scanned; ``redact`` replaces them
            whole, so a rewrite never passes on text nobody looked at.
    """

    __slots__ = ("notes", "truncated", "unscanned")

    def __init__(self, items: Iterable[Finding] = ()) -> None:
        super().__init__(items)
        self.truncated = False
        self.notes: list[str] = []
        self.unscanned: list[tuple[PathPart, ...]] = []

    def note(self, message: str, parts: tuple[PathPart, ...] | None = None) -> None:
        """Marks the scan incomplete and records why (and, if given, which value)."""
        self.truncated = True
        if parts is not None:
            self.unscanned.append(parts)
        if len(self.notes) < 20:
            self.notes.append(message)

    def summary(self, limit: int = 3) -> str:
        """``"aws_secret_key in args.body, jwt in args.headers (+2 more)"`` (value-free)."""
        seen: list[str] = []
        for f in self:
            text = f.describe()
            if text not in seen:
                seen.append(text)
        head = ", ".join(seen[:limit])
        if len(seen) > limit:
            head += f" (+{len(seen) - limit} more)"
        return head

    def __repr__(self) -> str:
        return f"Findings({list.__repr__(self)}, truncated={self.truncated})"
