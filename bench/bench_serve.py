"""``callwarden serve`` under load on loopback: decisions per second and latency.

Run: .venv/bin/python bench/bench_serve.py [SECONDS] [CONNECTIONS]   (default 10 s, 32)

Starts its own redis-server and ``callwarden serve --workers 2`` with the realistic 12-rule
policy (bench/policies/realistic.yaml) plus a budget on Redis (the issue's shape), then drives
``POST /v1/decide`` over keep-alive connections: with ``wrk`` when it is installed (Debian's
``wrk``: a load generator in C, so it takes little of the two cores), else from one asyncio
process (raw HTTP/1.1). Prints decisions/s and the p50 / p99 latency seen by the client, and
where the two cores went: the CPU time per decision of the workers, of redis-server and of the
load generator (from /proc; steadier than decisions/s on a machine whose speed varies, and it
says what to make cheaper).
``BENCH_STATE=memory`` decides on the in-memory store instead of Redis; ``BENCH_LOADER=python``
uses the asyncio loader even where wrk is installed. On this 2-core machine the load generator
shares the cores with the two workers and with Redis: the figures are the whole box's, not the
service's alone.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent
CLI = Path(sys.executable).with_name("callwarden")
SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
CONNECTIONS = int(sys.argv[2]) if len(sys.argv) > 2 else 32
TOKEN = "bench-agent-token-0123456789"
CALLS = [
    ("Bash", {"command": "git status"}), ("Bash", {"command": "rm -rf /"}),
    ("read_file", {"path": "src/app.py"}), ("read_file", {"path": "/etc/shadow"}),
    ("web_fetch", {"url": "https://docs.python.org/3/"}), ("write_file", {"path": "a.txt"}),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def policy(tmp: Path, redis_url: str) -> Path:
    text = (HERE / "policies" / "realistic.yaml").read_text()
    budget = ("  - id: budget\n    match: {tool: \"*\"}\n"
              "    limit: {calls: 1000000000, per: session}\n")
    path = tmp / "policy.yaml"
    state = os.environ.get("BENCH_STATE") or redis_url
    path.write_text(f"state: {state}\n" + text.rstrip() + "\n" + budget)
    return path


async def client(port: int, deadline: float, latencies: list[float], index: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    i = index
    try:
        while time.perf_counter() < deadline:
            tool, args = CALLS[i % len(CALLS)]
            i += 1
            body = json.dumps({"tool": tool, "args": args, "session": f"s{index}"}).encode()
            request = (f"POST /v1/decide HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                       f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
                       f"Content-Length: {len(body)}\r\n\r\n").encode() + body
            started = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            answer = await reader.readexactly(length)
            latencies.append(time.perf_counter() - started)
            if not head.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"{head!r} {answer[:200]!r}")
    finally:
        writer.close()


WRK_SCRIPT = """\
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer %(token)s"
local bodies = %(bodies)s
local n = 0
request = function()
  n = n + 1
  return wrk.format(nil, "/v1/decide", nil, bodies[(n %% #bodies) + 1])
end
response = function(status, headers, body)
  if status ~= 200 then print("status " .. status .. " " .. body) os.exit(1) end
end
done = function(summary, latency, requests)
  io.write(string.format("RESULT %%d %%d %%d %%d\\n", summary.requests, summary.duration,
                         latency:percentile(50), latency:percentile(99)))
end
"""


def wrk_load(wrk: str, port: int, seconds: float, tmp: Path) -> tuple[float, float, float]:
    """(decisions/s, p50 s, p99 s) from wrk, one thread (the cores are the service's)."""
    bodies = [json.dumps({"tool": CALLS[i % len(CALLS)][0], "args": CALLS[i % len(CALLS)][1],
                          "session": f"s{i}"}) for i in range(CONNECTIONS)]
    script = tmp / "decide.lua"
    script.write_text(WRK_SCRIPT % {"token": TOKEN, "bodies": "{" + ", ".join(
        "[[" + b + "]]" for b in bodies) + "}"})
    out = subprocess.run([wrk, "-t1", f"-c{CONNECTIONS}", f"-d{seconds:g}s", "-s", str(script),
                          f"http://127.0.0.1:{port}"], capture_output=True, text=True,
                         check=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("RESULT "))
    requests, duration, p50, p99 = (int(v) for v in line.split()[1:])
    return requests / (duration / 1e6), p50 / 1e6, p99 / 1e6


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds the processes have used so far (0 for one that is gone)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def machine_ticks() -> tuple[int, int, int]:
    """(idle, stolen, all) clock ticks of the whole machine so far (/proc/stat's cpu line;
    stolen: time the hypervisor gave this VM's cores to others)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return fields[3] + fields[4], fields[7] if len(fields) > 7 else 0, sum(fields[:8])


def workers_of(service: int) -> list[int]:
    """The worker processes ``callwarden serve --workers N`` forked, and itself."""
    children = Path(f"/proc/{service}/task/{service}/children").read_text().split()
    return [service, *map(int, children)]


def loader_seconds() -> float:
    """CPU seconds of this process and of its waited-for children (wrk)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    done = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + done.ru_utime + done.ru_stime


async def load(port: int, seconds: float) -> list[float]:
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds
    await asyncio.gather(*(client(port, deadline, latencies, i) for i in range(CONNECTIONS)))
    return latencies


def main() -> None:
    redis_bin = shutil.which("redis-server")
    if redis_bin is None:
        sys.exit("bench_serve needs redis-server (apt-get install redis-server)")
    tmp = Path(tempfile.mkdtemp(prefix="cw-serve-bench-"))
    redis_port, port = free_port(), free_port()
    redis = subprocess.Popen([redis_bin, "--port", str(redis_port), "--bind", "127.0.0.1",
                              "--save", "", "--appendonly", "no"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env = {**os.environ, "CALLWARDEN_SERVE_TOKENS": f"agent bench {TOKEN}"}
    service = None
    try:
        time.sleep(0.5)
        path = policy(tmp, f"redis://127.0.0.1:{redis_port}/0")
        service = subprocess.Popen([str(CLI), "serve", "--policy", str(path), "--listen",
                                    f"127.0.0.1:{port}", "--workers", "2"], env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        assert service.stderr is not None
        line = service.stderr.readline()
        if "listening on" not in line:
            sys.exit(f"the service did not start: {line}{service.stderr.read()}")
        wrk = shutil.which("wrk") if os.environ.get("BENCH_LOADER") != "python" else None
        if wrk is not None:
            wrk_load(wrk, port, 2.0, tmp)  # warm-up: both workers, every rule
        else:
            asyncio.run(load(port, 2.0))
        workers = workers_of(service.pid)
        before = cpu_seconds(workers), cpu_seconds([redis.pid]), loader_seconds()
        ticks = machine_ticks()
        if wrk is not None:
            rate, p50, p99 = wrk_load(wrk, port, SECONDS, tmp)
        else:
            latencies = sorted(asyncio.run(load(port, SECONDS)))
            rate, p50 = len(latencies) / SECONDS, statistics.median(latencies)
            p99 = latencies[int(len(latencies) * 0.99)]
        after = cpu_seconds(workers), cpu_seconds([redis.pid]), loader_seconds()
        idle, stolen, every = (b - a for a, b in zip(ticks, machine_ticks(), strict=True))
        per_decision = [(b - a) / (rate * SECONDS) * 1e6 for a, b in zip(before, after,
                                                                          strict=True)]
    finally:
        if service is not None:
            service.send_signal(signal.SIGTERM)
            service.wait(30)
        redis.kill()
        redis.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    state = "memory" if os.environ.get("BENCH_STATE") == "memory" else "Redis"
    print(f"callwarden serve --workers 2, realistic policy + {state} budget, {CONNECTIONS} "
          f"keep-alive connections, {SECONDS:g} s, load from "
          f"{'wrk' if wrk else 'asyncio'}")
    print(f"  decisions/s {rate:10,.0f}   (goal >= 10,000)")
    print(f"  p50 {p50 * 1000:7.2f} ms   p99 {p99 * 1000:7.2f} ms   (goal p99 <= 5 ms)")
    workers, server, loader = per_decision
    print(f"  CPU per decision: workers {workers:.0f} µs, redis-server {server:.0f} µs, "
          f"load generator {loader:.0f} µs")
    print(f"  the cores over the run: {idle / max(every, 1):.0%} idle, "
          f"{stolen / max(every, 1):.0%} taken by the hypervisor (a busy VM host: fewer "
          f"decisions/s for the same CPU per decision)")


if __name__ == "__main__":
    main()
