"""Every error callwarden raises.

The hierarchy::

    CallwardenError
    ├── PolicyError            a policy file or policy object is invalid (carries every problem)
    ├── InvalidCall            a tool call cannot be snapshotted (cycle, too deep, not an object)
    ├── AuditError             a required audit event could not be written in time
    └── ToolDenied             ``run`` / ``protect`` refused to execute a tool (carries the decision)
        ├── ApprovalRequired   the decision was ``ask`` and nobody approved it
        └── RunHalted          the decision was ``halt``: stop the whole agent run

``check`` never raises for a bad call: it returns a ``deny`` decision whose reason says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from callwarden._decision import Decision

__all__ = [
    "ApprovalRequired",
    "AuditError",
    "CallwardenError",
    "InvalidCall",
    "PolicyError",
    "Problem",
    "RunHalted",
    "ToolDenied",
]


class CallwardenError(Exception):
    """Base class of every callwarden error."""


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a policy: where it is, what is wrong, and how to fix it."""

    message: str
    file: str | None = None
    line: int | None = None
    key: str | None = None
    hint: str | None = None

    def __str__(self) -> str:
        where = self.file or "<policy>"
        if self.line is not None:
            where = f"{where}:{self.line}"
        text = f"{where}: {self.key + ': ' if self.key else ''}{self.message}"
        if self.hint:
            text = f"{text} ({self.hint})"
        return text


class PolicyError(CallwardenError):
    """A policy is invalid. ``problems`` lists every problem found, each with file and line."""

    def __init__(self, problems: list[Problem] | Problem | str) -> None:
        if isinstance(problems, str):
            problems = [Problem(problems)]
        elif isinstance(problems, Problem):
            problems = [problems]
        self.problems: list[Problem] = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class InvalidCall(CallwardenError):
    """A tool call's arguments cannot be snapshotted safely."""

    def __init__(self, message: str, *, code: str = "invalid_args") -> None:
        self.code = code
        super().__init__(message)


class AuditError(CallwardenError):
    """A required audit event could not be written in time; the call must not proceed."""


class ToolDenied(CallwardenError):
    """The guard did not let a tool run. ``decision`` says which rule decided and why."""

    def __init__(self, decision: Decision) -> None:
        self.decision = decision
        super().__init__(decision.message)


class ApprovalRequired(ToolDenied):
    """The call needs a human's approval and none was given."""


class RunHalted(ToolDenied):
    """A rule decided to halt: the agent run must stop, not merely skip this tool."""
