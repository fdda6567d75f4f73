"""``callwarden approvals list | show | approve | deny | cancel | grants | revoke | remind``.

Works against the store the guard uses, named by ``--state URL`` or read from ``--policy FILE``
(``approvals.state``, else ``state``; default: the per-user
``~/.local/state/callwarden/state.db``, outside any project); which one is said on stderr.
An SQLite store that does not exist is an error, never created here. Exit codes: 0 done,
1 refused (not found, not allowed, already resolved), 2 usage or configuration error.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from callwarden._units import parse_duration

__all__ = ["add_approvals_parser", "run_approvals"]

EXIT_OK, EXIT_REFUSED, EXIT_USAGE = 0, 1, 2


def add_approvals_parser(sub: Any) -> None:
    """Adds the ``approvals`` command group to the CLI's subparsers."""
    group = sub.add_parser("approvals", help="list and resolve approval requests",
                           description=__doc__.split("\n\n")[1].replace("``", "") if __doc__ else None)
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument("--state", help="state store URL (sqlite:///p.db, redis://host:6379/0)")
    where.add_argument("--policy", "-p", type=Path, help="policy file naming the store")
    # The same parser class as the rest of the CLI, so usage errors exit 2 the same way.
    actions = group.add_subparsers(dest="action", required=True, parser_class=type(group))
    listing = actions.add_parser("list", parents=[where], help="list requests")
    listing.add_argument("--status", choices=["pending", "approved", "denied", "expired",
                                              "cancelled", "consumed"])
    listing.add_argument("--json", action="store_true")
    show = actions.add_parser("show", parents=[where], help="show one request")
    show.add_argument("id")
    show.add_argument("--json", action="store_true")
    approve = actions.add_parser("approve", parents=[where], help="approve a pending request")
    approve.add_argument("id")
    approve.add_argument("--by", help="who approves (default: your login name)")
    approve.add_argument("--edit", help="approve these arguments instead (a JSON object)")
    approve.add_argument("--comment")
    approve.add_argument("--remember", choices=["session", "agent", "tool"],
                         help="and do not ask again: for this session, this agent, or anyone")
    approve.add_argument("--for", dest="lasting", metavar="DURATION",
                         help="how long --remember lasts (e.g. 1h; default: the request ttl)")
    approve.add_argument("--exact", action="store_true",
                         help="--remember this exact call only (the tool with these "
                              "arguments), not every call of the tool")
    deny = actions.add_parser("deny", parents=[where], help="deny a pending request")
    deny.add_argument("id")
    deny.add_argument("--reason", required=True, help="shown to the agent")
    deny.add_argument("--by", help="who denies (default: your login name)")
    cancel = actions.add_parser("cancel", parents=[where], help="withdraw a request")
    cancel.add_argument("id")
    grants = actions.add_parser("grants", parents=[where], help="list remembered approvals")
    grants.add_argument("--all", action="store_true", help="include revoked and expired ones")
    grants.add_argument("--json", action="store_true")
    revoke = actions.add_parser("revoke", parents=[where], help="revoke a remembered approval")
    revoke.add_argument("id")
    revoke.add_argument("--by", help="who revokes it (default: your login name)")
    actions.add_parser("remind", parents=[where],
                       help="call the policy's remind: function for requests left waiting "
                            "(run it from cron; callwarden serve does every minute)")


