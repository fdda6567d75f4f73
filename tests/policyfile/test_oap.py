"""``extends: oap:passport.json``: an Open Agent Passport as a policy source."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from callwarden import Guard
from callwarden.exceptions import PolicyError
from callwarden.policyfile.oap import oap_code

FIXTURES = Path(__file__).parent.parent / "fixtures" / "oap"
PASSPORT: dict[str, Any] = json.loads((FIXTURES / "passport.json").read_text())
README = Path(__file__).parent.parent.parent / "README.md"


def variants() -> list[tuple[str, str]]:
    """Spellings of ``rm -rf`` (technique, command), copied from the shared corpus."""
    rows = (FIXTURES / "rm_rf_variants.tsv").read_text().splitlines()
    return [tuple(r.split("\t", 1)) for r in rows if r and not r.startswith("#")]  # type: ignore[misc]


def passport_guard(tmp_path: Path, rules: list[dict[str, Any]] | None = None,
                   tools: dict[str, Any] | None = None, **changes: Any) -> Guard:
    """A guard whose policy extends a passport: the fixture's, with ``changes`` applied."""
    passport = {**json.loads(json.dumps(PASSPORT)), **changes}
    (tmp_path / "passport.json").write_text(json.dumps(passport))
    policy = {"version": 1, "extends": "oap:passport.json", "rules": rules or [],
              "tools": tools or {}}
    (tmp_path / "policy.yaml").write_text(json.dumps(policy))
    return Guard.from_file(tmp_path / "policy.yaml")


def shell(guard: Guard, command: str, **args: Any) -> tuple[str, str | None]:
    decision = guard.check("bash", {"command": command, **args})
    return decision.effect.value, oap_code(decision.rule)


# -- commands ------------------------------------------------------------------------------

def test_allowed_commands_admit_only_the_listed_programs(tmp_path: Path) -> None:
    guard = passport_guard(tmp_path)
    assert shell(guard, "git status") == ("allow", None)
    assert shell(guard, "ls -la /work") == ("allow", None)
    assert shell(guard, "curl https://example.com") == ("deny", "oap.command_not_allowed")
    # every command of a compound line must be allowed
    assert shell(guard, "git status && curl x | sh") == ("deny", "oap.command_not_allowed")
    decision = guard.check("bash", {"command": "python3 x.py"})
    assert "only these commands: git, ls, rm, npm" in decision.message


@pytest.mark.parametrize(("technique", "command"), variants())
def test_a_blocked_pattern_stops_every_spelling_of_it(tmp_path: Path, technique: str,
                                                      command: str) -> None:
    limits = {"system.command.execute": {"blocked_patterns": ["rm -rf"]}}
    guard = passport_guard(tmp_path, limits=limits)
    effect, code = shell(guard, command)
    assert (effect, code) == ("deny", "oap.blocked_pattern"), (technique, command)


def test_a_blocked_pattern_leaves_other_commands_alone(tmp_path: Path) -> None:
    limits = {"system.command.execute": {"blocked_patterns": ["rm -rf", "git push --force"]}}
    guard = passport_guard(tmp_path, limits=limits)
    for command in ("rm tmp/output.log", "git push origin main", "ls -la", "rm -r -i build"):
        assert shell(guard, command) == ("allow", None), command
    # the text of a pattern anywhere in a command counts, as OAP's evaluators read it
    assert shell(guard, "echo rm -rf") == ("deny", "oap.blocked_pattern")
    assert shell(guard, "git push -f origin main") == ("deny", "oap.blocked_pattern")
    assert shell(guard, "sudo rm --recursive --force /srv") == ("deny", "oap.blocked_pattern")


def test_a_blocked_pattern_that_is_no_command_is_matched_as_text(tmp_path: Path) -> None:
    limits = {"system.command.execute": {"blocked_patterns": ["chmod 777", "> /dev/sda"]}}
    guard = passport_guard(tmp_path, limits=limits)
    assert shell(guard, "chmod 777 /etc/passwd") == ("deny", "oap.blocked_pattern")
    assert shell(guard, "chmod 644 notes.txt") == ("allow", None)


def test_max_execution_time_limits_the_timeout_argument(tmp_path: Path) -> None:
    guard = passport_guard(tmp_path)  # max_execution_time: 300
    assert shell(guard, "ls", timeout=900) == ("deny", "oap.limit_exceeded")
    assert shell(guard, "ls", timeout=60) == ("allow", None)


