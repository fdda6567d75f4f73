"""The running service every test here may take (``service``): ``callwarden serve`` on a
free loopback port, stopped cleanly at the end and without a traceback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from test_serve import Service


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    running = Service(tmp_path)
    yield running
    assert running.stop() == 0
    assert not any("Traceback" in line for line in running.said), running.said
