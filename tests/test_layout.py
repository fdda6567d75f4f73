"""The house keeps its shape: layers without cycles, one error tree, install hints that name
real extras, modules of a readable size (see ARCHITECTURE.md)."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import tomllib
from pathlib import Path

import grimp
import pytest

import callwarden
from callwarden.exceptions import CallwardenError, MissingDependency

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(callwarden.__file__).parent
OPTIONAL = ("callwarden.adapters.", "callwarden.audit._otel")


def _modules() -> list[str]:
    names = ["callwarden"]
    for info in pkgutil.walk_packages([str(PACKAGE)], "callwarden."):
        if info.name != "callwarden.__main__":  # importing it runs the CLI
            names.append(info.name)
    return names


def _extras() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return set(project["project"]["optional-dependencies"])


def test_no_import_cycles() -> None:
    """Imports inside functions count; type-only imports under TYPE_CHECKING do not."""
    graph = grimp.build_graph("callwarden", exclude_type_checking_imports=True)
    cycles = []
    for module in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(module):
            if graph.chain_exists(importer=imported, imported=module):
                cycles.append((module, imported))
    assert cycles == []


def test_every_error_class_derives_from_callwarden_error() -> None:
    strays = []
    for name in _modules():
        try:
            module = importlib.import_module(name)
        except ImportError:  # an adapter whose framework is not installed
            assert name.startswith(OPTIONAL), name
            continue
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if obj.__module__ == name and issubclass(obj, BaseException) \
                    and not issubclass(obj, CallwardenError):
                strays.append(f"{name}.{obj.__qualname__}")
    assert strays == []


def test_every_install_hint_names_an_extra_that_exists() -> None:
    extras = _extras()
    named: set[str] = set()
    for path in [*PACKAGE.rglob("*.py"), ROOT / "README.md"]:
        text = path.read_text(encoding="utf-8")
        named.update(re.findall(r"callwarden\[([a-z0-9_,-]+)\]", text))
        if path.suffix == ".py":
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == \
                        "MissingDependency" and len(node.args) == 3 and \
                        isinstance(node.args[2], ast.Constant):
                    named.add(node.args[2].value)
    named = {extra for item in named for extra in item.split(",")}
    assert named and named <= extras, named - extras


def test_an_install_hint_says_what_to_install() -> None:
    hint = str(MissingDependency("the Redis state store", "redis", "redis"))
    assert hint == ("the Redis state store needs redis, which is not installed: "
                    "pip install 'callwarden[redis]'")
    assert isinstance(MissingDependency("x", "y"), ImportError)
    assert "reinstall" in str(MissingDependency("shell analysis", "tree-sitter-bash"))


def test_at_most_ten_private_modules_at_the_root() -> None:
    private = sorted(p.name for p in PACKAGE.glob("_*.py")
                     if p.name not in ("__init__.py", "__main__.py"))
    assert len(private) <= 10, private


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(
    p.relative_to(PACKAGE)))
def test_no_module_over_800_lines_unless_it_says_why(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    if text.count("\n") > 800:
        doc = ast.get_docstring(ast.parse(text)) or ""
        assert "longer than 800 lines because" in doc, path


def test_the_layers_contract_is_declared_for_lint_imports() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["type"] == "layers")["layers"]
    declared = {name.strip() for layer in layers for name in re.split(r"[|:]", layer)}
    top = {p.stem if p.suffix else p.name for p in PACKAGE.iterdir()
           if (p.suffix == ".py" and p.stem not in ("__init__", "__main__"))
           or (p.is_dir() and (p / "__init__.py").exists())}
    assert top == declared, top ^ declared
