"""Approver groups: ``approvals: {groups: {payments: [...]}, approvers: [group:payments, dave]}``
names the people of a group; a quorum counts distinct people across groups; a group that
cannot work is a policy error on its line; and through ``callwarden serve``, two people of the
group approve and the call runs once, a token holder outside it is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from _approval_support import POLICY
from test_serve import POLICY as SERVED
from test_serve import Service, conforms

from callwarden import Guard, PolicyError, resolve_ask
from callwarden.approvals import ApprovalPending, ApprovalRefused, Approvals, Status, parse_config
from callwarden.cli import main
from callwarden.state import MemoryStore

STAGING = {"env": "staging", "version": "1.4"}
PAYMENTS = {"groups": {"payments": ["alice", "bob", "carol"]},
            "approvers": ["group:payments", "dave"], "required": 2}


def guarded(section: dict[str, Any]) -> Guard:
    return Guard.from_dict({**POLICY, "approvals": section})


def asked(guard: Guard) -> str:
    decision = guard.check("deploy", STAGING, agent="bot")
    with pytest.raises(ApprovalPending) as raised:
        resolve_ask(guard, decision)
    return raised.value.request_id


def test_a_group_names_its_people_as_approvers() -> None:
    guard = guarded(PAYMENTS)
    assert guard.loaded.approvals.approvers == ("alice", "bob", "carol", "dave")
    request_id = asked(guard)
    with pytest.raises(ApprovalRefused, match="not an approver") as raised:
        guard.approvals.approve(request_id, by="mallory")
    assert raised.value.code == "not_an_approver"
    assert guard.approvals.approve(request_id, by="bob").status is Status.PENDING
    assert guard.approvals.approve(request_id, by="dave").status is Status.APPROVED


def test_a_person_in_two_groups_counts_once() -> None:
    section = {"groups": {"payments": ["alice", "bob"], "ops": ["Bob", "carol"]},
               "approvers": ["group:payments", "group:ops"]}
    guard = guarded({**section, "required": 3})
    assert guard.loaded.approvals.approvers == ("alice", "bob", "carol")
    request_id = asked(guard)
    guard.approvals.approve(request_id, by="bob")
    with pytest.raises(ApprovalRefused, match="already approved"):
        guard.approvals.approve(request_id, by="BOB")  # the same person, in the other group
    assert guard.approvals.approve(request_id, by="alice").status is Status.PENDING
    assert guard.approvals.approve(request_id, by="carol").status is Status.APPROVED
    with pytest.raises(PolicyError, match="4 approvals can never be given by only 3 approvers"):
        guarded({**section, "required": 4})


def test_group_members_are_compared_as_approver_names() -> None:
    """A member written ``Alice`` is the ``alice`` who signs in; a caller in the group still
    never approves its own call, under any spelling."""
    guard = guarded({"groups": {"payments": ["Alice", "bot"]}, "approvers": ["group:payments"]})
    request_id = asked(guard)
    with pytest.raises(ApprovalRefused, match="made this call"):
        guard.approvals.approve(request_id, by="B\u043et")  # a Cyrillic o
    assert guard.approvals.approve(request_id, by=" alice ").status is Status.APPROVED


GROUPS = """\
version: 1
rules: []
approvals:
  required: 1
  groups:
    payments: [alice, bob]
{extra}  approvers: {approvers}
"""


@pytest.mark.parametrize(("extra", "approvers", "line", "key", "message", "hint"), [
    ("", "[group:payroll]", 7, "approvals.approvers", "no group 'payroll'",
     "the groups are payments"),
    ("    ops: []\n", "[group:payments, group:ops]", 7, "approvals.groups.ops",
     "group 'ops' has nobody in it", "remove the group"),
    ("    ops: carol\n", "[group:ops]", 7, "approvals.groups.ops",
     "must be a list of people's names", "groups:"),
    ("    ops: [carol, 7]\n", "[group:ops]", 7, "approvals.groups.ops",
     "must be a list of people's names", "groups:"),
    ("    ops: [carol, 'group:payments']\n", "[group:ops]", 7, "approvals.groups.ops",
     "a group lists people, not other groups", "name those people here too"),
    ("    'a:b': [carol]\n", "[group:payments]", 5, "approvals.groups",
     "is not a group name", "groups:"),
    ("", "[payments]", 7, "approvals.approvers", "'payments' is a group, not a person",
     "write group:payments"),
    ("    ops: [carol]\n", "[group:payments]", 7, "approvals.groups.ops",
     "group 'ops' is not named in approvers", "add group:ops to approvers"),
    ("", "[]", 7, "approvals.approvers", "must be a non-empty list of names",
     "group:payments"),
])
def test_a_group_that_cannot_work_is_a_policy_error_on_its_line(
        tmp_path: Path, extra: str, approvers: str, line: int, key: str, message: str,
        hint: str) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(GROUPS.format(extra=extra, approvers=approvers))
    with pytest.raises(PolicyError) as raised:
        Guard.from_file(policy)
    [problem] = raised.value.problems
    assert (problem.line, problem.key) == (line, key), problem
    assert message in problem.message and hint in (problem.hint or ""), problem


@pytest.mark.parametrize(("section", "message"), [
    ({"groups": {"payments": ["alice"]}}, "groups are named in approvers"),
    ({"groups": ["alice"], "approvers": ["alice"]}, "must map each group's name"),
    ({"groups": {}, "approvers": ["alice"]}, "must map each group's name"),
])
def test_groups_without_a_place_in_approvers_are_refused(section: dict[str, Any],
                                                        message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        guarded(section)


def test_a_group_name_given_to_approvals_in_python_is_refused() -> None:
    """Approvals() takes people: a group's name there would be a person nobody is."""
    with pytest.raises(ValueError, match="names a group"):
        Approvals(MemoryStore(), approvers=["group:payments", "dave"])


