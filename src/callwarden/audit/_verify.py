"""Offline verification of chained audit logs (see :mod:`callwarden.audit._chain`).

:func:`verify_logs` reads the files in order (a log's rotated pieces, oldest first, then the
log), follows every stream and stops at the first problem, naming its file, line and kind:

============== ===========================================================================
not-json       a line that is not a JSON object (binary junk, a hand edit)
unchained      an event without a ``chain`` (an unchained writer, or a line put in by hand)
edited         a line whose content does not match its hash, or whose ``prev`` does not
               match the line before it in its stream
removed        a stream's sequence jumps: lines are missing (or a rotated piece not given)
reordered      a stream's line comes before an earlier one of its own
duplicated     a line repeated
truncated      the file ends in the middle of a line, or a stream ends after its last seal
               without a close seal (cut, its close seal removed, or its writer did not
               close: killed, or still running — ``allow_open`` accepts that)
appended       lines of a stream after its close seal that no later seal covers
bad-signature  a seal whose signature does not verify
unknown-key    a seal signed by a key other than the trusted ones (``public_keys``)
unsigned       an unsigned seal where signatures are required (trusted keys given, or
               earlier seals of its stream were signed)
============== ===========================================================================

Nothing in the files can make it raise: every line is read as bytes, and what cannot be
parsed is a problem it reports.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from callwarden.audit._chain import (
    GENESIS,
    SEAL_REASONS,
    SEAL_TYPE,
    chain_hash,
    chain_suffix,
    seal_message,
)
from callwarden.audit._sinks import rotated_files
from callwarden.exceptions import CallwardenError, MissingDependency

__all__ = ["ChainProblem", "VerifyReport", "log_files", "parse_public_key", "verify_logs"]

_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEX128 = re.compile(r"[0-9a-f]{128}")
_STREAM = re.compile(r"[0-9a-f]{1,64}")
_AFTER = re.compile(r"[0-9a-f]{1,64}:[1-9][0-9]{0,18}")
_RECENT = 256  # lines of a stream whose hash is kept: writers anchor to the newest line


@dataclass(frozen=True, slots=True)
class ChainProblem:
    """The first thing wrong with a log: where (file and 1-based line), which kind, and why."""

    file: Path
    line: int
    kind: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.kind}: {self.message}"


@dataclass(slots=True)
class VerifyReport:
    """What :func:`verify_logs` found: counts, the signing keys seen, open streams (accepted
    with ``allow_open``) and the first ``problem`` (None when the log is intact)."""

    files: list[Path]
    lines: int = 0
    events: int = 0
    seals: int = 0
    signed: int = 0
    streams: int = 0
    closed: int = 0
    open_streams: list[str] = field(default_factory=list)
    unsealed: int = 0
    keys: set[str] = field(default_factory=set)
    trusted: bool = False
    problem: ChainProblem | None = None

    @property
    def ok(self) -> bool:
        """Whether the log is intact."""
        return self.problem is None

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data."""
        problem = self.problem
        return {"ok": self.ok, "files": [str(f) for f in self.files], "lines": self.lines,
                "events": self.events, "seals": self.seals, "signed": self.signed,
                "streams": self.streams, "closed": self.closed,
                "open_streams": self.open_streams, "unsealed": self.unsealed,
                "keys": sorted(self.keys), "trusted": self.trusted,
                "problem": None if problem is None else {
                    "file": str(problem.file), "line": problem.line, "kind": problem.kind,
                    "message": problem.message}}

    def summary(self) -> str:
        """One line: ``OK: ...`` with the counts, or ``FAIL: <the problem>``."""
        if self.problem is not None:
            return f"FAIL: {self.problem}"
        text = (f"OK: {len(self.files)} file(s), {self.lines} line(s), {self.events} event(s) "
                f"in {self.streams} stream(s), {self.closed} closed; {self.seals} seal(s)")
        if self.signed:
            keys = ", ".join(k[:16] for k in sorted(self.keys))
            text += (f", {self.signed} signed by {keys}"
                     + (" (trusted)" if self.trusted else
                        " (not checked against a trusted key: give --public-key)"))
        else:
            text += ", unsigned"
        if self.open_streams:
            text += (f"; {len(self.open_streams)} stream(s) still open, {self.unsealed} "
                     "line(s) after their last seal")
        return text


@dataclass(slots=True)
class _Stream:
    seq: int
    head: str
    at: tuple[int, int]  # (file index, line) of its last line
    sealed: int = 0  # seq of its last seal
    seal_at: tuple[int, int] | None = None
    reason: str | None = None  # of its last seal
    key: str | None = None  # the key its signed seals use
    # The hashes of its last lines by seq: what a stream started after one of them names.
    recent: dict[int, str] = field(default_factory=dict)


