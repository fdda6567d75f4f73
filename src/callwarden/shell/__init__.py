"""Shell-command analysis: what a command line would run, on which files, and what is hidden.

``analyze_command("sudo rm -fr ~")`` returns a :class:`CommandAnalysis` whose ``commands``
hold ``rm`` with flags ``{"recursive", "force"}`` and wrapper ``sudo``; ``ShellPatternSet``
matches flag-aware patterns (``rm -r *``) against it; the ``shell:`` rule condition
(:class:`ShellMatcher`) puts both in a policy file.
"""

from __future__ import annotations

from callwarden.shell._analysis import analyze_command, cache_info, clear_cache
from callwarden.shell._baseline import baseline_config, baseline_rules
from callwarden.shell._matcher import ShellMatcher, shell_analysis
from callwarden.shell._model import CommandAnalysis, Pipeline, SimpleCommand
from callwarden.shell._pattern import PathGlobs, PatternMatch, ShellPatternSet

__all__ = [
    "CommandAnalysis",
    "PathGlobs",
    "PatternMatch",
    "Pipeline",
    "ShellMatcher",
    "ShellPatternSet",
    "SimpleCommand",
    "analyze_command",
    "baseline_config",
    "baseline_rules",
    "cache_info",
    "clear_cache",
    "shell_analysis",
]
