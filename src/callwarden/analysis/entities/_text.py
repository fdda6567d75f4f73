"""Text handling shared by every kind: NFKC, invisible characters, caps, token boundaries."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable
from functools import lru_cache

from publicsuffixlist import PublicSuffixList

from callwarden.analysis.detectors.core import _TooManyCandidates
from callwarden.analysis.detectors.findings import Span
from callwarden.analysis.urls import InvalidUrl, _normalize_host

MAX_TEXT_CHARS = 100_000
"""Characters of a text that are read."""

MAX_PER_KIND = 1_000
"""Values kept per kind and text."""

_MAX_QUOTED = 200  # also the longest raw candidate kept in a rejected marker

_Found = tuple[list[str], list[str]]  # normalized values, raw rejected candidates
_Finder = Callable[[str, bool], _Found]  # (NFKC text, strict) -> found

# Control characters (tab, newlines and the like excepted), every format character (Cf) of
# Unicode 14, variation selectors, invisible fillers and combining joiners: an attacker can put
# any of them inside a value without changing how it looks. A test checks the Cf coverage.
_INVISIBLE_RE = re.compile(
    "[\x00-\x08\x0e-\x1f\x7f-\x9f\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f"
    "\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb"
    "\u0600-\u0605\u06dd\u070f\u0890\u0891\u08e2\U000110bd\U000110cd\U00013430-\U00013438"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]")

# IDNA 2003 (what encodings.idna implements) maps these away; browsers (UTS 46) keep them.
_DEVIATIONS = frozenset("ßς")

def _nfkc(text: str) -> str:
    return text if text.isascii() else unicodedata.normalize("NFKC", text)


def _prep(value: str) -> str | None:
    """One value: NFKC, outer whitespace stripped; None when an invisible character is in it."""
    value = _nfkc(value)
    if _INVISIBLE_RE.search(value):
        return None
    return value.strip()


def _cap(text: str) -> tuple[str, bool]:
    """The first MAX_TEXT_CHARS characters, and whether anything was cut. The cut is made
    after a word that ends in a letter: a number written with spaces (a phone, a card, an
    IBAN) or a date never does, so none is cut into a shorter one."""
    if len(text) <= MAX_TEXT_CHARS:
        return text, False
    head = text[:MAX_TEXT_CHARS]
    last = None
    for last in _AFTER_WORD.finditer(head, max(0, MAX_TEXT_CHARS - _CUT_REACH)):  # noqa: B007
        pass
    if last is not None:
        return head[:last.start() + 1], True
    cut = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"))
    return (head[:cut] if cut > 0 else ""), True


_AFTER_WORD = re.compile(r"[^\W\d_]\s")

_CUT_REACH = 4096


def _read(text: str) -> tuple[str, bool]:
    """The NFKC text to scan (capped before and after folding, which can lengthen it)."""
    head, cut = _cap(text)
    folded, cut_again = _cap(_nfkc(head))
    return folded, cut or cut_again


def _is_invisible(ch: str) -> bool:
    return _INVISIBLE_RE.match(ch) is not None


def _joins(ch: str) -> bool:
    """A character that, next to a value found by a finder, makes it part of a longer token."""
    return _is_invisible(ch) or (not ch.isascii() and (
        ch.isalnum() or unicodedata.category(ch)[0] == "M"))


def _glued_span(text: str, start: int, end: int) -> bool:
    return (start > 0 and _joins(text[start - 1])) or (end < len(text) and _joins(text[end]))


def _glued_name(text: str, start: int, end: int) -> bool:
    """A URL or host name at text[start:end] continues into its neighbours."""
    if start > 0:
        ch = text[start - 1]
        if ch.isalnum() or ch in "-_.@" or _joins(ch):
            return True
    if end < len(text):
        ch = text[end]
        if ch.isalnum() or ch in "-_@" or _joins(ch):
            return True
        if ch == "." and end + 1 < len(text) and text[end + 1].isalnum():
            return True
    return False


def _spans(finder: Callable[[str], Iterable[Span]], text: str) -> tuple[list[Span], bool]:
    """The spans a pii finder yields, and whether it gave up on too many candidates."""
    spans: list[Span] = []
    try:
        for span in finder(text):
            spans.append(span)
    except _TooManyCandidates:
        return spans, True
    return spans, False


def _span_finder(finder: Callable[[str], Iterable[Span]],
                 norm: Callable[[str], str | None]) -> _Finder:
    """A finder built on one of the pii finders, with a normalizer for what it finds."""
    def find(text: str, strict: bool) -> _Found:
        values: list[str] = []
        rejected: list[str] = []
        spans, gave_up = _spans(finder, text)
        for start, end in spans:
            raw = text[start:end]
            value = None if _glued_span(text, start, end) else norm(raw)
            if value is not None:
                values.append(value)
            elif strict:
                rejected.append(raw)
        if gave_up and strict:
            rejected.append("too many candidates")
        return values, rejected
    return find


@lru_cache(maxsize=1)
def _psl() -> PublicSuffixList:
    return PublicSuffixList()  # parses the bundled list once (about 50 ms)


def _hostname(raw: str) -> str | None:
    """An ASCII host name (IDNA, lower case, no trailing dot) with at least two labels."""
    if not raw or "%" in raw or any(ch in _DEVIATIONS for ch in raw.lower()):
        return None
    try:
        host, ip, _ = _normalize_host(raw)
    except InvalidUrl:
        return None
    if ip is not None or "." not in host:
        return None
    return host


@lru_cache(maxsize=4096)
def _registrable(host: str) -> str | None:
    return _psl().privatesuffix(host)
