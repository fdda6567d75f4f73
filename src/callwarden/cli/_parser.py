"""What every command's parser shares: the exit codes for usage, and a parser that exits
with the usage code (keeping argparse's usage text)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["EXIT_OK", "EXIT_TESTS_FAILED", "EXIT_USAGE", "_Parser", "parse_listen"]

EXIT_OK = 0
EXIT_TESTS_FAILED = 1
EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse exits 2 too; keep its usage text
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def parse_listen(text: str) -> tuple[str, int] | None:
    """``--listen HOST:PORT`` as (host, port); None when it is not that."""
    host, sep, port = str(text).rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        return None
    return host, int(port)
