"""The ``args:`` condition: argument values compared with literals or matched by globs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from callwarden._call import FrozenDict
from callwarden.analysis.globs import GlobError, GlobSet, is_glob
from callwarden.conditions.base import CompileEnv, Hit, Subject, register_condition
from callwarden.exceptions import ConfigError

__all__ = ["AnyArgs", "ArgsMatcher"]


_MISSING = object()
# Numbers compare by value whatever their type (0 == 0.0); a bool never equals a number.
_KIND: dict[type, type] = {int: float}


@register_condition("args")
class ArgsMatcher:
    """``args: {path.to.arg: pattern}``: every listed argument matches one of its patterns.

    A string pattern with ``*``, ``?``, ``[...]`` or ``{a,b}`` is a glob over string values (the
    dialect of :mod:`callwarden.analysis.globs`); any other value must be equal by value: ``0``
    matches ``0.0`` (a model's JSON may write either), ``true`` matches only a boolean, and a
    string matches only text. The call's snapshot has already turned a ``StrEnum`` or
    ``IntEnum`` member, or any str/int/float subclass, into its plain value.
    A list gives alternatives. Rules whose only condition is one argument with literal values
    are indexed by that value (see ``index_key``).
    """

    __slots__ = ("_checks", "_patterns", "_single", "_single_hit", "group_key", "index_key")

    def __init__(self, config: Any, env: CompileEnv) -> None:
        if not isinstance(config, Mapping) or not config:
            raise ConfigError("must map argument names to patterns",
                              hint="e.g. args: {env: prod, branch: 'release/*'}")
        checks = []
        self._patterns: dict[str, tuple[Any, ...]] = {}
        for name, patterns in config.items():
            values = patterns if isinstance(patterns, list) else [patterns]
            self._patterns[str(name)] = tuple(values)
            if not values or any(isinstance(v, Mapping | list) for v in values):
                raise ConfigError("patterns must be strings or plain values", key=name)
            globs = [p for p in values if isinstance(p, str) and is_glob(p)]
            exact = frozenset((_KIND.get(type(v), type(v)), v) for v in values
                              if not (isinstance(v, str) and is_glob(v)))
            try:
                regex = GlobSet(globs).regex if globs else None
            except GlobError as e:
                raise ConfigError(str(e), key=name, hint=e.hint) from e
            checks.append((tuple(str(name).split(".")), exact, regex))
        self._checks = tuple(checks)
        only = checks[0] if len(checks) == 1 else None
        self._single = (only[0][0], only[1], only[2]) if only and len(only[0]) == 1 else None
        self._single_hit = Hit(f"args.{only[0][0]} matches", "args.matched") if self._single \
            and only else None
        #: (argument name, literal values) when this matcher is one top-level argument compared
        #: with literals: the engine then finds the rule by the argument's value.
        self.index_key: tuple[str, frozenset[Any]] | None = (
            (only[0][0], frozenset(v for _, v in only[1]))
            if only is not None and len(only[0]) == 1 and only[2] is None else None)
        #: One top-level argument: checked with others of its kind as one (``union``).
        self.group_key: tuple[str] | None = ("args",) if self._single is not None else None

    @classmethod
    def union(cls, matchers: Sequence[ArgsMatcher]) -> AnyArgs:
        """One condition that holds when one of ``matchers`` (each of one top-level argument)
        would: the engine passes over their rules together when it finds nothing."""
        by_name: dict[str, list[Any]] = {}
        for matcher in matchers:
            if matcher.group_key is None:
                raise ValueError("only args conditions of one top-level argument have a union")
            for name, values in matcher._patterns.items():
                by_name.setdefault(name, []).extend(values)
        return AnyArgs(by_name)

    def __call__(self, subject: Subject) -> Hit | None:
        args = subject.call.args
        if self._single is not None:  # one top-level argument: the common case, kept short
            name, exact, regex = self._single
            arg = args.get(name, _MISSING)
            if arg is not _MISSING and _matches(arg, exact, regex):
                return self._single_hit
            return None
        for path, exact, regex in self._checks:
            value: Any = args
            for part in path:
                if type(value) is not FrozenDict or part not in value:
                    return None
                value = value[part]
            if not _matches(value, exact, regex):
                return None
        if len(self._checks) == 1:
            return Hit(f"args.{'.'.join(self._checks[0][0])} matches", "args.matched")
        return Hit("; ".join(f"args.{'.'.join(p)} matches" for p, _, _ in self._checks),
                   "args.matched")


def _matches(arg: Any, exact: frozenset[tuple[type, Any]], regex: Any) -> bool:
    """Whether an argument's value equals one of the literals (by value) or, a string, matches
    the globs' regex."""
    kind = type(arg)
    try:
        if (_KIND.get(kind, kind), arg) in exact:
            return True
    except TypeError:  # unhashable value (a list or mapping): only globs could match
        pass
    return regex is not None and kind is str and regex.fullmatch(arg) is not None


class AnyArgs:
    """Holds when one of its top-level arguments matches one of that argument's patterns:
    the union of ``args:`` conditions of one argument each (see ``ArgsMatcher.union``)."""

    __slots__ = ("_checks",)

    def __init__(self, by_name: Mapping[str, list[Any]]) -> None:
        checks = []
        for name, values in by_name.items():
            single = ArgsMatcher({name: values}, CompileEnv())._single
            if single is None:
                raise ValueError(f"{name!r} is not one top-level argument")
            checks.append(single)
        self._checks = tuple(checks)

    def __call__(self, subject: Subject) -> Hit | None:
        args = subject.call.args
        for name, exact, regex in self._checks:
            arg = args.get(name, _MISSING)
            if arg is not _MISSING and _matches(arg, exact, regex):
                return Hit(f"args.{name} matches", "args.matched")
        return None
