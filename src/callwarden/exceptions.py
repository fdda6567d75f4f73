"""Every error callwarden raises: one tree under :class:`CallwardenError`.

The hierarchy::

    CallwardenError
    ├── PolicyError              a policy file or policy object is invalid (carries every problem)
    ├── ConfigError              one setting is invalid (a condition's config, a list, a sink);
    │   │                        also a ValueError. The loader turns it into a PolicyError line
    │   └── UnknownDetector      a secret/PII detector name is unknown (analysis.detectors)
    ├── InvalidCall              a tool call cannot be snapshotted (cycle, too deep, not an object)
    ├── InvalidResult            a policy returned something that is not a verdict (also TypeError)
    ├── CelError                 a CEL condition could not be evaluated for a call
    ├── InvalidUrl               a URL that cannot be analysed safely (also ValueError)
    ├── StoreUnavailable         the state store cannot be read or written right now
    ├── AuditError               a required audit event could not be written in time
    ├── AuditLogError            a file given as an audit log is unreadable, empty or holds no
    │                            events of the kind asked for (also ValueError)
    ├── MissingDependency        a feature needs a package that is not installed (ImportError);
    │                            the one place install hints are written
    ├── ApprovalError            an approval operation was refused (``code`` says which)
    │   ├── ApprovalInvalid      not found, expired, not approved, used, denied, another call
    │   └── ApprovalRefused      this person may not resolve this request
    └── ToolDenied               ``run`` / ``protect`` refused to execute a tool (carries the decision)
        ├── ApprovalRequired     the decision was ``ask`` and nobody approved it
        │   └── ApprovalPending  the call waits for a person; resume with ``request_id``
        └── RunHalted            the decision was ``halt``: stop the whole agent run

Internal signals (a parse that gives up, a late store reply) derive from
``CallwardenError`` too, so ``except CallwardenError`` sees everything callwarden raises.

``check`` never raises for a bad call: it returns a ``deny`` decision whose reason says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from callwarden._decision import Decision

__all__ = [
    "ApprovalError",
    "ApprovalInvalid",
    "ApprovalPending",
    "ApprovalRefused",
    "ApprovalRequired",
    "AuditError",
    "AuditLogError",
    "CallwardenError",
    "CelError",
    "ConfigError",
    "InvalidCall",
    "InvalidResult",
    "InvalidUrl",
    "MissingDependency",
    "PolicyError",
    "Problem",
    "RunHalted",
    "StoreUnavailable",
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


class ConfigError(CallwardenError, ValueError):
    """One setting is invalid. ``key`` is the sub-key at fault, if any; ``hint`` how to fix it.

    A condition factory raises it for a bad config; the loader turns it into a
    :class:`PolicyError` naming the file, line and key.
    """

    def __init__(self, message: str, *, key: str | int | None = None,
                 hint: str | None = None) -> None:
        self.key = key
        self.hint = hint
        super().__init__(message)


class InvalidCall(CallwardenError):
    """A tool call's arguments cannot be snapshotted safely."""

    def __init__(self, message: str, *, code: str = "invalid_args") -> None:
        self.code = code
        super().__init__(message)


class InvalidResult(CallwardenError, TypeError):
    """A policy returned something that is not a verdict."""


class CelError(CallwardenError, RuntimeError):
    """A CEL condition could not be evaluated for a call (missing key, type mismatch, ...).

    The engine turns it into the rule's ``on_error`` effect (deny by default, reason code
    ``policy_error``). ``expression`` is the condition's source.
    """

    code = "policy_error"

    def __init__(self, message: str, *, expression: str) -> None:
        self.expression = expression
        super().__init__(message)


class InvalidUrl(CallwardenError, ValueError):
    """A URL that cannot be analysed, or that different parsers would read differently."""


class StoreUnavailable(CallwardenError):
    """The state store cannot be read or written right now (down, locked, too slow).

    Callers must treat it as "limit unknown" and fail closed. The store object stays usable:
    the next call tries again.
    """


class AuditError(CallwardenError):
    """A required audit event could not be written in time; the call must not proceed."""


class AuditLogError(CallwardenError, ValueError):
    """A file given as an audit log cannot be read, is empty, or holds no event of the kind
    asked for (a mistyped path, a policy file, another program's log)."""


class MissingDependency(CallwardenError, ImportError):
    """A feature needs a package that is not installed. The message says what to install:
    the extra that brings it (``pip install 'callwarden[redis]'``), or, for a package
    callwarden itself depends on, a reinstall.

    Args:
        feature: what needs it ("the Redis state store").
        package: the missing distribution ("redis").
        extra: the callwarden extra that installs it, or None for a core dependency.
    """

    def __init__(self, feature: str, package: str, extra: str | None = None) -> None:
        self.feature = feature
        self.package = package
        self.extra = extra
        how = (f"pip install 'callwarden[{extra}]'" if extra else
               "it is a dependency of callwarden: pip install --force-reinstall callwarden")
        super().__init__(f"{feature} needs {package}, which is not installed: {how}",
                         name=package)


class ApprovalError(CallwardenError):
    """An approval operation was refused. ``code`` is stable, ``message`` says why."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(f"{message} [{code}]")


class ApprovalInvalid(ApprovalError):
    """The approval cannot be used or resolved in its current state.

    Codes: ``approval_not_found``, ``approval_expired``, ``approval_not_approved``,
    ``approval_already_used``, ``approval_mismatch``, ``approval_denied``,
    ``approval_already_resolved``, ``grant_not_found``, ``approval_in_doubt`` (an approval a
    framework kept, for a request raised in doubt: ``Enforcer.answer``).
    """


class ApprovalRefused(ApprovalError):
    """This person may not resolve this request.

    Codes: ``self_approval`` (the agent or principal that made the call), ``not_an_approver``
    (outside the allowlist), ``approver_required`` (no name given).
    """


class ToolDenied(CallwardenError):
    """The guard did not let a tool run. ``decision`` says which rule decided and why."""

    def __init__(self, decision: Decision) -> None:
        self.decision = decision
        super().__init__(decision.message)


class ApprovalRequired(ToolDenied):
    """The call needs a human's approval and none was given."""


class ApprovalPending(ApprovalRequired):
    """The call waits for a human's decision; ``request_id`` names the request to resume with.

    A framework pauses the run, and later calls the guard again with
    ``approval_id=request_id``: the exact approved call then runs once.
    """

    def __init__(self, decision: Decision, request_id: str) -> None:
        super().__init__(decision)
        self.request_id = request_id
        self.args = (f"{decision.message} Approval request {request_id} is pending; resume "
                     f"with approval_id={request_id!r} once it is approved.",)


class RunHalted(ToolDenied):
    """A rule decided to halt: the agent run must stop, not merely skip this tool."""
