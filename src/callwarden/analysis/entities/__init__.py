"""The entities a request names: who, where, how much and when, normalized so they compare.

A policy can say "every recipient is a contact or someone the user named in this request".
:func:`extract` reads the user's request text once (cached) into :class:`Entities`, sets of
normalized strings per kind; :func:`values_of` reads an argument's text the same way, and
:func:`normalize` reads one value (a list entry, a contact). Two values name the same entity
exactly when their normalized strings are equal.

Kinds and the form each is normalized to:

- ``emails``: ``local@domain``. NFKC; ``mailto:`` and surrounding ``<...>`` removed; the domain
  IDNA-encoded and lower-cased; the local part lower-cased, which treats local parts as
  case-insensitive, as every major provider does (``str.lower``, not full case folding, which
  would merge ``ß`` with ``ss``). Plus-tags are kept: ``a+x@b.com`` is another mailbox.
- ``domains``: the registrable domain (eTLD+1, by the public suffix list including its private
  section, so ``alice.github.io`` is a domain of its own) of every e-mail and URL host and of
  bare names (``Mail.Acme.COM.`` is ``acme.com``). IP addresses are not domains. In a request
  a bare name counts where callwarden's link finder reads a link (``evil-login.com``, not
  ``acme.io`` or ``README.md``); in an argument every name ending in a real top-level domain.
- ``urls``: ``scheme://[userinfo@]host[:port]/path?query``: scheme and host lower-case, IDNA
  host, default port and fragment dropped, empty path ``/``; a URL written without a scheme
  (``www.acme.com``) gets ``https``. Only ``http``, ``https``, ``ws``, ``wss`` and ``ftp``.
- ``ibans``: upper-case, spaces removed, the country's length, mod-97 valid.
- ``cards``: the digits of a Luhn-valid number with a known issuer prefix.
- ``phones``: ``+`` and 7-15 digits for an international number (a leading ``00`` counts as
  ``+``), the digits alone for a national one: ``(415) 555-0134`` is ``4155550134`` and is not
  ``+14155550134`` (the country is unknown).
- ``amounts``: unsigned unless a minus is written. With a currency (ISO code before or after,
  or a symbol: € $ £ ¥ ...; ``$`` is USD, ``¥`` JPY) it yields ``"<number> <CODE>"``, the number
  without grouping, integers without decimals and fractions with at least two
  (``€120.5`` → ``120.50 EUR``, ``USD 1,200`` → ``1200 USD``), and also the plain number.
  A plain number has no trailing zeros (``120.50`` → ``120.5``); in text only numbers with
  decimals count as plain amounts, a whole argument may be an integer. ``1,200`` is 1200 and
  ``120,50`` is 120.5; ``1.200`` (English 1.2, German 1200) is ambiguous and rejected.
- ``dates``: ``yyyy-mm-dd`` from ISO dates (a time may follow), ``yyyy/mm/dd``,
  ``12 March 2026`` and ``March 12, 2026`` (English month names, abbreviations too); all-digit
  day-month orders like ``12/03/2026`` are ambiguous and skipped.
- ``quoted``: text inside straight quotes (double, or single ones that are not apostrophes),
  curly quotes, German low-high quotes, guillemets and CJK corner brackets: stripped,
  whitespace collapsed, case-folded, 1..200 characters. An argument is one quoted value whole.

Security: normalization must never make a stranger look known, nor a known party unknown.

- NFKC folds compatibility forms (an address in fullwidth letters is the ASCII address) and
  folds no script into another: a Cyrillic ``\u043e`` stays different from a Latin ``o``.
- A value with an invisible character inside (zero-width, bidi control, soft hyphen, variation
  selector, control character) is rejected, as is a host with an IDNA deviation character
  (``ß``, ``ς``: ``faß.de`` and ``fass.de`` are different domains to a browser).
  :func:`normalize` returns None; :func:`values_of` returns a *rejected marker*
  (:data:`REJECTED_PREFIX` + the raw value) in its place, which equals no normalized value:
  "every value is known" fails, and the marker shows what was refused.
- Values are whole tokens: ``n.doe@x.com`` is not ``john.doe@x.com``, and a name glued to a
  letter, digit or invisible character (``evil\\u200bacme.com``) is not ``acme.com``.
- :func:`extract` errs toward fewer values (what it misses is merely unknown);
  :func:`values_of` toward more: a candidate it cannot read, a whole argument shaped like a
  value that is invalid (a bad checksum, an ambiguous amount or date), text past the size
  cap and values past the count cap all give rejected markers.

Cost is bounded: the first :data:`MAX_TEXT_CHARS` characters are read (cut after a word that
ends in a letter, so no number, date or address is truncated into another), at most
:data:`MAX_PER_KIND` values per kind, with regexes that run in linear time.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import lru_cache

from callwarden.analysis.detectors.pii import _find_cards, _find_ibans, _find_phones
from callwarden.analysis.entities._names import (
    _domain,
    _email,
    _find_domains,
    _find_emails,
    _find_links,
    _find_urls,
    _link_domains,
    _url_value,
    registrable_domain,
)
from callwarden.analysis.entities._numbers import (
    _AMOUNT_SHAPE,
    _CARD_SHAPE,
    _IBAN_SHAPE,
    _PHONE_VALUE,
    _amount,
    _card,
    _find_amounts,
    _iban,
    _phone,
)
from callwarden.analysis.entities._people import Phrases, find_names, name
from callwarden.analysis.entities._text import (
    _INVISIBLE_RE,
    MAX_PER_KIND,
    MAX_TEXT_CHARS,
    _Finder,
    _read,
    _span_finder,
)
from callwarden.analysis.entities._words import _DATE_SHAPE, _date, _find_dates, _find_quoted, _quoted

__all__ = ["KINDS", "MAX_PER_KIND", "MAX_TEXT_CHARS", "REJECTED_PREFIX", "Entities", "extract",
           "is_rejected", "normalize", "registrable_domain", "values_of"]

KINDS = ("emails", "domains", "urls", "ibans", "cards", "phones", "amounts", "dates", "quoted",
         "names")
"""The kinds of entity, as :meth:`Entities.of`, :func:`normalize` and :func:`values_of` name them."""

REJECTED_PREFIX = "\x00rejected:"
"""Starts every rejected marker :func:`values_of` returns. No normalized value contains a
control character, so a marker never equals one."""

_EXTRACT_CACHE = 256

_VALUES_CACHE = 1024

_CACHEABLE_CHARS = 16_384  # longer argument texts are read each time rather than kept

_MAX_VALUE_CHARS = 16_384  # a single value longer than this is not one

_KIND_SET = frozenset(KINDS)


_NO_WORDS = Phrases()


@dataclass(frozen=True, slots=True)
class Entities:
    """The normalized entities of one text, a set per kind (see the module docstring)."""

    emails: frozenset[str] = frozenset()
    domains: frozenset[str] = frozenset()
    urls: frozenset[str] = frozenset()
    ibans: frozenset[str] = frozenset()
    cards: frozenset[str] = frozenset()
    phones: frozenset[str] = frozenset()
    amounts: frozenset[str] = frozenset()
    dates: frozenset[str] = frozenset()
    quoted: frozenset[str] = frozenset()
    #: Every run of words of the text, as names are written (``"ann lee" in names``).
    names: Phrases = _NO_WORDS

    def of(self, kind: str) -> Container[str]:
        """The values of one kind: a set, and for ``names`` the words of the text (a value is
        in it when the text has those words in a row).

        Raises:
            ValueError: when ``kind`` is not one of :data:`KINDS`.
        """
        _check_kind(kind)
        values: Container[str] = getattr(self, kind)
        return values

    def as_dict(self) -> dict[str, list[str]]:
        """Every kind but ``names`` (runs of words, not a list) as a sorted list, for CEL
        and JSON."""
        return {kind: sorted(getattr(self, kind)) for kind in KINDS if kind != "names"}


_EMPTY = Entities()


def _check_kind(kind: str) -> None:
    if kind not in _KIND_SET:
        raise ValueError(f"unknown entity kind {kind!r}; expected one of {', '.join(KINDS)}")


def _as_text(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        try:
            return format(Decimal(repr(value)), "f")
        except InvalidOperation:  # nan, inf
            return None
    return None


def extract(text: str | None) -> Entities:
    """The entities named in a text, such as the user's request (cached: a text is read once)."""
    if not text or not isinstance(text, str):
        return _EMPTY
    return _extract(text)


