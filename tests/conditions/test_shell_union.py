"""``ShellMatcher.union``: one condition for the deny patterns of many (``Bash(...)``
permission strings), finding nothing exactly when none of them would."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callwarden._call import ToolCall
from callwarden._profiles import ToolProfile
from callwarden.conditions.base import CompileEnv, Subject
from callwarden.conditions.shell import ShellMatcher

DATA = Path(__file__).parents[1] / "data"
PATTERNS = ["rm -rf *", "git push --force *", "git push *", "curl * | {sh,bash}", "mkfs *",
            "dd if=* of=/dev/*", "chmod -R 777 *", "sudo *", "find * -delete", "kill -9 *",
            "docker rm *", "python* -c *", "wget *", "rm -r /*", "git reset --hard *",
            "npm publish *", "base64 -d * | sh", "nc *", "shred *", "ls *"]
BASH = ToolProfile("bash", kind="shell", args={"command": "command"})


def _commands() -> list[str]:
    found: list[str] = []
    for name in ("bash_destructive.tsv", "bash_benign.tsv"):
        lines = [ln for ln in (DATA / name).read_text("utf-8").splitlines()
                 if ln and not ln.startswith("#")]
        found += [ln.split("\t")[2] for ln in lines[1:]][::3]  # every third row: the suite's time
    return found


COMMANDS = [*_commands(), "echo 'unterminated", "eval \"$X\""]


@settings(max_examples=25, deadline=None, derandomize=True)
@given(chosen=st.lists(st.sampled_from(PATTERNS), min_size=2, max_size=6, unique=True),
       opaque=st.booleans())
def test_a_union_finds_something_exactly_when_one_of_its_conditions_does(
        chosen: list[str], opaque: bool) -> None:
    members = [ShellMatcher({"deny": [p], "opaque": opaque}, CompileEnv()) for p in chosen]
    union = ShellMatcher.union(members)
    for command in COMMANDS:
        alone = [m(Subject(ToolCall("bash", {"command": command}), BASH)) for m in members]
        together = union(Subject(ToolCall("bash", {"command": command}), BASH))
        assert (together is None) == all(hit is None for hit in alone), (command, chosen)


@pytest.mark.parametrize("config", [
    {"deny": ["rm -rf *"], "allow": ["ls *"]},
    {"deny": ["rm -rf *"], "reads": ["~/.ssh/**"]},
    {"deny": ["rm -rf *"], "deletes_outside": ["."]},
    {"rules": [{"program": "rm", "flags": ["r"]}]},
])
def test_a_condition_judging_more_than_its_deny_patterns_has_no_group(
        config: dict[str, Any]) -> None:
    assert ShellMatcher(config, CompileEnv()).group_key is None


def test_conditions_of_other_settings_are_not_one_group() -> None:
    plain = ShellMatcher({"deny": ["rm -rf *"]}, CompileEnv())
    assert plain.group_key == ShellMatcher({"deny": ["mkfs *"]}, CompileEnv()).group_key
    for config in ({"opaque": "deny"}, {"parse_error": "allow"}, {"home": "/home/ops"},
                   {"cwd": "/srv"}):
        other = ShellMatcher({"deny": ["mkfs *"], **config}, CompileEnv())
        assert other.group_key != plain.group_key
        with pytest.raises(ValueError, match="group_key"):
            ShellMatcher.union([plain, other])
