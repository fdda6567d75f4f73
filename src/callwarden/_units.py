"""Parsing of durations and sizes written in policy files (``200ms``, ``1h``; ``10MB``, ``512KiB``)."""

from __future__ import annotations

import re

__all__ = ["parse_duration", "parse_size"]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")
_SCALE = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(b|kb|kib|mb|mib|gb|gib)?\s*$", re.I)
_UNITS = {"b": 1, "kb": 1000, "kib": 1024, "mb": 1000**2, "mib": 1024**2, "gb": 1000**3,
          "gib": 1024**3}


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


def parse_size(value: object) -> int:
    """Bytes for ``10485760``, ``10MB``, ``512KiB`` ...

    Raises:
        ValueError: for anything else, zero and negatives included.
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a size")
    if isinstance(value, int):
        size = value
    elif isinstance(value, str) and (m := _SIZE.match(value)):
        size = int(float(m.group(1)) * _UNITS[(m.group(2) or "b").lower()])
    else:
        raise ValueError(f"{value!r} is not a size (write e.g. 10485760, 10MB or 512KiB)")
    if size <= 0:
        raise ValueError(f"{value!r} must be larger than zero")
    return size
