"""The AutoGen MCP test reuses the scripted-model helpers of the AutoGen adapter tests."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent.parent / "adapters"))
