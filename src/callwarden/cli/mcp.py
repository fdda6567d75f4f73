"""``callwarden mcp``: the policy gateway in front of MCP servers (over stdio, or streamable
HTTP with ``--listen``); ``callwarden mcp accept`` and ``callwarden mcp wrap``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TextIO

from callwarden.cli._parser import EXIT_OK, EXIT_USAGE, _Parser, parse_listen
from callwarden.exceptions import PolicyError

__all__ = ["add_mcp_parser", "run_mcp", "run_mcp_subcommand"]

_Run = Callable[[Any, Callable[..., None]], Awaitable[int]]


def add_mcp_parser(sub: Any) -> None:
    """Adds the ``mcp`` command to the CLI's subparsers."""
    mcp = sub.add_parser("mcp", help="be an MCP server in front of another one: every tool "
                                     "call is decided by the policy (stdio, or HTTP with --listen)",
                         usage="callwarden mcp --policy FILE [--name SERVER] "
                               "(-- COMMAND [ARG...] | --upstream URL [--header K:V]... | "
                               "--config SERVERS.json) [--listen HOST:PORT]")
    mcp.add_argument("--policy", "-p", required=True, type=Path, help="policy file")
    mcp.add_argument("--name", default=None,
                     help="the server's name in policy tool names (mcp__NAME__TOOL); default: "
                          "the name the server gives itself")
    mcp.add_argument("--show-refused", action="store_true",
                     help="list tools the policy refuses whatever their arguments (hidden "
                          "unless the policy says mcp: {hide_refused: false})")
    mcp.add_argument("--call-timeout", type=float, default=120.0, metavar="SECONDS",
                     help="how long a tool call may take upstream (default 120)")
    mcp.add_argument("--upstream", default=None, metavar="URL",
                     help="the MCP server at this URL (streamable HTTP) instead of a command")
    mcp.add_argument("--config", default=None, type=Path, metavar="SERVERS.json",
                     help="several servers, in the mcpServers format clients use: their tools "
                          "are offered as SERVER__TOOL")
    mcp.add_argument("--header", action="append", default=[], metavar="NAME:VALUE",
                     help="an HTTP header for --upstream (repeatable), e.g. "
                          "'Authorization: Bearer ...'")
    mcp.add_argument("--no-pin", action="store_true",
                     help="do not pin tool definitions (as mcp: {pin_tools: false} in the "
                          "policy; by default a tool whose description "
                          "or input schema changed since first seen is refused until "
                          "'callwarden mcp accept SERVER TOOL')")
    mcp.add_argument("--session", default=None,
                     help="the session the calls belong to (default: one per gateway process)")
    listen = mcp.add_argument_group("serving over HTTP (instead of stdio)")
    listen.add_argument("--listen", default=None, metavar="HOST:PORT",
                        help="serve streamable HTTP at http://HOST:PORT/mcp (loopback unless "
                             "a token is given; PORT 0 picks a free one, said on stderr)")
    listen.add_argument("--token-file", default=None, type=Path, metavar="FILE",
                        help="the bearer token clients must send (first line of FILE; or "
                             "$CALLWARDEN_MCP_TOKEN); needed to listen beyond loopback")
    listen.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                        help="a browser Origin allowed besides loopback ones (repeatable)")
    listen.add_argument("--max-sessions", type=int, default=32, metavar="N",
                        help="MCP sessions open at once (each has its own upstream; "
                             "default 32)")
    listen.add_argument("--session-idle", type=float, default=3600.0, metavar="SECONDS",
                        help="close a session after this long without a request "
                             "(default 3600)")
    mcp.add_argument("server_command", nargs=argparse.REMAINDER,
                     help="-- then the MCP server's command and arguments")
    mcp.set_defaults(handler=run_mcp)


def run_mcp_subcommand(word: str, argv: list[str]) -> int:
    """``callwarden mcp accept ...`` or ``callwarden mcp wrap ...``."""
    return _accept(argv) if word == "accept" else _wrap(argv)


