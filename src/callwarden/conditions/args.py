"""The ``args:`` condition: argument values compared with literals or matched by globs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from callwarden._call import FrozenDict
from callwarden.analysis.globs import GlobError, GlobSet, is_glob
from callwarden.conditions.base import CompileEnv, Hit, Subject, register_condition
from callwarden.exceptions import ConfigError

__all__ = ["ArgsMatcher"]


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

    __slots__ = ("_checks", "_single", "_single_hit", "index_key")

    def __init__(self, config: Any, env: CompileEnv) -> None:
        if not isinstance(config, Mapping) or not config:
            raise ConfigError("must map argument names to patterns",
                              hint="e.g. args: {env: prod, branch: 'release/*'}")
        checks = []
        for name, patterns in config.items():
            values = patterns if isinstance(patterns, list) else [patterns]
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

    def __call__(self, subject: Subject) -> Hit | None:
        args = subject.call.args
        if self._single is not None:  # one top-level argument: the common case, kept short
            name, exact, regex = self._single
            arg = args.get(name, _MISSING)
            if arg is _MISSING:
                return None
            kind = type(arg)
            try:
                found = (_KIND.get(kind, kind), arg) in exact
            except TypeError:
                found = False
            if found or (regex is not None and type(arg) is str and regex.fullmatch(arg)):
                return self._single_hit
            return None
        for path, exact, regex in self._checks:
            value: Any = args
            for part in path:
                if type(value) is not FrozenDict or part not in value:
                    return None
                value = value[part]
            kind = type(value)
            try:
                found = (_KIND.get(kind, kind), value) in exact
            except TypeError:  # unhashable value (a list or mapping): only globs could match
                found = False
            if not found and (regex is None or type(value) is not str
                              or regex.fullmatch(value) is None):
                return None
        if len(self._checks) == 1:
            return Hit(f"args.{'.'.join(self._checks[0][0])} matches", "args.matched")
        return Hit("; ".join(f"args.{'.'.join(p)} matches" for p, _, _ in self._checks),
                   "args.matched")
