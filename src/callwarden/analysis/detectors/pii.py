"""Personal-data finders: payment card numbers, IBANs, e-mail addresses, phone numbers.

Each checks what it can (Luhn and issuer prefix, IBAN length and mod-97, boundaries) to keep
account numbers, versions, dates and file names out.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from callwarden.analysis.detectors.core import _ALNUM, MAX_CANDIDATES, _TooManyCandidates
from callwarden.analysis.detectors.findings import Span

_CARD = re.compile(r"\d(?:[ \-]?\d){12,18}")


def _find_cards(text: str) -> Iterator[Span]:
    # Boundaries are checked here rather than with lookbehinds so that the regex keeps its
    # fast digit-prefix scan.
    for count, m in enumerate(_CARD.finditer(text)):
        if count >= MAX_CANDIDATES:
            raise _TooManyCandidates
        start, end = m.span()
        if start and text[start - 1] in _CARD_BEFORE:
            continue
        if end < len(text) and (text[end] in _CARD_AFTER or (text[end] in ".-"
                                and text[end + 1:end + 2].isdigit())):
            continue
        if _card_ok(m.group()):
            yield start, end


_CARD_BEFORE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.+-/")
_CARD_AFTER = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def _luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


_CARD_IIN = re.compile(r"^(?:4|5[1-5]|2[2-7]|3[47]|3[068]|6(?:011|5|4[4-9]|2)|35)")


def _card_ok(raw: str) -> bool:
    digits = raw.replace(" ", "").replace("-", "")
    if not 13 <= len(digits) <= 19 or not _CARD_IIN.match(digits) or len(set(digits)) < 2:
        return False
    groups = [len(g) for g in re.split(r"[ \-]", raw)]
    if len(groups) > 1 and len(set(re.findall(r"[ \-]", raw))) > 1:
        return False  # mixed separators
    if len(groups) > 1 and not ((all(g == 4 for g in groups[:-1]) and 1 <= groups[-1] <= 4)
                                or groups in ([4, 6, 5], [4, 6, 4])):
        return False
    return _luhn_ok(digits)


_IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28,
    "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23,
    "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26,
    "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20,
    "LV": 21, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18,
    "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24,
    "SC": 31, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28, "TL": 23, "TN": 24,
    "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}
_IBAN = re.compile(r"[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}+")


def _find_ibans(text: str) -> Iterator[Span]:
    for count, m in enumerate(_IBAN.finditer(text)):
        if count >= MAX_CANDIDATES:
            raise _TooManyCandidates
        if m.start() and text[m.start() - 1] in _ALNUM:
            continue
        raw = m.group()
        want = _IBAN_LENGTHS.get(raw[:2])
        if want is None:
            continue
        count, end = 0, m.start()
        for i, ch in enumerate(raw):  # take exactly the country's length, spaces allowed
            if ch != " ":
                count += 1
                if count == want:
                    end = m.start() + i + 1
                    break
        if count != want or (end < len(text) and text[end].isalnum()):
            continue
        compact = text[m.start():end].replace(" ", "")
        rotated = compact[4:] + compact[:4]
        number = "".join(str(int(c, 36)) for c in rotated)
        if int(number) % 97 == 1:
            yield m.start(), end


_EMAIL_DOMAIN = re.compile(
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}(?![A-Za-z0-9\-]|\.[A-Za-z0-9])"
)
_EMAIL_LOCAL = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._%+-")
_NOT_EMAIL_TLDS = frozenset({"png", "jpg", "jpeg", "gif", "svg", "webp", "ico", "js", "mjs",
                             "css", "map", "json", "txt", "md", "py", "html", "lock", "test",
                             "invalid", "localhost", "local", "example"})


def _find_emails(text: str) -> Iterator[Span]:
    # Anchored on "@": the local part is walked backwards, the domain matched forwards.
    at = text.find("@")
    count = 0
    while at >= 0:
        count += 1
        if count > MAX_CANDIDATES:
            raise _TooManyCandidates
        start, floor = at, max(0, at - 64)
        while start > floor and text[start - 1] in _EMAIL_LOCAL:
            start -= 1
        while start < at and not text[start].isalnum():
            start += 1
        m = _EMAIL_DOMAIN.match(text, at + 1)
        if start < at and m is not None and _email_ok(text, start, m):
            yield start, m.end()
        at = text.find("@", at + 1)


def _email_ok(text: str, start: int, m: re.Match[str]) -> bool:
    if start and text[start - 1] in _EMAIL_LOCAL:
        return False  # local part longer than 64 characters
    labels = m.group().lower().split(".")
    if labels[-1] in _NOT_EMAIL_TLDS or "example" in labels[:-1]:
        return False
    # ``git@github.com:org/repo`` is an scp-style remote, not a person's address.
    return not (text.startswith("git@", start) and m.end() < len(text) and text[m.end()] == ":")


_PHONE_PATTERNS = (
    re.compile(r"\+[1-9](?:[ .\-]?\(?\d{1,4}\)?){2,6}"),  # E.164 and written international
    re.compile(r"\([2-9]\d{2}\) ?[2-9]\d{2}[.\- ]\d{4}"),  # (415) 555-0134
    re.compile(r"[2-9]\d{2}(?P<s>[.\- ])[2-9]\d{2}(?P=s)\d{4}"),  # 415-555-0134
    re.compile(r"0[1-9](?:[ .]\d{2}){4}|0\d{2,4}[ \-]\d{3,4}[ \-]?\d{3,4}"),  # 06 12 34 56 78
)
_PHONE_WORDS = ("phone", "tel", "mobile", "cell", "fax", "whatsapp", "sms", "handy")
_PHONE_AFTER_WORD = re.compile(
    r"[A-Za-z ]{0,12}[\"']?\s{0,3}[:=#\-]?\s{0,3}[\"']?(?P<n>\+?\(?\d[\d ()\-./]{5,20}\d)"
)
_DATE_LIKE = re.compile(r"^\d{1,4}[./\-]\d{1,2}[./\-]\d{1,4}$|^\d{1,3}(?:\.\d{1,3}){3}$")
_PHONE_BEFORE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.+-/")


def _phone_ok(text: str, start: int, end: int, low: int = 8) -> bool:
    raw = text[start:end]
    digits = sum(c.isdigit() for c in raw)
    if not low <= digits <= 15 or _DATE_LIKE.match(raw) or raw.count("(") != raw.count(")"):
        return False
    if start and text[start - 1] in _PHONE_BEFORE:
        return False
    if start > 1 and text[start - 1] in " -" and text[start - 2].isdigit():
        return False  # the tail of a longer group of numbers (an IBAN, an account number)
    if text[end:end + 1] in (" ", "-") and text[end + 1:end + 2].isdigit():
        return False
    # Not followed by more of a number, a version or a date (``555-123-4567.2``, ``...-12``).
    return not (end < len(text) and (text[end].isalnum() or (text[end] in ".-/:"
                                     and text[end + 1:end + 2].isdigit())))


def _find_phones(text: str) -> Iterator[Span]:
    for rx in _PHONE_PATTERNS:
        for count, m in enumerate(rx.finditer(text)):
            if count >= MAX_CANDIDATES:
                raise _TooManyCandidates
            if _phone_ok(text, *m.span()):
                yield m.span()
    low = text.lower()
    for word in _PHONE_WORDS:
        pos = low.find(word)
        while pos >= 0:
            after = _PHONE_AFTER_WORD.match(text, pos + len(word))
            if after is not None and _phone_ok(text, *after.span("n"), low=7):
                yield after.span("n")
            pos = low.find(word, pos + len(word))
