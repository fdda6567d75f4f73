"""How big a policy may be, so that a hostile or broken file fails fast with a clear error
instead of crashing the loader or eating the machine.

``callwarden hook`` loads the policy on every tool call, so a policy that takes seconds (or
gigabytes) to load is a denial of service even when it is well formed. Each cap is an error
naming the file and, where there is one, the line:

* ``MAX_POLICY_BYTES`` — a policy (or test) file's size, checked before it is read.
* ``MAX_DEPTH`` — how deeply mappings and lists nest, counted while the document is composed,
  before PyYAML's recursive composer could overflow the stack.
* ``MAX_NODES`` — mappings, lists and scalars written in the document (aliases not expanded).
* ``MAX_ALIAS_NODES`` — nodes built a second time because an alias (``*name``) points at them.
* ``MAX_PATTERNS`` — the strings the rules' conditions and permission strings compile
  (named lists expanded), where load time goes: each is a regex or a parsed command.
* ``MAX_LIST_BYTES`` — the list files (``lists: {x: {file: ...}}``) a policy reads, together.

The figures behind them: composing YAML costs ~25 µs per value and compiling a path pattern
~40-150 µs, so a policy at the caps loads in about a second, while the caps leave room for
25 times the bundled ``recommended`` policy (405 patterns, 7 KiB).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_ALIAS_NODES", "MAX_DEPTH", "MAX_LIST_BYTES", "MAX_NODES", "MAX_PATTERNS",
           "MAX_POLICY_BYTES", "PatternBudget", "count_strings"]

MAX_POLICY_BYTES = 1024 * 1024
MAX_DEPTH = 64
MAX_NODES = 50_000
# Real policies share a list or a mapping a few times; a billion-laughs document needs millions.
MAX_ALIAS_NODES = 10_000
MAX_PATTERNS = 10_000
MAX_LIST_BYTES = 4 * 1024 * 1024


def count_strings(value: Any) -> int:
    """The strings in a condition's config (a stand-in for the patterns it compiles)."""
    if isinstance(value, str):
        return 1
    if isinstance(value, Mapping):
        return sum(count_strings(v) for v in value.values())
    if isinstance(value, list | tuple | frozenset | set):
        return sum(count_strings(v) for v in value)
    return 0


class PatternBudget:
    """Counts the patterns one policy compiles (its bases' included) against ``MAX_PATTERNS``.

    ``take`` says whether ``n`` more fit; the first refusal is reported once by the caller
    (``exhausted`` turns true), and every later one is refused silently, so nothing else is
    compiled once the budget is spent.
    """

    __slots__ = ("exhausted", "limit", "used")

    def __init__(self, limit: int | None = None) -> None:
        self.limit = MAX_PATTERNS if limit is None else limit
        self.used = 0
        self.exhausted = False

    def take(self, n: int) -> bool:
        """Reserves ``n`` patterns; False (and nothing reserved) when they do not fit."""
        if self.exhausted or self.used + n > self.limit:
            return False
        self.used += n
        return True

    def refuse(self) -> bool:
        """Marks the budget spent; True the first time, so the caller reports it once."""
        first = not self.exhausted
        self.exhausted = True
        return first

    @property
    def hint(self) -> str:
        return (f"a policy compiles at most {self.limit:,} patterns (strings in conditions and "
                "permission strings, named lists expanded); share one rule instead of copying "
                "a long list into many, and keep large data such as contact lists for CEL "
                "membership tests (args.to in lists.contacts)")
