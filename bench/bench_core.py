"""Decision cost of the core engine, and guarded-call overhead against callguard 0.3.0.

Run: .venv/bin/python bench/bench_core.py   (needs `pip install -e .[bench]` for callguard)

Measures, in one run on this machine:
  guard.check median / p99 for (a) a 1-rule policy, (b) a 12-rule realistic policy,
  (c) 10,000 rules spread over 1,000 tool names;
  the overhead per guarded call of guard.arun, of callguard's CallGuard.run with an equivalent
  tool-name contract, and of calling the tool directly (the baseline);
  with a budget: guard.arun under five argument rules and a per-session call budget (memory
  store) against CallGuard.run with five preconditions and its call limit, one call at a time
  and as 1,000 concurrent calls (µs per call over the whole batch);
  against Microsoft's Agent Governance Toolkit: its PolicyEvaluator (agent-governance-toolkit-
  core, in an environment of its own, .venv-agt, made on first use) and guard.check with the
  same rules, one per tool name, at 1, 12, 100 and 10,000 rules, deciding a call that the last
  rule denies. Skipped with --no-agt.

(b) repeats six calls, so shell and path analysis is served from the engine's LRU caches. The
"unique args" rows run the same six tools with a counter in every command, path, URL and value,
so nothing repeats and every call pays for parsing and normalizing its arguments.
"""

from __future__ import annotations

import asyncio
import gc
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from callwarden import Guard

HERE = Path(__file__).parent
N = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 20_000
_ns = time.perf_counter_ns


def stats(samples: list[int]) -> dict[str, float]:
    samples.sort()
    return {"median_us": statistics.median(samples) / 1000,
            "p99_us": samples[int(len(samples) * 0.99)] / 1000,
            "mean_us": statistics.fmean(samples) / 1000}


WARMUP = 200


def time_sync(fn: Any, calls: list[tuple[str, dict]], n: int = N,
              start: int = 0) -> dict[str, float]:
    """Times ``fn`` over ``calls`` after a warm-up; ``start`` skips calls the warm-up used."""
    for tool, args in calls[:WARMUP]:
        fn(tool, args)
    samples = []
    gc.disable()
    try:
        for i in range(n):
            tool, args = calls[(start + i) % len(calls)]
            t0 = _ns()
            fn(tool, args)
            samples.append(_ns() - t0)
    finally:
        gc.enable()
    return stats(samples)


async def time_async(fn: Any, calls: list[tuple[str, dict]], n: int = N,
                     start: int = 0) -> dict[str, float]:
    for tool, args in calls[:WARMUP]:
        await fn(tool, args)
    samples = []
    gc.disable()
    try:
        for i in range(n):
            tool, args = calls[(start + i) % len(calls)]
            t0 = _ns()
            await fn(tool, args)
            samples.append(_ns() - t0)
    finally:
        gc.enable()
    return stats(samples)


def many_rules_policy(rules: int = 10_000, tools: int = 1_000) -> dict[str, Any]:
    out = []
    for i in range(rules):
        tool = f"tool_{i % tools}"
        out.append({"id": f"r{i}", "match": {"tool": tool}, "args": {"env": f"env-{i}"},
                    "effect": "deny"})
    return {"version": 1, "rules": out}


def many_paths_policy(rules: int = 500) -> Guard:
    """The realistic policy with ``rules`` more permission strings denying reads."""
    policy = yaml.safe_load((HERE / "policies" / "realistic.yaml").read_text("utf-8"))
    policy["deny"] += [f"Read(~/.secret{i}/**)" for i in range(rules)]
    return Guard.from_dict(policy)


REALISTIC_CALLS = [
    ("read_file", {"path": "src/app.py"}),
    ("bash", {"command": "ls -la src"}),
    ("deploy", {"env": "staging"}),
    ("fetch", {"url": "https://api.github.com/repos"}),
    ("write_file", {"path": "notes.md", "content": "hello"}),
    ("mcp__github__list_issues", {"repo": "a/b"}),
]


def unique_calls(n: int, tag: str) -> list[tuple[str, dict]]:
    """The six realistic calls, each argument value made unique with a counter.

    ``tag`` keeps the values of one measurement out of the caches another one filled.
    """
    out: list[tuple[str, dict]] = []
    for j in range(n):
        i = f"{tag}{j}"
        out.append([
            ("read_file", {"path": f"src/pkg_{i}/app_{i}.py"}),
            ("bash", {"command": f"ls -la src/dir_{i} && grep -rn todo_{i} lib_{i}"}),
            ("deploy", {"env": f"staging-{i}"}),
            ("fetch", {"url": f"https://api.github.com/repos/org/repo_{i}?page={i}"}),
            ("write_file", {"path": f"notes/day_{i}.md", "content": f"hello {i}"}),
            ("mcp__github__list_issues", {"repo": f"a/b{i}"}),
        ][j % 6])
    return out


