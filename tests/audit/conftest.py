"""Fixtures for the audit tests."""

from __future__ import annotations

import pytest
from _audit_support import make_guard

from callwarden import Guard


@pytest.fixture
def guard() -> Guard:
    """A real Guard built from the base test policy."""
    return make_guard()
