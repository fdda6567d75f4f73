"""The analysis API: immutable results, caching, input limits."""

from __future__ import annotations

import dataclasses

import pytest

import callwarden.analysis.shell as shell_pkg
from callwarden.analysis.shell import _analysis, analyze_command, clear_cache
from callwarden.analysis.shell._parse import MAX_COMMAND_LENGTH


def test_analysis_is_immutable() -> None:
    analysis = analyze_command("ls")
    with pytest.raises(dataclasses.FrozenInstanceError):
        analysis.commands = ()  # type: ignore[misc]


def test_simple_command_is_immutable() -> None:
    cmd = analyze_command("ls").commands[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        cmd.program = "rm"  # type: ignore[misc]


def test_repeated_command_is_not_reparsed(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_cache()
    calls = []
    real = _analysis.analyze_uncached
    monkeypatch.setattr(_analysis, "analyze_uncached",
                        lambda *a: calls.append(a) or real(*a))
    first = analyze_command("git status --short")
    second = analyze_command("git status --short")
    assert first is second and len(calls) == 1


def test_cache_is_keyed_by_home_and_cwd() -> None:
    a = analyze_command("cat ~/x", home="/home/a")
    b = analyze_command("cat ~/x", home="/home/b")
    assert a.reads != b.reads


def test_too_long_command_is_a_parse_error() -> None:
    analysis = analyze_command("x" * (MAX_COMMAND_LENGTH + 1))
    assert analysis.parse_error is not None and "too long" in analysis.parse_error


def test_syntax_error_is_reported() -> None:
    assert analyze_command("if then fi (").parse_error is not None


def test_empty_substitution_is_not_a_syntax_error() -> None:
    assert analyze_command("r$()m -rf /").parse_error is None


def test_command_starting_with_brace_expansion_parses() -> None:
    analysis = analyze_command("git status && {rm,-rf,/}")
    assert analysis.parse_error is None and analysis.commands[-1].program == "rm"


def test_invalid_utf8_bytes_are_a_parse_error() -> None:
    assert analyze_command(b"\xff").parse_error == "command is not valid UTF-8"


def test_lone_surrogates_do_not_crash() -> None:
    assert analyze_command("echo \udcff").commands[0].program == "echo"


def test_nul_bytes_do_not_crash() -> None:
    assert analyze_command("echo a\x00b").source == "echo a\x00b"


def test_programs_summary() -> None:
    assert analyze_command("ls | grep x && sudo rm y").programs == {"ls", "grep", "rm"}


def test_all_is_sorted_and_complete() -> None:
    exported = shell_pkg.__all__
    assert list(exported) == sorted(exported)
    assert all(hasattr(shell_pkg, name) for name in exported)


@pytest.mark.parametrize("command", [
    "$(" * 3000 + ")" * 3000,
    "a=x;" + "a=$a$a;" * 3000 + "echo $a",
    "echo " + "{" * 10000 + "a,b" + "}" * 10000,
    "echo " + "{a,b}" * 10000,
    "printf '%999999999s' x | bash",
    "a|" * 20000 + "b",
    "eval " * 10000 + "ls",
    "x=" + "y" * 60000 + "; echo ${x%%z*}",
])
def test_adversarial_command_returns_an_analysis(command: str) -> None:
    analysis = analyze_command(command)
    assert analysis.parse_error is not None or analysis.commands or analysis.opaque


def test_budget_exhaustion_is_opaque() -> None:
    assert "command too complex to analyse fully" in analyze_command("$(" * 3000 + ")" * 3000).opaque


def test_opaque_reasons_are_short() -> None:
    analysis = analyze_command("$" * 60000)
    assert all(len(reason) <= 200 for reason in analysis.opaque)
