"""Replay (what-if): re-decide every recorded call with another policy and report what changes.

The log is streamed line by line and the calls are re-decided in recorded order, with one
guard, so rules that depend on the session's history see it build up as it did. Only the
first ``show`` changed calls are kept; everything else is counters, so memory stays bounded
whatever the log's size.

Replay decides on what the log holds: *redacted* arguments and context (a secret became
``[REDACTED:aws_access_key_id]``, long strings were cut). A rule that looks at a redacted
value may decide differently than it did live; such calls are counted in ``redacted``.
Rate limits and time windows count against the replay's own clock, not the recorded times. A
call re-decided into a slot of a ``concurrent`` limit lets it go at its recorded outcome (one
without an outcome, not run or never finished, holds it on).
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from callwarden.review.reader import EventReader, require_events

__all__ = ["Change", "ReplayReport", "parse_transition", "replay", "replay_events"]

_EFFECTS = ("allow", "modify", "ask", "deny", "halt")
_RUNNING = 65536  # re-decided calls waiting for their recorded outcome, at most


@dataclass(frozen=True, slots=True)
class Change:
    """One recorded call that the new policy decides differently."""

    decision_id: str | None
    time: str | None
    tool: str
    agent: str | None
    session: str | None
    old_effect: str
    new_effect: str
    old_rule: str | None
    new_rule: str | None
    new_source: str | None
    args: Any
    message: str

    @property
    def transition(self) -> str:
        """``allow->deny``."""
        return f"{self.old_effect}->{self.new_effect}"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict."""
        return {"decision_id": self.decision_id, "time": self.time, "tool": self.tool,
                "agent": self.agent, "session": self.session, "transition": self.transition,
                "old_effect": self.old_effect, "new_effect": self.new_effect,
                "old_rule": self.old_rule, "new_rule": self.new_rule,
                "new_source": self.new_source, "args": self.args, "message": self.message}


