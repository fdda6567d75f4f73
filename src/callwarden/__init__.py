"""callwarden: a policy-enforcement point for AI agent tool calls.

One policy file, every framework: each call is allowed, rewritten, denied with a message the
model can act on, sent to a human, or halts the run — and the decision says which rule decided.
"""

_TYPE_CHECKING = False  # importing `typing` would cost `callwarden hook` ~10 ms

__version__ = "0.1.0"

if _TYPE_CHECKING:
    from callwarden._call import FrozenDict, Opaque, ToolCall, freeze, thaw
    from callwarden._decision import (
        Budget,
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
    from callwarden.approvals import Approvals, Approve, Deny, Edit, TerminalApprover
    from callwarden.audit import Auditor
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

# Every export is loaded on first use: ``import callwarden`` (and so ``callwarden hook``, whose
# warm path needs none of them) costs nothing beyond this module.
_EXPORTS = {
    "ApprovalError": "callwarden.exceptions",
    "ApprovalInvalid": "callwarden.exceptions",
    "ApprovalPending": "callwarden.exceptions",
    "ApprovalRefused": "callwarden.exceptions",
    "ApprovalRequired": "callwarden.exceptions",
    "Approvals": "callwarden.approvals",
    "Approve": "callwarden.approvals",
    "AuditError": "callwarden.exceptions",
    "AuditLogError": "callwarden.exceptions",
    "Auditor": "callwarden.audit",
    "Budget": "callwarden._decision",
    "CallwardenError": "callwarden.exceptions",
    "CompileEnv": "callwarden.conditions",
    "ConfigError": "callwarden.exceptions",
    "Decision": "callwarden._decision",
    "Deny": "callwarden.approvals",
    "Edit": "callwarden.approvals",
    "Effect": "callwarden._decision",
    "FirstMatch": "callwarden.engine",
    "FrozenDict": "callwarden._call",
    "Guard": "callwarden._guard",
    "Hit": "callwarden.conditions",
    "InvalidCall": "callwarden.exceptions",
    "MissingDependency": "callwarden.exceptions",
    "Mode": "callwarden._decision",
    "Opaque": "callwarden._call",
    "OutcomeStatus": "callwarden._decision",
    "Policy": "callwarden.typing",
    "PolicyError": "callwarden.exceptions",
    "Problem": "callwarden.exceptions",
    "Reason": "callwarden._decision",
    "RuleMatch": "callwarden._decision",
    "RunHalted": "callwarden.exceptions",
    "SideEffect": "callwarden._profiles",
    "StoreUnavailable": "callwarden.exceptions",
    "StrictestWins": "callwarden.engine",
    "Subject": "callwarden.conditions",
    "TerminalApprover": "callwarden.approvals",
    "ToolCall": "callwarden._call",
    "ToolDenied": "callwarden.exceptions",
    "ToolProfile": "callwarden._profiles",
    "Verdict": "callwarden._decision",
    "aresolve_ask": "callwarden._settle",
    "default_profile": "callwarden._profiles",
    "freeze": "callwarden._call",
    "load_object": "callwarden.engine.user",
    "policy": "callwarden.engine.user",
    "register_condition": "callwarden.conditions",
    "resolve_ask": "callwarden._settle",
    "thaw": "callwarden._call",
}


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'callwarden' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


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
    "Budget",
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
