"""Conversion of arbitrary argument values into JSON-safe data, for decisions and records."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["json_safe"]


def json_safe(value: Any, *, max_depth: int = 100) -> Any:
    """Returns ``value`` as plain JSON data; what JSON cannot hold becomes its ``repr``."""
    return _safe(value, 0, max_depth)


def _safe(value: Any, depth: int, max_depth: int) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if depth >= max_depth:
        return "<too deep>"
    if isinstance(value, Mapping):
        return {str(k): _safe(v, depth + 1, max_depth) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_safe(v, depth + 1, max_depth) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    try:
        text = repr(value)
    except Exception:
        text = f"<unrepresentable {type(value).__name__}>"
    return text[:1000]
