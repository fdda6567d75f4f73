"""The plug-in point for argument-aware rule conditions (``shell:``, ``paths:``, ``urls:`` ...).

A rule in the policy file selects tools with ``match:`` and then lists *conditions*: each is a
key whose value configures a matcher. A matcher is any callable ``(subject) -> Hit | None``;
the rule applies when every condition returns a ``Hit``. Matchers are built once, when the
policy is compiled, by the factory registered for their key::

    @register_condition("paths")
    class PathMatcher:
        def __init__(self, config: Any, env: CompileEnv) -> None: ...   # validate, precompute
        def __call__(self, subject: Subject) -> Hit | None: ...          # microseconds

A factory raises ``ConfigError(message, key=...)`` for a bad config; the loader turns it into an
error naming the file, line and key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from callwarden._call import ToolCall
from callwarden._profiles import ToolProfile
from callwarden.exceptions import ConfigError

__all__ = [
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


class Subject:
    """What a matcher sees: the call, its tool profile, and a per-call memo.

    ``memo`` lets matchers share normalizations for one call (a parsed shell command, a
    canonical path): the first matcher to need it computes it, the others reuse it.
    """

    __slots__ = ("_roles", "call", "memo", "profile")

    def __init__(self, call: ToolCall, profile: ToolProfile,
                 memo: dict[str, Any] | None = None) -> None:
        self.call = call
        self.profile = profile
        self.memo: dict[str, Any] = {} if memo is None else memo
        self._roles: dict[str, tuple[Any, ...]] | None = None

    def __repr__(self) -> str:
        return f"Subject({self.call.tool!r}, kind={self.profile.kind!r})"

    @property
    def args(self) -> Mapping[str, Any]:
        """The call's (current, possibly rewritten) arguments."""
        return self.call.args

    def role(self, role: str) -> Any:
        """The value of the argument playing ``role`` (``command``, ``path``, ``url`` ...)."""
        return self.profile.get(self.call.args, role)

    def role_values(self, role: str) -> tuple[Any, ...]:
        """Every value playing ``role`` (``recipient``: ``to``, ``cc``, ``bcc`` ...), lists
        flattened; see ``ToolProfile.values``. Found once per call and role."""
        found = self._roles
        if found is None:
            found = self._roles = {}
        values = found.get(role)
        if values is None:
            values = found[role] = self.profile.values(self.call.args, role)
        return values

    @property
    def primary(self) -> Any:
        """The value of the tool's primary argument (its command, path, url ...)."""
        return self.profile.primary(self.call.args)


class Hit(NamedTuple):
    """A matcher's finding: why it matched, a reason code, and rewritten args for ``modify``."""

    detail: str
    code: str = "matched"
    args: Mapping[str, Any] | None = None


class Matcher(Protocol):
    """A compiled condition: returns a Hit when the condition holds for the call."""

    def __call__(self, subject: Subject, /) -> Hit | None: ...


@dataclass(frozen=True, slots=True)
class CompileEnv:
    """What a matcher factory may use while compiling: the policy's folder, named lists ..."""

    base_dir: Path = field(default_factory=Path.cwd)
    lists: Mapping[str, Any] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)


MatcherFactory = Callable[[Any, CompileEnv], Matcher]

_REGISTRY: dict[str, MatcherFactory] = {}


def config_str_list(config: Mapping[str, Any], key: str, *, example: str | None = None,
                    nonempty: bool = False) -> list[str] | None:
    """A condition's list-of-strings option (a lone string is a list of one); None if unset.

    Raises:
        ConfigError: naming ``key``, with ``e.g. key: [example]`` as the hint when given.
    """
    value = config.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, Sequence) or not all(
            isinstance(v, str) and (v or not nonempty) for v in value):
        raise ConfigError(f"{key} must be a list of strings", key=key,
                          hint=f"e.g. {key}: [{example}]" if example else None)
    return list(value)


def config_bool(config: Mapping[str, Any], key: str, default: bool) -> bool:
    """A condition's true/false option.

    Raises:
        ConfigError: naming ``key`` when it is anything but a boolean.
    """
    value = config.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"{key} must be true or false", key=key)
    return value


def register_condition(key: str) -> Callable[[MatcherFactory], MatcherFactory]:
    """Registers a factory for a rule condition key (a class or a function)."""

    def decorate(factory: MatcherFactory) -> MatcherFactory:
        _REGISTRY[key] = factory
        return factory

    return decorate


def get_condition(key: str) -> MatcherFactory | None:
    """Returns the factory registered for ``key``, or None."""
    return _REGISTRY.get(key)


def condition_keys() -> frozenset[str]:
    """The condition keys a rule may use."""
    return frozenset(_REGISTRY)
