"""Shell-command analysis: what a command line would run, on which files, and what is hidden.

``analyze_command("sudo rm -fr ~")`` returns a :class:`CommandAnalysis` whose ``commands``
hold ``rm`` with flags ``{"recursive", "force"}`` and wrapper ``sudo``; ``ShellPatternSet``
matches flag-aware patterns (``rm -r *``) against it. The ``shell:`` rule condition
(:mod:`callwarden.conditions.shell`) puts both in a policy file.
"""

from __future__ import annotations

from callwarden.analysis.shell._analysis import analyze_command, cache_info, clear_cache
from callwarden.analysis.shell._model import CommandAnalysis, Pipeline, SimpleCommand
from callwarden.analysis.shell._pattern import PathGlobs, PatternMatch, ShellPatternSet

__all__ = [
    "CommandAnalysis",
    "PathGlobs",
    "PatternMatch",
    "Pipeline",
    "ShellPatternSet",
    "SimpleCommand",
    "analyze_command",
    "cache_info",
    "clear_cache",
]
