"""Per-call cost of a compiled CEL ``if:`` condition, for the two Python CEL libraries.

Run: ``PYTHONPATH=src python bench/bench_cel.py``. Prints medians in microseconds.

For each case it splits the cost into:

- build: Python work to assemble the activation (for celpy: converting to celtypes);
- convert: the Rust bindings' Python->CEL conversion, measured as ``execute`` of the constant
  expression ``true`` on the same activation (``cel`` only);
- eval: the rest of ``execute`` / ``evaluate``.

Libraries: ``cel`` (common-expression-language, Rust) used naively (all variables, whole
values, every call) and through ``CelCondition`` (the callwarden matcher, which narrows);
``celpy`` (cel-python, pure Python), interpreted and transpiled, if installed.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import cel

from callwarden._call import ToolCall
from callwarden._profiles import default_profile
from callwarden.conditions.base import CompileEnv, Subject
from callwarden.conditions.cel import CelCondition
from callwarden.policyfile.lists import NamedList

ROUNDS = 5


def median_us(fn: Callable[[], Any], number: int) -> float:
    """Median over ROUNDS of the mean time per call, in microseconds."""
    runs = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        runs.append((time.perf_counter() - start) / number * 1e6)
    return statistics.median(runs)


def make_lists(size: int) -> dict[str, NamedList]:
    return {"contacts": NamedList("contacts", [f"user{i}@example.com" for i in range(size)])}


CALL = ToolCall.create(
    "send_money",
    {"amount": 150, "to": "user7@example.com", "memo": "team lunch", "currency": "EUR",
     "force": False},
    agent="billing-agent", session="s-1", principal="alice",
    context={"user_request": "pay the team lunch"},
)
BIG_CALL = CALL.replace_args(ToolCall.create("x", {
    "amount": 150, "to": "user7@example.com",
    "rows": [{"id": i, "name": f"row {i}", "tags": ["a", "b"]} for i in range(2000)],
}).args)

CASES = [
    # label, expression, list size, call, iterations
    ("amount (5-key args)", "args.amount > 100", 0, CALL, 20000),
    ("amount (2000-row args)", "args.amount > 100", 0, BIG_CALL, 20000),
    ("lists, 100 items", "args.to in lists.contacts", 100, CALL, 20000),
    ("lists, 10000 items", "args.to in lists.contacts", 10000, CALL, 20000),
    # naive: the bindings compile the pattern on every call; CelCondition compiles it once
    ("matches(), literal pattern", "args.to.matches('^user[0-9]+@example\\\\.com$')", 0,
     CALL, 20000),
]


def naive_activation(call: ToolCall, lists: dict[str, NamedList]) -> dict[str, Any]:
    return {
        "tool": call.tool, "args": call.args, "agent": call.agent, "session": call.session,
        "principal": call.principal, "context": call.context, "kind": "payment",
        "lists": {k: list(v) for k, v in lists.items()},
        "history": {"count": 0, "tools": {}},
    }


def bench_cel_rust(label: str, expr: str, size: int, call: ToolCall, n: int) -> None:
    lists = make_lists(size)
    program, const = cel.compile(expr), cel.compile("true")
    # naive: every variable, whole values, converted on every call
    act = naive_activation(call, lists)
    slow = 20 if size > 1000 or call is BIG_CALL else n // 10
    build = median_us(lambda: naive_activation(call, lists), slow)
    convert = median_us(lambda: const.execute(act), slow) - median_us(const.execute, n)
    total = median_us(lambda: program.execute(act), slow)
    row("cel (Rust), naive", label, build, convert, total - convert, build + total)
    # the matcher: only what the expression reads
    matcher = CelCondition(expr, CompileEnv(lists=lists))
    subject = Subject(call, default_profile(call.tool))
    getters = matcher._getters

    def build_activation() -> dict[str, Any]:
        a = {name: get(subject) for name, get in getters}
        if matcher._lists is not None:
            a["lists"] = matcher._lists_for(a)
        return a

    act = build_activation()
    build = median_us(build_activation, n)
    convert = median_us(lambda: const.execute(act), n) - median_us(const.execute, n)
    total = median_us(lambda: matcher._program.execute(matcher._context(act)), n)
    call_us = median_us(lambda: matcher(subject), n)
    row("cel (Rust), CelCondition", label, build, convert, total - convert, call_us)


def bench_celpy(label: str, expr: str, size: int, call: ToolCall, n: int,
                envs: dict[str, Any]) -> None:
    import celpy

    lists = make_lists(size)
    # Fair to celpy: the same narrowing as CelCondition for args, lists converted once.
    narrow_args = dict(CelCondition(expr, CompileEnv(lists=lists))._getters)["args"]
    subject = Subject(call, default_profile(call.tool))
    cel_lists = celpy.json_to_cel({k: list(v) for k, v in lists.items()})
    for name, env in envs.items():
        runner = env.program(env.compile(expr))

        def build_activation() -> dict[str, Any]:
            return {"args": celpy.json_to_cel(narrow_args(subject)), "lists": cel_lists}

        act = build_activation()
        slow = 10 if call is BIG_CALL else n // 20
        build = median_us(build_activation, slow)
        evaluate = median_us(lambda: runner.evaluate(act), slow)  # noqa: B023
        row(f"celpy, {name}", label, build, 0.0, evaluate, build + evaluate)


def row(lib: str, case: str, build: float, convert: float, evaluate: float, total: float) -> None:
    # Subtracting two noisy medians can go below zero; clamp for display.
    print(f"{lib:28} {case:24} {build:10.2f} {max(convert, 0):10.2f} {max(evaluate, 0):10.2f} "
          f"{total:10.2f}")


def main() -> None:
    try:
        import celpy

        # The transpiling runner must be created first: celpy caches its parser per class.
        envs = {"transpiled": celpy.Environment(runner_class=celpy.CompiledRunner),
                "interpreted": celpy.Environment(runner_class=celpy.InterpretedRunner)}
    except ImportError:
        envs = {}
    print(f"{'library':28} {'case':24} {'build us':>10} {'convert us':>10} {'eval us':>10} "
          f"{'total us':>10}")
    for case in CASES:
        bench_cel_rust(*case)
        if envs:
            bench_celpy(*case, envs=envs)
    if not envs:
        print("celpy not installed (pip install cel-python) - skipped")


if __name__ == "__main__":
    main()
