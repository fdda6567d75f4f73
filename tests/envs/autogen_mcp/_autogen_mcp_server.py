"""A real MCP stdio server for the AutoGen MCP test; appends each tool it runs to argv[1]."""

from __future__ import annotations

import sys

try:  # mcp 2.x renamed FastMCP
    from mcp.server.mcpserver import MCPServer as Server
except ImportError:
    from mcp.server.fastmcp import FastMCP as Server

LOG = sys.argv[1]
server = Server("files")


def _ran(name: str) -> None:
    with open(LOG, "a", encoding="utf-8") as log:
        log.write(name + "\n")


@server.tool()
def read_file(path: str) -> str:
    """Reads a file."""
    _ran("read_file")
    return f"contents of {path}"


@server.tool()
def delete_file(path: str) -> str:
    """Deletes a file."""
    _ran("delete_file")
    return f"deleted {path}"


if __name__ == "__main__":
    server.run()
