"""Named lists: the policy file's ``lists:`` section, and how conditions refer to them.

A policy declares each list once and every condition can use it by name::

    lists:
      contacts: {file: contacts.txt}          # one item per line, relative to the policy file
      payees: [acme, globex]                  # inline items
      domains: {items: [example.com], file: more-domains.txt}   # both, file items last

In a CEL condition a list is ``lists.<name>`` (``args.to in lists.contacts``). In the config of
any other condition, an item written ``{list: <name>}`` stands for the named list's items, see
:func:`resolve_items`.

A list file must lie inside the policy's folder (or below it), or inside the folder of a
policy it extends: ``../`` escapes, absolute paths elsewhere and symlinks pointing out are
refused, so a policy cannot make the loader read (and report items of) arbitrary files. The
list files of one policy together hold at most ``caps.MAX_LIST_BYTES``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from callwarden.conditions.base import CompileEnv
from callwarden.exceptions import ConfigError
from callwarden.policyfile.caps import MAX_LIST_BYTES

__all__ = ["NamedList", "load_lists", "read_list_file", "resolve_items"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# A comment either fills a line or starts after whitespace, so ``C#`` and ``a#b`` stay items.
_TRAILING_COMMENT = re.compile(r"\s+#.*\Z")
_KEYS = frozenset({"file", "items"})


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


def load_lists(config: Mapping[str, Any] | None, base_dir: Path, *,
               roots: Sequence[Path] = ()) -> dict[str, NamedList]:
    """Loads the policy's ``lists:`` section.

    Args:
        config: list name -> a sequence of strings, ``{file: path}``, ``{items: [...]}`` or both.
            ``file`` may also be a sequence of paths. ``None`` means no lists.
        base_dir: the policy file's folder; relative ``file`` paths start there.
        roots: further folders list files may lie in (those of the policies it extends);
            ``base_dir`` always is one.

    Returns:
        list name -> :class:`NamedList`, in declaration order.

    Raises:
        ConfigError: with ``key`` set to the list's name, for a bad name, a wrong type, a
            non-string item, or a file that is missing, not UTF-8 text, outside the allowed
            folders or past the size cap.
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
    lists: dict[str, NamedList] = {}
    for name, spec in config.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise ConfigError(
                f"invalid list name {name!r}",
                key=str(name),
                hint="use letters, digits and '_' (not starting with a digit), "
                "so that CEL can write lists.<name>",
            )
        lists[name] = NamedList(name, _load_one(name, spec, base_dir, allowed, budget))
    return lists


def _load_one(name: str, spec: Any, base_dir: Path, allowed: tuple[Path, ...],
              budget: list[int]) -> list[str]:
    if isinstance(spec, list | tuple):
        return _strings(name, spec, "items")
    if not isinstance(spec, Mapping):
        raise ConfigError(
            f"list '{name}' must be a sequence of strings or a mapping with 'file' and/or "
            f"'items', not {type(spec).__name__}",
            key=name,
            hint=f"write {name}: [a, b] or {name}: {{file: {name}.txt}}",
        )
    unknown = sorted(str(k) for k in spec if k not in _KEYS)
    if unknown:
        raise ConfigError(
            f"list '{name}' has unknown key(s) {', '.join(unknown)}",
            key=name,
            hint="a list mapping accepts only 'file' (path or paths) and 'items' (strings)",
        )
    if not spec:
        raise ConfigError(
            f"list '{name}' is empty: give it 'file' or 'items'",
            key=name,
            hint=f"write {name}: {{file: {name}.txt}} or {name}: {{items: [a, b]}}",
        )
    items = list(_strings(name, spec.get("items", ()), "items"))
    files = spec.get("file", ())
    if isinstance(files, str):
        files = (files,)
    for path in _strings(name, files, "file"):
        target = _inside(base_dir / Path(path).expanduser(), allowed, name)
        found, size = _read_items(target, name, budget[0])
        budget[0] -= size
        items.extend(found)
    return items


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
    return _read_items(path, name, max_bytes)[0]


def _read_items(path: Path, name: str | None, max_bytes: int) -> tuple[list[str], int]:
    """The items of a list file, and its size in bytes."""
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
    items = []
    for line in text.splitlines():
        item = _TRAILING_COMMENT.sub("", line).strip()
        if item and not item.startswith("#"):
            items.append(item)
    return items, len(data)


def resolve_items(value: Any, env: CompileEnv, *, key: str | int | None = None) -> list[str]:
    """Expands named-list references in a matcher's list-of-strings config.

    ``value`` is a string, a sequence of strings, or either containing ``{list: <name>}``
    items, each of which stands for the named list's items (in order)::

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
