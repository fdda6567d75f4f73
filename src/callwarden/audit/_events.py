"""The two audit event types, each built by exactly one function.

``decision_event`` turns a ``Decision`` into the record written before the tool runs;
``outcome_event`` records what happened after it ran. Both redact through a ``Redactor`` and
are bounded to its ``max_bytes``. The fields are documented in the package docstring and in
the shipped JSON Schema (``callwarden/data/audit-event.schema.json``).
"""

from __future__ import annotations

import json
import math
import time as _time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from callwarden._call import new_id
from callwarden._decision import Decision, Effect, Mode
from callwarden.audit._redact import Redactor, strict_json

__all__ = [
    "APPROVAL_ACTIONS", "OUTCOME_STATUSES", "SCHEMA_VERSION", "AuditEvent", "approval_event",
    "decision_event", "decision_line", "decision_lines", "dropped_event", "iso_time", "outcome_event",
    "outcome_line",
]

SCHEMA_VERSION = 1
OUTCOME_STATUSES = ("ok", "error", "output_blocked", "output_modified")
APPROVAL_ACTIONS = ("requested", "approved", "denied", "cancelled", "expired", "refused",
                    "consumed", "grant_created", "grant_used", "grant_revoked")

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
    second, prefix = _second(ts)
    # %d truncates, as int() does, without the call: this runs for every event.
    return "%s.%06dZ" % (prefix, (ts - second) * 1e6)  # noqa: UP031


def _second(ts: float) -> tuple[int, str]:
    """``(whole second, its ISO text)``: formatting the date is the slow part, and events in
    the same second share it."""
    global _second_cache
    cached = _second_cache  # one tuple, read once: safe against a concurrent update
    if cached[0] != int(ts):
        cached = _second_cache = (
            int(ts), datetime.fromtimestamp(int(ts), UTC).strftime("%Y-%m-%dT%H:%M:%S"))
    return cached


def _name(value: str | None) -> str | None:
    return value if value is None else _cut(value)


def _cut(value: str) -> str:
    return value if len(value) <= _MAX_NAME else value[:_MAX_NAME] + "…"


def decision_event(decision: Decision, redactor: Redactor | None = None) -> AuditEvent:
    """Builds the ``decision`` event of one decision: redacted, bounded, JSON-safe.

    Never raises: a value that cannot be recorded becomes a placeholder
    (``<unrecordable int: ValueError>``), and should anything else about the decision be
    unreadable, the event still records every field that can be read, with ``truncated``
    naming what could not (see ``_unrecordable``).
    """
    red = redactor or _DEFAULT
    try:
        return _decision_event(decision, red)
    except Exception as e:
        return _unrecordable(decision, red, e)


def _decision_event(decision: Decision, red: Redactor) -> AuditEvent:
    """Builds the ``decision`` event (``decision_event``, which may raise).

    The fields are those of ``Decision.to_dict()``, flattened (the call's fields at the top
    level) and redacted. It reads the decision's fields directly rather than through
    ``to_dict()``: the redaction walk already makes the JSON-safe copy, and doing it twice
    would double the cost of every audited call. The event's JSON line is assembled from
    parts: what the deciding rules contributed (effect, rule, matched, reasons, message) is
    redacted and encoded once per distinct outcome and reused, since a policy's rules produce
    the same few outcomes over and over.
    """
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
    elapsed = float(f"{decision.elapsed * 1e6:.1f}")  # as the line writes it
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
    event.update(context=context, agent=agent, session=session, principal=principal,
                 framework=framework)
    event.update(verdict[0])
    event["elapsed_us"] = elapsed
    event["redactions"] = found
    event._line = _decision_line(
        event_id, when, decision,
        _payloads(_encode(args), _ABSENT if effective is _ABSENT else _encode(effective),
                  _encode(context) if context else "{}"),
        verdict[1], _encode(found) if found else "[]")
    return _bounded(event, red, decision)


