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
from callwarden.cli._parser import EXIT_OK, EXIT_TESTS_FAILED, EXIT_USAGE, _Parser, parse_listen
from callwarden.exceptions import PolicyError

__all__ = ["EXIT_CODES", "main"]

_DESCRIPTION = ("a policy-enforcement point for AI agent tool calls: check, decide, lint, test, "
                "init, demo, hook, mcp, serve, approvals, replay, explain, audit summary")

EXIT_CODES = {Effect.ALLOW: 0, Effect.MODIFY: 0, Effect.DENY: 10, Effect.ASK: 11, Effect.HALT: 12}


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
    hook.add_argument("--server", default=None, metavar="URL",
                      help="ask this callwarden serve instead of reading a policy (default: "
                           "$CALLWARDEN_SERVER; the agent token in $CALLWARDEN_SERVER_TOKEN)")

    from callwarden.cli.mcp import add_mcp_parser

    add_mcp_parser(sub)

    serve = sub.add_parser("serve", help="decide tool calls over HTTP for agents in any "
                                         "language (and AuthZEN), with approvals",
                           description="Decides tool calls over HTTP (POST /v1/decide; the "
                                       "API is at /openapi.json). People approve paused calls, "
                                       "follow decisions, search the audit log and replay a "
                                       "policy in the console at /console (log in with an "
                                       "approver or admin token).")
    serve.add_argument("--policy", "-p", required=True, type=Path, help="policy file")
    serve.add_argument("--listen", default="127.0.0.1:8080", metavar="HOST:PORT",
                       help="where to listen (default 127.0.0.1:8080; port 0: a free one)")
    serve.add_argument("--tokens", type=Path, default=None, metavar="FILE",
                       help="bearer tokens, one 'ROLE NAME TOKEN' line each (roles: agent, "
                            "approver, admin); or $CALLWARDEN_SERVE_TOKENS")
    serve.add_argument("--max-body", type=int, default=None, metavar="BYTES",
                       help="largest request body (default 1 MiB)")
    serve.add_argument("--workers", type=int, default=1, metavar="N",
                       help="worker processes on the one port (default 1); they share "
                            "limits, approvals and history through the policy's store")
    serve.set_defaults(handler=_serve)

    from callwarden.cli.approvals import add_approvals_parser

    add_approvals_parser(sub)

    from callwarden.cli.review import add_commands

    add_commands(sub)  # replay, explain, audit summary: each sets its own handler
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the CLI; returns the exit code."""
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:2] in (["mcp", "accept"], ["mcp", "wrap"]):  # `mcp` takes a command after --
        from callwarden.cli.mcp import run_mcp_subcommand

        return run_mcp_subcommand(words[1], words[2:])
    args = _parser().parse_args(argv)
    handler = getattr(args, "handler", None) or {
        "check": _check, "decide": _decide, "lint": _lint, "test": _test, "demo": _demo,
        "approvals": _approvals, "init": _init, "hook": _hook,
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


def _serve(args: argparse.Namespace, out: TextIO) -> int:
    import importlib.util

    if importlib.util.find_spec("starlette") is None or \
            importlib.util.find_spec("uvicorn") is None:
        print("callwarden serve: starlette and uvicorn are not installed: pip install "
              "'callwarden[serve]'", file=sys.stderr)
        return EXIT_USAGE
    from callwarden.serve import MAX_BODY, Service, Tokens, run

    listen = parse_listen(args.listen)
    if listen is None:
        print(f"callwarden serve: --listen {args.listen!r} is not HOST:PORT", file=sys.stderr)
        return EXIT_USAGE
    host, port = listen
    try:
        if args.tokens is not None:
            tokens = Tokens.parse(args.tokens.read_text(encoding="utf-8"), str(args.tokens))
        elif os.environ.get("CALLWARDEN_SERVE_TOKENS"):
            tokens = Tokens.parse(os.environ["CALLWARDEN_SERVE_TOKENS"],
                                  "CALLWARDEN_SERVE_TOKENS")
        else:
            raise ValueError("give --tokens FILE (or CALLWARDEN_SERVE_TOKENS): every request "
                             "needs a token, with its role")
    except (OSError, ValueError) as e:
        print(f"callwarden serve: {e}", file=sys.stderr)
        return EXIT_USAGE
    if args.max_body is not None and args.max_body <= 0:
        print("callwarden serve: --max-body must be more than 0", file=sys.stderr)
        return EXIT_USAGE
    if args.workers < 1:
        print("callwarden serve: --workers must be 1 or more", file=sys.stderr)
        return EXIT_USAGE
    first = Service(args.policy, tokens, max_body=args.max_body or MAX_BODY)  # broken: exit 2
    if args.workers == 1:
        return run(lambda: first, host, port)
    first.guard.close()  # each worker opens the policy's store itself, after the fork
    return run(lambda: Service(args.policy, tokens, max_body=args.max_body or MAX_BODY), host,
               port, workers=args.workers)


def _hook(args: argparse.Namespace, out: TextIO) -> int:
    from callwarden.hooks import run_hook

    # Fails closed inside: every error becomes the agent's "block" reply, never a traceback.
    return run_hook(args.agent, args.policy, sys.stdin, out, sys.stderr, server=args.server)


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
