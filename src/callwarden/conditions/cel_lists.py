"""The ``lists`` variable of a CEL condition, built per call from what the call can reach.

Converting a named list into CEL values costs about a microsecond an item, and a map list's
entry several: passed whole, a map of 10,000 entries costs ~100 ms a call. So each list is
passed as the few of its items or entries an expression could possibly read:

- a set list used only as ``x in lists.name`` (the analysis in :mod:`.cel` decides): the
  strings of the call and the expression's literals that are items;
- a map list used only by key — ``x in lists.files``, ``lists.files[x]`` (then anything of the
  entry: ``.name``, ``size(...)``) and ``lists.files.key`` — where every key ``x`` is a string
  literal or a path into the call (``args.file_id``, ``request.quoted[0]``, a name bound by
  ``.all(f, ...)`` over such a path): the entries whose keys are among the call's strings and
  the expression's literals.

A key computed any other way (``args.id.lowerAscii()``, ``lists.other[x].parent``), a map used
as a whole (``size(lists.files)``, ``lists.files.exists(...)``) or arguments too deep to walk
pass the whole list: slower, never different. A missing key is what it is in CEL either way:
``x in lists.files`` is false, ``lists.files[x]`` an error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["ListBinder", "keyed_maps"]

# Tokens after which a path is the whole left operand of ``in`` (they bind looser).
_BEFORE_OPERAND = frozenset({None, "(", "[", "{", ",", "&&", "||", "?", ":"})
# Tokens that may follow ``lists.name`` when it is the whole right operand of ``in``.
_AFTER_OPERAND = frozenset({None, ")", "]", "}", ",", "&&", "||", "?", ":", "==", "!=", "<",
                            "<=", ">", ">=", "in"})
_BINDING_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})

Tokens = Sequence[tuple[str, str]]  # (kind, text), as cel._Token


def keyed_maps(tokens: Tokens, maps: frozenset[str], roots: frozenset[str],
               cel: Any) -> tuple[frozenset[str], frozenset[str]]:
    """Which map lists the expression reads only by keys taken from the call or literals.

    Args:
        tokens: the expression's tokens.
        maps: the names of the policy's map lists.
        roots: the variables whose values are in the call (all but ``lists``).
        cel: the ``cel`` module, to read string literals.

    Returns:
        (the maps that can be narrowed, the keys the expression names as ``lists.m.key``).
    """
    text: list[str | None] = [t for _, t in tokens]
    trusted = _call_bound_names(tokens, text, roots)
    names = roots | trusted
    narrowed: set[str] = set()
    refused: set[str] = set()
    selected: set[str] = set()
    for i, (kind, word) in enumerate(tokens):
        if kind != "id" or word != "lists" or (i and text[i - 1] == "."):
            continue
        name, j = _list_name(tokens, text, i, cel)
        if name is None:
            return frozenset(), frozenset()  # ``lists`` read whole: nothing is narrowed
        if name not in maps:
            continue
        ok = False
        if _at(text, j) == "[":
            end = _path_end(tokens, text, j + 1, names)
            ok = end is not None and _at(text, end) == "]"
        elif _at(text, j) == "." and _at_kind(tokens, j + 1) == "id" \
                and _at(text, j + 2) != "(":
            ok = True
            selected.add(tokens[j + 1][1])
        elif i > 1 and text[i - 1] == "in" and _at(text, j) in _AFTER_OPERAND:
            ok = _operand_before(tokens, text, i - 1, names)
        (narrowed if ok else refused).add(name)
    return frozenset(narrowed - refused), frozenset(selected)


def _at(text: list[str | None], i: int) -> str | None:
    return text[i] if 0 <= i < len(text) else None


def _at_kind(tokens: Tokens, i: int) -> str | None:
    return tokens[i][0] if 0 <= i < len(tokens) else None


def _list_name(tokens: Tokens, text: list[str | None], i: int,
               cel: Any) -> tuple[str | None, int]:
    """The list named after ``lists`` at ``i`` (``lists.x``, ``lists["x"]``), and the index
    after it."""
    if _at(text, i + 1) == "." and _at_kind(tokens, i + 2) == "id":
        return tokens[i + 2][1], i + 3
    if _at(text, i + 1) == "[" and _at_kind(tokens, i + 2) == "str" and _at(text, i + 3) == "]":
        value = cel.evaluate(tokens[i + 2][1])
        if isinstance(value, str):
            return value, i + 4
    return None, i + 1


def _path_end(tokens: Tokens, text: list[str | None], a: int,
              names: frozenset[str]) -> int | None:
    """The index after a key read from the call starting at ``a``: a string literal, or a
    variable of ``names`` followed by fields and literal subscripts; None if there is none."""
    kind = _at_kind(tokens, a)
    if kind == "str":
        return a + 1
    if kind != "id" or text[a] not in names or _at(text, a + 1) == "(":
        return None
    i = a + 1
    while True:
        if _at(text, i) == "." and _at_kind(tokens, i + 1) == "id" and _at(text, i + 2) != "(":
            i += 2
        elif _at(text, i) == "[" and _at_kind(tokens, i + 1) in ("str", "num") \
                and _at(text, i + 2) == "]":
            i += 3
        else:
            return i


def _starts_at(tokens: Tokens, text: list[str | None], end: int,
               names: frozenset[str]) -> int | None:
    """Where a key read from the call that ends right before ``end`` starts, if one does."""
    for a in range(end - 1, max(-1, end - 64), -1):
        if _at(text, a - 1) != "." and _path_end(tokens, text, a, names) == end:
            return a
    return None


def _operand_before(tokens: Tokens, text: list[str | None], end: int,
                    names: frozenset[str]) -> bool:
    """Whether the tokens before ``end`` (an ``in``) are a key read from the call, whole."""
    a = _starts_at(tokens, text, end, names)
    return a is not None and _at(text, a - 1) in _BEFORE_OPERAND


def _call_bound_names(tokens: Tokens, text: list[str | None],
                      roots: frozenset[str]) -> frozenset[str]:
    """Names bound by a loop macro (``.all(f, ...)``) over a path into the call, wherever
    they are bound: their values are in the call too."""
    macros = []
    for i, (kind, word) in enumerate(tokens):
        if kind != "id" or word not in _BINDING_MACROS or _at(text, i - 1) != "." \
                or _at(text, i + 1) != "(" or _at_kind(tokens, i + 2) != "id" \
                or _at(text, i + 3) != ",":
            continue
        bound = [tokens[i + 2][1]]
        if _at_kind(tokens, i + 4) == "id" and _at(text, i + 5) == ",":
            bound.append(tokens[i + 4][1])  # ``.all(k, v, ...)``
        macros.append((i - 1, bound))
    trusted: frozenset[str] = frozenset()
    for _ in range(len(macros) + 1):  # a name bound over a trusted name is trusted too
        good: set[str] = set()
        bad: set[str] = set()
        for end, bound in macros:
            source = _starts_at(tokens, text, end, roots | trusted) is not None
            (good if source else bad).update(bound)
        if good - bad == trusted:
            break
        trusted = frozenset(good - bad)
    return trusted


class ListBinder:
    """Builds ``lists`` for one call (see the module docstring).

    Args:
        lists: name -> the named list (a set of strings, or a mapping for a map list), for
            the lists the expression reads.
        member_sets: set lists to narrow to the candidates (used only as ``x in lists.n``).
        keyed: map lists to narrow to the candidates' entries (see :func:`keyed_maps`).
        literals: the expression's string literals (and ``lists.m.key`` keys).
    """

    __slots__ = ("_maps", "_sets", "_values", "_whole")

    def __init__(self, lists: Mapping[str, Any], member_sets: frozenset[str],
                 keyed: frozenset[str], literals: frozenset[str]) -> None:
        maps = {n for n, v in lists.items() if isinstance(v, Mapping)}
        sets = sorted(member_sets & (lists.keys() - maps))
        keyed_maps = sorted(keyed & maps)
        self._whole: dict[str, Any] = {
            n: _whole(v) for n, v in lists.items() if n not in sets and n not in keyed_maps}
        # Strings that need no call to exist: literals, the items (keys and text values) of
        # the lists passed whole.
        static = set(literals)
        for value in self._whole.values():
            static.update(_strings(value))
        self._maps = tuple((n, lists[n], {k: _row(lists[n][k]) for k in sorted(literals)
                                          if k in lists[n]}) for n in keyed_maps)
        self._sets = tuple((n, members, tuple(static & members))
                           for n in sets for members in (_members(lists[n]),))
        # A map's entries may hold strings a set membership tests: those of each picked entry.
        self._values = bool(self._sets and self._maps)

    @property
    def sets(self) -> tuple[tuple[str, frozenset[str], tuple[str, ...]], ...]:
        """The set lists narrowed per call: (name, items, the static strings among them)."""
        return self._sets

    @property
    def maps(self) -> tuple[str, ...]:
        """The names of the map lists narrowed per call."""
        return tuple(name for name, _, _ in self._maps)

    @property
    def narrows(self) -> bool:
        """Whether any list is narrowed (the call's strings are then wanted)."""
        return bool(self._maps or self._sets)

    def bind(self, candidates: set[str] | None) -> dict[str, Any]:
        """``lists`` for a call whose strings (map keys too) are ``candidates``, or None when
        they are not all known: every list is then passed whole."""
        lists = dict(self._whole)
        if candidates is None:
            lists.update((n, entries) for n, entries, _ in self._maps)
            lists.update((n, tuple(members)) for n, members, _ in self._sets)
            return lists
        if self._values:
            candidates = set(candidates)
        for name, entries, fixed in self._maps:
            picked = dict(fixed)
            picked.update((s, _row(entries[s])) for s in candidates if s in entries)
            lists[name] = picked
            if self._values:
                for entry in picked.values():
                    candidates.update(_strings(entry))
        for name, members, hits in self._sets:
            lists[name] = [*hits, *(s for s in candidates if s in members)]
        return lists


def _row(entry: Any) -> Any:
    """A map entry as CEL converts it fastest: a plain dict (a read-only view costs 30% more)."""
    return dict(entry) if isinstance(entry, Mapping) else entry


def _whole(value: Any) -> Any:
    """A list as CEL receives it whole: a tuple of items, or a map of plain dicts."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Mapping):
        return {k: _row(v) for k, v in value.items()}
    return tuple(value)  # a NamedList iterates in declaration order


def _members(value: Any) -> frozenset[str]:
    return frozenset((value,) if isinstance(value, str) else value)


def _strings(value: Any) -> set[str]:
    """The strings of a list passed whole or of a map entry: items, keys and text values."""
    if isinstance(value, Mapping):
        out = {k for k in value if isinstance(k, str)}
        for v in value.values():
            out.update(_strings(v) if isinstance(v, Mapping) else
                       (v,) if isinstance(v, str) else ())
        return out
    return {v for v in value if isinstance(v, str)}
