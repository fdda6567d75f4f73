"""``callwarden audit summary``: counts and latency percentiles over an audit log.

Bounded memory for any log size: counters keep at most ``_MAX_KEYS`` distinct values each
(the rest are counted under ``(other)``), denied calls are ranked with a pruned counter, and
latencies go into a log-scale histogram (percentiles within 1%).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from callwarden.review.reader import EventReader

__all__ = ["AuditSummary", "LatencyHistogram", "summarize", "summarize_events"]

_MAX_KEYS = 10_000
_OTHER = "(other)"


class LatencyHistogram:
    """Log-scale buckets (2% wide): percentiles within about 1%, constant memory."""

    __slots__ = ("_buckets", "count", "max")

    _BASE = math.log(1.02)

    def __init__(self) -> None:
        self._buckets: Counter[int] = Counter()
        self.count = 0
        self.max = 0.0

    def add(self, value: float) -> None:
        """Adds one observation (microseconds, or any positive unit)."""
        self.count += 1
        if value > self.max:
            self.max = value
        self._buckets[int(math.log(value) / self._BASE) if value > 1 else 0] += 1

    def percentile(self, p: float) -> float | None:
        """The ``p``-th percentile (0-100), or None when empty."""
        if not self.count:
            return None
        rank = p / 100 * self.count
        seen = 0
        for bucket in sorted(self._buckets):
            seen += self._buckets[bucket]
            if seen >= rank:
                # the bucket's geometric middle, never above the largest value seen
                return min(round(math.exp((bucket + 0.5) * self._BASE), 1), self.max) \
                    if bucket else min(1.0, self.max)
        return self.max


def _bump(counter: Counter[str], key: Any) -> None:
    key = "(none)" if key is None else str(key)
    if key in counter or len(counter) < _MAX_KEYS:
        counter[key] += 1
    else:
        counter[_OTHER] += 1


@dataclass(slots=True)
class AuditSummary:
    """Counts over an audit log. Every counter maps a value to a number of decisions."""

    decisions: int = 0
    outcomes: int = 0
    corrupt: int = 0
    effects: Counter[str] = field(default_factory=Counter)
    would_effects: Counter[str] = field(default_factory=Counter)
    tools: Counter[str] = field(default_factory=Counter)
    rules: Counter[str] = field(default_factory=Counter)
    agents: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    denied_calls: Counter[str] = field(default_factory=Counter)
    redactions: Counter[str] = field(default_factory=Counter)
    latency_us: LatencyHistogram = field(default_factory=LatencyHistogram)
    duration_ms: LatencyHistogram = field(default_factory=LatencyHistogram)
    first_time: str | None = None
    last_time: str | None = None

    def add(self, event: dict[str, Any]) -> None:
        """Counts one event."""
        kind = event.get("type")
        if kind == "outcome":
            self.outcomes += 1
            _bump(self.statuses, event.get("status"))
            duration = event.get("duration_ms")
            if isinstance(duration, int | float) and duration >= 0:
                self.duration_ms.add(float(duration))
            return
        if kind != "decision":
            return
        self.decisions += 1
        at = event.get("time")
        if isinstance(at, str):
            self.first_time = self.first_time or at
            self.last_time = at
        effect = event.get("effect")
        _bump(self.effects, effect)
        if event.get("would_effect"):
            _bump(self.would_effects, event["would_effect"])
        _bump(self.tools, event.get("tool"))
        _bump(self.rules, event.get("rule"))
        _bump(self.agents, event.get("agent"))
        for r in event.get("redactions") or ():
            _bump(self.redactions, r.get("detector"))
        elapsed = event.get("elapsed_us")
        if isinstance(elapsed, int | float) and elapsed >= 0:
            self.latency_us.add(float(elapsed))
        if effect in ("deny", "halt", "ask"):
            key = f"{event.get('tool')} {_signature(event.get('args'))}  [{event.get('rule')}]"
            self.denied_calls[key] += 1
            if len(self.denied_calls) > 2 * _MAX_KEYS:
                # Keep the most frequent half: the top of the ranking survives pruning.
                self.denied_calls = Counter(dict(self.denied_calls.most_common(_MAX_KEYS)))

    def to_dict(self, top: int = 10) -> dict[str, Any]:
        """A JSON-safe dict (the ``top`` entries of each counter)."""
        def pct(h: LatencyHistogram) -> dict[str, float | None]:
            return {"p50": h.percentile(50), "p90": h.percentile(90), "p99": h.percentile(99),
                    "max": h.max if h.count else None}

        return {
            "decisions": self.decisions, "outcomes": self.outcomes, "corrupt": self.corrupt,
            "first_time": self.first_time, "last_time": self.last_time,
            "effects": dict(self.effects.most_common()),
            "would_effects": dict(self.would_effects.most_common()),
            "tools": dict(self.tools.most_common(top)),
            "rules": dict(self.rules.most_common(top)),
            "agents": dict(self.agents.most_common(top)),
            "outcome_statuses": dict(self.statuses.most_common()),
            "top_denied_calls": [{"call": k, "count": n}
                                 for k, n in self.denied_calls.most_common(top)],
            "redactions": dict(self.redactions.most_common(top)),
            "latency_us": pct(self.latency_us),
            "tool_duration_ms": pct(self.duration_ms),
        }

    def format(self, top: int = 10) -> str:
        """A summary for people."""
        d = self.to_dict(top)
        lines = [f"{self.decisions} decisions, {self.outcomes} outcomes"
                 f" ({self.first_time} … {self.last_time})"]

        def table(title: str, counts: dict[str, int], total: int) -> None:
            if not counts:
                return
            lines.append(f"{title}:")
            for k, n in counts.items():
                share = f"{100 * n / total:5.1f}%" if total else ""
                lines.append(f"  {k:<40} {n:>9} {share}")

        table("by effect", d["effects"], self.decisions)
        table("would be, in enforce mode (observe)", d["would_effects"], self.decisions)
        table("by tool", d["tools"], self.decisions)
        table("by deciding rule", d["rules"], self.decisions)
        table("by agent", d["agents"], self.decisions)
        table("outcomes", d["outcome_statuses"], self.outcomes)
        if d["top_denied_calls"]:
            lines.append("top denied calls (deny, ask, halt):")
            for item in d["top_denied_calls"]:
                lines.append(f"  {item['count']:>7}  {item['call']}")
        table("redactions by detector", d["redactions"], 0)
        lat = d["latency_us"]
        if self.latency_us.count:
            lines.append(f"decision latency (µs): p50 {lat['p50']}  p90 {lat['p90']}  "
                         f"p99 {lat['p99']}  max {lat['max']}")
        dur = d["tool_duration_ms"]
        if self.duration_ms.count:
            lines.append(f"tool duration (ms): p50 {dur['p50']}  p90 {dur['p90']}  "
                         f"p99 {dur['p99']}  max {dur['max']}")
        if self.corrupt:
            lines.append(f"note: {self.corrupt} unreadable lines skipped")
        return "\n".join(lines)


def _signature(args: Any, limit: int = 80) -> str:
    text = json.dumps(args, sort_keys=True, separators=(",", ":"), default=str)
    return text if len(text) <= limit else text[:limit] + "…"


def summarize_events(events: Iterable[dict[str, Any]]) -> AuditSummary:
    """Summarizes events (any iterable)."""
    summary = AuditSummary()
    for event in events:
        summary.add(event)
    return summary


def summarize(paths: str | Path | Iterable[str | Path]) -> AuditSummary:
    """Summarizes one or more JSONL audit logs, streaming."""
    files = [paths] if isinstance(paths, str | Path) else list(paths)
    reader = EventReader(files)
    summary = summarize_events(reader)
    summary.corrupt = reader.corrupt
    return summary
