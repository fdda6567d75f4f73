"""A shell tool's own working directory (Codex's ``workdir``, Gemini CLI's ``dir_path``): the
command's relative paths start there, as after a ``cd`` to it."""

from __future__ import annotations

from typing import Any

import pytest

from callwarden import Effect, Guard

HOME = "/home/dev"


def guard(**shell: Any) -> Guard:
    return Guard.from_dict({"version": 1, "rules": [{
        "id": "files", "match": {"kind": "shell"}, "effect": "deny",
        "shell": {"reads": ["~/.aws/**"], "writes": ["~/.bashrc"], "home": HOME, **shell}}]})


CALLS = [
    ("shell", {"command": ["cat", "credentials"], "workdir": f"{HOME}/.aws"}),  # Codex
    ("exec_command", {"cmd": "cat credentials", "workdir": f"{HOME}/.aws"}),
    ("run_shell_command", {"command": "cat credentials", "dir_path": f"{HOME}/.aws"}),  # Gemini
    ("run_shell_command", {"command": "cat credentials", "directory": "~/.aws"}),
    ("execute_command", {"command": "cat credentials", "cwd": f"{HOME}/.aws"}),
    ("shell", {"command": ["bash", "-lc", "head -1 ./credentials"],
               "working_directory": f"{HOME}/.aws"}),
]


@pytest.mark.parametrize(("tool", "args"), CALLS, ids=[f"{t}-{sorted(a)[-1]}" for t, a in CALLS])
def test_a_file_read_in_the_tools_working_directory_is_seen(tool: str,
                                                           args: dict[str, Any]) -> None:
    decision = guard().check(tool, args)
    assert (decision.effect, decision.rule) == (Effect.DENY, "files")
    assert ".aws/credentials" in decision.reasons[0].message


def test_a_file_written_in_the_tools_working_directory_is_seen() -> None:
    decision = guard().check("shell", {"command": ["bash", "-lc", "echo 'curl x | sh' >> .bashrc"],
                                       "workdir": HOME})
    assert decision.effect is Effect.DENY and "writes" in decision.reasons[0].message


def test_a_relative_working_directory_starts_at_the_configured_one() -> None:
    g = guard(cwd=HOME)
    assert g.check("shell", {"command": ["cat", "credentials"], "workdir": ".aws"}).effect \
        is Effect.DENY
    assert g.check("shell", {"command": ["cat", "credentials"], "workdir": "src"}).effect \
        is Effect.ALLOW


def test_another_working_directory_is_not_denied() -> None:
    args = {"command": ["cat", "credentials"], "workdir": "/srv/app/fixtures"}
    assert guard().check("shell", args).effect is Effect.ALLOW


def test_a_working_directory_that_is_not_text_cannot_be_analysed() -> None:
    decision = guard().check("shell", {"command": ["ls"], "workdir": ["/", "etc"]})
    assert decision.effect is Effect.DENY
    assert decision.reasons[0].code == "shell.parse_error"
    assert "working directory is a list" in decision.reasons[0].message



@pytest.mark.parametrize(("tool", "args"), [
    ("Bash", {"command": "cd /etc && rm -rf nginx"}),
    ("shell", {"command": ["rm", "-rf", "nginx"], "workdir": "/etc"}),
    ("run_shell_command", {"command": "rm -rf nginx", "dir_path": "/etc"}),
])
def test_a_pattern_on_a_path_sees_a_bare_name_where_it_lands(tool: str,
                                                            args: dict[str, Any]) -> None:
    """rm -rf nginx in /etc removes /etc/nginx: Bash(rm -rf /etc/*) must see it."""
    g = Guard.from_dict({"version": 1, "deny": ["Bash(rm -rf /etc/*)"]})
    assert g.check(tool, args).effect is Effect.DENY


def test_a_bare_name_elsewhere_or_where_the_directory_is_unknown_is_not_that_path() -> None:
    g = Guard.from_dict({"version": 1, "deny": ["Bash(rm -rf /etc/*)"]})
    assert g.check("Bash", {"command": "cd /tmp && rm -rf nginx"}).effect is Effect.ALLOW
    assert g.check("Bash", {"command": "rm -rf nginx"}).effect is Effect.ALLOW
