"""``callwarden mcp``: a policy gateway in front of an MCP server, for any MCP client.

The gateway speaks MCP to the client and to the upstream server and forwards every message,
except that it decides each ``tools/call`` with the policy before it reaches the server and
screens each result before it reaches the client; ``tools/list`` hides the tools the policy
refuses whatever their arguments. Served over stdio, or over streamable HTTP
(``--listen``: ``_listen``). Tools reach the policy as ``mcp__SERVER__TOOL`` (the names
tool profiles already know).
"""

from callwarden.gateway._listen import HttpFront, is_loopback, serve_http
from callwarden.gateway._multi import Router, load_servers
from callwarden.gateway._proxy import Gateway, policy_tool_name, serve_stdio, server_slug
from callwarden.gateway._upstream import HttpUpstream, ProcessUpstream, Upstream
from callwarden.gateway._wrap import Wrapped, wrap_config, write_with_backup

__all__ = ["Gateway", "HttpFront", "HttpUpstream", "ProcessUpstream", "Router", "Upstream",
           "Wrapped", "is_loopback", "load_servers", "policy_tool_name", "serve_http",
           "serve_stdio", "server_slug", "wrap_config", "write_with_backup"]
