"""Scanning values: one string, or every string (and key) in a nested structure, with caps.

Findings from a nested value carry a path (``args.body``, ``args.to[1]``); what a cap left
unscanned is noted on the result.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from callwarden.analysis.detectors.core import Detector, DetectorSet
from callwarden.analysis.detectors.findings import (
    DEFAULT_REPLACEMENT,
    Finding,
    Findings,
    PathPart,
    redact_spans,
)
from callwarden.analysis.detectors.registry import SECRETS

MAX_CHARS = 1 << 20  # per string: 1 MiB of text is scanned, the rest is reported as truncated
MAX_TOTAL_CHARS = 8 << 20
MAX_DEPTH = 32


def _as_set(detectors: DetectorSet | Iterable[Detector]) -> DetectorSet:
    return detectors if isinstance(detectors, DetectorSet) else DetectorSet(detectors)


def scan_text(text: str, detectors: DetectorSet | Iterable[Detector] = SECRETS) -> Findings:
    """Scans one string; returns its findings in position order (no cap on length)."""
    return _as_set(detectors).scan(text)


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SET_MEMBER = -1  # path part for "some member of a set": sets have no order to index by


_KEY_IN_PATH = 64  # a longer mapping key is shortened in a path


def _child_path(path: str, key: PathPart) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if len(key) > _KEY_IN_PATH:
        key = key[:_KEY_IN_PATH] + "…"
    if _IDENT.match(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key)}]"


class _Walker:
    __slots__ = ("budget", "dset", "max_chars", "max_depth", "out", "scan_keys")

    def __init__(self, dset: DetectorSet, max_chars: int, max_total: int, max_depth: int,
                 scan_keys: bool) -> None:
        self.dset, self.max_chars, self.budget = dset, max_chars, max_total
        self.max_depth, self.scan_keys, self.out = max_depth, scan_keys, Findings()

    def text(self, text: str, path: str, parts: tuple[PathPart, ...], in_key: bool) -> None:
        if len(text) < 6:
            return
        self._text(text, path, parts, in_key)

    def key(self, key: str, path: str, parts: tuple[PathPart, ...]) -> str:
        """Scans a mapping key; returns the path of its value. A key holding a finding is
        shown redacted in every path (its own findings', its notes', its children's): a
        finding names where a secret is, never the secret, even when the secret is a key."""
        child = _child_path(path, key)
        if len(key) < 6:
            return child
        found, noted = len(self.out), len(self.out.notes)
        self._text(key, child, parts, True)
        if len(self.out) == found:
            return child
        shown = _child_path(path, redact_spans(key, self.out[found:], DEFAULT_REPLACEMENT))
        self.out[found:] = [replace(f, path=shown) for f in self.out[found:]]
        self.out.notes[noted:] = [n.replace(child, shown) for n in self.out.notes[noted:]]
        return shown

    def _text(self, text: str, path: str, parts: tuple[PathPart, ...], in_key: bool) -> None:
        if self.budget <= 0:
            self.out.note(f"{path}: not scanned, total scan budget spent", parts)
            return
        limit = min(self.max_chars, self.budget)
        if len(text) > limit:
            self.out.note(f"{path}: scanned the first {limit} of {len(text)} characters", parts)
            text = text[:limit]
        self.budget -= len(text)
        found = self.dset.scan(text)
        for f in found:
            self.out.append(Finding(f.detector, f.category, f.start, f.end, path, in_key, parts))
        if found.truncated:
            self.out.note(f"{path}: {found.notes[0]}", parts)

    def walk(self, value: Any, path: str, parts: tuple[PathPart, ...], depth: int) -> None:
        if isinstance(value, str):
            self.text(value, path, parts, False)
        elif isinstance(value, bool) or value is None:
            return
        elif isinstance(value, int | float):
            if isinstance(value, int) and abs(value) >= 10**11:  # long enough to be a card
                self.text(str(value), path, parts, False)
        elif isinstance(value, bytes | bytearray):
            self.text(bytes(value).decode("utf-8", "surrogateescape"), path, parts, False)
        elif depth >= self.max_depth:
            self.out.note(f"{path}: nested deeper than {self.max_depth} levels, not scanned",
                          parts)
        elif isinstance(value, Mapping):
            for k, v in value.items():
                key = k if isinstance(k, str) else str(k)
                cparts = (*parts, key)
                child = self.key(key, path, cparts) if self.scan_keys \
                    else _child_path(path, key)
                self.walk(v, child, cparts, depth + 1)
        elif isinstance(value, list | tuple):
            for i, v in enumerate(value):
                self.walk(v, _child_path(path, i), (*parts, i), depth + 1)
        elif isinstance(value, set | frozenset):
            for v in value:
                self.walk(v, f"{path}[*]", (*parts, _SET_MEMBER), depth + 1)
        else:
            self.out.note(f"{path}: a {type(value).__name__} cannot be scanned", parts)


def scan_value(
    value: Any,
    detectors: DetectorSet | Iterable[Detector] = SECRETS,
    *,
    root: str = "args",
    max_chars: int = MAX_CHARS,
    max_total_chars: int = MAX_TOTAL_CHARS,
    max_depth: int = MAX_DEPTH,
    scan_keys: bool = True,
) -> Findings:
    """Scans every string in a nested structure of mappings and sequences.

    Each finding's ``path`` says where (``args.body``, ``args.items[2].note``). Strings are
    scanned up to ``max_chars`` each and ``max_total_chars`` in all; anything not scanned
    (over a cap, too deep, an opaque object) sets ``truncated`` on the result with a note.
    Integers of 12+ digits are scanned as text (a card number passed as a number).
    """
    walker = _Walker(_as_set(detectors), max_chars, max_total_chars, max_depth, scan_keys)
    walker.walk(value, root, (), 0)
    return walker.out
