"""The read side of the audit trail: read logs, replay a policy over them, explain a decision,
summarize."""

from callwarden.review.explain import (
    explain_decision,
    explain_event,
    explain_with_policy,
    find_decision,
)
from callwarden.review.reader import EventReader, expand_rotated
from callwarden.review.replay import Change, ReplayReport, replay, replay_events
from callwarden.review.summary import AuditSummary, summarize, summarize_events

__all__ = ["AuditSummary", "Change", "EventReader", "ReplayReport", "expand_rotated",
           "explain_decision", "explain_event", "explain_with_policy", "find_decision", "replay",
           "replay_events",
           "summarize", "summarize_events"]
