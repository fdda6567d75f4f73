"""Bank and card numbers, phone numbers and amounts of money."""

from __future__ import annotations

import re
from decimal import Decimal

from callwarden.analysis.detectors.core import MAX_CANDIDATES
from callwarden.analysis.detectors.pii import _card_ok, _find_ibans
from callwarden.analysis.entities._text import _Found, _glued_span, _prep

_IBAN_SHAPE = re.compile(r"[A-Za-z]{2}[0-9]{2}[A-Za-z0-9 \-]{8,40}")

_CARD_SHAPE = re.compile(r"[0-9][0-9 \-]{10,30}[0-9]")

_PHONE_VALUE = re.compile(r"\+?[0-9 .\-()/]{6,30}")


def _iban(value: str) -> str | None:
    text = _prep(value)
    if text is None:
        return None
    compact = text.upper().replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return None
    return compact if list(_find_ibans(compact)) == [(0, len(compact))] else None


def _card(value: str) -> str | None:
    text = _prep(value)
    if text is None or not _CARD_SHAPE.fullmatch(text):
        return None
    digits = text.replace(" ", "").replace("-", "")
    return digits if _card_ok(digits) else None


def _phone(value: str) -> str | None:
    text = _prep(value)
    if text is None:
        return None
    if text[:4].lower() == "tel:":
        text = text[4:].strip()
    if not _PHONE_VALUE.fullmatch(text) or text.count("(") != text.count(")"):
        return None
    digits = "".join(ch for ch in text if ch.isdigit())
    plus = text.startswith("+")
    if not plus and digits.startswith("00"):
        plus, digits = True, digits[2:]
    if not 7 <= len(digits) <= 15 or (plus and digits[0] == "0"):
        return None
    return ("+" if plus else "") + digits


_SYMBOLS = {"€": "EUR", "$": "USD", "£": "GBP", "¥": "JPY", "₹": "INR", "₩": "KRW", "₽": "RUB",
            "₺": "TRY", "₪": "ILS", "₫": "VND", "₴": "UAH", "₦": "NGN", "฿": "THB", "₱": "PHP"}

# Written before the number only; longest first.
_PREFIX_SYMBOLS = (("US$", "USD"), ("CA$", "CAD"), ("AU$", "AUD"), ("NZ$", "NZD"),
                   ("HK$", "HKD"), ("SG$", "SGD"), ("C$", "CAD"), ("A$", "AUD"), ("S$", "SGD"),
                   ("R$", "BRL"))

_CODES = frozenset((
    "USD", "EUR", "GBP", "JPY", "CHF", "CAD", "AUD", "NZD", "CNY", "HKD", "SGD", "SEK", "NOK",
    "DKK", "ISK", "PLN", "CZK", "HUF", "RON", "BGN", "TRY", "RUB", "UAH", "INR", "PKR", "BDT",
    "LKR", "NPR", "IDR", "MYR", "THB", "VND", "PHP", "KRW", "TWD", "ILS", "AED", "SAR", "QAR",
    "KWD", "BHD", "OMR", "JOD", "EGP", "MAD", "TND", "NGN", "KES", "GHS", "ZAR", "BRL", "MXN",
    "ARS", "CLP", "COP", "PEN", "UYU", "XAF", "XOF",
))

_NUMBER = re.compile(r"(?<![\w.,\-\u2212])[-\u2212]?[0-9][0-9.,]{0,40}")

_GROUPS = {",": re.compile(r"[1-9][0-9]{0,2}(?:,[0-9]{3})+"),
           ".": re.compile(r"[1-9][0-9]{0,2}(?:\.[0-9]{3})+")}

_AMOUNT_VALUE = re.compile(
    r"(?P<s1>[-\u2212])?(?P<pre>[A-Za-z]{1,3}\$|[A-Za-z]{3}|[^\w\s.,\-\u2212])?\s?"
    r"(?P<s2>[-\u2212])?(?P<num>[0-9][0-9.,]*)\s?(?P<post>[A-Za-z]{3}|[^\w\s.,\-\u2212])?")

_AMOUNT_SHAPE = re.compile(r"\S{0,4}\s?[-\u2212]?[0-9][0-9.,' ]*\s?\S{0,4}")

_MAX_INT_DIGITS = 15

_MAX_FRACTION_DIGITS = 8


