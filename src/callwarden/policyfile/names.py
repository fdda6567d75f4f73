"""Slips in the names a policy uses: tool kinds (``match: {kind: shel}``, ``tools:``
profiles) and permission names (``Bsh(rm -rf *)``, ``bash(...)``, ``WebFech(...)``).

A misspelt kind or permission name does not fail on its own: it silently matches nothing, or
turns a kind-wide, parsed rule into a plain-text match on one tool. So each is an error with
"did you mean ...", and a deliberate custom name is declared in ``tools:``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from callwarden._profiles import KNOWN_KINDS, ToolProfile, default_profile

__all__ = ["AGENT_TOOL_NAMES", "Kinds", "edit_distance", "profile_kind_problem", "resembles",
           "tool_profile"]

# Tool names of coding agents that are not permission kinds but look like one (``Task`` is
# two edits from ``Bash``): written as they are, they name that tool and are no slip.
AGENT_TOOL_NAMES = frozenset({
    "Task", "TodoWrite", "TodoRead", "LS", "BashOutput", "KillShell", "KillBash",
    "ExitPlanMode", "NotebookRead", "SlashCommand", "Skill", "ListMcpResourcesTool",
    "ReadMcpResourceTool",
})


def edit_distance(a: str, b: str, limit: int = 2) -> int:
    """Levenshtein distance of ``a`` and ``b``, or ``limit + 1`` once it is past ``limit``."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1,
                               previous[j - 1] + (ca != cb)))
        if min(current) > limit:
            return limit + 1
        previous = current
    return previous[-1]


def resembles(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate ``name`` is probably a slip for: equal ignoring case, else the nearest
    within two edits; None when there is none (or ``name`` is a candidate)."""
    pool = sorted(candidates)
    if name in pool:
        return None
    for candidate in pool:
        if candidate.lower() == name.lower():
            return candidate
    scored = [(edit_distance(name, c), c) for c in pool]
    best = min(scored, default=(3, ""))
    return best[1] if best[0] <= 2 else None


class Kinds:
    """The kinds a policy can name: the built-in ones, the custom (dotted) kinds its ``tools:``
    declare, and their families (``file`` or ``file.*`` for ``file.read`` and ``file.write``).
    """

    __slots__ = ("families", "kinds")

    def __init__(self, profiles: Mapping[str, ToolProfile] | None = None) -> None:
        declared = {p.kind for p in (profiles or {}).values()}
        self.kinds = frozenset(KNOWN_KINDS | declared)
        self.families = frozenset(
            ".".join(parts[:i]) for parts in (k.split(".") for k in self.kinds)
            for i in range(1, len(parts)))

    def pattern_problem(self, pattern: str) -> tuple[str, str] | None:
        """``(message, hint)`` when ``match: {kind: pattern}`` can never select a tool."""
        stem = pattern[:-2] if pattern.endswith(".*") else pattern
        if stem in self.kinds or stem in self.families:
            return None
        close = resembles(stem, self.kinds | self.families)
        hint = f"did you mean '{close}{pattern[len(stem):]}'?" if close else (
            f"known kinds: {', '.join(sorted(self.kinds))}; a family such as 'file' (or "
            "'file.*') selects file.read and file.write; a custom kind (crm.write) must be "
            "declared in tools: (e.g. tools: {crm_update: {kind: crm.write}})")
        return f"unknown kind {pattern!r}", hint


def profile_kind_problem(kind: str) -> tuple[str, str] | None:
    """``(message, hint)`` when a ``tools:`` profile's kind is unknown or a slip.

    A dotted kind declares a custom kind, unless it is a near miss of a built-in one
    (``file.raed``); a sub-kind of a built-in one (``http.post``) is a custom kind too.
    """
    if kind in KNOWN_KINDS:
        return None
    close = resembles(kind, KNOWN_KINDS)
    if "." in kind and (close is None or kind.split(".", 1)[0] in KNOWN_KINDS):
        return None
    hint = f"did you mean '{close}'?" if close else (
        f"known kinds: {', '.join(sorted(KNOWN_KINDS))} (or a dotted custom kind such as "
        "crm.write)")
    return f"unknown kind {kind!r}", hint


def tool_profile(name: str, profiles: Mapping[str, ToolProfile]) -> ToolProfile:
    """The profile of a tool named in a permission string: declared in ``tools:``, else the
    built-in default for that name."""
    return profiles.get(name) or default_profile(name)
