"""Every extra installs what its README example and its adapter import (checked statically).

A README section that says ``pip install 'callwarden[x]'`` must run after exactly that install;
an adapter module must import only what its extra (or the core) installs.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
README = (ROOT / "README.md").read_text(encoding="utf-8")
ADAPTERS = ROOT / "src" / "callwarden" / "adapters"

# Which extra each adapter module belongs to (None: the core install).
ADAPTER_EXTRAS: dict[str, str | None] = {
    "__init__": None, "_core": None, "langchain": "langchain",
    "openai_agents": "openai-agents", "autogen": "autogen", "autogen_guardrail": "autogen",
    "claude_agent": "claude", "deerflow": None, "crewai": "crewai",
    "semantic_kernel": "semantic-kernel", "pydantic_ai": "pydantic-ai", "llamaindex": "llamaindex",
    "smolagents": "smolagents", "agno": "agno", "google_adk": "google-adk",
    "agent_framework": "agent-framework",
}
# Frameworks tested in an environment of their own (scripts/test.sh), not installed here: the
# distribution each of their modules comes from.
OWN_ENVIRONMENT = {"crewai": ("crewai",), "semantic_kernel": ("semantic-kernel",)}
# Imported by an adapter from the framework that hosts it, never installed by callwarden.
HOST_PROVIDED = {
    # DeerFlow runs on LangGraph; without it the provider denies instead of pausing the run.
    "deerflow": {"langgraph"},
}


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", requirement).lower()


def _extra(extra: str | None, seen: frozenset[str] = frozenset()) -> set[str]:
    """The distributions an extra installs (the core's included), self-references followed."""
    project = PYPROJECT["project"]
    requirements = project["dependencies"] if extra is None else \
        project["optional-dependencies"][extra]
    names = set() if extra is None else _extra(None)
    for text in requirements:
        requirement = Requirement(text)
        if _name(requirement.name) == "callwarden":
            for inner in sorted(requirement.extras - seen):
                names |= _extra(inner, seen | {inner})
        else:
            names.add(_name(requirement.name))
    return names


def _third_party(source: str) -> set[str]:
    """The top-level modules a source imports (inside functions too), stdlib and callwarden
    left out."""
    modules = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module.split(".")[0])
    return {m for m in modules
            if m not in sys.stdlib_module_names and m not in ("callwarden", "__future__")}


def _missing(modules: set[str], extra: str | None) -> list[str]:
    """The modules whose distribution the extra does not install, each with its providers."""
    installed = _extra(extra)
    providers = packages_distributions()
    missing = []
    for module in sorted(modules):
        dists = providers.get(module) or OWN_ENVIRONMENT.get(module)
        assert dists, f"no installed distribution provides {module!r}: cannot map it"
        # A namespace package (langgraph) is spread over several distributions: one will do.
        if not any(_name(d) in installed for d in dists):
            missing.append(f"{module} (from {', '.join(sorted(set(dists)))})")
    return missing


def _readme_blocks() -> list[tuple[str, str | None, str]]:
    """(section title, the extra the section names, code) for each python block."""
    sections = re.split(r"^(?=## )", README, flags=re.M)
    found = []
    for section in sections:
        title = section.splitlines()[0].lstrip("# ") if section.strip() else ""
        # The section's install line names its extra; a section without one falls back on
        # the adapter its code imports.
        named = set(re.findall(r"pip install\s+['\"]?callwarden\[([\w-]+)\]", section))
        assert len(named) <= 1, f"section {title!r} installs several extras: {named}"
        for code in re.findall(r"```python[^\n]*\n(.*?)```", section, re.S):
            adapters = set(re.findall(r"callwarden\.adapters\.(\w+)", code))
            implied = {ADAPTER_EXTRAS.get(a) for a in adapters} - {None}
            if named and implied:
                assert named == implied, (title, named, implied)
            extra = next(iter(named or implied), None)
            found.append((title, extra, code))
    return found


BLOCKS = _readme_blocks()


def test_the_readme_has_a_python_block_for_every_framework_extra() -> None:
    covered = {extra for _, extra, _ in BLOCKS}
    assert {"langchain", "openai-agents", "autogen", "claude", "crewai", "semantic-kernel",
            "pydantic-ai", "llamaindex", "smolagents", "agno", "google-adk",
            "agent-framework", "oap"} <= covered


@pytest.mark.parametrize(("title", "extra", "code"), BLOCKS,
                         ids=[f"{i}-{t}" for i, (t, _, _) in enumerate(BLOCKS)])
def test_readme_block_imports_only_what_its_extra_installs(title: str, extra: str | None,
                                                          code: str) -> None:
    missing = _missing(_third_party(code), extra)
    assert not missing, (f"README section {title!r} imports what "
                         f"callwarden[{extra or ''}] does not install: {missing}")


def test_every_adapter_module_has_an_extra() -> None:
    assert {p.stem for p in ADAPTERS.glob("*.py")} == set(ADAPTER_EXTRAS)


@pytest.mark.parametrize("module", sorted(ADAPTER_EXTRAS))
def test_adapter_imports_only_what_its_extra_installs(module: str) -> None:
    imported = _third_party((ADAPTERS / f"{module}.py").read_text(encoding="utf-8"))
    missing = _missing(imported - HOST_PROVIDED.get(module, set()), ADAPTER_EXTRAS[module])
    assert not missing, (f"callwarden.adapters.{module} imports what "
                         f"callwarden[{ADAPTER_EXTRAS[module] or ''}] does not install: {missing}")


# Packages served by an extra of their own: callwarden mcp, callwarden serve.
SERVED = [(package, extra, p.name) for package, extra in (("gateway", "mcp"), ("serve", "serve"))
          for p in sorted((ADAPTERS.parent / package).glob("*.py"))]


@pytest.mark.parametrize(("package", "extra", "module"), SERVED)
def test_a_served_package_imports_only_what_its_extra_installs(package: str, extra: str,
                                                               module: str) -> None:
    imported = _third_party((ADAPTERS.parent / package / module).read_text(encoding="utf-8"))
    missing = _missing(imported, extra)
    assert not missing, (f"callwarden.{package}.{module} imports what callwarden[{extra}] "
                         f"does not install: {missing}")


def test_frameworks_extra_installs_every_framework_extra() -> None:
    frameworks = _extra("frameworks")
    for extra in ("langchain", "openai-agents", "autogen", "claude", "pydantic-ai", "llamaindex",
                  "smolagents", "agno", "google-adk", "agent-framework"):
        assert _extra(extra) <= frameworks, extra
