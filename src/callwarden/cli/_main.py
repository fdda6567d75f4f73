"""The commands behind :func:`callwarden.cli.main`: the parser and one handler per command."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO, cast

from callwarden import __version__
from callwarden._decision import Effect
from callwarden.exceptions import PolicyError

__all__ = ["EXIT_CODES", "main"]

_DESCRIPTION = ("a policy-enforcement point for AI agent tool calls: check, decide, lint, test, "
                "init, demo, hook, approvals, replay, explain, audit summary")

EXIT_OK = 0
EXIT_TESTS_FAILED = 1
EXIT_USAGE = 2
EXIT_CODES = {Effect.ALLOW: 0, Effect.MODIFY: 0, Effect.DENY: 10, Effect.ASK: 11, Effect.HALT: 12}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse exits 2 too; keep its usage text
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="callwarden", description=_DESCRIPTION,
                     formatter_class=argparse.RawDescriptionHelpFormatter,
                     epilog="exit codes: 0 allowed, 10 denied, 11 ask, 12 halted, "
                            "1 policy tests failed, 2 usage or policy error")
    parser.add_argument("--version", action="version", version=f"callwarden {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    check = sub.add_parser("check", help="what would the policy decide? (a what-if: counts no "
                                         "limit, records nothing) and why")
    decide = sub.add_parser("decide", help="decide one call for real: limits count, history "
                                           "and the policy's audit log record it")
    for command in (check, decide):
        command.add_argument("--policy", "-p", required=True, type=Path, help="policy file")
        command.add_argument("--tool", "-t", required=True, help="tool name")
        command.add_argument("--args", "-a", default="{}",
                             help="tool arguments as a JSON object, @FILE to read it from a "
                                  "file, or - to read it from stdin")
        command.add_argument("--agent")
        command.add_argument("--session")
        command.add_argument("--principal")
        command.add_argument("--framework")
        command.add_argument("--context", default=None,
                             help="call context as a JSON object, @FILE or -")
        command.add_argument("--json", action="store_true", help="print the decision as JSON")
        command.add_argument("--color", "--colour", choices=("auto", "always", "never"),
                             default="auto", help="colour the effect line: auto (a terminal, "
                             "unless NO_COLOR is set), always or never")
    decide.add_argument("--call-id", default=None, help="the framework's id for the call")

    lint = sub.add_parser("lint", help="validate policy files and report every problem")
    lint.add_argument("files", nargs="+", type=Path)
    lint.add_argument("--providers", action="store_true",
                      help="import the policies' use: targets and run their inline examples "
                           "(by default lint imports no code a policy names)")

    test = sub.add_parser("test", help="run policy tests (test files, and inline examples "
                          "of a policy and of the policies it extends)")
    test.add_argument("files", nargs="+", type=Path)
    test.add_argument("--verbose", "-v", action="store_true", help="list passing cases too")

    init = sub.add_parser("init", help="write a starter policy that extends callwarden:recommended")
    init.add_argument("path", nargs="?", type=Path, default=Path("policy.yaml"))

    demo = sub.add_parser("demo", help="run a scripted agent's calls through an example policy")
    demo.add_argument("--policy", "-p", type=Path, default=None,
                      help="policy file (default: the bundled example)")

    hook = sub.add_parser("hook", help="be a coding agent's pre-tool hook: read its hook JSON "
                                       "on stdin, print its decision JSON")
    from callwarden.hooks import HOOK_DIALECTS

    hook.add_argument("agent", choices=HOOK_DIALECTS,
                      help="whose hook format to speak")
    hook.add_argument("--policy", "-p", default=None,
                      help="policy file (default: $CALLWARDEN_POLICY)")

    mcp = sub.add_parser("mcp", help="be an MCP server in front of another one: every tool "
                                     "call is decided by the policy (stdio)",
                         usage="callwarden mcp --policy FILE [--name SERVER] "
                               "(-- COMMAND [ARG...] | --upstream URL [--header K:V]... | "
                               "--config SERVERS.json)")
    mcp.add_argument("--policy", "-p", required=True, type=Path, help="policy file")
    mcp.add_argument("--name", default=None,
                     help="the server's name in policy tool names (mcp__NAME__TOOL); default: "
                          "the name the server gives itself")
    mcp.add_argument("--show-refused", action="store_true",
                     help="list tools the policy refuses whatever their arguments (hidden by "
                          "default)")
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
                     help="do not pin tool definitions (by default a tool whose description "
                          "or input schema changed since first seen is refused until "
                          "'callwarden mcp accept SERVER TOOL')")
    mcp.add_argument("--session", default=None,
                     help="the session the calls belong to (default: one per gateway process)")
    mcp.add_argument("server_command", nargs=argparse.REMAINDER,
                     help="-- then the MCP server's command and arguments")

    from callwarden.cli.approvals import add_approvals_parser

    add_approvals_parser(sub)

    from callwarden.cli.review import add_commands

    add_commands(sub)  # replay, explain, audit summary: each sets its own handler
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the CLI; returns the exit code."""
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:2] == ["mcp", "accept"]:  # `mcp` itself takes the server's command after --
        return _mcp_accept(words[2:])
    if words[:2] == ["mcp", "wrap"]:
        return _mcp_wrap(words[2:])
    args = _parser().parse_args(argv)
    handler = getattr(args, "handler", None) or {
        "check": _check, "decide": _decide, "lint": _lint, "test": _test, "demo": _demo,
        "approvals": _approvals, "init": _init, "hook": _hook, "mcp": _mcp,
    }[args.command]
    out = _PipeSafe(sys.stdout)
    try:
        code = handler(args, cast(TextIO, out))
    except PolicyError as e:
        for problem in e.problems:
            print(f"error: {problem}", file=sys.stderr)
        code = EXIT_USAGE
    out.flush()
    return code


