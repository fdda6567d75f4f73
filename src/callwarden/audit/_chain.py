"""A tamper-evident JSONL audit log: every line is chained to the one before it, and the
chain is signed (Ed25519) at every rotation and on close.

Opt in per ``jsonl`` sink in the policy::

    audit:
      - {jsonl: logs/audit.jsonl, chain: true}                      # hash chain only
      - {jsonl: logs/audit.jsonl, sign_key: /etc/callwarden/audit.key}  # chain + signatures

Design:

* **Streams, not one chain per file.** Several processes (and a forked child) may append to
  one file without a lock between them, so each sink instance writes a *stream* of its own: a
  random id (new in a forked child), a sequence number from 1, and the previous line's hash
  of that stream. Lines of different streams interleave freely; ``callwarden audit verify``
  follows each stream across the file and its rotated pieces.
* **What a line looks like.** The event's JSON line, exactly as the plain sink writes it, with
  one member added at the end::

      {...event...,"chain":{"stream":"9f2c51d07a3b64e1","seq":7,"prev":"<64 hex>","hash":"<64 hex>"}}

  ``hash = sha256("callwarden-chain/1\\n" stream "\\n" seq "\\n" prev "\\n" + event bytes)``,
  where the event bytes are the line without its ``chain`` member (the bytes written, so the
  verifier needs no JSON canonicalization, and a writer pays one SHA-256, no re-encoding).
  Storing ``hash`` names the line that was edited, not only the line after it.
* **Anchors.** A stream's first line has, as ``prev``, the hash of the last chained line
  already in the file (or in its newest rotated piece) and names it in ``"after":
  "stream:seq"``; 64 zeros when there is none. Removing every line of an earlier writer's
  stream (yesterday's run, say) then breaks the stream that came after it.
* **Seals.** At every rotation (in the file being set aside) and on close the sink appends a
  seal, itself a link of the chain: ``{"schema_version":1,"type":"audit_seal","event_id",
  "time","reason":"rotate"|"close","key","sig","chain":{...}}``. With a signing key, ``sig`` is
  the Ed25519 signature of ``"callwarden-seal/1\\n" stream seq prev reason time key`` (one per
  line) and ``key`` the public key (hex): the seal signs the stream's head, hence every line
  before it. Without a key ``key`` and ``sig`` are null: the seal still marks where a stream
  was closed, so a cut after it shows.
* **What it detects.** Chaining alone: an edited, removed, reordered or duplicated line, a
  stream cut after its last seal or whose close seal was removed. With signatures checked
  against the public key (``verify --public-key``): also a rewrite of the whole log, which
  without the private key cannot be re-signed. Lines written after a stream's last seal (a
  writer still running, or killed) are covered by the chain only, not by a signature. Not
  detected: the removal of the newest streams whole (nothing after them refers to them) --
  keep the log's head elsewhere too (ship it) if that matters.
* **The key** is read when the sink is opened (the guard is built): a missing, malformed or
  group/world-readable key file is then a policy error, never an unsigned log. What-if uses
  of the policy (lint, replay, explain) open no sink and need no key; verifying needs only
  the public key. Keep the private key outside the agent's reach: a file of the user that
  runs the guard, mode 0600, in a directory the agent's tools cannot read (``callwarden
  audit keygen`` writes one).

Cost: one SHA-256 and a lock per line (the plain sink appends lock-free); one signature per
seal. ``bench/bench_audit_chain.py`` measures both.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import re
import secrets
import stat
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from callwarden._call import new_id
from callwarden.audit._events import iso_time
from callwarden.audit._sinks import JsonlSink, encode_line, rotated_files
from callwarden.exceptions import ConfigError, MissingDependency

__all__ = ["GENESIS", "SEAL_TYPE", "ChainedJsonlSink", "SigningKey", "SigningKeyError",
           "chain_hash", "generate_signing_key", "load_signing_key", "seal_message"]

GENESIS = "0" * 64
"""The ``prev`` of a stream's first line."""
SEAL_TYPE = "audit_seal"
SEAL_REASONS = ("rotate", "close")


