"""Named lists: the policy file's ``lists:`` section, and how conditions refer to them.

A policy declares each list once and every condition can use it by name. A list is a set of
strings, or a map from keys (ids) to attributes::

    lists:
      contacts: {file: contacts.txt}          # one item per line, relative to the policy file
      payees: [acme, globex]                  # inline items
      domains: {items: [example.com], file: more-domains.txt}   # both, file items last
      vendors: {file: vendors.json}           # a JSON array of strings
      files:                                  # a map: key -> {attribute: value}
        map: {f-1: {name: Q3 report.pdf, owner: alice}}
      folders: {file: folders.csv, key: id}   # a CSV file with a header row: a map, one entry
                                              # per row, keyed by the column key: names
      projects: {file: projects.json}         # a JSON object of objects (or, with key:, a JSON
                                              # array of objects)

In a CEL condition a list is ``lists.<name>`` (``args.to in lists.contacts``; ``in`` of a map
tests its keys, ``lists.files[args.file_id].name`` reads an entry). In the config of any other
condition, an item written ``{list: <name>}`` stands for the named list's items, or a map's
keys, see :func:`resolve_items`.

A file is read by its name: ``.csv`` and ``.json`` as above, anything else one item per line.
Keys are unique non-empty strings; attribute values are strings, numbers or booleans (a CSV
cell is a string, trimmed). A duplicate key, a row without its key, a nested or null value, or
items and map entries in one list are errors naming the list.

A list file must lie inside the policy's folder (or below it), or inside the folder of a
policy it extends: ``../`` escapes, absolute paths elsewhere and symlinks pointing out are
refused, so a policy cannot make the loader read (and report items of) arbitrary files. The
list files of one policy together hold at most ``caps.MAX_LIST_BYTES``.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeAlias

from callwarden.conditions.base import CompileEnv
from callwarden.exceptions import ConfigError
from callwarden.policyfile.caps import MAX_LIST_BYTES

__all__ = ["NamedList", "NamedMap", "load_lists", "read_list_file", "resolve_items"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# A comment either fills a line or starts after whitespace, so ``C#`` and ``a#b`` stay items.
_TRAILING_COMMENT = re.compile(r"\s+#.*\Z")
_KEYS = frozenset({"file", "items", "map", "key"})
_VALUE_HINT = ("quote a date (\"2024-01-31\"), flatten a nested value into attributes of its "
               "own (owner_email: ...), leave out an unknown (null) one")

Scalar: TypeAlias = str | int | float | bool
Entries: TypeAlias = dict[str, dict[str, Scalar]]


class NamedList(frozenset[str]):
    """A named list's items: a frozenset (O(1) ``in``) that iterates in declaration order.

    Attributes:
        name: the list's name in the policy.
        items: the items in declaration order, without duplicates.
    """

    __slots__ = ("items", "name")

    items: tuple[str, ...]
    name: str

    def __new__(cls, name: str, items: Iterable[str]) -> NamedList:
        ordered = tuple(dict.fromkeys(items))
        self = super().__new__(cls, ordered)
        self.items = ordered
        self.name = name
        return self

    def __iter__(self) -> Iterator[str]:
        return iter(self.items)

    def __reduce__(self) -> tuple[Any, ...]:
        return (NamedList, (self.name, self.items))

    def __repr__(self) -> str:
        return f"NamedList({self.name!r}, {list(self.items)!r})"


class NamedMap(Mapping[str, Mapping[str, Scalar]]):
    """A named map list: key -> its attributes (read-only), iterating in declaration order.

    Where a condition wants items (``{list: name}``, ``roles: ... in:``), a map stands for its
    keys, as iterating it gives them.

    Attributes:
        name: the list's name in the policy.
    """

    __slots__ = ("_entries", "name")

    def __init__(self, name: str, entries: Mapping[str, Mapping[str, Scalar]]) -> None:
        self.name = name
        self._entries: dict[str, Mapping[str, Scalar]] = {
            key: MappingProxyType(dict(attributes)) for key, attributes in entries.items()}

    def __getitem__(self, key: str) -> Mapping[str, Scalar]:
        return self._entries[key]

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __reduce__(self) -> tuple[Any, ...]:
        return (NamedMap, (self.name, {k: dict(v) for k, v in self._entries.items()}))

    def __repr__(self) -> str:
        return f"NamedMap({self.name!r}, {len(self._entries)} entries)"


def load_lists(config: Mapping[str, Any] | None, base_dir: Path, *,
               roots: Sequence[Path] = ()) -> dict[str, NamedList | NamedMap]:
    """Loads the policy's ``lists:`` section.

    Args:
        config: list name -> a sequence of strings, or a mapping of ``items`` (strings),
            ``map`` (key -> attributes) and ``file`` (a path or paths; ``.csv`` and ``.json``
            files may hold maps, ``key`` names their key column). ``None`` means no lists.
        base_dir: the policy file's folder; relative ``file`` paths start there.
        roots: further folders list files may lie in (those of the policies it extends);
            ``base_dir`` always is one.

    Returns:
        list name -> :class:`NamedList` (a set) or :class:`NamedMap`, in declaration order.

    Raises:
        ConfigError: with ``key`` set to the list's name, for a bad name, a wrong type, a
            non-string item, a bad or duplicate map key or value, a file that is missing,
            malformed, not UTF-8 text, outside the allowed folders or past the size cap.
    """
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise ConfigError(
            f"'lists' must be a mapping of list names to items, not {type(config).__name__}",
            hint="write e.g. lists: {payees: [acme, globex], contacts: {file: contacts.txt}}",
        )
    allowed = tuple(dict.fromkeys(r.resolve() for r in (base_dir, *roots)))
    budget = [MAX_LIST_BYTES]
    lists: dict[str, NamedList | NamedMap] = {}
    for name, spec in config.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise ConfigError(
                f"invalid list name {name!r}",
                key=str(name),
                hint="use letters, digits and '_' (not starting with a digit), "
                "so that CEL can write lists.<name>",
            )
        lists[name] = _load_one(name, spec, base_dir, allowed, budget)
    return lists


class _Parts:
    """The items or the map entries of one list, gathered from its sources in order."""

    __slots__ = ("entries", "items", "keyed", "name", "where")

    def __init__(self, name: str) -> None:
        self.name = name
        self.items: list[str] | None = None
        self.entries: Entries | None = None
        self.keyed = False  # some source used ``key:``
        self.where: dict[str, str] = {}  # "items" / "map" -> the first source of that kind

    def add_items(self, items: list[str], where: str) -> None:
        self._kind("items", where)
        self.items = [*(self.items or ()), *items]

    def add_entries(self, entries: Entries, where: str) -> None:
        self._kind("map", where)
        if self.entries is None:
            self.entries = {}
        for key, attributes in entries.items():
            if key in self.entries:
                raise ConfigError(f"list '{self.name}' has the key {key!r} twice (again in "
                                  f"{where})", key=self.name,
                                  hint="a map's keys are unique: remove or rename one entry")
            self.entries[key] = attributes

    def _kind(self, kind: str, where: str) -> None:
        self.where.setdefault(kind, where)
        if len(self.where) > 1:
            raise ConfigError(
                f"list '{self.name}' mixes items (from {self.where['items']}) and map entries "
                f"(from {self.where['map']})", key=self.name,
                hint="a list is a set of strings or a map of key -> attributes: make two lists")

    def result(self) -> NamedList | NamedMap:
        if self.entries is not None:
            return NamedMap(self.name, self.entries)
        return NamedList(self.name, self.items or ())


def _load_one(name: str, spec: Any, base_dir: Path, allowed: tuple[Path, ...],
              budget: list[int]) -> NamedList | NamedMap:
    if isinstance(spec, list | tuple):
        return NamedList(name, _strings(name, spec, "items"))
    if not isinstance(spec, Mapping):
        raise ConfigError(
            f"list '{name}' must be a sequence of strings or a mapping with 'file', 'items' "
            f"or 'map', not {type(spec).__name__}",
            key=name,
            hint=f"write {name}: [a, b] or {name}: {{file: {name}.txt}}",
        )
    unknown = sorted(str(k) for k in spec if k not in _KEYS)
    if unknown:
        raise ConfigError(
            f"list '{name}' has unknown key(s) {', '.join(unknown)}",
            key=name,
            hint="a list mapping accepts 'file' (path or paths), 'items' (strings), 'map' "
                 "(key -> attributes) and 'key' (the key column of a CSV or JSON file)",
        )
    if not spec.keys() - {"key"}:
        raise ConfigError(
            f"list '{name}' is empty: give it 'file', 'items' or 'map'",
            key=name,
            hint=f"write {name}: {{file: {name}.txt}} or {name}: {{items: [a, b]}}",
        )
    key = spec.get("key")
    if key is not None and (not isinstance(key, str) or not key):
        raise ConfigError(f"'key' of list '{name}' must be a column name, not {key!r:.60}",
                          key=name, hint=f"write {name}: {{file: {name}.csv, key: id}}")
    parts = _Parts(name)
    if "items" in spec:
        parts.add_items(_strings(name, spec["items"], "items"), "'items'")
    if "map" in spec:
        parts.add_entries(_inline_map(name, spec["map"]), "'map'")
    files = spec.get("file", ())
    if isinstance(files, str):
        files = (files,)
    for path in _strings(name, files, "file"):
        target = _inside(base_dir / Path(path).expanduser(), allowed, name)
        text, size = _read_text(target, name, budget[0])
        budget[0] -= size
        kind = Path(path).suffix.lower()
        if kind == ".csv":
            parts.add_entries(_csv_entries(text, name, path, key), repr(path))
            parts.keyed = True
        elif kind == ".json":
            found = _json_list(text, name, path, key)
            if isinstance(found, list):
                parts.add_items(found, repr(path))
            else:
                parts.add_entries(found[0], repr(path))
                parts.keyed = parts.keyed or found[1]
        else:
            parts.add_items(_lines(text), repr(path))
    if key is not None and not parts.keyed:
        raise ConfigError(
            f"list '{name}' names key: {key!r}, but no CSV file or JSON array of objects uses it",
            key=name,
            hint="key: names the key column of a .csv file or the key field of a JSON array of "
                 "objects; an inline map: and a JSON object of objects are keyed already",
        )
    return parts.result()


def _inline_map(name: str, value: Any) -> Entries:
    if not isinstance(value, Mapping):
        raise ConfigError(f"'map' of list '{name}' must be a mapping of keys to attributes, "
                          f"not {type(value).__name__}", key=name,
                          hint=f"write {name}: {{map: {{f-1: {{name: Q3 report.pdf}}}}}}")
    return {_key(name, k, "'map'"): _attributes(name, k, v, "'map'") for k, v in value.items()}


def _key(name: str, key: Any, where: str) -> str:
    if not isinstance(key, str) or not key:
        raise ConfigError(
            f"list '{name}' has a key that is not a non-empty string in {where}: "
            f"{type(key).__name__} {key!r:.60}", key=name,
            hint="keys are strings: quote keys that YAML reads as numbers (\"17\"), write ids "
                 "as strings in JSON")
    return key


def _attributes(name: str, key: Any, value: Any, where: str) -> dict[str, Scalar]:
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"entry {key!r:.60} of list '{name}' in {where} must be a mapping of attributes, "
            f"not {type(value).__name__} {value!r:.60}", key=name,
            hint="write each entry as key: {attribute: value, ...}")
    out: dict[str, Scalar] = {}
    for attribute, v in value.items():
        if not isinstance(attribute, str) or not attribute:
            raise ConfigError(f"entry {key!r:.60} of list '{name}' in {where} has an attribute "
                              f"name that is not a string: {attribute!r:.60}", key=name,
                              hint="quote attribute names that YAML reads as numbers")
        if not isinstance(v, str | int | float) or (isinstance(v, float) and not math.isfinite(v)):
            raise ConfigError(f"entry {key!r:.60} of list '{name}' in {where}: {attribute} is "
                              f"{type(v).__name__} {v!r:.60}, not a string, number or boolean",
                              key=name, hint=_VALUE_HINT)
        out[attribute] = v
    return out


def _csv_entries(text: str, name: str, where: str, key: str | None) -> Entries:
    """The rows of a CSV file with a header row, keyed by column ``key``; cells trimmed."""
    if key is None:
        raise ConfigError(f"list '{name}': CSV file {where!r} needs key: <column>", key=name,
                          hint=f"write {name}: {{file: {where}, key: id}} to key each row by "
                               "its id column")
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    entries: Entries = {}
    header: list[str] | None = None
    try:
        for row in reader:
            cells = [cell.strip() for cell in row]
            if not any(cells):
                continue  # a blank line
            at = f"{where!r} line {reader.line_num}"
            if header is None:
                header = _header(cells, name, at, key)
                continue
            if len(cells) != len(header):
                raise ConfigError(f"list '{name}': {at} has {len(cells)} fields, the header "
                                  f"{len(header)}", key=name,
                                  hint="quote cells that hold commas (\"a, b\")")
            entry = dict(zip(header, cells, strict=True))
            if not entry[key]:
                raise ConfigError(f"list '{name}': {at} has no {key!r}", key=name,
                                  hint=f"every row needs its key in column {key!r}")
            if entry[key] in entries:
                raise ConfigError(f"list '{name}' has the key {entry[key]!r} twice ({at})",
                                  key=name, hint="a map's keys are unique: remove one row")
            entries[entry[key]] = dict(entry)
    except csv.Error as e:
        raise ConfigError(f"list '{name}': CSV file {where!r} line {reader.line_num} cannot "
                          f"be read: {e}", key=name,
                          hint="save it as comma-separated UTF-8 with a header row") from e
    if header is None:
        raise ConfigError(f"list '{name}': CSV file {where!r} is empty", key=name,
                          hint=f"it needs a header row naming its columns, {key!r} among them")
    return entries


def _header(cells: list[str], name: str, at: str, key: str) -> list[str]:
    if not all(cells) or len(set(cells)) != len(cells):
        raise ConfigError(f"list '{name}': the header row ({at}) has an empty or repeated "
                          f"column name: {cells!r:.120}", key=name,
                          hint="name every column once")
    if key not in cells:
        raise ConfigError(f"list '{name}': the header row ({at}) has no column {key!r} (it "
                          f"has {', '.join(cells)})", key=name,
                          hint="key: names the column that holds each row's key")
    return cells


def _no_constant(value: str) -> Any:
    raise ValueError(f"{value} is not a JSON number")


def _json_list(text: str, name: str, where: str,
               key: str | None) -> list[str] | tuple[Entries, bool]:
    """A JSON list file's items (an array of strings), or its entries and whether ``key``
    keyed them (an object of objects, or an array of objects keyed by field ``key``)."""
    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in pairs:
            if k in out:  # json would keep the last silently
                raise ConfigError(f"list '{name}': JSON file {where!r} has the key {k!r} twice "
                                  "in one object", key=name, hint="keys are unique")
            out[k] = v
        return out

    try:
        data = json.loads(text, object_pairs_hook=unique, parse_constant=_no_constant)
    except ConfigError:
        raise
    except (ValueError, RecursionError) as e:  # JSONDecodeError is a ValueError
        raise ConfigError(f"list '{name}': JSON file {where!r} is not valid JSON: {e}",
                          key=name, hint="check it with a JSON validator") from e
    if isinstance(data, dict):
        return {_key(name, k, repr(where)): _attributes(name, k, v, repr(where))
                for k, v in data.items()}, False
    if isinstance(data, list) and all(isinstance(x, str) for x in data):
        return _strings(name, data, where)
    if not isinstance(data, list) or not all(isinstance(x, dict) for x in data):
        raise ConfigError(
            f"list '{name}': JSON file {where!r} must hold an array of strings, an object of "
            "objects or an array of objects", key=name,
            hint="[\"a\", \"b\"] is a set; {\"f-1\": {\"name\": ...}} or, with key: id, "
                 "[{\"id\": \"f-1\", \"name\": ...}] a map")
    if key is None:
        raise ConfigError(f"list '{name}': JSON file {where!r} is an array of objects and "
                          "needs key: <field>", key=name,
                          hint=f"write {name}: {{file: {where}, key: id}} to key each object "
                               "by its id field")
    entries: Entries = {}
    for index, row in enumerate(data):
        if key not in row:
            raise ConfigError(f"list '{name}': object {index} of JSON file {where!r} has no "
                              f"{key!r}", key=name, hint=f"every object needs its key {key!r}")
        k = _key(name, row[key], repr(where))
        if k in entries:
            raise ConfigError(f"list '{name}' has the key {k!r} twice (object {index} of "
                              f"{where!r})", key=name, hint="a map's keys are unique")
        entries[k] = _attributes(name, k, row, repr(where))
    return entries, True


def _inside(path: Path, allowed: tuple[Path, ...], name: str) -> Path:
    """``path`` resolved (symlinks and ``..`` followed), if it lies in an allowed folder."""
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError) as e:  # a symlink loop
        raise ConfigError(f"cannot resolve list file {str(path)!r}: {e}", key=name,
                          hint="check that the path names a readable file") from e
    if not any(resolved.is_relative_to(root) for root in allowed):
        raise ConfigError(
            f"list file {str(path)!r} is outside the policy's folder",
            key=name,
            hint="list files must be in the policy's folder or below it (or in the folder of "
                 "a policy it extends); '../' and absolute paths elsewhere are refused: copy "
                 "the list next to the policy",
        )
    return resolved


def _strings(name: str, values: Any, field: str) -> list[str]:
    if not isinstance(values, list | tuple):
        raise ConfigError(
            f"'{field}' of list '{name}' must be a sequence of strings, "
            f"not {type(values).__name__}",
            key=name,
            hint=f"write {field}: [a, b]",
        )
    for value in values:
        if not isinstance(value, str) or not value:
            raise ConfigError(
                f"list '{name}' has a non-string or empty item {value!r} in '{field}'",
                key=name,
                hint="quote items that YAML would read as numbers, booleans or null "
                "(\"123\", \"yes\", \"null\")",
            )
    return list(values)


def read_list_file(path: Path, *, name: str | None = None,
                   max_bytes: int = MAX_LIST_BYTES) -> list[str]:
    """Reads one item per line; blank lines and ``#`` comments are ignored, items stripped.

    Raises:
        ConfigError: (``key=name``) when the file cannot be read, is not UTF-8 text, or
            holds more than ``max_bytes``.
    """
    return _lines(_read_text(path, name, max_bytes)[0])


def _read_text(path: Path, name: str | None, max_bytes: int) -> tuple[str, int]:
    """The text of a list file, and its size in bytes."""
    try:
        with path.open("rb") as f:
            data = f.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise ConfigError(
                f"list file {str(path)!r} takes the policy's list files past "
                f"{MAX_LIST_BYTES // 1024:,} KiB",
                key=name,
                hint="a policy's list files may hold "
                     f"{MAX_LIST_BYTES // 1024:,} KiB together; keep only what rules use",
            )
        text = data.decode("utf-8-sig")
    except FileNotFoundError as e:
        raise ConfigError(
            f"list file {str(path)!r} does not exist",
            key=name,
            hint="file paths are relative to the policy file's folder",
        ) from e
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"list file {str(path)!r} is not UTF-8 text: {e.reason} at byte {e.start}",
            key=name,
            hint="save the file as UTF-8",
        ) from e
    except OSError as e:
        raise ConfigError(
            f"cannot read list file {str(path)!r}: {e.strerror or e}",
            key=name,
            hint="check that the path names a readable file",
        ) from e
    return text, len(data)


def _lines(text: str) -> list[str]:
    """The items of a text list file: one a line, blank lines and comments left out."""
    items = []
    for line in text.splitlines():
        item = _TRAILING_COMMENT.sub("", line).strip()
        if item and not item.startswith("#"):
            items.append(item)
    return items


def resolve_items(value: Any, env: CompileEnv, *, key: str | int | None = None) -> list[str]:
    """Expands named-list references in a matcher's list-of-strings config.

    ``value`` is a string, a sequence of strings, or either containing ``{list: <name>}``
    items, each of which stands for the named list's items (in order; a map list's keys)::

        urls:
          deny_domains: ["*.evil.test", {list: blocked_domains}]

    The mapping form (not an ``"@name"`` string) is used so that no literal item, such as
    ``@example.com`` or ``@types/node``, can ever be mistaken for a reference.

    Returns:
        The strings, references expanded, duplicates removed, first occurrence kept.

    Raises:
        ConfigError: (with ``key``) for an unknown list name, a malformed reference or a
            non-string item.
    """
    out: dict[str, None] = {}
    for item in value if isinstance(value, list | tuple) else (value,):
        if isinstance(item, str):
            out[item] = None
        elif isinstance(item, Mapping):
            out.update(dict.fromkeys(_referenced(item, env, key)))
        else:
            raise ConfigError(
                f"expected a string or {{list: <name>}}, got {type(item).__name__} {item!r:.60}",
                key=key,
                hint="quote items that YAML would read as numbers, booleans or null",
            )
    return list(out)


def _referenced(ref: Mapping[Any, Any], env: CompileEnv, key: str | int | None) -> Iterable[str]:
    name = ref.get("list")
    if len(ref) != 1 or not isinstance(name, str):
        raise ConfigError(
            f"a list reference must be exactly {{list: <name>}}, got {dict(ref)!r:.80}",
            key=key,
            hint="write {list: contacts} to use the named list 'contacts'",
        )
    items = env.lists.get(name)
    if items is None:
        known = ", ".join(sorted(env.lists)) or "none are defined"
        raise ConfigError(
            f"unknown list '{name}'",
            key=key,
            hint=f"declare it under 'lists:' in the policy (known lists: {known})",
        )
    found: list[str] = [items] if isinstance(items, str) else list(items)
    return found
