"""A README section as the adapter tests read it: its text, and a name for tracebacks."""

from __future__ import annotations

from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


class ReadmeSection:
    """The text under ``## title`` in README.md, up to the next ``## `` heading."""

    def __init__(self, title: str) -> None:
        self.title = title

    def read_text(self) -> str:
        text = README.read_text()
        head = f"\n## {self.title}\n"
        if head not in text:
            raise AssertionError(f"README.md has no section '## {self.title}'")
        return text.split(head, 1)[1].split("\n## ", 1)[0]

    def __str__(self) -> str:
        return f"README.md ## {self.title}"