def chain_hash(stream: str, seq: int, prev: str, event: bytes) -> str:
    """The hash of one link: the event's bytes (its line without the ``chain`` member) bound to
    its stream, its place in it and the hash before it."""
    digest = hashlib.sha256(b"callwarden-chain/1\n%s\n%d\n%s\n" % (
        stream.encode("ascii"), seq, prev.encode("ascii")))
    digest.update(event)
    return digest.hexdigest()


def seal_message(stream: str, seq: int, prev: str, reason: str, when: str,
                 key: str) -> bytes:
    """The bytes a seal signs: the stream's head (``prev``, the hash of every line before the
    seal) and what the seal says about it."""
    return "\n".join(("callwarden-seal/1", stream, str(seq), prev, reason, when, key)
                     ).encode("ascii")


def chain_suffix(stream: str, seq: int, prev: str, digest: str, after: str | None = None
                 ) -> str:
    """The ``chain`` member as it ends a line (comma included, closing brace of the line too)."""
    anchor = "" if after is None else f',"after":"{after}"'
    return (f',"chain":{{"stream":"{stream}","seq":{seq},"prev":"{prev}","hash":"{digest}"'
            f'{anchor}}}}}')


_LAST_LINK = re.compile(rb'"chain":\{"stream":"([0-9a-f]{1,64})","seq":([0-9]{1,19}),'
                        rb'"prev":"[0-9a-f]{64}","hash":"([0-9a-f]{64})"')
# The longest chain member a line after the first of its stream gets (a 20-digit seq).
_MEMBER_MAX = len(chain_suffix("0" * 16, 10**19, GENESIS, GENESIS)) + 1
_TAIL = 1 << 17  # an event is at most 64 KiB (the redactor's max_bytes default)


