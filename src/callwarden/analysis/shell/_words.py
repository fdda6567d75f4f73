"""Word-level shell semantics: quoting, brace expansion, field splitting, escape decoding.

Words are assembled in an *escaped form*: text whose special characters (``\\ { } , * ? [``)
are backslash-escaped when they came from quotes or from an expansion, so that brace
expansion and glob detection act only on what bash would act on. ``SPLIT`` marks an unquoted
IFS character produced by an expansion (``rm${IFS}-rf``); ``KEEP`` marks that a quoted part was
present, so an empty quoted word (``''``) survives field removal.
"""

from __future__ import annotations

import itertools
import re

__all__ = [
    "KEEP",
    "SPLIT",
    "ansi_c_decode",
    "brace_expand",
    "echo_decode",
    "escape_expansion",
    "escape_literal",
    "finalize_word",
    "printf_format",
]

SPLIT = "\x00"
KEEP = "\x01"
MAX_BRACE_FIELDS = 256
MAX_BRACE_GROUPS = 32
MAX_BRACE_WORD = 4096

_LITERAL_SPECIAL = re.compile(r"([\\{},*?\[])")
_EXPANSION_SPECIAL = re.compile(r"([\\{},])")
_IFS_RUN = re.compile(r"[ \t\n]+")
_UNESCAPE = re.compile(r"\\(.)", re.DOTALL)
_SEQUENCE = re.compile(r"^(-?\d+|[A-Za-z])\.\.(-?\d+|[A-Za-z])(?:\.\.(-?\d+))?$")


def escape_literal(text: str) -> str:
    """Escaped form of quoted text: nothing in it is special."""
    return _LITERAL_SPECIAL.sub(r"\\\1", text) + KEEP


def escape_expansion(value: str) -> str:
    """Escaped form of an unquoted expansion: split on IFS, glob characters stay live."""
    return _IFS_RUN.sub(SPLIT, _EXPANSION_SPECIAL.sub(r"\\\1", value))


def finalize_word(escaped: str, *, brace: bool = True) -> list[tuple[str, bool]]:
    """Turns an escaped-form word into its fields: ``[(text, has_glob)]``."""
    variants = brace_expand(escaped) if brace and "{" in escaped else [escaped]
    fields: list[tuple[str, bool]] = []
    for variant in variants:
        for field in _split(variant) if SPLIT in variant else (variant,):
            if not field:
                continue
            glob = _has_live_glob(field)
            text = _UNESCAPE.sub(r"\1", field) if "\\" in field else field
            if KEEP in text:
                text = text.replace(KEEP, "")
            elif not text:
                continue
            fields.append((text, glob))
    return fields


def _split(escaped: str) -> list[str]:
    out: list[str] = []
    start = i = 0
    n = len(escaped)
    while i < n:
        c = escaped[i]
        if c == "\\":
            i += 2
            continue
        if c == SPLIT:
            out.append(escaped[start:i])
            start = i + 1
        i += 1
    out.append(escaped[start:])
    return out


def _has_live_glob(escaped: str) -> bool:
    i = 0
    n = len(escaped)
    while i < n:
        c = escaped[i]
        if c == "\\":
            i += 2
            continue
        if c in "*?[":
            return True
        i += 1
    return False


def brace_expand(escaped: str, limit: int = MAX_BRACE_FIELDS, _groups: int = 0) -> list[str]:
    """Bash brace expansion (``{a,b}``, ``{1..3}``, ``{a..c}``) on an escaped-form word.

    At most ``MAX_BRACE_GROUPS`` groups per word are expanded; the rest stay literal.
    """
    if _groups >= MAX_BRACE_GROUPS or len(escaped) > MAX_BRACE_WORD:
        return [escaped]
    found = _first_group(escaped)
    if found is None:
        return [escaped]
    start, end, alternatives = found
    prefix, suffix = escaped[:start], escaped[end + 1 :]
    results: list[str] = []
    for alternative in alternatives:
        for tail in brace_expand(alternative + suffix, limit, _groups + 1):
            results.append(prefix + tail)
            if len(results) >= limit:
                return results
    return results


def _first_group(s: str) -> tuple[int, int, list[str]] | None:
    """The leftmost expandable ``{...}`` group: (open, close, alternatives), in one pass."""
    stack: list[tuple[int, list[int]]] = []
    best: tuple[int, int, list[str]] | None = None
    i = 0
    n = len(s)
    while i < n:
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if c == "{" and not (i and s[i - 1] == "$"):
            stack.append((i, []))
        elif c == "," and stack:
            stack[-1][1].append(i)
        elif c == "}" and stack:
            start, commas = stack.pop()
            if best is None or start < best[0]:
                if commas:
                    bounds = [start, *commas, i]
                    best = (start, i, [s[a + 1 : b] for a, b in itertools.pairwise(bounds)])
                else:
                    seq = _sequence(s[start + 1 : i])
                    if seq is not None:
                        best = (start, i, seq)
        i += 1
    return best


