"""Framework adapters: one policy file governs tool calls wherever the agent runs.

Each adapter lives in its own module and imports its framework lazily, so installing
``callwarden`` alone never pulls a framework in (``pip install 'callwarden[langchain]'``).
All of them translate through :class:`Enforcer`.
"""

from callwarden._enforce import Enforcer, as_guard, describe_refusal

__all__ = ["Enforcer", "as_guard", "describe_refusal"]
