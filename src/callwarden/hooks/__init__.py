"""``callwarden hook claude-code|gemini-cli|codex``: the policy as a coding agent's hook."""

from callwarden.hooks._base import (
    DIALECTS,
    HOOK_DIALECTS,
    Dialect,
    HookCall,
    HookReply,
    decide_once,
    dialect,
    register_dialect,
    run_hook,
)

__all__ = ["DIALECTS", "HOOK_DIALECTS", "Dialect", "HookCall", "HookReply", "decide_once", "dialect",
           "register_dialect", "run_hook"]