def tool_body(**kwargs: Any) -> int:
    return len(kwargs)


async def async_tool_body(**kwargs: Any) -> int:
    return len(kwargs)


def callguard_guard() -> Any:
    from callguard import CallGuard, OperationLimits, Verdict, precondition

    class NullSink:
        async def emit(self, event: Any) -> None:
            return None

    # The same tool-name contracts as the realistic policy's deploy rule, per tool name.
    contracts = []
    for name in ("deploy", "read_file", "bash", "fetch", "write_file", "send_money",
                 "search_docs", "mcp__github__create_issue", "mcp__db__query", "mcp__github__x",
                 "mcp__github__delete_repo", "mcp__github__list_issues"):
        @precondition(name)
        def contract(envelope: Any, _name: str = name) -> Any:
            if envelope.args.get("env") == "prod":
                return Verdict.fail("Deploy to staging instead.")
            return Verdict.pass_()

        contracts.append(contract)
    # Limits out of the way: callguard caps a session at 200 calls by default.
    limits = OperationLimits(max_attempts=10**9, max_tool_calls=10**9)
    return CallGuard(contracts=contracts, audit_sink=NullSink(), limits=limits)


async def overheads(guard: Guard) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, float]] = {}

    async def direct(tool: str, args: dict) -> Any:
        return await async_tool_body(**args)

    async def warden(tool: str, args: dict) -> Any:
        return await guard.arun(tool, args, async_tool_body)

    results["direct call"] = await time_async(direct, REALISTIC_CALLS)
    results["callwarden arun (b)"] = await time_async(warden, REALISTIC_CALLS)
    results["callwarden arun (b) unique args"] = await time_async(
        warden, unique_calls(N + WARMUP, "arun"), start=WARMUP)
    try:
        cg = callguard_guard()
    except ImportError:
        print("callguard is not installed: pip install callguard==0.3.0", file=sys.stderr)
        return results

    async def callguard(tool: str, args: dict) -> Any:
        return await cg.run(tool, args, async_tool_body)

    results["callguard 0.3.0 run"] = await time_async(callguard, REALISTIC_CALLS, n=N // 4)
    return results


BUDGET_CALL = ("deploy", {"env": "staging", "region": "eu", "build": "b-7"})


def budget_guard() -> Guard:
    """Five argument rules on the tool and a per-session budget, in memory."""
    rules: list[dict[str, Any]] = [
        {"id": f"rule-{k}", "match": {"tool": "deploy"}, "args": {key: value},
         "effect": "deny"}
        for k, (key, value) in enumerate([("env", "prod"), ("region", "us-gov"),
                                          ("build", "b-0"), ("env", "prod-*"),
                                          ("region", "cn-*")])]
    rules.append({"id": "budget", "limit": {"calls": 10**9, "per": "session"}})
    return Guard.from_dict({"version": 1, "rules": rules})


def callguard_budget() -> Any:
    from callguard import CallGuard, OperationLimits, Verdict, precondition

    class NullSink:
        async def emit(self, event: Any) -> None:
            return None

    contracts = []
    for key, value in [("env", "prod"), ("region", "us-gov"), ("build", "b-0"),
                       ("env", "prod-x"), ("region", "cn-x")]:
        @precondition("deploy")
        def contract(envelope: Any, _key: str = key, _value: str = value) -> Any:
            if envelope.args.get(_key) == _value:
                return Verdict.fail(f"{_key} may not be {_value}")
            return Verdict.pass_()

        contracts.append(contract)
    limits = OperationLimits(max_attempts=10**9, max_tool_calls=10**9)
    return CallGuard(contracts=contracts, audit_sink=NullSink(), limits=limits)


async def budgets() -> dict[str, dict[str, float]]:
    """arun with a budget against callguard's run with its call limit, alone and 1,000 at once."""
    guard = budget_guard()
    tool, args = BUDGET_CALL
    results: dict[str, dict[str, float]] = {}

    async def warden(t: str, a: dict) -> Any:
        return await guard.arun(t, a, async_tool_body, session="s")

    results["callwarden arun, 5 rules + budget"] = await time_async(warden, [BUDGET_CALL])

    async def concurrent(run: Any) -> dict[str, float]:
        samples = []
        for _ in range(21):
            t0 = _ns()
            await asyncio.gather(*(run(tool, args) for _ in range(1000)))
            samples.append((_ns() - t0) / 1000 / 1000)
        median = statistics.median(samples[1:])
        return {"median_us": median, "p99_us": max(samples[1:]), "mean_us":
                statistics.fmean(samples[1:])}

    results["callwarden 1,000 concurrent, budget"] = await concurrent(warden)
    try:
        cg = callguard_budget()
    except ImportError:
        return results

    async def callguard(t: str, a: dict) -> Any:
        return await cg.run(t, a, async_tool_body)

    results["callguard run, 5 contracts + limit"] = await time_async(callguard, [BUDGET_CALL],
                                                                    n=N // 4)
    results["callguard 1,000 concurrent, limit"] = await concurrent(callguard)
    return results


AGT_SIZES = (1, 12, 100, 10_000)
AGT_ENV = HERE.parent / ".venv-agt"
AGT_PACKAGE = "agent-governance-toolkit-core==5.0.0"
# Run in AGT's environment: prints {rules: median µs per evaluate} as JSON.
AGT_SCRIPT = """
import json, statistics, sys, time
from agent_os.policies.evaluator import PolicyEvaluator
from agent_os.policies.schema import PolicyCondition, PolicyDocument, PolicyRule
out = {}
for n in json.loads(sys.argv[1]):
    rules = [PolicyRule(name=f"r{i}", action="deny", message="no",
                        condition=PolicyCondition(field="tool_name", operator="eq",
                                                  value=f"tool_{i}"))
             for i in range(n)]
    evaluator = PolicyEvaluator([PolicyDocument(name="bench", rules=rules)])
    context = {"tool_name": f"tool_{n - 1}", "args": {"env": "dev"}}
    assert not evaluator.evaluate(context).allowed
    reps = max(20, 20000 // n)
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps):
            evaluator.evaluate(context)
        runs.append((time.perf_counter() - t0) / reps * 1e6)
    out[n] = statistics.median(runs)
print(json.dumps(out))
"""


def agt_environment() -> Path | None:
    """The Python of an environment holding AGT (made on first use), or None if it cannot be."""
    python = AGT_ENV / "bin" / "python"
    if not python.exists():
        made = subprocess.run([sys.executable, "-m", "venv", str(AGT_ENV)],
                              capture_output=True, check=False)
        if made.returncode != 0:
            return None
    ok = subprocess.run([str(python), "-c", "import agent_os.policies.evaluator"],
                        capture_output=True, check=False)
    if ok.returncode != 0:
        installed = subprocess.run([str(python), "-m", "pip", "install", "-q",
                                    "--disable-pip-version-check", AGT_PACKAGE],
                                   capture_output=True, check=False)
        if installed.returncode != 0:
            return None
    return python


def agt_rows() -> dict[str, dict[str, float]]:
    """guard.check and AGT's PolicyEvaluator.evaluate with the same rules, per rule count."""
    python = agt_environment()
    if python is None:
        print("AGT could not be installed into .venv-agt: its rows are left out", file=sys.stderr)
        return {}
    done = subprocess.run([str(python), "-c", AGT_SCRIPT, json.dumps(AGT_SIZES)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(f"AGT failed: {done.stderr.strip()[-300:]}", file=sys.stderr)
        return {}
    agt = {int(k): v for k, v in json.loads(done.stdout).items()}
    rows: dict[str, dict[str, float]] = {}
    for n in AGT_SIZES:
        guard = Guard.from_dict({"version": 1, "rules": [
            {"id": f"r{i}", "match": {"tool": f"tool_{i}"}, "effect": "deny", "message": "no"}
            for i in range(n)]})
        call = [(f"tool_{n - 1}", {"env": "dev"})]
        assert not guard.check(*call[0]).allowed
        rows[f"check, {n:,} rules (AGT comparison)"] = time_sync(guard.check, call)
        rows[f"AGT PolicyEvaluator, {n:,} rules"] = {"median_us": agt[n], "p99_us": agt[n],
                                                     "mean_us": agt[n]}
    return rows


def main() -> None:
    one = Guard.from_file(HERE / "policies" / "one_rule.yaml")
    realistic = Guard.from_file(HERE / "policies" / "realistic.yaml")
    many = Guard.from_dict(many_rules_policy())
    many_calls = [(f"tool_{i}", {"env": "dev"}) for i in range(0, 1000, 7)]

    rows = {
        "check (a) 1 rule": time_sync(one.check, [("deploy", {"env": "dev"})]),
        "check (b) 12 rules": time_sync(realistic.check, REALISTIC_CALLS),
        "check (b) 12 rules, unique args": time_sync(realistic.check, unique_calls(N + WARMUP, "mix"),
                                                     start=WARMUP),
        "check (c) 10,000 rules / 1,000 tools": time_sync(many.check, many_calls),
        # Path rules resolve symlinks: an existing file (its resolution kept, checked with one
        # stat) and a path that does not exist yet (kept, checked with a stat and an lstat).
        "check (b) read_file, an existing file": time_sync(
            realistic.check, [("read_file", {"path": str(Path(__file__).resolve())})]),
        "check (b) read_file, a new file": time_sync(
            realistic.check, [("read_file", {"path": "src/not_there_yet.py"})]),
        # The same read under 500 more path deny rules (Read(~/.secretN/**)): one condition
        # stands for them all (engine/index.py), so it costs what the 12-rule policy does.
        "check read_file, 500 path deny rules": time_sync(
            many_paths_policy().check, [("read_file", {"path": str(Path(__file__).resolve())})]),
    }
    # The mix's median is a cheap call (4 of the 6 tools analyse little), so show each tool too.
    unique = unique_calls(6 * (N // 6 + WARMUP), "tool")
    per_tool = {unique[k][0]: time_sync(realistic.check, unique[k::6], n=N // 6, start=WARMUP)
                for k in range(6)}
    rows.update(asyncio.run(overheads(realistic)))
    rows.update(asyncio.run(budgets()))
    if "--no-agt" not in sys.argv:
        rows.update(agt_rows())
    direct = rows["direct call"]["median_us"]
    print(f"{'measure':42} {'median µs':>10} {'p99 µs':>10} {'mean µs':>10}  overhead µs")
    for name, r in rows.items():
        over = f"{r['median_us'] - direct:10.2f}" if "run" in name else ""
        print(f"{name:42} {r['median_us']:10.2f} {r['p99_us']:10.2f} {r['mean_us']:10.2f}  {over}")
    print("check (b) unique args, per tool (median µs): " + ", ".join(
        f"{tool} {r['median_us']:.1f}" for tool, r in per_tool.items()))
    b = rows["check (b) 12 rules"]["median_us"]
    b_unique = rows["check (b) 12 rules, unique args"]["median_us"]
    c = rows["check (c) 10,000 rules / 1,000 tools"]["median_us"]
    ratios: dict[str, float] = {"(c) / (b) median": c / b}
    print(f"\n(c) / (b) median: {c / b:.2f}x  (target <= 1.5x)")
    if "callguard 0.3.0 run" in rows:
        cg_over = rows["callguard 0.3.0 run"]["median_us"] - direct
        cw_over = rows["callwarden arun (b)"]["median_us"] - direct
        cw_unique_over = rows["callwarden arun (b) unique args"]["median_us"] - direct
        ratios.update({
            "callguard overhead / check (b) median": cg_over / b,
            "callguard overhead / check (b) unique args median": cg_over / b_unique,
            "callguard overhead / arun (b) overhead": cg_over / cw_over,
            "callguard overhead / arun (b) unique args overhead": cg_over / cw_unique_over,
        })
        print(f"callguard guarded-call overhead / callwarden check (b) median: {cg_over / b:.1f}x"
              f"  (target >= 10x); with unique args: {cg_over / b_unique:.1f}x")
        print(f"callguard overhead / callwarden arun overhead: {cg_over / cw_over:.1f}x"
              f"; with unique args: {cg_over / cw_unique_over:.1f}x")
    if "callguard run, 5 contracts + limit" in rows:
        alone = (rows["callguard run, 5 contracts + limit"]["median_us"]
                 / rows["callwarden arun, 5 rules + budget"]["median_us"])
        together = (rows["callguard 1,000 concurrent, limit"]["median_us"]
                    / rows["callwarden 1,000 concurrent, budget"]["median_us"])
        ratios.update({"callguard run / callwarden arun, with a budget": alone,
                       "callguard / callwarden, 1,000 concurrent with a budget": together})
        print(f"with a budget: callguard run / callwarden arun: {alone:.1f}x; "
              f"1,000 concurrent: {together:.1f}x")
    agt = [(n, rows[f"AGT PolicyEvaluator, {n:,} rules"]["median_us"]
            / rows[f"check, {n:,} rules (AGT comparison)"]["median_us"])
           for n in AGT_SIZES if f"AGT PolicyEvaluator, {n:,} rules" in rows]
    if agt:
        ratios.update({f"AGT / callwarden check, {n:,} rules": r for n, r in agt})
        print("AGT PolicyEvaluator / callwarden check, same rules: " + ", ".join(
            f"{n:,} rules {r:,.1f}x" for n, r in agt))
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    (out / "core.json").write_text(json.dumps(
        {**rows, "check (b) unique args per tool": per_tool, "ratios": ratios}, indent=2))


if __name__ == "__main__":
    main()