def _sequence(body: str) -> list[str] | None:
    m = _SEQUENCE.match(body)
    if m is None:
        return None
    a, b, step_text = m.groups()
    step = abs(int(step_text)) if step_text else 1
    step = step or 1
    if a.lstrip("-").isdigit() and b.lstrip("-").isdigit():
        x, y = int(a), int(b)
        if abs(y - x) // step > MAX_BRACE_FIELDS:
            return None
        rng = range(x, y + 1, step) if x <= y else range(x, y - 1, -step)
        return [str(v) for v in rng]
    if len(a) == 1 and len(b) == 1 and a.isalpha() and b.isalpha():
        x, y = ord(a), ord(b)
        rng = range(x, y + 1, step) if x <= y else range(x, y - 1, -step)
        return [escape_literal(chr(v))[:-1] for v in rng]
    return None


_C_SIMPLE = {
    "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r",
    "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?",
}
_C_ESCAPE = re.compile(
    r"\\(?:([abeEfnrtv\\'\"?])|([0-7]{1,3})|x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{1,4})"
    r"|U([0-9A-Fa-f]{1,8})|c(.))",
    re.DOTALL,
)


def _c_replace(m: re.Match[str]) -> str:
    simple, octal, hx, u4, u8, ctl = m.groups()
    if simple is not None:
        return _C_SIMPLE[simple]
    if octal is not None:
        return chr(int(octal, 8) & 0xFF)
    if hx is not None:
        return chr(int(hx, 16))
    code = u4 or u8
    if code is not None:
        value = int(code, 16)
        return chr(value) if value <= 0x10FFFF else "\ufffd"
    return chr(ord(ctl) & 0x1F)


def ansi_c_decode(body: str) -> str:
    """Decodes the body of a ``$'...'`` string."""
    return _C_ESCAPE.sub(_c_replace, body) if "\\" in body else body


_ECHO_ESCAPE = re.compile(r"\\(?:([abefnrtv\\])|0([0-7]{0,3})|x([0-9A-Fa-f]{1,2})|(c))", re.DOTALL)


def echo_decode(text: str) -> tuple[str, bool]:
    """Decodes ``echo -e`` escapes. Returns the text and whether ``\\c`` stopped the output."""
    stop = False
    out: list[str] = []
    pos = 0
    for m in _ECHO_ESCAPE.finditer(text):
        out.append(text[pos : m.start()])
        simple, octal, hx, cut = m.groups()
        if cut:
            stop = True
            pos = len(text)
            break
        if simple is not None:
            out.append(_C_SIMPLE[simple])
        elif octal is not None:
            out.append(chr(int(octal or "0", 8) & 0xFF))
        else:
            out.append(chr(int(hx, 16)))
        pos = m.end()
    out.append(text[pos:])
    return "".join(out), stop


_PRINTF_DIRECTIVE = re.compile(r"%([-+ #0]*)(\d+|\*)?(?:\.(\d+|\*))?([sbdiouxXcfeEgGq%])")


def printf_format(fmt: str, args: list[str], limit: int = 65_536) -> str | None:
    """Evaluates bash ``printf FMT ARGS``; None when it uses something not modelled."""
    fmt_decoded = ansi_c_decode(fmt.replace("\\c", "")) if "\\" in fmt else fmt
    out: list[str] = []
    remaining = list(args)
    size = 0
    while True:
        consumed = False
        pos = 0
        for m in _PRINTF_DIRECTIVE.finditer(fmt_decoded):
            out.append(fmt_decoded[pos : m.start()])
            pos = m.end()
            flags, width, precision, conv = m.groups()
            if conv == "%":
                out.append("%")
                continue
            if width == "*" or precision == "*":
                return None
            arg = remaining.pop(0) if remaining else ""
            consumed = True
            piece = _printf_one(conv, arg, flags, width, precision)
            if piece is None:
                return None
            out.append(piece)
        out.append(fmt_decoded[pos:])
        size += sum(len(p) for p in out)
        if size > limit:
            return None
        if not remaining or not consumed:
            break
    return "".join(out)


def _printf_one(conv: str, arg: str, flags: str, width: str | None, prec: str | None) -> str | None:
    if conv == "s":
        text = arg if prec is None else arg[: int(prec)]
    elif conv == "b":
        text, _ = echo_decode(arg)
    elif conv == "c":
        text = arg[:1]
    elif conv == "q":
        return None
    else:
        try:
            number = int(arg, 0) if arg.strip() else 0
        except ValueError:
            return None
        if conv in "di":
            text = str(number)
        elif conv == "o":
            text = format(number, "o")
        elif conv == "u":
            text = str(number)
        elif conv in "xX":
            text = format(number, conv)
        else:
            return None
    if width:
        w = int(width)
        if w > 65_536:
            return None
        fill = "0" if "0" in flags and conv not in "sbc" else " "
        text = text.ljust(w) if "-" in flags else text.rjust(w, fill)
    return text
