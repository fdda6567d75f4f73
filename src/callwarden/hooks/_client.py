"""``callwarden hook``'s warm path: ask the policy's hook worker, or decide here and start one.

A coding agent runs ``callwarden hook`` once per tool call, as a new process. Importing the
engine and compiling a policy in every such process costs a few hundred milliseconds; a
worker keeps both warm. This module is what the hook process imports first, and it imports
only the standard library: it reads the agent's JSON, sends it to the worker for this policy
(a Unix socket in ``$XDG_CACHE_HOME/callwarden/hooks``, private to the user) and prints the
worker's reply. When there is no worker yet, or it does not answer properly, the hook decides
in this process, exactly as without a worker, and starts one for the next call.

The worker is an optimisation and never an authority of its own:

- Its reply counts only with an HMAC, under a key the worker writes beside its socket
  (``callwarden:recommended`` denies an agent's tools any access to callwarden's per-user
  folders), over the exact request (which holds a fresh nonce). Anything else listening on
  the socket gets a request and is ignored: the call is decided here.
- A worker serves one policy file, one installation of callwarden and one set of the
  environment variables that decisions read (``CALLWARDEN_*``, ``XDG_*``, ``HOME``, ...):
  any change to these reaches another worker. It recompiles its policy when a file the
  policy was read from changes, builds a fresh guard for each call (so limits, history,
  approvals and the audit log behave exactly as in a process of its own), and exits after
  ``$CALLWARDEN_HOOK_WORKER_IDLE`` seconds without a call (default 600).
- ``CALLWARDEN_HOOK_WORKER=0`` decides every call in its own process and starts no worker.
"""

from __future__ import annotations

import _socket  # the C socket: `socket` imports enum, and each import here costs every call
import os
import stat
import struct
import sys

try:  # keyed BLAKE2 is a MAC; `hashlib` and `hmac` load OpenSSL, which this path can skip
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter without the builtin module
    from hashlib import blake2b
try:
    from _operator import _compare_digest as same_digest  # what hmac.compare_digest is
except ImportError:  # pragma: no cover
    from hmac import compare_digest as same_digest  # type: ignore[no-redef]

TYPE_CHECKING = False  # `typing` alone costs more than this whole path's other imports
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TextIO

__all__ = ["HOOK_MODULES", "IDLE_ENV", "MAX_INPUT", "TIMEOUT_ENV", "WORKER_ENV", "WorkerPlace",
           "decode_request", "encode_reply", "hook_through_worker", "print_reply", "reply_mac",
           "seconds", "text_stream", "worker_place"]

# Hook payloads are small JSON objects; anything past this is refused, not parsed.
MAX_INPUT = 8 * 1024 * 1024
#: The built-in dialects, by the module that registers each.
HOOK_MODULES = {"claude-code": "_claude_code", "gemini-cli": "_gemini_cli", "codex": "_codex"}
WORKER_ENV = "CALLWARDEN_HOOK_WORKER"
IDLE_ENV = "CALLWARDEN_HOOK_WORKER_IDLE"
# A worker that has not answered by then (seconds) is stuck: it is stopped and the call
# decided here. Far above any policy's deadline.
TIMEOUT_ENV = "CALLWARDEN_HOOK_WORKER_TIMEOUT"
_ANSWER_TIMEOUT = 30.0
_CONNECT_TIMEOUT = 1.0
_MAX_ANSWER = 4 * MAX_INPUT
# Requests: MAGIC, nonce, agent, policy, cwd, stdin's encoding and error handler, then the
# hook input's bytes, NUL-separated (no path holds a NUL). Replies: the MAC, a newline, then
# "EXIT NUL STDOUT-LENGTH NUL" and stdout + stderr (or "fallback NUL why").
_MAGIC = b"callwarden-hook/1"
_MAX_SOCKET_PATH = 100  # sun_path holds 104 bytes on some systems, 108 on Linux
_OFF = ("0", "off", "false", "no")
# What a decision can read from the environment (stores, keys, folders, the dialects' options).
_ENV_PREFIXES = ("CALLWARDEN_", "XDG_")
_ENV_NAMES = ("HOME", "USER", "LOGNAME", "TZ")


class WorkerPlace(tuple[str, str, str]):
    """Where the worker for one policy lives: its reply key ``folder/name.key`` and the lock
    that keeps it single ``folder/name.lock``, in callwarden's per-user cache folder; its
    socket ``sockets/name.sock`` there too, unless that path is too long for a socket
    (then in a short private folder: ``$XDG_RUNTIME_DIR/callwarden`` or
    ``/tmp/callwarden-UID``)."""

    __slots__ = ()

    def __new__(cls, folder: str, name: str, sockets: str) -> WorkerPlace:
        return super().__new__(cls, (folder, name, sockets))

    @property
    def folder(self) -> str:
        return self[0]

    @property
    def name(self) -> str:
        return self[1]

    @property
    def sockets(self) -> str:
        return self[2]

    @property
    def socket(self) -> str:
        return os.path.join(self.sockets, self.name + ".sock")

    @property
    def key(self) -> str:
        return os.path.join(self.folder, self.name + ".key")

    @property
    def lock(self) -> str:
        return os.path.join(self.folder, self.name + ".lock")