_ABSENT: Any = object()
_SCHEMA_TEXT = str(SCHEMA_VERSION)
_str = json.encoder.encode_basestring_ascii


def _payloads(args: str, effective: str, context: str) -> str:
    """The encoded payloads as they sit in the line, next to each other: a screen of this
    text sees everything the call brought and nothing the policy wrote."""
    if effective is _ABSENT:
        return f'{args},"context":{context}'
    return f'{args},"effective_args":{effective},"context":{context}'


def _decision_line(event_id: str, when: str, decision: Decision, payloads: str,
                   verdict: str, found: str) -> str:
    """A decision event's JSON line from its encoded parts (the one place it is assembled)."""
    call = decision.call
    tool, who = call[0], call[3:7]  # agent, session, principal, framework
    return (f'{_head("decision", event_id, when, decision)}'
            f'{_tool_parts.get(tool) or _tool_part(tool)}{payloads}'
            f'{_who_parts.get(who) or _who_part(who)}{verdict},"elapsed_us":'
            f'{decision.elapsed * 1e6:.1f},"redactions":{found}}}')


def _head(kind: str, event_id: str, when: str, decision: Decision) -> str:
    """The fields every event of a decision starts with, through ``call_id``."""
    call_id = decision.call[2]
    return (f'{{"schema_version":{_SCHEMA_TEXT},"type":"{kind}","event_id":"{event_id}",'
            f'"time":"{when}","decision_id":{_str(decision.decision_id)},"call_id":'
            f'{"null" if call_id is None else _str(_cut(call_id))}')


# Encoded once per distinct value: a process audits a handful of tools and agents.
_tool_parts: dict[str | None, str] = {}
_who_parts: dict[tuple[str | None, ...], str] = {}
_how_parts: dict[tuple[Any, ...], str] = {}
_PART_CACHE_SIZE = 4096


def _remember(cache: dict[Any, str], key: Any, part: str) -> str:
    if len(cache) >= _PART_CACHE_SIZE:
        cache.clear()
    cache[key] = part
    return part


def _tool_part(tool: str | None) -> str:
    return _remember(_tool_parts, tool, f',"tool":{_opt(_name(tool))},"args":')


def _who_part(who: tuple[str | None, ...]) -> str:
    agent, session, principal, framework = (_opt(_name(w)) for w in who)
    return _remember(_who_parts, who, f',"agent":{agent},"session":{session},"principal":'
                                      f'{principal},"framework":{framework}')


def _how_part(how: tuple[Any, ...]) -> str:
    effect, mode, rule, policy = how
    return _remember(_how_parts, how, f',"effect":"{effect.value}","mode":"{mode.value}",'
                                      f'"rule":{_opt(rule)},"policy":{_opt(policy)}')


def decision_lines(decisions: Sequence[Decision], redactor: Redactor | None = None) -> list[str]:
    """The JSON lines of many decisions' events: ``decision_event(d, redactor).line()`` each.

    The fast way for sinks that only write lines. A payload whose plain JSON passes the
    redactor's screen (``Redactor.screen``: nothing to redact, nothing to cut) is written as
    encoded, without the per-string redaction walk or the event dict; the others, and
    events over ``max_bytes``, are built by ``decision_event``. The screen searches every
    decision's payloads in one pass, so the more decisions at once the cheaper each.
    """
    red = redactor or _DEFAULT
    try:
        return _decision_lines(decisions, red)
    except Exception:  # one odd decision: each on its own (decision_event never raises)
        return [decision_event(d, red).line() for d in decisions]


def decision_line(decision: Decision, redactor: Redactor | None = None) -> str:
    """``decision_lines([decision], redactor)[0]``: the line of one decision, for a caller
    writing its own event (no batch to share the screening pass with)."""
    red = redactor or _DEFAULT
    try:
        call = decision[1]
        args = red.plain_json(call[1])
        context = red.plain_json(call[8]) if call[8] else "{}"
        effective = _ABSENT if decision[2] is call[1] else red.plain_json(decision[2])
        if args is not None and context is not None and effective is not None:
            part = _verdict_part(decision, red)
            payloads = _payloads(args, effective, context)
            line = _decision_line(new_id(), iso_time(call[7]), decision, payloads, part[1],
                                  part[4])
            if len(line) <= red.max_bytes and not red.screen([payloads])[0]:
                return line
    except Exception:  # the event builder records what it can
        pass
    return decision_event(decision, red).line()


