"""E-mail addresses, URLs and domains."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from urllib.parse import unquote

from callwarden.analysis.detectors.core import MAX_CANDIDATES
from callwarden.analysis.detectors.pii import _EMAIL_LOCAL
from callwarden.analysis.entities._text import (
    _DEVIATIONS,
    _INVISIBLE_RE,
    _MAX_QUOTED,
    MAX_PER_KIND,
    _Found,
    _glued_name,
    _hostname,
    _prep,
    _psl,
    _registrable,
)
from callwarden.analysis.urls import InvalidUrl, analyze_url, find_urls

# Characters that cannot be in an unquoted address (RFC 5322 specials other than "." and
# "@"): an address found in text ends at one of these or at whitespace, never inside a word,
# so "evil{john@x.com" is one (invalid) candidate, not john@x.com.
_EMAIL_STOPS = frozenset("()<>[]:;,\"\\")

_EMAIL_REACH = 320  # characters looked at on each side of an "@"

_LOCAL_CHARS = _EMAIL_LOCAL | frozenset("'")

# In prose an address may sit in quotes or markdown emphasis, or end a sentence.
_PROSE_HEAD = "'`*_"

_PROSE_TAIL = ".!?'`*_"


def _email(value: str) -> str | None:
    text = _prep(value)
    if text is None:
        return None
    for _ in range(2):  # "<mailto:a@b.com>" as in List-Unsubscribe headers
        if text.startswith("<") and text.endswith(">"):
            text = text[1:-1].strip()
        if text[:7].lower() == "mailto:":
            text = text[7:].partition("?")[0].strip()
    local, at, domain = text.rpartition("@")
    if not at or not local or len(local) > 64 or len(text) > 254:
        return None
    if local[0] == "." or local[-1] == "." or ".." in local:
        return None
    for ch in local:
        if ch not in _LOCAL_CHARS and (ch.isascii() or unicodedata.category(ch)[0] not in "LMN"):
            return None
    host = _hostname(domain)
    return None if host is None else f"{local.lower()}@{host}"


def _email_char(ch: str) -> bool:
    return ch not in _EMAIL_STOPS and not ch.isspace()


def _find_emails(text: str, strict: bool) -> _Found:
    values: list[str] = []
    rejected: list[str] = []
    n = len(text)
    end = 0
    at = text.find("@")
    for _ in range(MAX_CANDIDATES):
        if at == -1:
            break
        floor = max(end, at - _EMAIL_REACH)
        start = at
        while start > floor and _email_char(text[start - 1]):
            start -= 1
        ceil = min(n, at + 1 + _EMAIL_REACH)
        end = at + 1
        while end < ceil and _email_char(text[end]):
            end += 1
        # A run longer than the reach is not cut into a shorter (different) address, and a
        # quote or backslash glued to a word before it (x"john@...) is no address boundary.
        overlong = ((start == floor and start > 0 and _email_char(text[start - 1]))
                    or (end == ceil and end < n and _email_char(text[end])))
        glued = start > 1 and text[start - 1] in '"\\' and _email_char(text[start - 2])
        if glued:
            while start > floor and (_email_char(text[start - 1]) or text[start - 1] in '"\\'):
                start -= 1
        token = text[start:end]
        # Sentence punctuation after the domain cannot belong to it; before the local part
        # (or around the address) it might, so only prose, never an argument, loses it.
        token = token.lstrip(_PROSE_HEAD).rstrip(_PROSE_TAIL) if not strict else token.rstrip(".!?")
        local, _, domain = token.partition("@")
        if local and domain and (strict or "." in domain):
            value = None if overlong or glued else _email(token)
            if value is not None:
                values.append(value)
            elif strict:
                rejected.append(token[:_MAX_QUOTED])
        at = text.find("@", end)
    else:
        if strict:
            rejected.append("too many candidates")
    return values, rejected


_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443, "ftp": 21}

_AUTHORITY_END = re.compile(r"[/?#\\]")


def _url(value: str) -> tuple[str, str | None] | None:
    """The canonical URL and its host name (None for an IP host), or None."""
    text = _prep(value)
    if text is None or _INVISIBLE_RE.search(unquote(text)):
        return None
    try:
        info = analyze_url(text)
    except InvalidUrl:
        return None
    if not info.host or (info.scheme and info.scheme not in _DEFAULT_PORTS):
        return None
    if not info.scheme and info.ip is None and "." not in info.host:
        return None  # a lone word is not a URL
    after = text.partition("://")[2] if "://" in text else text.lstrip("/")
    authority = _AUTHORITY_END.split(after, maxsplit=1)[0]
    if any(ch in _DEVIATIONS for ch in unquote(authority).lower()):
        return None
    scheme = info.scheme or "https"
    host = f"[{info.host}]" if ":" in info.host else info.host
    port = "" if info.port in (None, _DEFAULT_PORTS[scheme]) else f":{info.port}"
    user = "" if info.userinfo is None else info.userinfo + "@"
    rest = info.rest.partition("#")[0]
    if not rest.startswith("/"):
        rest = "/" + rest
    return f"{scheme}://{user}{host}{port}{rest}", (None if info.ip is not None else info.host)


def _url_value(value: str) -> str | None:
    got = _url(value)
    return None if got is None else got[0]


def _placements(text: str, found: str) -> tuple[bool, bool]:
    """Whether ``found`` stands alone somewhere in the text, and whether it is glued to its
    neighbours somewhere (or could not be placed)."""
    clean = glued = False
    i = text.find(found)
    if i == -1:
        return False, True
    for _ in range(64):
        if _glued_name(text, i, i + len(found)):
            glued = True
        else:
            clean = True
        i = text.find(found, i + 1)
        if i == -1:
            return clean, glued
    return clean, True  # too many to check them all


def _find_links(text: str, strict: bool) -> tuple[dict[str, str | None], list[str]]:
    """Canonical URL → host name of each link in the text, and the rejected ones."""
    urls: dict[str, str | None] = {}
    rejected: list[str] = []
    found = list(dict.fromkeys(find_urls(text)))
    for raw in found[:MAX_PER_KIND]:
        clean, glued = _placements(text, raw)
        got = _url(raw)
        if strict and (got is None or glued):
            rejected.append(raw)
        if got is not None and clean:
            urls.setdefault(got[0], got[1])
    if strict and len(found) > MAX_PER_KIND:
        rejected.append("too many candidates")
    return urls, rejected


def _find_urls(text: str, strict: bool) -> _Found:
    urls, rejected = _find_links(text, strict)
    return list(urls), rejected


def _domain(value: str) -> str | None:
    text = _prep(value)
    if text is None:
        return None
    if "@" in text and "://" not in text:
        email = _email(text)
        return None if email is None else _registrable(email.rpartition("@")[2])
    got = _url(text)
    return None if got is None or got[1] is None else _registrable(got[1])


_NAME_TOKEN = re.compile(r"[^\s<>()\[\]{},;\"'`|]+")

_NAME_PATH = re.compile(r"[/?#]")


def _bare_names(text: str) -> _Found:
    """Host names written without a scheme whose last label is a real top-level domain:
    every one, ambiguous or not (``acme.io``, ``main.py``), since values_of errs toward more."""
    values: list[str] = []
    rejected: list[str] = []
    for count, m in enumerate(_NAME_TOKEN.finditer(text)):
        if count >= MAX_CANDIDATES or len(values) > MAX_PER_KIND:
            rejected.append("too many candidates")
            break
        token = m.group().strip(".:!?")
        if "@" in token or "://" in token or "." not in token:
            continue
        host = _NAME_PATH.split(token, maxsplit=1)[0]
        name, colon, port = host.rpartition(":")
        if colon and port.isdigit():
            host = name
        tld = host.rstrip(".").rpartition(".")[2]
        if len(tld) < 2 or not any(ch.isalpha() for ch in tld) or not _is_tld(tld):
            continue
        domain = registrable_domain(host)
        if domain is not None:
            values.append(domain)
        else:
            rejected.append(token[:_MAX_QUOTED])
    return values, rejected


def _is_tld(label: str) -> bool:
    label = label.lower()
    if not label.isascii():
        try:
            label = label.encode("idna").decode("ascii")
        except UnicodeError:
            return True  # unreadable: let registrable_domain reject the name
    return _psl().publicsuffix("x." + label, accept_unknown=False) is not None


def _link_domains(emails: list[str], hosts: Iterable[str | None]) -> list[str]:
    names = [e.rpartition("@")[2] for e in emails] + [h for h in hosts if h is not None]
    return [d for d in map(_registrable, names) if d is not None]


def _find_domains(text: str, strict: bool) -> _Found:
    emails, rejected = _find_emails(text, strict)
    urls, more = _find_links(text, strict)
    values = _link_domains(emails, urls.values())
    rejected += more
    if strict:
        bare, more = _bare_names(text)
        values += bare
        rejected += more
    return values, rejected


def registrable_domain(host: str) -> str | None:
    """The registrable domain (eTLD+1) of a host name: ``mail.acme.co.uk`` → ``acme.co.uk``.

    None for an IP address, a public suffix itself (``co.uk``), a single-label name or a
    name that is invalid or carries invisible or IDNA deviation characters.
    """
    if not isinstance(host, str):
        return None
    prepared = _prep(host)
    name = _hostname(prepared) if prepared is not None else None
    return _registrable(name) if name is not None else None
