"""The package surface: exports, typing marker, and importing without any extra installed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import callwarden


def test_all_is_sorted_and_every_name_exists() -> None:
    assert callwarden.__all__ == sorted(callwarden.__all__)
    for name in callwarden.__all__:
        assert hasattr(callwarden, name), name


def test_every_public_name_is_exported() -> None:
    public = {n for n in dir(callwarden) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(callwarden, n)).__name__ == "module"}
    assert public - modules == set(callwarden.__all__) - {"__version__"}


def test_importing_callwarden_loads_none_of_it() -> None:
    """``callwarden hook``'s warm path pays only for the modules it uses: the package's own
    import loads no callwarden module, and each export is loaded on first use."""
    code = ("import sys, callwarden; "
            "print(sorted(m for m in sys.modules if m.startswith('callwarden.'))); "
            "callwarden.Guard; print('callwarden._guard' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, check=True)
    assert result.stdout.split("\n")[:2] == ["[]", "True"]


def test_py_typed_ships() -> None:
    assert (Path(callwarden.__file__).parent / "py.typed").exists()


def test_import_works_with_no_extras_installed() -> None:
    """Block every optional integration's import and import callwarden in a fresh interpreter."""
    code = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in BLOCKED:
            raise ImportError(f'blocked {name}')
        return None
BLOCKED = {'redis', 'langchain', 'langchain_core', 'langgraph', 'agents', 'autogen_core',
           'autogen_agentchat', 'mcp', 'opentelemetry', 'claude_agent_sdk', 'fastapi',
           'starlette', 'uvicorn', 'jsonschema', 'pytest', 'callguard', 'crewai', 'pydantic_ai',
           'semantic_kernel', 'llama_index', 'workflows', 'smolagents', 'agno', 'google',
           'agent_framework', 'aport_guardrails', 'publicsuffixlist'}
sys.meta_path.insert(0, Block())
import callwarden
g = callwarden.Guard.from_dict({'version': 1, 'rules': [{'id': 'x', 'effect': 'deny'}]})
assert g.check('t', {}).effect is callwarden.Effect.DENY
loaded = BLOCKED & {m.split('.')[0] for m in sys.modules}
assert not loaded, loaded
print('ok')
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
