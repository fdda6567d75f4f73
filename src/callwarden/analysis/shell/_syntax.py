"""Helpers over the syntax tree and over argv: pipeline stages, word groups, wrappers."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Sequence
from typing import Any

from callwarden.analysis.shell._evaluate import Out
from callwarden.analysis.shell._model import SimpleCommand
from callwarden.analysis.shell._programs import KNOWN_PROGRAMS, WrapperSpec

# A field: (text, has_glob, why it is dynamic or None, what decoded it or None).
Field = tuple[str, bool, str | None, str | None]

_BIN_DIRS = ("/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin")


def _stages(node: Any) -> list[Any]:
    """The stages of a pipeline node, flattening the nested pipelines the grammar builds."""
    out: list[Any] = []
    for child in node.named_children:
        if child.type == "pipeline":
            out.extend(_stages(child))
        elif child.type != "comment":
            out.append(child)
    return out


def _heredoc_tail(redirects: Sequence[Any]) -> list[Any]:
    for redirect in redirects:
        if redirect.type == "heredoc_redirect":
            for child in redirect.named_children:
                if child.type == "pipeline":
                    return _stages(child)
    return []


def _adjacent_groups(words: Sequence[Any]) -> list[list[Any]]:
    """Groups word nodes with no blank between them: bash sees one word where the grammar
    sometimes sees two (``{a,@$HOME}``)."""
    groups: list[list[Any]] = []
    previous_end = -1
    for word in words:
        if groups and word.start_byte == previous_end:
            groups[-1].append(word)
        else:
            groups.append([word])
        previous_end = word.end_byte
    return groups


def _bind(func: Callable[..., Out | None], *args: Any) -> Callable[[], Out | None]:
    return lambda: func(*args)


def _flatten(node: Any, src: bytes, items: list[Any]) -> None:
    if node.type != "concatenation":
        items.append(node)
        return
    cursor = node.start_byte
    for child in node.children:
        if child.start_byte > cursor:
            items.append(src[cursor : child.start_byte].decode("utf-8", "replace"))
        _flatten(child, src, items)
        cursor = child.end_byte
    if node.end_byte > cursor:
        items.append(src[cursor : node.end_byte].decode("utf-8", "replace"))


def _text(node: Any, src: bytes) -> str:
    return src[node.start_byte : node.end_byte].decode("utf-8", "replace")


def _dq(raw: bytes) -> str:
    """Removes the backslashes that are special inside double quotes."""
    text = raw.decode("utf-8", "replace")
    return re.sub(r"\\([$`\"\\\n])", lambda m: "" if m.group(1) == "\n" else m.group(1), text) \
        if "\\" in text else text


def _literal_word(word: str | None) -> str:
    if not word:
        return ""
    if len(word) >= 2 and word[0] == word[-1] and word[0] in "'\"":
        return word[1:-1]
    return word


def _trim(value: str, op: str, pattern: str) -> str:
    regex = fnmatch.translate(pattern)[:-2].removeprefix("(?s:")
    greedy = len(op) == 2
    candidates = range(len(value) + 1)
    if op.startswith("#"):
        order = reversed(candidates) if greedy else candidates
        for cut in order:
            if re.fullmatch(regex, value[:cut], re.DOTALL):
                return value[cut:]
        return value
    order = candidates if greedy else reversed(candidates)
    for cut in order:
        if re.fullmatch(regex, value[cut:], re.DOTALL):
            return value[:cut]
    return value


def _glob_programs(pattern: str) -> list[str]:
    # The command word is a glob *bash* expands (a model of the shell, not a policy pattern):
    # fnmatch's "*" crossing "/" only over-approximates the programs it could name.
    found: list[str] = []
    for name in sorted(KNOWN_PROGRAMS):
        if "/" in pattern:
            hit = any(fnmatch.fnmatchcase(f"{d}/{name}", pattern) for d in _BIN_DIRS)
        else:
            hit = fnmatch.fnmatchcase(name, pattern)
        if hit:
            found.append(name)
    return found


def _wrapped_command(program: str, spec: WrapperSpec, fields: Sequence[Field]) -> list[Field] | None:
    """The command a wrapper runs (``[]`` when none), or None when it runs nothing."""
    index = 0
    leading = spec.leading_positionals
    n = len(fields)
    while index < n:
        arg = fields[index][0]
        if arg == "--":
            index += 1
            break
        if arg in spec.lookup_flags:
            return None
        if arg.startswith("-") and len(arg) > 1:
            name = arg.partition("=")[0]
            if name in spec.values and "=" not in arg:
                index += 2
                continue
            if not arg.startswith("--") and len(arg) > 2 and f"-{arg[1]}" in spec.values:
                index += 1  # attached value: ``-uroot``, ``-oL``, ``-I{}``
                continue
            if program == "nice" and arg[1:].isdigit():
                index += 1
                continue
            index += 1
            continue
        if spec.assignments and "=" in arg and arg.split("=", 1)[0].isidentifier():
            index += 1
            continue
        if leading:
            leading -= 1
            index += 1
            continue
        break
    return list(fields[index:])


def _env_split_string(program: str, args: Sequence[str]) -> str | None:
    if program != "env":
        return None
    for index, arg in enumerate(args):
        if arg in ("-S", "--split-string") and index + 1 < len(args):
            return " ".join(args[index + 1 :])
        if arg.startswith("--split-string="):
            return " ".join([arg.partition("=")[2], *args[index + 1 :]])
        if arg.startswith("-S") and len(arg) > 2:
            return " ".join([arg[2:], *args[index + 1 :]])
    return None


def _without_exec_sections(args: Sequence[str]) -> list[str]:
    kept: list[str] = []
    inside = False
    for arg in args:
        if inside:
            inside = arg not in (";", "+")
        elif arg in ("-exec", "-execdir", "-ok", "-okdir"):
            kept.append(arg)
            inside = True
        else:
            kept.append(arg)
    return kept


def _exec_sections(fields: Sequence[Field]) -> list[list[Field]]:
    sections: list[list[Field]] = []
    index = 0
    n = len(fields)
    while index < n:
        if fields[index][0] in ("-exec", "-execdir", "-ok", "-okdir"):
            end = index + 1
            while end < n and fields[end][0] not in (";", "+"):
                end += 1
            sections.append(list(fields[index + 1 : end]))
            index = end
        index += 1
    return sections


def _code_flag(cmd: SimpleCommand, keys: Sequence[str]) -> str:
    for key, _ in cmd.options:
        if key in keys:
            return "-c" if key == "command" else f"-{key}" if len(key) == 1 else f"--{key}"
    return ""