class _Found(CallwardenError):
    """The first problem: raised from deep in the checks, caught by ``verify_logs``."""

    def __init__(self, problem: ChainProblem) -> None:
        super().__init__(str(problem))
        self.problem = problem


def _at(files: list[Path], at: tuple[int, int], kind: str, message: str) -> _Found:
    return _Found(ChainProblem(files[at[0]], at[1], kind, message))


def log_files(paths: Iterable[str | Path]) -> list[Path]:
    """Each path preceded by its rotated pieces (oldest first), each file once, a piece in
    its place among its log's pieces whatever the order it was named in."""
    out: list[Path] = []
    for p in paths:
        if Path(p) in out:  # named already, as a piece of a log named before
            continue
        family = rotated_files(p) or [Path(p)]
        out = [f for f in out if f not in family] + family
    return out


def parse_public_key(text: str) -> str:
    """A trusted public key, in hex, from its hex text, a file holding that text
    (``KEY.pub``, written by ``callwarden audit keygen``) or a PEM public key file.

    Raises:
        ValueError: saying what was expected.
        MissingDependency: a PEM file was given and ``cryptography`` is not installed.
    """
    value = text.strip().lower()
    if _HEX64.fullmatch(value):
        return value
    path = Path(text)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ValueError(f"{text!r} is neither a public key in hex (64 characters) nor a "
                         f"readable file ({e.strerror or e})") from e
    stripped = data.strip().lower()
    if _HEX64.fullmatch(stripped.decode("ascii", "replace")):
        return stripped.decode("ascii")
    if b"PRIVATE KEY" in data:
        raise ValueError(f"{path} is a private key: give its public key ({path}.pub, or the "
                         "hex that keygen printed); verifying never needs the private key")
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError as e:
        raise MissingDependency("reading a PEM public key", "cryptography",
                                "audit-signing") from e
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{path} holds no Ed25519 public key (hex or PEM)") from e
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise ValueError(f"{path} holds a public key that is not Ed25519")
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex()


def _signature_checker() -> Any:
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError as e:
        raise MissingDependency("checking audit log signatures", "cryptography",
                                "audit-signing") from e
    cache: dict[str, Any] = {}

    def valid(key: str, signature: str, message: bytes) -> bool:
        public = cache.get(key)
        if public is None:
            try:
                public = cache[key] = ed25519.Ed25519PublicKey.from_public_bytes(
                    bytes.fromhex(key))
            except ValueError:
                return False
        try:
            public.verify(bytes.fromhex(signature), message)
        except InvalidSignature:
            return False
        return True

    return valid


def _lines(files: list[Path]) -> Iterator[tuple[int, int, bytes]]:
    """(file index, 1-based line number, raw line with its newline, if any)."""
    for index, path in enumerate(files):
        with open(path, "rb") as f:
            for number, raw in enumerate(f, 1):
                yield index, number, raw


def verify_logs(paths: Iterable[str | Path], *, public_keys: Iterable[str] = (),
                allow_open: bool = False) -> VerifyReport:
    """Verifies the chains and seals of chained JSONL audit logs, offline.

    Args:
        paths: the files, oldest first (use :func:`log_files` to add rotated pieces).
        public_keys: trusted public keys (hex, see :func:`parse_public_key`). When given,
            every seal must be signed by one of them.
        allow_open: accept streams that end without a close seal (a writer still running,
            or killed); their lines after the last seal are counted in ``unsealed``.

    Returns:
        A report whose ``problem`` is the first problem found, or None.

    Raises:
        OSError: a file cannot be read.
        MissingDependency: a seal is signed and ``cryptography`` is not installed.
    """
    files = [Path(p) for p in paths]
    trusted = {k.lower() for k in public_keys}
    report = VerifyReport(files, trusted=bool(trusted))
    streams: dict[str, _Stream] = {}
    checker: Any = None
    for index, number, raw in _lines(files):
        report.lines += 1
        at = (index, number)
        try:
            if not raw.endswith(b"\n"):
                raise _at(files, at, "truncated", "the file ends in the middle of this line (cut)")
            line = raw[:-1]
            event = _parse(line)
            if event is None:
                raise _at(files, at, "not-json", "not a JSON object (a hand edit, or junk)")
            chain = event.get("chain")
            if not isinstance(chain, dict):
                raise _at(files, at, "unchained", "an event without a chain (written by a "
                          "sink without 'chain: true', or put in by hand)")
            stream, seq, prev, digest, after = _chain_fields(chain)
            if stream is None:
                raise _at(files, at, "edited", "its chain member is malformed")
            body = _event_bytes(line, stream, seq, prev, digest, after)
            if body is None:
                raise _at(files, at, "edited", "its chain member was rewritten")
            if chain_hash(stream, seq, prev, body) != digest:
                raise _at(files, at, "edited", "its content does not match its hash")
            state = streams.get(stream)
            if state is None:
                _start(files, streams, stream, seq, prev, after, at)
                state = streams[stream] = _Stream(seq, digest, at)
            else:
                _follow(files, state, stream, seq, prev, digest, at)
            state.seq, state.head, state.at = seq, digest, at
            state.recent[seq] = digest
            state.recent.pop(seq - _RECENT, None)
            if event.get("type") == SEAL_TYPE:
                if checker is None and isinstance(event.get("sig"), str):
                    checker = _signature_checker()
                _seal(event, stream, seq, prev, state, trusted, checker, report, files, at)
                state.sealed, state.seal_at = seq, at
                state.reason = event.get("reason")
            else:
                report.events += 1
        except _Found as found:
            report.problem = found.problem
            return report
    report.streams = len(streams)
    report.problem = _ends(files, streams, report, allow_open)
    return report


