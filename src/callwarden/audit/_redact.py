"""Redaction of audit payloads: secret detectors, sensitive key names, user patterns, a callback.

Everything an audit event carries from the call (arguments, context, messages, errors) passes
through a :class:`Redactor` before any sink sees it. What was redacted is recorded as
``{"path": "args.body", "detector": "aws_access_key_id"}``: where and which detector, never the
value. Strings are capped (``max_string``) after redaction so a secret cut in half by the cap
is still found whole.
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from json.encoder import encode_basestring_ascii
from typing import Any

from callwarden._call import FrozenDict
from callwarden.analysis.detectors import (
    DEFAULT_REPLACEMENT,
    DetectorSet,
    redact,
    select_detectors,
)
from callwarden.analysis.regex import RE2 as _re2  # one pass for every pattern, or None
from callwarden.analysis.regex import bytes_searcher

__all__ = ["DEFAULT_SENSITIVE_KEYS", "Redactor"]

DEFAULT_SENSITIVE_KEYS = (
    "password", "passwd", "passphrase", "secret", "token", "apikey", "api_key", "authorization",
    "cookie", "privatekey", "private_key", "clientsecret", "client_secret", "accesskey",
    "access_key", "credential", "sessionid", "session_id", "signature", "bearer",
    # Gitleaks and the project's secrets corpus count provider client ids as secrets; in an
    # audit log, redacting one too many values costs only detail.
    "client_id", "clientid",
)
"""Key names whose values are redacted whole (case-insensitive substring, ``-``/``_`` ignored).

They apply to mapping keys and to assignments inside text (``API_TOKEN=...``,
``password: ...``, ``"client_secret": "..."``)."""

Callback = Callable[[str, str], "str | None"]
"""``callback(path, text) -> replacement or None``: a last word on every string written."""

KEY_DETECTOR = "sensitive_key"
_MIN_SCAN = 6  # no built-in detector matches fewer characters
_SCAN_MARGIN = 4096  # scanned past the string cap, so a secret straddling the cut is seen whole
_MAX_ITEMS = 1000  # per container: the rest is summarized, the event stays bounded
_MAX_DEPTH = 32
# Audited values repeat (paths, commands, rule messages): a string's scan result is kept, so
# a repeated value costs one dict lookup instead of a detector pass.
_CACHED_CHARS = 512
_CACHE_SIZE = 4096
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_AUTH_SCHEMES = frozenset({"bearer", "basic", "token", "digest", "negotiate", "apikey", "bot"})
_NEXT_TOKEN = re.compile(r"[ \t]+(\S{1,4096})")
# NAME=value, NAME: value, "name": "value" inside text (env files, YAML, headers, JSON dumps).
# Only a space, a tab or a line break ends an unquoted value: a control character or an exotic
# space inside a secret must not leave its tail in the log. ``""value""`` (doubled quotes, as
# CSV and some shells write it) is a quoted value too.
_ASSIGNMENT = re.compile(
    r"""(?P<name>[A-Za-z_][A-Za-z0-9_.\-]{0,80})["']?[^\S\r\n]*[:=][^\S\r\n]*"""
    r"""(?P<value>""[^"\n]{1,4096}""|''[^'\n]{1,4096}''|"[^"\n]{1,4096}"|'[^'\n]{1,4096}'"""
    r"""|[^ \t\r\n"',;&]{1,4096})""")
_KEY_IN_PATH = 64  # a mapping key longer than this is shortened in a redaction's path
_MAX_KEY_NAME = 256  # a key is looked at as a sensitive name up to this length
_NUMBERS = frozenset({bool, int, float})
_NOTHING = "nothing to look for"
_SEPARATOR = "\n\n"  # never inside JSON text; doubled so a match cannot use up both


def _not_json(value: Any) -> Any:
    raise TypeError(type(value).__name__)


