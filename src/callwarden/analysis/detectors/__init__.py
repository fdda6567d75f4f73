"""Secret and personal-data detectors: scanning text and nested arguments, and redacting.

A :class:`Detector` finds one kind of sensitive text (an AWS key, a JWT, a card number ...);
a :class:`DetectorSet` compiles several into one scanner with a keyword prefilter, so benign
text costs one C-level pass. Findings carry the detector, the category, the span and the JSON
path, never the matched text: they are safe to log, to put in an audit event and to show to a
model.

    >>> found = scan_value({"body": "key: AKIAZ7VRSQ5TJN2XOHNB"})
    >>> [f"{f.detector} in {f.path}" for f in found]
    ['aws_access_key_id in args.body']
    >>> redact({"body": "key: AKIAZ7VRSQ5TJN2XOHNB"}, found)
    {'body': 'key: [REDACTED:aws_access_key_id]'}

Where each part lives (imports point down this list only):

- ``redact``: :func:`redact`, replacing findings in a copy of a value.
- ``scan``: :func:`scan_text`, :func:`scan_value` and the walker over nested values, with caps.
- ``registry``: :data:`DETECTORS`, :data:`FAMILIES`, :data:`SECRETS`, :data:`PII`,
  :class:`UnknownDetector` and :func:`select_detectors`.
- ``providers``, ``structural``, ``assignments``, ``pii``: the built-in detectors (provider
  token regexes; PEM keys, URL passwords and auth headers; ``API_KEY=...`` assignments;
  cards, IBANs, e-mails and phones).
- ``heuristics``: placeholder, example-value and entropy checks on a candidate value.
- ``core``: :class:`Detector`, :class:`DetectorSet`, the prefilter and the JSON screens.
- ``disguises``: NFKC folding and base64 decoding, so disguised secrets are found too.
- ``findings``: :class:`Finding` and :class:`Findings`.
"""

from __future__ import annotations

from callwarden.analysis.detectors.core import Detector, DetectorSet
from callwarden.analysis.detectors.findings import Finding, Findings
from callwarden.analysis.detectors.redact import DEFAULT_REPLACEMENT, redact
from callwarden.analysis.detectors.registry import (
    DETECTORS,
    FAMILIES,
    PII,
    SECRETS,
    UnknownDetector,
    select_detectors,
)
from callwarden.analysis.detectors.scan import MAX_CHARS, scan_text, scan_value

__all__ = [
    "DEFAULT_REPLACEMENT",
    "DETECTORS",
    "FAMILIES",
    "MAX_CHARS",
    "PII",
    "SECRETS",
    "Detector",
    "DetectorSet",
    "Finding",
    "Findings",
    "UnknownDetector",
    "redact",
    "scan_text",
    "scan_value",
    "select_detectors",
]
