"""Seeing through disguised text: invisible characters, fullwidth letters and base64.

``DetectorSet.scan`` (in :mod:`callwarden.analysis.detectors.core`) scans text a second time NFKC-folded with
invisible format characters dropped (:func:`_fold`), and scans the base64 blobs that decode
to printable text (:func:`_b64_blobs`).
"""

from __future__ import annotations

import base64
import itertools
import re
import unicodedata
from collections.abc import Iterator

# Invisible characters an attacker can put inside a token: format characters (Cf: zero-width
# space/joiner, soft hyphen, bidi marks, word joiner, BOM) and variation selectors.
_INVISIBLE = frozenset(
    chr(c) for c in itertools.chain(range(0x200B, 0x2010), range(0x202A, 0x202F),
                                    range(0x2060, 0x2065), range(0xFE00, 0xFE10),
                                    (0x00AD, 0x034F, 0x061C, 0x180E, 0xFEFF)))
_INVISIBLE_RE = re.compile("[" + "".join(sorted(_INVISIBLE)) + "]")
_B64_MIN = 20
_B64_MAX_BLOBS = 64
_B64_TOKEN = re.compile(r"[A-Za-z0-9+/]{20,8192}={0,2}")
_TOKEN_EDGES = "\"'`,;:()[]{}<>"


def _b64_blobs(text: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, decoded text) of the whitespace-separated base64 tokens that decode to
    printable text: where an encoded secret sits in a command line, a value or a message.
    Splitting on whitespace is C-fast; a regex over every position cost more than the scan."""
    count = 0
    pos = 0
    for word in text.split():
        if len(word) < _B64_MIN:
            continue
        token = word.strip(_TOKEN_EDGES)
        if _B64_TOKEN.fullmatch(token) is None:
            continue
        count += 1
        if count > _B64_MAX_BLOBS:
            return
        decoded = _b64_text(token)
        start = text.find(token, pos)
        if start < 0:
            continue
        pos = start + len(token)
        if decoded is not None:
            yield start, pos, decoded


def _fold(text: str) -> tuple[str, list[int]]:
    """NFKC per character with invisible characters dropped, and each output char's source."""
    chars: list[str] = []
    where: list[int] = []
    for i, ch in enumerate(text):
        if ch.isascii():
            chars.append(ch)
            where.append(i)
            continue
        if ch in _INVISIBLE or unicodedata.category(ch) == "Cf":
            continue
        for out in unicodedata.normalize("NFKC", ch):
            chars.append(out)
            where.append(i)
    return "".join(chars), where


def _b64_text(blob: str) -> str | None:
    """The text a base64 blob encodes, when it is printable text, else None."""
    if len(blob.rstrip("=")) % 4 == 1 or blob.isalpha() or blob.isdigit():
        return None
    try:
        raw = base64.b64decode(blob + "=" * (-len(blob) % 4), validate=True)
        decoded = raw.decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return None
    if len(decoded) < 12 or not all(c.isprintable() or c in "\n\r\t" for c in decoded):
        return None
    return decoded