def test_the_cli_expands_the_policys_groups(tmp_path: Path, capsys) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({**POLICY, "approvals": {
        **PAYMENTS, "state": "sqlite:///approvals.db"}}))
    guard = Guard.from_file(policy)
    request_id = asked(guard)
    guard.close()
    assert parse_config(PAYMENTS).approvers == ("alice", "bob", "carol", "dave")
    args = ["approvals", "approve", request_id, "--policy", str(policy)]
    assert main([*args, "--by", "mallory"]) == 1
    assert "[not_an_approver]" in capsys.readouterr().err
    assert main([*args, "--by", "carol"]) == 0
    assert "1 of 2 approvals (carol)" in capsys.readouterr().out


# -- through the service -----------------------------------------------------------------------


def test_two_people_of_the_group_approve_through_the_service(tmp_path: Path) -> None:
    """carol and alice (approver tokens) are the group payments; ops (an admin, outside it) is
    refused, saying who the approvers are; two approvals run the call once."""
    section = "approvals: {{groups: {{payments: [carol, alice]}}, approvers: [group:payments], " \
              "required: 2}}\nrules:"
    service = Service(tmp_path, policy=SERVED.replace("rules:", section, 1))
    try:
        call = {"tool": "deploy", "args": {"env": "prod"}, "session": "grp"}
        request_id = service.decide(**call)["approval_request"]
        status, refused, _ = service.request("POST", f"/v1/approvals/{request_id}/approve", {},
                                             token="admin")
        assert status == 403 and refused["error"]["code"] == "not_an_approver"
        assert refused["error"]["message"] == (
            "'ops' is not an approver; the approvers are carol, alice")
        conforms(refused, "Error")
        status, first, _ = service.request("POST", f"/v1/approvals/{request_id}/approve", {},
                                           token="approver")
        assert status == 200 and (first["status"], first["approved_by"]) == ("pending",
                                                                              ["carol"])
        assert service.decide(**call)["effect"] == "ask"  # one of two: still waiting
        status, done, _ = service.request("POST", f"/v1/approvals/{request_id}/approve", {},
                                          token="alice")
        assert status == 200 and (done["status"], done["approved_by"]) == (
            "approved", ["carol", "alice"])
        assert service.decide(**call)["effect"] == "allow"
        again = service.decide(**call)
        assert again["effect"] == "ask" and again["approval_request"] != request_id  # once
    finally:
        assert service.stop() == 0
    assert not any("Traceback" in line for line in service.said)
