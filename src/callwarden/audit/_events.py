"""The two audit event types, each built by exactly one function.

``decision_event`` turns a ``Decision`` into the record written before the tool runs;
``outcome_event`` records what happened after it ran. Both redact through a ``Redactor`` and
are bounded to its ``max_bytes``. The fields are documented in the package docstring and in
the shipped JSON Schema (``callwarden/data/audit-event.schema.json``).
"""

from __future__ import annotations

import json
import time as _time
from datetime import UTC, datetime
from typing import Any

from callwarden._call import new_id
from callwarden._decision import Decision
from callwarden.audit._redact import Redactor, strict_json

__all__ = [
    "APPROVAL_ACTIONS", "OUTCOME_STATUSES", "SCHEMA_VERSION", "AuditEvent", "approval_event",
    "decision_event", "iso_time", "outcome_event",
]

SCHEMA_VERSION = 1
OUTCOME_STATUSES = ("ok", "error", "output_blocked", "output_modified")
APPROVAL_ACTIONS = ("requested", "approved", "denied", "cancelled", "expired", "refused",
                    "consumed", "grant_created", "grant_revoked")

_DEFAULT = Redactor()
_PAYLOADS = ("context", "effective_args", "args")  # shed in this order when an event is too big
_MAX_NAME = 256
_second_cache: tuple[int, str] = (-1, "")
_slow_encode = json.JSONEncoder(separators=(",", ":")).encode


def _encode(value: Any) -> str:
    try:
        return strict_json(value)
    except (TypeError, ValueError):  # not plain JSON data: the stdlib's rules (nan, ...)
        return _slow_encode(value)


class AuditEvent(dict[str, Any]):
    """An event: a plain JSON-safe dict that also caches its one-line JSON encoding.

    Sinks receive it as a dict and must not change it; the cache lets the JSONL sink write
    the line the size bound was checked on, without encoding the event a second time.
    """

    __slots__ = ("_line",)
    _line: str | None

    def line(self) -> str:
        """The event as one line of compact JSON (ASCII, no newline)."""
        cached: str | None = getattr(self, "_line", None)
        if cached is None:
            cached = self._line = _encode(self)
        return cached

    def changed(self) -> None:
        """Drops the cached encoding after an edit."""
        self._line = None