def worker_place(policy: str) -> WorkerPlace | None:
    """The worker place for an absolute policy path in this environment, or None where a
    worker cannot be used (no private folder, or a socket path too long for the system)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = os.path.join(base, "callwarden", "hooks")
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        installed = os.stat(os.path.join(package, "__init__.py"))
    except OSError:
        return None
    env = sorted((k, v) for k, v in os.environ.items()
                 if (k.startswith(_ENV_PREFIXES) or k in _ENV_NAMES)
                 and not k.startswith(WORKER_ENV))  # the worker's own settings decide nothing
    # One interpreter, however it was named (a script's `python3`, a shell's `python`).
    interpreter = (os.path.realpath(sys.executable), sys.prefix)
    ident = repr((_MAGIC, os.getuid(), interpreter, package, installed.st_mtime_ns,
                  installed.st_size, policy, env))
    name = blake2b(ident.encode(), digest_size=12).hexdigest()
    if not _private_folder(folder):
        return None
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    for sockets in (folder, *([os.path.join(runtime, "callwarden")] if runtime else ()),
                    f"/tmp/callwarden-{os.getuid()}"):
        place = WorkerPlace(folder, name, sockets)
        if len(place.socket.encode()) <= _MAX_SOCKET_PATH and (
                sockets == folder or _private_folder(sockets)):
            return place
    return None


def reply_mac(key: bytes, request: bytes, body: bytes) -> bytes:
    """The worker's seal over a reply ``body`` to ``request`` (keyed BLAKE2b, hex)."""
    mac = blake2b(key=key, digest_size=32)
    mac.update(blake2b(request, digest_size=32).digest())
    mac.update(body)
    return mac.hexdigest().encode()


def decode_request(request: bytes) -> tuple[str, str, str, str, str, bytes] | None:
    """(agent, policy, cwd, encoding, errors, input) of a request, or None when it is not
    one."""
    parts = request.split(b"\0", 7)
    if len(parts) != 8 or parts[0] != _MAGIC:
        return None
    try:
        agent, policy, cwd, encoding, errors = (p.decode() for p in parts[2:7])
    except UnicodeDecodeError:
        return None
    return agent, policy, cwd, encoding, errors, parts[7]


def encode_reply(out: str, err: str, code: int) -> bytes:
    """A reply body: what the hook prints and its exit code."""
    data = out.encode()
    return b"%d\0%d\0" % (code, len(data)) + data + err.encode()


def _decode_reply(body: bytes) -> tuple[str, str, int] | None:
    head = body.split(b"\0", 2)
    if len(head) != 3 or not head[0].lstrip(b"-").isdigit() or not head[1].isdigit():
        return None  # b"fallback\0why\0": the worker leaves this call to us
    size = int(head[1])
    try:
        return head[2][:size].decode(), head[2][size:].decode(), int(head[0])
    except UnicodeDecodeError:
        return None


def hook_through_worker(argv: list[str], stdin: TextIO, stdout: TextIO, stderr: TextIO,
                        decide_here: Callable[[str, str, TextIO], int]) -> int | None:
    """Runs ``callwarden hook ARGV`` (the words after ``hook``) through the policy's worker,
    or with ``decide_here(agent, policy, input)`` when the worker cannot answer (then starts
    one) or workers are turned off; returns the exit code, or None (with stdin unread) for
    what the full command line must handle: other options, an unknown agent, no policy, a
    decision server."""
    parsed = _parse(argv)
    buffer = getattr(stdin, "buffer", None)
    if parsed is None or buffer is None or os.environ.get("CALLWARDEN_SERVER"):
        return None  # (a service decides: the full command line asks it)
    off = os.environ.get(WORKER_ENV, "").strip().lower() in _OFF
    agent, policy = parsed
    policy = policy or os.environ.get("CALLWARDEN_POLICY")
    if not policy:
        return None
    encoding = (stdin.encoding or "utf-8", stdin.errors or "strict")
    try:
        policy = os.path.abspath(policy)
        # Bytes, decoded where the call is decided exactly as stdin would have decoded them.
        raw = buffer.read(MAX_INPUT + 1)
    except Exception as e:  # the in-process path turns it into the agent's "block" reply
        return decide_here(agent, policy, _Failing(e))  # type: ignore[arg-type]
    if off:
        return decide_here(agent, policy, text_stream(raw, *encoding))
    try:  # anything amiss on the worker's side: the call is decided here
        place = worker_place(policy)
        answer = _ask(place, agent, policy, encoding, raw) if place is not None else None
    except Exception:
        place, answer = None, None
    if answer is not None:
        return print_reply(*answer, stdout, stderr)
    code = decide_here(agent, policy, text_stream(raw, *encoding))
    if place is not None:
        _start_worker(place, policy)
    return code


