"""Per-call cost of the ``paths:`` and ``urls:`` conditions.

Run: ``python bench/bench_paths_urls.py``. Prints the median of 31 batches, per call, for:
the paths matcher on a tool call (warm cache; with and without symlink resolution, which
makes syscalls on every call by design), the urls matcher (warm), both on never-seen inputs
(cold: full canonicalization / parsing), and the link scan of a 1 KB chat message; and a
``Guard.check`` of a ``WebFetch`` call under 1, 50 and 200 ``WebFetch(domain:...)`` deny strings
(their deny lists checked as one: flat in their number), a URL seen before and one never seen.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from callwarden._call import ToolCall
from callwarden._profiles import default_profile
from callwarden.analysis.urls import _analyze
from callwarden.conditions.base import CompileEnv, Subject
from callwarden.conditions.paths import PathMatcher
from callwarden.conditions.urls import UrlMatcher

BATCHES = 31


def median_us(fn: Callable[[int], None], per_batch: int) -> float:
    """Median per-call microseconds of ``fn(i)`` over BATCHES batches of ``per_batch`` calls."""
    samples = []
    counter = 0
    for _ in range(BATCHES):
        start = time.perf_counter_ns()
        for _ in range(per_batch):
            fn(counter)
            counter += 1
        samples.append((time.perf_counter_ns() - start) / per_batch / 1000)
    return statistics.median(samples)


def report(label: str, value: float) -> None:
    print(f"{label:<62} {value:8.2f} µs")


def bench_paths(project: Path) -> None:
    (project / "src").mkdir(parents=True)
    (project / "src" / "main.py").write_text("print(1)\n")
    config = {"deny": ["~/.ssh/**", "~/.aws/**", "**/.env", "**/.env.*", "/etc/shadow"],
              "sensitive": True, "allow_roots": [".", "/tmp"], "root": str(project),
              "home": "/home/dev"}
    env = CompileEnv()
    resolving = PathMatcher(config, env)
    lexical = PathMatcher({**config, "resolve_symlinks": False}, env)
    subjects = [
        Subject(ToolCall.create("read_file", {"path": "src/main.py"}),
                default_profile("read_file")),
        Subject(ToolCall.create("Read", {"file_path": str(project / "src" / "main.py")}),
                default_profile("Read")),
        Subject(ToolCall.create("write_file", {"path": "src/new_module.py", "content": "x"}),
                default_profile("write_file")),
        Subject(ToolCall.create("read_file", {"path": "~/.ssh/id_rsa"}),
                default_profile("read_file")),
    ]
    for s in subjects:
        # Warm the lexical cache: the steady state of an agent re-reading files.
        resolving(s)
        lexical(s)
    n = len(subjects)

    def fresh(sub: Subject) -> Subject:
        return Subject(sub.call, sub.profile)  # a new call: an empty per-call memo

    report("paths: call, warm cache, symlinks resolved (mixed 4 calls)",
           median_us(lambda i: resolving(fresh(subjects[i % n])), 2000))
    report("paths: call, warm cache, resolve_symlinks: false",
           median_us(lambda i: lexical(fresh(subjects[i % n])), 5000))
    report("paths: check_path, warm cache, resolve_symlinks: false",
           median_us(lambda i: lexical.check_path("src/main.py"), 20000))
    report("paths: check_path, cold (new string each call), no symlinks",
           median_us(lambda i: lexical.check_path(f"src/pkg{i}/module.py"), 500))
    report("paths: check_path, cold, encoded traversal",
           median_us(lambda i: lexical.check_path(f"src/%2e%2e/%2e%2e/x{i}/.ssh/id_rsa"), 500))


def bench_urls() -> None:
    m = UrlMatcher({"allow_domains": ["*.example.com", "api.github.com"],
                    "deny_domains": ["*.evil.com", "pastebin.com"], "block_private": True},
                   CompileEnv())
    urls = ["https://api.github.com/repos/o/r/issues?state=open",
            "https://docs.example.com/guide/start#intro", "http://169.254.169.254/latest/",
            "https://good.com@evil.com/x"]
    subjects = [Subject(ToolCall.create("fetch", {"url": u}), default_profile("fetch"))
                for u in urls]
    for s in subjects:
        m(s)
    n = len(subjects)
    report("urls: call, warm cache (mixed 4 calls)",
           median_us(lambda i: m(Subject(subjects[i % n].call, subjects[i % n].profile)), 5000))
    report("urls: check_url, warm cache",
           median_us(lambda i: m.check_url(urls[i % n]), 20000))

    def cold(i: int) -> None:
        _analyze.cache_clear()
        m._cache.clear()
        m.check_url(f"https://svc{i}.example.com/api/v1/items?page={i}")

    report("urls: check_url, cold (parse + verdict)", median_us(cold, 1000))

    scanner = UrlMatcher({"allow_domains": ["*.example.com", "github.com"], "scan_text": True},
                         CompileEnv())
    message = (
        "Hi team, the deploy finished. Logs are at https://ci.example.com/runs/4812 and the "
        "diff is in [PR 77](https://github.com/org/repo/pull/77). Remember to rotate the "
        "staging token before Friday; docs: https://docs.example.com/ops/rotation. "
    ) * 4
    message = message[:1024]
    print(f"   (message: {len(message)} chars)")
    report("urls: scan_text of a 1 KB message with 12 links, warm verdicts",
           median_us(lambda i: scanner.check_text(message), 2000))
    typical = ("Quick update: the migration ran cleanly and the dashboards look normal. "
               * 13)[:900] + " Details: https://ci.example.com/runs/4812 and www.example.com"
    report("urls: scan_text of a 1 KB message with 2 links",
           median_us(lambda i: scanner.check_text(typical), 5000))
    plain = ("The deploy finished without errors and all checks passed on the main branch. "
             * 14)[:1024]
    report("urls: scan_text of a 1 KB message without links",
           median_us(lambda i: scanner.check_text(plain), 5000))


def bench_domain_denies() -> None:
    from callwarden import Guard

    seen = {"url": "https://docs.python.org/3/library/", "prompt": "summarize"}
    for count in (1, 50, 200):
        guard = Guard.from_dict({"version": 1, "deny": [
            *(f"WebFetch(domain:blocked{k}.example)" for k in range(count)), "Bash(rm -rf *)"]})
        report(f"check under {count} WebFetch(domain:) denies, URL seen before",
               median_us(lambda i, g=guard: g.check("WebFetch", seen), 2000))
        report(f"check under {count} WebFetch(domain:) denies, URL never seen",
               median_us(lambda i, g=guard, c=count: g.check("WebFetch", {
                   "url": f"https://site{i}-{c}.org/p", "prompt": "summarize"}), 200))


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        bench_paths(Path(tmp) / "project")
    bench_urls()
    bench_domain_denies()


if __name__ == "__main__":
    main()