def _parse(line: bytes) -> dict[str, Any] | None:
    if not line.startswith(b"{"):
        return None
    try:
        event = json.loads(line)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None
    return event if isinstance(event, dict) else None


def _chain_fields(chain: dict[str, Any]) -> tuple[Any, Any, Any, Any, Any]:
    stream, seq, prev, digest, after = (chain.get(k) for k in (
        "stream", "seq", "prev", "hash", "after"))
    if isinstance(stream, str) and _STREAM.fullmatch(stream) and type(seq) is int and seq > 0 \
            and isinstance(prev, str) and _HEX64.fullmatch(prev) \
            and isinstance(digest, str) and _HEX64.fullmatch(digest) \
            and (after is None or (seq == 1 and isinstance(after, str)
                                   and _AFTER.fullmatch(after))):
        return stream, seq, prev, digest, after
    return None, None, None, None, None


def _event_bytes(line: bytes, stream: str, seq: int, prev: str, digest: str,
                 after: str | None) -> bytes | None:
    """The event as hashed (the line without its chain member), or None when the member is
    not exactly as the sink writes it."""
    suffix = chain_suffix(stream, seq, prev, digest, after).encode("ascii")
    if line.endswith(suffix) and len(line) > len(suffix) + 1:
        return line[:-len(suffix)] + b"}"
    if line == b"{" + suffix[1:]:
        return b"{}"
    return None


def _start(files: list[Path], streams: dict[str, _Stream], stream: str, seq: int, prev: str,
           after: str | None, at: tuple[int, int]) -> None:
    """Checks the first line seen of a stream: seq 1, tied to the line it names in ``after``
    (or to nothing: zeros)."""
    if seq > 1:
        later = _find_later(files, at, stream, 1)
        if later is not None:
            raise _at(files, at, "reordered", f"seq {seq} of stream {stream} comes before seq "
                      f"1 ({_where(files, later)})")
        raise _at(files, at, "removed", f"stream {stream} starts at seq {seq}: its first "
                  f"{seq - 1} line(s) are missing (removed, or in a rotated piece not given)")
    if after is None:
        if prev != GENESIS:
            raise _at(files, at, "edited", f"the first line of stream {stream} neither starts "
                      "a chain (prev zeros) nor names the line it follows")
        return
    other, _, number = after.partition(":")
    n = int(number)
    state = streams.get(other)
    if state is None:
        raise _at(files, at, "removed", f"stream {stream} was started after line {n} of "
                  f"stream {other}, which is not in the files given: that stream was removed "
                  "whole, or an earlier rotated piece is missing")
    if n > state.seq:
        raise _at(files, at, "reordered", f"stream {stream} was started after line {n} of "
                  f"stream {other}, which comes later")
    known = state.recent.get(n)
    if known is not None and known != prev:
        raise _at(files, at, "edited", f"its prev does not match the hash of line {n} of "
                  f"stream {other}, which it follows")


