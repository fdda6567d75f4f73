"""Providers: loading a policy (or sink, or callback) by ``package.module:Name`` or file path,
and turning what was loaded into a policy object."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from callwarden.engine.user import FunctionPolicy

__all__ = ["instantiate", "load_object"]


def load_object(target: str, *, base_dir: Path | None = None) -> Any:
    """Imports ``package.module:attribute`` (or ``path/to/file.py:attribute``).

    Raises:
        ImportError: when the module or attribute cannot be found.
    """
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ImportError(f"{target!r} is not of the form 'package.module:Name'")
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
    """Turns a loaded provider target into a policy object: classes get ``config`` as kwargs.

    Raises:
        TypeError: when the object cannot act as a policy or rejects the config.
    """
    if inspect.isclass(obj):
        instance = obj(**config)
    elif config:
        if isinstance(obj, FunctionPolicy) or not callable(obj) or hasattr(obj, "evaluate"):
            raise TypeError("config is only accepted by classes (passed as keyword arguments)")
        instance = FunctionPolicy(_bind(obj, config))
    else:
        instance = obj
    if isinstance(instance, FunctionPolicy):
        return instance
    if hasattr(instance, "evaluate") or hasattr(instance, "aevaluate"):
        return instance
    if callable(instance):
        return FunctionPolicy(instance)
    raise TypeError(f"{type(instance).__name__} has neither evaluate() nor aevaluate()")


def _bind(fn: Callable[..., Any], config: Mapping[str, Any]) -> Callable[..., Any]:
    def bound(call: Any, ctx: Any) -> Any:
        return fn(call, ctx, **config)

    bound.__name__ = getattr(fn, "__name__", "policy")
    return bound