def normalize(kind: str, value: str | int | float) -> str | None:
    """One value of a kind in normal form; None when it is not a valid one.

    Numbers are accepted for ``amounts``, ``phones`` and ``cards`` (``120.5``, ``1200``).

    Raises:
        ValueError: when ``kind`` is not one of :data:`KINDS`.
    """
    _check_kind(kind)
    text = _as_text(value)
    if text is None or len(text) > _MAX_VALUE_CHARS:
        return None
    return _NORMALIZERS[kind](text)


def values_of(kind: str, text: str | int | float) -> frozenset[str]:
    """Every value of a kind in an argument's text: the whole text when it is one value
    (``"a@b.com"``), else each found in it (``"Ann <a@b.com>, c@d.com"``), plus a rejected
    marker (see :func:`is_rejected`) for each candidate that could not be read.

    An empty set means no value of the kind was seen: a policy requiring every value to be
    known should not read that as "all known" for an argument that must hold one.

    Raises:
        ValueError: when ``kind`` is not one of :data:`KINDS`.
    """
    if type(text) is str and len(text) <= _CACHEABLE_CHARS and kind in _KIND_SET:
        return _cached_values_of(kind, text)  # the usual case, kept short
    _check_kind(kind)
    as_text = _as_text(text)
    if as_text is None:
        return frozenset()
    if len(as_text) <= _CACHEABLE_CHARS:
        return _cached_values_of(kind, as_text)
    return _values_of(kind, as_text)


