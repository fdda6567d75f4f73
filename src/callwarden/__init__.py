"""callwarden: a policy-enforcement point for AI agent tool calls.

One policy file, every framework: each call is allowed, rewritten, denied with a message the
model can act on, sent to a human, or halts the run — and the decision says which rule decided.
"""

from callwarden._call import FrozenDict, Opaque, ToolCall, freeze, thaw
from callwarden._decision import (
    Decision,
    Effect,
    Mode,
    OutcomeStatus,
    Reason,
    RuleMatch,
    Verdict,
)
from callwarden._guard import Guard
from callwarden._profiles import SideEffect, ToolProfile, default_profile
from callwarden._settle import aresolve_ask, resolve_ask
from callwarden.conditions import CompileEnv, Hit, Subject, register_condition
from callwarden.engine import FirstMatch, StrictestWins
from callwarden.engine.user import load_object, policy
from callwarden.exceptions import (
    ApprovalError,
    ApprovalInvalid,
    ApprovalPending,
    ApprovalRefused,
    ApprovalRequired,
    AuditError,
    AuditLogError,
    CallwardenError,
    ConfigError,
    InvalidCall,
    MissingDependency,
    PolicyError,
    Problem,
    RunHalted,
    StoreUnavailable,
    ToolDenied,
)
from callwarden.typing import Policy

__version__ = "0.1.0"

# Loaded on first use, so that ``import callwarden`` stays light.
_LAZY_EXPORTS = {
    "Approvals": "callwarden.approvals",
    "Approve": "callwarden.approvals",
    "Deny": "callwarden.approvals",
    "Edit": "callwarden.approvals",
    "TerminalApprover": "callwarden.approvals",
    "Auditor": "callwarden.audit",
}


def __getattr__(name: str) -> object:
    module = _LAZY_EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'callwarden' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "ApprovalError",
    "ApprovalInvalid",
    "ApprovalPending",
    "ApprovalRefused",
    "ApprovalRequired",
    "Approvals",
    "Approve",
    "AuditError",
    "AuditLogError",
    "Auditor",
    "CallwardenError",
    "CompileEnv",
    "ConfigError",
    "Decision",
    "Deny",
    "Edit",
    "Effect",
    "FirstMatch",
    "FrozenDict",
    "Guard",
    "Hit",
    "InvalidCall",
    "MissingDependency",
    "Mode",
    "Opaque",
    "OutcomeStatus",
    "Policy",
    "PolicyError",
    "Problem",
    "Reason",
    "RuleMatch",
    "RunHalted",
    "SideEffect",
    "StoreUnavailable",
    "StrictestWins",
    "Subject",
    "TerminalApprover",
    "ToolCall",
    "ToolDenied",
    "ToolProfile",
    "Verdict",
    "__version__",
    "aresolve_ask",
    "default_profile",
    "freeze",
    "load_object",
    "policy",
    "register_condition",
    "resolve_ask",
    "thaw",
]
