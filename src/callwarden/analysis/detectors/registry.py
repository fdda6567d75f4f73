"""The built-in detectors by name and family, and choosing a set of them.

Lists every built-in detector in priority order (provider tokens, then structural finders,
then personal data) and builds :class:`DetectorSet` objects from names and families.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

from callwarden.analysis.detectors.assignments import _find_assignments
from callwarden.analysis.detectors.core import _ASSIGNMENT_JSON_SCREEN, _NOUNS, Detector, DetectorSet
from callwarden.analysis.detectors.heuristics import _not_placeholder
from callwarden.analysis.detectors.pii import _find_cards, _find_emails, _find_ibans, _find_phones
from callwarden.analysis.detectors.providers import _PROVIDERS
from callwarden.analysis.detectors.structural import (
    _AUTH_HEADER,
    _URL_USERINFO_JSON_SCREEN,
    _find_private_keys,
    _url_passwords,
)
from callwarden.exceptions import ConfigError

_STRUCTURAL: list[Detector] = [
    Detector("private_key", finder=_find_private_keys, category="secret", keywords=("PRIVATE KEY",),
             description="PEM private key block (RSA, EC, OpenSSH, PGP, PKCS#8)"),
    Detector("connection_string", finder=_url_passwords(web=False), category="secret",
             keywords=("://",), family="connection_string", json_screen=_URL_USERINFO_JSON_SCREEN,
             description="database or broker URL with a password (postgres://u:p@h)"),
    Detector("basic_auth_url", finder=_url_passwords(web=True), category="secret",
             keywords=("://",), family="basic_auth", json_screen=_URL_USERINFO_JSON_SCREEN,
             description="http(s) URL with a password in it (https://u:p@h)"),
    Detector("auth_header", _AUTH_HEADER, category="secret", family="generic", group="s",
             ci_keywords=("authorization",), validate=_not_placeholder,
             json_screen=_ASSIGNMENT_JSON_SCREEN,
             description="Authorization header credentials (Bearer, Basic, Token)"),
    Detector("secret_assignment", finder=_find_assignments, category="secret", family="generic",
             ci_keywords=_NOUNS, json_screen=_ASSIGNMENT_JSON_SCREEN,
             description="a random-looking value assigned to a key-like name (API_KEY=...)"),
]

_PII: list[Detector] = [
    Detector("card_number", finder=_find_cards, category="pii",
             description="payment card number (Luhn-checked, issuer prefix, spaces/dashes)"),
    Detector("iban", finder=_find_ibans, category="pii",
             description="IBAN with a valid mod-97 check"),
    Detector("email", finder=_find_emails, category="pii", keywords=("@",),
             description="e-mail address"),
    Detector("phone", finder=_find_phones, category="pii",
             description="phone number: E.164, North American and common national formats"),
]

DETECTORS: Mapping[str, Detector] = {d.name: d for d in (*_PROVIDERS, *_STRUCTURAL, *_PII)}
"""Every built-in detector by name, in priority order (specific before generic)."""


def _families() -> dict[str, tuple[str, ...]]:
    fams: dict[str, list[str]] = {"secret": [], "pii": [], "cloud": []}
    for d in DETECTORS.values():
        fams.setdefault(d.family, []).append(d.name)
        fams[d.category].append(d.name)
        if d.family in ("aws", "gcp", "azure"):
            fams["cloud"].append(d.name)
    return {k: tuple(v) for k, v in fams.items()}


FAMILIES: Mapping[str, tuple[str, ...]] = _families()
"""Group names (``aws``, ``github``, ``generic``, ``cloud``, ``secret``, ``pii`` ...) -> names."""


class UnknownDetector(ConfigError):
    """A detector or family name is not known; ``suggestion`` is the closest known name."""

    def __init__(self, name: str) -> None:
        known = sorted({*DETECTORS, *FAMILIES})
        close = difflib.get_close_matches(name, known, n=1)
        self.name = name
        self.suggestion = close[0] if close else None
        hint = f"; did you mean {self.suggestion!r}?" if self.suggestion else ""
        super().__init__(f"unknown detector {name!r}{hint}", key=name)


def _expand(names: Iterable[str]) -> list[str]:
    out: list[str] = []
    for n in names:
        if n in DETECTORS:
            out.append(n)
        elif n in FAMILIES:
            out.extend(FAMILIES[n])
        else:
            raise UnknownDetector(n)
    return out


def select_detectors(
    include: Iterable[str] | None = None,
    *,
    exclude: Iterable[str] = (),
    patterns: Mapping[str, str] | None = None,
) -> DetectorSet:
    """Builds a DetectorSet from built-in names or families, plus custom regexes.

    Args:
        include: detector or family names; None means every secret detector.
        exclude: names or families to leave out.
        patterns: ``{name: regex}`` custom detectors, appended after the built-ins.

    Raises:
        UnknownDetector: for a name that is neither a detector nor a family.
        ValueError: for a custom regex that does not compile or could backtrack badly.
    """
    chosen = _expand(FAMILIES["secret"] if include is None else include)
    dropped = set(_expand(exclude))
    order = {n: i for i, n in enumerate(DETECTORS)}
    names = sorted({n for n in chosen if n not in dropped}, key=order.__getitem__)
    detectors = [DETECTORS[n] for n in names]
    for name, pattern in (patterns or {}).items():
        detectors.append(Detector.custom(str(name), pattern))
    return DetectorSet(detectors)


SECRETS = select_detectors()
"""Every built-in secret detector."""
PII = select_detectors(["pii"])
"""Every built-in personal-data detector."""
