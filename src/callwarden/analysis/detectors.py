"""Secret and personal-data detectors: scanning text and nested arguments, and redacting.

A :class:`Detector` finds one kind of sensitive text (an AWS key, a JWT, a card number ...).
A :class:`DetectorSet` compiles several into one scanner with a cheap prefilter: every
detector names the literal keywords its matches must contain, the set folds them into one
anchor regex keyed on each keyword's rarest character, and a detector only runs when one of
its keywords occurs. Benign text therefore costs one C-level pass plus a few substring tests.

Findings carry the detector, the category, the span and the JSON path, never the matched
text: they are safe to log, to put in an audit event and to show to a model.

    >>> found = scan_value({"body": "key: AKIAZ7VRSQ5TJN2XOHNB"})
    >>> [f"{f.detector} in {f.path}" for f in found]
    ['aws_access_key_id in args.body']
    >>> redact({"body": "key: AKIAZ7VRSQ5TJN2XOHNB"}, found)
    {'body': 'key: [REDACTED:aws_access_key_id]'}
"""

from __future__ import annotations

import base64
import binascii
import difflib
import itertools
import json
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from callwarden.exceptions import CallwardenError, ConfigError

__all__ = [
    "DEFAULT_REPLACEMENT",
    "DETECTORS",
    "FAMILIES",
    "MAX_CHARS",
    "PII",
    "SECRETS",
    "Detector",
    "DetectorSet",
    "Finding",
    "Findings",
    "UnknownDetector",
    "redact",
    "scan_text",
    "scan_value",
    "select_detectors",
]

Category = Literal["secret", "pii", "custom"]
Span = tuple[int, int]
PathPart = str | int

MAX_CHARS = 1 << 20  # per string: 1 MiB of text is scanned, the rest is reported as truncated
MAX_TOTAL_CHARS = 8 << 20
MAX_DEPTH = 32
MAX_CANDIDATES = 20_000  # per detector and string, bounds the Python-level work on hostile text
DEFAULT_REPLACEMENT = "[REDACTED:{detector}]"


# --------------------------------------------------------------------------------- findings


