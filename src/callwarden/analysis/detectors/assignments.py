"""Key-like name = value: a random-looking value assigned to a credential's name.

Finds ``API_KEY=...``, ``"dbPassword": "..."`` and ``--token ...`` by the words of the name
(:func:`_name_class`) and the shape of the value (:func:`_plausible`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from callwarden.analysis.detectors.core import _NOUNS, MAX_CANDIDATES, _TooManyCandidates
from callwarden.analysis.detectors.findings import Span
from callwarden.analysis.detectors.heuristics import _entropy, _has_digit_and_letter, _is_placeholder

# Words that make an identifier name a credential (``API_KEY``, ``dbPassword``, ``--token``).
_PASSWORD_WORDS = frozenset({"password", "passwd", "pwd", "pass", "passphrase", "pw", "passwords"})
_SECRET_WORDS = frozenset({
    "secret", "secrets", "token", "apikey", "pat", "jwt", "credential", "credentials", "creds",
    "cred", "auth", "oauth", "bearer", "privatekey", "secretkey", "accesskey", "authtoken",
    "accesstoken", "apitoken", "clientsecret", "sessionkey", "sessiontoken", "ptt",
})
_SECRET_SUFFIXES = ("token", "secret", "password", "passwd", "apikey", "passphrase",
                    "credentials")
_ID_QUALIFIERS = frozenset({"client", "access", "key", "app", "consumer", "account"})
# A word before ``key`` that makes it a lookup key, not a credential.
_KEY_NOT_SECRET = frozenset({
    "primary", "foreign", "sort", "partition", "cache", "idempotency", "object", "row",
    "lookup", "dict", "map", "hash", "range", "dedup", "dedupe", "group", "routing", "shard",
    "unique", "composite", "sequence", "message", "i18n", "translation", "locale", "natural",
    "surrogate", "registry", "hot", "short", "shortcut", "press", "s3", "bucket", "redis",
    "column", "table", "index", "json", "field", "react", "list", "item", "entry", "node",
    "sorting", "label", "lang", "setting", "settings", "config", "cursor", "page", "state",
    "query", "param", "store", "storage_path", "public_key_path", "sheet", "event", "metric",
})
# Last words that make the name describe a credential rather than hold one.
_META_WORDS = frozenset({
    "count", "counts", "length", "len", "size", "limit", "limits", "max", "min", "type", "types",
    "name", "names", "file", "filename", "files", "path", "paths", "dir", "url", "uri", "urls",
    "endpoint", "expiry", "expires", "expiration", "exp", "ttl", "timeout", "env", "var", "vars",
    "field", "fields", "param", "params", "prefix", "suffix", "format", "version", "enabled",
    "required", "policy", "hint", "label", "placeholder", "regex", "pattern", "schema", "scope",
    "scopes", "location", "method", "methods", "mode", "rotation", "strength", "prompt",
    "provider", "kind", "ref", "arn", "usage", "index", "position", "budget", "display", "input",
    "validator", "store", "manager", "helper", "service", "class", "module", "cmd", "command",
    "script", "exists", "present", "days", "age", "at", "created", "updated", "lifetime",
    "duration", "period", "interval", "valid", "validity", "status", "state", "error", "errors",
    "message", "msg", "description", "desc", "text", "title", "audience", "issuer", "algorithm",
    "alg", "encoding", "bits", "source", "rate", "time", "date", "timestamp", "id", "ids",
    "header", "hash", "fingerprint", "checksum", "digest", "reset", "mask",
    "bucket", "template", "vault", "backend", "option", "options",
    "default", "level", "sep", "separator", "char", "chars", "used", "left", "total",
})
_FIRST_NOT_SECRET = frozenset({"max", "min", "num", "total", "is", "has", "use", "enable",
                               "show", "allow", "require", "get", "n", "no", "should", "can"})
_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_IDENT_HEAD = re.compile(r"[A-Za-z0-9_.\-]{0,100}")
# A value ends at a space (ASCII or Unicode), a tab, a line break or punctuation, but not at
# another control character: ``\x0b`` or ``\x1c`` inside a secret must not cut it in two and
# leave its tail unredacted. ``""value""`` (doubled quotes, as CSV and some shells write it)
# is a quoted value too.
_VALUE_END = r" \t\r\n\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_ASSIGN = re.compile(
    r"(?:\\?[\"'])?\s{0,4}+(?P<sep>:=|=>|==?|:|\s(?=\S))\s{0,4}+"
    r"(?:(?P<scheme>[Bb]earer|[Bb]asic|[Tt]oken)\s+)?"
    r"(?:\\?(?P<q>(?P<q1>[\"'`])(?P=q1){0,2})(?P<qv>[^\"'`\r\n]{1,1024}+)(?P=q)"
    r"|(?P<uv>[^" + _VALUE_END + r"\"'`,;&<>(){}\[\]|]{1,1024}+))"
)
_REFERENCE = re.compile(
    r"^(?:[A-Za-z_][A-Za-z_]*(?:\.[A-Za-z_][A-Za-z_0-9]*)+|(?:os\.)?(?:getenv|environ)\b.*|"
    r"process\.env\..*|self\.\w+|this\.\w+|req(?:uest)?\.\w+.*)$"
)
_SHAPE_NOT_SECRET = re.compile(
    r"^(?:https?|file|s3|gs)://|^[./~]{1,2}/|^\d{4}-\d\d-\d\d(?:[T ][\d:.]+Z?)?$|"
    r"^v?\d+(?:\.\d+){1,3}(?:[-+][\w.]+)?$|^[\w.+\-]+@[\w\-]+\.[\w.\-]+$|^\d+(?:\.\d+)?[a-z]{1,3}$"
)


def _name_class(name: str) -> str | None:
    """``password``, ``token``, ``id``, ``key`` or None: what the identifier ``name`` holds."""
    words = [w.lower() for w in _WORDS.findall(name)]
    if not words:
        return None
    last = words[-1]
    if words[0] in _FIRST_NOT_SECRET and len(words) > 1:
        return None
    if last in ("id", "ids"):
        return "id" if len(words) > 1 and words[-2] in _ID_QUALIFIERS else None
    if last in _META_WORDS:
        return None
    if any(w in _PASSWORD_WORDS or w.endswith(("password", "passwd")) for w in words):
        return "password"
    if any(w in _SECRET_WORDS or w.endswith(_SECRET_SUFFIXES) for w in words):
        return "token"
    if "key" in words or any(w.endswith("key") and len(w) > 3 for w in words):
        others = [w for w in words if w != "key"]
        if not others:
            return "key"
        if any(w in _KEY_NOT_SECRET for w in others):
            return None
        return "token"
    return None


def _plausible(value: str, cls: str, quoted: bool, name: str) -> bool:
    # Cheap shape tests first: hostile text yields many long candidate values.
    n = len(value)
    if cls == "password":
        if n < 4 or n > 256 or (not quoted and value.replace("_", "").isalpha()):
            return False
    elif n < 8 or " " in value:
        return False
    elif cls == "key":  # a bare ``key``: only clearly random, base64-like values
        if n < 20 or value.islower() or value.isupper() or not _has_digit_and_letter(value):
            return False
        if _entropy(value) < 4.0:
            return False
    elif value.isdigit():  # numeric ids (app ids, account numbers) are rarely credentials
        if cls == "id" or n < 12 or len(set(value)) < 6:
            return False
    elif not _has_digit_and_letter(value):
        if n < 16 or value.islower() or value.isupper() or _entropy(value) < 3.5:
            return False
    elif _entropy(value) < 2.5:
        return False
    if _is_placeholder(value) or _REFERENCE.match(value) or _SHAPE_NOT_SECRET.match(value):
        return False
    return value.lower() not in name.lower()


def _find_assignments(text: str) -> Iterator[Span]:
    low = text.lower()
    seen: set[int] = set()
    budget = MAX_CANDIDATES
    for noun in _NOUNS:
        pos = low.find(noun)
        while pos >= 0:
            budget -= 1
            if budget < 0:
                raise _TooManyCandidates
            start, floor = pos, max(0, pos - 100)
            while start > floor and text[start - 1] in _ID_CHARS:
                start -= 1
            end = _IDENT_HEAD.match(text, pos).end()  # type: ignore[union-attr]
            if start not in seen:
                seen.add(start)
                span = _assignment_at(text, start, end)
                if span is not None:
                    yield span
            pos = low.find(noun, end)


def _assignment_at(text: str, start: int, end: int) -> Span | None:
    name = text[start:end].rstrip(".-")
    if not name or end - start > 100 or (start > 0 and text[start - 1] in "$%"):
        return None
    cls = _name_class(name)
    if cls is None:
        return None
    m = _ASSIGN.match(text, end)
    if m is None:
        return None
    if m.group("sep").isspace() and not name.startswith("-"):
        return None  # ``word value`` is prose unless the word is a command-line flag
    quoted = m.group("qv") is not None
    group = "qv" if quoted else "uv"
    value = m.group(group)
    vstart, vend = m.span(group)
    if quoted:
        scheme = re.match(r"(?i)(?:bearer|basic|token)\s+", value)
        if scheme:
            vstart += scheme.end()
            value = value[scheme.end():]
        if value.endswith("\\"):
            value, vend = value[:-1], vend - 1
    elif vend < len(text) and text[vend] in "([":
        return None  # a call or subscript: code computing the value, not a literal
    if not _plausible(value, cls, quoted, name):
        return None
    return vstart, vend
