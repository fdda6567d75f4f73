"""The audit commands of the CLI: ``replay``, ``explain``, ``audit summary``, ``audit verify``
and ``audit keygen``.

Exit codes: 0 done; 1 ``replay`` saw a ``--fail-on`` transition, ``explain`` found no such
decision, or ``audit verify`` found a problem (it names the file and line); 2 usage error,
invalid policy, or a log that cannot be read or holds no event to work on (empty, not JSON,
another program's log), so a gate on a mistyped path fails instead of passing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

__all__ = ["add_commands"]

EXIT_OK, EXIT_FOUND, EXIT_USAGE = 0, 1, 2


def add_commands(sub: Any) -> None:
    """Registers the audit subcommands on the CLI's subparsers (``handler`` default set)."""
    replay = sub.add_parser("replay", help="re-decide a recorded audit log with a new policy")
    replay.add_argument("--policy", "-p", required=True, type=Path, help="the new policy file")
    replay.add_argument("logs", nargs="+", type=Path, metavar="AUDIT.jsonl",
                        help="JSONL audit logs, replayed in the given order")
    replay.add_argument("--rotated", action="store_true",
                        help="also read each log's rotated pieces, oldest first")
    replay.add_argument("--fail-on", default="", metavar="TRANSITIONS",
                        help="comma-separated transitions that make the command fail, e.g. "
                             "allow-to-deny,deny-to-allow, *-to-halt or any")
    replay.add_argument("--show", type=int, default=20, metavar="N",
                        help="list the first N changed calls (default 20)")
    replay.add_argument("--json", action="store_true", help="print the report as JSON")
    replay.add_argument("--progress", action="store_true",
                        help="show progress on stderr even when it is not a terminal")
    replay.set_defaults(handler=_replay)

    explain = sub.add_parser("explain", help="explain a recorded decision")
    explain.add_argument("decision_id")
    explain.add_argument("logs", nargs="+", type=Path, metavar="AUDIT.jsonl")
    explain.add_argument("--policy", "-p", type=Path, default=None,
                         help="also re-evaluate the call with this policy, rule by rule")
    explain.add_argument("--json", action="store_true", help="print the recorded events as JSON")
    explain.set_defaults(handler=_explain)

    audit = sub.add_parser("audit", help="audit log tools")
    audit_sub = audit.add_subparsers(dest="audit_command", required=True,
                                     parser_class=type(audit))
    summary = audit_sub.add_parser("summary", help="decisions per effect, tool, rule, agent; "
                                                   "top denied calls; latency percentiles")
    summary.add_argument("logs", nargs="+", type=Path, metavar="AUDIT.jsonl")
    summary.add_argument("--rotated", action="store_true",
                         help="also read each log's rotated pieces, oldest first")
    summary.add_argument("--top", type=int, default=10, help="entries per table (default 10)")
    summary.add_argument("--json", action="store_true", help="print the summary as JSON")
    summary.set_defaults(handler=_summary)

    verify = audit_sub.add_parser(
        "verify", help="check the hash chains and signatures of chained audit logs, offline")
    verify.add_argument("logs", nargs="+", type=Path, metavar="AUDIT.jsonl",
                        help="chained logs, oldest first; each is read with its rotated pieces")
    verify.add_argument("--public-key", action="append", default=[], metavar="FILE|HEX",
                        help="a trusted public key (hex, or KEY.pub from keygen, or PEM): "
                             "every seal must be signed by one (repeatable)")
    verify.add_argument("--allow-open", action="store_true",
                        help="accept streams that end without a close seal (a writer still "
                             "running, or killed)")
    verify.add_argument("--json", action="store_true", help="print the report as JSON")
    verify.set_defaults(handler=_verify)

    keygen = audit_sub.add_parser(
        "keygen", help="write a new Ed25519 signing key (mode 0600) and print its public key")
    keygen.add_argument("path", type=Path, metavar="KEY",
                        help="where to write the private key (its public key goes to KEY.pub)")
    keygen.add_argument("--force", action="store_true", help="overwrite an existing key")
    keygen.set_defaults(handler=_keygen)


def _paths(args: argparse.Namespace) -> list[Path] | None:
    from callwarden.review.reader import expand_rotated

    paths = expand_rotated(args.logs) if getattr(args, "rotated", False) else list(args.logs)
    missing = [p for p in paths if not p.is_file()]
    if missing:
        print(f"error: no such audit log: {missing[0]}", file=sys.stderr)
        return None
    return paths


def _logs_with(args: argparse.Namespace, types: tuple[str, ...]) -> list[Path] | None:
    """The logs to read, once each log named on the command line (with its rotated pieces
    under ``--rotated``) is known to hold an event of ``types``; else prints why and None."""
    from callwarden.review.reader import AuditLogError, expand_rotated, require_events

    paths = _paths(args)
    if paths is None:
        return None
    try:
        for log in args.logs:
            # A just-rotated log is empty while its pieces hold the events: check them together.
            require_events(expand_rotated([log]) if args.rotated else [log], types, name=log)
    except AuditLogError as e:
        print(f"error: {e}", file=sys.stderr)
        return None
    return paths


def _clock(seconds: float) -> str:
    """``m:ss``, or ``h:mm:ss`` from an hour on."""
    hours, rest = divmod(max(0, round(seconds)), 3600)
    return f"{hours}:{rest // 60:02}:{rest % 60:02}" if hours else f"{rest // 60}:{rest % 60:02}"