@dataclass(frozen=True, slots=True)
class Finding:
    """Where a detector matched. Holds no matched text, so its repr is safe to log.

    Attributes:
        detector: the detector's name (``aws_access_key_id``, ``email`` ...).
        category: ``secret``, ``pii`` or ``custom``.
        start: offset of the first matched character in the scanned string.
        end: offset just past the match.
        path: where the string sits in a scanned structure (``args.body``, ``args.to[1]``);
            empty for a bare string.
        in_key: True when the match is in a mapping key rather than its value.
    """

    detector: str
    category: str
    start: int
    end: int
    path: str = ""
    in_key: bool = False
    parts: tuple[PathPart, ...] = field(default=(), repr=False)

    @property
    def span(self) -> Span:
        """``(start, end)`` of the match."""
        return (self.start, self.end)

    def describe(self) -> str:
        """``"detector in path"``: a one-line, value-free description."""
        where = self.path or "text"
        return f"{self.detector} in {where}{' (key)' if self.in_key else ''}"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe record for audit events (no value)."""
        return {"detector": self.detector, "category": self.category, "path": self.path,
                "start": self.start, "end": self.end, "in_key": self.in_key}


class Findings(list[Finding]):
    """A list of findings that also says whether the scan was complete.

    Attributes:
        truncated: True when some text was not scanned (a string over the size cap, the total
            budget spent, nesting too deep, a value that cannot be read as text).
        notes: why, one short line per cause, without values.
        unscanned: the paths (as parts) of values not fully scanned; ``redact`` replaces them
            whole, so a rewrite never passes on text nobody looked at.
    """

    __slots__ = ("notes", "truncated", "unscanned")

    def __init__(self, items: Iterable[Finding] = ()) -> None:
        super().__init__(items)
        self.truncated = False
        self.notes: list[str] = []
        self.unscanned: list[tuple[PathPart, ...]] = []

    def note(self, message: str, parts: tuple[PathPart, ...] | None = None) -> None:
        """Marks the scan incomplete and records why (and, if given, which value)."""
        self.truncated = True
        if parts is not None:
            self.unscanned.append(parts)
        if len(self.notes) < 20:
            self.notes.append(message)

    def summary(self, limit: int = 3) -> str:
        """``"aws_secret_key in args.body, jwt in args.headers (+2 more)"`` (value-free)."""
        seen: list[str] = []
        for f in self:
            text = f.describe()
            if text not in seen:
                seen.append(text)
        head = ", ".join(seen[:limit])
        if len(seen) > limit:
            head += f" (+{len(seen) - limit} more)"
        return head

    def __repr__(self) -> str:
        return f"Findings({list.__repr__(self)}, truncated={self.truncated})"


# --------------------------------------------------------------------------------- detectors

Finder = Callable[[str], Iterable[Span]]


class _TooManyCandidates(CallwardenError):
    """A detector gave up on hostile text after MAX_CANDIDATES candidate matches."""


Validator = Callable[[str], bool]

_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
# Loose rarity order used to pick each keyword's anchor character: the rarer the anchor, the
# fewer positions the combined prefilter regex has to look at in ordinary prose and code.
# Measured on a mix of English prose, Python source and shell commands.
_RARITY = ("Q7%Z^$J&95~8@3B<?XW46KY!GqV2;U\t\\#H+zjF1DO0L'M|>I/PRSCT{}*AE][xNkvbw=-y`g:)(_.hmu"
           ',pf"dc\nliaonsrte ')


class Detector:
    """One kind of sensitive text, found by a regex or by a finder function.

    Args:
        name: short snake_case id used in rules, findings and redaction markers.
        pattern: a regex; the secret is ``group`` of each match (default: the whole match).
        category: ``secret``, ``pii`` or ``custom``.
        family: a group name rules can select several detectors by (``aws``, ``github``).
        keywords: literal strings one of which every match contains; the detector only runs
            when one occurs in the text (the prefilter). Empty means it always runs.
        ci_keywords: like ``keywords`` but matched against the lower-cased text.
        group: which regex group holds the secret.
        validate: a check on the matched secret; False drops the match.
        finder: instead of ``pattern``, a function returning ``(start, end)`` spans.
        word: require a non-alphanumeric character (or the start) before the match.
        description: one line for documentation and ``callwarden explain``.
        json_screen: an RE2 pattern that occurs in the JSON encoding (ASCII, as
            ``json.dumps`` writes it) of any data holding a string this detector matches: a
            screen for whole payloads (see ``DetectorSet.json_screen``). Derived from the
            keywords when not given; a detector with neither cannot be screened.
    """

    __slots__ = ("_finder", "_group", "_regex", "_validate", "_word", "category", "ci_keywords",
                 "description", "family", "json_screen", "keywords", "name")

    def __init__(
        self,
        name: str,
        pattern: str | re.Pattern[str] | None = None,
        *,
        category: Category = "custom",
        family: str | None = None,
        keywords: Iterable[str] = (),
        ci_keywords: Iterable[str] = (),
        group: int | str = 0,
        validate: Validator | None = None,
        finder: Finder | None = None,
        word: bool = False,
        description: str = "",
        json_screen: str | None = None,
    ) -> None:
        if (pattern is None) == (finder is None):
            raise ValueError("a Detector needs exactly one of pattern or finder")
        self.name = name
        self.category = category
        self.family = family or name
        self.keywords = tuple(keywords)
        self.ci_keywords = tuple(k.lower() for k in ci_keywords)
        self.description = description
        self._regex = re.compile(pattern) if isinstance(pattern, str) else pattern
        self._group = group
        self._validate = validate
        self._finder = finder
        self._word = word
        self.json_screen = json_screen or _keyword_screen(self.keywords, self.ci_keywords)

    @classmethod
    def custom(cls, name: str, pattern: str, *, category: Category = "custom") -> Detector:
        """A user-defined detector from a regex, refusing patterns that backtrack badly.

        Raises:
            ValueError: when the regex does not compile or nests quantifiers like ``(a+)+``.
        """
        if not isinstance(pattern, str) or not pattern:
            raise ValueError(f"pattern for {name!r} must be a non-empty regex string")
        if _NESTED_QUANTIFIER.search(pattern):
            raise ValueError(
                f"pattern for {name!r} nests quantifiers (like (a+)+), which can take exponential "
                "time on hostile input; drop the inner quantifier or use an atomic group (?>...)"
            )
        try:
            compiled = re.compile(pattern)
        except re.error as e:
            raise ValueError(f"pattern for {name!r} is not a valid regex: {e}") from e
        return cls(name, compiled, category=category, description=f"custom pattern {name}")

    def find(self, text: str) -> Iterator[Span]:
        """Yields the ``(start, end)`` span of every match in ``text``."""
        if self._finder is not None:
            yield from self._finder(text)
            return
        assert self._regex is not None
        group, validate, word = self._group, self._validate, self._word
        for count, m in enumerate(self._regex.finditer(text)):
            if count >= MAX_CANDIDATES:
                raise _TooManyCandidates
            start, end = m.span(group)
            if start < 0 or end <= start:
                continue
            if word and m.start() > 0 and text[m.start() - 1] in _ALNUM:
                continue
            if validate is not None and not validate(text[start:end]):
                continue
            yield start, end

    def __repr__(self) -> str:
        return f"Detector({self.name!r}, category={self.category!r}, family={self.family!r})"


_NESTED_QUANTIFIER = re.compile(
    r"\((?:\?:)?(?:\\[wWdDsS.]|\[(?:\\.|[^\]])*\]|[^()|\\])[+*]\)[+*{]"
)


class DetectorSet:
    """Detectors compiled into one scanner. Earlier detectors win overlapping matches.

    Build one once (at policy compile time) and reuse it: construction builds the prefilter.
    """

    __slots__ = ("_always", "_anchor", "_anchors", "_ci", "_decode", "detectors", "json_screen",
                 "names")

    def __init__(self, detectors: Iterable[Detector]) -> None:
        self.detectors: tuple[Detector, ...] = tuple(detectors)
        # Secrets get base64-encoded to slip past filters; personal data rarely is.
        self._decode = any(d.category == "secret" for d in self.detectors)
        self.names: tuple[str, ...] = tuple(d.name for d in self.detectors)
        always: list[int] = []
        by_keyword: dict[str, list[int]] = {}
        ci: dict[str, list[int]] = {}
        for i, d in enumerate(self.detectors):
            if not d.keywords and not d.ci_keywords:
                always.append(i)
            for k in d.keywords:
                by_keyword.setdefault(k, []).append(i)
            for k in d.ci_keywords:
                ci.setdefault(k, []).append(i)
        self._always = tuple(always)
        self._ci = tuple((k, tuple(v)) for k, v in ci.items())
        # anchor char -> [(keyword, offset of the anchor in it, detector indexes)]
        anchors: dict[str, list[tuple[str, int, tuple[int, ...]]]] = {}
        for k, idx in by_keyword.items():
            pos = min(range(len(k)), key=lambda j: (_rank(k[j]), j))
            anchors.setdefault(k[pos], []).append((k, pos, tuple(idx)))
        self._anchors = anchors
        self._anchor = _anchor_regex(anchors) if anchors else None
        self.json_screen: str | None = self._json_screen()
        """An RE2 pattern absent from a payload's JSON encoding only when no detector here
        finds anything in any of its strings (keys included), or None when some detector
        cannot be screened. Searching the encoding of many payloads at once with it costs
        far less than scanning each string."""

    def _json_screen(self) -> str | None:
        parts = [d.json_screen for d in self.detectors]
        if None in parts:
            return None
        if self._decode:
            parts.append(_B64_JSON_SCREEN)
        parts.append(NON_ASCII_JSON_SCREEN)  # the folding pass looks at non-ASCII text only
        return "|".join(dict.fromkeys(parts))  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[Detector]:
        return iter(self.detectors)

    def __len__(self) -> int:
        return len(self.detectors)

    def __repr__(self) -> str:
        return f"DetectorSet({list(self.names)!r})"

    def _active(self, text: str) -> list[int]:
        active: set[int] = set(self._always)
        if self._anchor is not None:
            # Keywords still unseen, by anchor character: once all are seen the pass stops, so
            # text full of one keyword ("AKIAAKIA...") costs one dict lookup per occurrence.
            # Copied on the first anchor hit only: most text has none, and copying the table
            # for every scanned string was most of the cost of scanning short values.
            anchors = self._anchors
            pending: dict[str, list[tuple[str, int, tuple[int, ...]]]] | None = None
            for m in self._anchor.finditer(text):
                p = m.start()
                if pending is None:
                    pending = {c: list(v) for c, v in anchors.items()}
                entries = pending.get(text[p])
                if not entries:
                    continue
                for entry in list(entries):
                    k, off, idx = entry
                    if text.startswith(k, p - off):
                        active.update(idx)
                        entries.remove(entry)
                if not entries:
                    del pending[text[p]]
                    if not pending:
                        break
        if self._ci:
            low = text.lower()
            for k, idx in self._ci:
                if k in low:
                    active.update(idx)
        return sorted(active)

    def scan(self, text: str) -> Findings:
        """Returns the merged, position-ordered findings in ``text`` (no path).

        Also sees through two disguises: text is NFKC-folded with invisible format characters
        removed (a zero-width space inside a token, fullwidth letters), and base64 blobs
        that decode to text are scanned decoded (a finding there covers the whole blob).
        """
        out = self._scan_plain(text)
        extra: list[Finding] = []
        if not text.isascii() and (_INVISIBLE_RE.search(text) is not None
                                   or not unicodedata.is_normalized("NFKC", text)):
            folded, where = _fold(text)
            for f in self._scan_plain(folded):
                end = where[f.end - 1] + 1
                extra.append(Finding(f.detector, f.category, where[f.start], end))
        if self._decode and len(text) >= _B64_MIN:
            for start, end, decoded in _b64_blobs(text):
                found = self._scan_plain(decoded)
                if found:
                    extra.append(Finding(found[0].detector, found[0].category, start, end))
        if extra:
            for f in extra:
                if not any(o.start < f.end and f.start < o.end for o in out):
                    out.append(f)
            out.sort(key=lambda f: f.start)
        return out

    def _scan_plain(self, text: str) -> Findings:
        out = Findings()
        spans: list[tuple[int, int, int]] = []
        for i in self._active(text):
            try:
                for start, end in self.detectors[i].find(text):
                    spans.append((start, end, i))
            except _TooManyCandidates:
                out.note(f"{self.detectors[i].name}: stopped after {MAX_CANDIDATES} candidates")
        if not spans:
            return out
        spans.sort()
        # Overlapping matches merge into one finding credited to the highest-priority (earliest
        # listed) detector, so that redacting the merged span removes every matched character.
        cur_s, cur_e, cur_i = spans[0]
        for s, e, i in spans[1:]:
            if s < cur_e:
                cur_e = max(cur_e, e)
                cur_i = min(cur_i, i)
                continue
            out.append(self._finding(cur_s, cur_e, cur_i))
            cur_s, cur_e, cur_i = s, e, i
        out.append(self._finding(cur_s, cur_e, cur_i))
        return out

    def _finding(self, start: int, end: int, i: int) -> Finding:
        d = self.detectors[i]
        return Finding(d.name, d.category, start, end)


# Invisible characters an attacker can put inside a token: format characters (Cf: zero-width
# space/joiner, soft hyphen, bidi marks, word joiner, BOM) and variation selectors.
_INVISIBLE = frozenset(
    chr(c) for c in itertools.chain(range(0x200B, 0x2010), range(0x202A, 0x202F),
                                    range(0x2060, 0x2065), range(0xFE00, 0xFE10),
                                    (0x00AD, 0x034F, 0x061C, 0x180E, 0xFEFF)))
_INVISIBLE_RE = re.compile("[" + "".join(sorted(_INVISIBLE)) + "]")
_B64_MIN = 20
_B64_MAX_BLOBS = 64
_B64_TOKEN = re.compile(r"[A-Za-z0-9+/]{20,8192}={0,2}")
_TOKEN_EDGES = "\"'`,;:()[]{}<>"


def _b64_blobs(text: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, decoded text) of the whitespace-separated base64 tokens that decode to
    printable text: where an encoded secret sits in a command line, a value or a message.
    Splitting on whitespace is C-fast; a regex over every position cost more than the scan."""
    count = 0
    pos = 0
    for word in text.split():
        if len(word) < _B64_MIN:
            continue
        token = word.strip(_TOKEN_EDGES)
        if _B64_TOKEN.fullmatch(token) is None:
            continue
        count += 1
        if count > _B64_MAX_BLOBS:
            return
        decoded = _b64_text(token)
        start = text.find(token, pos)
        if start < 0:
            continue
        pos = start + len(token)
        if decoded is not None:
            yield start, pos, decoded


