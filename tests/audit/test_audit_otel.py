"""The OpenTelemetry sink, with the real SDK's in-memory exporters."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from callwarden import Guard
from callwarden.audit import Auditor, OTelSink

SRC = Path(__file__).resolve().parents[2] / "src"


def test_otel_sink_emits_one_log_record_per_event(guard: Guard) -> None:
    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    with Auditor([OTelSink(logger_provider=provider)]) as auditor:
        decision = guard.check("deploy", {"env": "prod", "token": "abc"})
        auditor.decision(decision)
        auditor.outcome(decision, "ok", 0.01)
    records = [r.log_record for r in exporter.get_finished_logs()]
    assert [r.event_name for r in records] == ["callwarden.decision", "callwarden.outcome"]
    first = records[0]
    assert first.attributes["callwarden.effect"] == "deny"
    assert first.attributes["callwarden.rule"] == "no-prod"
    assert first.attributes["callwarden.decision_id"] == decision.decision_id
    assert tuple(first.attributes["callwarden.matched_rules"]) == ("no-prod",)
    assert first.severity_text == "WARN"
    body = json.loads(first.body)
    assert body["args"]["token"] == "[REDACTED:sensitive_key]"
    provider.shutdown()


def test_otel_sink_emits_spans(guard: Guard) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with Auditor([OTelSink(signal="spans", tracer_provider=provider)]) as auditor:
        auditor.decision(guard.check("bash", {"command": "ls"}))
    (span,) = exporter.get_finished_spans()
    assert span.name == "callwarden.decision bash"
    assert span.attributes["callwarden.effect"] == "allow"
    provider.shutdown()


def test_otel_sink_rejects_an_unknown_signal() -> None:
    with pytest.raises(ValueError, match="logs"):
        OTelSink(signal="metrics")


def test_otel_sink_without_opentelemetry_says_what_to_install() -> None:
    code = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] == 'opentelemetry':
            raise ImportError('blocked')
sys.meta_path.insert(0, Block())
import callwarden.audit
try:
    callwarden.audit.OTelSink()
except ImportError as e:
    print(e)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": str(SRC)}, check=True).stdout
    assert "pip install 'callwarden[otel]'" in out
