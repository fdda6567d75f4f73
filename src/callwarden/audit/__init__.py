"""The audit trail: one event per decision (before the tool runs) and one per outcome.

Wire an :class:`Auditor` with sinks, hand it decisions, and every event is redacted, bounded
and delivered::

    auditor = Auditor([JsonlSink("logs/audit.jsonl", rotate_bytes=10 << 20)])
    decision = guard.check("bash", {"command": "ls"})
    auditor.decision(decision)   # returns once the event is in the file
    ...  # the tool runs
    auditor.outcome(decision, "ok", duration=0.012)

What ``decision()`` guarantees on return is the auditor's ``delivery``: ``written`` (the
default: the event is in every sink, so a call never runs without its event, even if the
process is killed next; a call whose event is not written within ``deadline`` is refused),
``queued`` (queued, waiting for room when the queue is full, never dropped) or ``lossy``
(never waits; what a full queue drops is counted in ``stats()`` and written into the log as
an ``audit_dropped`` event). ``fsync`` (a sink option) adds power-loss durability.

Event fields (``schema_version`` 1; the JSON Schema ships as
``callwarden/data/audit-event.schema.json``, see :func:`load_schema`):

=================  ==========================================================================
schema_version     always 1 for this layout
type               ``decision``, ``outcome``, ``approval`` or ``audit_dropped``
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
truncated          present when the event was cut to fit ``max_bytes``, or parts of the
                   decision could not be read: which parts (a value that cannot be
                   written is recorded as ``<unrecordable ...>``)
status             outcome: ok | error | output_blocked | output_modified
duration_ms        outcome: how long the tool ran
error              outcome: the error text (redacted), else null
=================  ==========================================================================

An ``audit_dropped`` event (lossy delivery only) records a gap: ``dropped`` events were not
written between ``first`` and ``last`` (``total_dropped`` since the auditor started),
``reason`` ``queue_full``.

An ``approval`` event records one transition of an approval request or a remembered grant:
``action`` (requested, approved, denied, cancelled, expired, refused, consumed,
grant_created, grant_used, grant_revoked), ``request_id`` / ``grant_id``, ``decision_id`` (the decision
that asked, or the one that ran on the approval), tool, agent, session, principal, ``status``,
``by`` (the reviewer, the granter, or who revoked the grant), ``comment`` and ``edited_args``
(redacted), rule, policy, ``scope`` (grants), ``expires`` and ``detail`` (why a use was
refused).

A tamper-evident log is a ``jsonl`` sink with ``chain: true`` or ``sign_key: PATH``
(:class:`ChainedJsonlSink`, design in ``callwarden.audit._chain``): every line carries the hash
of the line its writer wrote before, and a seal line (``type`` ``audit_seal``, Ed25519-signed
with a key) closes each writer's part of the file at every rotation and on close.
:func:`verify_logs` (``callwarden audit verify``) checks chains and signatures offline and
names the first line that was edited, removed, reordered or cut; readers skip seal lines as
they skip any type they do not know.

Reading, replaying, explaining and summarizing logs is :mod:`callwarden.review`. Replay
(``callwarden replay``) re-decides the *recorded*, therefore redacted, arguments.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from callwarden.audit._auditor import AuditError, Auditor
from callwarden.audit._chain import (
    ChainedJsonlSink,
    SigningKey,
    SigningKeyError,
    generate_signing_key,
    load_signing_key,
)
from callwarden.audit._config import DELIVERIES, AuditSettings, SinkSpec, parse_audit_config
from callwarden.audit._events import (
    APPROVAL_ACTIONS,
    OUTCOME_STATUSES,
    SCHEMA_VERSION,
    AuditEvent,
    approval_event,
    decision_event,
    decision_lines,
    dropped_event,
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
from callwarden.audit._verify import ChainProblem, VerifyReport, log_files, verify_logs

if TYPE_CHECKING:
    from callwarden.audit._otel import OTelSink

__all__ = [
    "APPROVAL_ACTIONS",
    "DEFAULT_SENSITIVE_KEYS",
    "DELIVERIES",
    "OUTCOME_STATUSES",
    "SCHEMA_VERSION",
    "AuditError",
    "AuditEvent",
    "AuditSettings",
    "Auditor",
    "CallableSink",
    "ChainProblem",
    "ChainedJsonlSink",
    "JsonlSink",
    "OTelSink",
    "Redactor",
    "SQLiteSink",
    "SigningKey",
    "SigningKeyError",
    "Sink",
    "SinkSpec",
    "StdoutSink",
    "VerifyReport",
    "approval_event",
    "decision_event",
    "decision_lines",
    "dropped_event",
    "generate_signing_key",
    "load_schema",
    "load_signing_key",
    "log_files",
    "outcome_event",
    "outcome_line",
    "parse_audit_config",
    "rotated_files",
    "verify_logs",
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