def _decision_lines(decisions: Sequence[Decision], red: Redactor) -> list[str]:
    plain = red.plain_json
    limit = red.max_bytes
    second, prefix = _second_cache
    verdicts: dict[tuple[Any, ...], tuple[Any, Any, str, str]] = {}  # this batch's
    verdict: tuple[Any, Any, str, str]
    single = len(decisions) == 1
    lines: list[str | None] = []
    texts: list[str] = []  # the payloads of the lines built so far, in order
    # The hot loop of auditing: fields by position (see ToolCall, Decision), no calls that
    # can be avoided, every fast-path line checked by the screen below.
    for decision, args in zip(decisions, red.plain_jsons([d[1][1] for d in decisions]),
                              strict=True):
        call = decision[1]
        if args is None:
            lines.append(None)
            continue
        context: str | None = plain(call[8]) if call[8] else "{}"
        if context is None:
            lines.append(None)
            continue
        effective = _ABSENT if decision[2] is call[1] else plain(decision[2])
        if effective is None:
            lines.append(None)
            continue
        if single:  # hashing the verdict's fields is a good part of the cost: once only
            part = _verdict_part(decision, red)
            verdict = (None, None, part[1], part[4])
        else:
            key = decision[3:10]  # reasons, rule, source, matched, message, mode, would_effect
            found = verdicts.get(key)
            if found is None or found[0] is not decision[0] or found[1] != decision[12]:
                part = _verdict_part(decision, red)  # effect and policy complete the key
                found = verdicts[key] = (decision[0], decision[12], part[1], part[4])
            verdict = found
        ts = call[7]
        if int(ts) != second:
            second, prefix = _second(ts)
        payloads = _payloads(args, effective, context)
        when = "%s.%06dZ" % (prefix, (ts - second) * 1e6)  # noqa: UP031 - as iso_time
        line = _decision_line(new_id(), when, decision, payloads, verdict[2], verdict[3])
        if len(line) > limit:
            lines.append(None)
            continue
        lines.append(line)
        texts.append(payloads)
    flags = red.screen(texts) if texts else []
    if len(texts) == len(lines) and not any(flags):
        return lines  # type: ignore[return-value]
    dirty = iter(flags)
    return [decision_event(decision, red).line() if line is None or next(dirty) else line
            for decision, line in zip(decisions, lines, strict=True)]


# -> (fields, their encoded JSON with a leading comma, redactions, the redactor it was made by,
#     the redactions encoded)
_VerdictPart = tuple[dict[str, Any], str, list[dict[str, str]], Redactor, str]
_verdict_cache: dict[tuple[Any, ...], _VerdictPart] = {}
_VERDICT_CACHE_SIZE = 2048


def _opt(value: str | None) -> str:
    return "null" if value is None else _str(value)


def _verdict_part(decision: Decision, red: Redactor) -> _VerdictPart:
    """The rule-made fields of a decision event, redacted and encoded once per distinct value.

    Callers must not change what it returns: the dict values are shared between events.
    """
    # effect, then reasons, rule, source, matched, message, mode, would_effect; and policy.
    key = (id(red), decision[0], decision[12], *decision[3:10])
    hit = _verdict_cache.get(key)
    if hit is not None and hit[3] is red:  # the id of a dead redactor can be reused
        return hit
    would = decision.would_effect
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
    part: _VerdictPart = (fields, "," + encoded[1:-1], found, red,
                          _encode(found) if found else "[]")
    if red.callback is None:  # a callback may answer differently each time: never cached
        if len(_verdict_cache) >= _VERDICT_CACHE_SIZE:
            _verdict_cache.clear()
        _verdict_cache[key] = part
    return part


