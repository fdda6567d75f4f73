"""Shared by the inline-code readers: the result type and how a path becomes a shell word."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

__all__ = ["TEMP_DIR", "InlineEffects", "command", "pathlike", "quote_path"]

# What a freshly made temporary directory is taken to be (``tempfile.mkdtemp()``).
TEMP_DIR = "/tmp/tmp.XXXXXXXXXX"


@dataclass(frozen=True, slots=True)
class InlineEffects:
    """What a piece of inline code does, as far as it can be known statically.

    Attributes:
        commands: shell command lines the code runs, or that do what it does to files, in
            source order (``cd`` lines included, so relative paths resolve where it runs).
        env: names of the environment variables it reads; ``*`` for the whole environment.
        opaque: why parts of it cannot be known statically, one reason each.
    """

    commands: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    opaque: tuple[str, ...] = ()


def quote_path(path: str) -> str:
    """A path as a shell word; a leading ``~`` stays unquoted so it means the home directory
    (Python does not expand it, but a path meant as ``~`` is judged as the home: safer)."""
    if path == "~":
        return "~"
    if path.startswith("~/"):
        return "~/" + (shlex.quote(path[2:]) if path[2:] else "")
    return shlex.quote(path)


def pathlike(text: str) -> bool:
    """Whether a string constant names a file: ``/etc/passwd``, ``~/.ssh/id_rsa``, ``.env``,
    ``src/app.py`` (no blanks, not a URL, not a bare ``/`` or ``.``)."""
    if not text or len(text) > 4096 or any(c.isspace() for c in text) or "://" in text:
        return False
    if text.strip("/.~") == "":
        return False
    return text.startswith(("/", "~/", ".")) or ("/" in text and not text.startswith("-"))


def command(*words: str) -> str:
    return " ".join(words)