# The C encoder itself, made once: ``JSONEncoder.encode`` builds one per call, which costs
# more than encoding a typical call's arguments. No cycle check: payloads come from
# snapshots, which refuse cycles; anything else (bytes, sets, nan) raises.
def _python_chunks(value: Any, _level: int) -> list[str]:  # pragma: no cover - not CPython
    return [json.dumps(value, separators=(",", ":"), allow_nan=False, default=_not_json)]


_c_encoder = getattr(json.encoder, "c_make_encoder", None)
_strict_chunks = _c_encoder(None, _not_json, encode_basestring_ascii, None, ":", ",", False,
                            False, False) if _c_encoder is not None else _python_chunks


def strict_json(value: Any) -> str:
    """Compact ASCII JSON of plain JSON data; raises TypeError / ValueError for anything else."""
    return "".join(_strict_chunks(value, 0))


def _child(path: str, key: str | int) -> str:
    """The path of ``key`` under ``path``; a long key is shortened (``key`` is already
    redacted: a path never holds more of a key than the event does)."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    if len(key) > _KEY_IN_PATH:
        key = key[:_KEY_IN_PATH] + "…"
    if _IDENT.match(key):
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key)}]"


def _placeholder(kind: type, error: BaseException | None = None) -> str:
    """What the event holds instead of a value that cannot be recorded."""
    why = f": {type(error).__name__}" if error is not None else ""
    return f"<unrecordable {getattr(kind, '__name__', 'object')}{why}>"


def _int_text(value: int) -> str | None:
    """The digits of ``value``, or None past the interpreter's limit on int-to-str conversion
    (``sys.get_int_max_str_digits``): such a number cannot be written, only described."""
    try:
        return int.__repr__(value)
    except ValueError:
        return None


def _big_int(value: int) -> str:
    digits = int(value.bit_length() * 0.30103) + 1  # log10(2): no conversion needed
    return f"<int of about {digits} digits, not recorded>"


class Redactor:
    """Removes secrets from audit payloads and bounds their size.

    Args:
        detectors: a ``DetectorSet``, or detector / family names (``["secret", "pii"]``);
            None means every built-in secret detector.
        keys: extra sensitive key names, added to ``DEFAULT_SENSITIVE_KEYS``.
        default_keys: False to use only ``keys``.
        patterns: ``{name: regex}`` user patterns; a match is replaced by ``[REDACTED:name]``.
        callback: ``callback(path, text) -> str | None`` called on every string after the
            built-in redaction; return a replacement, or None to keep the text.
        max_string: strings longer than this are cut, with a marker saying how much.
        max_bytes: the bound of a whole serialized event (enforced by the event builder).
        replacement: the marker; ``{detector}`` is filled in.

    Raises:
        ValueError: for an unknown detector name or a bad pattern (``UnknownDetector`` is one).
    """

    __slots__ = ("_dset", "_key_cache", "_scan_cache", "_screen", "_screen_match", "_subs",
                 "callback", "max_bytes", "max_string", "replacement")

    def __init__(
        self,
        *,
        detectors: DetectorSet | Iterable[str] | None = None,
        keys: Iterable[str] = (),
        default_keys: bool = True,
        patterns: Mapping[str, str] | None = None,
        callback: Callback | None = None,
        max_string: int = 4096,
        max_bytes: int = 65536,
        replacement: str = DEFAULT_REPLACEMENT,
    ) -> None:
        if isinstance(detectors, DetectorSet):
            dset = detectors
            if patterns:
                dset = DetectorSet([*dset, *select_detectors([], patterns=patterns)])
        else:
            dset = select_detectors(None if detectors is None else list(detectors),
                                    patterns=patterns)
        self._dset: DetectorSet | None = dset if len(dset) else None
        names = [*(DEFAULT_SENSITIVE_KEYS if default_keys else ()), *keys]
        self._subs = tuple(sorted({_norm(k) for k in names if _norm(k)}))
        self._key_cache: dict[str, bool] = {}
        self._scan_cache: dict[str, tuple[str, tuple[str, ...]]] = {}
        self._screen: Any = None  # compiled on first use
        self._screen_match: Any = None  # its yes-or-no search, made on first use
        self.callback = callback
        self.max_string = max(16, int(max_string))
        self.max_bytes = max(1024, int(max_bytes))
        self.replacement = replacement

    @classmethod
    def off(cls, *, max_string: int = 4096, max_bytes: int = 65536) -> Redactor:
        """A redactor that only bounds sizes: no detectors, no key names (for trusted logs)."""
        return cls(detectors=(), default_keys=False, max_string=max_string, max_bytes=max_bytes)

    def redact(self, value: Any, path: str = "args") -> tuple[Any, list[dict[str, str]]]:
        """Returns ``(redacted JSON-safe copy, redactions)`` for one payload."""
        found: list[dict[str, str]] = []
        return self.walk(value, path, found, self.max_string), found

    def plain_json(self, value: Any) -> str | None:
        """The compact JSON of ``value`` when redacting it can change nothing but secrets.

        That is: plain JSON data (mappings, sequences, strings, finite numbers, booleans,
        None), no callback, and small enough that no string is cut, no container shortened
        and nothing nested too deep. Whether it holds a secret is ``screen``'s question.
        None when the value needs the full walk.
        """
        if self.callback is not None or _least_size(value, self.max_string, 0) < 0:
            return None
        try:
            text = "".join(_strict_chunks(value, 0))
        except (TypeError, ValueError, RecursionError):
            return None
        return text if len(text) <= 2 * _MAX_DEPTH or self._fits(text) else None

    def plain_jsons(self, values: Sequence[Any]) -> list[str | None]:
        """``plain_json`` of each value; encoded in one C-level pass when all are plain."""
        if self.callback is not None:
            return [None] * len(values)
        if len(values) == 1:
            return [self.plain_json(values[0])]
        # Measured before encoding: one C-level call on a 10 MiB string holds the interpreter
        # lock for tens of milliseconds, and a payload that large takes the walk anyway.
        limit = self.max_string
        for v in values:
            if _least_size(v, limit, 0) < 0:
                return [self.plain_json(v) for v in values]
        try:
            texts: list[str | None] = list(map("".join, map(_strict_chunks, values,
                                                            itertools.repeat(0))))
        except (TypeError, ValueError, RecursionError):  # one is not: each on its own
            return [self.plain_json(v) for v in values]
        short = 2 * _MAX_DEPTH  # too short to nest too deep or hold too many items
        for i, text in enumerate(texts):
            if len(text) > short and not self._fits(text):  # type: ignore[arg-type]
                texts[i] = None
        return texts

    def _fits(self, text: str) -> bool:
        """Whether redacting the data of this JSON text would cut or shorten nothing."""
        n = len(text)
        return n <= self.max_string and not (
            n > 2 * _MAX_ITEMS and text.count(",") >= _MAX_ITEMS) and (
            text.count("[") + text.count("{") <= _MAX_DEPTH)

    def screen(self, texts: Sequence[str]) -> list[bool]:
        """For each JSON text (from ``plain_json``): True when it may hold something to redact.

        False proves that redacting the data it encodes changes nothing: no detector finds
        anything in any string, key or value, and no key or ``name=value`` inside text is a
        sensitive name. All texts are searched in one pass of one RE2 pattern, which is what
        makes auditing a call cheaper than deciding it. Without the ``re2`` module, or with
        a detector that cannot be screened, every text is True.
        """
        rx = self._screen
        if rx is None:
            rx = self._screen = self._compile_screen()
        if rx is _NOTHING:
            return [False] * len(texts)
        if rx is False:
            return [True] * len(texts)
        if len(texts) == 1:  # a caller committing its own event: no joining, no offsets
            text = texts[0]
            if not text.isascii():
                return [True]
            match = self._screen_match
            if match is None:
                match = self._screen_match = bytes_searcher(rx) or (
                    lambda data: rx.search(data.decode("ascii")) is not None)
            return [bool(match(text.encode("ascii")))]
        joined = _SEPARATOR.join(texts)
        if not joined.isascii():  # not JSON text as plain_json writes it: offsets would differ
            return [True] * len(texts)
        flags = [False] * len(texts)
        starts: list[int] = []
        at = 0
        for text in texts:
            starts.append(at)
            at += len(text) + len(_SEPARATOR)
        for m in rx.finditer(joined):
            flags[bisect.bisect_right(starts, m.start()) - 1] = True
            flags[bisect.bisect_right(starts, m.end() - 1) - 1] = True
        return flags

    def _compile_screen(self) -> Any:
        if self.callback is not None or _re2 is None:
            return False
        parts = []
        if self._dset is not None:
            if self._dset.json_screen is None:
                return False
            parts.append(self._dset.json_screen)
        if self._subs:
            if not all(sub.isascii() for sub in self._subs):
                return False  # lower() of non-ASCII is not a per-character mapping
            # A name is sensitive when it holds one of these after lower-casing and dropping
            # "-" and "_": the letters in order, maybe separated. It matters as a mapping key
            # (its string ends in an unescaped quote and a colon) or as NAME=value in text.
            subs = "(?i:" + "|".join("[-_]*".join(re.escape(c) for c in sub)
                                     for sub in self._subs) + ")"
            # Between the name and ``=``: any whitespace but a line break, as _ASSIGNMENT
            # takes it (escaped in JSON as \t, \f or \uXXXX).
            parts.append(subs + r"""(?:(?:[^"\\]|\\.)*":|[A-Za-z0-9_.\-]*(?:\\"|')?"""
                         r"""(?: |\\[tf]|\\u[0-9a-fA-F]{4})*[:=])""")
        if not parts:
            return _NOTHING
        options = _re2.Options()
        options.max_mem = 64 << 20  # room for the DFA of every keyword at once
        try:
            return _re2.compile("|".join(parts), options)
        except _re2.error:  # a keyword RE2 cannot take: every payload takes the walk
            return False

    def sensitive_key(self, key: str) -> bool:
        """True when values under ``key`` are redacted whole."""
        hit = self._key_cache.get(key)
        if hit is None:
            low = _norm(key[:_MAX_KEY_NAME])  # a name is short: a huge key is data, not a name
            hit = any(s in low for s in self._subs)
            if len(key) <= _MAX_KEY_NAME:
                if len(self._key_cache) > 8192:
                    self._key_cache.clear()
                self._key_cache[key] = hit
        return hit

    def walk(self, value: Any, path: str, found: list[dict[str, str]], cap: int,
             depth: int = 0) -> Any:
        """Redacts ``value`` (any JSON-ish data) into a JSON-safe copy, appending to ``found``.

        Never raises: a value that cannot be read or written (an int past the interpreter's
        digit limit, an object whose ``repr`` or ``__class__`` lies or fails) becomes a
        ``<unrecordable ...>`` placeholder, and the rest of the payload is still recorded.
        """
        kind = type(value)
        if kind is str:
            if len(value) < _MIN_SCAN and self.callback is None:
                return value
            return self.text(value, path, found, cap)
        if kind is dict or kind is FrozenDict:
            return self._mapping(value, path, found, cap, depth)
        if value is None or kind is bool or (kind is float and math.isfinite(value)):
            return value
        if kind is int:
            return self._int(value, path, found, cap)
        try:
            return self._other(value, kind, path, found, cap, depth)
        except Exception as e:  # RecursionError and MemoryError included: never lose the event
            return _placeholder(kind, e)

    def _int(self, value: int, path: str, found: list[dict[str, str]], cap: int) -> Any:
        if -10**11 < value < 10**11:
            return value
        text = _int_text(value)
        if text is None:
            return _big_int(value)
        if self._dset is None:
            return value
        # Twelve digits and up can be a card number passed as a number.
        red = self.text(text, path, found, cap)
        return value if red == text else red

    def _other(self, value: Any, kind: type, path: str, found: list[dict[str, str]], cap: int,
               depth: int) -> Any:
        # ``issubclass`` on the real type, never ``isinstance``: an object can claim any
        # ``__class__`` it likes, and would then be read as something it is not.
        if issubclass(kind, str):  # a str enum: its value, as JSON writes it
            return self.text(str.__str__(value), path, found, cap)
        if depth >= _MAX_DEPTH:
            return "<too deep>"
        if issubclass(kind, Mapping):
            return self._mapping(value, path, found, cap, depth)
        if issubclass(kind, list | tuple | set | frozenset):
            items = []
            for i, v in enumerate(value):
                if i >= _MAX_ITEMS:
                    items.append(f"… {len(value) - _MAX_ITEMS} more items not recorded")
                    break
                items.append(self.walk(v, _child(path, i), found, cap, depth + 1))
            return items
        if issubclass(kind, bytes | bytearray):
            head = bytes(value[:cap + _SCAN_MARGIN])  # decoding 10 MiB would stall every thread
            text = head.decode("utf-8", "backslashreplace")
            if len(value) > len(head):
                text += f"…[truncated {len(value) - len(head)} bytes]"
            return self.text(text, path, found, cap)
        if issubclass(kind, int):  # int subclasses (enums)
            return self._int(int.__index__(value), path, found, cap)
        if issubclass(kind, float):  # nan and infinities, float subclasses
            number = float.__float__(value)
            return number if math.isfinite(number) else float.__repr__(number)
        try:
            text = repr(value)
        except Exception as e:
            return _placeholder(kind, e)
        if type(text) is not str:
            return _placeholder(kind)
        return self.text(text, path, found, cap)

    def _mapping(self, value: Mapping[Any, Any], path: str, found: list[dict[str, str]],
                 cap: int, depth: int) -> dict[str, Any]:
        if depth >= _MAX_DEPTH:
            return {"…": "nested too deep, not recorded"}
        out: dict[str, Any] = {}
        plain = self.callback is None
        for i, (k, v) in enumerate(value.items()):
            if i >= _MAX_ITEMS:
                out["…"] = f"{len(value) - _MAX_ITEMS} more items not recorded"
                break
            raw = k if type(k) is str else _key_text(k)
            key = raw
            if self._dset is not None and len(raw) >= _MIN_SCAN:
                # The key is redacted before it names anything: a secret used as a key must
                # not reach the log through a redaction's path either.
                seen: list[dict[str, str]] = []
                key = self.text(raw, path, seen, cap)
                if seen:
                    where = _child(path, key) + " (key)"
                    found.extend({"path": where, "detector": f["detector"]} for f in seen)
            if key in out:  # two keys redacted alike (or cut alike) must both be recorded
                key = _unique(key, out)
            if self.sensitive_key(raw) and v is not None and type(v) not in _NUMBERS:
                out[key] = self.replacement.format(detector=KEY_DETECTOR, category="key")
                found.append({"path": _child(path, key), "detector": KEY_DETECTOR})
            elif plain and type(v) is str and len(v) < _MIN_SCAN:
                out[key] = v
            else:
                out[key] = self.walk(v, _child(path, key), found, cap, depth + 1)
        return out

    def text(self, text: str, path: str, found: list[dict[str, str]], cap: int) -> str:
        """Redacts and caps one string.

        The work is bounded whatever the length: only the first ``cap`` characters are kept,
        and only those plus a margin (so a secret straddling the cut is seen whole) are
        scanned or handed to the callback; the rest is cut unread.
        """
        if type(text) is not str:
            text = "" if text is None else _key_text(text)
        cut = 0
        if len(text) > cap + _SCAN_MARGIN:
            cut = len(text) - cap - _SCAN_MARGIN
            text = text[:cap + _SCAN_MARGIN]
        if self._dset is not None and len(text) >= _MIN_SCAN:
            hit = self._scan_cache.get(text) if len(text) <= _CACHED_CHARS else None
            if hit is None:
                hit = self._scan(text)
                if len(text) <= _CACHED_CHARS:
                    if len(self._scan_cache) >= _CACHE_SIZE:
                        self._scan_cache.clear()
                    self._scan_cache[text] = hit
            if hit[1]:
                text = hit[0]
                for detector in hit[1]:
                    found.append({"path": path, "detector": detector})
        if self.callback is not None:
            replaced = self.callback(path, text)
            if replaced is not None and replaced != text:
                text = _key_text(replaced)
                found.append({"path": path, "detector": "callback"})
        if len(text) > cap or cut:
            text = f"{text[:cap]}…[truncated {len(text) - min(cap, len(text)) + cut} chars]"
        return text

    def _scan(self, text: str) -> tuple[str, tuple[str, ...]]:
        assert self._dset is not None
        findings = self._dset.scan(text)
        if findings.truncated and not findings:
            # A detector gave up on hostile text: nobody looked at all of it.
            return self.replacement.format(detector="unscanned", category="unscanned"), (
                "unscanned",)
        names = tuple(dict.fromkeys(f.detector for f in findings))
        if findings:
            text = redact(text, findings, self.replacement)
        if self._subs and ("=" in text or ":" in text):
            text, assigned = self._assignments(text)
            if assigned:
                names = (*names, KEY_DETECTOR)
        return text, names

    def _assignments(self, text: str) -> tuple[str, bool]:
        out: list[str] = []
        pos = 0  # copied up to here
        at = 0  # search from here: after a harmless name, its value may hold the next name
        search = _ASSIGNMENT.search
        while (m := search(text, at)) is not None:
            raw = m.group("value")
            value = raw.strip("\"'")
            if not value or value.startswith("[REDACTED") or not self.sensitive_key(m["name"]):
                at = m.end("name")
                continue
            start, end = m.span("value")
            if raw[0] in "\"'":  # the quotes stay, one or two on each side
                start += len(raw) - len(raw.lstrip(raw[0]))
                end -= len(raw) - len(raw.rstrip(raw[0]))
            elif value.lower() in _AUTH_SCHEMES and (cred := _NEXT_TOKEN.match(text, end)):
                start, end = cred.start(1), cred.end(1)  # keep "Bearer", hide what follows
            out.append(text[pos:start])
            out.append(self.replacement.format(detector=KEY_DETECTOR, category="key"))
            pos = at = max(end, start)
        if not out:
            return text, False
        out.append(text[pos:])
        return "".join(out), True


def _key_text(value: Any) -> str:
    """``str(value)`` for a mapping key or a callback's answer; a placeholder when it fails."""
    try:
        text = str(value)
    except Exception as e:
        return _placeholder(type(value), e)
    return str.__str__(text) if isinstance(text, str) else _placeholder(type(value))


def _unique(key: str, taken: Mapping[str, Any]) -> str:
    n = 2
    while f"{key} ({n})" in taken:
        n += 1
    return f"{key} ({n})"


def _least_size(value: Any, budget: int, depth: int) -> int:
    """``budget`` less a lower bound of the length of ``value``'s JSON; negative as soon as the
    bound passes it, so the work is bounded by ``budget`` too (a 10 MiB string costs one
    ``len``, a million-item list a few thousand steps)."""
    kind = type(value)
    if kind is str:
        return budget - len(value) - 2
    if kind is dict or kind is FrozenDict:
        if depth > _MAX_DEPTH:
            return -1
        budget -= 2
        for k, v in value.items():
            budget -= (len(k) if type(k) is str else 1) + 4
            kind = type(v)
            if kind is str:
                budget -= len(v)
            elif kind not in _NUMBERS and v is not None:
                budget = _least_size(v, budget, depth + 1)
            if budget < 0:
                return budget
        return budget
    if kind is list or kind is tuple:
        if depth > _MAX_DEPTH:
            return -1
        budget -= 2
        for v in value:
            budget = _least_size(v, budget - 1, depth + 1)
            if budget < 0:
                return budget
        return budget
    return budget - 1


def _norm(key: str) -> str:
    return key.lower().replace("-", "").replace("_", "")
