"""Benchmarks shell analysis: parser choice, first-time and cached analysis, the matcher call.

Run: ``python bench/bench_shell.py``. Prints medians in microseconds over the benign corpus
rows (typical developer commands) and a few obfuscated ones.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

import bashlex  # noqa: E402
import tree_sitter_bash  # noqa: E402
from tree_sitter import Language, Parser  # noqa: E402

from callwarden._call import ToolCall  # noqa: E402
from callwarden._profiles import default_profile  # noqa: E402
from callwarden.analysis.shell import analyze_command, clear_cache  # noqa: E402
from callwarden.conditions.base import Subject  # noqa: E402
from callwarden.conditions.shell import ShellMatcher  # noqa: E402
from callwarden.policyfile.bundled import baseline_config  # noqa: E402

DATA = ROOT / "tests" / "data"


def rows(name: str) -> list[str]:
    lines = [ln for ln in (DATA / name).read_text("utf-8").splitlines() if ln and ln[0] != "#"]
    return [ln.split("\t")[2] for ln in lines[1:]]


def median_us(func: Callable[[str], object], commands: list[str], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        for command in commands:
            start = time.perf_counter_ns()
            func(command)
            samples.append(time.perf_counter_ns() - start)
    return statistics.median(samples) / 1000


def main() -> None:
    typical = rows("bash_benign.tsv")
    obfuscated = rows("bash_destructive.tsv")
    parser = Parser(Language(tree_sitter_bash.language()))

    def ts_parse(command: str) -> object:
        return parser.parse(command.encode())

    def bl_parse(command: str) -> object:
        try:
            return bashlex.parse(command)
        except Exception:  # bashlex rejects some valid bash (``r$()m``, ``{a,b}``)
            return None

    bashlex_failures = 0
    for command in typical + obfuscated:
        try:
            bashlex.parse(command)
        except Exception:
            bashlex_failures += 1
    print(f"parse, tree-sitter-bash:            {median_us(ts_parse, typical, 20):8.1f} us")
    print(f"parse, bashlex:                     {median_us(bl_parse, typical, 20):8.1f} us"
          f"   (rejects {bashlex_failures}/{len(typical) + len(obfuscated)} corpus rows)")

    def first_time(command: str) -> object:
        clear_cache()
        return analyze_command(command)

    print(f"analyze_command, first time:        {median_us(first_time, typical, 20):8.1f} us")
    print(f"analyze_command, first, obfuscated: {median_us(first_time, obfuscated, 3):8.1f} us")
    for command in typical:
        analyze_command(command)
    print(f"analyze_command, cached:            "
          f"{median_us(analyze_command, typical, 50):8.1f} us")

    matcher = ShellMatcher(baseline_config())
    profile = default_profile("Bash")
    calls = {c: ToolCall("Bash", {"command": c}) for c in typical + obfuscated}

    def decide(command: str) -> object:
        return matcher(Subject(calls[command], profile))

    print(f"shell: matcher call (baseline, cached analysis), typical: "
          f"{median_us(decide, typical, 50):6.1f} us")
    for command in obfuscated:
        analyze_command(command)
    print(f"shell: matcher call (baseline, cached analysis), obfuscated: "
          f"{median_us(decide, obfuscated, 10):6.1f} us")

    def cold_decide(command: str) -> object:
        clear_cache()
        return matcher(Subject(calls[command], profile))

    print(f"shell: matcher call, analysis not cached, typical: "
          f"{median_us(cold_decide, typical, 10):6.1f} us")


if __name__ == "__main__":
    main()
