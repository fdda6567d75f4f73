"""The audit trail: one event per decision (before the tool runs) and one per outcome.

Wire an :class:`Auditor` with sinks, hand it decisions, and every event is redacted, bounded
and delivered without holding up the call::

    auditor = Auditor([JsonlSink("logs/audit.jsonl", rotate_bytes=10 << 20)])
    decision = guard.check("bash", {"command": "ls"})
    auditor.decision(decision)
    ...  # the tool runs
    auditor.outcome(decision, "ok", duration=0.012)

Event fields (``schema_version`` 1; the JSON Schema ships as
``callwarden/data/audit-event.schema.json``, see :func:`load_schema`):

=================  ==========================================================================
schema_version     always 1 for this layout
type               ``decision``, ``outcome`` or ``approval``
event_id           unique id of the event
time               ISO 8601 UTC with microseconds (decision: when the call was made)
decision_id        id of the decision (an outcome names the decision it follows)
call_id            the framework's id for the call
tool               the tool name
agent, session,    who called, in which conversation, on whose behalf, through which
principal,         framework (null when unknown)
framework
args               the arguments as asked, REDACTED (decision events)
effective_args     the rewritten arguments, redacted; only when the decision modified them
context            the call's free-form context, redacted
effect             allow | modify | ask | deny | halt (what happened)
would_effect       what enforce mode would have decided (observe mode), else null
mode               enforce | observe
rule, source       the deciding rule and where it is written (``policy.yaml:42``)
matched            every rule that had an opinion: rule, source, effect, mode, code, detail
reasons            why: code, message, rule
message            the text given to the model
policy             the policy's name and content hash (``name@hash``)
elapsed_us         evaluation time in microseconds
redactions         what was redacted: ``{path: "args.body", detector: "aws_access_key_id"}``,
                   never the value
truncated          present when the event was cut to fit ``max_bytes``: which parts
status             outcome: ok | error | output_blocked | output_modified
duration_ms        outcome: how long the tool ran
error              outcome: the error text (redacted), else null
=================  ==========================================================================

An ``approval`` event records one transition of an approval request or a remembered grant:
``action`` (requested, approved, denied, cancelled, expired, refused, consumed,
grant_created, grant_revoked), ``request_id`` / ``grant_id``, ``decision_id`` (the decision
that asked, or the one that ran on the approval), tool, agent, session, principal, ``status``,
``by`` (the reviewer or granter), ``comment`` and ``edited_args`` (redacted), rule, policy,
``scope`` (grants), ``expires`` and ``detail`` (why a use was refused).

Reading, replaying, explaining and summarizing logs is :mod:`callwarden.review`. Replay
(``callwarden replay``) re-decides the *recorded*, therefore redacted, arguments.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from callwarden.audit._auditor import AuditError, Auditor
from callwarden.audit._config import AuditSettings, SinkSpec, parse_audit_config
from callwarden.audit._events import (
    APPROVAL_ACTIONS,
    OUTCOME_STATUSES,
    SCHEMA_VERSION,
    AuditEvent,
    approval_event,
    decision_event,
    decision_lines,
    outcome_event,
    outcome_line,
)
from callwarden.audit._redact import DEFAULT_SENSITIVE_KEYS, Redactor
from callwarden.audit._sinks import (
    CallableSink,
    JsonlSink,
    Sink,
    SQLiteSink,
    StdoutSink,
    rotated_files,
)

if TYPE_CHECKING:
    from callwarden.audit._otel import OTelSink

__all__ = [
    "APPROVAL_ACTIONS",
    "DEFAULT_SENSITIVE_KEYS",
    "OUTCOME_STATUSES",
    "SCHEMA_VERSION",
    "AuditError",
    "AuditEvent",
    "AuditSettings",
    "Auditor",
    "CallableSink",
    "JsonlSink",
    "OTelSink",
    "Redactor",
    "SQLiteSink",
    "Sink",
    "SinkSpec",
    "StdoutSink",
    "approval_event",
    "decision_event",
    "decision_lines",
    "load_schema",
    "outcome_event",
    "outcome_line",
    "parse_audit_config",
    "rotated_files",
]


@cache
def load_schema() -> dict[str, Any]:
    """The JSON Schema of audit events (draft 2020-12)."""
    text = resources.files("callwarden").joinpath("data/audit-event.schema.json").read_text(
        encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def __getattr__(name: str) -> Any:
    # The OTel sink imports opentelemetry when built; the module itself is only loaded on use.
    if name == "OTelSink":
        from callwarden.audit._otel import OTelSink

        return OTelSink
    raise AttributeError(f"module 'callwarden.audit' has no attribute {name!r}")
