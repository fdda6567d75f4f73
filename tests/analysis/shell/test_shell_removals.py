"""What a command deletes or empties, which environment variables it shows, and the
``shell:`` options judging them: ``deletes_outside``, ``empties``, ``reveals_env``."""

from __future__ import annotations

import pytest

from callwarden.analysis.shell import analyze_command
from callwarden.analysis.shell._model import UNKNOWN_OPERAND
from callwarden.conditions.base import CompileEnv, ConfigError
from callwarden.conditions.shell import ShellMatcher

HOME = "/home/dev"
ROOT = "/home/dev/project"
ENV = CompileEnv(options={"project_root": ROOT, "cwd": ROOT, "home": HOME})


def analyze(command: str):  # type: ignore[no-untyped-def]
    return analyze_command(command, home=HOME, cwd=ROOT)


# ------------------------------------------------------------------------------ the analysis

@pytest.mark.parametrize(("command", "deletes"), [
    ("rm -rf /home/alice/project2", ("/home/alice/project2",)),
    ("rm -rf ../other", ("/home/dev/other",)),
    ("rm notes.txt", (f"{ROOT}/notes.txt",)),
    ("cd /opt/app && rm -rf releases", ("/opt/app/releases",)),
    ("find /srv/data -name '*.db' -delete", ("/srv/data/**/*.db",)),
    ("find . -type d -empty -delete", (f"{ROOT}/**",)),
    ("rm -rf build/**", (f"{ROOT}/build/*",)),
    ("rsync -a --delete src/ /var/www/", ("/var/www/**",)),
    ("shred -u ~/.bash_history", ("/home/dev/.bash_history",)),
    ("ls | xargs rm -f", (f"{ROOT}/{UNKNOWN_OPERAND}",)),
    ("tmp=$(mktemp -d) && rm -rf \"$tmp\"", ("/tmp/tmp.XXXXXXXXXX",)),
    ("rm -rf \"$DIR\"", ("$DIR",)),
])
def test_deleted_paths_are_recorded_normalized(command: str, deletes: tuple[str, ...]) -> None:
    assert analyze(command).deletes == deletes


@pytest.mark.parametrize(("command", "empties"), [
    ("> important.txt", (f"{ROOT}/important.txt",)),
    (": > src/main.py", (f"{ROOT}/src/main.py",)),
    ("true > a; cat /dev/null > b", (f"{ROOT}/a", f"{ROOT}/b")),
    ("truncate -s 0 file", (f"{ROOT}/file",)),
    ("truncate --size=-1K file", (f"{ROOT}/file",)),
    ("cp /dev/null README.md", (f"{ROOT}/README.md",)),
    ("truncate -s 1G disk.img", ()),
    ("truncate -s +1M disk.img", ()),
    ("echo x > out.txt", ()),
    (">> log.txt", ()),
])
def test_emptied_files_are_recorded(command: str, empties: tuple[str, ...]) -> None:
    assert analyze(command).empties == empties


@pytest.mark.parametrize(("command", "names"), [
    ("echo $AWS_SECRET_ACCESS_KEY", ("AWS_SECRET_ACCESS_KEY",)),
    ("echo \"token: ${GITHUB_TOKEN:0:4}\"", ("GITHUB_TOKEN",)),
    ("printf '%s\\n' \"$OPENAI_API_KEY\"", ("OPENAI_API_KEY",)),
    ("printenv HOME PATH", ("HOME", "PATH")),
    ("env", ("*",)),
    ("export -p", ("*",)),
    ("declare -p X", ("X",)),
    ("env | grep -i python", ("*python*",)),
    ("printenv | grep -E '^(NODE|NPM)_'", ("*",)),
    ("env | grep -E 'NODE_|NPM_'", ("*NODE_*", "*NPM_*")),
    ("env | grep -v PATH", ("*",)),
    ("env | sort", ("*",)),
    ("env | grep -c TOKEN", ()),
    ("X=1; echo $X", ()),
    ("curl -H \"Authorization: Bearer $TOKEN\" https://api.example.com", ()),
])
def test_environment_variables_shown_are_recorded(command: str, names: tuple[str, ...]) -> None:
    assert analyze(command).environment == names


# ----------------------------------------------------------------------- the shell: options

