"""Named lists are usable by every condition through `{list: name}` references."""

from __future__ import annotations

from pathlib import Path

import pytest

from callwarden import Effect, Guard, PolicyError


@pytest.fixture
def guard(tmp_path: Path) -> Guard:
    (tmp_path / "blocked.txt").write_text("# hosts we never talk to\nevil.example\n*.bad.test\n")
    (tmp_path / "p.yaml").write_text("""
version: 1
lists:
  blocked: {file: blocked.txt}
  secrets_dirs: ["~/.vault/**", "/srv/keys/**"]
  dangerous: ["terraform destroy *", "dropdb *"]
  payees: [acme, globex]
rules:
  - id: egress
    match: {kind: http}
    urls: {deny_domains: [{list: blocked}], block_private: false}
  - id: vault
    match: {kind: [file.read, file.write]}
    paths: {deny: [{list: secrets_dirs}, "/etc/shadow"]}
  - id: infra
    match: {kind: shell}
    shell: {deny: [{list: dangerous}]}
  - id: payees
    match: {tool: pay}
    if: "!(args.to in lists.payees)"
    effect: ask
""")
    return Guard.from_file(tmp_path / "p.yaml")


@pytest.mark.parametrize(("tool", "args", "rule"), [
    ("fetch", {"url": "https://evil.example/x"}, "egress"),
    ("fetch", {"url": "https://a.bad.test/"}, "egress"),
    ("read_file", {"path": "/srv/keys/prod.pem"}, "vault"),
    ("read_file", {"path": "/etc/shadow"}, "vault"),
    ("bash", {"command": "sudo terraform destroy -auto-approve"}, "infra"),
])
def test_list_items_act_like_inline_items(guard: Guard, tool, args, rule) -> None:
    d = guard.check(tool, args)
    assert d.effect is Effect.DENY and d.rule == rule


def test_items_not_in_the_lists_pass(guard: Guard) -> None:
    assert guard.check("fetch", {"url": "https://docs.python.org/"}).allowed
    assert guard.check("bash", {"command": "terraform plan"}).allowed
    assert guard.check("pay", {"to": "acme"}).allowed
    assert guard.check("pay", {"to": "mallory"}).effect is Effect.ASK


def test_unknown_list_reference_is_a_policy_error() -> None:
    with pytest.raises(PolicyError, match="nope"):
        Guard.from_dict({"version": 1, "rules": [
            {"id": "x", "urls": {"deny_domains": [{"list": "nope"}]}}]})
