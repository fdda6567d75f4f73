"""YAML loading that remembers where every key and item came from (file and line)."""

from __future__ import annotations

from typing import Any

import yaml

from callwarden.exceptions import PolicyError, Problem

__all__ = ["Lines", "load_yaml"]

Path_ = tuple[str | int, ...]
_MAX_DEPTH = 64


class Lines:
    """Maps a path into the document (``("rules", 0, "effect")``) to its 1-based line."""

    __slots__ = ("_lines", "file")

    def __init__(self, file: str | None) -> None:
        self.file = file
        self._lines: dict[Path_, int] = {}

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


def load_yaml(text: str, file: str | None) -> tuple[Any, Lines]:
    """Parses one YAML document into plain data plus a line map.

    Raises:
        PolicyError: on a syntax error, a duplicate key, or nesting that is too deep.
    """
    lines = Lines(file)
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, lines
        return _convert(loader, node, (), lines, 0), lines
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else None
        message = " ".join(str(x) for x in (e.context, e.problem) if x) or str(e)
        raise PolicyError(Problem(f"invalid YAML: {message}", file, line,
                                  hint="check indentation, colons and quoting")) from e
    except yaml.YAMLError as e:
        raise PolicyError(Problem(f"invalid YAML: {e}", file)) from e
    finally:
        loader.dispose()


def _convert(loader: yaml.SafeLoader, node: yaml.Node, path: Path_, lines: Lines,
             depth: int) -> Any:
    lines.set(path, node.start_mark.line + 1)
    if depth > _MAX_DEPTH:
        raise PolicyError(Problem("the document is nested too deeply", lines.file,
                                  node.start_mark.line + 1))
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if not isinstance(key, str | int | float | bool) and key is not None:
                raise PolicyError(Problem("mapping keys must be plain scalars", lines.file,
                                          key_node.start_mark.line + 1))
            if key in out:
                raise PolicyError(Problem(
                    f"duplicate key {key!r}", lines.file, key_node.start_mark.line + 1,
                    hint="each key may appear once in a mapping; merge the two entries"))
            child = (*path, key if isinstance(key, str | int) else str(key))
            lines.set(child, key_node.start_mark.line + 1)
            out[key] = _convert(loader, value_node, child, lines, depth + 1)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [
            _convert(loader, item, (*path, i), lines, depth + 1) for i, item in enumerate(node.value)
        ]
    return loader.construct_object(node, deep=True)