def _fold(text: str) -> tuple[str, list[int]]:
    """NFKC per character with invisible characters dropped, and each output char's source."""
    chars: list[str] = []
    where: list[int] = []
    for i, ch in enumerate(text):
        if ch.isascii():
            chars.append(ch)
            where.append(i)
            continue
        if ch in _INVISIBLE or unicodedata.category(ch) == "Cf":
            continue
        for out in unicodedata.normalize("NFKC", ch):
            chars.append(out)
            where.append(i)
    return "".join(chars), where


def _b64_text(blob: str) -> str | None:
    """The text a base64 blob encodes, when it is printable text, else None."""
    if len(blob.rstrip("=")) % 4 == 1 or blob.isalpha() or blob.isdigit():
        return None
    try:
        raw = base64.b64decode(blob + "=" * (-len(blob) % 4), validate=True)
        decoded = raw.decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return None
    if len(decoded) < 12 or not all(c.isprintable() or c in "\n\r\t" for c in decoded):
        return None
    return decoded


# How JSON text (``json.dumps`` with ASCII output) shows what a detector looks for: a string
# is written character by character, ``"`` and ``\\`` and control characters escaped and
# every non-ASCII character as ``\\uXXXX``.
NON_ASCII_JSON_SCREEN = r"\\u"
_JSON_WS = r"(?: |\\[tnrfb]|\\u[0-9a-fA-F]{4})"
_B64_EDGE = r"""[\s"'`,;:()\[\]{}<>\\]"""
# A whitespace-delimited base64 token (edges stripped), as _b64_blobs finds them.
_B64_JSON_SCREEN = _B64_EDGE + r"[A-Za-z0-9+/]{20,}={0,2}(?:" + _B64_EDGE + "|$)"


