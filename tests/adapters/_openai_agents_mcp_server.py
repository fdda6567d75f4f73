"""A real MCP server over stdio for the adapter tests: each tool appends what it ran with, as
one JSON line, to the file named by the first command-line argument."""

from __future__ import annotations

import json
import sys
from typing import Any

from mcp.server.mcpserver import MCPServer

LOG = sys.argv[1]
server = MCPServer("files")


def _ran(tool: str, **args: Any) -> None:
    with open(LOG, "a", encoding="utf-8") as log:
        log.write(json.dumps({"tool": tool, "args": args}) + "\n")


@server.tool()
def read_file(path: str) -> str:
    """Reads a file."""
    _ran("read_file", path=path)
    return f"contents of {path}"


@server.tool()
def delete_file(path: str) -> str:
    """Deletes a file."""
    _ran("delete_file", path=path)
    return f"deleted {path}"


@server.tool()
def search(query: str, limit: int = 10) -> str:
    """Searches the index."""
    _ran("search", query=query, limit=limit)
    return f"{limit} results for {query}"


@server.tool()
def deploy(env: str) -> str:
    """Deploys the service."""
    _ran("deploy", env=env)
    return f"deployed to {env}"


if __name__ == "__main__":
    server.run("stdio")