# -- capabilities and tools ---------------------------------------------------------------------

def test_a_tool_needs_the_capability_of_its_kind(tmp_path: Path) -> None:
    guard = passport_guard(tmp_path)  # system.command.execute and data.file.read only
    denied = guard.check("write_file", {"path": "/work/a.txt", "content": "x"})
    assert (denied.effect.value, oap_code(denied.rule)) == ("deny", "oap.tool_not_allowed")
    assert "does not grant 'data.file.write'" in denied.message
    assert oap_code(guard.check("web_fetch", {"url": "https://a.example"}).rule) == \
        "oap.tool_not_allowed"
    assert oap_code(guard.check("mcp__github__create_issue", {}).rule) == "oap.tool_not_allowed"
    # a tool of no kind the passport speaks of is left to the rest of the policy
    assert guard.check("deploy", {"env": "qa"}).effect.value == "allow"


def test_allowed_paths_keep_file_tools_inside_them(tmp_path: Path) -> None:
    guard = passport_guard(tmp_path)  # data.file.read: allowed_paths /work/**
    assert guard.check("read_file", {"path": "/work/notes.txt"}).effect.value == "allow"
    for path in ("/etc/passwd", "/work/../etc/passwd", "/work/%2e%2e/etc/shadow"):
        decision = guard.check("read_file", {"path": path})
        assert oap_code(decision.rule) == "oap.path_not_allowed", path


def test_domains_and_rates_of_granted_capabilities(tmp_path: Path) -> None:
    capabilities = [{"id": "web.fetch"}, {"id": "messaging.message.send"}]
    limits = {"web.fetch": {"allowed_domains": ["*.example.com", "example.com"],
                            "blocked_domains": ["evil.example.com"]},
              "messaging.message.send": {"msgs_per_min": 2}}
    guard = passport_guard(tmp_path, capabilities=capabilities, limits=limits)
    fetch = lambda url: oap_code(guard.check("web_fetch", {"url": url}).rule)  # noqa: E731
    assert fetch("https://docs.example.com/a") is None
    assert fetch("https://attacker.example/x") == "oap.domain_not_allowed"
    assert fetch("https://evil.example.com/") == "oap.domain_blocked"
    sent = [guard.check("send_email", {"to": "a@example.com"}, agent="bot") for _ in range(3)]
    assert [d.effect.value for d in sent] == ["allow", "allow", "deny"]
    assert oap_code(sent[2].rule) == "oap.limit_exceeded"


def test_payment_amounts_per_currency(tmp_path: Path) -> None:
    capabilities = [{"id": "payments.refund", "params": {"max_amount": 5000, "currency": "USD"}}]
    limits = {"payments.refund": {"currency_limits": {"EUR": {"max_per_tx": 100}}}}
    guard = passport_guard(tmp_path, capabilities=capabilities, limits=limits,
                           tools={"refund_payment": {"kind": "payment"}})
    pay = lambda **a: oap_code(guard.check("refund_payment", a).rule)  # noqa: E731
    assert pay(amount=4000, currency="USD") is None
    assert pay(amount=6000, currency="USD") == "oap.limit_exceeded"
    assert pay(amount=150, currency="EUR") == "oap.limit_exceeded"


def test_the_passport_composes_with_the_policys_own_rules(tmp_path: Path) -> None:
    rules = [{"id": "no-prod", "match": {"tool": "deploy"}, "args": {"env": "prod"},
              "effect": "deny", "message": "No prod deploys."},
             {"id": "git-push-asks", "match": {"kind": "shell"}, "effect": "ask",
              "shell": {"deny": ["git push *"]}}]
    guard = passport_guard(tmp_path, rules=rules)
    assert guard.check("deploy", {"env": "prod"}).rule == "no-prod"
    assert guard.check("bash", {"command": "git push origin main"}).effect.value == "ask"
    assert shell(guard, "curl x") == ("deny", "oap.command_not_allowed")


# -- status ---------------------------------------------------------------------------------

@pytest.mark.parametrize("status", ["suspended", "revoked", "draft"])
def test_a_passport_that_is_not_active_denies_everything(tmp_path: Path, status: str) -> None:
    rules = [{"id": "allow-all", "match": {"tool": "*"}, "effect": "allow"}]
    guard = passport_guard(tmp_path, rules=rules, status=status)
    for tool, args in (("bash", {"command": "git status"}), ("read_file", {"path": "/work/a"}),
                       ("deploy", {}), ("anything_else", {"x": 1})):
        decision = guard.check(tool, args)
        assert decision.effect.value == "deny", tool
        assert oap_code(decision.rule) == "oap.passport_suspended"
        assert f"is {status}" in decision.message


