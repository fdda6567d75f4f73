"""Dates and quoted text."""

from __future__ import annotations

import datetime
import re

from callwarden.analysis.detectors.core import MAX_CANDIDATES
from callwarden.analysis.entities._text import _MAX_QUOTED, MAX_PER_KIND, _Found, _glued_span, _prep

_MONTHS = {"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8,
           "sep": 9, "oct": 10, "nov": 11, "dec": 12}

_MONTH = (r"(?P<month>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?"
          r"|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\b\.?")

_ORDINAL = r"(?:st|nd|rd|th)?"

# Each starts with a character class, which Python's re scans for quickly; the boundary
# before it is a lookbehind placed after that first character.
_ISO_DATE = re.compile(r"(?P<year>[0-9](?<![\w\-/.][0-9])[0-9]{3})(?P<sep>[-/])(?P<mon>[0-9]{2})(?P=sep)"
                       r"(?P<day>[0-9]{2})(?![0-9])")

_DAY_MONTH = re.compile(rf"(?<![\w.])(?P<day>[0-9]{{1,2}}){_ORDINAL}\s{{1,3}}(?:of\s{{1,3}})?"
                        rf"{_MONTH},?\s{{1,3}}(?P<year>[0-9]{{4}})$", re.IGNORECASE)

_MONTH_DAY = re.compile(rf"(?<!\w){_MONTH}\s{{1,3}}(?P<day>[0-9]{{1,2}}){_ORDINAL},?\s{{1,3}}"
                        r"(?P<year>[0-9]{4})$", re.IGNORECASE)

_DATE_PATTERNS = (_ISO_DATE, _DAY_MONTH, _MONTH_DAY)

_YEAR = re.compile(r"[0-9]{4}")

_WORDY_REACH = 48  # "12th of September, 2026" and then some

_DATE_TIME = re.compile(r"(?:[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,9})?)?"
                        r"(?:Z|[+-][0-9]{2}:?[0-9]{2})?)?")

_DATE_SHAPE = re.compile(r"(?=.*[0-9])[0-9A-Za-z ,./\-:]{6,40}")


def _date_of(m: re.Match[str]) -> str | None:
    groups = m.groupdict()
    month = int(groups["mon"]) if groups.get("mon") else _MONTHS[groups["month"][:3].lower()]
    try:
        return datetime.date(int(groups["year"]), month, int(groups["day"])).isoformat()
    except ValueError:
        return None  # 2026-02-30


def _date(value: str) -> str | None:
    text = _prep(value)
    if not text:
        return None
    m = _ISO_DATE.match(text)
    if m is not None:
        return _date_of(m) if _DATE_TIME.fullmatch(text, m.end()) else None
    for rx in (_DAY_MONTH, _MONTH_DAY):
        m = rx.match(text)
        if m is not None:
            return _date_of(m)
    return None


def _find_dates(text: str, strict: bool) -> _Found:
    values: list[str] = []
    rejected: list[str] = []
    found = [m for _, m in zip(range(MAX_CANDIDATES), _ISO_DATE.finditer(text), strict=False)]
    # A date with a month name ends in a year after a space, after a letter, "." or ",": only
    # there are the (slower) month patterns tried, backwards from the year.
    for _, year in zip(range(MAX_CANDIDATES), _YEAR.finditer(text), strict=False):
        start, end = year.span()
        if (start < 2 or not text[start - 1].isspace() or not (text[start - 2].isalpha()
                                                               or text[start - 2] in ".,")
                or text[end:end + 1].isdigit()):
            continue
        for rx in (_DAY_MONTH, _MONTH_DAY):
            m = rx.search(text, max(0, start - _WORDY_REACH), end)
            if m is not None:
                found.append(m)
                break
    for m in found:
        iso = None if _glued_span(text, *m.span()) else _date_of(m)
        if iso is not None:
            values.append(iso)
        elif strict:
            rejected.append(m.group())
    return values, rejected


# Opening quote -> the closing quotes that may end it (curly, low-high, guillemets, corners).
_QUOTES = {'"': '"', "'": "'", "\u201c": "\u201d", "\u2018": "\u2019", "\u201e": "\u201c\u201d",
           "\u00ab": "\u00bb", "\u2039": "\u203a", "\u300c": "\u300d", "\u300e": "\u300f"}

_QUOTED = re.compile(
    r'"([^"\n]{1,200})"'
    r"|(?<!\w)'([^'\n]{1,200})'(?!\w)"
    "|\u201c([^\u201c\u201d\n]{1,200})\u201d"
    # a right single quote followed by a letter is an apostrophe (don\u2019t), not the end
    "|\u2018((?:[^\u2018\u2019\n]|\u2019(?=\\w)){1,200})\u2019"
    "|\u201e([^\u201e\u201c\u201d\n]{1,200})[\u201c\u201d]"
    "|\u00ab([^\u00ab\u00bb\n]{1,200})\u00bb"
    "|\u2039([^\u2039\u203a\n]{1,200})\u203a"
    "|\u300c([^\u300c\u300d\n]{1,200})\u300d"
    "|\u300e([^\u300e\u300f\n]{1,200})\u300f")


def _quoted(value: str) -> str | None:
    text = _prep(value)
    if not text:
        return None
    closing = _QUOTES.get(text[0])
    if closing and len(text) > 1 and text[-1] in closing:
        text = text[1:-1]
    text = " ".join(text.split()).casefold()
    return text if 1 <= len(text) <= _MAX_QUOTED else None


def _find_quoted(text: str, strict: bool) -> _Found:
    if strict:  # an argument is one quoted value, not a text to search
        value = _quoted(text)
        return ([value], []) if value else ([], [text[:_MAX_QUOTED]] if text.strip() else [])
    values: list[str] = []
    for count, m in enumerate(_QUOTED.finditer(text)):
        if count >= MAX_PER_KIND:
            break
        value = _quoted(next(g for g in m.groups() if g is not None))
        if value is not None:
            values.append(value)
    return values, []
