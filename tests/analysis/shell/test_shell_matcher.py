"""The ``shell:`` rule condition."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from callwarden.analysis.shell import analyze_command
from callwarden.conditions.base import CompileEnv, ConfigError, Subject, get_condition
from callwarden.conditions.shell import ShellMatcher, shell_analysis

Make = Callable[..., Subject]


def test_denied_command_is_a_hit(subject: Make) -> None:
    hit = ShellMatcher({"deny": ["rm -r *"]})(subject("sudo rm -Rf /"))
    assert hit is not None and hit.code == "shell.denied" and "rm -r *" in hit.detail


def test_allowed_command_is_not_a_hit(subject: Make) -> None:
    assert ShellMatcher({"deny": ["rm -r *"]})(subject("rm build.log")) is None


def test_command_outside_allow_list_is_a_hit(subject: Make) -> None:
    hit = ShellMatcher({"allow": ["git log *", "ls *"]})(subject("ls && curl https://x"))
    assert hit is not None and hit.code == "shell.not_allowed" and "curl" in hit.detail


def test_command_inside_allow_list_is_not_a_hit(subject: Make) -> None:
    assert ShellMatcher({"allow": ["git log *", "ls *"]})(subject("ls -la; git log")) is None


def test_opaque_command_is_a_hit_when_configured(subject: Make) -> None:
    hit = ShellMatcher({"opaque": "deny"})(subject("echo cm0= | base64 -d | sh"))
    assert hit is not None and hit.code == "shell.opaque"


def test_opaque_command_is_not_a_hit_by_default(subject: Make) -> None:
    assert ShellMatcher({"deny": ["mkfs *"]})(subject("$cmd x")) is None


def test_unparseable_command_fails_closed(subject: Make) -> None:
    hit = ShellMatcher({"deny": ["rm -r *"]})(subject("echo 'unterminated"))
    assert hit is not None and hit.code == "shell.parse_error"


def test_parse_error_can_be_ignored(subject: Make) -> None:
    matcher = ShellMatcher({"deny": ["rm -r *"], "parse_error": "allow"})
    assert matcher(subject("echo 'unterminated")) is None


@pytest.mark.parametrize("command", [None, 42, {"a": 1}, 3.5, b"\xff\xfe"])
def test_non_string_command_fails_closed(subject: Make, command: object) -> None:
    hit = ShellMatcher({"deny": ["rm -r *"]})(subject(command))
    assert hit is not None and hit.code == "shell.parse_error"


def test_argv_list_command_is_analysed(subject: Make) -> None:
    hit = ShellMatcher({"deny": ["rm -r *"]})(subject(["bash", "-lc", "rm -rf /"]))
    assert hit is not None and hit.code == "shell.denied"


def test_huge_command_returns_promptly_with_parse_error(subject: Make) -> None:
    start = time.monotonic()
    hit = ShellMatcher({"deny": ["rm -r *"]})(subject("a" * 10_000_000))
    assert hit is not None and hit.code == "shell.parse_error"
    assert time.monotonic() - start < 5  # a hang, not a benchmark, is what this guards


def test_deeply_nested_command_does_not_crash(subject: Make) -> None:
    command = "( " * 5000 + "ls" + " )" * 5000
    hit = ShellMatcher({"deny": ["rm -r *"], "opaque": "deny"})(subject(command))
    assert hit is not None


def test_many_brace_words_are_bounded() -> None:
    analysis = analyze_command(" ".join(["echo"] + ["{a,b}{c,d}{e,f}{g,h}{i,j}"] * 2000))
    assert any("too many words" in reason for reason in analysis.opaque)


def test_structured_rule(subject: Make) -> None:
    matcher = ShellMatcher({"rules": [{"program": "rm", "flags": ["r"], "args": ["/", "~"]}]})
    assert matcher(subject("rm -fr ~")) is not None and matcher(subject("rm -fr build")) is None


def test_structured_rule_not_flags(subject: Make) -> None:
    rule = {"program": "git", "subcommand": "clean", "any_flags": ["f"], "not_flags": ["n"]}
    matcher = ShellMatcher({"rules": [rule]})
    assert matcher(subject("git clean -fd")) is not None
    assert matcher(subject("git clean -fn")) is None


def test_structured_rule_option_values_ignore_case(subject: Make) -> None:
    rule = {"program": "psql", "options": {"c": ["*drop database*"]}, "ignore_case": True}
    matcher = ShellMatcher({"rules": [rule]})
    assert matcher(subject("psql -c 'DROP DATABASE prod;'")) is not None
    assert matcher(subject("psql -c 'SELECT 1'")) is None


def test_reads_glob_is_a_hit(subject: Make) -> None:
    matcher = ShellMatcher({"reads": ["~/.ssh/**", "!~/.ssh/*.pub"]})
    hit = matcher(subject("cat ~/.ssh/id_rsa"))
    assert hit is not None and "id_rsa" in hit.detail
    assert matcher(subject("cat ~/.ssh/id_rsa.pub")) is None


def test_reads_glob_catches_globbed_paths(subject: Make) -> None:
    assert ShellMatcher({"reads": ["~/.ssh/id_*"]})(subject("cat ~/.ss?/*")) is not None


def test_reads_glob_with_home(subject: Make) -> None:
    matcher = ShellMatcher({"reads": ["~/.aws/**"], "home": "/home/dev"})
    assert matcher(subject("cat $HOME/.aws/credentials")) is not None


def test_reads_glob_without_slash_matches_any_directory(subject: Make) -> None:
    assert ShellMatcher({"reads": [".env"]})(subject("cat app/.env")) is not None


def test_writes_glob_is_a_hit(subject: Make) -> None:
    hit = ShellMatcher({"writes": ["~/.bashrc"]})(subject("echo x >> ~/.bashrc"))
    assert hit is not None and hit.code == "shell.denied"


def test_analysis_is_memoized_per_call(subject: Make) -> None:
    s = subject("ls")
    assert shell_analysis(s) is shell_analysis(s)


def test_deny_takes_precedence_over_opaque(subject: Make) -> None:
    hit = ShellMatcher({"deny": ["rm -r *"], "opaque": "ask"})(
        subject("echo cm0gLXJmIH4= | base64 -d | bash"))
    assert hit is not None and hit.code == "shell.denied"


def test_home_from_compile_options(subject: Make) -> None:
    matcher = ShellMatcher({"deny": ["rm -r ~"]}, CompileEnv(options={"home": "/home/dev"}))
    assert matcher(subject("rm -rf /home/dev")) is not None


def test_condition_is_registered() -> None:
    import callwarden.analysis.shell  # noqa: F401

    assert get_condition("shell") is ShellMatcher


@pytest.mark.parametrize(("config", "key"), [
    ("rm -r *", None),
    ({}, None),
    ({"deny": "rm -r *", "colour": 1}, "colour"),
    ({"deny": [1]}, "deny"),
    ({"deny": ["rm 'x"]}, "deny"),
    ({"allow": ["curl * | sh"]}, "allow"),
    ({"opaque": "maybe"}, "opaque"),
    ({"rules": "rm"}, "rules"),
    ({"rules": [{"flags": ["r"]}]}, "rules[0]"),
    ({"rules": [{"program": "rm", "colour": 1}]}, "rules[0]"),
])
def test_bad_config_is_a_config_error(config: object, key: str | None) -> None:
    with pytest.raises(ConfigError) as info:
        ShellMatcher(config)
    assert info.value.key == key
