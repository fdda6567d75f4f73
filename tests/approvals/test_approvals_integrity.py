"""An agent cannot approve its own call: not under another spelling of its name, not by
writing records to the store, not by approving a look-alike value (issue 14, group 2)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from _approval_support import Clock

from callwarden import Guard
from callwarden.approvals import ApprovalInvalid, ApprovalRefused, Approvals, Status
from callwarden.approvals._integrity import canonical, identity, load_key
from callwarden.approvals._records import call_digest
from callwarden.exceptions import ConfigError
from callwarden.state import MemoryStore, SQLiteStore

# -- identities: the self-approval check reads names as people do ------------------------------

AGENT = "agent-1"
SPELLINGS = ["AGENT-1", " agent-1 ", "agent\u200b-1", "\u0430gent-1",
             "\uff41\uff47\uff45\uff4e\uff54\uff0d\uff11", "agent\u20131", "Agent-l",
             "agent-1\u200d", "agent-\U0001d7cf"]


@pytest.mark.parametrize("by", SPELLINGS)
def test_the_agent_cannot_approve_its_call_under_another_spelling(guard, approvals, by) -> None:
    rid = approvals.request(guard.check("deploy", {"env": "qa"}, agent=AGENT)).id
    with pytest.raises(ApprovalRefused) as refused:
        approvals.approve(rid, by=by)
    assert refused.value.code == "self_approval"
    assert approvals.get(rid).status is Status.PENDING


@pytest.mark.parametrize("by", SPELLINGS)
def test_the_agent_cannot_remember_a_grant_for_itself_either(guard, approvals, by) -> None:
    with pytest.raises(ApprovalRefused):
        approvals.remember(guard.check("deploy", {"env": "qa"}, agent=AGENT),
                           scope="tool", by=by)


def test_the_principal_is_compared_the_same_way(guard, approvals) -> None:
    rid = approvals.request(guard.check("deploy", {"env": "qa"}, agent="bot",
                                        principal="carol")).id
    with pytest.raises(ApprovalRefused):
        approvals.approve(rid, by="CAROL\u200b")


def test_a_name_of_nothing_but_invisible_characters_is_nobody(guard, approvals) -> None:
    rid = approvals.request(guard.check("deploy", {"env": "qa"}, agent=AGENT)).id
    with pytest.raises(ApprovalRefused) as refused:
        approvals.approve(rid, by="\u200b \u2060")
    assert refused.value.code == "approver_required"


def test_a_different_person_still_may(guard, approvals) -> None:
    rid = approvals.request(guard.check("deploy", {"env": "qa"}, agent=AGENT)).id
    assert approvals.approve(rid, by="alice").status is Status.APPROVED


def test_an_allowlisted_approver_is_recognised_however_the_name_is_written(guard) -> None:
    approvals = Approvals(MemoryStore(), approvers=["alice"])
    rid = approvals.request(guard.check("deploy", {"env": "qa"}, agent=AGENT)).id
    assert approvals.approve(rid, by=" Alice ").status is Status.APPROVED


@pytest.mark.parametrize(("a", "b"), [("agent-1", "AGENT-1"), ("alice", "\u0430lice"),
                                      ("bob", "b\u00f6b"), ("x y", "xy")])
def test_identity_folds_what_people_do_not_see(a: str, b: str) -> None:
    assert identity(a) == identity(b)


@pytest.mark.parametrize(("a", "b"), [("alice", "bob"), ("agent-1", "agent-2"),
                                      ("ann", "anna")])
def test_identity_keeps_what_people_do_see(a: str, b: str) -> None:
    assert identity(a) != identity(b)


# -- records: only what was sealed with the approvals key counts ---------------------------------


@pytest.fixture
def shared(tmp_path: Path) -> SQLiteStore:
    return SQLiteStore(tmp_path / "state.db")


def _pending(guard: Guard, approvals: Approvals) -> str:
    return approvals.request(guard.check("deploy", {"env": "qa"}, agent=AGENT)).id


def _rewrite(store: SQLiteStore, key: str, change: dict) -> None:
    """What an agent with a database client can do: edit the stored record."""
    found = store.get(key)
    assert found is not None
    assert store.compare_and_set(key, found.version, {**found.value, **change}, ttl=None)


def test_a_request_approved_by_editing_the_store_is_refused(guard, shared) -> None:
    approvals = Approvals(shared, ttl=600)
    rid = _pending(guard, approvals)
    _rewrite(shared, f"approvals:req:{rid}",
             {"status": "approved", "resolved_by": "alice", "resolved_at": 1.0})
    with pytest.raises(ApprovalInvalid) as refused:
        approvals.consume(rid, guard.check("deploy", {"env": "qa"}, agent=AGENT))
    assert refused.value.code == "approval_forged"
    assert rid not in {r.id for r in approvals.list()}


def test_a_forged_approval_never_lets_the_call_run(guard, shared) -> None:
    guard.approvals = Approvals(shared, ttl=600)
    rid = _pending(guard, guard.approvals)
    _rewrite(shared, f"approvals:req:{rid}", {"status": "approved", "resolved_by": "alice"})
    ran = []
    with pytest.raises(Exception) as refused:
        guard.run("deploy", {"env": "qa"}, lambda env: ran.append(env), agent=AGENT,
                  approval_id=rid)
    assert ran == []
    assert "integrity" in str(refused.value)


def test_a_record_written_whole_by_someone_else_is_refused(guard, shared) -> None:
    approvals = Approvals(shared, ttl=600)
    rid = _pending(guard, approvals)
    record = dict(shared.get(f"approvals:req:{rid}").value)
    record.update(id="f00d", status="approved", resolved_by="alice")
    shared.compare_and_set("approvals:req:f00d", None, record, ttl=None)
    with pytest.raises(ApprovalInvalid, match="integrity"):
        approvals.get("f00d")


def test_a_good_record_copied_to_another_id_is_refused(guard, shared) -> None:
    approvals = Approvals(shared, ttl=600)
    rid = _pending(guard, approvals)
    approvals.approve(rid, by="alice")
    sealed = shared.get(f"approvals:req:{rid}").value  # seal and all
    shared.compare_and_set("approvals:req:beef", None, sealed, ttl=None)
    with pytest.raises(ApprovalInvalid, match="integrity"):
        approvals.get("beef")


def test_a_wildcard_grant_written_to_the_store_grants_nothing(guard, shared) -> None:
    approvals = Approvals(shared, ttl=600)
    forged = {"grants": {"g1": {"id": "g1", "scope": "tool", "tool": "*", "session": None,
                                "agent": None, "by": "alice", "created": 0.0,
                                "expires": 4e9}}}
    shared.compare_and_set("approvals:grants", None, forged, ttl=None)
    assert approvals.granted(guard.check("deploy", {"env": "qa"})) is None
    assert approvals.grants() == []


def test_approvals_under_another_key_are_not_this_guards(guard, shared) -> None:
    ours = Approvals(shared, ttl=600)
    theirs = Approvals(shared, ttl=600, key=os.urandom(32))  # an agent's own key
    rid = _pending(guard, ours)
    with pytest.raises(ApprovalInvalid, match="integrity"):
        theirs.approve(rid, by="alice")
    assert ours.get(rid).status is Status.PENDING


def test_approvals_in_one_process_share_a_memory_store() -> None:
    store, clock = MemoryStore(), Clock()
    guard = Guard.from_dict({"version": 1, "rules": [{"id": "a", "effect": "ask"}]})
    rid = Approvals(store, clock=clock).request(guard.check("t", {})).id
    assert Approvals(store, clock=clock).approve(rid, by="alice").status is Status.APPROVED


# -- digests: a value approves only itself, type included ----------------------------------------


@pytest.mark.parametrize(("approved", "asked"), [
    ("inf", float("inf")), ("nan", float("nan")), ("1", 1), (1, 1.0), (1, True), (0, False),
    ([1, 2], "[1, 2]"), ({"a": 1}, '{"a": 1}'), (None, "None"), (b"x", "x"),
])
def test_approving_a_value_does_not_approve_a_look_alike(approved, asked) -> None:
    assert call_digest("t", {"n": approved}, None, None, "p") != \
        call_digest("t", {"n": asked}, None, None, "p")


def test_an_approved_string_inf_does_not_run_the_float(guard, approvals) -> None:
    decision = guard.check("deploy", {"env": "qa", "replicas": "inf"}, agent=AGENT)
    rid = approvals.request(decision).id
    approvals.approve(rid, by="alice")
    with pytest.raises(ApprovalInvalid) as refused:
        approvals.consume(rid, guard.check("deploy", {"env": "qa", "replicas": float("inf")},
                                           agent=AGENT))
    assert refused.value.code == "approval_mismatch"


def test_lists_and_tuples_and_key_order_do_not_change_a_digest() -> None:
    assert canonical({"a": [1, 2], "b": 1}) == canonical({"b": 1, "a": (1, 2)})


# -- the key file: the approver credential --------------------------------------------------------


def test_the_key_is_made_on_first_use_readable_only_by_its_owner(tmp_path: Path) -> None:
    path = tmp_path / "config" / "callwarden" / "approvals.key"
    key = load_key(path)
    assert len(key) == 32 and load_key(path) == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_a_key_others_can_read_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "approvals.key"
    load_key(path)
    path.chmod(0o644)
    with pytest.raises(ConfigError, match="can be read by other users"):
        load_key(path)


def test_a_key_file_without_a_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "approvals.key"
    path.write_text("not hex\n")
    path.chmod(0o600)
    with pytest.raises(ConfigError, match="holds no key"):
        load_key(path)


def test_a_relative_key_file_in_the_policy_is_an_error() -> None:
    with pytest.raises(Exception, match="key_file"):
        Guard.from_dict({"version": 1, "approvals": {"key_file": "keys/approvals.key"}})


def test_the_cli_with_another_key_cannot_approve_for_the_guard(guard, tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "state.db")
    approvals = Approvals(store, ttl=600)
    rid = _pending(guard, approvals)
    env = {**os.environ, "CALLWARDEN_APPROVALS_KEY_FILE": str(tmp_path / "agents.key")}
    done = subprocess.run(
        [sys.executable, "-m", "callwarden", "approvals", "approve", rid, "--by", "alice",
         "--state", f"sqlite:///{tmp_path / 'state.db'}"],
        env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "integrity" in done.stderr
    assert approvals.get(rid).status is Status.PENDING
    # With the approvals key the same command works.
    done = subprocess.run(
        [sys.executable, "-m", "callwarden", "approvals", "approve", rid, "--by", "alice",
         "--state", f"sqlite:///{tmp_path / 'state.db'}"],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert approvals.get(rid).status is Status.APPROVED
