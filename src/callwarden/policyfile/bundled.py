"""The bundled policies: ``callwarden:recommended`` and ``callwarden:shell`` (the baseline shell
rules), and helpers that read the baseline shell rules."""

from __future__ import annotations

import copy
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

__all__ = ["baseline_config", "baseline_rules"]


@lru_cache(maxsize=1)
def _load() -> dict[str, Any]:
    text = resources.files("callwarden.policyfile").joinpath("shell.yaml").read_text("utf-8")
    data = yaml.safe_load(text)
    if not isinstance(data, dict) or not isinstance(data.get("rules"), list):
        raise RuntimeError("callwarden/policy/shell.yaml must hold a list under 'rules'")
    return data


def baseline_rules() -> list[dict[str, Any]]:
    """The baseline policy rules (id, match, shell, effect, message), as fresh dicts."""
    return copy.deepcopy(_load()["rules"])


def baseline_config(rule_id: str | None = None) -> dict[str, Any]:
    """The ``shell:`` config of one baseline rule, or all of them merged (``rule_id=None``).

    The merged config denies, as one condition, everything the baseline rules deny and treats
    opaque commands as hits: handy for scoring and for a single-rule policy.
    """
    rules = _load()["rules"]
    if rule_id is not None:
        for rule in rules:
            if rule.get("id") == rule_id:
                return copy.deepcopy(rule["shell"])
        raise KeyError(f"no baseline rule {rule_id!r}")
    merged: dict[str, Any] = {}
    for rule in rules:
        for key, value in rule["shell"].items():
            if isinstance(value, list):
                merged.setdefault(key, []).extend(copy.deepcopy(value))
            else:
                merged[key] = value
    return merged
