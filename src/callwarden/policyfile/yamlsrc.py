"""YAML loading that remembers where every key and item came from (file and line).

Policy files are read YAML-1.2-style for booleans: only ``true``/``false`` are booleans, so a
rule's ``on: output`` key is the string ``on`` (YAML 1.1 would read it as ``True``) and
``yes``/``no``/``on``/``off`` values stay strings.

A document is read under the caps of :mod:`callwarden.policyfile.caps`: its size is checked
before it is read, its nesting depth and node count while it is composed (PyYAML's composer is
recursive: 10,000 nested brackets would overflow the stack), and aliases are expanded under a
budget so a "billion laughs" document fails fast instead of hanging.
"""

from __future__ import annotations

import os
import re
import stat
import time
from pathlib import Path
from typing import Any

import yaml

from callwarden.exceptions import PolicyError, Problem
from callwarden.policyfile.caps import MAX_ALIAS_NODES, MAX_DEPTH, MAX_NODES, MAX_POLICY_BYTES

__all__ = ["Lines", "load_yaml", "read_source"]

Path_ = tuple[str | int, ...]


class _PolicyYamlLoader(yaml.SafeLoader):
    """SafeLoader whose only booleans are true/false (YAML 1.2 core schema).

    It also notes the line of every alias (``*name``), which composing otherwise forgets, so
    an alias that expands too far can be reported where it is written; and it counts depth
    and nodes as it composes, stopping at the caps before the recursion can overflow.
    """

    def __init__(self, stream: str, file: str | None) -> None:
        super().__init__(stream)
        self.file = file
        self.alias_lines: dict[tuple[int, int], int] = {}
        self.depth = 0
        self.nodes = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        mark = event.start_mark
        line = mark.line + 1 if mark is not None else None
        if isinstance(event, yaml.AliasEvent):
            if parent is not None and index is not None and line is not None:
                slot = index if isinstance(index, int) else id(index)
                self.alias_lines[(id(parent), slot)] = line
            return super().compose_node(parent, index)  # type: ignore[return-value]
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise PolicyError(Problem(
                f"the document has more than {MAX_NODES:,} keys and values", self.file, line,
                hint="a policy states rules, not data: put long lists in a list file "
                     "(lists: {name: {file: name.txt}})"))
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise PolicyError(Problem(
                f"the document is nested more than {MAX_DEPTH} levels deep", self.file, line,
                hint="no policy key needs this much nesting"))
        try:
            return super().compose_node(parent, index)  # type: ignore[return-value]
        finally:
            self.depth -= 1


_PolicyYamlLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_PolicyYamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))


class Lines:
    """Maps a path into the document (``("rules", 0, "effect")``) to its 1-based line.

    ``problems`` holds what the reader found but could carry on past (duplicate keys), so a
    caller that reports every problem can add them to its own.
    """

    __slots__ = ("_lines", "file", "problems")

    def __init__(self, file: str | None) -> None:
        self.file = file
        self._lines: dict[Path_, int] = {}
        self.problems: list[Problem] = []

    def set(self, path: Path_, line: int) -> None:
        self._lines.setdefault(path, line)

    def line(self, path: Path_) -> int | None:
        """The line of ``path``, or of its nearest ancestor that has one."""
        for i in range(len(path), -1, -1):
            line = self._lines.get(path[:i])
            if line is not None:
                return line
        return None

    def source(self, path: Path_) -> str:
        """``file:line`` of ``path``."""
        line = self.line(path)
        name = self.file or "<policy>"
        return f"{name}:{line}" if line is not None else name


# A policy rewritten in place (truncated, then written) can be read half-written, and a prefix
# of a policy is often a valid one (``version: 1`` / ``default: allow``). A file changed within
# the last _SETTLE seconds is read again, _SETTLE apart, until two reads agree; one that keeps
# changing for _SETTLE_BUDGET is an error (the hook then blocks the call).
_SETTLE = 0.05
_SETTLE_BUDGET = 1.0


def read_source(path: Path, what: str = "policy file", *,
                max_bytes: int = MAX_POLICY_BYTES) -> str:
    """Reads a UTF-8 policy or test file of at most ``max_bytes``, as it stands once any write
    in progress has settled.

    Raises:
        PolicyError: when the file cannot be read, keeps changing, is too large or is not
            UTF-8 text.
    """
    try:
        data, stamp = _read_once(path, max_bytes)
        give_up = time.monotonic() + _SETTLE_BUDGET
        while _unsettled(data, stamp, max_bytes):
            if time.monotonic() > give_up:
                raise PolicyError(Problem(
                    f"{what} kept changing while it was read", str(path),
                    hint="replace a policy file atomically: write the new version to a "
                         "temporary file in the same folder and rename it over the old one"))
            time.sleep(_SETTLE)
            again, again_stamp = _read_once(path, max_bytes)
            if (again, again_stamp) == (data, stamp):
                break  # unchanged for a quiet period: whatever wrote it is done
            data, stamp = again, again_stamp
    except OSError as e:
        raise PolicyError(Problem(f"cannot read {what}: {e.strerror or e}", str(path),
                                  hint="check the path")) from e
    if len(data) > max_bytes:
        raise PolicyError(_too_large(what, str(path), max_bytes))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PolicyError(Problem(f"{what} is not UTF-8 text (byte {e.start})", str(path),
                                  hint="save it as UTF-8")) from e