def run_mcp(args: argparse.Namespace, out: TextIO) -> int:
    """``callwarden mcp``: serves until the client leaves (stdio) or the process is stopped."""
    command = args.server_command[1:] if args.server_command[:1] == ["--"] \
        else args.server_command
    if args.call_timeout <= 0:
        return _usage("--call-timeout must be more than 0 seconds")
    session = _session_maker(args, command)
    if isinstance(session, str):
        return _usage(session)
    listen: tuple[str, int, str | None] | None = None
    if args.listen is not None:
        given = _listen_options(args)
        if isinstance(given, str):
            return _usage(given)
        listen = given
    missing = _missing_packages(args, listen is not None)
    if missing:
        return _usage(f"{' and '.join(missing)} not installed: pip install 'callwarden[mcp]'")
    from callwarden._guard import Guard

    guard = Guard.from_file(args.policy)  # a broken policy: exit 2 with every problem
    try:
        if listen is None:
            import asyncio

            from callwarden.gateway import serve_stdio

            return asyncio.run(serve_stdio(session(guard, args.session)))
        from callwarden.gateway import HttpFront, serve_http

        host, port, token = listen
        front = HttpFront(lambda name: session(guard, name), token=token,
                          origins=args.allow_origin, max_sessions=args.max_sessions,
                          idle=args.session_idle, deadline=2 * args.call_timeout + 10,
                          session=args.session)
        return serve_http(front, host, port)
    except KeyboardInterrupt:
        return 130
    finally:
        guard.close()


def _missing_packages(args: argparse.Namespace, listens: bool) -> list[str]:
    """The packages of the ``mcp`` extra this run needs and does not have: the MCP SDK for
    a server at a URL, uvicorn to listen."""
    import importlib.util

    from callwarden.gateway import HttpUpstream, load_servers

    needed = ["uvicorn"] if listens else []
    if args.upstream or (args.config is not None and any(
            isinstance(u, HttpUpstream)
            for u in load_servers(args.config.read_text(encoding="utf-8")).values())):
        needed.append("mcp")
    return [name for name in needed if importlib.util.find_spec(name) is None]


def _usage(problem: str) -> int:
    print(f"callwarden mcp: {problem}", file=sys.stderr)
    return EXIT_USAGE


def _session_maker(args: argparse.Namespace, command: list[str]
                   ) -> Callable[[Any, str | None], _Run] | str:
    """What runs one session of the gateway (given the guard and the session's name), with
    a fresh connection to the upstream(s); or what is wrong with the arguments."""
    from callwarden.gateway import Gateway, HttpUpstream, ProcessUpstream, Router, load_servers

    options = {"hide_refused": False if args.show_refused else None,  # None: the policy's
               "call_timeout": args.call_timeout, "pin": False if args.no_pin else None}
    if args.config is not None:
        if command or args.upstream or args.name or args.header:
            return "--config names the servers; give no command, --upstream, --name or " \
                   "--header with it"
        try:
            text = args.config.read_text(encoding="utf-8")
            load_servers(text)
        except (OSError, ValueError) as e:
            return f"{args.config}: {e}"
        return lambda guard, name: Router(guard, load_servers(text), session=name,
                                          **options).serve
    if bool(command) == bool(args.upstream):
        return "give the MCP server to run after -- (e.g. callwarden mcp --policy " \
               "policy.yaml -- npx -y @modelcontextprotocol/server-filesystem .), or its " \
               "URL with --upstream, one of the two"
    headers = {}
    for header in args.header:
        name, sep, value = header.partition(":")
        if not sep or not name.strip():
            return f"--header {header!r} is not NAME:VALUE"
        headers[name.strip()] = value.strip()
    if headers and not args.upstream:
        return "--header goes with --upstream"

    def session(guard: Any, name: str | None) -> _Run:
        upstream = HttpUpstream(args.upstream, headers) if args.upstream \
            else ProcessUpstream(command)
        gateway = Gateway(guard, server=args.name, session=name, **options)
        return lambda reader, write: gateway.serve(reader, write, upstream)
    return session


