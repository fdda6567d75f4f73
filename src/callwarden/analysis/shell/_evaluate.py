"""Side-effect-free evaluation: the output of payload builders, shell calls inside code.

Obfuscated commands build their real text with ``echo``/``printf``/``base64 -d``/``xxd -r``/
``rev`` and hand it to a shell, or hide it in ``system('...')`` (Python and JavaScript code
is read by ``_inline``). These helpers compute that text without running anything, so the
analyzer can look at what would really run.
"""

from __future__ import annotations

import base64
import binascii
import re

from callwarden.analysis.shell._parse import MAX_COMMAND_LENGTH
from callwarden.analysis.shell._words import echo_decode, printf_format

__all__ = ["MAX_OUTPUT", "Out", "embedded_commands", "evaluate_program"]

MAX_OUTPUT = 65_536
_ESCAPE_HINT = re.compile(r"\\(?:x[0-9A-Fa-f]|[0-7]|u[0-9A-Fa-f])")
_SHELL_CALL = re.compile(
    r"\b(?:system|exec|execSync|spawnSync|popen|shell_exec|passthru|backticks|"
    r"check_output|getoutput|run|call|Popen)\s*\(\s*(['\"])((?:\\.|(?!\1).)*)\1",
    re.DOTALL,
)


class Out:
    """Statically computed standard output, and whether computing it decoded something."""

    __slots__ = ("decoded", "text", "via")

    def __init__(self, text: str, decoded: bool = False, via: str = "") -> None:
        self.text = text
        self.decoded = decoded
        self.via = via


def embedded_commands(family: str, code: str) -> list[str]:
    """Shell command strings passed to system()/exec()/popen() ... in ``code`` of a language
    ``_inline`` does not analyse (ruby, perl, php ...), found by a pattern."""
    if len(code) > MAX_COMMAND_LENGTH:
        return []
    return [m.group(2) for m in _SHELL_CALL.finditer(code)]


def evaluate_program(program: str, args: list[str], stdin: Out | None) -> Out | None:
    """Output of the few side-effect-free programs used to build payloads."""
    if program == "echo":
        interpret = False
        newline = True
        while args and re.fullmatch(r"-[neE]+", args[0]):
            flag = args.pop(0)
            newline = newline and "n" not in flag
            interpret = ("e" in flag) or (interpret and "E" not in flag)
        text = " ".join(args)
        decoded = False
        if interpret:
            decoded_text, stop = echo_decode(text)
            decoded = decoded_text != text
            text = decoded_text
            newline = newline and not stop
        return Out(text + ("\n" if newline else ""), decoded, "echo -e" if decoded else "")
    if program == "printf":
        if not args or args[0] == "-v":
            return None
        if args[0] == "--":
            args = args[1:]
        if not args:
            return None
        result = printf_format(args[0], args[1:], MAX_OUTPUT)
        if result is None:
            return None
        decoded = bool(_ESCAPE_HINT.search(" ".join(args)))
        return Out(result, decoded, "printf escapes" if decoded else "")
    if program in ("true", ":"):
        return Out("")
    if program == "mktemp":
        return _mktemp(args)
    if stdin is None:
        return None
    if program == "cat" and all(a == "-" for a in args):
        return stdin
    if program in ("base64", "base32"):
        if not any(a in ("-d", "--decode", "-D") or re.fullmatch(r"-[a-zA-Z]*d[a-zA-Z]*", a)
                   for a in args):
            return None
        data = re.sub(r"\s+", "", stdin.text)
        try:
            if program == "base64":
                raw = base64.b64decode(data + "=" * (-len(data) % 4))
            else:
                raw = base64.b32decode(data + "=" * (-len(data) % 8))
        except (binascii.Error, ValueError):
            return None
        return Out(raw.decode("utf-8", "replace"), True, program)
    if program == "xxd":
        flags = "".join(a.lstrip("-") for a in args if a.startswith("-"))
        if "r" not in flags or "p" not in flags:
            return None
        try:
            raw = bytes.fromhex(re.sub(r"\s+", "", stdin.text))
        except ValueError:
            return None
        return Out(raw.decode("utf-8", "replace"), True, "xxd -r")
    if program == "rev" and not args:
        lines = stdin.text.split("\n")
        return Out("\n".join(line[::-1] for line in lines), True, "rev")
    return None


def _mktemp(args: list[str]) -> Out | None:
    """Where ``mktemp`` puts the file it makes (``/tmp/tmp.XXXXXXXXXX``): the template's
    ``X`` stand for the random part, so ``rm -rf "$(mktemp -d)"`` is known to stay in /tmp."""
    directory: str | None = None
    template: str | None = None
    in_tmp = False
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if arg == "-p" and index < len(args):
            directory = args[index]
            index += 1
        elif arg.startswith("--tmpdir=") or (arg.startswith("-p") and len(arg) > 2):
            directory = arg.partition("=")[2] if arg.startswith("--") else arg[2:]
        elif arg in ("--tmpdir", "-t"):
            in_tmp = True
        elif arg in ("--directory", "--dry-run", "--quiet", "--") or arg.startswith(
                "--suffix=") or re.fullmatch(r"-[duq]+", arg):
            continue
        elif arg.startswith("-") or template is not None:
            return None
        else:
            template = arg
    if template is None:
        template, in_tmp = "tmp.XXXXXXXXXX", True
    if directory is None and in_tmp and not template.startswith("/"):
        directory = "/tmp"
    path = template if directory is None else f"{directory.rstrip('/')}/{template}"
    return None if "$" in path or "`" in path else Out(path + "\n")
