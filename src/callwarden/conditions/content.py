"""The ``secrets:`` and ``content:`` rule conditions: sensitive data in a call's arguments.

.. code-block:: yaml

    - id: no-exfiltration
      match: {kind: [http, email]}
      secrets: true                  # or {detectors: [aws, github], exclude: [jwt], in: [body]}
      effect: deny

    - id: scrub-pii
      match: {tool: send_email}
      content: {detect: [card_number, iban], patterns: {ticket: "TCK-\\d{6}"}, in: [body]}
      effect: modify                 # the Hit carries redacted args for the engine to apply

Both scan argument values (and keys), all of them or only the top-level arguments named in
``in:``. The Hit's ``detail`` names detectors and paths, never the matched text, and its
``args`` are the call's arguments with each match replaced by ``[REDACTED:<detector>]``.

Immutable values that are not text (``Decimal``, dates and times, ``UUID``, ``Fraction``,
``complex``, paths, enum members) are scanned in their text form (``str(value)``), and stay as
they are in the rewritten args unless a match lies in them.

When part of the arguments cannot be scanned (a string over ``max_bytes``, nesting too deep,
an opaque object, hostile text), ``on_incomplete: match`` (the default, failing closed) makes
the condition hold with code ``<key>.incomplete``; its rewritten args also replace each value
not fully scanned with ``[REDACTED:unscanned]``. ``ignore`` judges on what was scanned.
"""

from __future__ import annotations

import datetime
import decimal
import enum
import fractions
import pathlib
import uuid
from collections.abc import Mapping
from typing import Any

from callwarden.analysis.detectors import (
    DEFAULT_REPLACEMENT,
    MAX_CHARS,
    DetectorSet,
    Findings,
    UnknownDetector,
    redact,
    scan_value,
    select_detectors,
)
from callwarden.conditions.base import CompileEnv, Hit, Subject, register_condition
from callwarden.exceptions import ConfigError

__all__ = ["ContentMatcher", "SecretsMatcher"]

_ON_INCOMPLETE = ("match", "ignore")
# Values whose text form says all they hold: scanned as ``str(value)``.
_TEXT_FORM = (decimal.Decimal, fractions.Fraction, complex, datetime.date, datetime.time,
              datetime.timedelta, datetime.timezone, uuid.UUID, pathlib.PurePath, enum.Enum,
              range)
_MAX_DEPTH = 64


class _ScanMatcher:
    """Shared machinery: which args to scan, with what, and how to report it."""

    __slots__ = ("_code", "_detectors", "_in", "_max_chars", "_memo_key", "_on_incomplete",
                 "_replacement")

    key = "content"
    _allowed: frozenset[str] = frozenset()

    def _setup(self, config: Mapping[str, Any], detectors: DetectorSet) -> None:
        unknown = sorted(set(config) - self._allowed)
        if unknown:
            raise ConfigError(f"unknown option {unknown[0]!r}", key=unknown[0],
                              hint=f"{self.key} accepts: {', '.join(sorted(self._allowed))}")
        self._detectors = detectors
        self._in = _names(config.get("in"), "in")
        self._max_chars = config.get("max_bytes", MAX_CHARS)
        if isinstance(self._max_chars, bool) or not isinstance(self._max_chars, int) \
                or self._max_chars <= 0:
            raise ConfigError("must be a positive number of characters", key="max_bytes",
                              hint="e.g. max_bytes: 1048576")
        self._on_incomplete = config.get("on_incomplete", "match")
        if self._on_incomplete not in _ON_INCOMPLETE:
            raise ConfigError(f"must be one of {', '.join(_ON_INCOMPLETE)}", key="on_incomplete")
        self._replacement = config.get("replacement", DEFAULT_REPLACEMENT)
        try:
            self._replacement.format(detector="d", category="c")
        except (AttributeError, KeyError, IndexError, ValueError) as e:
            raise ConfigError(
                "must be a string; it may use {detector} and {category}", key="replacement",
                hint='e.g. replacement: "[REDACTED:{detector}]"') from e
        self._code = self.key
        # One scan per call and configuration, shared by every rule that asks the same question.
        self._memo_key = f"callwarden.{self.key}:{detectors.names}:{self._in}:{self._max_chars}"

    def _scan(self, subject: Subject) -> Findings:
        args = subject.args
        cached = subject.memo.get(self._memo_key)
        if cached is not None and cached[0] is args:
            return cached[1]  # type: ignore[no-any-return]
        target: Any = args if self._in is None else {k: args[k] for k in self._in if k in args}
        found = scan_value(_text_forms(target), self._detectors, max_chars=self._max_chars)
        subject.memo[self._memo_key] = (args, found)
        return found

    def __call__(self, subject: Subject) -> Hit | None:
        try:
            found = self._scan(subject)
        except Exception as e:  # fail closed: an unscannable call is not a clean call
            return Hit(detail=f"arguments could not be scanned ({type(e).__name__})",
                       code=f"{self._code}.error")
        incomplete = found.truncated and self._on_incomplete == "match"
        if not found and not incomplete:
            return None
        if not incomplete:
            found.unscanned.clear()  # ``ignore``: rewrite only what was found
        # With ``match``, the rewrite also replaces every value not fully scanned, so a
        # ``modify`` rule never passes on text nobody looked at.
        texts = _text_forms(subject.args)
        args = _restore(subject.args, texts, redact(texts, found, self._replacement))
        detail = found.summary()
        if incomplete:
            note = f"arguments not fully scanned: {found.notes[0]}"
            return Hit(detail=f"{detail}; {note}" if detail else note,
                       code=f"{self._code}.incomplete", args=args)
        return Hit(detail=detail, code=f"{self._code}.found", args=args)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self._detectors.names)!r}, in={self._in!r})"


