"""Helpers for the state-store tests: a real redis-server, and a sync/async call switch."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import redis

from callwarden.state import Counter, CounterState, StateStore

T = 1_000_000.0  # a fixed "now" for tests that move a clock by hand


class Clock:
    """A wall clock the test moves by hand (``clock.now = ...``): nothing waits for real."""

    def __init__(self, now: float = T) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def free_port() -> int:
    """Returns a loopback TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def redis_server_binary() -> str:
    found = shutil.which("redis-server") or (
        "/usr/bin/redis-server" if os.path.exists("/usr/bin/redis-server") else None
    )
    if found is None:
        pytest.fail(
            "redis-server is not installed: the Redis store is tested against a real server. "
            "Install Debian's package: sudo apt-get install redis-server"
        )
    return found


class RedisServer:
    """A redis-server on a loopback port, persisting to its own directory (AOF)."""

    def __init__(self, directory: Path, port: int | None = None) -> None:
        self.binary = redis_server_binary()
        self.directory = directory
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def arguments(self) -> list[str]:
        """The redis-server command line."""
        return [
            self.binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.directory),
            *self.options(),
            "--daemonize", "no",
            "--logfile", str(self.directory / "redis.log"),
        ]  # fmt: skip

    def options(self) -> list[str]:
        """What this kind of server adds: persistence to an append-only file."""
        return ["--save", "", "--appendonly", "yes", "--appendfsync", "always"]

    def start(self) -> None:
        self.process = subprocess.Popen(self.arguments(), stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        client = redis.Redis(port=self.port, socket_timeout=1)
        try:
            while True:
                try:
                    if client.ping():
                        return
                except redis.RedisError:
                    if self.process.poll() is not None or time.monotonic() > deadline:
                        log = (self.directory / "redis.log").read_text(errors="replace")
                        raise RuntimeError(f"redis-server did not start:\n{log}") from None
                    time.sleep(0.02)
        finally:
            client.close()

    def stop(self) -> None:
        """Shuts down cleanly (SIGTERM flushes the append-only file) and waits."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def pause(self) -> None:
        """Freezes the server: connections stay open, replies never come."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=5)


def unique_prefix() -> str:
    return f"test-{uuid.uuid4().hex[:12]}:"


def shared_store_url(kind: str, request: pytest.FixtureRequest, tmp_path: Path,
                     query: str = "") -> str:
    """The URL of a store several processes share: a SQLite file of the test's, or the
    session's redis-server under a prefix of the test's own (``query``: more options)."""
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    server: RedisServer = request.getfixturevalue("redis_server")
    return f"{server.url}?prefix={unique_prefix()}{query}"


class Api:
    """Calls a store through its sync or its async methods, so each test covers both."""

    def __init__(self, store: StateStore, mode: str) -> None:
        self.store = store
        self.mode = mode

    async def consume(
        self, counters: Sequence[Counter], *, now: float, commit: bool = True, **more: Any
    ) -> list[CounterState]:
        if self.mode == "sync":
            return self.store.consume(counters, now=now, commit=commit, **more)
        return await self.store.aconsume(counters, now=now, commit=commit, **more)

    async def release(self, counters: Sequence[Counter], **more: Any) -> None:
        if self.mode == "sync":
            self.store.release(counters, **more)
        else:
            await self.store.arelease(counters, **more)

    async def record(self, session: str, tool: str, effect: str, *, now: float) -> None:
        if self.mode == "sync":
            self.store.record(session, tool, effect, now=now)
        else:
            await self.store.arecord(session, tool, effect, now=now)

    async def history(self, session: str, **options: Any) -> Any:
        if self.mode == "sync":
            return self.store.history(session, **options)
        return await self.store.ahistory(session, **options)


class SlowProxy:
    """A TCP proxy in front of a Redis server that can misbehave as a hostile or broken
    network would: ``stall()`` holds every reply until ``release()``, ``trickle()`` passes
    replies on one byte every ``gap`` seconds, and ``refuse_until_released()`` fills the
    listen backlog so that new TCP connects hang (the kernel drops their SYNs)."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(0)
        self.port = self.listener.getsockname()[1]
        self.released = threading.Event()  # set while the proxy behaves
        self.released.set()
        self._flowing = threading.Event()
        self._flowing.set()
        self.gap = 0.0
        self._accepting = threading.Event()
        self._accepting.set()
        self._fillers: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stall(self) -> None:
        self.released.clear()
        self._flowing.clear()

    def trickle(self, gap: float = 0.05) -> None:
        self.released.clear()
        self.gap = gap

    def refuse_until_released(self) -> None:
        self._accepting.clear()
        self.released.clear()
        for _ in range(8):  # more than the backlog holds: later SYNs are dropped
            filler = socket.socket()
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                filler.connect(("127.0.0.1", self.port))
            self._fillers.append(filler)
        time.sleep(0.2)

    def release(self) -> None:
        self.gap = 0.0
        self._flowing.set()
        self._accepting.set()
        self.released.set()

    def close(self) -> None:
        self._closed = True
        self.release()
        self.listener.close()
        for filler in self._fillers:
            filler.close()

    def _accept(self) -> None:
        while not self._closed:
            self._accepting.wait()
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                client.close()
                continue
            threading.Thread(target=self._pipe, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, True), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, replies: bool) -> None:
        try:
            while data := source.recv(65536):
                if replies:
                    self._flowing.wait()
                    if self.gap:
                        for i in range(len(data)):
                            sink.sendall(data[i:i + 1])
                            time.sleep(self.gap)
                        continue
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
