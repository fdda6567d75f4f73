"""Names of people (and places, companies): words compared as words.

A name is one to :data:`MAX_NAME_WORDS` words of letters (``Anne-Marie O'Neil``), folded:
NFKC, case-folded, ``'`` and ``-`` kept inside a word, a possessive ``'s`` dropped, one space
between words. A name is *in a request* when its words appear there in a row: ``Book a room for
Ann Lee and me`` names ``ann lee``, ``ann``, ``lee``, not ``ann smith`` (nor ``lee ann``, nor
``n lee``). Nothing tries to tell which words of a request are names — that would miss some —
so a policy asks "did the user write these words?", which fails closed.

A word that mixes scripts (a Cyrillic ``\\u043e`` inside Latin ``John``) is not read as a name, in
an argument (a rejected marker) or in a request (those words name nobody): a look-alike never
matches the name it imitates. A word in one script is a word like any other (``Zoë``, ``Łukasz``,
``Владимир``, ``王芳``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from functools import lru_cache

from callwarden.analysis.entities._text import _INVISIBLE_RE, _Found, _prep

__all__ = ["MAX_NAME_WORDS", "Phrases", "find_names", "name"]

MAX_NAME_WORDS = 8
_MAX_REQUEST_WORDS = 20_000  # words of a request kept to look names up in

# A word: letters and combining marks, with ' or - (or their typographic forms) between letters.
_WORD = re.compile(r"[^\W\d_](?:[^\W\d_]|['\u2019\-\u2010](?=[^\W\d_]))*")
_POSSESSIVE = re.compile(r"['\u2019]s$")
_SEPARATORS = re.compile(r"[\s.]*")  # what may stand between the words of a name
# Letters of these scripts are told apart; a word may hold one of them (plus marks).
_COMMON = frozenset({"COMMON", "INHERITED"})


def name(value: str) -> str | None:
    """One name in normal form; None when ``value`` is not one (no letters, digits or other
    signs in it, more than :data:`MAX_NAME_WORDS` words, a word of mixed scripts)."""
    text = _prep(value)
    if not text:
        return None
    words = _WORD.findall(text)
    if not words or len(words) > MAX_NAME_WORDS:
        return None
    # Only words, spaces and the punctuation names are written with (``Lee, Ann`` is not read:
    # the order of the words would change).
    words = [_POSSESSIVE.sub("", w) for w in words]
    if not _SEPARATORS.fullmatch(_WORD.sub("", text)) or any(not _one_script(w) for w in words):
        return None
    return " ".join(_fold(w) for w in words)


def find_names(text: str, strict: bool) -> _Found:
    """An argument is one name whole (``strict``); a free text names nobody by itself (a
    request's words are looked up with :class:`Phrases`)."""
    if not strict:
        return [], []
    found = name(text)
    return ([found], []) if found else ([], [text[:200]] if text.strip() else [])


class Phrases:
    """The words of a request, in order, folded as names are: ``"ann lee" in phrases`` when
    the request has those words in a row. Words of mixed scripts break the sequence."""

    __slots__ = ("_joined",)

    def __init__(self, text: str = "") -> None:
        self._joined = " " + " ".join(_words_of(text)) + " "

    def __contains__(self, value: object) -> bool:
        return isinstance(value, str) and bool(value) and f" {value} " in self._joined

    def __iter__(self) -> Iterator[str]:
        return iter(())  # every run of words is in it: there is no list to give

    def __len__(self) -> int:
        return 0 if self._joined == "  " else 1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Phrases) and other._joined == self._joined

    def __hash__(self) -> int:
        return hash(self._joined)

    def __repr__(self) -> str:
        return f"Phrases({self._joined.strip()[:60]!r})"


def _words_of(text: str) -> Iterator[str]:
    for count, m in enumerate(_WORD.finditer(text)):
        if count >= _MAX_REQUEST_WORDS:
            return
        word, start, end = _POSSESSIVE.sub("", m.group()), m.start(), m.end()
        # "|" is never in a folded word: a look-alike word, or one with an invisible character
        # in it or glued to it, splits the runs around it and names nobody.
        hidden = _INVISIBLE_RE.search(word) or (start and _INVISIBLE_RE.match(text[start - 1])) \
            or (end < len(text) and _INVISIBLE_RE.match(text[end]))
        yield "|" if hidden or not _one_script(word) else _fold(word)


def _fold(word: str) -> str:
    return word.casefold().replace("\u2019", "'").replace("\u2010", "-")


@lru_cache(maxsize=4096)
def _one_script(word: str) -> bool:
    scripts = set()
    for ch in word:
        if ch in "'\u2019-\u2010":
            continue
        script = _script(ch)
        if script not in _COMMON:
            scripts.add(script)
    return len(scripts) <= 1


def _script(ch: str) -> str:
    """The script of a letter as its Unicode name starts (LATIN, CYRILLIC, GREEK, CJK ...);
    marks are INHERITED."""
    if unicodedata.category(ch).startswith("M"):
        return "INHERITED"
    try:
        first = unicodedata.name(ch).split(" ", 1)[0]
    except ValueError:
        return "UNKNOWN"
    # Ideographs and the syllabaries written with them are one script here (王芳, 山田 たろう).
    return "CJK" if first in ("CJK", "HIRAGANA", "KATAKANA", "HANGUL") else first
