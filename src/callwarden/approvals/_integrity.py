# ruff: noqa: RUF001, RUF002  (the look-alike letters below are what this module maps)
"""What makes an approval trustworthy: the approvals key, sealed records, a typed canonical
encoding for digests, and identities compared the way people read them.

Threat: an agent whose tools can write the state store (``sqlite3 state.db ...``, a Redis
client) could otherwise write itself an approved request or a wildcard grant. Every record
``Approvals`` writes is sealed with an HMAC under the *approvals key*, bound to the record's
key in the store, and a record whose seal does not verify is ignored. The key is the approver
credential: whoever holds it can approve, so it lives outside any workspace
(``~/.config/callwarden/approvals.key`` by default, created on first use, readable only by its
owner) and the recommended baseline denies an agent's tools any access to it.
"""

from __future__ import annotations

import hmac
import json
import math
import os
import re
import secrets
import stat
import unicodedata
from collections.abc import Mapping
from hashlib import sha256
from pathlib import Path
from typing import Any

from callwarden._call import Opaque
from callwarden.exceptions import ConfigError

__all__ = ["KEY_ENV", "Seal", "canonical", "default_key_file", "identity", "load_key",
           "process_key"]

KEY_ENV = "CALLWARDEN_APPROVALS_KEY_FILE"
_KEY_BYTES = 32
_MAC_FIELD = "mac"
# One key for this process's in-memory stores: nothing outside the process can reach them.
_PROCESS_KEY = secrets.token_bytes(_KEY_BYTES)


def process_key() -> bytes:
    """The key for records that never leave this process (a ``MemoryStore``)."""
    return _PROCESS_KEY


def default_key_file() -> Path:
    """``$CALLWARDEN_APPROVALS_KEY_FILE``, else ``$XDG_CONFIG_HOME/callwarden/approvals.key``
    (``~/.config/callwarden/approvals.key``)."""
    named = os.environ.get(KEY_ENV)
    if named:
        return Path(named).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "callwarden" / "approvals.key"