def _json_literal(text: str) -> str:
    return re.escape(json.encoder.encode_basestring_ascii(text)[1:-1])


def _keyword_screen(keywords: Sequence[str], ci_keywords: Sequence[str]) -> str | None:
    if not keywords and not ci_keywords:
        return None
    parts = [_json_literal(k) for k in keywords]
    if ci_keywords:
        if not all(k.isascii() for k in ci_keywords):
            return None  # lower() of non-ASCII text is not a per-character mapping
        parts.append("(?i:" + "|".join(_json_literal(k) for k in ci_keywords) + ")")
    return "|".join(parts)


# Name parts that make an identifier key-like (``API_KEY``, ``dbPassword``, ``--token``).
_NOUNS = ("secret", "token", "pass", "pw", "auth", "cred", "key", "jwt", "pat", "client", "access")

# What _find_assignments, _AUTH_HEADER and the AWS secret key need, in JSON text: a name
# holding a noun, then an optional (escaped) quote, up to four whitespace characters and
# ``:`` or ``=``; or a ``-flag`` name and whitespace. Mapping keys do not qualify: the
# quote that closes a key is not escaped.
_NAME_JSON = r"[A-Za-z0-9_.\-]*"
_QUOTE_JSON = r"""(?:(?:\\\\)?(?:\\"|'))?"""
_NOUNS_JSON = "(?i:" + "|".join(_NOUNS) + ")"
_ASSIGNMENT_JSON_SCREEN = (
    _NOUNS_JSON + _NAME_JSON + _QUOTE_JSON + _JSON_WS + "{0,4}[:=]|-" + _NAME_JSON
    + _NOUNS_JSON + _NAME_JSON + _QUOTE_JSON + _JSON_WS)



def _rank(c: str) -> int:
    i = _RARITY.find(c)
    return i if i >= 0 else 0  # characters outside the table (non-ASCII) are rare


def _anchor_regex(anchors: Mapping[str, list[tuple[str, int, tuple[int, ...]]]]) -> re.Pattern[str]:
    branches = []
    for c, entries in anchors.items():
        alts = []
        for k, off, _ in entries:
            behind = f"(?<={re.escape(k[:off + 1])})" if off else ""
            ahead = f"(?={re.escape(k[off + 1:])})" if k[off + 1:] else ""
            alts.append(behind + ahead)
        body = "" if "" in alts else "(?:" + "|".join(alts) + ")"
        branches.append(re.escape(c) + body)
    return re.compile("|".join(branches))


# ------------------------------------------------------------------------- value heuristics

_PLACEHOLDER = re.compile(
    r"(?i)x{4,}|\*{3,}|•{3,}|\.{3}|…|#{4,}|0{8,}|<[^>]*>|\$\{|\{\{|\$\(|%\(|\#\{|\[\[|"
    r"^\$[a-z_]|^%[a-z_]\w*%$|^!(?:vault|ref|sub|secret)|^enc\[|\$ansible_vault|"
    r"your|example|placeholder|changeme|change_me|change-me|redacted|dummy|insert[_\- ]|"
    r"replace[_\- ]?(?:me|with|this)|sample|fixme|^todo|^tbd$|^n/?a$|not[_\- ]?a[_\- ]?real|"
    r"^(?:ssh-(?:rsa|ed25519|dss)|ecdsa-sha2-|sk-ssh-|sk-ecdsa-)|-----BEGIN (?!.*PRIVATE)"
)
def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


_COMMON_VALUES = _wordset("""
    password passwd pass pwd secret secrets token apikey api_key api-key key changeme null none
    nil undefined true false empty default admin root test testing guest demo user username
    string str value values hidden masked required optional mysecret mypassword secretkey
    letmein qwerty abc123 foobar foo bar baz 1234 12345 123456 1234567 12345678 123456789
    1234567890 password1 password123 p@ssw0rd private public bearer basic token123
    """)
_KNOWN_EXAMPLES = frozenset({
    "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "sk_test_4eC39HqLyjWDarjtT1zdp7dc", "sk_test_BQokikJOvBiI2HlWgH4olfQ2",
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0"
    "IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
})
_SEQUENCES = ("0123456789", "abcdefghijklmnopqrstuvwxyz", "qwertyuiop", "asdfghjkl")


def _entropy(s: str) -> float:
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values()) if n else 0.0


def _is_placeholder(value: str) -> bool:
    if value in _KNOWN_EXAMPLES or "EXAMPLE" in value:
        return True
    low = value.lower()
    if low in _COMMON_VALUES or len(set(low)) <= 3:
        return True
    if len(low) >= 6 and any(low in seq for seq in _SEQUENCES):
        return True
    return _PLACEHOLDER.search(value) is not None


