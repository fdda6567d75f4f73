"""The Semantic Kernel tests run in their own virtualenv (semantic-kernel needs mcp<2); they
read the README section through the adapter tests' helper."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent.parent / "adapters"))
sys.path.insert(0, str(Path(__file__).parent))