def outside(command: str, roots: list[str] | None = None) -> str | None:
    matcher = ShellMatcher({"deletes_outside": roots or [".", "/tmp"]}, ENV)
    hit = matcher.check(analyze(command))
    return None if hit is None else hit.code


@pytest.mark.parametrize("command", [
    "rm -rf /home/alice/project2", "rm -rf ../other", "rm -r /var/lib/postgresql",
    "rm ~/notes.txt", "find / -name '*.log' -delete", "rm -rf \"$DIR\"", "rm -rf build/$X",
    "ls | xargs rm -f", "cd .. && rm -rf project", "rm -rf /tmp", "rm -rf /tmp/*",
    "rm -rf *", "rm -rf .*", "truncate -s 0 /var/log/auth.log",
    "d=$(mktemp -d -p /var/lib); rm -rf \"$d\"",
])
def test_deleting_outside_the_roots_is_a_hit(command: str) -> None:
    assert outside(command) == "shell.deletes_outside"


@pytest.mark.parametrize("command", [
    "rm -rf build/ dist/", "rm -rf node_modules", "rm -rf build/*", "rm -rf *.egg-info",
    "find . -name '*.pyc' -delete", "find . -type d -empty -delete", "rm -f /tmp/x.json",
    "cd /tmp && rm -rf build", "rm -rf \"$(mktemp -d)\"", "truncate -s 0 logs/app.log",
    "rm -rf ~/project/build",
])
def test_deleting_strictly_inside_the_roots_is_not_a_hit(command: str) -> None:
    assert outside(command) is None


def test_roots_may_name_the_home_directory() -> None:
    assert outside("rm -rf ~/.cache/pip", [".", "~/.cache"]) is None


def test_the_filesystem_root_and_the_home_directory_are_never_delete_roots() -> None:
    matcher = ShellMatcher({"deletes_outside": ["/", "~"]}, ENV)
    hit = matcher.check(analyze("rm -rf /srv/x"))
    assert hit is not None and "/ or the home directory" in hit.detail


def test_without_a_cwd_relative_paths_start_at_the_workspace_root() -> None:
    env = CompileEnv(options={"project_root": ROOT})
    matcher = ShellMatcher({"deletes_outside": ["."]}, env)
    assert matcher.check(analyze_command("rm -rf build")) is None
    assert matcher.check(analyze_command("rm -rf ../../x")) is not None


@pytest.mark.parametrize("config", [
    {"deletes_outside": ["/tmp/*"]}, {"deletes_outside": ["$TMPDIR"]},
    {"deletes_outside": [""]}, {"empties": "yes"},
    {"empties": {"deny": ["x"]}}, {"reveals_env": [1]}, {"reveals_env": ["[a"]},
])
def test_bad_removal_and_environment_options_are_config_errors(config: dict) -> None:
    with pytest.raises(ConfigError):
        ShellMatcher(config, ENV)


def test_empties_true_makes_every_emptied_file_a_hit() -> None:
    hit = ShellMatcher({"empties": True}, ENV).check(analyze("truncate -s 0 logs/app.log"))
    assert hit is not None and hit.code == "shell.empties"


def test_empties_allow_globs_spare_the_files_they_name() -> None:
    matcher = ShellMatcher({"empties": {"allow": ["**/*.log"]}}, ENV)
    assert matcher.check(analyze("truncate -s 0 logs/app.log")) is None
    assert matcher.check(analyze("> important.txt")) is not None


@pytest.mark.parametrize(("command", "hit"), [
    ("printenv AWS_SECRET_ACCESS_KEY", True), ("echo $github_token", True), ("env", True),
    ("env | grep -i token", True), ("env | grep AWS", True), ("env | grep e", True),
    ("echo $PATH", False), ("printenv HOME", False), ("env | grep -i python", False),
    ("env | grep ^NODE_", False),
])
def test_reveals_env_judges_names_dumps_and_filters(command: str, hit: bool) -> None:
    matcher = ShellMatcher({"reveals_env": ["*TOKEN*", "*SECRET*", "AWS_SECRET_ACCESS_KEY"]}, ENV)
    found = matcher.check(analyze(command))
    assert (found is not None and found.code == "shell.reveals_env") is hit
