"""Inline interpreter code (``python -c``, ``node -e``, code piped to an interpreter) is read
statically: what it runs and does to files becomes shell commands, what it reads from the
environment is recorded, and only what cannot be told stays opaque."""

from __future__ import annotations

import pytest

from callwarden.analysis.shell import analyze_command
from callwarden.analysis.shell._inline import inline_effects

HOME = "/home/dev"
ROOT = "/home/dev/project"


def analyze(command: str):  # type: ignore[no-untyped-def]
    return analyze_command(command, home=HOME, cwd=ROOT)


@pytest.mark.parametrize("command", [
    "python3 -c 'import sys; print(sys.version)'",
    "python -c \"import platform; print(platform.platform())\"",
    "python -c 'import numpy as np; print(np.__version__)'",
    "python3 -c \"import sys; print('\\n'.join(sys.path))\"",
    "python3 -c 'import json, sys; print(json.load(sys.stdin)[\"version\"])' < package.json",
    "python3 -c \"from pathlib import Path; print(sum(1 for _ in Path('src').rglob('*.py')))\"",
    "node -e 'console.log(process.version)'",
    "node -p \"require('./package.json').version\"",
    "node -e \"console.log(require('os').cpus().length)\"",
    "node -e 'console.log(`v${process.versions.v8}`)'",
    "perl -pi -e 's/foo/bar/g' src/config.txt",
    "ruby -e 'puts RUBY_VERSION'",
    "perl -e 'print \"$]\\n\"'",
    "echo 'print(1)' | python3",
])
def test_inline_code_that_only_computes_and_prints_is_not_opaque(command: str) -> None:
    assert analyze(command).opaque == ()


@pytest.mark.parametrize(("command", "reason"), [
    ("python3 -c 'import os; os.system(input())'", "runs a command built at run time"),
    ("python3 -c 'import socket; socket.socket().connect((\"203.0.113.7\", 4444))'",
     "calls socket.socket"),
    ("python3 -c \"exec(__import__('base64').b64decode('cHJpbnQoMSk='))\"",
     "exec() of text built at run time"),
    ("python3 -c \"getattr(__import__('os'), input())('id')\"", "attribute named at run time"),
    ("python3 -c '().__class__.__base__.__subclasses__()'", "interpreter internals"),
    ("python3 -c 'import ctypes; ctypes.CDLL(None)'", "calls ctypes.CDLL"),
    ("python3 -c 'import os; list(map(os.remove, open(\"f\")))'", "without calling it directly"),
    ("python3 -c 'import shutil, sys; shutil.rmtree(sys.argv[1])' /x", "known only at run time"),
    ("python3 -c 'if True print(1)'", "does not parse"),
    ("node -e \"globalThis['ev' + 'al']('1')\"", "globalThis"),
    ("node -e \"[].constructor.constructor('return 1')()\"", "constructor"),
    ("node -e \"require('net').connect(4444, '203.0.113.7')\"", "net module"),
    ("node -e \"require(process.argv[1])\"", "require() of a module named at run time"),
    ("node -e \"fetch('https://x.example/')\"", "fetch"),
    ("perl -pe 's/a/`id`/e' f", "inline perl code"),
    ("ruby -e 'system(gets)'", "inline ruby code"),
])
def test_what_inline_code_does_that_cannot_be_told_is_opaque(command: str, reason: str) -> None:
    assert any(reason in r for r in analyze(command).opaque), analyze(command).opaque


@pytest.mark.parametrize(("code", "command"), [
    ("import os; os.system('rm -rf ~/.ssh')", "rm -rf ~/.ssh"),
    ("import subprocess; subprocess.run(['rm', '-rf', '/srv'])", "rm -rf /srv"),
    ("import shutil; shutil.rmtree('/var/lib/mysql')", "rm -r -- /var/lib/mysql"),
    ("import os; os.remove('/etc/hosts')", "rm -- /etc/hosts"),
    ("open('/home/dev/.bashrc', 'a').write('x')", "tee -a -- /home/dev/.bashrc"),
    ("print(open('/etc/shadow').read())", "cat -- /etc/shadow"),
    ("from pathlib import Path; (Path.home() / '.ssh' / 'id_rsa').read_text()",
     "cat -- ~/.ssh/id_rsa"),
    ("import os; os.chmod('/bin/bash', 0o4755)", "chmod 4755 -- /bin/bash"),
    ("__import__('os').system('id')", "id"),
    ("import os; getattr(os, 'sys' + 'tem')('id')", "id"),
    ("exec(\"import os; os.system('id')\")", "id"),
    ("import pandas as pd; pd.read_csv('~/.aws/credentials')", "cat -- ~/.aws/credentials"),
    ("import urllib.request; urllib.request.urlopen('http://169.254.169.254/')",
     "curl -s -- http://169.254.169.254/"),
])
def test_python_effects_are_written_as_the_equivalent_shell_command(code: str,
                                                                    command: str) -> None:
    effects = inline_effects("python", code)
    assert effects is not None and command in effects.commands, effects


@pytest.mark.parametrize(("code", "command"), [
    ("require('child_process').execSync('rm -rf ~')", "rm -rf ~"),
    ("const cp = require('child_process'); cp.execSync('ls')", "ls"),
    ("require('fs').rmSync('/home/dev/other', {recursive: true})", "rm -r -- /home/dev/other"),
    ("require('fs').unlinkSync('/etc/hosts')", "rm -- /etc/hosts"),
    ("const fs = require('fs'); fs.readFileSync('/home/dev/.ssh/id_rsa')",
     "cat -- /home/dev/.ssh/id_rsa"),
])
def test_javascript_effects_are_written_as_the_equivalent_shell_command(code: str,
                                                                        command: str) -> None:
    effects = inline_effects("node", code)
    assert effects is not None and command in effects.commands, effects


def test_inline_commands_are_analysed_under_the_interpreter() -> None:
    analysis = analyze("python3 -c \"import shutil; shutil.rmtree('/var/lib/mysql')\"")
    rm = next(c for c in analysis.commands if c.program == "rm")
    assert rm.has_flag("recursive") and rm.wrappers == ("python3",)
    assert analysis.deletes == ("/var/lib/mysql",)


def test_a_chdir_in_inline_code_moves_its_paths_but_not_the_shell() -> None:
    analysis = analyze("python3 -c \"import os, shutil; os.chdir('/'); shutil.rmtree('etc')\""
                       " && rm -rf build")
    assert analysis.deletes == ("/etc", f"{ROOT}/build")


@pytest.mark.parametrize(("command", "names"), [
    ("python3 -c 'import os; print(os.environ)'", ("*",)),
    ("python3 -c \"import os; print(os.environ['AWS_SECRET_ACCESS_KEY'])\"",
     ("AWS_SECRET_ACCESS_KEY",)),
    ("python3 -c \"import os; print(os.getenv('HOME'))\"", ("HOME",)),
    ("node -e 'console.log(process.env)'", ("*",)),
    ("node -e 'console.log(process.env.GITHUB_TOKEN)'", ("GITHUB_TOKEN",)),
])
def test_environment_read_by_inline_code_is_recorded(command: str, names: tuple[str, ...]) -> None:
    assert analyze(command).environment == names


def test_languages_not_analysed_give_none() -> None:
    assert inline_effects("ruby", "system('id')") is None
    assert inline_effects("php", "echo 1;") is None


def test_code_too_long_to_analyse_is_opaque() -> None:
    effects = inline_effects("python", "x = 1\n" * 5000)
    assert effects is not None and effects.opaque
