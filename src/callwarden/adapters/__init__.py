"""Framework adapters: one policy file governs tool calls wherever the agent runs.

Each adapter lives in its own module and imports its framework lazily, so installing
``callwarden`` alone never pulls a framework in (``pip install 'callwarden[langchain]'``).
All of them only translate: every call goes through :class:`Enforcer`, the one enforcement
path (decide, settle an ask, run, screen the output, record the outcome).
"""

from callwarden._messages import cannot_rewrite, describe_refusal, needs_approval
from callwarden.adapters._core import Enforcer, as_guard, enforcer, policy_tool

__all__ = ["Enforcer", "as_guard", "cannot_rewrite", "describe_refusal", "enforcer",
           "needs_approval", "policy_tool"]
