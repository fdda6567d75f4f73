"""Policy examples: inline ``examples`` of a rule, decided by the compiled policy.

A case is a call (``tool``, ``args``, ``agent`` ...) and the effect it must get, after the
``earlier`` calls of its session if it lists them (what the session saw: a tool's ``output``
there is what it returned, for rules about where a value came from). Cases are
decided by the engine on its own in-memory store: checking a policy never counts against real
limits and writes nothing to an audit log.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from time import perf_counter as _perf
from typing import TYPE_CHECKING, Any

from callwarden._call import new_id, thaw
from callwarden._decision import Decision, Effect
from callwarden._flow import drive
from callwarden.engine.engine import Engine
from callwarden.engine.facts import output_facts, remember
from callwarden.exceptions import PolicyError, Problem
from callwarden.policyfile.check import Checker, Path_, dotted
from callwarden.policyfile.yamlsrc import Lines

if TYPE_CHECKING:
    from callwarden.policyfile.settings import LoadedPolicy

__all__ = ["EXAMPLE_EFFECTS", "CaseResult", "check_earlier", "collect_examples", "decide_case",
           "run_case", "verify_examples"]

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
    """Decides the call a test case describes, after its ``earlier`` calls in the same
    session (each decided; one allowed with an ``output`` ran and returned it, remembered as
    running it through the enforcement path would be, and finished: one without is still
    running, in flight for ``concurrent`` limits). The case's calls let go of their slots at
    its end, so that no case holds one for another."""
    fields = {k: case[k] for k in _CALL_FIELDS if k in case}
    context = case.get("context")
    if "request" in case:  # the user's request: context.request, as guard.check(request=...)
        context = {**(context or {}), "request": case["request"]}
    running: list[Decision] = []
    if case.get("earlier"):
        fields.setdefault("session", f"example-{new_id()}")  # a session of the case's own
        for step in case["earlier"]:
            earlier = engine.decide(step["tool"], step.get("args") or {}, context=context,
                                    **fields)
            if "output" in step and earlier.effect.allows:
                _ran(engine, earlier, step["output"])
                _finished(engine, earlier)
            else:
                running.append(earlier)
    decision = engine.decide(case["tool"], case.get("args") or {}, context=context, **fields)
    for call in (decision, *running):
        _finished(engine, call)
    return decision


def _finished(engine: Engine, decision: Decision) -> None:
    """Lets go of the slots of ``concurrent`` limits a decided call holds."""
    flow = engine.release(decision) if decision.effect.allows else None
    if flow is not None:
        drive(flow)


def _ran(engine: Engine, decision: Decision, output: Any) -> None:
    """What the enforcement path remembers of a tool's output (untrusted content)."""
    values = output_facts(engine, engine.facts, decision.call, output)
    if values is not None and decision.call.session is not None:
        drive(remember(engine.store, engine.clock, decision.call.session, "untrusted", values,
                       _perf() + engine.settings.timeout))


def run_case(engine: Engine, case: Mapping[str, Any], expected: str,
             where: str | None = None, *, no_rule_is_allow: bool = False) -> CaseResult:
    """Runs one case and compares its effect (``allow`` also accepts ``modify``).

    Cases check what *enforce* mode decides (``would_effect`` when rules are in observe mode),
    so a rule can be tested before it is enforced. With ``no_rule_is_allow`` an ``allow`` case
    also passes when no rule decided and a ``default: deny`` refused the call: an inherited
    example says what the base's rules let through, not what this policy's default does.
    """
    decision = decide_case(engine, case)
    actual = decision.would_effect or decision.effect
    ok = actual.value == expected or (expected == "allow" and actual is Effect.MODIFY) or (
        no_rule_is_allow and expected == "allow" and decision.rule == "default")
    want_rule = case.get("rule")
    if ok and want_rule is not None and decision.rule != want_rule:
        ok = False
    if ok and "args_after" in case and thaw(decision.args) != case["args_after"]:
        ok = False
    detail = decision.reasons[0].message if decision.reasons else ""
    name = case.get("name") or f"{case['tool']} {dict(case.get('args') or {})}"
    return CaseResult(str(name)[:120], expected, actual.value, decision.rule, detail, ok, where)


EXAMPLE_EFFECTS = ("allow", "modify", "deny", "ask", "halt")


_CASE_KEYS = ("tool", "args", "agent", "session", "principal", "framework", "context",
              "request", "earlier", "name")


def collect_examples(raw: Any, path: Path_, check: Checker,
                      out: list[tuple[Path_, str, Mapping[str, Any]]]) -> None:
    if not isinstance(raw, Mapping):
        check.error(path, "must map effects to lists of calls",
                    "e.g. examples: {deny: [{tool: bash, args: {command: 'rm -rf /'}}]}")
        return
    check.keys(raw, path, EXAMPLE_EFFECTS, "examples")
    for effect, cases in raw.items():
        if effect not in EXAMPLE_EFFECTS:
            continue
        if not isinstance(cases, list):
            check.error((*path, effect), "must be a list of calls")
            continue
        for k, case in enumerate(cases):
            case_path = (*path, effect, k)
            if _valid_case(case, case_path, check):
                out.append((case_path, effect, case))


def _valid_case(case: Any, path: Path_, check: Checker) -> bool:
    if not isinstance(case, Mapping) or not isinstance(case.get("tool"), str):
        check.error(path, "each example needs 'tool' (and usually 'args')",
                    "e.g. {tool: read_file, args: {path: README.md}}")
        return False
    check.keys(case, path, (*_CASE_KEYS, "expect", "rule"), "an example")
    if "args" in case and not isinstance(case["args"], Mapping):
        check.error((*path, "args"), "must be a mapping")
        return False
    return check_earlier(case, path, check)


def check_earlier(case: Mapping[str, Any], path: Path_, check: Checker) -> bool:
    """Whether a case's ``earlier`` calls are well formed (a problem for each that is not)."""
    earlier = case.get("earlier", [])
    if not isinstance(earlier, list) or not all(
            isinstance(step, Mapping) and isinstance(step.get("tool"), str)
            and isinstance(step.get("args", {}), Mapping) for step in earlier):
        check.error((*path, "earlier"), "must list the session's earlier calls",
                    "e.g. earlier: [{tool: web_fetch, args: {url: ...}, output: '<the page>'}]")
        return False
    for k, step in enumerate(earlier):
        check.keys(step, (*path, "earlier", k), ("tool", "args", "output"), "an earlier call")
    return True


def verify_examples(loaded: LoadedPolicy, examples: list[tuple[Path_, str, Mapping[str, Any]]],
                    lines: Lines) -> None:
    """Decides every inline example with the loaded policy, on a private in-memory store.

    Raises:
        PolicyError: one problem per example the policy does not decide as it says.
    """
    engine = loaded.engine()
    problems = []
    for path, effect, case in examples:
        result = run_case(engine, case, effect)
        if not result.passed:
            problems.append(Problem(
                f"example expects {effect} but the policy decides {result.actual}"
                f" (rule {result.rule}: {result.detail})",
                lines.file, lines.line(path), dotted(path),
                "fix the rule or the example; run 'callwarden test' to see every case"))
    if problems:
        raise PolicyError(problems)
