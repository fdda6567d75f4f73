"""The CrewAI adapter tests run in their own virtualenv (CrewAI pins mcp<2 and an older
pydantic): scripts/test.sh runs them with CALLWARDEN_TEST_ENV=crewai."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

# Offline: no telemetry, no tracing prompt, no OpenTelemetry export.
os.environ.update(CREWAI_DISABLE_TELEMETRY="true", OTEL_SDK_DISABLED="true",
                  CREWAI_TRACING_ENABLED="false")

sys.path.insert(0, str(Path(__file__).parent.parent.parent / "adapters"))  # _readme

with warnings.catch_warnings():
    # crewai.rag's lazy module raises this while CrewAI imports its submodules (an
    # ImportWarning, turned into an error by filterwarnings=error at collection).
    warnings.filterwarnings("ignore", "Cannot set an attribute on 'crewai.rag'", ImportWarning)
    import crewai  # noqa: F401
    from crewai.hooks import get_after_tool_call_hooks, get_before_tool_call_hooks
    from crewai.hooks.tool_hooks import (
        unregister_after_tool_call_hook,
        unregister_before_tool_call_hook,
    )


@pytest.fixture(autouse=True)
def no_leaked_hooks() -> Iterator[None]:
    """CrewAI's tool hooks are process-global: whatever a test left registered is removed."""
    before, after = get_before_tool_call_hooks(), get_after_tool_call_hooks()
    yield
    for hook in get_before_tool_call_hooks():
        if hook not in before:
            unregister_before_tool_call_hook(hook)
    for hook in get_after_tool_call_hooks():
        if hook not in after:
            unregister_after_tool_call_hook(hook)
