"""Word expansion: what each word of a command becomes, as far as it is known statically.

A mixin of the analyzer: it expands quotes, ``$'..'``, ``~``, variables assigned earlier in the
script, substitutions whose output is computable, braces and ``${IFS}``, and marks the parts
that stay dynamic so that a command name built at run time is reported, not guessed.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from typing import Any

from callwarden.analysis.shell._evaluate import Out
from callwarden.analysis.shell._syntax import Field, _dq, _flatten, _literal_word, _text, _trim
from callwarden.analysis.shell._words import (
    KEEP,
    ansi_c_decode,
    escape_expansion,
    escape_literal,
    finalize_word,
)
from callwarden.exceptions import CallwardenError

MAX_OPS = 200_000
MAX_FIELDS = 20_000
MAX_NESTING = 80
MAX_VALUE = 65_536
_EXPANSION = re.compile(
    r"^\$\{(#?)([A-Za-z_][A-Za-z_0-9]*|[0-9]+|[@*#?$!-])"
    r"(?:(:?[-=+?])(.*)|:(-?\s*\d+)(?::(-?\s*\d+))?|(##?|%%?)(.*)|(//?)([^/]*)(?:/(.*))?"
    r"|(\^\^|,,|\^|,))?\}$",
    re.DOTALL,
)
_DECODED = "\x00decoded:"
_DYN_OPEN = "\x02"  # brackets the source text of a dynamic part inside a word
_DYN_CLOSE = "\x03"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TILDE = re.compile(r"~([A-Za-z_][A-Za-z0-9_.-]*|\+)?(?=[/:]|$)")


class _TooComplex(CallwardenError):
    """The analysis ran out of its work budget (an adversarial or absurd command)."""


class _Budget:
    """Work done so far, shared by an analysis and the probes it starts."""

    __slots__ = ("fields", "level", "ops", "outputs")

    def __init__(self) -> None:
        self.ops = 0
        self.fields = 0
        self.level = 0
        # Outputs of substitutions already analysed, so probes need not analyse them again.
        self.outputs: dict[tuple[bytes, int, int], Out | None] = {}

    def spend(self) -> None:
        self.ops += 1
        if self.ops > MAX_OPS:
            raise _TooComplex


class _Env:
    """Variables known statically at a point of the script (None: assigned, value unknown)."""

    __slots__ = ("vars",)

    def __init__(self, variables: dict[str, str | None] | None = None) -> None:
        self.vars: dict[str, str | None] = variables if variables is not None else {}

    def copy(self) -> _Env:
        return _Env(dict(self.vars))


class _Expander:
    """Expands words for the analyzer (which provides the attributes and hooks below)."""

    __slots__ = ()

    home: str | None
    cwd: str | None
    budget: _Budget

    def add_opaque(self, reason: str) -> None:
        raise NotImplementedError

    def substitution(self, node: Any, src: bytes, env: _Env, wrappers: tuple[str, ...],
                     depth: int) -> Any:
        raise NotImplementedError

    def scan(self, node: Any, src: bytes, env: _Env, wrappers: tuple[str, ...],
             depth: int) -> None:
        raise NotImplementedError

    def expand(self, nodes: Sequence[Any], src: bytes, env: _Env, wrappers: tuple[str, ...],
               depth: int) -> list[Field]:
        """Expands one word (one or more adjacent nodes) into fields, as bash would."""
        items: list[Any] = []
        for node in nodes:
            _flatten(node, src, items)
        parts: list[str] = []
        why: list[str] = []
        index = 0
        count = len(items)
        while index < count:
            item = items[index]
            if isinstance(item, str):
                parts.append(item)
            elif item.type == "$" and index + 1 < count:
                # tree-sitter sometimes splits ``@$HOME`` inside braces into ``$`` + ``HOME``.
                follower = items[index + 1]
                rest = follower if isinstance(follower, str) else _text(follower, src)
                m = _IDENTIFIER.match(rest)
                if m is None:
                    parts.append("$")
                else:
                    value = self.lookup(m.group(), env)
                    self.add_value(value, f"variable ${m.group()}", "$" + m.group(), parts, why,
                                   False)
                    parts.append(rest[m.end() :])
                    index += 1
            elif not item.is_named:
                token = _text(item, src)
                if token != "``":  # an empty backquote substitution expands to nothing
                    parts.append(token)
            else:
                self.build(item, src, env, wrappers, depth, parts, why, quoted=False,
                           start=index == 0)
            index += 1
        escaped = "".join(parts)
        dynamic = next((w for w in why if not w.startswith(_DECODED)), None)
        decoded = next((w[len(_DECODED) :] for w in why if w.startswith(_DECODED)), None)
        expanded = finalize_word(escaped)
        self.budget.fields += len(expanded)
        if self.budget.fields > MAX_FIELDS:
            self.add_opaque("command expands to too many words to analyse")
            expanded = expanded[:1]
        return [(text.replace(_DYN_OPEN, "").replace(_DYN_CLOSE, ""), glob,
                 dynamic if _DYN_OPEN in text else None, decoded)
                for text, glob in expanded]

    def word_text(self, node: Any, src: bytes, env: _Env, wrappers: tuple[str, ...],
                  depth: int) -> tuple[str, bool]:
        """Expands a word without field splitting (assignments, redirect targets)."""
        parts: list[str] = []
        why: list[str] = []
        self.build(node, src, env, wrappers, depth, parts, why, quoted=False, start=True,
                   assignment=True)
        fields = finalize_word("".join(parts), brace=False)
        text = fields[0][0].replace(_DYN_OPEN, "").replace(_DYN_CLOSE, "") if fields else ""
        return text, any(not w.startswith(_DECODED) for w in why)

    def build(self, node: Any, src: bytes, env: _Env, wrappers: tuple[str, ...], depth: int,
              parts: list[str], why: list[str], *, quoted: bool, start: bool = False,
              assignment: bool = False) -> None:
        self.budget.spend()
        kind = node.type
        if kind in ("word", "number", "variable_name", "special_variable_name", "test_operator",
                    "extglob_pattern", "brace_expression", "regex"):
            raw = _text(node, src)
            if quoted:
                parts.append(escape_literal(raw))
                return
            raw = raw.replace("\\\n", "")
            if start and raw[:1] == "~":
                tilde = _TILDE.match(raw)
                if tilde is not None:
                    base = self.tilde_base(tilde.group(1))
                    if base is not None:
                        parts.append(escape_literal(base)[:-1])
                        raw = raw[tilde.end() :]
            parts.append(raw)
            return
        if kind == "raw_string":
            parts.append(escape_literal(_text(node, src)[1:-1]))
            return
        if kind == "ansi_c_string":
            parts.append(escape_literal(ansi_c_decode(_text(node, src)[2:-1])))
            return
        if kind in ("string", "translated_string"):
            self.build_string(node, src, env, wrappers, depth, parts, why)
            return
        if kind == "concatenation":
            cursor = node.start_byte
            first = True
            for child in node.children:
                if child.start_byte > cursor:  # text the grammar left between children
                    parts.append(src[cursor : child.start_byte].decode("utf-8", "replace"))
                self.build(child, src, env, wrappers, depth, parts, why, quoted=quoted,
                           start=start and first, assignment=assignment)
                cursor = child.end_byte
                first = False
            if node.end_byte > cursor:
                parts.append(src[cursor : node.end_byte].decode("utf-8", "replace"))
            return
        if kind in ("simple_expansion", "expansion"):
            value, reason = self.variable(node, src, env, wrappers, depth)
            text = _text(node, src)
            # ``"$@"`` is one word per positional parameter, quoted or not.
            split = text in ("$@", "${@}") and not assignment
            self.add_value(value, reason, text, parts, why, (quoted or assignment) and not split)
            return
        if kind == "command_substitution":
            out = self.substitution(node, src, env, wrappers, depth)
            if out is None:
                self.add_value(None, "a command substitution", _text(node, src), parts, why,
                               quoted or assignment)
            else:
                if out.decoded:
                    why.append(_DECODED + out.via)
                self.add_value(out.text.rstrip("\n"), None, "", parts, why, quoted or assignment)
            return
        if kind == "process_substitution":
            self.substitution(node, src, env, wrappers, depth)
            self.add_value(None, "a process substitution", _text(node, src), parts, why, True)
            return
        if kind == "arithmetic_expansion":
            self.scan(node, src, env, wrappers, depth)
            self.add_value(None, "arithmetic", _text(node, src), parts, why, quoted or assignment)
            return
        # Anything else (arrays, unusual nodes): keep its text, literal, and analyse inside it.
        self.scan(node, src, env, wrappers, depth)
        parts.append(escape_literal(_text(node, src)))

    def build_string(self, node: Any, src: bytes, env: _Env, wrappers: tuple[str, ...],
                     depth: int, parts: list[str], why: list[str]) -> None:
        text_start = node.start_byte + (2 if node.type == "translated_string" else 1)
        text_end = node.end_byte - 1
        cursor = text_start
        parts.append(KEEP)
        for child in node.named_children:
            if child.start_byte > cursor:
                parts.append(escape_literal(_dq(src[cursor : child.start_byte])))
            if child.type == "string_content":
                parts.append(escape_literal(_dq(src[child.start_byte : child.end_byte])))
            else:
                self.build(child, src, env, wrappers, depth, parts, why, quoted=True)
            cursor = max(cursor, child.end_byte)
        if text_end > cursor:
            parts.append(escape_literal(_dq(src[cursor:text_end])))

    def add_value(self, value: str | None, reason: str | None, source: str, parts: list[str],
                  why: list[str], quoted: bool) -> None:
        if value is None:
            why.append(reason or "an expansion")
            parts.append(_DYN_OPEN + escape_literal(source) + _DYN_CLOSE)
        elif quoted:
            parts.append(escape_literal(value))
        else:
            parts.append(escape_expansion(value))

    def variable(self, node: Any, src: bytes, env: _Env, wrappers: tuple[str, ...],
                 depth: int) -> tuple[str | None, str | None]:
        text = _text(node, src)
        if node.type == "simple_expansion":
            name = text[1:]
            value = self.lookup(name, env)
            return value, (None if value is not None else f"variable ${name}")
        for child in node.named_children:
            if child.type not in ("variable_name", "special_variable_name", "number", "word"):
                self.scan(child, src, env, wrappers, depth)
        m = _EXPANSION.match(text)
        if m is None:
            return None, f"expansion {text}"
        length, name, op, word, off, size, trim, pattern, sub, old, new, case = m.groups()
        reason = f"variable ${{{name}}}"
        if off is not None:
            return self.substring(name, env, int(off.replace(" ", "")),
                                  None if size is None else int(size.replace(" ", ""))), reason
        value = self.lookup(name, env)
        if value is None:
            return None, reason
        if length:
            return str(len(value)), None
        if op is not None:
            if op.endswith(("-", "=")):
                empty = not value if op.startswith(":") else False
                return (_literal_word(word) if empty else value), None
            if op.endswith("+"):
                return (_literal_word(word) if value else ""), None
            return value, None
        if trim is not None:
            if len(value) > 4096:
                return None, reason
            return _trim(value, trim, _literal_word(pattern)), None
        if sub is not None:
            regex = fnmatch.translate(_literal_word(old))[:-2].removeprefix("(?s:")
            try:
                compiled = re.compile(regex)
            except re.error:
                return None, reason
            replacement = _literal_word(new or "")
            count = 0 if sub == "//" else 1
            if len(value) * max(len(replacement), 1) > MAX_VALUE:
                return None, reason
            return compiled.sub(lambda _m: replacement, value, count=count), None
        if case is not None:
            if case.startswith("^"):
                return (value.upper() if case == "^^" else value[:1].upper() + value[1:]), None
            return (value.lower() if case == ",," else value[:1].lower() + value[1:]), None
        return value, None

    def tilde_base(self, user: str | None) -> str | None:
        """What a leading ``~``, ``~user`` or ``~+`` expands to (None: left as written)."""
        if user is None:
            return self.home or "~"
        if user == "+":
            return self.cwd or "."
        # As the path rules do: the configured home for its own user name, else the usual
        # home of that user (so ``~root`` and ``~dev`` are protected like ``/root``, ``/home/*``).
        if self.home and self.home.rstrip("/").rpartition("/")[2] == user:
            return self.home
        return "/root" if user == "root" else "/home/" + user

    def lookup(self, name: str, env: _Env) -> str | None:
        if name in env.vars:
            return env.vars[name]
        if name == "HOME":
            return self.home or "~"
        if name == "IFS":
            return " \t\n"
        if name in ("@", "*"):
            return ""  # an agent's shell has no positional parameters
        if name == "#":
            return "0"
        if name == "PWD":
            # Without a configured directory ``$PWD`` still names the working directory: ``.``.
            return self.cwd or "."
        return None

    def substring(self, name: str, env: _Env, offset: int, size: int | None) -> str | None:
        if name == "HOME" and name not in env.vars and self.home is None:
            # HOME is absolute whatever its value: its first character is always "/".
            return "/" if offset == 0 and size == 1 else None
        value = self.lookup(name, env)
        if value is None:
            return None
        if offset < 0:
            offset = max(len(value) + offset, 0)
        end = len(value) if size is None else (offset + size if size >= 0 else len(value) + size)
        return value[offset:end]