def outcome_event(decision: Decision, status: str, duration: float, error: str | None = None,
                  redactor: Redactor | None = None, *, at: float | None = None,
                  output_rule: str | None = None,
                  output_source: str | None = None) -> AuditEvent:
    """Builds the ``outcome`` event: what happened after the tool ran (join on decision_id).

    Args:
        decision: the decision the tool ran under.
        status: ``ok``, ``error``, ``output_blocked`` or ``output_modified``.
        duration: how long the tool ran, in seconds.
        error: the error text, when the tool raised (redacted like arguments).
        redactor: the redactor (default: every secret detector and key name).
        at: when the outcome happened (default: now).
        output_rule, output_source: the output rule that blocked, rewrote or halted on the
            result, and where it is written (``output_blocked`` / ``output_modified``).

    Raises:
        ValueError: for an unknown status.
    """
    if status not in OUTCOME_STATUSES:
        raise ValueError(f"status must be one of {', '.join(OUTCOME_STATUSES)}, not {status!r}")
    red = redactor or _DEFAULT
    by = (output_rule, output_source)
    try:
        return _outcome_event(decision, status, duration, error, red, at, by)
    except Exception as e:
        return _unrecordable(decision, red, e, (status, duration, error, at, *by))


def _outcome_event(decision: Decision, status: str, duration: float, error: str | None,
                   red: Redactor, at: float | None,
                   by: tuple[str | None, str | None] = (None, None)) -> AuditEvent:
    call = decision.call
    found: list[dict[str, str]] = []
    event_id = new_id()
    when = iso_time(_time.time() if at is None else at)
    duration_ms = _ms(duration)
    text = None if error is None else red.text(str(error), "error", found, red.max_string)
    event = AuditEvent({
        "schema_version": SCHEMA_VERSION,
        "type": "outcome",
        "event_id": event_id,
        "time": when,
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
        "duration_ms": duration_ms,
        "error": text,
        **_output_rule(by),
        "redactions": found,
    })
    event._line = _outcome_line(event_id, when, decision, status, duration_ms,
                                "null" if text is None else _str(text),
                                _encode(found) if found else "[]", by)
    return _bounded(event, red, decision)


def _output_rule(by: tuple[str | None, str | None]) -> dict[str, str | None]:
    """``output_rule`` / ``output_source`` when an output rule acted; nothing otherwise."""
    rule, source = by
    return {} if rule is None else {"output_rule": _name(rule), "output_source": _name(source)}


def outcome_line(decision: Decision, status: str, duration: float, error: str | None = None,
                 redactor: Redactor | None = None, *, at: float | None = None,
                 output_rule: str | None = None, output_source: str | None = None) -> str:
    """``outcome_event(...).line()``, without building the event when there is no error text
    (nothing to redact): the fast way for sinks that only write lines.

    Raises:
        ValueError: for an unknown status.
    """
    red = redactor or _DEFAULT
    by = (output_rule, output_source)
    if error is None and status in OUTCOME_STATUSES:
        try:
            line = _outcome_line(new_id(), iso_time(_time.time() if at is None else at),
                                 decision, status, _ms(duration), "null", "[]", by)
        except Exception:  # the event builder records what it can
            line = None
        if line is not None and len(line) <= red.max_bytes:
            return line
    return outcome_event(decision, status, duration, error, red, at=at, output_rule=output_rule,
                         output_source=output_source).line()


def _ms(duration: float) -> float:
    ms = round(max(0.0, float(duration)) * 1000, 3)
    if not math.isfinite(ms):
        raise ValueError("duration is not a finite number")
    return ms