@dataclass(slots=True)
class ReplayReport:
    """What a new policy changes over a recorded log.

    Attributes:
        policy: the new policy's name and hash.
        decisions: recorded decision events replayed.
        changed: how many of them the new policy decides with another effect.
        rule_changed: same effect, but another deciding rule.
        transitions: changed calls by ``old->new`` effect.
        by_rule: changed calls by the rule that now decides them (``default`` for none).
        by_old_rule: changed calls by the rule that decided them before.
        changes: the first ``show`` changed calls.
        redacted: replayed calls whose recorded arguments were redacted or cut.
        invalid: recorded calls that were rejected as malformed (not re-decided).
        other_events: outcome and unknown events skipped; ``corrupt``: unreadable lines.
    """

    policy: str | None = None
    files: list[str] = field(default_factory=list)
    decisions: int = 0
    changed: int = 0
    rule_changed: int = 0
    transitions: Counter[str] = field(default_factory=Counter)
    by_rule: Counter[str] = field(default_factory=Counter)
    by_old_rule: Counter[str] = field(default_factory=Counter)
    changes: list[Change] = field(default_factory=list)
    redacted: int = 0
    invalid: int = 0
    other_events: int = 0
    corrupt: int = 0
    seconds: float = 0.0

    def count(self, old: str, new: str) -> int:
        """Changed calls from ``old`` to ``new`` (``*`` matches any effect)."""
        return sum(n for key, n in self.transitions.items()
                   if _matches(key, (old, new)))

    def failing(self, fail_on: Iterable[str]) -> list[str]:
        """The ``--fail-on`` specs (``allow-to-deny``, ``*-to-deny``, ``any``) that occurred."""
        return [spec for spec in fail_on if self.count(*parse_transition(spec))]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict of the whole report."""
        return {
            "policy": self.policy, "files": self.files, "decisions": self.decisions,
            "changed": self.changed, "rule_changed": self.rule_changed,
            "transitions": dict(self.transitions.most_common()),
            "by_rule": dict(self.by_rule.most_common()),
            "by_old_rule": dict(self.by_old_rule.most_common()),
            "changes": [c.to_dict() for c in self.changes],
            "redacted": self.redacted, "invalid": self.invalid,
            "other_events": self.other_events, "corrupt": self.corrupt,
            "seconds": round(self.seconds, 3),
            "events_per_second": round(self.decisions / self.seconds) if self.seconds else None,
        }

    def format(self) -> str:
        """A report for people."""
        lines = [f"replayed {self.decisions} decisions with policy {self.policy}: "
                 f"{self.changed} changed"
                 + (f", {self.rule_changed} decided by another rule with the same effect"
                    if self.rule_changed else "")]
        if self.transitions:
            lines.append("transitions:")
            lines += [f"  {k.replace('->', ' → '):<20} {n}" for k, n in
                      self.transitions.most_common()]
            lines.append("now decided by:")
            lines += [f"  {k:<30} {n}" for k, n in self.by_rule.most_common(20)]
        if self.changes:
            lines.append(f"changed calls (first {len(self.changes)}):")
            for c in self.changes:
                lines.append(f"  {c.time or ''} {c.tool} {_short(c.args)}  "
                             f"{c.old_effect} ({c.old_rule}) → {c.new_effect} ({c.new_rule}"
                             f"{', ' + c.new_source if c.new_source else ''})  "
                             f"[{c.decision_id}]")
        notes = []
        if self.redacted:
            notes.append(f"{self.redacted} replayed calls had redacted or cut arguments "
                         "(replay decides on the recorded, redacted values)")
        if self.invalid:
            notes.append(f"{self.invalid} malformed calls were rejected again, not re-decided")
        if self.corrupt:
            notes.append(f"{self.corrupt} unreadable lines skipped")
        lines += [f"note: {n}" for n in notes]
        return "\n".join(lines)


def _short(args: Any, limit: int = 100) -> str:
    import json

    text = json.dumps(args, separators=(",", ":"), default=str)
    return text if len(text) <= limit else text[:limit] + "…"


def parse_transition(spec: str) -> tuple[str, str]:
    """``allow-to-deny`` -> ``("allow", "deny")``; ``any`` -> ``("*", "*")``.

    Raises:
        ValueError: for anything else.
    """
    spec = spec.strip().lower()
    if spec in ("any", "*"):
        return ("*", "*")
    for sep in ("-to-", "->", "→"):
        if sep in spec:
            old, new = (p.strip() for p in spec.split(sep, 1))
            if old in (*_EFFECTS, "*") and new in (*_EFFECTS, "*"):
                return (old, new)
    raise ValueError(f"{spec!r} is not a transition: write e.g. allow-to-deny, "
                     f"*-to-allow or any (effects: {', '.join(_EFFECTS)})")


def _matches(key: str, pattern: tuple[str, str]) -> bool:
    old, new = key.split("->", 1)
    return pattern[0] in ("*", old) and pattern[1] in ("*", new)


def replay_events(guard: Any, events: Iterable[dict[str, Any]], *, show: int = 20,
                  report: ReplayReport | None = None) -> ReplayReport:
    """Re-decides recorded decision events with ``guard`` (a ``Guard``), in order."""
    report = report or ReplayReport()
    report.policy = guard.engine.settings.name
    check = guard.check
    started = time.perf_counter()
    # Recorded decision id -> the re-decided call, for those that may hold slots.
    running: OrderedDict[Any, Any] = OrderedDict()
    for event in events:
        if event.get("type") != "decision":
            report.other_events += 1
            if event.get("type") == "outcome" and running:
                ran = running.pop(event.get("decision_id"), None)
                if ran is not None:
                    guard.release(ran)
            continue
        report.decisions += 1
        if event.get("rule") == "input" and not event.get("matched"):
            report.invalid += 1  # a malformed call stays malformed under any policy
            continue
        if event.get("truncated") or any(
                str(r.get("path", "")).startswith(("args", "context"))
                for r in event.get("redactions") or ()):
            report.redacted += 1
        tool = event.get("tool")
        args = event.get("args")
        context = event.get("context")
        decision = check(tool if isinstance(tool, str) else "<missing>",
                         args if isinstance(args, dict) else {},
                         call_id=event.get("call_id"), agent=event.get("agent"),
                         session=event.get("session"), principal=event.get("principal"),
                         framework=event.get("framework"),
                         context=context if isinstance(context, dict) and context else None)
        if decision.budgets and decision.effect.allows:
            running[event.get("decision_id")] = decision
            if len(running) > _RUNNING:
                running.popitem(last=False)  # its slots end with their hold
        old = str(event.get("effect"))
        new = decision.effect.value
        if old == new:
            if decision.rule != event.get("rule"):
                report.rule_changed += 1
            continue
        report.changed += 1
        report.transitions[f"{old}->{new}"] += 1
        report.by_rule[decision.rule or "default"] += 1
        report.by_old_rule[str(event.get("rule") or "default")] += 1
        if len(report.changes) < show:
            report.changes.append(Change(
                event.get("decision_id"), event.get("time"), str(tool), event.get("agent"),
                event.get("session"), old, new, event.get("rule"), decision.rule,
                decision.source, args, decision.message))
    report.seconds += time.perf_counter() - started
    return report


def replay(policy_path: str | Path, audit_path: str | Path | Iterable[str | Path], *,
           show: int = 20,
           on_progress: Callable[[int, int, int], None] | None = None) -> ReplayReport:
    """Replays one or more JSONL audit logs against the policy file at ``policy_path``.

    ``on_progress(bytes_read, total_bytes, events_read)`` is called every ~4 MiB and at the end.

    Raises:
        PolicyError: when the policy is invalid.
        AuditLogError: when the logs hold no decision event (empty, not JSON, another
            program's log): a replay of nothing would report "no change" and pass any gate.
        OSError: when a log cannot be read.
    """
    from callwarden._guard import Guard
    from callwarden.policyfile import load_policy_file

    paths = [audit_path] if isinstance(audit_path, str | Path) else list(audit_path)
    require_events(paths, ("decision",))
    # A store of its own: replayed calls must not count against the live limits and history
    # of the store the policy names (a shared Redis, say).
    guard = Guard.from_loaded(load_policy_file(Path(policy_path)), audit=False, state="memory")
    try:
        reader = EventReader(paths, on_progress=on_progress)
        report = ReplayReport(files=[str(p) for p in paths])
        replay_events(guard, reader, show=show, report=report)
        report.corrupt = reader.corrupt
    finally:
        guard.close()
    return report
