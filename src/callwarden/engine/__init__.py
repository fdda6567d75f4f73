"""The engine: a compiled policy deciding one call.

:class:`Engine` holds the compiled rules, the tool profiles and the policy-wide settings, and
decides calls through one flow (mutate → validate → limits → combine → default) driven
synchronously or asynchronously (see :mod:`callwarden._flow`).
"""

from callwarden.engine.combine import Combiner, Entry, FirstMatch, StrictestWins
from callwarden.engine.engine import Engine, Settings
from callwarden.engine.index import Plan, RuleIndex
from callwarden.engine.output import OutputCheck
from callwarden.engine.rules import Rewrite, Rule, Selector

__all__ = ["Combiner", "Engine", "Entry", "FirstMatch", "OutputCheck", "Plan", "Rewrite", "Rule",
           "RuleIndex", "Selector", "Settings", "StrictestWins"]
