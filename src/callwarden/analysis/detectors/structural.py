"""Structural secret finders: PEM private key blocks, passwords in URLs, Authorization headers.

These find a secret by the shape around it rather than by a provider's prefix; the
detectors built on them are listed in :mod:`callwarden.analysis.detectors.registry`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from callwarden.analysis.detectors.core import MAX_CANDIDATES, Finder, _TooManyCandidates
from callwarden.analysis.detectors.findings import Span
from callwarden.analysis.detectors.heuristics import _PLACEHOLDER, _entropy, _is_placeholder

_PEM_BEGIN = re.compile(r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = re.compile(r"-----END[A-Z0-9 ]{0,40}-----")
_PEM_BODY = re.compile(r"(?:[A-Za-z0-9+/=:,\-]|\\[nr]|\s){0,65536}+")
_B64_CHARS = re.compile(r"[A-Za-z0-9+/]{16}")


def _find_private_keys(text: str) -> Iterator[Span]:
    for m in _PEM_BEGIN.finditer(text):
        start = m.start()
        stop = text.find("-----END", m.end(), m.end() + 65536)
        if stop >= 0:
            end_m = _PEM_END.match(text, stop)
            end = end_m.end() if end_m else stop + 8
            body = text[m.end():stop]
        else:
            body_m = _PEM_BODY.match(text, m.end())
            end = body_m.end() if body_m else m.end()
            body = text[m.end():end]
        if _B64_CHARS.search(body) and not _PLACEHOLDER.search(body.replace("\\n", "\n")):
            yield start, end


_URL_USERINFO = re.compile(r"://(?P<user>[^\s:/?#@\"'<>\[\]{}\\]{0,128}+):"
                           r"(?P<pw>[^\s/?#@\"'<>\[\]{}\\]{1,256}+)@(?=[A-Za-z0-9\[_.\-])")
# The same in JSON text: the characters either part allows are written as themselves.
_URL_USERINFO_JSON_SCREEN = r"""://[^\s:/?#@"'<>\[\]{}\\]{0,128}:[^\s/?#@"'<>\[\]{}\\]{1,256}@"""
_SCHEME_TAIL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]{0,30}\Z")
_WEB_SCHEMES = frozenset({"http", "https", "ws", "wss", "ftp", "ftps", "git", "ssh", "sftp", "svn"})


def _url_passwords(web: bool) -> Finder:
    def find(text: str) -> Iterator[Span]:
        for count, m in enumerate(_URL_USERINFO.finditer(text)):
            if count >= MAX_CANDIDATES:
                raise _TooManyCandidates
            sm = _SCHEME_TAIL.search(text, max(0, m.start() - 31), m.start())
            if sm is None:
                continue
            scheme = sm.group().lower().rsplit(":", 1)[-1]
            if (scheme in _WEB_SCHEMES) != web:
                continue
            pw = m.group("pw")
            if _is_placeholder(pw) and not (len(pw) >= 20 and _entropy(pw) > 3.5):
                continue
            yield m.span("pw")

    return find


_AUTH_HEADER = re.compile(
    r"(?i:(?:proxy-)?authorization)[\"']?\s{0,4}[:=]\s{0,4}[\"']?"
    r"(?i:bearer|basic|token|bot|digest|apikey|sso-key)\s+(?P<s>[A-Za-z0-9._~+/=\-:]{8,4096})"
)