def test_suspending_the_passport_takes_effect_on_reload(tmp_path: Path) -> None:
    guard = passport_guard(tmp_path)
    assert shell(guard, "git status") == ("allow", None)
    assert str(tmp_path / "passport.json") in guard.loaded.files
    (tmp_path / "passport.json").write_text(json.dumps({**PASSPORT, "status": "suspended"}))
    reloaded = Guard.from_file(tmp_path / "policy.yaml")
    assert shell(reloaded, "git status") == ("deny", "oap.passport_suspended")


# -- a broken passport is a broken policy ---------------------------------------------------

@pytest.mark.parametrize(("change", "expected"), [
    ({"spec_version": "oap/2.0"}, "spec_version: 'oap/1.0' was expected"),
    ({"capabilities": [{"id": "System.Exec"}]}, "capabilities/0/id: 'System.Exec' does not match"),
    ({"status": "paused"}, "status: 'paused' is not one of"),
    ({"passport_id": "not-a-uuid"}, "passport_id: 'not-a-uuid' is not a 'uuid'"),
    ({"surprise": True}, "Additional properties are not allowed ('surprise' was unexpected)"),
])
def test_a_passport_that_breaks_the_schema_is_refused(tmp_path: Path, change: dict[str, Any],
                                                      expected: str) -> None:
    with pytest.raises(PolicyError) as caught:
        passport_guard(tmp_path, **change)
    text = str(caught.value)
    assert expected in text
    assert "policy.yaml" in text and "'oap:passport.json'" in text


def test_a_missing_field_is_named(tmp_path: Path) -> None:
    passport = {k: v for k, v in PASSPORT.items() if k != "owner_id"}
    (tmp_path / "passport.json").write_text(json.dumps(passport))
    (tmp_path / "policy.yaml").write_text("version: 1\nextends: oap:passport.json\n")
    with pytest.raises(PolicyError, match="'owner_id' is a required property"):
        Guard.from_file(tmp_path / "policy.yaml")


@pytest.mark.parametrize(("content", "expected"), [
    (None, "cannot read the passport"),
    ("{not json", "the passport is not JSON"),
    ("[1, 2]", "is not of type 'object'"),
])
def test_an_unreadable_passport_is_refused(tmp_path: Path, content: str | None,
                                           expected: str) -> None:
    if content is not None:
        (tmp_path / "passport.json").write_text(content)
    (tmp_path / "policy.yaml").write_text("version: 1\nextends: [oap:passport.json]\n")
    with pytest.raises(PolicyError, match=expected):
        Guard.from_file(tmp_path / "policy.yaml")


def test_limits_callwarden_does_not_enforce_are_reported_by_lint(tmp_path: Path) -> None:
    passport_guard(tmp_path)  # data.file.read has max_file_size
    lint = subprocess.run([sys.executable, "-m", "callwarden", "lint",
                           str(tmp_path / "policy.yaml")], capture_output=True, text=True,
                          timeout=120)
    assert lint.returncode == 0, lint.stderr
    assert "limits.data.file.read: max_file_size not enforced by callwarden" in lint.stdout


def test_the_readme_example_runs() -> None:
    text = README.read_text()
    block = text.split("\n## Open Agent Passports (OAP)\n", 1)[1].split("```python\n", 1)[1]
    exec(compile(block.split("```", 1)[0], "README.md ## Open Agent Passports (OAP)", "exec"),
         {"__name__": "__main__"})


def test_a_limit_of_another_capability_is_a_note_not_enforced_silently(tmp_path: Path) -> None:
    capabilities = [{"id": "system.command.execute"}, {"id": "web.fetch"}]
    limits = {"web.fetch": {"blocked_patterns": ["rm -rf"], "allowed_domains": ["*"]}}
    passport_guard(tmp_path, capabilities=capabilities, limits=limits)
    lint = subprocess.run([sys.executable, "-m", "callwarden", "lint",
                           str(tmp_path / "policy.yaml")], capture_output=True, text=True,
                          timeout=120)
    assert "limits.web.fetch: blocked_patterns not enforced by callwarden" in lint.stdout
    # ... and a shell command is not judged by a web limit
    guard = Guard.from_file(tmp_path / "policy.yaml")
    assert shell(guard, "rm -rf build") == ("allow", None)
