"""A callwarden command that serves HTTP (``callwarden mcp --listen``, ``callwarden serve``),
run as a process: its URL once it listens (read from its stderr: port 0 picks one), everything
it said, and a stop as a service manager does it (SIGTERM)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

CLI = Path(sys.executable).with_name("callwarden")
TIMEOUT = 60


class ListeningProcess:
    """``callwarden ARGS...`` once it says ``listening on URL``."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen([str(CLI), *args], env=env, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True)
        self.said: list[str] = []
        self.url = ""
        ready = threading.Event()

        def read() -> None:
            assert self.process.stderr is not None
            for line in self.process.stderr:
                self.said.append(line)
                if "listening on " in line and not self.url:
                    self.url = line.split("listening on ", 1)[1].strip()
                    ready.set()
            ready.set()

        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()
        ready.wait(TIMEOUT)
        assert self.url, f"it did not listen: {''.join(self.said)}"

    def stop(self) -> int:
        """SIGTERM, then its exit status (killed if it does not exit in time)."""
        if self.process.poll() is None:
            self.process.terminate()
        try:
            return self.process.wait(TIMEOUT)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            self._reader.join(5)
            assert self.process.stderr is not None
            self.process.stderr.close()