def _follow(files: list[Path], state: _Stream, stream: str, seq: int, prev: str,
            digest: str, at: tuple[int, int]) -> None:
    """Checks that this line comes next in its stream."""
    expected = state.seq + 1
    if seq == expected:
        if prev != state.head:
            raise _at(files, at, "edited", "its prev does not match the hash of the line "
                      f"before it in stream {stream} ({_where(files, state.at)}): one of the "
                      "two was rewritten, hash included")
        return
    if seq > expected:
        later = _find_later(files, at, stream, expected)
        if later is not None:
            raise _at(files, at, "reordered", f"seq {seq} of stream {stream} comes before seq "
                      f"{expected} ({_where(files, later)})")
        raise _at(files, at, "removed", f"stream {stream} jumps from seq {state.seq} "
                  f"({_where(files, state.at)}) to {seq}: {seq - expected} line(s) removed "
                  "before this one")
    if seq == state.seq and digest == state.head:
        raise _at(files, at, "duplicated", f"a copy of {_where(files, state.at)}")
    raise _at(files, at, "reordered", f"seq {seq} of stream {stream} comes after seq "
              f"{state.seq} ({_where(files, state.at)})")


def _find_later(files: list[Path], after: tuple[int, int], stream: str, seq: int
                ) -> tuple[int, int] | None:
    """Where seq ``seq`` of ``stream`` appears after ``after``, if it does (a second pass,
    made once, for the first gap only: it tells a reordered line from a removed one)."""
    needle = f'"chain":{{"stream":"{stream}","seq":{seq},'.encode("ascii")
    for index, number, raw in _lines(files):
        if (index, number) > after and needle in raw:
            return index, number
    return None


def _seal(event: dict[str, Any], stream: str, seq: int, prev: str, state: _Stream,
          trusted: set[str], checker: Any, report: VerifyReport, files: list[Path],
          at: tuple[int, int]) -> None:
    reason, when, key, sig = (event.get(k) for k in ("reason", "time", "key", "sig"))
    if reason not in SEAL_REASONS or not isinstance(when, str):
        raise _at(files, at, "edited", "a seal with an unknown reason or no time")
    report.seals += 1
    if sig is None and key is None:
        if trusted:
            raise _at(files, at, "unsigned", "an unsigned seal: the log must be signed by "
                      "the trusted key")
        if state.key is not None:
            raise _at(files, at, "unsigned", f"an unsigned seal in stream {stream}, whose "
                      f"earlier seals are signed by {state.key[:16]}")
        return
    if not (isinstance(key, str) and _HEX64.fullmatch(key)
            and isinstance(sig, str) and _HEX128.fullmatch(sig)):
        raise _at(files, at, "edited", "a seal whose key or signature is malformed")
    if trusted and key not in trusted:
        raise _at(files, at, "unknown-key", f"signed by {key[:16]}, which is not a trusted key")
    if state.key is not None and key != state.key:
        raise _at(files, at, "unknown-key", f"signed by {key[:16]}, while the earlier seals "
                  f"of stream {stream} are signed by {state.key[:16]}")
    if not checker(key, sig, seal_message(stream, seq, prev, reason, when, key)):
        raise _at(files, at, "bad-signature", "the seal's signature does not verify (key "
                  f"{key[:16]})")
    state.key = key
    report.signed += 1
    report.keys.add(key)


def _ends(files: list[Path], streams: dict[str, _Stream], report: VerifyReport,
          allow_open: bool) -> ChainProblem | None:
    """The first stream (by the place of its last line) that does not end with a close
    seal, unless ``allow_open``; fills the stream counts of ``report``."""
    if not streams:
        return None
    found: list[tuple[tuple[int, int], str, str]] = []
    for stream, state in streams.items():
        if state.sealed == state.seq and state.reason == "close":
            report.closed += 1
            continue
        report.open_streams.append(stream)
        report.unsealed += state.seq - state.sealed
        if state.sealed == state.seq:
            why = ("its last seal is a rotation seal and its next part is missing (a later "
                   "piece removed or not given, or its writer was killed right after rotating)")
        elif state.reason == "close":
            found.append((state.at, "appended", f"{state.seq - state.sealed} line(s) of "
                          f"stream {stream} follow its close seal "
                          f"({_where(files, state.seal_at)}) and no seal covers them"))
            continue
        elif state.seal_at is None:
            why = "it has no seal at all"
        else:
            why = (f"{state.seq - state.sealed} line(s) follow its last seal "
                   f"({_where(files, state.seal_at)})")
        found.append((state.at, "truncated", f"stream {stream} ends here without a close "
                      f"seal: {why}. Cut after its last seal, its close seal removed, or its "
                      "writer did not close (killed, or still running: --allow-open)"))
    found.sort()
    if allow_open or not found:
        return None
    (index, number), kind, message = found[0]
    return ChainProblem(files[index], number, kind, message)


def _where(files: list[Path], at: tuple[int, int] | None) -> str:
    if at is None:
        return "?"
    return f"{files[at[0]].name}:{at[1]}"
