"""The bash grammar: tree-sitter-bash behind a thread-local parser, with error reporting.

tree-sitter was chosen over bashlex (see ``bench/bench_shell.py``): it is several times faster,
never raises, and parses constructs bashlex rejects (``r$()m``, ``case``, arrays).
"""

from __future__ import annotations

import re
import threading
from typing import Any

from callwarden.exceptions import MissingDependency

__all__ = ["BRACE_MARKER", "INSTALL_HINT", "MAX_COMMAND_LENGTH", "ParseResult", "parse_script",
           "parser_available"]

MAX_COMMAND_LENGTH = 65_536

# tree-sitter-bash reads a command that *starts* with a brace expansion (``{rm,-rf,/}``) as a
# broken ``{ ...; }`` group. In bash ``{`` is only a keyword when followed by a blank, so such a
# word is a brace expansion; a transparent marker command in front makes the grammar agree.
BRACE_MARKER = "__callwarden_brace__"
_BRACE_AT_COMMAND = re.compile(r"(^|[;&|(\n`]|\$\(|\bthen|\bdo|\belse)([ \t]*)\{(?=[^\s};])")

_local = threading.local()


def _parser() -> Any:
    parser = getattr(_local, "parser", None)
    if parser is None:
        import tree_sitter_bash
        from tree_sitter import Language, Parser

        parser = Parser(Language(tree_sitter_bash.language()))
        _local.parser = parser
    return parser


class ParseResult:
    """A parsed script: its tree root, the bytes it was parsed from, and the first error."""

    __slots__ = ("error", "root", "source")

    def __init__(self, root: Any, source: bytes, error: str | None) -> None:
        self.root = root
        self.source = source
        self.error = error


INSTALL_HINT = str(MissingDependency("shell analysis", "tree-sitter-bash"))


def parser_available() -> bool:
    """Whether the bash grammar (tree-sitter-bash) can be loaded."""
    try:
        _parser()
    except ImportError:
        return False
    return True


def parse_script(text: str) -> ParseResult:
    """Parses ``text`` as a bash script. Never raises on any string input."""
    data = text.encode("utf-8", "surrogatepass")
    try:
        parser = _parser()
    except ImportError:
        return ParseResult(None, data, INSTALL_HINT)
    tree = parser.parse(data)
    error = _first_error(tree.root_node, data)
    if error is not None and "{" in text:
        repaired = _BRACE_AT_COMMAND.sub(rf"\1\2{BRACE_MARKER} {{", text)
        if repaired != text:
            rdata = repaired.encode("utf-8", "surrogatepass")
            rtree = parser.parse(rdata)
            if _first_error(rtree.root_node, rdata) is None:
                return ParseResult(rtree.root_node, rdata, None)
    return ParseResult(tree.root_node, data, error)


def _first_error(root: Any, data: bytes) -> str | None:
    if not root.has_error:
        return None
    # Ancestor types travel with each node: tree-sitter's ``parent`` walks from the root.
    stack: list[tuple[Any, tuple[str, ...]]] = [(root, ())]
    while stack:
        node, ancestors = stack.pop()
        if not node.has_error:
            continue
        if node.is_missing:
            # ``$()`` parses as a substitution holding a MISSING empty word: valid bash.
            if node.type == "word" and ancestors[-3:-2] == ("command_substitution",):
                continue
            return f"syntax error: missing {node.type!r} at offset {node.start_byte}"
        if node.is_error:
            snippet = data[node.start_byte : node.start_byte + 40].decode("utf-8", "replace")
            return f"syntax error near {snippet!r} at offset {node.start_byte}"
        inner = (*ancestors[-2:], node.type)
        stack.extend((child, inner) for child in reversed(node.children))
    return None
