"""Parsing of durations written in policy files (``200ms``, ``60s``, ``1h``, ``1d``)."""

from __future__ import annotations

import re

__all__ = ["parse_duration"]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")
_SCALE = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_duration(value: object) -> float:
    """Returns seconds for ``200ms``, ``1.5s``, ``60s``, ``10m``, ``1h``, ``1d``, ``1w`` or a number.

    Raises:
        ValueError: for anything else, negative or zero durations included.
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (m := _DURATION.match(value)):
        seconds = float(m.group(1)) * _SCALE[m.group(2) or "s"]
    else:
        raise ValueError(f"{value!r} is not a duration (write e.g. 200ms, 30s, 10m, 1h, 1d)")
    if seconds <= 0:
        raise ValueError(f"{value!r} must be longer than zero")
    return seconds
