"""User code: policies written in Python (the ``@policy`` decorator, what a policy may
return), loading code by ``package.module:Name``, and running it under the decision's deadline.

User code is untrusted for time: ``check`` runs it on a worker thread and stops waiting at the
deadline, ``acheck`` awaits ``aevaluate`` (or runs a sync policy on a worker thread) with the
deadline. The protocol a policy implements is :class:`callwarden.typing.Policy`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import importlib.util
import inspect
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from callwarden._decision import Decision, Effect, Phase, Verdict
from callwarden.engine.workers import Stuck, Workers
from callwarden.exceptions import InvalidResult

if TYPE_CHECKING:
    from callwarden.conditions.base import Subject
    from callwarden.engine.engine import Engine
    from callwarden.engine.rules import Rule

__all__ = ["FunctionPolicy", "as_verdict", "instantiate", "load_object", "policy", "run_policy_async",
           "run_policy_sync"]

_perf = time.perf_counter

#: The threads user policies run on (see :mod:`callwarden.engine.workers`).
WORKERS = Workers()


class FunctionPolicy:
    """A plain function (sync or async) turned into a policy by ``@policy``."""

    __slots__ = ("__wrapped__", "_takes_ctx", "is_async", "isolated", "name", "phase")

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        phase: str = "validate",
        isolated: bool = True,
    ) -> None:
        if phase not in (Phase.MUTATE, Phase.VALIDATE):
            raise ValueError(f"phase must be 'mutate' or 'validate', not {phase!r}")
        self.__wrapped__ = fn
        self.name = name or getattr(fn, "__name__", "policy")
        self.phase = Phase(phase)
        self.isolated = isolated
        self.is_async = inspect.iscoroutinefunction(fn)
        try:
            params = [
                p for p in inspect.signature(fn).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            ]
            self._takes_ctx = len(params) >= 2
        except (TypeError, ValueError):
            self._takes_ctx = False

    def evaluate(self, call: Any, ctx: Any) -> Any:
        """Calls the function (sync functions only; async ones go through ``aevaluate``)."""
        result = self.__wrapped__(call, ctx) if self._takes_ctx else self.__wrapped__(call)
        if inspect.isawaitable(result):
            return _run_coroutine(result)
        return result

    async def aevaluate(self, call: Any, ctx: Any) -> Any:
        """Awaits the function (sync functions are simply called).

        The engine never awaits this for a sync function: ``acheck`` runs it on a worker
        thread under the deadline, so a slow one cannot block the event loop.
        """
        result = self.__wrapped__(call, ctx) if self._takes_ctx else self.__wrapped__(call)
        if inspect.isawaitable(result):
            return await result
        return result

    def __call__(self, call: Any, ctx: Any = None) -> Any:
        return self.evaluate(call, ctx)

    def __repr__(self) -> str:
        return f"<policy {self.name}>"


def policy(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    phase: str = "validate",
    isolated: bool = True,
) -> Any:
    """Turns a plain function into a policy: ``def f(call) -> Verdict | None``.

    The function may take ``(call)`` or ``(call, ctx)``, be sync or async, and return a
    ``Verdict``, a ``Decision``, an ``Effect``, or None (no opinion). Usable on a ``Guard`` and
    from a policy file (``use: mymodule:no_prod_deploys``)::

        @policy
        def no_prod_deploys(call):
            if call.args.get("env") == "prod":
                return Verdict.deny("Deploy to staging; prod deploys go through CI.")
    """

    def wrap(f: Callable[..., Any]) -> FunctionPolicy:
        return FunctionPolicy(f, name=name, phase=phase, isolated=isolated)

    return wrap(fn) if fn is not None else wrap


def _checked(verdict: Verdict) -> Verdict:
    """A verdict built by hand (``Verdict("allow")``, a subclass): its effect made an
    ``Effect``, its texts checked, or InvalidResult."""
    fields: tuple[Any, ...] = tuple(tuple.__iter__(verdict))
    raw, message, code, args, detail = fields
    try:
        effect = Effect(raw)
    except (ValueError, TypeError):
        raise InvalidResult(f"returned a verdict whose effect is {raw!r:.60}, not one of "
                            f"{', '.join(e.value for e in Effect)}") from None
    for name, text in (("message", message), ("code", code), ("detail", detail)):
        if text is not None and not isinstance(text, str):
            raise InvalidResult(f"returned a verdict whose {name} is a "
                                f"{type(text).__name__}, not text")
    if args is not None and not isinstance(args, Mapping):
        raise InvalidResult(f"returned a verdict whose args are a {type(args).__name__}, "
                            "not a mapping")
    return Verdict(effect, message, code, args, detail)


def _run_coroutine(awaitable: Any) -> Any:
    async def runner() -> Any:
        return await awaitable

    return asyncio.run(runner())


def as_verdict(result: Any) -> Verdict | None:
    """Normalizes what a policy returned into a Verdict (or None for "no opinion").

    Raises:
        InvalidResult: for anything that is not None, a Verdict, a Decision or an Effect.
    """
    if result is None or (type(result) is Verdict and type(result.effect) is Effect):
        return result  # the common case, kept short
    if issubclass(type(result), Verdict):
        return _checked(result)
    if isinstance(result, Decision):
        return Verdict(
            result.effect,
            result.message or None,
            result.code,
            result.args if result.effect is Effect.MODIFY else None,
        )
    if isinstance(result, Effect):
        return Verdict(result)
    raise InvalidResult(
        f"a policy must return a Verdict, a Decision, an Effect or None, not {type(result).__name__}"
    )


# -- loading user code by name ---------------------------------------------------------


def load_object(target: str, *, base_dir: Path | None = None) -> Any:
    """Imports ``package.module:attribute`` (or ``path/to/file.py:attribute``).

    Importing runs the module's code: callers that load names from a file nobody reviewed
    check them first (``callwarden.policyfile.providers``). Special attributes
    (``Class.__init__``, ``__builtins__``) are never looked up.

    Raises:
        ImportError: when the module or attribute cannot be found, or the target names a
            special attribute.
    """
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ImportError(f"{target!r} is not of the form 'package.module:Name'")
    if any(part.startswith("__") for part in attr.split(".")):
        raise ImportError(f"{target!r} names a special attribute, which is never a policy")
    if module_name.endswith(".py"):
        path = Path(module_name)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        if not path.is_file():
            raise ImportError(f"no such file: {path}")
        key = f"_callwarden_user_{abs(hash(str(path.resolve())))}"
        module = sys.modules.get(key)
        if module is None:
            spec = importlib.util.spec_from_file_location(key, path)
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot load {path}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[key] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[key]
                raise
    else:
        module = importlib.import_module(module_name)
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as e:
            raise ImportError(f"module {module_name!r} has no attribute {attr!r}") from e
    return obj


def instantiate(obj: Any, config: Mapping[str, Any]) -> Any:
    """Turns a loaded provider target into a policy object, calling only what is a policy.

    * a class is instantiated, ``config`` as keyword arguments, only if it defines
      ``evaluate`` or ``aevaluate`` — checked before it is called, so naming
      ``subprocess:Popen`` runs nothing;
    * a function (``def`` or ``async def``; a method) is wrapped as a policy, ``config``
      bound as keyword arguments; a ``@policy`` function or an object with ``evaluate`` /
      ``aevaluate`` is used as it is;
    * anything else (a builtin such as ``os.system``, another callable, a value) is refused
      without being called.

    Raises:
        TypeError: when the object is not a policy or rejects the config.
    """
    name = getattr(obj, "__qualname__", None) or type(obj).__name__
    if inspect.isclass(obj):
        if not _implements_policy(obj):
            raise TypeError(f"class {name} is not a policy: it defines neither evaluate() nor "
                            "aevaluate(), so it is not instantiated")
        instance = obj(**config)
        if not _implements_policy(instance):  # a __new__ may return anything
            raise TypeError(f"{name}(...) returned a {type(instance).__name__}, not a policy")
        return instance
    if isinstance(obj, FunctionPolicy) or _implements_policy(obj):
        if config:
            raise TypeError("config is only accepted by classes (passed as keyword arguments) "
                            "and plain functions")
        return obj
    if inspect.isfunction(obj) or inspect.ismethod(obj):
        return FunctionPolicy(_bind(obj, config) if config else obj)
    raise TypeError(f"{name} ({type(obj).__name__}) is not a policy: name a class with "
                    "evaluate() or aevaluate(), or a function")


def _implements_policy(obj: Any) -> bool:
    return hasattr(obj, "evaluate") or hasattr(obj, "aevaluate")


def _bind(fn: Callable[..., Any], config: Mapping[str, Any]) -> Callable[..., Any]:
    def bound(call: Any, ctx: Any) -> Any:
        return fn(call, ctx, **config)

    bound.__name__ = getattr(fn, "__name__", "policy")
    return bound


# -- running user policies under the deadline ----------------------------------------

def _evaluate_sync(rule: Rule, subject: Subject) -> Verdict | None:
    target = rule.policy
    if hasattr(target, "evaluate"):
        result = target.evaluate(subject.call, subject)
        if inspect.isawaitable(result):
            result = asyncio.run(_await(result))
        return as_verdict(result)
    return as_verdict(asyncio.run(_await(target.aevaluate(subject.call, subject))))


async def _await(awaitable: Any) -> Any:
    return await awaitable


def run_policy_sync(engine: Engine, rule: Rule, subject: Subject, deadline: float) -> Verdict | None:
    """Runs a user policy on a worker thread, waiting at most until ``deadline``.

    Whatever the policy does — raise any exception (``SystemExit`` included), return garbage,
    hang — the result is its verdict or the rule's error verdict by the deadline.
    """
    remaining = deadline - _perf()
    if remaining <= 0:
        return engine.error_verdict(rule, None)
    try:
        future = WORKERS.submit(rule, _evaluate_sync, rule, subject)
    except Stuck as e:
        return engine.error_verdict(rule, e)
    try:
        return future.result(timeout=remaining)  # type: ignore[no-any-return]
    except concurrent.futures.TimeoutError:
        WORKERS.overran(rule, future)
        return engine.error_verdict(rule, None)
    except BaseException as e:
        if future.done() and future.exception() is e:  # the policy's own, even SystemExit
            return engine.error_verdict(rule, e)
        raise  # the caller's own interruption (Ctrl-C while waiting)


async def run_policy_async(engine: Engine, rule: Rule, subject: Subject,
                           deadline: float) -> Verdict | None:
    """Awaits a user policy (``aevaluate``, or ``evaluate`` on a worker thread) with a deadline.

    An ``async def`` policy runs on the caller's event loop: if it blocks the loop (a
    ``time.sleep``, a synchronous socket) nothing can preempt it, and the decision answers
    only when it yields. Write such code as a synchronous policy (it then runs on a worker
    thread under the deadline) or hand the blocking part to ``asyncio.to_thread``.
    """
    remaining = deadline - _perf()
    if remaining <= 0:
        return engine.error_verdict(rule, None)
    target = rule.policy
    future: concurrent.futures.Future[Any] | None = None
    try:
        # A sync @policy function would block the event loop past the deadline if awaited
        # through aevaluate: it runs on a worker thread like any sync provider.
        # asyncio.timeout runs the policy in this task (wait_for would wrap it in another,
        # whose SystemExit the event loop re-raises past every handler).
        async with asyncio.timeout(remaining):
            if hasattr(target, "aevaluate") and not (
                    isinstance(target, FunctionPolicy) and not target.is_async):
                return as_verdict(await target.aevaluate(subject.call, subject))
            future = WORKERS.submit(rule, _evaluate_sync, rule, subject)
            return await asyncio.wrap_future(future)
    except TimeoutError:
        if future is not None:
            WORKERS.overran(rule, future)
        return engine.error_verdict(rule, None)
    except Stuck as e:
        return engine.error_verdict(rule, e)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # the caller is being cancelled: that is not the policy's doing
        return engine.error_verdict(rule, InvalidResult("was cancelled"))
    except BaseException as e:  # the policy's own, SystemExit and custom ones included
        if isinstance(e, KeyboardInterrupt) and future is None:
            raise
        return engine.error_verdict(rule, e)