def run_approvals(args: argparse.Namespace, out: TextIO) -> int:
    """Runs one ``approvals`` action; returns the exit code."""
    from callwarden.exceptions import ApprovalError, ConfigError, StoreUnavailable

    try:
        approvals = _open(args)
    except (ConfigError, ValueError, ImportError, OSError) as e:
        hint = f" ({e.hint})" if isinstance(e, ConfigError) and e.hint else ""
        key = f"approvals.{e.key}: " if isinstance(e, ConfigError) and e.key else ""
        print(f"error: {key}{e}{hint}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return _ACTIONS[args.action](approvals, args, out)
    except ApprovalError as e:
        print(f"error: {e.message} [{e.code}]", file=sys.stderr)
        return EXIT_REFUSED
    except StoreUnavailable as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_REFUSED
    finally:
        approvals.store.close()
        if approvals.auditor is not None:
            approvals.auditor.close()  # flushes: the transition is on record before we exit


# Reads never create a store: a mistyped path must not leave folders and an empty database
# behind and then report "no approval requests".
_READS = frozenset({"list", "show", "grants"})


def _open(args: argparse.Namespace) -> Any:
    """The ``Approvals`` on the chosen store, once it is said on stderr which store it is.

    Raises:
        ConfigError: the store is unknown, or it is an SQLite file that does not exist.
    """
    from callwarden.approvals._approvals import Approvals
    from callwarden.exceptions import ConfigError
    from callwarden.state import open_store

    url, section, origin, hint = _choose_store(args)
    path = _sqlite_file(url)
    print(f"approvals store: {_shown(url, path)} ({origin})", file=sys.stderr)
    if path is not None and not path.is_file():
        what = "is not a file" if path.exists() else "does not exist"
        raise ConfigError(f"no approvals store at {path}: it {what}", hint=hint)
    approvals = Approvals.from_config(section, open_store(url))
    if args.action == "remind":
        from callwarden.approvals._config import parse_config
        from callwarden.approvals._policy import reminder_options
        from callwarden.engine.user import load_object

        options = reminder_options(parse_config(section), load_object)
        if not options:
            raise ConfigError("the policy has no approvals: {remind: ...} section",
                              hint="e.g. remind: {after: 10m, every: 30m, call: team:notify}")
        for name, value in options.items():
            setattr(approvals, name, value)
    if args.policy and not args.state and args.action not in _READS:
        approvals.auditor = _policy_auditor(args.policy)
    return approvals


def _choose_store(args: argparse.Namespace) -> tuple[str, Mapping[str, Any] | None, str, str]:
    """The store URL, the policy's ``approvals:`` section, where the URL came from, and what to
    do when it names no store."""
    from callwarden.approvals._config import default_state_url, state_url_from_policy

    if args.state:
        return args.state, None, "from --state", "check the path"
    if args.policy:
        url, section, key = state_url_from_policy(args.policy)
        if key is not None:
            return url, section, f"from --policy {args.policy}, {key}", \
                "the guard creates it when the policy first asks for an approval"
        return url, section, f"default: --policy {args.policy} names no store", \
            "the policy names no state store, so its guard keeps approvals in memory; " \
            "name one with approvals.state or state"
    return default_state_url(), None, "default: no --state or --policy", \
        "pass the policy the guard uses (--policy FILE) or its store (--state URL)"


def _sqlite_file(url: str) -> Path | None:
    """The file an ``sqlite:///`` URL names (relative to the working folder), else None."""
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(url)
    name = unquote(parts.path[1:])
    if parts.scheme != "sqlite" or parts.netloc or not name or name == ":memory:":
        return None  # not SQLite, or an URL open_store refuses with its own message
    return Path(name).absolute()


def _shown(url: str, path: Path | None) -> str:
    """The URL as it is opened (an SQLite path made absolute), without a password."""
    from urllib.parse import urlsplit, urlunsplit

    if path is not None:
        query = url.partition("?")[2]
        return f"sqlite:///{path}" + (f"?{query}" if query else "")
    parts = urlsplit(url)
    if parts.password:
        netloc = f"{parts.username or ''}:***@{parts.hostname or ''}" \
                 + (f":{parts.port}" if parts.port else "")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


def _policy_auditor(path: Path) -> Any:
    """The policy's own audit sinks, so a transition made here lands in the same log."""
    import yaml

    from callwarden.audit import Auditor

    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    section = data.get("audit") if isinstance(data, Mapping) else None
    if section is None:
        return None
    return Auditor.from_config(section, base_dir=path.parent)


def _list(approvals: Any, args: argparse.Namespace, out: TextIO) -> int:
    requests = approvals.list(args.status)
    if args.json:
        print(json.dumps([r.to_dict() for r in requests], indent=2), file=out)
        return EXIT_OK
    if not requests:
        print("no approval requests" + (f" with status {args.status}" if args.status else ""),
              file=out)
        return EXIT_OK
    now = approvals.clock()
    for r in requests:
        args_text = json.dumps(r.args, ensure_ascii=False)
        if len(args_text) > 60:
            args_text = args_text[:57] + "..."
        print(f"{r.id}  {r.status.value:<9}  {r.tool}  {args_text}  by {r.requested_by or '-'}"
              f"  rule {r.rule or '-'}  {_age(now - r.created)} ago"
              + ("  IN DOUBT (may already have run)" if r.in_doubt else ""), file=out)
    return EXIT_OK


def _show(approvals: Any, args: argparse.Namespace, out: TextIO) -> int:
    request = approvals.get(args.id)
    if args.json:
        print(json.dumps(request.to_dict(), indent=2), file=out)
        return EXIT_OK
    from callwarden.approvals._approvers import describe

    print(describe(request).strip("\n"), file=out)
    print(f"  status:  {request.status.value}", file=out)
    if request.required > 1:
        print(f"  quorum:  {_quorum(request)}"
              + (f"; denied by {', '.join(request.denied_by)}" if request.denied_by else ""),
              file=out)
    if request.resolved_by:
        print(f"  by:      {request.resolved_by} at {_iso(request.resolved_at)}", file=out)
    if request.comment:
        print(f"  comment: {request.comment}", file=out)
    if request.edited_args is not None:
        print(f"  edited:  {json.dumps(request.edited_args, ensure_ascii=False)}", file=out)
    return EXIT_OK


def _approve(approvals: Any, args: argparse.Namespace, out: TextIO) -> int:
    edit = None
    if args.edit is not None:
        try:
            edit = json.loads(args.edit)
        except ValueError as e:
            print(f"error: --edit must be a JSON object: {e}", file=sys.stderr)
            return EXIT_USAGE
        if not isinstance(edit, dict):
            print("error: --edit must be a JSON object, e.g. '{\"env\": \"staging\"}'",
                  file=sys.stderr)
            return EXIT_USAGE
    by = args.by or _login()
    lasting = None
    if args.lasting is not None:
        try:
            lasting = parse_duration(args.lasting)
        except ValueError as e:
            print(f"error: --for: {e}", file=sys.stderr)
            return EXIT_USAGE
    if (args.lasting is not None or args.exact) and args.remember is None:
        print("error: --for and --exact go with --remember session|agent|tool", file=sys.stderr)
        return EXIT_USAGE
    grant = None
    if args.remember is None:
        request = approvals.approve(args.id, by=by, edit=edit, comment=args.comment)
    else:
        try:  # the grant is checked before anything is approved
            request, grant = approvals.approve_and_remember(
                args.id, scope=args.remember, by=by, ttl=lasting, exact=args.exact, edit=edit,
                comment=args.comment)
        except ValueError as e:
            print(f"error: --remember {args.remember}: {e}; nothing was approved",
                  file=sys.stderr)
            return EXIT_USAGE
    if request.status.value == "pending":  # one of a quorum
        print(f"approved {request.id} by {by}: {_quorum(request)}; still pending"
              + ("; remember it once it is approved" if args.remember else ""), file=out)
        return EXIT_OK
    note = " with edited arguments" if edit is not None else ""
    print(f"approved {request.id}{note} by {request.resolved_by}", file=out)
    if grant is not None:
        what = "this exact call" if args.exact else f"tool {grant.tool}"
        print(f"remembered as {grant.id}: {what} for this {args.remember} until "
              f"{_iso(grant.expires)} (revoke: callwarden approvals revoke {grant.id})",
              file=out)
    return EXIT_OK


def _deny(approvals: Any, args: argparse.Namespace, out: TextIO) -> int:
    by = args.by or _login()
    request = approvals.deny(args.id, by=by, reason=args.reason)
    if request.status.value == "pending":  # veto: false, and the quorum can still be reached
        print(f"denied {request.id} by {by}, counted against the quorum: "
              f"{_quorum(request)}; still pending", file=out)
        return EXIT_OK
    print(f"denied {request.id} by {request.resolved_by}: {request.comment}", file=out)
    return EXIT_OK


def _quorum(request: Any) -> str:
    """``1 of 2 approvals (alice)`` for a request that needs several approvers."""
    names = ", ".join(request.approved_by or ()) or "none yet"
    return f"{len(request.approved_by or ())} of {request.required} approvals ({names})"


def _cancel(approvals: Any, args: argparse.Namespace, out: TextIO) -> int:
    request = approvals.cancel(args.id)
    print(f"cancelled {request.id}", file=out)
    return EXIT_OK


def _grants(approvals: Any, args: argparse.Namespace, out: TextIO) -> int:
    grants = approvals.grants(include_inactive=args.all)
    if args.json:
        print(json.dumps([g.to_dict() for g in grants], indent=2), file=out)
        return EXIT_OK
    if not grants:
        print("no remembered approvals", file=out)
    for g in grants:
        bound = g.session or g.agent or "*"
        exact = "  (one exact call)" if g.call else ""
        revoked = f"  revoked by {g.revoked_by}" if g.revoked_by else ""
        print(f"{g.id}  {g.status.value:<7}  {g.scope.value}={bound}  tool {g.tool}{exact}"
              f"  by {g.by}  until {_iso(g.expires)}{revoked}", file=out)
    return EXIT_OK


def _remind(approvals: Any, args: argparse.Namespace, out: TextIO) -> int:
    reminded = approvals.remind()
    for request in reminded:
        waited = _age(approvals.clock() - request.created)
        print(f"reminded {request.id}  {request.tool}  waiting {waited}", file=out)
    if not reminded:
        print("nothing to remind", file=out)
    return EXIT_OK


def _revoke(approvals: Any, args: argparse.Namespace, out: TextIO) -> int:
    grant = approvals.revoke(args.id, by=args.by or _login())
    print(f"revoked {grant.id} by {grant.revoked_by}", file=out)
    return EXIT_OK


_ACTIONS = {"list": _list, "show": _show, "approve": _approve, "deny": _deny,
            "cancel": _cancel, "grants": _grants, "revoke": _revoke, "remind": _remind}


def _age(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


def _iso(t: float | None) -> str:
    return "-" if t is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _login() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no login name (a container): the caller must say --by
        return "unknown"
