"""Policy tests: YAML test files of expected decisions, and a policy's inline examples run
as tests (``callwarden test``).

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
from pathlib import Path
from typing import Any

from callwarden._decision import Effect
from callwarden.exceptions import PolicyError, Problem
from callwarden.policyfile.check import Checker
from callwarden.policyfile.compile import load_policy_file
from callwarden.policyfile.examples import CaseResult, check_earlier, collect_examples, run_case
from callwarden.policyfile.extends import load_bases
from callwarden.policyfile.yamlsrc import load_yaml, read_source

__all__ = ["run_inline_examples", "run_test_file"]

_FILE_KEYS = ("policy", "cases", "name", "description")
_TEST_CASE_KEYS = ("name", "tool", "args", "agent", "session", "principal", "framework",
                   "context", "request", "earlier", "expect", "rule", "args_after")
_EFFECTS = tuple(e.value for e in Effect)


def run_test_file(path: Path) -> tuple[Path, list[CaseResult]]:
    """Loads a test file, its policy, and runs every case.

    Raises:
        PolicyError: when the test file or its policy is invalid.
    """
    data, lines = load_yaml(read_source(path, "test file"), str(path), collect=True)
    if not isinstance(data, Mapping):
        raise PolicyError([*lines.problems, Problem(
            "a test file needs 'policy: <file>' and 'cases: [...]'", str(path), 1,
            hint="or pass a policy file to run its inline examples")])
    # A typo'd key would silently drop what the case means to test, so every key is checked.
    check = Checker(lines)
    check.problems.extend(lines.problems)
    check.keys(data, (), _FILE_KEYS, "the test file")
    if not isinstance(data.get("policy"), str):
        check.error(("policy",) if "policy" in data else (),
                    "a test file needs 'policy: <file>'", "the policy's path, relative to this file")
    cases: list[tuple[int, Mapping[str, Any]]] = []
    if not isinstance(data.get("cases"), list):
        check.error(("cases",) if "cases" in data else (), "a test file needs 'cases: [...]'",
                    "e.g. cases: [{tool: read_file, args: {path: ~/.ssh/id_rsa}, expect: deny}]")
    else:
        for i, case in enumerate(data["cases"]):
            if _valid_test_case(case, ("cases", i), check):
                cases.append((i, case))
    if check.problems:
        raise PolicyError(check.problems)
    policy_path = (path.parent / data["policy"]).resolve()
    engine = load_policy_file(policy_path, check_examples=False).engine()
    results = [run_case(engine, case, case["expect"], lines.source(("cases", i)))
               for i, case in cases]
    return policy_path, results


def _valid_test_case(case: Any, path: tuple[str | int, ...], check: Any) -> bool:
    if not isinstance(case, Mapping) or not isinstance(case.get("tool"), str) \
            or "expect" not in case:
        check.error(path, f"each case needs 'tool' and 'expect' ({', '.join(_EFFECTS)})",
                    "e.g. {tool: read_file, args: {path: ~/.ssh/id_rsa}, expect: deny}")
        return False
    before = len(check.problems)
    check.keys(case, path, _TEST_CASE_KEYS, "a test case")
    check.choice(case["expect"], (*path, "expect"), _EFFECTS)
    for key in ("args", "context", "args_after"):
        if case.get(key) is not None and not isinstance(case[key], Mapping):
            check.error((*path, key), "must be a mapping")
    if "request" in case and not isinstance(case["request"], str):
        check.error((*path, "request"), "must be the text of the user's request")
    check_earlier(case, path, check)
    return len(check.problems) == before


def run_inline_examples(path: Path) -> list[CaseResult]:
    """Runs the inline ``examples`` of a policy file and of the policies it extends.

    Every example runs against this policy as compiled, so an override or a new rule that
    breaks an inherited expectation shows as a failure; examples of an inherited rule that a
    later policy redefines (same id) are skipped, since that rule no longer applies, and an
    inherited ``allow`` example that only this policy's ``default: deny`` refuses passes. Results
    come deepest base first, each with its ``file:line``; failures are included.
    """
    engine = load_policy_file(path, check_examples=False).engine()
    data, lines = load_yaml(read_source(path), str(path))
    data = data if isinstance(data, Mapping) else {}
    policies: list[tuple[Mapping[str, Any], Any]] = []
    if "extends" in data:
        # The policy loaded, so its bases load too; their problems were reported then.
        bases = load_bases(data["extends"], ("extends",), Checker(lines), path.parent,
                       (path.resolve(),))
        policies.extend((b.data, b.lines) for b in bases)
    policies.append((data, lines))
    results = []
    for n, (policy, where) in enumerate(policies):
        redefined = {r.get("id") for later, _ in policies[n + 1:] for r in _rules_of(later)}
        for i, rule in enumerate(_rules_of(policy)):
            if "examples" not in rule or (n < len(policies) - 1 and rule.get("id") in redefined):
                continue
            collected: list[Any] = []
            collect_examples(rule["examples"], ("rules", i, "examples"), Checker(where),
                              collected)
            for case_path, effect, case in collected:
                named = {**case, "name": case.get("name") or
                         f"{rule.get('id')}: {effect} {case['tool']} "
                         f"{dict(case.get('args') or {})}"}
                results.append(run_case(engine, named, effect, where.source(case_path),
                                        no_rule_is_allow=n < len(policies) - 1))
    return results


def _rules_of(policy: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    rules = policy.get("rules")
    return [r for r in rules if isinstance(r, Mapping)] if isinstance(rules, list) else []