def _listen_options(args: argparse.Namespace) -> tuple[str, int, str | None] | str:
    """``--listen HOST:PORT`` and the token: (host, port, token), or what is wrong."""
    from callwarden.gateway import is_loopback

    listen = parse_listen(args.listen)
    if listen is None:
        return f"--listen {args.listen!r} is not HOST:PORT (e.g. 127.0.0.1:8765)"
    host, port = listen
    token = os.environ.get("CALLWARDEN_MCP_TOKEN") or None
    if args.token_file is not None:
        try:
            lines = args.token_file.read_text(encoding="utf-8").splitlines()
        except OSError as e:
            return f"--token-file: {e}"
        token = lines[0].strip() if lines else ""
        if not token:
            return f"--token-file {args.token_file}: the first line is empty"
    if token is not None and len(token) < 16:
        return "the bearer token is shorter than 16 characters"
    if token is None and not is_loopback(host):
        return f"--listen {host} reaches beyond this machine: give a bearer token " \
               "(--token-file FILE or CALLWARDEN_MCP_TOKEN)"
    for flag, value in (("--max-sessions", args.max_sessions),
                        ("--session-idle", args.session_idle)):
        if value <= 0:
            return f"{flag} must be more than 0"
    return host, port, token


def _wrap(argv: list[str]) -> int:
    parser = _Parser(prog="callwarden mcp wrap",
                     description="put every MCP server of a client's config behind "
                                 "callwarden mcp: prints the change, --write makes it")
    parser.add_argument("config", type=Path,
                        help="the client's config (claude_desktop_config.json, mcp.json ...)")
    parser.add_argument("--policy", "-p", default=None,
                        help="the policy file the gateways use (default: $CALLWARDEN_POLICY)")
    parser.add_argument("--write", action="store_true",
                        help="write the change (the old file is kept as CONFIG.bak)")
    parser.add_argument("--command", default="callwarden",
                        help="how the client starts callwarden (default: callwarden)")
    args = parser.parse_args(argv)
    from callwarden.gateway import wrap_config, write_with_backup

    policy = args.policy or os.environ.get("CALLWARDEN_POLICY")
    if not policy:
        print("callwarden mcp wrap: give --policy FILE (or set CALLWARDEN_POLICY)",
              file=sys.stderr)
        return EXIT_USAGE
    policy_path = Path(policy).expanduser().resolve()
    if not policy_path.is_file():
        print(f"callwarden mcp wrap: no policy file {policy_path}", file=sys.stderr)
        return EXIT_USAGE
    try:
        text = args.config.read_text(encoding="utf-8")
        result = wrap_config(text, str(policy_path), command=args.command)
    except (OSError, ValueError) as e:
        print(f"callwarden mcp wrap: {args.config}: {e}", file=sys.stderr)
        return EXIT_USAGE
    print(result.diff(str(args.config)), end="")
    for line in result.skipped:
        print(f"left as it is: {line}", file=sys.stderr)
    if not result.wrapped:
        print("nothing to wrap", file=sys.stderr)
        return EXIT_OK
    if args.write:
        backup = write_with_backup(args.config, result.after)
        print(f"wrote {args.config} ({len(result.wrapped)} server(s) behind callwarden mcp); "
              f"the old file is {backup}", file=sys.stderr)
    else:
        print(f"{len(result.wrapped)} server(s) to wrap; run again with --write to make the "
              "change", file=sys.stderr)
    return EXIT_OK


def _accept(argv: list[str]) -> int:
    parser = _Parser(prog="callwarden mcp accept",
                     description="accept an MCP tool's changed definition: calls to it run "
                                 "again, and the definition seen last is the one pinned")
    parser.add_argument("server", help="the server's name (mcp__SERVER__TOOL)")
    parser.add_argument("tool", help="the tool's name on that server")
    parser.add_argument("--policy", "-p", required=True, type=Path,
                        help="the policy file naming the store the pins are in")
    parser.add_argument("--by", default=None, help="who accepts (default: your login name)")
    args = parser.parse_args(argv)
    from callwarden._guard import Guard

    try:
        guard = Guard.from_file(args.policy, audit=False)
    except PolicyError as e:
        for problem in e.problems:
            print(f"error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    try:
        by = args.by or os.environ.get("USER") or os.environ.get("LOGNAME") or "unknown"
        if not guard.approvals.pins.accept(args.server, args.tool, by=by):
            print(f"callwarden: no pin for {args.server} {args.tool} in the policy's store "
                  "(has a gateway with this policy listed the tool?)", file=sys.stderr)
            return 1
    finally:
        guard.close()
    print(f"accepted: calls to {args.tool} of {args.server} run again "
          "(its current definition is pinned)")
    return EXIT_OK
