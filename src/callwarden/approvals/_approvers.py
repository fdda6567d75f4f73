"""Who answers an approval request: a callback (sync or async), or a person at a terminal."""

from __future__ import annotations

import asyncio
import concurrent.futures
import getpass
import inspect
import json
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from callwarden.approvals._records import ApprovalRequest

__all__ = ["Answer", "Approve", "Approver", "Deny", "Edit", "TerminalApprover", "approver_name"]


@dataclass(frozen=True, slots=True)
class Approve:
    """Run the call as asked. ``by`` names the reviewer (default: the approver's name)."""

    comment: str | None = None
    by: str | None = None


@dataclass(frozen=True, slots=True)
class Deny:
    """Do not run the call; ``reason`` is shown to the agent."""

    reason: str | None = None
    by: str | None = None


@dataclass(frozen=True, slots=True)
class Edit:
    """Run the call with other arguments: a new call that the whole policy evaluates again.

    ``tool`` may only repeat the call's tool name: an edit cannot turn one tool into another.
    """

    args: Mapping[str, Any]
    comment: str | None = None
    by: str | None = None
    tool: str | None = None


Answer = Approve | Deny | Edit
Approver = Callable[[ApprovalRequest], "Answer | bool | Awaitable[Answer | bool]"]
"""A function (sync or async) receiving the request and returning an answer."""


def approver_name(approver: Any) -> str:
    """The reviewer's name for answers that do not say ``by``."""
    name = getattr(approver, "name", None) or getattr(approver, "__name__", None)
    return str(name) if name else type(approver).__name__


def _answer(result: Any) -> Answer:
    if result is True:
        return Approve()
    if result is False:
        return Deny()
    if isinstance(result, Approve | Deny | Edit):
        return result
    raise TypeError(f"an approver must return Approve, Deny or Edit, not {type(result).__name__}")


def _is_async(approver: Any) -> bool:
    return inspect.iscoroutinefunction(approver) or inspect.iscoroutinefunction(
        getattr(approver, "__call__", None))  # noqa: B004 - an async __call__ method


def ask_approver(approver: Approver, request: ApprovalRequest) -> Answer:
    """Asks an approver from sync code; an async approver runs on its own event loop."""
    result = approver(request)
    if inspect.isawaitable(result):
        result = _run_coroutine(result)
    return _answer(result)


async def aask_approver(approver: Approver, request: ApprovalRequest) -> Answer:
    """Asks an approver from async code; a sync one runs in a worker thread (a terminal
    prompt must not block the event loop)."""
    if _is_async(approver):
        result = await approver(request)  # type: ignore[misc]
    else:
        result = await asyncio.to_thread(approver, request)
        if inspect.isawaitable(result):
            result = await result
    return _answer(result)


def _run_coroutine(awaitable: Awaitable[Any]) -> Any:
    async def wrapper() -> Any:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wrapper())
    # Called from sync code inside a running loop: run it on a loop of its own.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, wrapper()).result()


class TerminalApprover:
    """Asks the person at the terminal: shows the call (tool, args, rule, reason) and reads
    ``y`` (approve), ``n`` (deny, with an optional reason) or ``e`` (edit the arguments as JSON).

    Without a terminal (stdin is not a TTY) it denies: nobody is there to ask.

    Args:
        by: The reviewer's name (default: the login name).
        stdin, stdout: Where to ask (default: the process's).
        require_tty: Deny when ``stdin`` is not a terminal.
    """

    def __init__(self, *, by: str | None = None, stdin: TextIO | None = None,
                 stdout: TextIO | None = None, require_tty: bool = True) -> None:
        self.name = by or _login()
        self._stdin = stdin
        self._stdout = stdout
        self._require_tty = require_tty

    def __call__(self, request: ApprovalRequest) -> Answer:
        """Shows the request and returns the person's answer."""
        stdin = self._stdin or sys.stdin
        out = self._stdout or sys.stdout
        if self._require_tty and not (hasattr(stdin, "isatty") and stdin.isatty()):
            return Deny("no terminal to ask for approval on; the call was not run", by=self.name)
        out.write(describe(request))
        while True:
            answer = _prompt(stdin, out, "Approve? [y]es / [n]o / [e]dit arguments: ")
            if answer is None:
                return Deny("no answer (end of input)", by=self.name)
            choice = answer.strip().lower()
            if choice in ("y", "yes"):
                return Approve(by=self.name)
            if choice in ("n", "no"):
                reason = _prompt(stdin, out, "Reason (shown to the agent, optional): ")
                return Deny((reason or "").strip() or "denied at the terminal", by=self.name)
            if choice in ("e", "edit"):
                edited = _read_args(stdin, out)
                if edited is None:
                    return Deny("no answer (end of input)", by=self.name)
                return Edit(edited, by=self.name)
            out.write("Please answer y, n or e.\n")


def describe(request: ApprovalRequest) -> str:
    """Renders a request for a person: what would run, who asks, and why."""
    who = request.requested_by or "an unnamed caller"
    if request.session:
        who += f" (session {request.session})"
    left = max(0.0, request.expires - time.time())
    lines = [
        f"\nApproval needed [{request.id}]",
        f"  tool:    {request.tool}",
        "  args:    " + json.dumps(request.args, indent=2, ensure_ascii=False).replace(
            "\n", "\n           "),
        f"  rule:    {request.rule or '-'}" + (f" ({request.source})" if request.source else ""),
        f"  reason:  {request.message or '-'}",
        f"  caller:  {who}",
        f"  expires: in {int(left // 60)} min {int(left % 60)} s",
        "",
    ]
    if request.in_doubt:
        lines.insert(2, f"  IN DOUBT: {request.in_doubt}; approve only if it did not happen")
    return "\n".join(lines)


def _prompt(stdin: TextIO, out: TextIO, text: str) -> str | None:
    out.write(text)
    out.flush()
    line = stdin.readline()
    return None if line == "" else line.rstrip("\r\n")


def _read_args(stdin: TextIO, out: TextIO) -> dict[str, Any] | None:
    while True:
        line = _prompt(stdin, out, "New arguments (one line of JSON): ")
        if line is None:
            return None
        try:
            value = json.loads(line)
        except ValueError as e:
            out.write(f"Not JSON ({e}); try again.\n")
            continue
        if isinstance(value, dict):
            return value
        out.write("The arguments must be a JSON object, e.g. {\"path\": \"/tmp/x\"}.\n")


def _login() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no login name in a container: still a named reviewer
        return "terminal"