class _PipeSafe:
    """Stdout that goes quiet when its reader leaves (``callwarden check ... | head -1``).

    The command still finishes and returns its own exit code (the decision's, for ``check``)
    instead of a BrokenPipeError traceback and exit 1.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._closed = False

    def write(self, text: str) -> int:
        if not self._closed:
            try:
                self._stream.write(text)
            except BrokenPipeError:
                self._close()
        return len(text)

    def flush(self) -> None:
        if not self._closed:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._close()

    def _close(self) -> None:
        self._closed = True
        # Point the descriptor at /dev/null so the interpreter's own flush at exit is quiet.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _json_object(text: str | None, option: str,
                 stdin: TextIO | None = None) -> dict[str, Any] | None:
    """Parses an option's JSON object (inline, ``@FILE`` or ``-`` for stdin), or prints why
    not and returns None."""
    where = ""
    if text is not None and (text.startswith("@") or (text == "-" and stdin is not None)):
        source = "stdin" if text == "-" else text[1:]
        where = f" (read from {source})"
        try:
            text = stdin.read() if text == "-" and stdin is not None \
                else Path(source).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            print(f"error: {option}: cannot read {source}: {why}", file=sys.stderr)
            return None
    try:
        value = json.loads(text) if text is not None else {}
    except ValueError as e:
        print(f"error: {option} must be JSON{where}: {e}", file=sys.stderr)
        return None
    if not isinstance(value, dict):
        shown = text if len(text or "") <= 80 else f"{(text or '')[:80]}…"
        print(f"error: {option} must be a JSON object such as '{{\"path\": \"README.md\"}}', "
              f"not {type(value).__name__} {shown}{where}", file=sys.stderr)
        return None
    return value


def _check(args: argparse.Namespace, out: TextIO) -> int:
    return _decide_and_print(args, out, real=False)


def _decide(args: argparse.Namespace, out: TextIO) -> int:
    return _decide_and_print(args, out, real=True)


def _decide_and_print(args: argparse.Namespace, out: TextIO, *, real: bool) -> int:
    from callwarden._guard import Guard
    from callwarden.hooks import decide_once
    from callwarden.review import explain_decision

    if args.args == "-" and args.context == "-":
        print("error: --args and --context cannot both read stdin: give one of them as "
              "@FILE", file=sys.stderr)
        return EXIT_USAGE
    call_args = _json_object(args.args, "--args", sys.stdin)
    context = _json_object(args.context, "--context", sys.stdin) \
        if args.context is not None else None
    if call_args is None or (args.context is not None and context is None):
        return EXIT_USAGE
    fields = {"agent": args.agent, "session": args.session, "principal": args.principal,
              "context": context}
    if real:  # the path `callwarden hook` takes: counted, recorded, audited
        decision = decide_once(args.policy, args.tool, call_args, framework=args.framework,
                               call_id=args.call_id, **fields)
    else:  # a what-if: no audit, no counting, no history
        guard = Guard.from_file(args.policy, audit=False)
        decision = guard.query(args.tool, call_args, framework=args.framework, **fields)
        guard.close()
    if args.json:
        print(json.dumps(decision.to_dict(), indent=2), file=out)
    else:
        text = explain_decision(decision)
        if _use_colour(args.color, out):
            first, newline, rest = text.partition("\n")
            text = f"\x1b[{_COLOURS[decision.effect]}m{first}\x1b[0m{newline}{rest}"
        print(text, file=out)
    return EXIT_CODES[decision.effect]


# SGR codes for the effect line: green, cyan, yellow, red, bold red.
_COLOURS = {Effect.ALLOW: "32", Effect.MODIFY: "36", Effect.ASK: "33", Effect.DENY: "31",
            Effect.HALT: "1;31"}


def _use_colour(choice: str, stream: TextIO) -> bool:
    """``--color``: always, never, or auto — a terminal, unless NO_COLOR (https://no-color.org)
    is set or the terminal is dumb."""
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no descriptor, or a closed one
        return False


def _lint(args: argparse.Namespace, out: TextIO) -> int:
    from callwarden.policyfile.compile import load_policy_file

    failed = 0
    for path in args.files:
        try:
            loaded = load_policy_file(path, providers="load" if args.providers else "check")
        except PolicyError as e:
            failed += 1
            for problem in e.problems:
                print(f"{problem}", file=out)
            continue
        print(f"{path}: ok ({len(loaded.rules)} rules)", file=out)
        for note in loaded.notes:
            print(f"  note: {note}", file=out)
    ok = len(args.files) - failed
    print(f"{ok} file{'' if ok == 1 else 's'} ok, {failed} with problems", file=out)
    return EXIT_USAGE if failed else EXIT_OK


def _test(args: argparse.Namespace, out: TextIO) -> int:
    from callwarden.policyfile.examples import CaseResult
    from callwarden.policyfile.testfiles import run_inline_examples, run_test_file
    from callwarden.policyfile.yamlsrc import load_yaml, read_source

    results: list[CaseResult] = []
    errors = 0
    for path in args.files:
        try:
            data, _ = load_yaml(read_source(path, "test file"), str(path), collect=True)
            # A test file names its policy; a policy file has a version. `cases` alone (or a
            # typo next to `policy`) is still a test file, so its errors speak of test files.
            if isinstance(data, dict) and "version" not in data \
                    and ("cases" in data or "policy" in data):
                _, found = run_test_file(path)
            else:
                found = run_inline_examples(path)
        except PolicyError as e:
            errors += 1
            for problem in e.problems:
                print(f"error: {problem}", file=out)
            continue
        results.extend(found)
    for r in results:
        if not r.passed or args.verbose:
            status = "PASS" if r.passed else "FAIL"
            print(f"{status} {r.where or ''} {r.name}: expected {r.expected}, got {r.actual}"
                  f" (rule {r.rule}{': ' + r.detail if r.detail and not r.passed else ''})",
                  file=out)
    failed = sum(not r.passed for r in results)
    print(f"{len(results) - failed} passed, {failed} failed", file=out)
    if errors:
        return EXIT_USAGE
    return EXIT_TESTS_FAILED if failed else EXIT_OK


def _mcp_wrap(argv: list[str]) -> int:
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


def _mcp_accept(argv: list[str]) -> int:
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


def _mcp_config(args: argparse.Namespace, command: list[str]) -> int:
    import asyncio

    from callwarden._guard import Guard
    from callwarden.gateway import Router, load_servers, serve_stdio

    if command or args.upstream or args.name or args.header:
        print("callwarden mcp: --config names the servers; give no command, --upstream, "
              "--name or --header with it", file=sys.stderr)
        return EXIT_USAGE
    try:
        upstreams = load_servers(args.config.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        print(f"callwarden mcp: {args.config}: {e}", file=sys.stderr)
        return EXIT_USAGE
    guard = Guard.from_file(args.policy)
    router = Router(guard, upstreams, hide_refused=not args.show_refused,
                    call_timeout=args.call_timeout, session=args.session, pin=not args.no_pin)
    try:
        return asyncio.run(serve_stdio(router.serve))
    except KeyboardInterrupt:
        return 130
    finally:
        guard.close()


def _mcp(args: argparse.Namespace, out: TextIO) -> int:
    import asyncio

    from callwarden._guard import Guard
    from callwarden.gateway import Gateway, HttpUpstream, ProcessUpstream

    command = args.server_command[1:] if args.server_command[:1] == ["--"] \
        else args.server_command
    if args.config is not None:
        return _mcp_config(args, command)
    if bool(command) == bool(args.upstream):
        print("callwarden mcp: give the MCP server to run after -- (e.g. callwarden mcp "
              "--policy policy.yaml -- npx -y @modelcontextprotocol/server-filesystem .), "
              "or its URL with --upstream, one of the two", file=sys.stderr)
        return EXIT_USAGE
    headers = {}
    for header in args.header:
        name, sep, value = header.partition(":")
        if not sep or not name.strip():
            print(f"callwarden mcp: --header {header!r} is not NAME:VALUE", file=sys.stderr)
            return EXIT_USAGE
        headers[name.strip()] = value.strip()
    if headers and not args.upstream:
        print("callwarden mcp: --header goes with --upstream", file=sys.stderr)
        return EXIT_USAGE
    upstream = HttpUpstream(args.upstream, headers) if args.upstream \
        else ProcessUpstream(command)
    if args.call_timeout <= 0:
        print("callwarden mcp: --call-timeout must be more than 0 seconds", file=sys.stderr)
        return EXIT_USAGE
    guard = Guard.from_file(args.policy)  # a broken policy: exit 2 with every problem
    gateway = Gateway(guard, server=args.name, hide_refused=not args.show_refused,
                      call_timeout=args.call_timeout, session=args.session,
                      pin=not args.no_pin)
    try:
        return asyncio.run(gateway.serve_stdio(upstream))
    except KeyboardInterrupt:
        return 130
    finally:
        guard.close()


def _hook(args: argparse.Namespace, out: TextIO) -> int:
    from callwarden.hooks import run_hook

    # Fails closed inside: every error becomes the agent's "block" reply, never a traceback.
    return run_hook(args.agent, args.policy, sys.stdin, out, sys.stderr)


def _approvals(args: argparse.Namespace, out: TextIO) -> int:
    from callwarden.cli.approvals import run_approvals

    return run_approvals(args, out)


_STARTER = """\
# callwarden policy. Check a call:  callwarden check -p {name} -t Bash -a '{{"command": "ls"}}'
# Run its examples and the baseline's:  callwarden test {name}
version: 1
extends: callwarden:recommended   # destructive commands, credentials, exfiltration, ...
default: allow
# workspace: {{root: ., home: "~"}}  # where relative paths and ~ point (default: cwd and $HOME)
# state: sqlite:///~/.local/state/callwarden/state.db  # shared limits/approvals; not in the project

rules:  # your own rules; uncomment the example below (delete each "# ") to start
  # - id: no-prod-deploys
  #   match: {{tool: deploy}}
  #   args: {{env: prod}}
  #   effect: deny
  #   message: Deploy to staging instead.
  #   examples:
  #     deny: [{{tool: deploy, args: {{env: prod}}}}]
  #     allow: [{{tool: deploy, args: {{env: staging}}}}]
"""


def _init(args: argparse.Namespace, out: TextIO) -> int:
    path: Path = args.path
    if path.exists() or path.is_symlink():
        print(f"error: {path} exists; not overwriting it", file=sys.stderr)
        return EXIT_USAGE
    folder = path.parent
    created = not folder.exists()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        print(f"error: cannot create the folder {folder} for {path}: {e.strerror or e}",
              file=sys.stderr)
        return EXIT_USAGE
    try:
        with path.open("x", encoding="utf-8") as f:  # "x": never overwrite, even in a race
            f.write(_STARTER.format(name=path.name))
    except OSError as e:
        print(f"error: cannot write {path}: {e.strerror or e}", file=sys.stderr)
        return EXIT_USAGE
    made = f", created {folder}{os.sep}" if created else ""
    print(f"wrote {path} (extends callwarden:recommended{made}); try: callwarden test {path}"
          " (runs the baseline's examples)", file=out)
    return EXIT_OK


def _demo(args: argparse.Namespace, out: TextIO) -> int:
    from callwarden.cli.demo import run_demo

    return run_demo(args.policy, out)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
