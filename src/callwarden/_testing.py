"""Policy unit tests: inline ``examples`` and separate YAML test files of expected decisions.

A test file::

    policy: policy.yaml          # relative to this file
    cases:
      - name: ssh keys are off limits
        tool: read_file
        args: {path: ~/.ssh/id_rsa}
        expect: deny             # allow | modify | deny | ask | halt
        rule: no-credentials     # optional: the deciding rule
        args_after: {...}        # optional: the effective args (for modify)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from callwarden._call import thaw
from callwarden._decision import Decision, Effect
from callwarden._engine import Engine
from callwarden._yamlsrc import load_yaml
from callwarden.exceptions import PolicyError, Problem

__all__ = ["CaseResult", "run_case", "run_test_file"]

_CALL_FIELDS = ("agent", "session", "principal", "framework")


@dataclass(frozen=True, slots=True)
class CaseResult:
    """The outcome of one policy test case."""

    name: str
    expected: str
    actual: str
    rule: str | None
    detail: str
    passed: bool
    where: str | None = None


def decide_case(engine: Engine, case: Mapping[str, Any]) -> Decision:
    """Decides the call a test case describes."""
    from callwarden._guard import Guard

    guard = Guard._from_engine(engine, audit=False)
    fields = {k: case[k] for k in _CALL_FIELDS if k in case}
    return guard.check(case["tool"], case.get("args") or {}, context=case.get("context"),
                       **fields)


def run_case(engine: Engine, case: Mapping[str, Any], expected: str,
             where: str | None = None) -> CaseResult:
    """Runs one case and compares its effect (``allow`` also accepts ``modify``).

    Cases check what *enforce* mode decides (``would_effect`` when rules are in observe mode),
    so a rule can be tested before it is enforced.
    """
    decision = decide_case(engine, case)
    actual = decision.would_effect or decision.effect
    ok = actual.value == expected or (expected == "allow" and actual is Effect.MODIFY)
    want_rule = case.get("rule")
    if ok and want_rule is not None and decision.rule != want_rule:
        ok = False
    if ok and "args_after" in case and thaw(decision.args) != case["args_after"]:
        ok = False
    detail = decision.reasons[0].message if decision.reasons else ""
    name = case.get("name") or f"{case['tool']} {dict(case.get('args') or {})}"
    return CaseResult(str(name)[:120], expected, actual.value, decision.rule, detail, ok, where)


def run_test_file(path: Path) -> tuple[Path, list[CaseResult]]:
    """Loads a test file, its policy, and runs every case.

    Raises:
        PolicyError: when the test file or its policy is invalid.
    """
    from callwarden._loader import load_policy_file

    data, lines = load_yaml(path.read_text(encoding="utf-8"), str(path))
    if not isinstance(data, Mapping) or not isinstance(data.get("policy"), str) \
            or not isinstance(data.get("cases"), list):
        raise PolicyError(Problem(
            "a test file needs 'policy: <file>' and 'cases: [...]'", str(path), 1,
            hint="or pass a policy file to run its inline examples"))
    policy_path = (path.parent / data["policy"]).resolve()
    engine = load_policy_file(policy_path, check_examples=False, audit=False)
    results = []
    problems = []
    for i, case in enumerate(data["cases"]):
        where = lines.source(("cases", i))
        if not isinstance(case, Mapping) or not isinstance(case.get("tool"), str) \
                or case.get("expect") not in [e.value for e in Effect]:
            problems.append(Problem("each case needs 'tool' and 'expect' (allow, modify, deny, "
                                    "ask or halt)", str(path), lines.line(("cases", i))))
            continue
        results.append(run_case(engine, case, case["expect"], where))
    if problems:
        raise PolicyError(problems)
    return policy_path, results


def run_inline_examples(path: Path) -> list[CaseResult]:
    """Runs a policy file's inline ``examples`` and returns every result (failures included)."""
    from callwarden._loader import _Checker, _collect_examples, load_policy_file

    engine = load_policy_file(path, check_examples=False, audit=False)
    data, lines = load_yaml(path.read_text(encoding="utf-8"), str(path))
    results = []
    for i, rule in enumerate((data or {}).get("rules") or []):
        if not isinstance(rule, Mapping) or "examples" not in rule:
            continue
        collected: list[Any] = []
        _collect_examples(rule["examples"], ("rules", i, "examples"), _Checker(lines), collected)
        for case_path, effect, case in collected:
            named = {**case, "name": case.get("name") or
                     f"{rule.get('id')}: {effect} {case['tool']} {dict(case.get('args') or {})}"}
            results.append(run_case(engine, named, effect, lines.source(case_path)))
    return results
