"""``callwarden hook claude-code|gemini-cli|codex``: the policy as a coding agent's hook."""

from callwarden.hooks._base import (
    DIALECTS,
    Dialect,
    HookCall,
    HookReply,
    dialect,
    register_dialect,
    run_hook,
)

__all__ = ["DIALECTS", "Dialect", "HookCall", "HookReply", "dialect", "register_dialect", "run_hook"]

HOOK_DIALECTS = ("claude-code", "gemini-cli", "codex")