def load_key(path: str | os.PathLike[str] | None = None, *, create: bool = True) -> bytes:
    """Reads the approvals key (hex, at least 32 bytes) from ``path`` (default:
    :func:`default_key_file`), creating it, readable by its owner only, when it is missing.

    Raises:
        ConfigError: the file cannot be read or made, is readable by others, or holds no key.
    """
    path = Path(path).expanduser() if path is not None else default_key_file()
    fix = f"chmod 600 {path}, or remove it to have a new key made"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        if not create:
            raise ConfigError(
                f"no approvals key at {path}",
                hint=f"run callwarden where it can create one, or set {KEY_ENV}") from None
        return _create_key(path)
    except OSError as e:
        raise ConfigError(f"cannot read the approvals key {path}: {e.strerror or e}",
                          hint=f"it must be a regular file readable by you; {fix}") from e
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"the approvals key {path} is not a regular file", hint=fix)
        if info.st_mode & 0o077:
            raise ConfigError(
                f"the approvals key {path} can be read by other users "
                f"(mode {stat.S_IMODE(info.st_mode):o}); it is the approver credential",
                hint=fix)
        text = f.read(4096)
    try:
        key = bytes.fromhex(text.decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        key = b""
    if len(key) < _KEY_BYTES:
        raise ConfigError(f"the approvals key {path} holds no key ({_KEY_BYTES} bytes in hex)",
                          hint=f"remove it to have a new key made, or set {KEY_ENV}")
    return key


def _create_key(path: Path) -> bytes:
    key = secrets.token_bytes(_KEY_BYTES)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # Written whole to a private file, then linked into place: a concurrent reader sees
        # either no key or the whole key, and of two creators exactly one wins.
        temp = path.with_name(f".{path.name}.{secrets.token_hex(6)}")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(key.hex() + "\n")
            os.link(temp, path)
        except FileExistsError:
            return load_key(path, create=False)  # another process made it first
        finally:
            temp.unlink(missing_ok=True)
    except OSError as e:
        raise ConfigError(f"cannot create the approvals key {path}: {e.strerror or e}",
                          hint=f"set {KEY_ENV} to a file you can write") from e
    return key


class Seal:
    """Seals records with the approvals key and checks seals (HMAC-SHA256)."""

    __slots__ = ("_key",)

    def __init__(self, key: bytes) -> None:
        self._key = key

    def _mac(self, where: str, record: Mapping[str, Any]) -> str:
        body = {k: v for k, v in record.items() if k != _MAC_FIELD}
        # Records are JSON data (what the store keeps), so sorted compact JSON is canonical for
        # them; the call they bind to is the typed ``digest`` inside.
        text = json.dumps([where, body], sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False, default=_refuse)
        return hmac.new(self._key, text.encode("utf-8", "surrogatepass"), sha256).hexdigest()

    def sealed(self, where: str, record: Mapping[str, Any]) -> dict[str, Any]:
        """``record`` with its seal, for the store key ``where``."""
        return {**record, _MAC_FIELD: self._mac(where, record)}

    def opened(self, where: str, record: Any) -> dict[str, Any] | None:
        """``record`` without its seal when the seal is good for ``where``; None otherwise (no
        seal, a forged or edited record, or one copied from another key)."""
        if not isinstance(record, Mapping):
            return None
        mac = record.get(_MAC_FIELD)
        if not isinstance(mac, str) or not hmac.compare_digest(mac, self._mac(where, record)):
            return None
        return {k: v for k, v in record.items() if k != _MAC_FIELD}


def _refuse(value: Any) -> Any:
    raise TypeError(f"an approval record holds a {type(value).__name__}, not JSON data")


# -- a typed canonical encoding -----------------------------------------------------------


def canonical(value: Any) -> bytes:
    """An unambiguous byte encoding of a JSON-like value: every scalar carries its type, so
    the string ``"inf"`` and the float ``inf``, ``"1"`` and ``1``, ``1`` and ``1.0`` or
    ``True`` differ. Lists and tuples encode alike, as do a mapping and a ``FrozenDict``;
    mapping keys are sorted."""
    out: list[bytes] = []
    _encode(value, out, 0)
    return b"".join(out)


def _text(tag: bytes, text: str) -> bytes:
    data = text.encode("utf-8", "surrogatepass")
    return b"%s%d:%s" % (tag, len(data), data)


def _key(key: Any) -> bytes:
    return _text(b"s", key) if type(key) is str else canonical(key)


def _encode(value: Any, out: list[bytes], depth: int) -> None:
    kind = type(value)
    if kind is str:
        out.append(_text(b"s", value))
    elif value is None:
        out.append(b"n")
    elif kind is bool:
        out.append(b"T" if value else b"F")
    elif kind is int:
        out.append(b"i%x;" % value)  # hex: no digit limit on huge ints
    elif kind is float:
        out.append(b"f%s;" % (value.hex() if math.isfinite(value) else repr(value)).encode())
    elif depth > 200:
        raise ValueError("a value nested more than 200 levels deep has no digest")
    elif isinstance(value, dict | Mapping):
        items = sorted(((_key(k), v) for k, v in value.items()), key=_first)
        out.append(b"m%d{" % len(items))
        for key, item in items:
            out.append(key)
            _encode(item, out, depth + 1)
        out.append(b"}")
    elif isinstance(value, list | tuple):
        out.append(b"l%d[" % len(value))
        for item in value:
            _encode(item, out, depth + 1)
        out.append(b"]")
    elif isinstance(value, bool):
        out.append(b"T" if value else b"F")
    elif isinstance(value, int):
        _encode(int.__int__(value), out, depth)
    elif isinstance(value, float):
        _encode(float.__float__(value), out, depth)
    elif isinstance(value, str):  # an enum of our own records (a status)
        out.append(_text(b"s", str.__str__(value)))
    elif isinstance(value, bytes | bytearray):
        data = bytes(value)
        out.append(b"b%d:%s" % (len(data), data))
    elif isinstance(value, Opaque):
        out.append(_text(b"o", repr(value)))
    else:  # a date, a Decimal, a UUID ...: its type and its text
        out.append(_text(b"x", f"{type(value).__qualname__}:{value}"))


def _first(pair: tuple[bytes, Any]) -> bytes:
    return pair[0]


# -- identities as people read them ------------------------------------------------------------

# Letters and digits that look like others (after Unicode TR39's confusables): Cyrillic,
# Greek and Armenian look-alikes of Latin letters, and 0/O, 1/l/I. Applied before case folding.
_CONFUSABLES = str.maketrans({
    **dict.fromkeys("аɑα", "a"), **dict.fromkeys("АΑ", "A"), **dict.fromkeys("вВβΒ", "B"),
    **dict.fromkeys("сϲ", "c"), **dict.fromkeys("СϹ", "C"), "ԁ": "d", **dict.fromkeys("еёε", "e"),
    **dict.fromkeys("ЕЁΕ", "E"), "ɡ": "g", **dict.fromkeys("һ", "h"),
    **dict.fromkeys("НΗ", "H"), **dict.fromkeys("іιı", "i"), "ј": "j", "Ј": "J",
    **dict.fromkeys("кκ", "k"), **dict.fromkeys("КΚ", "K"), **dict.fromkeys("ӏℓ|1I", "l"),
    **dict.fromkeys("МΜ", "M"), "Ν": "N", **dict.fromkeys("оοօ0", "o"),
    **dict.fromkeys("ОΟ", "O"), **dict.fromkeys("рρ", "p"), **dict.fromkeys("РΡ", "P"),
    "ԛ": "q", **dict.fromkeys("ѕ", "s"), **dict.fromkeys("ТΤ", "T"), **dict.fromkeys("τ", "t"),
    **dict.fromkeys("υս", "u"), "ν": "v", **dict.fromkeys("ԝ", "w"), **dict.fromkeys("хχ", "x"),
    **dict.fromkeys("ХΧ", "X"), **dict.fromkeys("уγ", "y"), **dict.fromkeys("УΥ", "Y"),
    "Ζ": "Z", **dict.fromkeys("‐‑‒–—―−⁃﹣－", "-"),
})
_INVISIBLE = re.compile(r"[\s\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f"
                        r"\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff"
                        r"\uffa0]+")


def identity(name: str) -> str:
    """A name as people would read it: compatibility forms folded (NFKC), invisible and
    spacing characters and accents removed, look-alike letters mapped to one, case folded.

    ``AGENT-1``, ``" agent-1 "``, ``agent\\u200b-1`` and ``аgent-1`` (a Cyrillic ``а``) are all
    ``agent-l``: the self-approval check compares these, so none of them can approve a call
    ``agent-1`` made.
    """
    text = unicodedata.normalize("NFKC", name)
    text = _INVISIBLE.sub("", text)
    text = "".join(c for c in unicodedata.normalize("NFD", text)
                   if unicodedata.category(c) not in ("Mn", "Cf", "Cc"))
    return text.translate(_CONFUSABLES).casefold()