def _not_placeholder(value: str) -> bool:
    return not _is_placeholder(value)


# -------------------------------------------------------------------- provider token regexes

def _provider(name: str, family: str, keywords: Sequence[str], pattern: str, *,
              group: int | str = 0, validate: Validator | None = None, word: bool = True,
              ci_keywords: Sequence[str] = (), description: str = "",
              json_screen: str | None = None) -> Detector:
    def check(value: str) -> bool:
        return not _is_placeholder(value) and (validate is None or validate(value))

    return Detector(name, pattern, category="secret", family=family, keywords=keywords,
                    ci_keywords=ci_keywords, group=group, validate=check, word=word,
                    description=description or f"{family} credential", json_screen=json_screen)


_T = r"(?![A-Za-z0-9_\-])"  # end of a token


_DIGIT = re.compile(r"[0-9]")
_LETTER = re.compile(r"[A-Za-z]")


def _has_digit_and_letter(s: str) -> bool:
    return _DIGIT.search(s) is not None and _LETTER.search(s) is not None


def _jwt_ok(value: str) -> bool:
    head = value.split(".", 1)[0]
    try:
        raw = base64.urlsafe_b64decode(head + "=" * (-len(head) % 4))
        header = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError, RecursionError):
        return False
    return isinstance(header, dict) and bool({"alg", "typ", "enc", "kid"} & header.keys())


