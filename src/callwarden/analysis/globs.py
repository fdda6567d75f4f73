"""The one glob dialect: every pattern a policy writes is read here.

Tool names (``match: {tool: mcp__github__*}``), argument patterns (``args: {branch: release/*}``),
permission strings (``Read(~/.ssh/**)``), ``paths:`` globs, ``shell:`` reads, writes, command
words and ``line:`` patterns, tool-profile names and remembered approval grants all mean the
same thing by the same pattern:

============  ===================================================================================
``*``         any run of characters except ``/`` (zero or more)
``**``        any run of characters, ``/`` included; a whole segment (``a/**/b``, ``a/**``,
              ``**/b``) also matches zero segments, so ``/a/**`` matches ``/a`` itself
``?``         one character except ``/``
``[abc]``     one character of the class (``[a-z]`` ranges; ``[!abc]`` or ``[^abc]`` negates;
              a ``]`` first in the class is a member); it never matches ``/``
``{a,b}``     either alternative (nested sets expand; at most 256 alternatives); braces
              without a top-level comma are literal, like the shell's
============  ===================================================================================

A pattern with no ``/`` in it has no segments to keep to: it is matched against the text as a
whole and its ``*``, ``?`` and classes match ``/`` too (``*drop table*`` matches a whole
command line, ``*`` any value). Where the text is a path (``paths:``, ``shell:`` reads and
writes, ``Read(...)``), such a pattern is matched against the file name at any depth instead
(``*.pem``, ``.env``).

Everything else is literal; write ``[*]``, ``[?]``, ``[[]`` or ``[{]`` for a literal special
character. Matching is case-sensitive everywhere unless a condition's ``ignore_case`` /
``case_insensitive`` option says otherwise, and wildcards match names that start with ``.``.
A pattern this module cannot read (an unclosed ``[``, an empty range, too many alternatives)
raises :class:`GlobError` when the policy loads: it is never silently taken as a literal.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable
from typing import Any

from callwarden.exceptions import ConfigError

__all__ = [
    "GlobError",
    "GlobSet",
    "GlobTable",
    "check_glob",
    "compile_glob",
    "expand_braces",
    "glob_intersects",
    "glob_to_regex",
    "is_glob",
    "literal_prefix",
]

MAX_ALTERNATIVES = 256
_WILD = frozenset("*?[")

_Charset = tuple[bool, frozenset[str], tuple[tuple[str, str], ...]]  # (negated, chars, ranges)
_Token = tuple[Any, ...]
_NFA = tuple[list[list[tuple[_Charset | None, int]]], int]
_CS_NOSLASH: _Charset = (True, frozenset("/"), ())
_CS_NODOT: _Charset = (True, frozenset("/."), ())
_CS_ANY: _Charset = (True, frozenset(), ())
_CS_SLASH: _Charset = (False, frozenset("/"), ())


class GlobError(ConfigError):
    """A pattern the glob dialect cannot read; the policy does not load."""


def is_glob(text: str) -> bool:
    """True when ``text`` is a pattern rather than a literal: it has ``*``, ``?``, ``[`` or a
    ``{a,b}`` brace set."""
    if not _WILD.isdisjoint(text):
        return True
    return "{" in text and len(expand_braces(text)) > 1


def check_glob(glob: str) -> None:
    """Checks that ``glob`` is a pattern of the dialect.

    Raises:
        GlobError: an unclosed ``[``, an empty class, or more than 256 ``{a,b}`` alternatives.
    """
    for alternative in expand_braces(glob):
        _tokenize(alternative, strict=True)


def expand_braces(glob: str) -> list[str]:
    """The alternatives of a pattern's ``{a,b}`` sets (the pattern itself when it has none).

    Raises:
        GlobError: more than 256 alternatives.
    """
    out = _expand(glob)
    return out


def _expand(pattern: str) -> list[str]:
    start = pattern.find("{")
    while start != -1:
        depth = 0
        commas: list[int] = []
        for j in range(start, len(pattern)):
            ch = pattern[j]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    if not commas:
                        break  # `{x}`: literal braces, as in the shell
                    bounds = [start, *commas, j]
                    head, tail = pattern[:start], pattern[j + 1:]
                    out: list[str] = []
                    for a, b in itertools.pairwise(bounds):
                        for rest in _expand(head + pattern[a + 1:b] + tail):
                            out.append(rest)
                            if len(out) > MAX_ALTERNATIVES:
                                raise GlobError(
                                    f"{pattern!r} has more than {MAX_ALTERNATIVES} {{a,b}} "
                                    "alternatives", hint="split it into several patterns")
                    return out
            elif ch == "," and depth == 1:
                commas.append(j)
        start = pattern.find("{", start + 1)
    return [pattern]


def _tokenize(glob: str, *, strict: bool = False) -> list[_Token]:
    """Tokens of one brace-free alternative: ``("l", ch)`` literal, ``("*",)`` within a
    segment, ``("**",)`` a whole segment, ``("any",)`` a ``**`` inside a segment, ``("?",)``,
    and ``("[", negated, chars, ranges)``."""
    tokens: list[_Token] = []
    i, n = 0, len(glob)
    while i < n:
        ch = glob[i]
        if ch == "*":
            j = i
            while j < n and glob[j] == "*":
                j += 1
            if j - i >= 2:
                whole = (i == 0 or glob[i - 1] == "/") and (j == n or glob[j] == "/")
                tokens.append(("**",) if whole else ("any",))
            else:
                tokens.append(("*",))
            i = j
        elif ch == "?":
            tokens.append(("?",))
            i += 1
        elif ch == "[":
            j = i + 1
            negated = j < n and glob[j] in "!^"
            if negated:
                j += 1
            close = glob.find("]", j + 1 if j < n and glob[j] == "]" else j)
            if close == -1:
                if strict:
                    raise GlobError(f"{glob!r} has a '[' that is never closed",
                                    hint="write [[] for a literal '['")
                tokens.append(("l", ch))
                i += 1
                continue
            body = glob[j:close]
            chars: set[str] = set()
            ranges: list[tuple[str, str]] = []
            k = 0
            while k < len(body):
                if k + 2 < len(body) and body[k + 1] == "-":
                    if strict and body[k] > body[k + 2]:
                        raise GlobError(f"{glob!r} has the empty range {body[k:k + 3]!r}",
                                        hint="write ranges low to high, e.g. [a-z]")
                    ranges.append((body[k], body[k + 2]))
                    k += 3
                else:
                    chars.add(body[k])
                    k += 1
            tokens.append(("[", negated, frozenset(chars), tuple(ranges)))
            i = close + 1
        else:
            tokens.append(("l", ch))
            i += 1
    return tokens


def _class_regex(token: _Token, flat: bool) -> str:
    _, negated, chars, ranges = token
    parts = [re.escape(c) for c in sorted(chars)]
    parts += [f"{re.escape(a)}-{re.escape(b)}" for a, b in ranges]
    if flat:
        return ("[^" if negated else "[") + "".join(parts) + "]"
    if negated:
        return "[^/" + "".join(parts) + "]"
    return "(?!/)[" + "".join(parts) + "]"


def _glob_atoms(glob: str) -> list[list[str]]:
    """Regex atoms of each ``{a,b}`` alternative of a glob (one atom per glob token)."""
    flat = "/" not in glob
    out: list[list[str]] = []
    for alt in expand_braces(glob):
        tokens = _tokenize(alt)
        parts: list[str] = []
        k = 0
        while k < len(tokens):
            token = tokens[k]
            kind = token[0]
            if kind == "l":
                parts.append(re.escape(token[1]))
            elif kind == "?":
                parts.append("." if flat else "[^/]")
            elif kind == "*":
                parts.append(".*" if flat else "[^/]*")
            elif kind == "any":
                parts.append(".*")
            elif kind == "[":
                parts.append(_class_regex(token, flat))
            elif k + 1 < len(tokens):  # a whole-segment ** followed by "/"
                parts.append("(?:.*/)?")
                k += 1
            else:  # a trailing whole-segment **
                if parts and parts[-1] == "/":
                    parts.pop()
                    parts.append("(?:/.*)?")
                else:
                    parts.append(".*")
            k += 1
        out.append(parts)
    return out


def glob_to_regex(glob: str) -> str:
    """Translates one glob into a regex for ``fullmatch`` (``re.DOTALL``)."""
    out = ["".join(atoms) for atoms in _glob_atoms(glob)]
    return out[0] if len(out) == 1 else "(?:" + "|".join(out) + ")"


def literal_prefix(glob: str) -> str:
    """The directory part of ``glob`` before its first wildcard (``/a/b`` for ``/a/b/*.py``)."""
    cut = len(glob)
    for ch in "*?[{":
        i = glob.find(ch)
        if i != -1 and i < cut:
            cut = i
    if cut == len(glob):
        return glob
    return glob[: glob.rfind("/", 0, cut)] or "/"


def compile_glob(glob: str, *, ignore_case: bool = False) -> Callable[[str], bool]:
    """A test of one glob against a whole string; a literal is compared for equality.

    Raises:
        GlobError: the pattern is not of the dialect.
    """
    check_glob(glob)
    if not ignore_case and not is_glob(glob):
        return glob.__eq__
    flags = re.DOTALL | (re.IGNORECASE if ignore_case else 0)
    return re.compile(glob_to_regex(glob), flags).fullmatch  # type: ignore[return-value]


class GlobSet:
    """Several globs tested as one: a set of literals plus one combined regex.

    Raises:
        GlobError: a pattern is not of the dialect.
    """

    __slots__ = ("globs", "literals", "regex")

    def __init__(self, globs: Iterable[str], *, ignore_case: bool = False) -> None:
        self.globs = tuple(globs)
        for glob in self.globs:
            check_glob(glob)
        self.literals = frozenset() if ignore_case else frozenset(
            g for g in self.globs if not is_glob(g))
        patterns = [glob_to_regex(g) for g in self.globs if g not in self.literals]
        flags = re.DOTALL | (re.IGNORECASE if ignore_case else 0)
        self.regex = re.compile("|".join(f"(?:{p})" for p in patterns), flags) \
            if patterns else None

    def __call__(self, value: str) -> bool:
        if value in self.literals:
            return True
        return self.regex is not None and self.regex.fullmatch(value) is not None

    def __bool__(self) -> bool:
        return bool(self.globs)

    def __repr__(self) -> str:
        return f"GlobSet({list(self.globs)!r})"


def _trie_regex(entries: Iterable[tuple[list[str], int]]) -> str:
    """One regex for many globs, their common prefixes shared, so that a path is compared
    with each distinct next character once instead of once per glob. The empty group
    ``(?P<gN>)`` at the end of entry N tells which one matched (``match.lastgroup``); each
    ``{a,b}`` alternative of a glob is an entry of its own."""
    trie: dict[str, Any] = {}
    for atoms, index in entries:
        node = trie
        for atom in atoms:
            node = node.setdefault(atom, {})
        node.setdefault("", index)

    def emit(node: dict[str, Any]) -> str:
        parts = [f"(?P<g{child}>)" if atom == "" else atom + emit(child)
                 for atom, child in node.items()]
        return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"

    return emit(trie) if trie else r"(?!)"


class GlobTable:
    """Many absolute path globs, each with a text to report, and ``!`` exemptions, matched in
    one pass; also tells whether a glob *argument* can name a path a policy glob matches.

    Args:
        patterns: ``(absolute glob, text to report, is_exemption)`` triples.
        case_insensitive: fold case for every match.

    Raises:
        GlobError: a pattern is not of the dialect.
    """

    __slots__ = ("_basenames", "_basenames_lower", "_case", "_exempt", "_nfas", "_patterns",
                 "_regex", "_regex_nocase", "_texts")

    def __init__(self, patterns: Iterable[tuple[str, str, bool]], *,
                 case_insensitive: bool = False) -> None:
        self._case = case_insensitive
        self._basenames: dict[str, str] = {}
        self._basenames_lower: dict[str, str] = {}
        self._patterns: list[tuple[str, str]] = []
        exempt: list[str] = []
        texts: list[str] = []
        entries: list[tuple[list[str], int]] = []
        for glob, text, negate in patterns:
            check_glob(glob)
            if negate:
                exempt.append(glob_to_regex(glob))
                continue
            self._patterns.append((glob, text))
            name = glob[4:] if glob.startswith("/**/") else None
            if name and "/" not in name and not is_glob(name):
                # "**/name" is a dict lookup on the last segment, not a regex scan.
                self._basenames.setdefault(name.lower() if case_insensitive else name, text)
                self._basenames_lower.setdefault(name.lower(), text)
                continue
            for atoms in _glob_atoms(glob):
                entries.append((atoms, len(texts)))
                texts.append(text)
        self._texts = texts
        source = _trie_regex(entries)
        flags = re.IGNORECASE | re.DOTALL if case_insensitive else re.DOTALL
        self._regex = re.compile(source, flags)
        self._regex_nocase = (self._regex if case_insensitive
                              else re.compile(source, re.IGNORECASE | re.DOTALL))
        exempt_src = "|".join(exempt)
        self._exempt = (re.compile(exempt_src, flags) if exempt else None,
                        re.compile(exempt_src, re.IGNORECASE | re.DOTALL) if exempt else None)
        # Per case mode: each pattern's glob, text, literal ends, and NFA (built when needed).
        # The ends of the table's own mode are found now, while the policy loads, so that a
        # decision's deadline does not pay for them.
        self._nfas: dict[bool, list[list[Any]]] = {case_insensitive: [
            [g.lower() if case_insensitive else g, t,
             _literal_ends(g.lower() if case_insensitive else g), None]
            for g, t in self._patterns]}

    def __bool__(self) -> bool:
        return bool(self._patterns)

    @property
    def globs(self) -> list[tuple[str, str]]:
        """The (glob, text) pairs that are not exemptions."""
        return list(self._patterns)

    def match(self, path: str, nocase: bool = False) -> str | None:
        """Returns the text of a glob matching ``path`` (absolute, canonical), or None."""
        nocase = nocase or self._case
        text: str | None = None
        if self._basenames:
            base = path[path.rfind("/") + 1:]
            text = (self._basenames_lower.get(base.lower()) if nocase
                    else self._basenames.get(base))
        if text is None:
            m = (self._regex_nocase if nocase else self._regex).fullmatch(path)
            if m is None:
                return None
            text = self._texts[int((m.lastgroup or "g0")[1:])]
        if self.exempt(path, nocase):
            return None
        return text

    def exempt(self, path: str, nocase: bool = False) -> bool:
        """Whether an ``!`` exemption covers ``path``."""
        regex = self._exempt[1 if nocase or self._case else 0]
        return regex is not None and regex.fullmatch(path) is not None

    def intersects(self, glob: str, nocase: bool = False, dotfiles: bool = False) -> str | None:
        """Returns the text of a glob that can match a path ``glob`` also matches, or None."""
        nocase = nocase or self._case
        entries = self._nfas.get(nocase)
        if entries is None:
            entries = [[g.lower() if nocase else g, t, None, None] for g, t in self._patterns]
            self._nfas[nocase] = entries
        glob = glob.lower() if nocase else glob
        ends = _literal_ends(glob)
        mine: _NFA | None = None
        for entry in entries:
            if entry[2] is None:
                entry[2] = _literal_ends(entry[0])
            if not _ends_meet(ends, entry[2]):
                continue  # no path can start or end as both must: no need to walk them
            if entry[3] is None:
                entry[3] = _glob_nfa(entry[0], False)
            if mine is None:
                mine = _glob_nfa(glob, not dotfiles)
            if _nfa_intersect(mine, entry[3]):
                return str(entry[1])
        return None


# -- can two globs match the same path? ---------------------------------------------------


def glob_intersects(left: str, right: str, *, dotfiles: bool = True) -> bool:
    """True when some path matches both globs.

    Args:
        left: the glob a tool was given (an argument).
        right: a policy glob.
        dotfiles: whether wildcards in ``left`` match names starting with ``.`` (shells and
            glob libraries skip them by default; a policy glob always matches them).
    """
    return _nfa_intersect(_glob_nfa(left, not dotfiles), _glob_nfa(right, False))


def _literal_ends(glob: str) -> list[tuple[str, str]]:
    """Per ``{a,b}`` alternative, the text every matching path starts with and ends with (the
    literal characters before the first wildcard and after the last; a ``/`` next to a ``**``
    segment is left out, since ``a/**`` matches ``a`` and ``**/b`` matches ``b``)."""
    out = []
    for alt in expand_braces(glob):
        tokens = _tokenize(alt)
        i = 0
        while i < len(tokens) and tokens[i][0] == "l":
            i += 1
        prefix = "".join(t[1] for t in tokens[:i])
        if i < len(tokens) and tokens[i][0] == "**" and prefix.endswith("/"):
            prefix = prefix[:-1]
        j = len(tokens)
        while j > 0 and tokens[j - 1][0] == "l":
            j -= 1
        suffix = "".join(t[1] for t in tokens[j:])
        if j > 0 and tokens[j - 1][0] == "**" and suffix.startswith("/"):
            suffix = suffix[1:]
        out.append((prefix, suffix))
    return out


def _ends_meet(left: list[tuple[str, str]], right: list[tuple[str, str]]) -> bool:
    """Whether some alternatives of two globs can start and end alike: a path matching both
    starts with both prefixes (one extends the other) and ends with both suffixes."""
    return any((p1.startswith(p2) or p2.startswith(p1)) and (s1.endswith(s2) or s2.endswith(s1))
               for p1, s1 in left for p2, s2 in right)


def _glob_nfa(glob: str, dot_rule: bool) -> _NFA:
    trans: list[list[tuple[_Charset | None, int]]] = [[]]

    def new() -> int:
        trans.append([])
        return len(trans) - 1

    start_states = []
    accepts = []
    flat = "/" not in glob
    for alt in expand_braces(glob):
        tokens = _tokenize(alt)
        cur = new()
        start_states.append(cur)
        seg_start = True
        before_slash: int | None = None
        k = 0
        while k < len(tokens):
            token = tokens[k]
            kind = token[0]
            first = _CS_NODOT if dot_rule and seg_start else _CS_ANY if flat else _CS_NOSLASH
            if kind == "l":
                nxt = new()
                trans[cur].append(((False, frozenset(token[1]), ()), nxt))
                if token[1] == "/":
                    before_slash = cur
                cur, seg_start = nxt, token[1] == "/"
            elif kind in ("?", "["):
                nxt = new()
                if kind == "[":
                    negated, chars = token[1], token[2]
                    cs: _Charset = (negated, chars, token[3]) if flat else (
                        negated, chars | {"/"} if negated else chars - {"/"}, token[3])
                else:
                    cs = first
                trans[cur].append((cs, nxt))
                cur, seg_start = nxt, False
            elif kind == "*":
                loop, end = new(), new()
                trans[cur] += [(None, end), (first, loop)]
                trans[loop] += [(_CS_ANY if flat else _CS_NOSLASH, loop), (None, end)]
                cur, seg_start = end, False
            elif kind == "any":
                loop, end = new(), new()
                trans[cur] += [(None, end), (_CS_ANY, loop)]
                trans[loop] += [(_CS_ANY, loop), (None, end)]
                cur, seg_start = end, False
            else:
                seg_first = _CS_NODOT if dot_rule else _CS_NOSLASH
                loop, end = new(), new()
                trans[cur].append((seg_first, loop))
                trans[loop] += [(_CS_NOSLASH, loop), (_CS_SLASH, cur)]
                if k + 1 < len(tokens):
                    trans[cur].append((None, end))
                    k += 1
                    seg_start = True
                else:
                    trans[loop].append((None, end))
                    if before_slash is not None:
                        trans[before_slash].append((None, end))
                    else:
                        trans[cur].append((None, end))
                cur = end
            k += 1
        accepts.append(cur)
    accept = new()
    trans[0] += [(None, s) for s in start_states]
    for a in accepts:
        trans[a].append((None, accept))
    return trans, accept


def _cs_has(cs: _Charset, ch: str) -> bool:
    negated, chars, ranges = cs
    inside = ch in chars or any(a <= ch <= b for a, b in ranges)
    return inside != negated


def _cs_meet(a: _Charset, b: _Charset) -> bool:
    if a[0] and b[0]:
        return True  # two complements of finite sets always share a character
    if a[0]:
        a, b = b, a
    if any(_cs_has(b, ch) for ch in a[1]):
        return True
    for lo, hi in a[2]:
        if ord(hi) - ord(lo) > 512:
            return True
        if any(_cs_has(b, chr(c)) for c in range(ord(lo), ord(hi) + 1)):
            return True
    return False


_MEETS: dict[tuple[_Charset, _Charset], bool] = {}  # a policy has few distinct charsets


def _nfa_intersect(left: _NFA, right: _NFA) -> bool:
    ta, acc_a = left
    tb, acc_b = right
    seen: set[tuple[int, int]] = set()
    stack = [(0, 0)]
    meets = _MEETS
    while stack:
        pair = stack.pop()
        if pair in seen:
            continue
        seen.add(pair)
        sa, sb = pair
        if sa == acc_a and sb == acc_b:
            return True
        out_a, out_b = ta[sa], tb[sb]
        for cs, t in out_a:
            if cs is None:
                stack.append((t, sb))
        for cs, t in out_b:
            if cs is None:
                stack.append((sa, t))
        for ca, t1 in out_a:
            if ca is None:
                continue
            for cb, t2 in out_b:
                if cb is None:
                    continue
                key = (ca, cb)
                meet = meets.get(key)
                if meet is None:
                    if len(meets) > 65536:
                        meets.clear()
                    meet = meets[key] = _cs_meet(ca, cb)
                if meet:
                    stack.append((t1, t2))
    return False
