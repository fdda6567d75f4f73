"""The ``callwarden`` command line: check, decide, lint, test, init, demo, hook, approvals,
replay, explain, audit summary.

Exit codes (``check``, ``decide``): 0 allowed (allow or modify), 10 denied, 11 needs approval (ask),
12 halted; every command: 2 for a usage error or an invalid policy, 1 for failed policy tests.

``callwarden hook`` runs once per tool call of a coding agent, so it starts on a short path:
it asks the policy's warm hook worker (see ``callwarden.hooks._client``) before anything else
is imported, and loads the whole command line only when that path cannot answer.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # `typing` costs the hook's warm path more than the rest of its imports
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import TextIO

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the CLI; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["hook"]:
        from callwarden.hooks._client import hook_through_worker

        code = hook_through_worker(args[1:], sys.stdin, sys.stdout, sys.stderr, _hook_here)
        if code is not None:
            return code
    from callwarden.cli._main import main as run

    return run(args)


def _hook_here(agent: str, policy: str, stdin: TextIO) -> int:
    """``callwarden hook`` deciding in this process, with the policy's regular expressions
    built from the code kept by the last such process (``callwarden.hooks._compiled``)."""
    from callwarden.hooks._compiled import kept_regexes

    with kept_regexes(policy):
        from callwarden.hooks import run_hook

        return run_hook(agent, policy, stdin, sys.stdout, sys.stderr)
