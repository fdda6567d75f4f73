"""The functions CEL ``if:`` conditions can call beyond the ``cel`` package's own.

The Rust ``cel`` bindings ship CEL's core (``contains``, ``startsWith``, ``endsWith``,
``matches``, ``size`` ...) but none of cel-go's strings extension, so these are Python
callbacks: the strings extension's ``lowerAscii``, ``upperAscii``, ``replace``, ``split`` and
``trim``, case-insensitive ``startsWithIgnoreCase`` / ``endsWithIgnoreCase`` /
``containsIgnoreCase``, and the validators ``luhn_valid``, ``iban_valid``, ``email_domain``
and ``registrable_domain``. A condition registers only the ones its expression names, when it
is compiled: an expression that uses none runs exactly as before. The bindings treat
``s.f(a)`` as ``f(s, a)``, so each may be written either way.

Each checks its argument types itself and, given others (``luhn_valid(1)``), returns a
sentinel the bindings cannot convert, so the expression fails as a built-in's type error does
(raising instead would make the bindings print to stderr); :func:`explain` turns that failure
back into a sentence.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any, NamedTuple, TypeVar

from callwarden.analysis.detectors.pii import _find_ibans, _luhn_ok

__all__ = ["FUNCTIONS", "MAX_GROWTH", "STRING_BUILDERS", "explain", "functions_for"]

# A ``replace`` may build a string this many characters longer than its input, no more: the
# arguments are the model's, and ``s.replace("", s)`` is quadratic.
MAX_GROWTH = 1 << 20

# Unicode's White_Space property, what cel-go's ``trim`` strips (Python's ``str.strip()`` also
# strips the information separators U+001C..U+001F).
_WHITESPACE = ("\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
               "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


class wrong_argument_types:  # its name is what an error message shows
    """Returned for arguments a function does not take."""


class result_too_long:  # its name is what an error message shows
    """Returned by ``replace`` instead of a string more than MAX_GROWTH characters longer."""


def _lower_ascii(s: str) -> str:
    return s.lower() if s.isascii() else s.translate(_LOWER)


def _upper_ascii(s: str) -> str:
    return s.upper() if s.isascii() else s.translate(_UPPER)


def _replace(s: str, old: str, new: str, n: int = -1) -> str | result_too_long:
    found = s.count(old) if old else len(s) + 1
    if 0 <= n < found:
        found = n
    if found * (len(new) - len(old)) > MAX_GROWTH:
        return result_too_long()
    return s.replace(old, new, n)  # a negative n replaces all, as in cel-go


def _split(s: str, sep: str, n: int = -1) -> list[str]:
    # cel-go's strings.SplitN: n == 0 gives no pieces, n > 0 at most n, an empty separator
    # splits between characters.
    if n == 0:
        return []
    if sep:
        return s.split(sep, n - 1 if n > 0 else -1)
    chars = list(s)
    return chars if n < 0 or n >= len(chars) else [*chars[:n - 1], s[n - 1:]]


def _trim(s: str) -> str:
    return s.strip(_WHITESPACE)


def _starts_with_ignore_case(s: str, prefix: str) -> bool:
    return _lower_ascii(s).startswith(_lower_ascii(prefix))


def _ends_with_ignore_case(s: str, suffix: str) -> bool:
    return _lower_ascii(s).endswith(_lower_ascii(suffix))


def _contains_ignore_case(s: str, part: str) -> bool:
    return _lower_ascii(part) in _lower_ascii(s)


_T = TypeVar("_T")


def _cached(run: Callable[[str], _T]) -> Callable[[str], _T]:
    """``run`` remembering its result for short strings: a validator reads the same few
    values again and again (an address, an IBAN per call); a long text is not kept."""
    remembered = lru_cache(maxsize=4096)(run)

    def call(s: str) -> _T:
        return remembered(s) if len(s) <= 320 else run(s)

    call.__name__ = run.__name__
    return call


@_cached
def _luhn_valid(s: str) -> bool:
    digits = s.strip().replace(" ", "").replace("-", "")
    return len(digits) >= 2 and digits.isascii() and digits.isdigit() and _luhn_ok(digits)


@_cached
def _iban_valid(s: str) -> bool:
    compact = s.replace(" ", "").upper()
    return (15 <= len(compact) <= 34 and compact.isascii()
            and list(_find_ibans(compact)) == [(0, len(compact))])


@_cached
def _email_domain(s: str) -> str:
    from callwarden.analysis.entities import normalize

    address = normalize("emails", s)
    return "" if address is None else address.rpartition("@")[2]


# What ends a URL's authority, and a port after a host name.
_AUTHORITY_END = re.compile(r"[/?#\\]")
_PORT = re.compile(r":\d*$")


@_cached
def _registrable_domain(s: str) -> str:
    from callwarden.analysis.entities import normalize, registrable_domain

    # E-mail addresses, web URLs and host names, read as entity matching reads them.
    found = normalize("domains", s)
    if found is None and "://" in s:  # another scheme (ssh://, s3://): its host name
        authority = _AUTHORITY_END.split(s.partition("://")[2], maxsplit=1)[0]
        found = registrable_domain(_PORT.sub("", authority.rpartition("@")[2]))
    return found or ""


class _Function(NamedTuple):
    run: Callable[..., Any]
    takes: frozenset[tuple[type, ...]]  # the argument types it accepts, in order
    usage: str
    builds_strings: bool  # whether it can return a string found neither in the call nor a literal
    warm_up: str | None = None  # an argument to call it with once when compiled


_S = (str,)
_SS = (str, str)


def _function(run: Callable[..., Any], usage: str, *takes: tuple[type, ...],
               builds_strings: bool = True, warm_up: str | None = None) -> _Function:
    return _Function(run, frozenset(takes), usage, builds_strings, warm_up)


_TABLE: Mapping[str, _Function] = {
    "lowerAscii": _function(_lower_ascii, "string.lowerAscii()", _S),
    "upperAscii": _function(_upper_ascii, "string.upperAscii()", _S),
    "replace": _function(_replace, "string.replace(string, string[, int])",
                         (str, str, str), (str, str, str, int)),
    "split": _function(_split, "string.split(string[, int])", _SS, (str, str, int)),
    "trim": _function(_trim, "string.trim()", _S),
    "startsWithIgnoreCase": _function(_starts_with_ignore_case,
                                      "string.startsWithIgnoreCase(string)", _SS,
                                      builds_strings=False),
    "endsWithIgnoreCase": _function(_ends_with_ignore_case,
                                    "string.endsWithIgnoreCase(string)", _SS,
                                    builds_strings=False),
    "containsIgnoreCase": _function(_contains_ignore_case,
                                    "string.containsIgnoreCase(string)", _SS,
                                    builds_strings=False),
    "luhn_valid": _function(_luhn_valid, "luhn_valid(string)", _S, builds_strings=False),
    "iban_valid": _function(_iban_valid, "iban_valid(string)", _S, builds_strings=False),
    # The public suffix list is parsed on first use (~50 ms): when compiled, not in a call.
    "email_domain": _function(_email_domain, "email_domain(string)", _S,
                              warm_up="a@mail.example.com"),
    "registrable_domain": _function(_registrable_domain, "registrable_domain(string)", _S,
                                    warm_up="mail.example.com"),
}


def _checked(entry: _Function) -> Callable[..., Any]:
    run, takes = entry.run, entry.takes

    def call(*args: Any) -> Any:
        # type(), not isinstance(): CEL's bool is no int here, as it is none in CEL.
        return run(*args) if tuple(map(type, args)) in takes else wrong_argument_types()
    return call


FUNCTIONS: Mapping[str, Callable[..., Any]] = {name: _checked(f) for name, f in _TABLE.items()}
"""Every function of ours by its CEL name, ready to register in a ``cel.Context``."""

STRING_BUILDERS = frozenset(name for name, f in _TABLE.items() if f.builds_strings)
"""The functions that can return a string that is neither in the call nor a literal."""


def functions_for(names: Iterable[str]) -> dict[str, Callable[..., Any]]:
    """The functions of ours among ``names`` (what a compiled expression calls), each called
    once first if it loads data on first use, so no call pays for it.

    Raises:
        Exception: whatever a function raises when it cannot run (its data cannot load).
    """
    used = {name: FUNCTIONS[name] for name in names if name in FUNCTIONS}
    for name in used:
        warm_up = _TABLE[name].warm_up
        if warm_up is not None:
            _TABLE[name].run(warm_up)
    return used


_FAILED_FUNCTION = re.compile(r"Function '([^']+)' error")


def explain(error: str) -> str | None:
    """What went wrong, when the bindings' error ``error`` came from one of our functions'
    sentinels; else None."""
    found = _FAILED_FUNCTION.search(error)
    name = found.group(1) if found else ""
    entry = _TABLE.get(name)
    if entry is None:
        return None
    if wrong_argument_types.__name__ in error:
        return f"{name}() called with arguments of the wrong type: {entry.usage}"
    if result_too_long.__name__ in error:
        return (f"{name}() would build a string more than {MAX_GROWTH:,} characters longer "
                "than its input")
    return None
