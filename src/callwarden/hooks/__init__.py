"""``callwarden hook claude-code|gemini-cli|codex``: the policy as a coding agent's hook.

Loaded on first use, so that the hook's warm path (``_client``: a warm worker answers) imports
nothing it does not need.
"""

_TYPE_CHECKING = False  # importing `typing` would cost `callwarden hook` ~10 ms

if _TYPE_CHECKING:
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


def __getattr__(name: str) -> object:
    if name not in __all__:
        raise AttributeError(f"module 'callwarden.hooks' has no attribute {name!r}")
    from callwarden.hooks import _base

    return getattr(_base, name)