def _outcome_line(event_id: str, when: str, decision: Decision, status: str,
                  duration_ms: float, error: str, found: str,
                  by: tuple[str | None, str | None] = (None, None)) -> str:
    """An outcome event's JSON line from its encoded parts (the one place it is assembled)."""
    call = decision.call
    who = call[3:7]  # agent, session, principal, framework
    how = (decision.effect, decision.mode, decision.rule, decision.policy)
    rule = "" if by[0] is None else (f',"output_rule":{_opt(_name(by[0]))},'
                                     f'"output_source":{_opt(_name(by[1]))}')
    return (f'{_head("outcome", event_id, when, decision)},"tool":{_opt(_name(call[0]))}'
            f'{_who_parts.get(who) or _who_part(who)}{_how_parts.get(how) or _how_part(how)}'
            f',"status":"{status}","duration_ms":{duration_ms!r},"error":{error}{rule},'
            f'"redactions":{found}}}')


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
    try:
        return _approval_event(action, record, red, decision_id, detail, at)
    except Exception as e:
        return _unrecordable_approval(action, record, decision_id, at, e)


def _approval_event(action: str, record: Any, red: Redactor, decision_id: str | None,
                    detail: str | None, at: float | None) -> AuditEvent:
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
        # Who made this transition: the granter, the person who revoked it, the reviewer.
        "by": _name((record.revoked_by if action == "grant_revoked" else record.by) if grant
                    else record.resolved_by),
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


# -- events that record what could not be recorded -------------------------------------------


def _attempt(read: Any, default: Any) -> Any:
    try:
        return read()
    except Exception:
        return default


def _safe_name(read: Any, default: str | None = None) -> str | None:
    value = _attempt(read, default)
    if value is None:
        return None
    return _cut(str.__str__(value)) if type(value) is str or issubclass(type(value), str) \
        else default


def _safe_time(read: Any) -> str:
    ts = _attempt(read, None)
    if type(ts) is float or type(ts) is int:
        text = _attempt(lambda: iso_time(ts), None)
        if text is not None:
            return text  # type: ignore[no-any-return]
    return iso_time(_time.time())


def _unrecordable(decision: Any, red: Redactor, error: BaseException,
                  outcome: tuple[Any, ...] | None = None) -> AuditEvent:
    """The event of a decision (or of its outcome) the builder failed on: every field read on
    its own, what cannot be read replaced (payloads by a placeholder), ``truncated`` naming
    them. Written rather than lost: an executed call always has its event."""
    lost: list[str] = []
    found: list[dict[str, str]] = []
    cap = red.max_string
    call = _attempt(lambda: decision.call, None)

    def read(name: str, fn: Any, default: Any) -> Any:
        value = _attempt(fn, _ABSENT)
        if value is _ABSENT:
            lost.append(name)
            return default
        return value

    note = f"<unrecordable: {type(error).__name__}>"
    effect = read("effect", lambda: Effect(decision.effect).value, Effect.DENY.value)
    event = AuditEvent({
        "schema_version": SCHEMA_VERSION,
        "type": "decision" if outcome is None else "outcome",
        "event_id": new_id(),
        "time": _safe_time(lambda: call.timestamp if outcome is None else outcome[3]),
        "decision_id": _safe_name(lambda: decision.decision_id) or new_id(),
        "call_id": _safe_name(lambda: call.call_id),
        "tool": _safe_name(lambda: call.tool) or "<unrecordable>",
    })
    if outcome is None:
        event["args"] = read("args", lambda: red.walk(call.args, "args", found, cap), {"…": note})
        if _attempt(lambda: decision.args is not call.args, True):
            event["effective_args"] = read(
                "effective_args", lambda: red.walk(decision.args, "effective_args", found, cap),
                {"…": note})
        event["context"] = read("context", lambda: red.walk(dict(call.context), "context",
                                                           found, cap), {})
    event.update(
        agent=_safe_name(lambda: call.agent), session=_safe_name(lambda: call.session),
        principal=_safe_name(lambda: call.principal),
        framework=_safe_name(lambda: call.framework),
        effect=effect,
        mode=read("mode", lambda: Mode(decision.mode).value, Mode.ENFORCE.value),
        rule=_safe_name(lambda: decision.rule), policy=_safe_name(lambda: decision.policy))
    if outcome is None:
        event.update(
            would_effect=read("would_effect", lambda: None if decision.would_effect is None
                              else Effect(decision.would_effect).value, None),
            source=_safe_name(lambda: decision.source),
            matched=read("matched", lambda: list(_verdict_part(decision, red)[0]["matched"]),
                         []),
            reasons=read("reasons", lambda: list(_verdict_part(decision, red)[0]["reasons"]),
                         []),
            message=read("message", lambda: red.text(decision.message, "message", found, cap),
                         note),
            elapsed_us=read("elapsed_us", lambda: _finite(float(decision.elapsed) * 1e6), 0.0))
    else:
        status, duration, text, _, *by = outcome
        rule_by: list[Any] = by
        event.update(status=status, duration_ms=read("duration_ms", lambda: _ms(duration), 0.0),
                     error=None if text is None else read(
                         "error", lambda: red.text(text, "error", found, cap), note))
        if rule_by and rule_by[0] is not None:
            event.update(output_rule=_safe_name(lambda: rule_by[0]),
                         output_source=_safe_name(lambda: rule_by[1]))
    event["redactions"] = found
    event["truncated"] = lost or ["unrecordable"]
    line = _attempt(event.line, "")
    if not line or len(line) > red.max_bytes:
        for key in ("args", "effective_args", "context", "matched", "reasons", "redactions"):
            if key in event:
                event[key] = [] if isinstance(event[key], list) else {"…": note}
        event["truncated"] = [*lost, "payloads"]
        event.changed()
    return event


