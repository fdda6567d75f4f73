"""``@guard.protect``: a plain function (sync or async) guarded as a tool named after it.

The function's bound arguments become the call's arguments by parameter name; the call goes
through the one enforcement path (``Guard.run`` / ``arun``), and the function runs only when
the decision allows it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from callwarden._call import thaw
from callwarden._decision import Decision

if TYPE_CHECKING:
    from callwarden._guard import Guard

__all__ = ["protect"]

F = TypeVar("F", bound=Callable[..., Any])


def protect(guard: Guard, fn: F | None = None, *, tool: str | None = None,
            **context: Any) -> Any:
    """Decorator guarding a plain function (sync or async) as a tool named after it.

    The call's arguments are the function's bound arguments by parameter name, defaults
    applied: ``*args`` as a list under its name, ``**kwargs`` merged in, and the ``self`` /
    ``cls`` of a method left out (a first parameter named so is the receiver, passed
    through untouched). The function runs, or ``ToolDenied`` is raised; it receives what
    was decided — the snapshot's effective arguments as fresh copies — never the caller's
    live objects, which the caller could change while an approval is pending.
    """

    def decorate(f: F) -> F:
        name = tool or f.__name__
        signature = inspect.signature(f)
        params = list(signature.parameters.values())
        receiver = params[0].name if params and params[0].name in ("self", "cls") and \
            params[0].kind in (_POSITIONAL_ONLY, _POSITIONAL_OR_KEYWORD) else None
        # With *args, the parameters before it can only be passed by position.
        by_position = {p.name for p in params if p.kind is _POSITIONAL_ONLY or (
            p.kind is _POSITIONAL_OR_KEYWORD and any(q.kind is _VAR_POSITIONAL
                                                      for q in params))}

        def to_args(a: tuple[Any, ...], kw: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
            bound = signature.bind(*a, **kw)
            bound.apply_defaults()
            out: dict[str, Any] = {}
            target = None
            for pname, value in bound.arguments.items():
                kind = signature.parameters[pname].kind
                if pname == receiver:
                    target = value
                elif kind is inspect.Parameter.VAR_KEYWORD:
                    out.update(value)
                else:
                    out[pname] = value
            return target, out

        def invoke(effective: dict[str, Any], target: Any) -> Any:
            positional: list[Any] = []
            for param in params:
                pname = param.name
                if pname == receiver:
                    positional.append(target)
                elif pname in by_position:
                    if pname in effective:
                        positional.append(effective.pop(pname))
                elif param.kind is _VAR_POSITIONAL:
                    positional.extend(effective.pop(pname, ()))
            return f(*positional, **effective)

        if inspect.iscoroutinefunction(f):
            @functools.wraps(f)
            async def async_wrapper(*a: Any, **kw: Any) -> Any:
                target, args = to_args(a, kw)
                return await guard.arun(name, args, _ProtectedCall(invoke, target),
                                       **context)

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(f)
        def wrapper(*a: Any, **kw: Any) -> Any:
            target, args = to_args(a, kw)
            return guard.run(name, args, _ProtectedCall(invoke, target), **context)

        return wrapper  # type: ignore[return-value]

    return decorate(fn) if fn is not None else decorate


_POSITIONAL_ONLY = inspect.Parameter.POSITIONAL_ONLY
_POSITIONAL_OR_KEYWORD = inspect.Parameter.POSITIONAL_OR_KEYWORD
_VAR_POSITIONAL = inspect.Parameter.VAR_POSITIONAL


class _ProtectedCall:
    """One call of a ``@guard.protect`` function: how to call it, and its receiver."""

    __slots__ = ("invoke", "target")

    def __init__(self, invoke: Callable[[dict[str, Any], Any], Any], target: Any) -> None:
        self.invoke = invoke
        self.target = target

    def __call__(self, **kwargs: Any) -> Any:
        """Calls the function with keyword arguments (when used as a plain tool function)."""
        return self.invoke(dict(kwargs), self.target)

    def invoke_decided(self, decision: Decision) -> Any:
        """Calls the function with what was decided: the snapshot's effective arguments, as
        fresh copies (a list the caller changes while an approval is pending does not reach
        the function); only the ``self`` / ``cls`` receiver is the caller's own."""
        return self.invoke(thaw(decision.args), self.target)
