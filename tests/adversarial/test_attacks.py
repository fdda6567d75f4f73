"""Every attack tried on callwarden holds: nothing harmful runs, no exception but a refusal
reaches the agent, no call hangs, and every call has its decision event.

The probes are data (``_probes.py``); ``bench/score_attacks.py`` runs the same list and
prints the figures.
"""

from __future__ import annotations

import pytest
from _probes import PROBES, Probe, attempt


@pytest.mark.parametrize("probe", PROBES, ids=[p.name for p in PROBES])
def test_the_attack_is_held(probe: Probe) -> None:
    result = attempt(probe)
    assert not result.hang, f"{probe.name}: still running after the hang limit"
    assert result.crash is None, f"{probe.name}: {result.crash}"
    assert result.bypass is None, f"{probe.name}: {result.bypass}"
    assert result.events_lost == 0, f"{probe.name}: {result.events_lost} decision event(s) lost"


def test_the_probes_are_not_vacuous() -> None:
    # A probe that never reaches the guard would hold trivially: every one makes a call.
    names = {p.name for p in PROBES}
    assert len(names) == len(PROBES)
    assert {p.group for p in PROBES} >= {"values", "hostile objects", "policies",
                                         "approved value", "approvals", "hook input"}