def _text_forms(value: Any, depth: int = 0) -> Any:
    """``value`` with every immutable non-text value replaced by its text form; containers
    with none are returned as they are (no copy)."""
    if isinstance(value, str | bytes | bytearray | int | float | bool) or value is None:
        return value  # str/int enums included: the scanner reads them as they are
    if isinstance(value, _TEXT_FORM):
        return str(value.value) if isinstance(value, enum.Enum) else str(value)
    if depth >= _MAX_DEPTH:
        return value  # the scanner notes what is too deep
    if isinstance(value, Mapping):
        items = [(k, _text_forms(v, depth + 1)) for k, v in value.items()]
        if all(new is old for (_, new), old in zip(items, value.values(), strict=True)):
            return value
        return _mapping(type(value), items)
    if isinstance(value, list | tuple):
        converted = [_text_forms(v, depth + 1) for v in value]
        if all(new is old for new, old in zip(converted, value, strict=True)):
            return value
        return type(value)(converted) if type(value) in (list, tuple) else converted
    return value


def _mapping(kind: Any, items: list[tuple[Any, Any]]) -> Any:
    """A mapping of the same type (a FrozenDict stays one), else a dict."""
    try:
        return kind(items)
    except TypeError:
        return dict(items)


def _restore(original: Any, texts: Any, redacted: Any, depth: int = 0) -> Any:
    """The redacted copy of ``texts`` (``_text_forms(original)``) with the original values
    put back wherever redaction changed nothing, so a Decimal stays a Decimal."""
    if redacted is texts:
        return original
    if texts is original or depth >= _MAX_DEPTH:
        return redacted
    if isinstance(original, Mapping) and isinstance(redacted, Mapping) \
            and isinstance(texts, Mapping) and len(redacted) == len(original):
        items = [(rk, _restore(ov, tv, rv, depth + 1)) for (rk, rv), ov, tv in
                 zip(redacted.items(), original.values(), texts.values(), strict=True)]
        return _mapping(type(redacted), items)
    if isinstance(original, list | tuple) and isinstance(redacted, list | tuple) \
            and isinstance(texts, list | tuple) and len(redacted) == len(original):
        values = [_restore(o, t, r, depth + 1)
                  for o, t, r in zip(original, texts, redacted, strict=True)]
        return type(redacted)(values)
    return redacted


def _names(value: Any, key: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError("must be a list of names", key=key, hint=f"e.g. {key}: [body, url]")
    return tuple(value)


def _patterns(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
        raise ConfigError("must map a name to a regex", key="patterns",
                          hint='e.g. patterns: {ticket: "TCK-\\\\d{6}"}')
    return {str(k): v for k, v in value.items()}


def _select(include: Any, exclude: Any, patterns: dict[str, str], include_key: str) -> DetectorSet:
    chosen = _names(include, include_key)
    try:
        return select_detectors(chosen, exclude=_names(exclude, "exclude") or (),
                                patterns=patterns)
    except UnknownDetector as e:
        where = include_key if chosen and e.name in chosen else "exclude"
        raise ConfigError(str(e), key=where,
                          hint="see callwarden.analysis.detectors.DETECTORS and FAMILIES for names") from e
    except ValueError as e:
        raise ConfigError(str(e), key="patterns") from e


@register_condition("secrets")
class SecretsMatcher(_ScanMatcher):
    """``secrets: true`` or ``{detectors, exclude, patterns, in, max_bytes, on_incomplete,
    replacement}``: holds when an argument contains a credential."""

    __slots__ = ()
    key = "secrets"
    _allowed = frozenset({"detectors", "exclude", "patterns", "in", "max_bytes", "on_incomplete",
                          "replacement"})

    def __init__(self, config: Any, env: CompileEnv) -> None:
        if config is True:
            config = {}
        if not isinstance(config, Mapping):
            raise ConfigError(
                f"expected true or a mapping, got {config!r:.40}",
                hint="write `secrets: true`, or e.g. `secrets: {detectors: [aws, github]}`; "
                     "remove the key to turn the check off")
        detectors = _select(config.get("detectors"), config.get("exclude"),
                            _patterns(config.get("patterns")), "detectors")
        self._setup(config, detectors)


@register_condition("content")
class ContentMatcher(_ScanMatcher):
    """``content: {detect, patterns, exclude, in, max_bytes, on_incomplete, replacement}``:
    holds when an argument contains personal data or a custom pattern (``true``: all PII)."""

    __slots__ = ()
    key = "content"
    _allowed = frozenset({"detect", "exclude", "patterns", "in", "max_bytes", "on_incomplete",
                          "replacement"})

    def __init__(self, config: Any, env: CompileEnv) -> None:
        if config is True:
            config = {"detect": ["pii"]}
        if not isinstance(config, Mapping):
            raise ConfigError(
                f"expected true or a mapping, got {config!r:.40}",
                hint="e.g. `content: {detect: [card_number, iban, email, phone]}`")
        patterns = _patterns(config.get("patterns"))
        detect = config.get("detect")
        if detect is None:
            detect = [] if patterns else ["pii"]
        detectors = _select(detect, config.get("exclude"), patterns, "detect")
        if not len(detectors):
            raise ConfigError("selects no detector", key="detect",
                              hint="list detectors in `detect:` or add `patterns:`")
        self._setup(config, detectors)