def is_rejected(value: str) -> bool:
    """Whether a value from :func:`values_of` is a rejected marker rather than a value."""
    return value.startswith(REJECTED_PREFIX)


_NORMALIZERS: dict[str, Callable[[str], str | None]] = {
    "emails": _email, "domains": _domain, "urls": _url_value,
    "ibans": _iban, "cards": _card, "phones": _phone, "amounts": _amount, "dates": _date,
    "quoted": _quoted, "names": name,
}

_FINDERS: dict[str, _Finder] = {
    "emails": _find_emails, "domains": _find_domains, "urls": _find_urls,
    "ibans": _span_finder(_find_ibans, _iban), "cards": _span_finder(_find_cards, _card),
    "phones": _span_finder(_find_phones, _phone), "amounts": _find_amounts,
    "dates": _find_dates, "quoted": _find_quoted, "names": find_names,
}

# A whole argument of this shape that is not a valid value is rejected, not ignored.
_SHAPES: dict[str, re.Pattern[str]] = {
    "ibans": _IBAN_SHAPE, "cards": _CARD_SHAPE, "phones": _PHONE_VALUE,
    "amounts": _AMOUNT_SHAPE, "dates": _DATE_SHAPE,
}


def _first(values: Iterable[str]) -> frozenset[str]:
    return frozenset(list(dict.fromkeys(values))[:MAX_PER_KIND])


@lru_cache(maxsize=_EXTRACT_CACHE)
def _extract(text: str) -> Entities:
    norm, _ = _read(text)
    emails, _ = _find_emails(norm, False)
    urls, _ = _find_links(norm, False)
    found = {kind: _FINDERS[kind](norm, False)[0]
             for kind in ("ibans", "cards", "phones", "amounts", "dates", "quoted")}
    return Entities(emails=_first(emails), domains=_first(_link_domains(emails, urls.values())),
                    urls=_first(urls), names=Phrases(norm),
                    **{kind: _first(v) for kind, v in found.items()})


@lru_cache(maxsize=_VALUES_CACHE)
def _cached_values_of(kind: str, text: str) -> frozenset[str]:
    return _values_of(kind, text)


def _values_of(kind: str, text: str) -> frozenset[str]:
    whole = _NORMALIZERS[kind](text) if len(text) <= _MAX_VALUE_CHARS else None
    if whole is not None:
        return frozenset((whole,))
    norm, cut = _read(text)
    finder = _FINDERS[kind]
    values, rejected = finder(norm, True)
    if _INVISIBLE_RE.search(norm):
        # What the text says once invisible characters are dropped, and the tool or the mail
        # server may read: every such value not also written plainly is a disguise.
        seen = set(values)
        hidden, _ = finder(_INVISIBLE_RE.sub("", norm), True)
        rejected += [value for value in hidden if value not in seen]
    shape = _SHAPES.get(kind)
    stripped = norm.strip()
    if shape is not None and shape.fullmatch(_INVISIBLE_RE.sub("", stripped)) and (
            not values or _INVISIBLE_RE.search(stripped)):
        rejected.append(stripped)  # shaped like one value, yet not a valid one
    unique = list(dict.fromkeys(values))
    if cut or len(unique) > MAX_PER_KIND:
        rejected.append("text too long to read whole")
    markers = list(dict.fromkeys(REJECTED_PREFIX + r for r in rejected))
    return frozenset(unique[:MAX_PER_KIND] + markers[:MAX_PER_KIND])