class _Failing:
    """A stdin whose reading fails as ours did."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def read(self, size: int = -1) -> str:
        raise self.error


def text_stream(raw: bytes, encoding: str, errors: str) -> TextIO:
    """The hook input as the text stream stdin was.

    Raises:
        LookupError: not a text encoding.
        ValueError: an unknown error handler.
    """
    import io

    return io.TextIOWrapper(io.BytesIO(raw), encoding=encoding, errors=errors)


def _parse(argv: list[str]) -> tuple[str, str | None] | None:
    """``AGENT [--policy P]`` in any order; None for anything else."""
    agent: str | None = None
    policy: str | None = None
    words = iter(argv)
    for word in words:
        if word in ("--policy", "-p"):
            policy = next(words, None)
            if policy is None:
                return None
        elif word.startswith("--policy="):
            policy = word[len("--policy="):]
        elif word in HOOK_MODULES and agent is None:
            agent = word
        else:
            return None
    return (agent, policy) if agent is not None else None


def _private_folder(folder: str) -> bool:
    """Makes ``folder`` if needed; True when it is a directory of this user that nobody
    else can enter."""
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        info = os.lstat(folder)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            return False
        if info.st_mode & 0o077:
            os.chmod(folder, 0o700)
        return True
    except OSError:
        return False


def _ask(place: WorkerPlace, agent: str, policy: str, encoding: tuple[str, str],
         raw: bytes) -> tuple[str, str, int] | None:
    """The worker's verified reply, or None: no worker, an answer that is late, malformed or
    not sealed with the worker's key, or a worker that leaves the call to this process."""
    cwd = os.getcwd()
    fields = (agent, policy, cwd, *encoding)
    if any("\0" in field for field in fields):
        return None
    try:
        request = b"\0".join((_MAGIC, os.urandom(16).hex().encode(),
                              *(field.encode() for field in fields), raw))
    except UnicodeEncodeError:  # a path that is not valid UTF-8
        return None
    try:
        conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    except OSError:
        return None
    try:
        conn.settimeout(_CONNECT_TIMEOUT)
        conn.connect(place.socket)
        peer = _peer(conn)
        if peer is not None and peer[1] != os.getuid():
            return None
        conn.settimeout(seconds(TIMEOUT_ENV, _ANSWER_TIMEOUT))
        conn.sendall(request)
        conn.shutdown(_socket.SHUT_WR)
        chunks: list[bytes] = []
        size = 0
        while size <= _MAX_ANSWER:
            chunk = conn.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except TimeoutError:
        _stop(conn)
        return None
    except OSError:
        return None
    finally:
        conn.close()
    mac, _, body = b"".join(chunks).partition(b"\n")
    key = _read_key(place.key)
    if key is None or not same_digest(mac, reply_mac(key, request, body)):
        return None
    return _decode_reply(body)


def seconds(name: str, default: float) -> float:
    """A duration in seconds from the environment variable ``name`` (at least 0.1)."""
    try:
        return max(0.1, float(os.environ.get(name, default)))
    except ValueError:
        return default


def _peer(conn: _socket.socket) -> tuple[int, int] | None:
    """The (pid, uid) of the process at the other end, where the system says."""
    option = getattr(_socket, "SO_PEERCRED", None)
    if option is None:
        return None
    pid, uid, _ = struct.unpack("3i", conn.getsockopt(_socket.SOL_SOCKET, option,
                                                      struct.calcsize("3i")))
    return pid, uid


def _stop(conn: _socket.socket) -> None:
    """Stops a worker that did not answer in time, so that the next call starts a new one."""
    import signal

    try:
        peer = _peer(conn)
        if peer is not None and peer[1] == os.getuid() and peer[0] > 1:
            os.kill(peer[0], signal.SIGKILL)
    except OSError:
        pass


def _read_key(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
            return None
        try:
            return bytes.fromhex(f.read(256).decode("ascii").strip()) or None
        except (UnicodeDecodeError, ValueError):
            return None


def print_reply(out: str, err: str, code: int, stdout: TextIO, stderr: TextIO) -> int:
    """Prints a hook reply for the agent (each text ending in a newline); returns ``code``."""
    for text, stream in ((out, stdout), (err, stderr)):
        if text:
            stream.write(text if text.endswith("\n") else text + "\n")
            stream.flush()
    return code


def _start_worker(place: WorkerPlace, policy: str) -> None:
    """Starts the worker for the next call, detached from this process and the agent."""
    import contextlib
    import subprocess

    # The reply is already printed: nothing here may change the exit code (an agent reads
    # any other code as "no opinion"). No worker: the next call decides by itself again.
    with contextlib.suppress(Exception):
        subprocess.Popen(
            [sys.executable, "-m", "callwarden.hooks._worker", *place, policy,
             os.getcwd()],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True)
