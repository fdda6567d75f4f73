"""Program names and flags are canonicalized whatever the spelling."""

from __future__ import annotations

import pytest
from _shell_support import only

from callwarden.analysis.shell import analyze_command


@pytest.mark.parametrize("command", [
    "rm -rf /", "/bin/rm -rf /", "/usr/bin/rm -rf /", "\\rm -rf /", "r''m -rf /", '"r"m -rf /',
    "r\\m -rf /", "$'\\x72\\x6d' -rf /", "$'\\162\\155' -rf /", "r$()m -rf /", "r``m -rf /",
    "r$@m -rf /", "{rm,-rf,/}", "rm${IFS}-rf${IFS}/", "a=r;b=m;$a$b -rf /",
    "x=$(echo rm); $x -rf /", "$(printf 'rm') -rf /",
])
def test_program_spellings_canonicalize_to_rm(command: str) -> None:
    analysis = analyze_command(command)
    rm = [c for c in analysis.commands if c.program == "rm"]
    assert len(rm) == 1
    assert rm[0].flags == {"recursive", "force"}
    assert rm[0].positionals == ("/",)


@pytest.mark.parametrize("command", [
    "rm -rf x", "rm -fr x", "rm -r -f x", "rm -Rf x", "rm -R -f x", "rm --recursive --force x",
    "rm --force -r x", "rm -rf -- x",
])
def test_recursive_force_spellings_are_equivalent(command: str) -> None:
    assert only(command).flags == {"recursive", "force"}


def test_git_push_short_force_is_force() -> None:
    assert only("git push -f origin main").flags == {"force"}


def test_git_force_with_lease_is_not_force() -> None:
    assert only("git push --force-with-lease origin main").flags == {"force-with-lease"}


def test_git_subcommand_and_positionals() -> None:
    cmd = only("git -C repo push origin main")
    assert (cmd.subcommand, cmd.positionals) == ("push", ("push", "origin", "main"))


def test_git_clean_cluster_keeps_case() -> None:
    assert only("git clean -ffdx").flags == {"force", "d", "x"}


def test_tar_old_style_bundle() -> None:
    cmd = only("tar czf out.tgz src")
    assert cmd.flags == {"create", "gzip", "file"} and cmd.option_values("file") == ("out.tgz",)


def test_curl_cluster_with_value_option() -> None:
    cmd = only("curl -fsSLo out.sh https://x")
    assert cmd.flags == {"fail", "silent", "show-error", "location", "output"}
    assert cmd.option_values("output") == ("out.sh",)


def test_dd_operands_are_options() -> None:
    cmd = only("dd if=/dev/zero of=/dev/sda bs=1M")
    assert cmd.option_values("of") == ("/dev/sda",)


def test_chmod_mode_with_dash_is_an_operand() -> None:
    cmd = only("chmod -x script.sh")
    assert cmd.positionals == ("-x", "script.sh") and not cmd.flags


def test_find_single_dash_options_are_whole_words() -> None:
    assert analyze_command("find ~ -type f -delete").commands[0].flags == {"type", "delete"}


def test_terraform_single_dash_long_option() -> None:
    cmd = only("terraform destroy -auto-approve")
    assert cmd.subcommand == "destroy" and cmd.flags == {"auto-approve"}


def test_kubectl_flags_anywhere() -> None:
    cmd = only("kubectl -n prod delete ns production")
    assert cmd.option_values("namespace") == ("prod",)
    assert cmd.positionals == ("delete", "ns", "production")


def test_home_expansion_with_a_home() -> None:
    cmd = only("rm -rf ~ $HOME ${HOME}/x ~/y", home="/home/dev")
    assert cmd.positionals == ("/home/dev", "/home/dev", "/home/dev/x", "/home/dev/y")


def test_home_kept_as_tilde_without_a_home() -> None:
    assert only("cat $HOME/.aws/credentials").positionals == ("~/.aws/credentials",)


def test_home_first_character_is_a_slash() -> None:
    assert only("rm -rf ${HOME:0:1}").positionals == ("/",)


def test_brace_expansion_in_arguments() -> None:
    assert only("cp file{,.bak}").positionals == ("file", "file.bak")


def test_brace_sequence() -> None:
    assert only("echo {1..3}").positionals == ("1", "2", "3")


def test_quoted_braces_are_literal() -> None:
    assert only("echo '{a,b}'").positionals == ("{a,b}",)


def test_quoted_ifs_does_not_split() -> None:
    assert only('echo "a${IFS}b"').positionals == ("a \t\nb",)


def test_unknown_variable_argument_keeps_its_text() -> None:
    assert only("chown -R $USER:$USER ./data").positionals == ("$USER:$USER", "./data")


def test_python_version_uses_python_table() -> None:
    assert only("python3.11 -c 'print(1)'").option_values("command") == ("print(1)",)
