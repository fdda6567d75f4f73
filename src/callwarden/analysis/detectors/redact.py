"""Redaction: a copy of a value with every finding (and every unscanned value) replaced."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from callwarden.analysis.detectors.core import Detector, DetectorSet
from callwarden.analysis.detectors.findings import DEFAULT_REPLACEMENT, Finding, Findings
from callwarden.analysis.detectors.findings import redact_spans as _redact_text
from callwarden.analysis.detectors.registry import SECRETS
from callwarden.analysis.detectors.scan import _SET_MEMBER, _as_set, scan_text, scan_value

__all__ = ["DEFAULT_REPLACEMENT", "redact"]

# Markers in the redaction tree, distinct from any mapping key or list index.
_HERE, _IN_KEY, _MEMBERS, _WHOLE = object(), object(), object(), object()


def _rebuild(value: Any, node: dict[Any, Any], replacement: str) -> Any:
    if _WHOLE in node:
        return replacement.format(detector="unscanned", category="unscanned")
    here = node.get(_HERE, ())
    if isinstance(value, str):
        return _redact_text(value, here, replacement) if here else value
    if isinstance(value, bytes | bytearray):
        text = bytes(value).decode("utf-8", "surrogateescape")
        return _redact_text(text, here, replacement).encode("utf-8", "surrogateescape")
    if isinstance(value, int) and not isinstance(value, bool) and here:
        return _redact_text(str(value), here, replacement)
    if isinstance(value, Mapping):
        items = []
        for k, v in value.items():
            key = k if isinstance(k, str) else str(k)
            child = node.get(key)
            if child is None:
                items.append((k, v))
                continue
            keys = child.get(_IN_KEY, ())
            new_key = _redact_text(key, keys, replacement) if keys else k
            items.append((new_key, _rebuild(v, child, replacement)))
        return _same_mapping(value, items)
    if isinstance(value, list | tuple):
        new = [v if node.get(i) is None else _rebuild(v, node[i], replacement)
               for i, v in enumerate(value)]
        return type(value)(new) if type(value) in (list, tuple) else new
    if isinstance(value, set | frozenset) and _MEMBERS in node:
        return type(value)(_rebuild(v, node[_MEMBERS], replacement) for v in value)
    return value


def _same_mapping(value: Mapping[Any, Any], items: list[tuple[Any, Any]]) -> Mapping[Any, Any]:
    kind: Any = type(value)
    if kind is dict:
        return dict(items)
    try:
        return kind(items)  # type: ignore[no-any-return]  # FrozenDict and dict subclasses
    except TypeError:
        return dict(items)


def redact(
    value: Any,
    using: Iterable[Finding] | DetectorSet | Iterable[Detector] = SECRETS,
    replacement: str = DEFAULT_REPLACEMENT,
) -> Any:
    """Returns a copy of ``value`` with every finding replaced by a marker.

    Values a ``Findings`` lists as ``unscanned`` are replaced whole (detector ``unscanned``).

    Args:
        value: a string or a nested structure (as given to ``scan_value``).
        using: findings from ``scan_text`` / ``scan_value`` on this same value, or detectors to
            scan with first.
        replacement: the marker; ``{detector}`` and ``{category}`` are filled in.

    Untouched sub-structures are shared with the input, changed ones are rebuilt with the same
    container type (a FrozenDict stays a FrozenDict).
    """
    given: list[Any] = [using] if isinstance(using, Detector) else list(using)
    items: list[Finding]
    if given and not isinstance(given[0], Finding):
        dset = _as_set(given)
        items = scan_text(value, dset) if isinstance(value, str) else scan_value(value, dset)
    else:
        items = given
    source = items if isinstance(items, Findings) else using
    unscanned = source.unscanned if isinstance(source, Findings) else []
    if not items and not unscanned:
        return value
    if isinstance(value, str):
        if unscanned:
            return replacement.format(detector="unscanned", category="unscanned")
        return _redact_text(value, items, replacement)
    tree: dict[Any, Any] = {}
    for parts in unscanned:
        node = tree
        for part in parts:
            node = node.setdefault(_MEMBERS if part == _SET_MEMBER else part, {})
        node[_WHOLE] = True
    for f in items:
        node = tree
        for part in f.parts:
            node = node.setdefault(_MEMBERS if part == _SET_MEMBER else part, {})
        node.setdefault(_IN_KEY if f.in_key else _HERE, []).append(f)
    return _rebuild(value, tree, replacement)
