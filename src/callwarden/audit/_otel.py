"""The OpenTelemetry sink: audit events as OTel log records or spans (``callwarden[otel]``).

Only the OpenTelemetry *API* is used: the application configures the SDK and its exporters
(OTLP, console, in-memory ...) as for any other telemetry, and passes a provider here or sets
the global one.
"""

from __future__ import annotations

from typing import Any

from callwarden.audit._sinks import encode_line
from callwarden.exceptions import MissingDependency

__all__ = ["INSTALL_HINT", "OTelSink"]

INSTALL_HINT = str(MissingDependency("the otel audit sink", "opentelemetry-api", "otel"))

# Event fields copied onto the record / span as ``callwarden.<field>`` attributes.
_ATTRIBUTES = ("type", "decision_id", "call_id", "tool", "agent", "session", "principal",
               "framework", "effect", "would_effect", "mode", "rule", "source", "policy",
               "elapsed_us", "status", "duration_ms", "error", "schema_version")


def _attributes(event: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in _ATTRIBUTES:
        value = event.get(key)
        if value is not None:
            out[f"callwarden.{key}"] = value
    rules = [m.get("rule") for m in event.get("matched") or () if m.get("rule")]
    if rules:
        out["callwarden.matched_rules"] = rules
    return out


class OTelSink:
    """Emits each event through the OpenTelemetry API.

    Args:
        signal: ``logs`` (one log record per event, body = the event's JSON, event name
            ``callwarden.decision`` / ``callwarden.outcome``) or ``spans`` (one zero-length
            span per event).
        logger_provider: an OTel ``LoggerProvider`` (default: the global one).
        tracer_provider: an OTel ``TracerProvider`` (default: the global one).

    Raises:
        ImportError: with an install hint when ``opentelemetry-api`` is not installed.
        ValueError: for an unknown signal.
    """

    def __init__(self, *, signal: str = "logs", logger_provider: Any = None,
                 tracer_provider: Any = None, name: str = "callwarden.audit") -> None:
        if signal not in ("logs", "spans"):
            raise ValueError(f"signal must be 'logs' or 'spans', not {signal!r}")
        self.signal = signal
        try:
            if signal == "logs":
                from opentelemetry import _logs

                self._record = _logs.LogRecord
                self._severity = _logs.SeverityNumber
                self._emitter: Any = _logs.get_logger(name, logger_provider=logger_provider)
            else:
                from opentelemetry import trace

                self._emitter = trace.get_tracer(name, tracer_provider=tracer_provider)
        except ImportError as e:
            raise MissingDependency("the otel audit sink", "opentelemetry-api", "otel") from e

    def __repr__(self) -> str:
        return f"OTelSink(signal={self.signal!r})"

    def write(self, event: dict[str, Any]) -> None:
        """Emits one log record or span."""
        attributes = _attributes(event)
        name = f"callwarden.{event.get('type', 'event')}"
        if self.signal == "logs":
            denied = event.get("effect") not in ("allow", "modify") or event.get("status") == "error"
            self._emitter.emit(self._record(
                body=encode_line(event), attributes=attributes, event_name=name,
                severity_number=self._severity.WARN if denied else self._severity.INFO,
                severity_text="WARN" if denied else "INFO",
            ))
            return
        span = self._emitter.start_span(f"{name} {event.get('tool')}", attributes=attributes)
        span.end()
