"""Session facts: the values a session has already dealt with, kept in the state store.

One record per session (``facts:<session>``), a JSON object::

    {"seen": {"emails": [...], "ibans": [...]},          # parties of calls that ran
     "untrusted": {"urls": [...], "emails": [...]},      # entities in untrusted tool output
     "untrusted_at": 1767225600.0}                        # when untrusted content was last read

Each list keeps the most recent values (at most ``MAX_VALUES`` per kind, the oldest dropped
first), so the record stays small whatever the session does. Writers merge with
compare-and-set, so concurrent processes never lose each other's values; a record that cannot
be written after a few tries is reported, never silently skipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["CATEGORIES", "FACTS_TTL", "MAX_VALUES", "facts_key", "merged"]

MAX_VALUES = 1000
FACTS_TTL = 7 * 24 * 3600.0  # as long as a session's history is kept by default
CATEGORIES = ("seen", "untrusted")


def facts_key(session: str) -> str:
    """The record key of a session's facts (hash-tagged per session, as its history is)."""
    return f"facts:{{{session}}}"


def merged(value: Mapping[str, Any] | None, category: str,
           values: Mapping[str, Iterable[str]], now: float) -> dict[str, Any]:
    """``value`` with ``values`` (kind -> strings) added under ``category``: new ones last, a
    value already there moved last, each kind cut to its ``MAX_VALUES`` most recent."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown category {category!r}")
    out: dict[str, Any] = dict(value or {})
    section = dict(out.get(category) or {})
    for kind, new in values.items():
        fresh = list(dict.fromkeys(new))
        if not fresh:
            continue
        kept = [v for v in section.get(kind, ()) if v not in set(fresh)]
        section[kind] = (kept + fresh)[-MAX_VALUES:]
    out[category] = section
    if category == "untrusted":
        out["untrusted_at"] = now
    return out
