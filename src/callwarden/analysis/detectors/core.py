"""Detectors and detector sets: finding sensitive text fast, and screening whole payloads.

A :class:`Detector` finds one kind of sensitive text (an AWS key, a JWT, a card number ...).
A :class:`DetectorSet` compiles several into one scanner with a cheap prefilter: every
detector names the literal keywords its matches must contain, the set folds them into one
anchor regex keyed on each keyword's rarest character, and a detector only runs when one of
its keywords occurs. Benign text therefore costs one C-level pass plus a few substring tests.

The JSON screens here are RE2 patterns that find, in the JSON encoding of many payloads at
once, the ones some detector could match (see ``DetectorSet.json_screen``).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Literal

from callwarden.analysis.detectors.disguises import _B64_MIN, _INVISIBLE_RE, _b64_blobs, _fold
from callwarden.analysis.detectors.findings import Finding, Findings, Span
from callwarden.exceptions import CallwardenError

Category = Literal["secret", "pii", "custom"]


MAX_CANDIDATES = 20_000  # per detector and string, bounds the Python-level work on hostile text


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