def _progress_printer(stream: TextIO, clock: Callable[[], float] = time.monotonic
                      ) -> Callable[[int, int, int], None]:
    started = clock()
    last = [-1.0]
    width = [0]

    def show(done: int, total: int, events: int) -> None:
        now = clock()
        if now - last[0] < 0.5 and done < total:
            return
        last[0] = now
        elapsed = now - started
        share = 100 * done / total if total else 100.0
        rate = done / elapsed if elapsed > 0 else 0.0
        line = (f"\rreplay: {share:5.1f}%  {done / 1e6:,.1f} of {total / 1e6:,.1f} MB  "
                f"{rate / 1e6:,.1f} MB/s  {events / elapsed if elapsed > 0 else 0:,.0f} events/s")
        if done >= total:
            line += f"  done in {_clock(elapsed)}"
        else:
            line += f"  ETA {_clock((total - done) / rate)}" if rate > 0 else "  ETA --:--"
        # pad over the longer line this one replaces (\r moves back, it does not erase)
        stream.write(line.ljust(width[0]) + ("\n" if done >= total else ""))
        width[0] = len(line)
        stream.flush()

    return show


def _replay(args: argparse.Namespace, out: TextIO) -> int:
    from callwarden.review.reader import AuditLogError
    from callwarden.review.replay import parse_transition, replay

    specs = [s for s in args.fail_on.split(",") if s.strip()]
    try:
        for spec in specs:
            parse_transition(spec)
    except ValueError as e:
        print(f"error: --fail-on: {e}", file=sys.stderr)
        return EXIT_USAGE
    paths = _logs_with(args, ("decision",))
    if paths is None:
        return EXIT_USAGE
    progress = None
    if args.progress or sys.stderr.isatty():
        progress = _progress_printer(sys.stderr)
    try:
        report = replay(args.policy, paths, show=max(0, args.show), on_progress=progress)
    except (AuditLogError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    failing = report.failing(specs)
    if args.json:
        print(json.dumps({**report.to_dict(), "failed_on": failing}, indent=2), file=out)
    else:
        print(report.format(), file=out)
        if failing:
            print(f"FAIL: {', '.join(failing)} occurred", file=out)
    return EXIT_FOUND if failing else EXIT_OK


def _explain(args: argparse.Namespace, out: TextIO) -> int:
    from callwarden.review.explain import explain_event, explain_with_policy, find_decision

    paths = _paths(args)
    if paths is None:
        return EXIT_USAGE
    event, outcomes = find_decision(args.decision_id, paths)
    if event is None:
        print(f"error: no decision {args.decision_id!r} in {', '.join(map(str, paths))}",
              file=sys.stderr)
        return EXIT_FOUND
    if args.json:
        print(json.dumps({"decision": event, "outcomes": outcomes}, indent=2), file=out)
        return EXIT_OK
    print(explain_event(event, outcomes), file=out)
    if args.policy is not None:
        from callwarden._guard import Guard

        print(explain_with_policy(event, Guard.from_file(args.policy, audit=False)), file=out)
    return EXIT_OK


def _summary(args: argparse.Namespace, out: TextIO) -> int:
    from callwarden.review.reader import AuditLogError
    from callwarden.review.summary import summarize

    paths = _logs_with(args, ("decision", "outcome"))
    if paths is None:
        return EXIT_USAGE
    try:
        summary = summarize(paths)
    except (AuditLogError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(summary.to_dict(args.top), indent=2), file=out)
    else:
        print(summary.format(args.top), file=out)
    return EXIT_OK


def _verify(args: argparse.Namespace, out: TextIO) -> int:
    from callwarden.audit._verify import log_files, parse_public_key, verify_logs
    from callwarden.exceptions import MissingDependency

    try:
        keys = [parse_public_key(k) for k in args.public_key]
    except (ValueError, MissingDependency) as e:
        print(f"error: --public-key: {e}", file=sys.stderr)
        return EXIT_USAGE
    files = log_files(args.logs)
    missing = [p for p in files if not p.is_file()]
    if missing:
        print(f"error: no such audit log: {missing[0]}", file=sys.stderr)
        return EXIT_USAGE
    try:
        report = verify_logs(files, public_keys=keys, allow_open=args.allow_open)
    except (OSError, MissingDependency) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    if not report.lines:
        print(f"error: {', '.join(map(str, files))}: empty, nothing to verify", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(report.to_dict(), indent=2), file=out)
    else:
        print(report.summary(), file=out)
    return EXIT_OK if report.ok else EXIT_FOUND


def _keygen(args: argparse.Namespace, out: TextIO) -> int:
    from callwarden.audit._chain import generate_signing_key
    from callwarden.exceptions import MissingDependency

    try:
        public = generate_signing_key(args.path, force=args.force)
    except FileExistsError:
        print(f"error: {args.path} exists (--force overwrites it)", file=sys.stderr)
        return EXIT_USAGE
    except (OSError, MissingDependency) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    print(public, file=out)
    print(f"wrote {args.path} (private, mode 0600) and {args.path}.pub; verify with: "
          f"callwarden audit verify LOG --public-key {args.path}.pub", file=sys.stderr)
    return EXIT_OK