def last_link(path: Path) -> tuple[str, str] | None:
    """``("stream:seq", hash)`` of the last chained line in the file, or None."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - _TAIL))
            tail = f.read()
    except OSError:
        return None
    matches = _LAST_LINK.findall(tail)
    if not matches:
        return None
    stream, seq, digest = matches[-1]
    return f"{stream.decode()}:{int(seq)}", digest.decode()


class SigningKeyError(ConfigError):
    """The signing key cannot be used: missing, readable by others, or not an Ed25519
    private key. ``hint`` says what to do."""


def _crypto() -> Any:
    try:
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError as e:
        raise MissingDependency("audit log signing", "cryptography", "audit-signing") from e
    return ed25519


class SigningKey:
    """An Ed25519 private key that signs seals; ``public`` is its public key in hex."""

    __slots__ = ("_key", "public")

    def __init__(self, key: Any) -> None:
        from cryptography.hazmat.primitives import serialization

        self._key = key
        self.public: str = key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex()

    def __repr__(self) -> str:
        return f"SigningKey(public={self.public[:16]}…)"

    def sign(self, data: bytes) -> str:
        """The signature of ``data``, in hex."""
        return bytes(self._key.sign(data)).hex()


def load_signing_key(path: str | Path) -> SigningKey:
    """Reads an Ed25519 private key (PEM, PKCS#8, unencrypted) from a file only its owner can
    read.

    Raises:
        SigningKeyError: the file is missing, readable or writable by group or others, or not
            such a key (``hint`` says what to write).
        MissingDependency: ``cryptography`` is not installed.
    """
    ed25519 = _crypto()
    from cryptography.hazmat.primitives import serialization

    path = Path(path)
    try:
        info = os.stat(path)
        data = path.read_bytes()
    except FileNotFoundError:
        raise SigningKeyError(f"the signing key {path} does not exist",
                              hint=f"create one: callwarden audit keygen {path}") from None
    except OSError as e:
        raise SigningKeyError(f"the signing key {path} cannot be read: {e.strerror or e}",
                              hint="the guard's user must be able to read it") from e
    if not stat.S_ISREG(info.st_mode):
        raise SigningKeyError(f"the signing key {path} is not a file")
    if os.name == "posix" and info.st_mode & 0o077:
        raise SigningKeyError(
            f"the signing key {path} is accessible to others (mode "
            f"{stat.S_IMODE(info.st_mode):04o})", hint=f"chmod 600 {path}, and keep it where "
            "the agent's tools cannot read it")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as e:
        raise SigningKeyError(
            f"the signing key {path} is not an unencrypted Ed25519 private key in PEM",
            hint=f"write one with: callwarden audit keygen {path}") from e
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise SigningKeyError(f"the signing key {path} is not an Ed25519 key",
                              hint=f"write one with: callwarden audit keygen {path}")
    return SigningKey(key)


def generate_signing_key(path: str | Path, *, force: bool = False) -> str:
    """Writes a new Ed25519 private key to ``path`` (PEM, mode 0600; its directory is created
    with mode 0700) and its public key, in hex, to ``path.pub``; returns the public key.

    Raises:
        FileExistsError: ``path`` exists and ``force`` is false.
        MissingDependency: ``cryptography`` is not installed.
    """
    ed25519 = _crypto()
    from cryptography.hazmat.primitives import serialization

    path = Path(path)
    key = ed25519.Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if force else os.O_EXCL)
    fd = os.open(path, flags, 0o600)
    try:
        os.fchmod(fd, 0o600)  # an existing file (force) keeps its mode otherwise
        os.write(fd, pem)
    finally:
        os.close(fd)
    public = SigningKey(key).public
    Path(f"{path}.pub").write_text(public + "\n", encoding="ascii")
    return public


class ChainedJsonlSink(JsonlSink):
    """A :class:`JsonlSink` whose lines form a hash chain per writer (stream), sealed (and
    signed, with a key) at every rotation and on close. See the module docstring.

    Args:
        path, rotate_bytes, rotate_interval, fsync, inline: as for ``JsonlSink``.
        sign_key: a ``SigningKey``, or the path of its file (``load_signing_key``); None
            chains without signing.

    Raises:
        SigningKeyError, MissingDependency: ``sign_key`` is a path that cannot be used.
    """

    def __init__(self, path: str | Path, *, sign_key: SigningKey | str | Path | None = None,
                 rotate_bytes: int | None = None, rotate_interval: float | None = None,
                 fsync: bool = False, inline: bool = True) -> None:
        super().__init__(path, rotate_bytes=rotate_bytes, rotate_interval=rotate_interval,
                         fsync=fsync, inline=inline)
        self.signer = load_signing_key(sign_key) if isinstance(sign_key, str | Path) \
            else sign_key
        self._new_stream()
        _LIVE.add(self)

    def __repr__(self) -> str:
        return f"ChainedJsonlSink({str(self.path)!r}, stream={self.stream!r})"

    def _new_stream(self) -> None:
        self.stream = secrets.token_hex(8)
        self._prefix = b"callwarden-chain/1\n%s\n" % self.stream.encode("ascii")
        self._seq = 0
        self._head = GENESIS
        self._sealed = 0
        self._after: str | None = None

    def write(self, event: dict[str, Any]) -> None:
        """Appends the event as one chained line."""
        self.write_lines([encode_line(event)])

    def write_many(self, events: list[dict[str, Any]]) -> None:
        """Appends several events (see ``write_lines``)."""
        self.write_lines([encode_line(e) for e in events])

    def append_line(self, line: str) -> None:
        """Appends one encoded event. Under the sink's lock, unlike the plain sink: a stream's
        lines must reach the file in the order of their sequence numbers."""
        event = line.encode("ascii")
        with self._lock:
            fd, seq, head = self._fd, self._seq + 1, self._head
            # The common case, inlined (it is every decision's cost): an open file, a stream
            # under way, no rotation due even for the longest chain member, no fsync.
            if fd < 0 or seq == 1 or self.fsync or len(event) < 3 \
                    or (self.rotate_bytes and self._size + len(event) + _MEMBER_MAX
                        > self.rotate_bytes) \
                    or (self.rotate_interval and time.time() >= self._next_rotation):
                self._write_lines([line])
                return
            digest = hashlib.sha256(self._prefix + b"%d\n%s\n" % (seq, head.encode("ascii"))
                                    + event).hexdigest()
            data = event[:-1] + (f',"chain":{{"stream":"{self.stream}","seq":{seq},'
                                 f'"prev":"{head}","hash":"{digest}"}}}}\n').encode("ascii")
            written = self._write(fd, data)
            while written < len(data):  # only on a full disk or a size limit: keep it whole
                written += os.write(fd, data[written:])
            self._size += len(data)
            self._seq, self._head = seq, digest

    def write_lines(self, lines: list[str]) -> None:
        """Chains encoded events (JSON objects without their newline) and appends them, in
        order, in as few ``os.write`` calls of whole lines as rotation allows."""
        with self._lock:
            self._write_lines(lines)

    def _write_lines(self, lines: list[str]) -> None:
        if self._fd < 0:
            self._open()
        if not self._seq:
            self._anchor()
        rotates = bool(self.rotate_bytes or self.rotate_interval)
        out: list[bytes] = []
        size = 0
        for line in lines:
            data, digest = self._link(line.encode("ascii"))
            if rotates and self._due(size + len(data)):
                if out:
                    self._put(b"".join(out))
                    out, size = [], 0
                self._rotate()
                data, digest = self._link(line.encode("ascii"))
            out.append(data)
            size += len(data)
            self._seq += 1
            self._head = digest
        if out:
            self._put(b"".join(out))
        if self.fsync:
            os.fsync(self._fd)

    def _anchor(self) -> None:
        """Ties a new stream to the last chained line already written (in this file, or else
        in its newest rotated piece): its first line's ``prev`` is that line's hash, and
        ``after`` names it. Removing a whole earlier stream then breaks a later one."""
        link = last_link(self.path)
        if link is None:
            pieces = [p for p in rotated_files(self.path) if p != self.path]
            link = last_link(pieces[-1]) if pieces else None
        if link is not None:
            self._after, self._head = link

    def _link(self, event: bytes) -> tuple[bytes, str]:
        """The next line of the stream for an event's bytes, and its hash (not yet taken)."""
        seq = self._seq + 1
        hexed = hashlib.sha256(self._prefix + b"%d\n%s\n" % (seq, self._head.encode("ascii"))
                               + event).hexdigest()
        body = event[:-1] if len(event) > 2 else b"{"
        suffix = chain_suffix(self.stream, seq, self._head, hexed,
                              self._after if seq == 1 else None).encode("ascii")
        return body + (suffix if len(event) > 2 else suffix[1:]) + b"\n", hexed

    def _due(self, pending: int) -> bool:
        return bool((self.rotate_bytes and self._size
                     and self._size + pending > self.rotate_bytes)
                    or (self.rotate_interval and time.time() >= self._next_rotation))

    def _put(self, data: bytes) -> None:
        written = self._write(self._fd, data)
        while written < len(data):  # only on a full disk or a size limit: keep lines whole
            written += os.write(self._fd, data[written:])
        self._size += len(data)

    def _seal(self, reason: str) -> None:
        """Appends a seal of the stream's head (lock held, file open)."""
        seq, prev = self._seq + 1, self._head
        when = iso_time(time.time())
        key = sig = None
        if self.signer is not None:
            key = self.signer.public
            sig = self.signer.sign(seal_message(self.stream, seq, prev, reason, when, key))
        line = encode_line({"schema_version": 1, "type": SEAL_TYPE, "event_id": new_id(),
                            "time": when, "reason": reason, "key": key, "sig": sig})
        data, digest = self._link(line.encode("ascii"))
        self._put(data)
        self._seq, self._head, self._sealed = seq, digest, seq
        if self.fsync:
            os.fsync(self._fd)

    def _rotate(self) -> None:
        # The seal goes into the file being set aside: it closes this stream's part of it.
        if self._fd >= 0 and self._size and self._seq > self._sealed:
            self._seal("rotate")
        super()._rotate()

    def close(self) -> None:
        """Seals the stream (when it has lines since its last seal) and closes the file; the
        next write reopens it and goes on with the same stream."""
        with self._lock:
            if self._fd >= 0 and self._seq > self._sealed:
                self._seal("close")
            self._close_files()


_LIVE: weakref.WeakSet[ChainedJsonlSink] = weakref.WeakSet()


def _after_fork() -> None:
    # A forked child must not go on with its parent's stream: two writers would then number
    # the same stream. It starts one of its own (in the same file, on the inherited descriptor).
    for sink in list(_LIVE):
        sink._lock = threading.Lock()
        sink._new_stream()


def _seal_at_exit() -> None:
    # Registered before the auditor's exit hook (this module is imported by its config), so
    # it runs after it: the events the auditor flushes at exit are sealed too.
    for sink in list(_LIVE):
        with contextlib.suppress(OSError):
            sink.close()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
atexit.register(_seal_at_exit)