def _finite(number: float) -> float:
    if not math.isfinite(number):
        raise ValueError("not a finite number")
    return round(number, 1)


def _unrecordable_approval(action: str, record: Any, decision_id: Any, at: float | None,
                           error: BaseException) -> AuditEvent:
    """The approval event the builder failed on: what can be read, comments and arguments
    left out (``truncated`` says so)."""
    grant = action.startswith("grant_")

    def name(attr: str) -> str | None:
        return _safe_name(lambda: getattr(record, attr, None))

    status = _attempt(lambda: record.status.value, None)
    return AuditEvent({
        "schema_version": SCHEMA_VERSION,
        "type": "approval",
        "event_id": new_id(),
        "time": _safe_time(lambda: _time.time() if at is None else at),
        "action": action,
        "request_id": name("request_id" if grant else "id"),
        "grant_id": name("id") if grant else None,
        "decision_id": _safe_name(lambda: decision_id) or (None if grant else name("decision_id")),
        "tool": name("tool") or "<unrecordable>",
        "agent": name("agent"),
        "session": name("session"),
        "principal": name("principal"),
        "status": status if type(status) is str else "<unrecordable>",
        "by": name(("revoked_by" if action == "grant_revoked" else "by") if grant
                   else "resolved_by"),
        "comment": None,
        "edited_args": None,
        "rule": name("rule"),
        "policy": name("policy"),
        "scope": _safe_name(lambda: record.scope.value) if grant else None,
        "expires": _safe_time(lambda: record.expires),
        "detail": f"<unrecordable: {type(error).__name__}>",
        "redactions": [],
        "truncated": ["comment", "edited_args"],
    })


def dropped_event(count: int, total: int, first: float, last: float, reason: str) -> AuditEvent:
    """An ``audit_dropped`` event: ``count`` events were not recorded between ``first`` and
    ``last`` (``total`` since the auditor started), because of ``reason`` (``queue_full``).

    Written into the log itself by an auditor that may drop (``delivery="lossy"``), so a gap
    in the trail is visible where it happened.
    """
    return AuditEvent({
        "schema_version": SCHEMA_VERSION,
        "type": "audit_dropped",
        "event_id": new_id(),
        "time": iso_time(_time.time()),
        "dropped": count,
        "total_dropped": total,
        "first": iso_time(first),
        "last": iso_time(last),
        "reason": reason,
    })
