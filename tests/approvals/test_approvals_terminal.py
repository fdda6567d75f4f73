"""The terminal approver, driven through a real pseudo-terminal (pexpect)."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pexpect
import pytest

from callwarden.approvals import Approve, Deny, Edit, TerminalApprover

SCRIPT = Path(__file__).parent / "_terminal_script.py"
SRC = Path(__file__).parents[2] / "src"
PROMPT = r"\[y\]es / \[n\]o / \[e\]dit arguments: "


@pytest.fixture
def terminal():
    child = pexpect.spawn(sys.executable, [str(SCRIPT)], encoding="utf-8", timeout=60,
                          env={**os.environ, "PYTHONPATH": str(SRC)}, dimensions=(50, 200))
    yield child
    child.close(force=True)


def result(child: pexpect.spawn) -> list[str]:
    child.expect(r"RESULT ([^\r\n]*)\r\n")
    return child.match.group(1).split(" ", 2)


def test_terminal_shows_tool_args_rule_and_reason(terminal) -> None:
    terminal.expect("Approval needed")
    terminal.expect(PROMPT)
    shown = terminal.before
    assert all(text in shown for text in (
        "tool:    deploy", '"env": "staging"', '"version": "3.1"', "rule:    ask-deploy",
        "Deploys need a human.", "caller:  bot (session s1)"))
    terminal.sendline("y")
    result(terminal)


def test_terminal_yes_approves(terminal) -> None:
    terminal.expect(PROMPT)
    terminal.sendline("y")
    assert result(terminal) == ["allow", "approved", '{"env": "staging", "version": "3.1"}']


def test_terminal_no_denies_with_the_typed_reason(terminal) -> None:
    terminal.expect(PROMPT)
    terminal.sendline("n")
    terminal.expect("Reason")
    terminal.sendline("use the canary first")
    assert result(terminal)[:2] == ["deny", "approval_denied"]
    terminal.expect(r"MESSAGE .*use the canary first")


def test_terminal_edit_runs_the_edited_call(terminal) -> None:
    terminal.expect(PROMPT)
    terminal.sendline("e")
    terminal.expect("New arguments")
    terminal.sendline('{"env": "qa", "version": "3.1"}')
    assert result(terminal) == ["modify", "approved_with_edit", '{"env": "qa", "version": "3.1"}']


def test_terminal_edit_is_re_evaluated_by_the_policy(terminal) -> None:
    terminal.expect(PROMPT)
    terminal.sendline("e")
    terminal.expect("New arguments")
    terminal.sendline('{"env": "prod"}')
    effect, code, _ = result(terminal)
    assert effect == "deny" and code != "approved_with_edit"
    terminal.expect("MESSAGE Never deploy to prod")


def test_terminal_asks_again_for_invalid_json(terminal) -> None:
    terminal.expect(PROMPT)
    terminal.sendline("e")
    terminal.expect("New arguments")
    terminal.sendline("{not json")
    terminal.expect("Not JSON")
    terminal.sendline('["a", "list"]')
    terminal.expect("must be a JSON object")
    terminal.sendline('{"env": "qa"}')
    assert result(terminal)[:2] == ["modify", "approved_with_edit"]


def test_terminal_asks_again_for_an_unknown_answer(terminal) -> None:
    terminal.expect(PROMPT)
    terminal.sendline("maybe")
    terminal.expect("Please answer y, n or e")
    terminal.sendline("yes")
    assert result(terminal)[0] == "allow"


def test_terminal_end_of_input_denies(terminal) -> None:
    terminal.expect(PROMPT)
    terminal.sendeof()
    assert result(terminal)[:2] == ["deny", "approval_denied"]


def test_without_a_terminal_it_denies(guard, memory_approvals) -> None:
    approver = TerminalApprover(by="alice", stdin=io.StringIO("y\n"), stdout=io.StringIO())
    request = memory_approvals.request(guard.check("deploy", {}, agent="bot"))
    assert isinstance(approver(request), Deny)


@pytest.mark.parametrize(("typed", "expected"), [
    ("y\n", Approve(by="alice")),
    ("n\nbecause\n", Deny("because", by="alice")),
    ('e\n{"env": "qa"}\n', Edit({"env": "qa"}, by="alice")),
])
def test_answers_read_from_given_streams(guard, memory_approvals, typed, expected) -> None:
    approver = TerminalApprover(by="alice", stdin=io.StringIO(typed), stdout=io.StringIO(),
                                require_tty=False)
    request = memory_approvals.request(guard.check("deploy", {}, agent="bot"))
    assert approver(request) == expected
