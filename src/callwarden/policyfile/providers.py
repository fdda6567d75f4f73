"""``use:`` rules: a Python policy named ``package.module:Name`` (or ``path/to/file.py:Name``),
and what loading one may do.

Naming a provider runs code: importing its module runs the module, and a class is called with
the rule's ``config`` as keyword arguments. So loading is guarded three ways:

**Only policies are called.** A class is instantiated only if it implements the policy
protocol (defines ``evaluate`` or ``aevaluate``), checked before anything is called; plain
functions and ``@policy`` functions are wrapped; anything else (``subprocess:Popen``,
``os:system``) is an error and is never called (:func:`callwarden.engine.user.instantiate`).

**The loader imports nothing unless asked.** ``load_policy_file(path, providers=...)`` (also
``load_policy_text`` and ``compile_policy``) takes a :data:`ProviderMode`:

* ``"load"`` (the default; what a ``Guard`` needs): import each target and instantiate it;
* ``"check"`` (for ``callwarden lint``): check each target's form (``module:Name``) and the
  allowlist, import nothing and call nothing. The rule then holds a :class:`NotLoaded` stand-in
  that fails closed (``on_error``) if it is ever asked to decide, and the inline ``examples``
  are not run when the policy has such a rule (they need the providers to decide);
  ``LoadedPolicy.notes`` says both.

**A deployment can restrict what ``use:`` may name.** The environment variable
``CALLWARDEN_PROVIDERS``, read each time a policy loads, or the loader's ``allowed_providers``
keyword (which replaces it), is a comma-separated allowlist:

* a module prefix — ``mycompany.guards`` allows ``mycompany.guards`` and every module under
  it (``mycompany.guards.pii``), not ``mycompany.guardsx``;
* a folder or file — an entry starting with ``.``, ``/`` or ``~``, or containing ``/`` — that
  ``path/to/file.py:Name`` targets must lie in (``./providers``); a relative entry is read from
  the folder of the policy file that names the target.

Unset, anything may be named; set but empty, nothing may. A ``use:`` outside the allowlist is
an error on its line (in both modes). The allowlist also covers the names the ``audit:``
section imports (``callable`` sinks, ``redact.callback``).
"""

from __future__ import annotations

import importlib.machinery
import inspect
import os
import re
import sys
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from callwarden.engine.user import instantiate, load_object
from callwarden.exceptions import PolicyError
from callwarden.policyfile.check import Checker, Path_

__all__ = ["PROVIDERS_ENV", "NotLoaded", "ProviderAllowlist", "ProviderMode", "compile_provider",
           "target_problem"]

ProviderMode = Literal["load", "check"]
"""``"load"``: import and instantiate ``use:`` targets. ``"check"``: check their form only."""

PROVIDERS_ENV = "CALLWARDEN_PROVIDERS"

_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\Z")


def target_problem(target: str) -> str | None:
    """Why ``target`` is not of the form ``package.module:Name`` / ``file.py:Name``, or None."""
    module, sep, attr = target.partition(":")
    if not sep or not module or not attr:
        return "must be 'package.module:Name' or 'path/to/file.py:Name'"
    if not module.endswith(".py") and not _DOTTED.match(module):
        return f"{module!r} is not a module name"
    if not _DOTTED.match(attr):
        return f"{attr!r} is not a name"
    if any(part.startswith("__") for part in attr.split(".")):
        return f"{attr!r} names a special attribute"
    return None


class ProviderAllowlist:
    """What ``use:`` may name: module prefixes and folders (see the module docstring)."""

    __slots__ = ("entries", "modules", "paths")

    def __init__(self, entries: Iterable[str]) -> None:
        self.entries = tuple(e.strip() for e in entries if e.strip())
        self.modules = tuple(e.removesuffix(".*") for e in self.entries if not _is_path(e))
        self.paths = tuple(e for e in self.entries if _is_path(e))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ProviderAllowlist | None:
        """The allowlist ``CALLWARDEN_PROVIDERS`` sets, or None (anything) when it is unset."""
        raw = (os.environ if environ is None else environ).get(PROVIDERS_ENV)
        return None if raw is None else cls(raw.split(","))

    def allows(self, target: str, base_dir: Path | None) -> bool:
        """Whether ``target`` may be imported, ``base_dir`` being the naming policy's folder."""
        module = target.partition(":")[0]
        folder = base_dir or Path.cwd()
        if module.endswith(".py"):
            file = _absolute(module, folder)
            return any(file == root or file.is_relative_to(root)
                       for root in (_absolute(p, folder) for p in self.paths))
        return any(module == m or module.startswith(m + ".") for m in self.modules)

    def describe(self) -> str:
        """The entries, for an error's hint."""
        return ", ".join(self.entries) or "nothing (it is set but empty)"


