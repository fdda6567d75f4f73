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

from callwarden.review.reader import EventReader, require_events

__all__ = ["AuditSummary", "LatencyHistogram", "summarize", "summarize_events"]

_MAX_KEYS = 10_000
_OTHER = "(other)"


class LatencyHistogram:
    """Log-scale buckets (2% wide): percentiles within about 1%, constant memory.

    Any positive magnitude gets buckets of its own, below 1 as above (a 0.02 ms tool call and
    a 40 s one alike); zeros are counted apart. A percentile is its bucket's geometric middle,
    kept within the smallest and largest values seen, to three significant digits.
    """

    __slots__ = ("_buckets", "_zeros", "count", "max", "min")

    _BASE = math.log(1.02)

    def __init__(self) -> None:
        self._buckets: Counter[int] = Counter()
        self._zeros = 0
        self.count = 0
        self.max = 0.0
        self.min = math.inf

    def add(self, value: float) -> None:
        """Adds one observation (microseconds, milliseconds: any unit); negative, infinite and
        NaN values are ignored."""
        if 0 < value < math.inf:
            self._buckets[math.floor(math.log(value) / self._BASE)] += 1
        elif value == 0:
            self._zeros += 1
        else:
            return
        self.count += 1
        if value > self.max:
            self.max = value
        if value < self.min:
            self.min = value

    def percentile(self, p: float) -> float | None:
        """The ``p``-th percentile (0-100, nearest rank), or None when empty."""
        if not self.count:
            return None
        rank = max(1, math.ceil(p / 100 * self.count))
        seen = self._zeros
        if seen >= rank:
            return 0.0
        for bucket in sorted(self._buckets):
            seen += self._buckets[bucket]
            if seen >= rank:
                middle = math.exp((bucket + 0.5) * self._BASE)
                # Rounded first, then clamped: a percentile never passes the extremes.
                return min(max(_significant(middle), self.min), self.max)
        return self.max


def _significant(value: float, digits: int = 3) -> float:
    """``value`` to ``digits`` significant digits: the buckets are 2% wide, more is noise."""
    return float(f"{value:.{digits}g}")


def _show(value: float | None) -> str:
    """A latency for people: no exponent above 1, three significant digits below."""
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}" if value < 1 else f"{value:.{3 - len(str(int(value)))}f}"


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
    dropped: int = 0  # events the log says it is missing (audit_dropped, delivery: lossy)
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
            if type(duration) is float or type(duration) is int:  # not bool, not a string
                self.duration_ms.add(duration)
            return
        if kind == "audit_dropped":
            count = event.get("dropped")
            if type(count) is int and count > 0:
                self.dropped += count
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
        if type(elapsed) is float or type(elapsed) is int:
            self.latency_us.add(elapsed)
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
            "dropped": self.dropped,
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
        if not self.decisions and not self.outcomes:
            note = f" ({self.corrupt} unreadable lines skipped)" if self.corrupt else ""
            return f"no audit events: 0 decisions, 0 outcomes{note}"
        d = self.to_dict(top)
        span = f" ({self.first_time} … {self.last_time})" if self.first_time else ""
        lines = [f"{self.decisions} decisions, {self.outcomes} outcomes{span}"]

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
        for title, histogram in (("decision latency (µs)", self.latency_us),
                                 ("tool duration (ms)", self.duration_ms)):
            if histogram.count:
                lines.append(f"{title}: " + "  ".join(
                    f"p{p} {_show(histogram.percentile(p))}" for p in (50, 90, 99))
                    + f"  max {_show(histogram.max)}")
        if self.corrupt:
            lines.append(f"note: {self.corrupt} unreadable lines skipped")
        if self.dropped:
            lines.append(f"warning: {self.dropped} events were dropped (delivery: lossy) and "
                         "are not in this log; these counts leave them out")
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
    """Summarizes one or more JSONL audit logs, streaming.

    Raises:
        AuditLogError: the logs hold no decision or outcome event (empty, not JSON, another
            program's log).
        OSError: a log cannot be read.
    """
    files = [paths] if isinstance(paths, str | Path) else list(paths)
    require_events(files, ("decision", "outcome"))
    reader = EventReader(files)
    summary = summarize_events(reader)
    summary.corrupt = reader.corrupt
    return summary