_PROVIDERS: list[Detector] = [
    # --- cloud
    _provider("aws_access_key_id", "aws", ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
              r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z2-7]{16}(?![A-Za-z0-9])",
              description="AWS access key id"),
    _provider("aws_secret_key", "aws", (),
              r"(?i:aws_?secret_?(?:access_?)?key|secret_?access_?key)[\"']?\s{0,4}[:=]\s{0,4}"
              r"[\"']?(?P<s>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])", group="s", word=False,
              ci_keywords=("secret",), json_screen=_ASSIGNMENT_JSON_SCREEN,
              description="AWS secret access key next to its name"),
    _provider("aws_bedrock_key", "aws", ("ABSK", "bedrock-api-key-"),
              r"ABSK[A-Za-z0-9+/]{100,300}={0,2}|bedrock-api-key-[A-Za-z0-9+/]{20,2000}={0,2}"),
    _provider("gcp_api_key", "gcp", ("AIza",), r"AIza[0-9A-Za-z_\-]{35}" + _T),
    _provider("gcp_service_account", "gcp", ("private_key_id",),
              r"\"private_key_id\"\s{0,4}:\s{0,4}\"(?P<s>[0-9a-f]{40})\"", group="s", word=False),
    _provider("gcp_oauth_token", "gcp", ("GOCSPX-", "ya29.", "1//0"),
              r"GOCSPX-[A-Za-z0-9_\-]{28}" + _T + r"|ya29\.[0-9A-Za-z_\-]{30,}|1//0[0-9A-Za-z_\-]{40,}"),
    _provider("azure_storage_key", "azure", ("AccountKey=", "accountkey="),
              r"(?i:accountkey)=(?P<s>[A-Za-z0-9+/]{80,100}={0,2})", group="s"),
    _provider("azure_client_secret", "azure", ("Q~",),
              r"[A-Za-z0-9_~.\-]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}(?![A-Za-z0-9_~.\-])"),
    _provider("azure_sas_token", "azure", ("sig=",),
              r"[?&;]sig=(?P<s>[A-Za-z0-9%+/]{40,120}(?:%3D|=){0,2})", group="s", word=False),
    # --- code hosting and package registries
    _provider("github_token", "github", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
              r"gh[pousr]_[A-Za-z0-9]{36,255}" + _T + r"|github_pat_[A-Za-z0-9_]{60,255}" + _T),
    _provider("gitlab_token", "gitlab",
              ("glpat-", "gldt-", "glft-", "glimt-", "glagent-", "glptt-", "glrt-", "glcbt-",
               "glsoat-", "gloas-", "glffct-", "GR1348941"),
              r"gl(?:pat|dt|ft|imt|agent|ptt|rt|cbt|soat|oas|ffct)-[0-9A-Za-z_\-]{20,300}" + _T
              + r"|GR1348941[0-9A-Za-z_\-]{20,}" + _T),
    _provider("npm_token", "npm", ("npm_",), r"npm_[A-Za-z0-9]{36}" + _T),
    _provider("pypi_token", "pypi", ("pypi-AgE",),
              r"pypi-AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)[A-Za-z0-9_\-]{40,}"),
    _provider("rubygems_token", "rubygems", ("rubygems_",), r"rubygems_[a-f0-9]{48}" + _T),
    _provider("artifactory_token", "jfrog", ("AKCp", "cmVmd"),
              r"AKCp[A-Za-z0-9]{69}" + _T + r"|cmVmd[A-Za-z0-9]{59}" + _T),
    # --- chat and messaging
    _provider("slack_token", "slack", ("xox", "xapp-"),
              r"xox[a-z]{1,6}-[0-9A-Za-z\-]{8,300}" + _T + r"|xapp-\d-[A-Za-z0-9\-]{20,300}"),
    _provider("slack_webhook", "slack", ("hooks.slack.com/",),
              r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<s>[A-Za-z0-9+/_\-]{20,200})",
              group="s", word=False),
    _provider("discord_webhook", "discord", ("/api/webhooks/",),
              r"discord(?:app)?\.com/api/webhooks/(?P<s>\d{5,30}/[A-Za-z0-9_\-]{50,})",
              group="s", word=False),
    _provider("teams_webhook", "microsoft", ("/IncomingWebhook/",),
              r"webhookb2/(?P<s>[A-Za-z0-9\-]{8,}@[A-Za-z0-9\-]{8,}/IncomingWebhook/"
              r"[A-Za-z0-9]{32}/[A-Za-z0-9\-]{36})", group="s", word=False),
    _provider("telegram_bot_token", "telegram", (":AA",), r"\d{8,10}:AA[0-9A-Za-z_\-]{33}" + _T),
    _provider("twilio_api_key", "twilio", ("SK",), r"SK[0-9a-fA-F]{32}" + _T,
              validate=_has_digit_and_letter),
    _provider("sendgrid_api_key", "sendgrid", ("SG.",), r"SG\.[A-Za-z0-9=_\-.]{60,80}" + _T,
              validate=lambda v: "." in v[3:]),
    _provider("mailgun_key", "mailgun", ("key-", "pubkey-"), r"(?:pub)?key-[a-f0-9]{32}" + _T),
    _provider("mailchimp_key", "mailchimp", ("-us",), r"[a-f0-9]{32}-us\d{1,2}" + _T),
    _provider("sendinblue_key", "sendinblue", ("xkeysib-",),
              r"xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}" + _T),
    # --- payments
    _provider("stripe_key", "stripe", ("sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_"),
              r"[sr]k_(?:live|test)_[0-9A-Za-z]{16,247}" + _T + r"|whsec_[A-Za-z0-9+/=]{32,}"),
    _provider("square_token", "square", ("sq0atp-", "sq0csp-", "EAAA"),
              r"sq0(?:atp|csp)-[0-9A-Za-z_\-]{22,60}" + _T + r"|EAAA[0-9A-Za-z_\-]{60}" + _T),
    _provider("shopify_token", "shopify", ("shpat_", "shpca_", "shppa_", "shpss_"),
              r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}" + _T),
    _provider("flutterwave_key", "flutterwave", ("FLWSECK", "FLWPUBK"),
              r"FLW(?:SECK|PUBK)_TEST-[a-hA-H0-9]{12,32}(?:-X)?" + _T),
    # --- AI providers
    _provider("openai_api_key", "openai", ("sk-",),
              r"sk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_\-]{20,300}" + _T
              + r"|sk-[A-Za-z0-9_\-]{0,100}T3BlbkFJ[A-Za-z0-9_\-]{10,200}" + _T),
    _provider("anthropic_api_key", "anthropic", ("sk-ant-",),
              r"sk-ant-(?:api|admin|oat|sid)\d{2}-[A-Za-z0-9_\-]{32,300}" + _T),
    _provider("huggingface_token", "huggingface", ("hf_", "api_org_"),
              r"(?:hf|api_org)_[A-Za-z0-9]{30,40}" + _T),
    _provider("perplexity_api_key", "perplexity", ("pplx-",), r"pplx-[A-Za-z0-9]{40,60}" + _T),
    # --- SaaS and infrastructure
    _provider("age_secret_key", "age", ("AGE-SECRET-KEY-1",), r"AGE-SECRET-KEY-1[0-9A-Z]{58}"),
    _provider("alibaba_access_key", "alibaba", ("LTAI",), r"LTAI[A-Za-z0-9]{20}" + _T),
    _provider("atlassian_token", "atlassian", ("ATATT3",), r"ATATT3[A-Za-z0-9_\-=]{150,250}"),
    _provider("cloudflare_origin_ca_key", "cloudflare", ("v1.0-",),
              r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}" + _T),
    _provider("databricks_token", "databricks", ("dapi",), r"dapi[a-f0-9]{32}(?:-\d)?" + _T),
    _provider("digitalocean_token", "digitalocean", ("dop_v1_", "doo_v1_", "dor_v1_"),
              r"do[opr]_v1_[a-f0-9]{64}" + _T),
    _provider("doppler_token", "doppler", ("dp.pt.", "dp.st.", "dp.ct.", "dp.sa."),
              r"dp\.(?:pt|st|ct|sa|scim|audit)\.[A-Za-z0-9]{40,44}" + _T),
    _provider("dynatrace_token", "dynatrace", ("dt0c01.",),
              r"dt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}" + _T),
    _provider("easypost_token", "easypost", ("EZAK", "EZTK"), r"EZ[AT]K[A-Za-z0-9]{54}" + _T),
    _provider("frameio_token", "frameio", ("fio-u-",), r"fio-u-[A-Za-z0-9_=\-]{64}" + _T),
    _provider("grafana_token", "grafana", ("eyJrIjoi", "glc_", "glsa_"),
              r"eyJrIjoi[A-Za-z0-9+/_\-]{50,400}={0,3}|glc_[A-Za-z0-9+/]{32,400}={0,2}"
              r"|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}" + _T),
    _provider("harness_token", "harness", ("pat.", "sat."),
              r"(?:pat|sat)\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}" + _T),
    _provider("terraform_token", "hashicorp", (".atlasv1.",),
              r"[a-z0-9]{14}\.atlasv1\.[a-z0-9\-_=]{60,70}" + _T),
    _provider("heroku_token", "heroku", ("HRKU-",), r"HRKU-[A-Za-z0-9_\-]{60}" + _T),
    _provider("infracost_token", "infracost", ("ico-",), r"ico-[A-Za-z0-9]{32}" + _T),
    _provider("linear_api_key", "linear", ("lin_api_",), r"lin_api_[A-Za-z0-9]{40}" + _T),
    _provider("newrelic_key", "newrelic", ("NRAK-", "NRJS-", "NRII-"),
              r"NRAK-[A-Z0-9]{27}" + _T + r"|NRJS-[a-f0-9]{19}" + _T + r"|NRII-[A-Za-z0-9\-]{32}"),
    _provider("notion_token", "notion", ("ntn_",),
              r"ntn_\d{11}[A-Za-z0-9]{35}" + _T),
    _provider("openshift_token", "openshift", ("sha256~",), r"sha256~[A-Za-z0-9_\-]{43}" + _T),
    _provider("planetscale_token", "planetscale", ("pscale_",),
              r"pscale_(?:tkn|oauth|pw)_[A-Za-z0-9_=.\-]{32,64}" + _T),
    _provider("postman_token", "postman", ("PMAK-",), r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}" + _T),
    _provider("prefect_token", "prefect", ("pnu_",), r"pnu_[A-Za-z0-9]{36}" + _T),
    _provider("pulumi_token", "pulumi", ("pul-",), r"pul-[a-f0-9]{40}" + _T),
    _provider("readme_token", "readme", ("rdme_",), r"rdme_[a-z0-9]{70}" + _T),
    _provider("scalingo_token", "scalingo", ("tk-us-",), r"tk-us-[A-Za-z0-9_\-]{48}" + _T),
    _provider("sentry_token", "sentry", ("sntrys_", "sntryu_"),
              r"sntrys_eyJpYXQiO[A-Za-z0-9+/=_]{60,400}|sntryu_[a-f0-9]{64}" + _T),
    _provider("settlemint_token", "settlemint", ("sm_aat_", "sm_pat_", "sm_sat_"),
              r"sm_[aps]at_[A-Za-z0-9]{16}" + _T),
    _provider("shippo_token", "shippo", ("shippo_",), r"shippo_(?:live|test)_[a-fA-F0-9]{40}" + _T),
    _provider("typeform_token", "typeform", ("tfp_",), r"tfp_[A-Za-z0-9_.=\-]{55,65}" + _T),
    _provider("duffel_token", "duffel", ("duffel_",), r"duffel_(?:test|live)_[A-Za-z0-9_=\-]{43}" + _T),
    _provider("yandex_key", "yandex", ("AQVN", "YC"),
              r"AQVN[A-Za-z0-9_\-]{35,38}" + _T + r"|YC[A-Za-z0-9_\-]{38}" + _T),
    _provider("twitter_bearer_token", "twitter", ("AAAAAAAAAAAAAAAAAAAA",),
              r"A{22}[A-Za-z0-9%]{30,200}", validate=lambda v: len(set(v)) > 10),
    _provider("dropbox_token", "dropbox", ("sl.",), r"sl\.[A-Za-z0-9_\-]{130,160}" + _T),
    _provider("jwt", "jwt", ("eyJ",),
              r"eyJ[A-Za-z0-9_\-]{10,2000}={0,2}\.[A-Za-z0-9_\-]{4,10000}={0,2}\."
              r"[A-Za-z0-9_\-+/]{0,2000}={0,2}", validate=_jwt_ok,
              description="JSON Web Token with a valid base64url JSON header"),
]