def _is_path(entry: str) -> bool:
    return entry.startswith((".", "/", "~")) or "/" in entry or "\\" in entry \
        or entry.endswith(".py")


def _absolute(path: str, folder: Path) -> Path:
    p = Path(path).expanduser()
    return (p if p.is_absolute() else folder / p).resolve()


class NotLoaded:
    """Stands in for a provider the policy was loaded without (``providers="check"``).

    It never runs user code; asked to decide, it raises, so the rule fails closed.
    """

    __slots__ = ("file", "line", "name", "target")

    def __init__(self, target: str, file: str | None = None, line: int | None = None) -> None:
        self.target = target
        self.name = target
        self.file = file
        self.line = line

    def evaluate(self, call: Any, ctx: Any) -> Any:
        """Refuses to decide: the provider was never imported."""
        raise PolicyError(f"provider {self.target!r} was not loaded (the policy was loaded "
                          "with providers='check', which imports nothing)")

    def __repr__(self) -> str:
        return f"<provider {self.target} not loaded>"


def compile_provider(raw: Mapping[str, Any], path: Path_, check: Checker, base_dir: Path | None,
                     mode: ProviderMode, allowlist: ProviderAllowlist | None) -> Any:
    """The policy object of a ``use:`` rule, or None after reporting why there is none."""
    target = raw["use"]
    config = raw.get("config") or {}
    if not isinstance(target, str):
        check.error((*path, "use"), "must be 'package.module:Name'")
        return None
    if not isinstance(config, Mapping):
        check.error((*path, "config"), "must be a mapping of keyword arguments")
        return None
    problem = target_problem(target)
    if problem is not None:
        check.error((*path, "use"), f"cannot load {target!r}: {problem}",
                    "e.g. use: mycompany.guards:PiiPolicy or use: guards.py:no_prod_deploys")
        return None
    if allowlist is not None and not allowlist.allows(target, base_dir):
        check.error((*path, "use"), f"{target!r} is not an allowed provider",
                    f"{PROVIDERS_ENV} allows only: {allowlist.describe()}; ask whoever runs "
                    "callwarden to add its module (or folder)")
        return None
    if mode == "check":
        return NotLoaded(target, check.lines.file, check.lines.line((*path, "use")))
    try:
        obj = _load_provider(target, base_dir)
    except Exception as e:
        check.error((*path, "use"), f"cannot load {target!r}: {e}",
                    "modules are looked up next to the policy file, then on the Python path: "
                    "write 'use: path/to/file.py:Name' for a file elsewhere, or add its folder "
                    "to PYTHONPATH (or install the package)")
        return None
    problem = _not_a_policy(obj)
    if problem is not None:
        check.error((*path, "use"), f"{target!r} is not a policy: {problem}",
                    "name a class with evaluate() or aevaluate(), or a function "
                    "(plain or @policy); nothing else is called")
        return None
    try:
        return instantiate(obj, dict(config))
    except Exception as e:
        check.error((*path, "config") if config else (*path, "use"),
                    f"cannot create the policy from {target!r}: {type(e).__name__}: {e}")
        return None


def _not_a_policy(obj: Any) -> str | None:
    """Why ``obj`` may not be called as a provider (``instantiate`` checks the same), or None."""
    if inspect.isclass(obj):
        if hasattr(obj, "evaluate") or hasattr(obj, "aevaluate"):
            return None
        return "the class defines neither evaluate() nor aevaluate(), so it is not instantiated"
    if hasattr(obj, "evaluate") or hasattr(obj, "aevaluate") or inspect.isfunction(obj) \
            or inspect.ismethod(obj):
        return None
    return f"it is a {type(obj).__name__}, neither a policy class nor a function"


_IMPORT_LOCK = threading.Lock()


def _load_provider(target: str, base_dir: Path | None) -> Any:
    """Imports a ``use:`` target, looking in the policy file's folder first.

    ``python -m callwarden`` has the working directory on ``sys.path`` and the console script
    does not; resolving against the policy's folder makes every entry point agree. The folder
    is on ``sys.path`` only while the module imports, so a host's path is left as it was.
    """
    module_name = target.partition(":")[0]
    top = module_name.split(".")[0]
    if base_dir is None or module_name.endswith(".py") or not top.isidentifier() \
            or top in sys.modules:
        return load_object(target, base_dir=base_dir)
    folder = str(base_dir.resolve())
    if importlib.machinery.PathFinder.find_spec(top, [folder]) is None:
        return load_object(target, base_dir=base_dir)
    with _IMPORT_LOCK:
        sys.path.insert(0, folder)
        try:
            return load_object(target, base_dir=base_dir)
        finally:
            sys.path.remove(folder)
