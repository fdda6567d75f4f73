"""``callwarden approvals ...`` against a shared store, chosen by --state or --policy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from callwarden import Guard
from callwarden.approvals import Approvals, Status
from callwarden.cli import main
from callwarden.state import open_store

POLICY_YAML = """\
version: 1
rules:
  - id: ask-deploy
    match: {tool: deploy}
    effect: ask
approvals:
  ttl: 30m
  approvers: [alice, bob]
  state: sqlite:///approvals.db
"""


def make_request(url: str, guard: Guard, **call: str) -> str:
    with open_store(url) as store:
        return Approvals(store).request(guard.check("deploy", {"env": "qa"}, agent="bot",
                                                    **call)).id


def status_of(url: str, request_id: str) -> Status:
    with open_store(url) as store:
        return Approvals(store).get(request_id).status


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'state.db'}"


def empty_store(url: str) -> str:
    with open_store(url) as store:
        Approvals(store).list()  # creates the file and its tables
    return url


def test_list_without_requests_says_so(url, capsys) -> None:
    assert main(["approvals", "list", "--state", empty_store(url)]) == 0
    assert "no approval requests" in capsys.readouterr().out


def test_list_shows_pending_requests(url, guard, capsys) -> None:
    request_id = make_request(url, guard)
    assert main(["approvals", "list", "--state", url]) == 0
    line = capsys.readouterr().out
    assert request_id in line and "pending" in line and "deploy" in line


def test_list_json_filters_by_status(url, guard, capsys) -> None:
    first, second = make_request(url, guard), make_request(url, guard, session="s2")
    main(["approvals", "deny", first, "--state", url, "--reason", "no", "--by", "alice"])
    capsys.readouterr()
    main(["approvals", "list", "--state", url, "--status", "pending", "--json"])
    assert [r["id"] for r in json.loads(capsys.readouterr().out)] == [second]


def test_show_prints_the_call_and_why(url, guard, capsys) -> None:
    request_id = make_request(url, guard)
    assert main(["approvals", "show", request_id, "--state", url]) == 0
    out = capsys.readouterr().out
    assert all(text in out for text in ('"env": "qa"', "ask-deploy", "status:  pending"))


def test_show_json_is_the_record(url, guard, capsys) -> None:
    request_id = make_request(url, guard)
    main(["approvals", "show", request_id, "--state", url, "--json"])
    assert json.loads(capsys.readouterr().out)["id"] == request_id


def test_show_of_an_unknown_id_exits_1(url, capsys) -> None:
    assert main(["approvals", "show", "nope", "--state", empty_store(url)]) == 1
    assert "approval_not_found" in capsys.readouterr().err


def test_approve_with_edit_and_comment(url, guard, capsys) -> None:
    request_id = make_request(url, guard)
    assert main(["approvals", "approve", request_id, "--state", url, "--by", "alice",
                 "--edit", '{"env": "dev"}', "--comment", "dev first"]) == 0
    with open_store(url) as store:
        request = Approvals(store).get(request_id)
    assert (request.status, request.edited_args, request.comment) == (
        Status.APPROVED, {"env": "dev"}, "dev first")


@pytest.mark.parametrize("edit", ["{not json", '["a"]'])
def test_approve_with_a_bad_edit_exits_2(url, guard, edit, capsys) -> None:
    request_id = make_request(url, guard)
    assert main(["approvals", "approve", request_id, "--state", url, "--by", "alice",
                 "--edit", edit]) == 2
    assert status_of(url, request_id) is Status.PENDING


def test_deny_records_the_reason(url, guard, capsys) -> None:
    request_id = make_request(url, guard)
    assert main(["approvals", "deny", request_id, "--state", url, "--by", "alice",
                 "--reason", "freeze"]) == 0
    assert "freeze" in capsys.readouterr().out
    assert status_of(url, request_id) is Status.DENIED


def test_deny_without_a_reason_is_a_usage_error(url, guard) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["approvals", "deny", "x", "--state", url])
    assert raised.value.code == 2


def test_second_resolution_exits_1(url, guard, capsys) -> None:
    request_id = make_request(url, guard)
    main(["approvals", "approve", request_id, "--state", url, "--by", "alice"])
    assert main(["approvals", "deny", request_id, "--state", url, "--by", "bob",
                 "--reason", "late"]) == 1
    assert "approval_already_resolved" in capsys.readouterr().err


def test_cancel(url, guard, capsys) -> None:
    request_id = make_request(url, guard)
    assert main(["approvals", "cancel", request_id, "--state", url]) == 0
    assert status_of(url, request_id) is Status.CANCELLED


def test_policy_names_the_store_relative_to_its_folder(tmp_path, guard, monkeypatch) -> None:
    folder = tmp_path / "conf"
    folder.mkdir()
    (folder / "policy.yaml").write_text(POLICY_YAML)
    request_id = make_request(f"sqlite:///{folder / 'approvals.db'}", guard)
    monkeypatch.chdir(tmp_path)
    assert main(["approvals", "approve", request_id, "--policy", "conf/policy.yaml",
                 "--by", "alice"]) == 0
    assert status_of(f"sqlite:///{folder / 'approvals.db'}", request_id) is Status.APPROVED


def test_policy_allowlist_is_enforced_by_the_cli(tmp_path, guard, capsys) -> None:
    (tmp_path / "policy.yaml").write_text(POLICY_YAML)
    request_id = make_request(f"sqlite:///{tmp_path / 'approvals.db'}", guard)
    assert main(["approvals", "approve", request_id, "--policy",
                 str(tmp_path / "policy.yaml"), "--by", "mallory"]) == 1
    assert "not_an_approver" in capsys.readouterr().err


def test_policy_top_level_state_is_used(tmp_path, guard, capsys) -> None:
    (tmp_path / "policy.yaml").write_text("version: 1\nstate: sqlite:///top.db\n")
    request_id = make_request(f"sqlite:///{tmp_path / 'top.db'}", guard)
    main(["approvals", "list", "--policy", str(tmp_path / "policy.yaml")])
    assert request_id in capsys.readouterr().out


def test_bad_approvals_section_exits_2(tmp_path, capsys) -> None:
    (tmp_path / "policy.yaml").write_text("version: 1\napprovals: {ttl: soon}\n")
    assert main(["approvals", "list", "--policy", str(tmp_path / "policy.yaml")]) == 2
    assert "approvals.ttl" in capsys.readouterr().err


def test_default_store_is_in_the_users_state_folder_not_the_project(
        tmp_path, guard, monkeypatch, capsys) -> None:
    (tmp_path / "project").mkdir()
    monkeypatch.chdir(tmp_path / "project")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    (tmp_path / "state" / "callwarden").mkdir(parents=True)
    db = tmp_path / "state" / "callwarden" / "state.db"
    request_id = make_request(f"sqlite:///{db}", guard)
    assert main(["approvals", "list"]) == 0
    captured = capsys.readouterr()
    assert request_id in captured.out
    assert f"approvals store: sqlite:///{db} (default" in captured.err
    assert list((tmp_path / "project").iterdir()) == []


def test_a_policys_state_under_the_home_folder_is_read_with_a_tilde(
        tmp_path, guard, monkeypatch, capsys) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "s").mkdir()
    policy = tmp_path / "project" / "policy.yaml"
    policy.parent.mkdir()
    policy.write_text("version: 1\nstate: sqlite:///~/s/state.db\n")
    request_id = make_request(f"sqlite:///{tmp_path / 's' / 'state.db'}", guard)
    assert main(["approvals", "list", "--policy", str(policy)]) == 0
    assert request_id in capsys.readouterr().out


# -- which store, and never creating one by mistake (issue 13, item 14) ---------------------


def test_list_without_a_default_store_exits_2_and_creates_nothing(tmp_path, monkeypatch,
                                                                  capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert main(["approvals", "list"]) == 2
    err = capsys.readouterr().err
    assert f"no approvals store at {tmp_path / 'state' / 'callwarden' / 'state.db'}" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("action", [["list"], ["show", "abc"], ["grants"]])
def test_read_of_a_mistyped_state_path_exits_2_naming_it_and_creates_nothing(
        tmp_path, capsys, action) -> None:
    typo = tmp_path / "sate" / "state.db"
    assert main(["approvals", *action, "--state", f"sqlite:///{typo}"]) == 2
    assert f"no approvals store at {typo}: it does not exist" in capsys.readouterr().err
    assert not (tmp_path / "sate").exists()


@pytest.mark.parametrize("action", [["approve", "abc", "--by", "alice"],
                                    ["deny", "abc", "--reason", "no", "--by", "alice"],
                                    ["cancel", "abc"], ["revoke", "abc"]])
def test_write_to_a_mistyped_state_path_exits_2_and_creates_nothing(tmp_path, capsys,
                                                                    action) -> None:
    typo = tmp_path / "sate" / "state.db"
    assert main(["approvals", *action, "--state", f"sqlite:///{typo}"]) == 2
    assert f"no approvals store at {typo}" in capsys.readouterr().err
    assert not (tmp_path / "sate").exists()


def test_read_of_the_store_a_policy_names_before_it_exists_creates_nothing(tmp_path,
                                                                          capsys) -> None:
    (tmp_path / "policy.yaml").write_text(POLICY_YAML)
    assert main(["approvals", "list", "--policy", str(tmp_path / "policy.yaml")]) == 2
    err = capsys.readouterr().err
    assert f"no approvals store at {tmp_path / 'approvals.db'}" in err
    assert not (tmp_path / "approvals.db").exists()


def test_the_store_from_state_is_said_on_stderr(url, capsys) -> None:
    main(["approvals", "list", "--state", empty_store(url)])
    assert capsys.readouterr().err == f"approvals store: {url} (from --state)\n"


def test_the_store_from_a_policy_is_said_with_its_key(tmp_path, guard, capsys) -> None:
    (tmp_path / "policy.yaml").write_text(POLICY_YAML)
    empty_store(f"sqlite:///{tmp_path / 'approvals.db'}")
    assert main(["approvals", "list", "--policy", str(tmp_path / "policy.yaml")]) == 0
    assert capsys.readouterr().err == (
        f"approvals store: sqlite:///{tmp_path / 'approvals.db'} "
        f"(from --policy {tmp_path / 'policy.yaml'}, approvals.state)\n")


def test_a_policy_that_names_no_store_is_said_to_use_the_default(tmp_path, monkeypatch,
                                                                 capsys) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "policy.yaml").write_text("version: 1\n")
    assert main(["approvals", "list", "--policy", "policy.yaml"]) == 2
    err = capsys.readouterr().err
    assert "(default: --policy policy.yaml names no store)" in err
    assert "keeps approvals in memory" in err


def test_a_relative_state_path_is_said_in_full(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    empty_store("sqlite:///rel.db")
    assert main(["approvals", "grants", "--state", "sqlite:///rel.db"]) == 0
    assert f"approvals store: sqlite:///{tmp_path / 'rel.db'} (from --state)" in \
        capsys.readouterr().err


def test_a_store_password_is_not_printed(capsys) -> None:
    main(["approvals", "list", "--state", "redis://:hunter2@127.0.0.1:1/0"])
    err = capsys.readouterr().err
    assert "approvals store: redis://:***@127.0.0.1:1/0 (from --state)" in err
    assert "hunter2" not in err


def test_grants_and_revoke(url, guard, capsys) -> None:
    with open_store(url) as store:
        grant = Approvals(store).remember(guard.check("deploy", {}, agent="bot", session="s1"),
                                          scope="session", by="alice")
    main(["approvals", "grants", "--state", url])
    assert grant.id in capsys.readouterr().out
    assert main(["approvals", "revoke", grant.id, "--state", url, "--by", "carol"]) == 0
    assert f"revoked {grant.id} by carol" in capsys.readouterr().out
    main(["approvals", "grants", "--state", url, "--all", "--json"])
    listed = json.loads(capsys.readouterr().out)[0]
    assert (listed["status"], listed["revoked_by"]) == ("revoked", "carol")
    main(["approvals", "grants", "--state", url, "--all"])
    assert "revoked by carol" in capsys.readouterr().out
    assert main(["approvals", "revoke", grant.id, "--state", url, "--by", "dave"]) == 1
    err = capsys.readouterr().err
    assert "already revoked by carol at " in err and "[grant_already_revoked]" in err


def test_approve_remember_that_cannot_be_made_approves_nothing(url, guard, capsys) -> None:
    request_id = make_request(url, guard)  # no session
    assert main(["approvals", "approve", request_id, "--state", url, "--by", "alice",
                 "--remember", "session"]) == 2
    assert "needs a call made in a session; nothing was approved" in capsys.readouterr().err
    assert status_of(url, request_id) is Status.PENDING


def test_unknown_state_url_exits_2(capsys) -> None:
    assert main(["approvals", "list", "--state", "ftp://x"]) == 2