def _parse_number(body: str) -> tuple[Decimal, bool] | None:
    """A number written with optional grouping, and whether it has a fraction; None when it is
    malformed or ambiguous (``1.200``)."""
    if not body[-1].isdigit():
        return None
    commas, dots = body.count(","), body.count(".")
    fraction = ""
    if commas and dots:
        point = "," if body.rfind(",") > body.rfind(".") else "."
        group = "." if point == "," else ","
        whole, _, fraction = body.rpartition(point)
        if point in whole or not _GROUPS[group].fullmatch(whole):
            return None
        whole = whole.replace(group, "")
    elif commas or dots:
        sep = "," if commas else "."
        parts = body.split(sep)
        if len(parts) == 2 and (len(parts[1]) != 3 or parts[0].startswith("0")):
            whole, fraction = parts  # 120,50 / 0.125
        elif _GROUPS[sep].fullmatch(body) and (sep == "," or len(parts) > 2):
            whole = body.replace(sep, "")  # 1,200 / 1.200.000; a lone "1.200" is ambiguous
        else:
            return None
    else:
        whole = body
    if not whole or len(whole.lstrip("0")) > _MAX_INT_DIGITS or len(fraction) > _MAX_FRACTION_DIGITS:
        return None
    return Decimal(f"{whole}.{fraction or '0'}"), bool(fraction)


def _plain(number: Decimal) -> str:
    if number == number.to_integral_value():
        return str(int(number))
    return format(number.normalize(), "f")


def _money(number: Decimal) -> str:
    if number == number.to_integral_value():
        return str(int(number))
    places = -int(number.normalize().as_tuple().exponent)
    return f"{number:.{max(2, places)}f}"


def _signed(number: Decimal, negative: bool) -> Decimal:
    return -number if negative and number != 0 else number


def _currency(mark: str | None, any_case: bool) -> str | None:
    """The ISO code for a symbol or code as written; "" for none; None for an unknown one."""
    if not mark:
        return ""
    if mark in _SYMBOLS:
        return _SYMBOLS[mark]
    for symbol, code in _PREFIX_SYMBOLS:
        if mark == symbol or (any_case and mark.upper() == symbol):
            return code
    code = mark.upper() if any_case else mark
    return code if code in _CODES else None


def _amount(value: str) -> str | None:
    text = _prep(value)
    m = _AMOUNT_VALUE.fullmatch(text) if text else None
    if m is None:
        return None
    if m["s1"] and m["s2"]:
        return None
    pre, post = _currency(m["pre"], True), _currency(m["post"], True)
    if pre is None or post is None or (pre and post and pre != post):
        return None
    parsed = _parse_number(m["num"])
    if parsed is None:
        return None
    number = _signed(parsed[0], bool(m["s1"] or m["s2"]))
    code = pre or post
    return f"{_money(number)} {code}" if code else _plain(number)


def _currency_before(text: str, start: int) -> tuple[str, int] | None:
    """The currency written just before a number (one space allowed), and where it starts."""
    i = start - 1 if start > 0 and text[start - 1] == " " else start
    if i == 0 or not (text[i - 1] in _SYMBOLS or "A" <= text[i - 1] <= "Z"):
        return None
    if i > 0 and text[i - 1] in _SYMBOLS:
        for symbol, code in _PREFIX_SYMBOLS:
            j = i - len(symbol)
            if text.startswith(symbol, j) and j >= 0 and (j == 0 or not text[j - 1].isalnum()):
                return code, j
        return _SYMBOLS[text[i - 1]], i - 1
    j = i - 3
    if j >= 0 and text[j:i] in _CODES and (j == 0 or not text[j - 1].isalpha()):
        return text[j:i], j
    return None


def _currency_after(text: str, end: int) -> str | None:
    i = end + 1 if text[end:end + 1] == " " else end
    if i >= len(text) or not (text[i] in _SYMBOLS or "A" <= text[i] <= "Z"):
        return None
    if text[i:i + 1] in _SYMBOLS:
        return _SYMBOLS[text[i]]
    code = text[i:i + 3]
    if code in _CODES and not text[i + 3:i + 4].isalpha():
        return code
    return None


def _find_amounts(text: str, strict: bool) -> _Found:
    values: list[str] = []
    rejected: list[str] = []
    for count, m in enumerate(_NUMBER.finditer(text)):
        if count >= MAX_CANDIDATES:
            if strict:
                rejected.append("too many candidates")
            break
        start, token = m.start(), m.group().rstrip(".,")
        end = start + len(token)
        if end < len(text) and text[end].isdigit():
            continue  # a digit run longer than any amount
        negative = token[0] in "-\u2212"
        body = token[1:] if negative else token
        before = _currency_before(text, start)
        code = before[0] if before else _currency_after(text, end)
        if code is None and (("." not in body and "," not in body) or (
                end < len(text) and (text[end].isalnum() or text[end] == "%"))):
            continue  # a count, a year; 5k, 3rd, 12%
        if before is not None and before[1] > 0 and text[before[1] - 1] in "-\u2212":
            negative = True
        edge = before[1] if before else start
        parsed = _parse_number(body) if body else None
        if parsed is None or _glued_span(text, edge, end):
            if strict and code is not None:
                rejected.append(f"{text[edge:end]} {code}")
            continue
        number = _signed(parsed[0], negative)
        if code is not None:
            values.append(f"{_money(number)} {code}")
        if code is not None or parsed[1]:
            values.append(_plain(number))
    return values, rejected