# ------------------------------------------------------------------- structural detectors

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


# --------------------------------------------------------------- key-like name = value

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
_ASSIGN = re.compile(
    r"(?:\\?[\"'])?\s{0,4}+(?P<sep>:=|=>|==?|:|\s(?=\S))\s{0,4}+"
    r"(?:(?P<scheme>[Bb]earer|[Bb]asic|[Tt]oken)\s+)?"
    r"(?:\\?(?P<q>[\"'`])(?P<qv>[^\"'`\r\n]{1,1024}+)(?P=q)"
    r"|(?P<uv>[^\s\"'`,;&<>(){}\[\]|]{1,1024}+))"
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


# --------------------------------------------------------------------------- personal data

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


# ----------------------------------------------------------------------------- registry

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


# ----------------------------------------------------------------------- scanning values

def _as_set(detectors: DetectorSet | Iterable[Detector]) -> DetectorSet:
    return detectors if isinstance(detectors, DetectorSet) else DetectorSet(detectors)


def scan_text(text: str, detectors: DetectorSet | Iterable[Detector] = SECRETS) -> Findings:
    """Scans one string; returns its findings in position order (no cap on length)."""
    return _as_set(detectors).scan(text)


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SET_MEMBER = -1  # path part for "some member of a set": sets have no order to index by


def _child_path(path: str, key: PathPart) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if _IDENT.match(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key)}]"


class _Walker:
    __slots__ = ("budget", "dset", "max_chars", "max_depth", "out", "scan_keys")

    def __init__(self, dset: DetectorSet, max_chars: int, max_total: int, max_depth: int,
                 scan_keys: bool) -> None:
        self.dset, self.max_chars, self.budget = dset, max_chars, max_total
        self.max_depth, self.scan_keys, self.out = max_depth, scan_keys, Findings()

    def text(self, text: str, path: str, parts: tuple[PathPart, ...], in_key: bool) -> None:
        if len(text) < 6:
            return
        if self.budget <= 0:
            self.out.note(f"{path}: not scanned, total scan budget spent", parts)
            return
        limit = min(self.max_chars, self.budget)
        if len(text) > limit:
            self.out.note(f"{path}: scanned the first {limit} of {len(text)} characters", parts)
            text = text[:limit]
        self.budget -= len(text)
        found = self.dset.scan(text)
        for f in found:
            self.out.append(Finding(f.detector, f.category, f.start, f.end, path, in_key, parts))
        if found.truncated:
            self.out.note(f"{path}: {found.notes[0]}", parts)

    def walk(self, value: Any, path: str, parts: tuple[PathPart, ...], depth: int) -> None:
        if isinstance(value, str):
            self.text(value, path, parts, False)
        elif isinstance(value, bool) or value is None:
            return
        elif isinstance(value, int | float):
            if isinstance(value, int) and abs(value) >= 10**11:  # long enough to be a card
                self.text(str(value), path, parts, False)
        elif isinstance(value, bytes | bytearray):
            self.text(bytes(value).decode("utf-8", "surrogateescape"), path, parts, False)
        elif depth >= self.max_depth:
            self.out.note(f"{path}: nested deeper than {self.max_depth} levels, not scanned",
                          parts)
        elif isinstance(value, Mapping):
            for k, v in value.items():
                key = k if isinstance(k, str) else str(k)
                child, cparts = _child_path(path, key), (*parts, key)
                if self.scan_keys:
                    self.text(key, child, cparts, True)
                self.walk(v, child, cparts, depth + 1)
        elif isinstance(value, list | tuple):
            for i, v in enumerate(value):
                self.walk(v, _child_path(path, i), (*parts, i), depth + 1)
        elif isinstance(value, set | frozenset):
            for v in value:
                self.walk(v, f"{path}[*]", (*parts, _SET_MEMBER), depth + 1)
        else:
            self.out.note(f"{path}: a {type(value).__name__} cannot be scanned", parts)


