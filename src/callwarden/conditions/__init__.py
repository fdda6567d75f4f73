"""Rule conditions: one module per policy-file key, and the registry they plug into.

A rule's conditions (``args:``, ``max_chars:``, ``paths:``, ``urls:``, ``shell:``,
``secrets:``, ``content:``, ``if:``, ``roles:``, ``untrusted:``, ``after_untrusted:``) are
built once when a policy compiles and called on every call (see
:mod:`callwarden.conditions.base` for the contract). The built-in ones are imported here, by
name, which registers them; a third-party condition registers itself the same way
with :func:`register_condition`.
"""

from callwarden.conditions import (
    args,
    cel,
    content,
    paths,
    provenance,
    roles,
    shell,
    size,
    urls,
)
from callwarden.conditions.base import (
    CompileEnv,
    ConfigError,
    Hit,
    Matcher,
    MatcherFactory,
    Subject,
    condition_keys,
    config_bool,
    config_str_list,
    get_condition,
    register_condition,
)

BUILTIN_MODULES = (args, cel, content, paths, provenance, roles, shell, size, urls)
"""The modules of the built-in conditions (imported above, which registered them)."""

__all__ = [
    "BUILTIN_MODULES",
    "CompileEnv",
    "ConfigError",
    "Hit",
    "Matcher",
    "MatcherFactory",
    "Subject",
    "condition_keys",
    "config_bool",
    "config_str_list",
    "get_condition",
    "register_condition",
]
