from __future__ import annotations

from collections.abc import Callable

import pytest

from callwarden._call import ToolCall
from callwarden._profiles import default_profile
from callwarden.conditions.base import Subject


@pytest.fixture
def subject() -> Callable[..., Subject]:
    def make(command: object, tool: str = "Bash") -> Subject:
        return Subject(ToolCall(tool, {"command": command}), default_profile(tool))

    return make