def scan_value(
    value: Any,
    detectors: DetectorSet | Iterable[Detector] = SECRETS,
    *,
    root: str = "args",
    max_chars: int = MAX_CHARS,
    max_total_chars: int = MAX_TOTAL_CHARS,
    max_depth: int = MAX_DEPTH,
    scan_keys: bool = True,
) -> Findings:
    """Scans every string in a nested structure of mappings and sequences.

    Each finding's ``path`` says where (``args.body``, ``args.items[2].note``). Strings are
    scanned up to ``max_chars`` each and ``max_total_chars`` in all; anything not scanned
    (over a cap, too deep, an opaque object) sets ``truncated`` on the result with a note.
    Integers of 12+ digits are scanned as text (a card number passed as a number).
    """
    walker = _Walker(_as_set(detectors), max_chars, max_total_chars, max_depth, scan_keys)
    walker.walk(value, root, (), 0)
    return walker.out


# ------------------------------------------------------------------------------ redaction

def _redact_text(text: str, findings: Iterable[Finding], replacement: str) -> str:
    spans = sorted((f.start, f.end, f.detector, f.category) for f in findings)
    out: list[str] = []
    pos = 0
    for start, end, det, cat in spans:
        if end <= pos:
            continue
        start = max(start, pos)
        out.append(text[pos:start])
        out.append(replacement.format(detector=det, category=cat))
        pos = end
    out.append(text[pos:])
    return "".join(out)


# Markers in the redaction tree, distinct from any mapping key or list index.
_HERE, _IN_KEY, _MEMBERS, _WHOLE = object(), object(), object(), object()


def _rebuild(value: Any, node: dict[Any, Any], replacement: str) -> Any:
    if _WHOLE in node:
        return replacement.format(detector="unscanned", category="unscanned")
    here = node.get(_HERE, ())
    if isinstance(value, str):
        return _redact_text(value, here, replacement) if here else value
    if isinstance(value, bytes | bytearray):
        text = bytes(value).decode("utf-8", "surrogateescape")
        return _redact_text(text, here, replacement).encode("utf-8", "surrogateescape")
    if isinstance(value, int) and not isinstance(value, bool) and here:
        return _redact_text(str(value), here, replacement)
    if isinstance(value, Mapping):
        items = []
        for k, v in value.items():
            key = k if isinstance(k, str) else str(k)
            child = node.get(key)
            if child is None:
                items.append((k, v))
                continue
            keys = child.get(_IN_KEY, ())
            new_key = _redact_text(key, keys, replacement) if keys else k
            items.append((new_key, _rebuild(v, child, replacement)))
        return _same_mapping(value, items)
    if isinstance(value, list | tuple):
        new = [v if node.get(i) is None else _rebuild(v, node[i], replacement)
               for i, v in enumerate(value)]
        return type(value)(new) if type(value) in (list, tuple) else new
    if isinstance(value, set | frozenset) and _MEMBERS in node:
        return type(value)(_rebuild(v, node[_MEMBERS], replacement) for v in value)
    return value


def _same_mapping(value: Mapping[Any, Any], items: list[tuple[Any, Any]]) -> Mapping[Any, Any]:
    kind: Any = type(value)
    if kind is dict:
        return dict(items)
    try:
        return kind(items)  # type: ignore[no-any-return]  # FrozenDict and dict subclasses
    except TypeError:
        return dict(items)


def redact(
    value: Any,
    using: Iterable[Finding] | DetectorSet | Iterable[Detector] = SECRETS,
    replacement: str = DEFAULT_REPLACEMENT,
) -> Any:
    """Returns a copy of ``value`` with every finding replaced by a marker.

    Values a ``Findings`` lists as ``unscanned`` are replaced whole (detector ``unscanned``).

    Args:
        value: a string or a nested structure (as given to ``scan_value``).
        using: findings from ``scan_text`` / ``scan_value`` on this same value, or detectors to
            scan with first.
        replacement: the marker; ``{detector}`` and ``{category}`` are filled in.

    Untouched sub-structures are shared with the input, changed ones are rebuilt with the same
    container type (a FrozenDict stays a FrozenDict).
    """
    given: list[Any] = [using] if isinstance(using, Detector) else list(using)
    items: list[Finding]
    if given and not isinstance(given[0], Finding):
        dset = _as_set(given)
        items = scan_text(value, dset) if isinstance(value, str) else scan_value(value, dset)
    else:
        items = given
    source = items if isinstance(items, Findings) else using
    unscanned = source.unscanned if isinstance(source, Findings) else []
    if not items and not unscanned:
        return value
    if isinstance(value, str):
        if unscanned:
            return replacement.format(detector="unscanned", category="unscanned")
        return _redact_text(value, items, replacement)
    tree: dict[Any, Any] = {}
    for parts in unscanned:
        node = tree
        for part in parts:
            node = node.setdefault(_MEMBERS if part == _SET_MEMBER else part, {})
        node[_WHOLE] = True
    for f in items:
        node = tree
        for part in f.parts:
            node = node.setdefault(_MEMBERS if part == _SET_MEMBER else part, {})
        node.setdefault(_IN_KEY if f.in_key else _HERE, []).append(f)
    return _rebuild(value, tree, replacement)