def _read_once(path: Path, max_bytes: int) -> tuple[bytes, tuple[int, ...] | None]:
    """The bytes (one past the cap at most: a pipe has no size, and a file can grow after a
    stat) and, for a regular file, what identifies this version of it."""
    with path.open("rb") as f:
        data = f.read(max_bytes + 1)
        info = os.fstat(f.fileno())
    if not stat.S_ISREG(info.st_mode):
        return data, None
    return data, (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _unsettled(data: bytes, stamp: tuple[int, ...] | None, max_bytes: int) -> bool:
    """Whether a regular file may be mid-write: just modified, or not the size it says."""
    if stamp is None:
        return False
    _, size, mtime_ns, _ = stamp
    recent = time.time_ns() - mtime_ns < _SETTLE * 1_000_000_000
    return recent or (size != len(data) and len(data) <= max_bytes)


def _too_large(what: str, file: str | None, max_bytes: int) -> Problem:
    return Problem(f"{what} is larger than {max_bytes // 1024:,} KiB", file,
                   hint="a policy states rules, not data: put long lists in a list file "
                        "(lists: {name: {file: name.txt}})")


def load_yaml(text: str, file: str | None, *, collect: bool = False,
              quote: bool = True) -> tuple[Any, Lines]:
    """Parses one YAML document into plain data plus a line map.

    A duplicate key keeps its first value. With ``collect=True`` duplicates are left in
    ``lines.problems`` for the caller to report along with its own findings; otherwise they
    are raised (all of them) once the document is read.

    With ``quote=False`` a syntax error gives its position only: PyYAML's descriptions can
    quote the text (an alias, a tag, a character), and a file that may not be a policy at all
    (one ``extends:`` names) must never have its content echoed where a model reads it.

    Raises:
        PolicyError: on a syntax error, a document over the caps (size, nesting, values,
            alias expansion), or (without ``collect``) duplicate keys.
    """
    lines = Lines(file)
    if len(text) > MAX_POLICY_BYTES:
        raise PolicyError(_too_large("the policy", file, MAX_POLICY_BYTES))
    loader = _PolicyYamlLoader(text, file)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, lines
        data = _Builder(loader, lines).convert(node, (), 0)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else None
        if not quote:
            where = f" (column {mark.column + 1})" if mark is not None else ""
            raise PolicyError(Problem(f"not valid YAML{where}", file, line,
                                      hint=_UNQUOTED_HINT)) from e
        message = " ".join(str(x) for x in (e.context, e.problem) if x) or str(e)
        raise PolicyError(Problem(f"invalid YAML: {message}", file, line,
                                  hint="check indentation, colons and quoting")) from e
    except yaml.YAMLError as e:
        if not quote:
            raise PolicyError(Problem("not valid YAML", file, hint=_UNQUOTED_HINT)) from e
        raise PolicyError(Problem(f"invalid YAML: {e}", file)) from e
    finally:
        loader.dispose()
    if lines.problems and not collect:
        raise PolicyError(lines.problems)
    return data, lines


_UNQUOTED_HINT = ("extends: names policy files; the text of a file that is not one is never "
                  "shown in errors")


class _Builder:
    """Turns composed nodes into plain data, recording lines and bounding alias expansion."""

    __slots__ = ("built", "lines", "loader", "reused")

    def __init__(self, loader: _PolicyYamlLoader, lines: Lines) -> None:
        self.loader = loader
        self.lines = lines
        self.built: set[int] = set()
        self.reused = 0

    def convert(self, node: yaml.Node, path: Path_, depth: int, alias: int | None = None) -> Any:
        """Builds ``node``; ``alias`` is the line of the outermost alias being expanded."""
        lines = self.lines
        lines.set(path, node.start_mark.line + 1)
        if depth > MAX_DEPTH:
            raise PolicyError(Problem(f"the document is nested more than {MAX_DEPTH} levels deep",
                                      lines.file, node.start_mark.line + 1,
                                      hint="no policy key needs this much nesting"))
        # An alias is the very node it names, so a node seen before is an alias expansion.
        if id(node) in self.built:
            self.reused += 1
            if self.reused > MAX_ALIAS_NODES:
                raise PolicyError(Problem(
                    f"YAML aliases expand to more than {MAX_ALIAS_NODES:,} nodes",
                    lines.file, alias or lines.line(path),
                    hint="a policy may reuse an anchor (&name / *name) a few times, not nest "
                         "aliases of aliases; write the items out or use a named list"))
        else:
            self.built.add(id(node))
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path, depth, alias)
        if isinstance(node, yaml.SequenceNode):
            aliases = self.loader.alias_lines
            return [self.convert(item, (*path, i), depth + 1,
                                 alias or aliases.get((id(node), i)))
                    for i, item in enumerate(node.value)]
        return self.loader.construct_object(node, deep=True)

    def _mapping(self, node: yaml.MappingNode, path: Path_, depth: int,
                 alias: int | None) -> dict[Any, Any]:
        lines = self.lines
        aliases = self.loader.alias_lines
        self.loader.flatten_mapping(node)
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key_line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode):
                raise PolicyError(Problem("mapping keys must be plain scalars", lines.file,
                                          key_line))
            key = self.loader.construct_object(key_node, deep=True)
            if not isinstance(key, str | int | float | bool) and key is not None:
                raise PolicyError(Problem("mapping keys must be plain scalars", lines.file,
                                          key_line))
            child = (*path, key if isinstance(key, str | int) else str(key))
            value_alias = alias or aliases.get((id(node), id(key_node)))
            if key in out:
                lines.problems.append(Problem(
                    f"duplicate key {key!r}", lines.file, key_line,
                    hint="each key may appear once in a mapping; merge the two entries"))
                # Still read it, so problems inside it (deeper duplicates, alias bombs) show.
                self.convert(value_node, (*path, "\0dup", key_line), depth + 1, value_alias)
                continue
            lines.set(child, key_line)
            out[key] = self.convert(value_node, child, depth + 1, value_alias)
        return out
