"""What ``callwarden mcp`` adds to a tool call: the same MCP client calling the same server
directly and through the gateway, interleaved: a server over stdio, and one over streamable
HTTP (the gateway in front of it reached over stdio, and the gateway listening on HTTP itself:
HTTP on both hops).

Run: .venv/bin/python bench/bench_mcp.py [CALLS]   (default 400 calls a way)

Prints the median and p99 (ms) of one ``tools/call`` round trip each way, and the median added
by the gateway (the goal is 0.5 ms or less over stdio). The policy has 12 rules of the realistic kind and
a secrets-redacting output rule; the call is allowed and its result screened.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

HERE = Path(__file__).parent
SERVER = HERE.parent / "tests" / "fixtures" / "mcp_files_server.py"
CLI = Path(sys.executable).with_name("callwarden")
CALLS = int(sys.argv[1]) if len(sys.argv) > 1 else 400
POLICY = """\
version: 1
default: allow
rules:
  - {id: no-delete, match: {tool: mcp__files__delete_file}, effect: deny}
  - {id: no-wipe, match: {tool: mcp__files__wipe}, effect: halt}
  - {id: deploy-asks, match: {tool: mcp__files__deploy}, effect: ask}
  - {id: cap-search, match: {tool: mcp__files__search}, cap: {limit: 5}, effect: modify}
  - {id: no-prod-paths, match: {tool: "mcp__files__*"}, args: {path: "/prod/*"}, effect: deny}
  - {id: no-env, match: {tool: "mcp__files__*"}, args: {path: ["*.env", "*/.env"]}, effect: deny}
  - {id: no-keys, match: {tool: "mcp__files__*"}, args: {path: "*.pem"}, effect: deny}
  - {id: no-shadow, match: {tool: "mcp__files__*"}, args: {path: "/etc/shadow"}, effect: deny}
  - {id: no-ssh, match: {tool: "mcp__files__*"}, args: {path: "*/.ssh/*"}, effect: deny}
  - {id: no-aws, match: {tool: "mcp__files__*"}, args: {path: "*/.aws/*"}, effect: deny}
  - {id: no-git, match: {tool: "mcp__files__*"}, args: {path: "*/.git/*"}, effect: deny}
  - id: redact
    on: output
    match: {tool: "mcp__files__*"}
    secrets: true
    effect: modify
"""


async def round_trips(params: StdioServerParameters | str, n: int) -> list[float]:
    """``n`` timed calls over stdio (``params``) or streamable HTTP (a URL)."""
    transport = streamable_http_client(params) if isinstance(params, str) \
        else stdio_client(params)
    async with transport as streams, ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
        for i in range(20):  # warm-up
            await session.call_tool("read_file", {"path": f"warm/{i}.txt"})
        out = []
        for i in range(n):
            t0 = time.perf_counter()
            await session.call_tool("read_file", {"path": f"src/file_{i}.py"})
            out.append((time.perf_counter() - t0) * 1000)
        return out


def p99(values: list[float]) -> float:
    return sorted(values)[int(len(values) * 0.99)]


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "ran.jsonl"
        policy = Path(tmp) / "policy.yaml"
        policy.write_text(POLICY)
        upstream = [sys.executable, str(SERVER), str(log)]
        direct = StdioServerParameters(command=upstream[0], args=upstream[1:])
        gated = StdioServerParameters(command=str(CLI), args=["mcp", "--policy", str(policy),
                                                              "--", *upstream])
        with http_server(log) as url, http_server(log, ["mcp", "--policy", str(policy),
                                                      "--upstream", url]) as listening:
            gated_http = StdioServerParameters(command=str(CLI), args=[
                "mcp", "--policy", str(policy), "--upstream", url])
            ways = {"stdio, direct": direct, "stdio, through callwarden mcp": gated,
                    "HTTP, direct": url, "HTTP, through callwarden mcp": gated_http,
                    "HTTP, through callwarden mcp --listen": listening}
            times: dict[str, list[float]] = {name: [] for name in ways}
            for _ in range(4):  # interleaved rounds: drift on a busy machine hits all alike
                for name, way in ways.items():
                    times[name] += await round_trips(way, CALLS // 4)
    print(f"tools/call round trip, {CALLS} calls each (ms)")
    for name, values in times.items():
        print(f"  {name:30} median {statistics.median(values):7.3f}   p99 {p99(values):7.3f}")
    for kind, through in (("stdio", "stdio, through callwarden mcp"),
                          ("stdio client, HTTP server", "HTTP, through callwarden mcp"),
                          ("HTTP on both hops", "HTTP, through callwarden mcp --listen")):
        direct_kind = "stdio, direct" if kind == "stdio" else "HTTP, direct"
        added = statistics.median(times[through]) - statistics.median(times[direct_kind])
        goal = " (goal <= 0.5 ms)" if kind == "stdio" else ""
        print(f"  added by the gateway, {kind}: median {added:.3f} ms{goal}")


@contextlib.contextmanager
def http_server(log: Path, gateway: list[str] | None = None) -> Any:
    """The test server over streamable HTTP on a free local port (or, given ``gateway``,
    ``callwarden`` with those arguments listening there); yields its URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [str(CLI), *gateway, "--listen", f"127.0.0.1:{port}"] if gateway else \
        [sys.executable, str(SERVER), str(log), "--http", str(port)]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    asyncio.run(main())