def iso_time(ts: float) -> str:
    """``2025-01-31T12:00:00.123456Z`` for a POSIX timestamp (UTC, microseconds)."""
    global _second_cache
    second = int(ts)
    cached = _second_cache  # one tuple, read once: safe against a concurrent update
    if cached[0] != second:
        # Formatting the date is the slow part; events in the same second share it.
        cached = _second_cache = (
            second, datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S"))
    return f"{cached[1]}.{int((ts - second) * 1e6):06d}Z"


def _name(value: str | None) -> str | None:
    return value if value is None or len(value) <= _MAX_NAME else value[:_MAX_NAME] + "…"


def decision_event(decision: Decision, redactor: Redactor | None = None) -> AuditEvent:
    """Builds the ``decision`` event of one decision: redacted, bounded, JSON-safe.

    The fields are those of ``Decision.to_dict()``, flattened (the call's fields at the top
    level) and redacted. It reads the decision's fields directly rather than through
    ``to_dict()``: the redaction walk already makes the JSON-safe copy, and doing it twice
    would double the cost of every audited call. The event's JSON line is assembled from
    parts: what the deciding rules contributed (effect, rule, matched, reasons, message) is
    redacted and encoded once per distinct outcome and reused, since a policy's rules produce
    the same few outcomes over and over.
    """
    red = redactor or _DEFAULT
    call = decision.call
    found: list[dict[str, str]] = []
    cap = red.max_string
    walk = red.walk
    args = walk(call.args, "args", found, cap)
    effective = walk(decision.args, "effective_args", found, cap) \
        if decision.args is not call.args else _ABSENT
    context = walk(call.context, "context", found, cap) if call.context else {}
    verdict = _verdict_part(decision, red)
    if verdict[2]:
        found.extend(verdict[2])
    event_id = new_id()
    when = iso_time(call.timestamp)
    agent, session, principal, framework = (_name(call.agent), _name(call.session),
                                            _name(call.principal), _name(call.framework))
    call_id, tool = _name(call.call_id), _name(call.tool)
    elapsed = round(decision.elapsed * 1e6, 1)
    event = AuditEvent({
        "schema_version": SCHEMA_VERSION,
        "type": "decision",
        "event_id": event_id,
        "time": when,
        "decision_id": decision.decision_id,
        "call_id": call_id,
        "tool": tool,
        "args": args,
    })
    if effective is not _ABSENT:
        event["effective_args"] = effective
    event.update(agent=agent, session=session, principal=principal, framework=framework,
                 context=context)
    event.update(verdict[0])
    event["elapsed_us"] = elapsed
    event["redactions"] = found
    event._line = "".join((
        '{"schema_version":', _SCHEMA_TEXT, ',"type":"decision","event_id":', _str(event_id),
        ',"time":"', when, '","decision_id":', _str(decision.decision_id),
        ',"call_id":', _opt(call_id), ',"tool":', _opt(tool), ',"args":', _encode(args),
        "" if effective is _ABSENT else ',"effective_args":' + _encode(effective),
        ',"agent":', _opt(agent), ',"session":', _opt(session), ',"principal":',
        _opt(principal), ',"framework":', _opt(framework), ',"context":',
        _encode(context) if context else "{}", verdict[1], ',"elapsed_us":', repr(elapsed),
        ',"redactions":', _encode(found) if found else "[]", "}"))
    return _bounded(event, red, decision)


_ABSENT: Any = object()
_SCHEMA_TEXT = str(SCHEMA_VERSION)
_str = json.encoder.encode_basestring_ascii

# -> (fields, their encoded JSON with a leading comma, redactions, the redactor it was made by)
_VerdictPart = tuple[dict[str, Any], str, list[dict[str, str]], Redactor]
_verdict_cache: dict[tuple[Any, ...], _VerdictPart] = {}
_VERDICT_CACHE_SIZE = 2048


def _opt(value: str | None) -> str:
    return "null" if value is None else _str(value)


def _verdict_part(decision: Decision, red: Redactor) -> _VerdictPart:
    """The rule-made fields of a decision event, redacted and encoded once per distinct value.

    Callers must not change what it returns: the dict values are shared between events.
    """
    would = decision.would_effect
    key = (id(red), decision.effect, would, decision.mode, decision.rule, decision.source,
           decision.matched, decision.reasons, decision.message, decision.policy)
    hit = _verdict_cache.get(key)
    if hit is not None and hit[3] is red:  # the id of a dead redactor can be reused
        return hit
    found: list[dict[str, str]] = []
    cap = red.max_string
    text = red.text
    fields = {
        "effect": decision.effect.value,
        "would_effect": would.value if would is not None else None,
        "mode": decision.mode.value,
        "rule": decision.rule,
        "source": decision.source,
        "matched": [{"rule": m.rule, "source": m.source, "effect": m.effect.value,
                     "mode": m.mode.value, "code": m.code,
                     "detail": text(m.detail, f"matched[{i}].detail", found, cap)}
                    for i, m in enumerate(decision.matched)],
        "reasons": [{"code": r.code,
                     "message": text(r.message, f"reasons[{i}].message", found, cap),
                     "rule": r.rule}
                    for i, r in enumerate(decision.reasons)],
        "message": text(decision.message, "message", found, cap),
        "policy": decision.policy,
    }
    encoded = _encode(fields)
    part: _VerdictPart = (fields, "," + encoded[1:-1], found, red)
    if red.callback is None:  # a callback may answer differently each time: never cached
        if len(_verdict_cache) >= _VERDICT_CACHE_SIZE:
            _verdict_cache.clear()
        _verdict_cache[key] = part
    return part


def outcome_event(decision: Decision, status: str, duration: float, error: str | None = None,
                  redactor: Redactor | None = None, *, at: float | None = None) -> AuditEvent:
    """Builds the ``outcome`` event: what happened after the tool ran (join on decision_id).

    Args:
        decision: the decision the tool ran under.
        status: ``ok``, ``error``, ``output_blocked`` or ``output_modified``.
        duration: how long the tool ran, in seconds.
        error: the error text, when the tool raised (redacted like arguments).
        redactor: the redactor (default: every secret detector and key name).
        at: when the outcome happened (default: now).

    Raises:
        ValueError: for an unknown status.
    """
    if status not in OUTCOME_STATUSES:
        raise ValueError(f"status must be one of {', '.join(OUTCOME_STATUSES)}, not {status!r}")
    red = redactor or _DEFAULT
    call = decision.call
    found: list[dict[str, str]] = []
    event = AuditEvent({
        "schema_version": SCHEMA_VERSION,
        "type": "outcome",
        "event_id": new_id(),
        "time": iso_time(_time.time() if at is None else at),
        "decision_id": decision.decision_id,
        "call_id": _name(call.call_id),
        "tool": _name(call.tool),
        "agent": _name(call.agent),
        "session": _name(call.session),
        "principal": _name(call.principal),
        "framework": _name(call.framework),
        "effect": decision.effect.value,
        "mode": decision.mode.value,
        "rule": decision.rule,
        "policy": decision.policy,
        "status": status,
        "duration_ms": round(max(0.0, float(duration)) * 1000, 3),
        "error": None if error is None else red.text(str(error), "error", found, red.max_string),
        "redactions": found,
    })
    return _bounded(event, red, decision)


def approval_event(action: str, record: Any, redactor: Redactor | None = None, *,
                   decision_id: str | None = None, detail: str | None = None,
                   at: float | None = None) -> AuditEvent:
    """Builds an ``approval`` event: one transition of an approval request or a grant.

    Args:
        action: one of ``APPROVAL_ACTIONS`` (``requested``, ``approved``, ``consumed`` ...).
        record: the ``ApprovalRequest`` or ``Grant`` after the transition.
        redactor: the redactor (comments and edited arguments are redacted like arguments).
        decision_id: the decision that asked (``requested``) or ran on it (``consumed``).
        detail: why a use was refused (``expired``, ``refused``).
        at: when it happened (default: now).

    Raises:
        ValueError: for an unknown action.
    """
    if action not in APPROVAL_ACTIONS:
        raise ValueError(f"action must be one of {', '.join(APPROVAL_ACTIONS)}, not {action!r}")
    red = redactor or _DEFAULT
    found: list[dict[str, str]] = []
    cap = red.max_string
    grant = action.startswith("grant_")
    comment = getattr(record, "comment", None)
    edited = getattr(record, "edited_args", None)
    event = AuditEvent({
        "schema_version": SCHEMA_VERSION,
        "type": "approval",
        "event_id": new_id(),
        "time": iso_time(_time.time() if at is None else at),
        "action": action,
        "request_id": getattr(record, "request_id", None) if grant else record.id,
        "grant_id": record.id if grant else None,
        "decision_id": decision_id or (None if grant else record.decision_id),
        "tool": _name(record.tool),
        "agent": _name(record.agent),
        "session": _name(record.session),
        "principal": _name(getattr(record, "principal", None)),
        "status": record.status.value,
        "by": _name(record.by if grant else record.resolved_by),
        "comment": None if comment is None else red.text(comment, "comment", found, cap),
        "edited_args": None if edited is None else red.walk(edited, "edited_args", found, cap),
        "rule": getattr(record, "rule", None),
        "policy": getattr(record, "policy", None),
        "scope": record.scope.value if grant else None,
        "expires": iso_time(record.expires),
        "detail": None if detail is None else red.text(detail, "detail", found, cap),
        "redactions": found,
    })
    if len(event.line()) > red.max_bytes:
        event["edited_args"] = {} if edited is not None else None
        event["truncated"] = ["edited_args"]
        event.changed()
    return event


def _size(event: AuditEvent) -> int:
    event.changed()
    return len(event.line())


def _bounded(event: AuditEvent, red: Redactor, decision: Decision) -> AuditEvent:
    """Keeps the serialized event under ``red.max_bytes``: shorter strings, then fewer payloads."""
    limit = red.max_bytes
    if len(event.line()) <= limit:
        return event
    shed: list[str] = []
    # First pass: the same payloads with much shorter strings (re-redacted, so still clean).
    small = max(64, red.max_string // 16)
    scratch: list[dict[str, str]] = []
    call = decision.call
    sources = {"args": call.args, "effective_args": decision.args, "context": call.context}
    for field in _PAYLOADS:
        if field in event:
            event[field] = red.walk(sources[field], field, scratch, small)
    for field in ("message", "error"):
        if isinstance(event.get(field), str) and len(event[field]) > small:
            event[field] = f"{event[field][:small]}…[truncated]"
    for key in ("matched", "reasons"):
        # Copies: these lists are shared with other events (see _verdict_part).
        event[key] = [dict(item) for item in event.get(key) or ()]
        for item in event[key]:
            for part in ("detail", "message"):
                if isinstance(item.get(part), str) and len(item[part]) > small:
                    item[part] = f"{item[part][:small]}…[truncated]"
    # Then drop whole payloads, least useful first, and say which.
    for field in _PAYLOADS:
        if _size(event) <= limit:
            break
        if event.get(field):
            event[field] = {}
            shed.append(field)
    if _size(event) > limit:
        for key in ("matched", "reasons", "redactions"):
            if len(event.get(key) or ()) > 8:
                event[key] = event[key][:8]
                shed.append(key)
    event["truncated"] = shed or ["strings"]
    event.changed()
    return event
