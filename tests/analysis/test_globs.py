"""The one glob dialect: the same pattern means the same thing in every condition that takes
globs, and a pattern no condition can read is a load error everywhere."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from callwarden import Guard, PolicyError
from callwarden.analysis.globs import (
    GlobError,
    GlobSet,
    GlobTable,
    check_glob,
    compile_glob,
    expand_braces,
    glob_intersects,
    is_glob,
)

# -- the dialect itself ----------------------------------------------------------------------


@pytest.mark.parametrize(("glob", "text", "expected"), [
    ("/etc/*", "/etc/shadow", True),
    ("/etc/*", "/etc/ssl/cert.pem", False),  # * keeps to one segment
    ("/etc/**", "/etc/ssl/cert.pem", True),  # ** crosses segments
    ("/etc/**", "/etc", True),  # a trailing /** also matches the directory itself
    ("/data/**/secret.txt", "/data/secret.txt", True),  # /**/ matches zero segments
    ("/data/**/secret.txt", "/data/a/b/secret.txt", True),
    ("/a/b**", "/a/bc/d", True),  # ** inside a segment crosses /
    ("/srv/data?.csv", "/srv/data1.csv", True),
    ("/srv/data?.csv", "/srv/data10.csv", False),
    ("/srv/data?", "/srv/data/", False),  # ? never matches /
    ("/srv/[a-c]*.log", "/srv/b1.log", True),
    ("/srv/[!a-c]*.log", "/srv/b1.log", False),
    ("/srv/[^a-c]*.log", "/srv/d1.log", True),
    ("/srv/[]x]", "/srv/]", True),  # ] first in a class is a member
    ("/etc/{passwd,shadow}", "/etc/shadow", True),
    ("/srv/{a,b/{c,d}}/x", "/srv/b/d/x", True),
    ("/srv/{a,b/{c,d}}/x", "/srv/b/x", False),
    ("/srv/{x}", "/srv/{x}", True),  # braces without a comma are literal
    ("/srv/[*]", "/srv/*", True),
    ("/srv/[*]", "/srv/a", False),
    ("/etc/Shadow", "/etc/shadow", False),  # case-sensitive
    ("*drop table*", "psql -h /tmp -c 'drop table x'", True),  # no / in the pattern: flat
    ("*", "/any/thing", True),
    ("release/*", "release/1.2", True),
    ("release/*", "release/2024/1", False),
    ("mcp__{github,gitlab}__*", "mcp__gitlab__create_issue", True),
])
def test_dialect(glob: str, text: str, expected: bool) -> None:
    assert bool(compile_glob(glob)(text)) is expected
    assert GlobSet([glob, "/never/matches"])(text) is expected


def test_ignore_case_is_one_option() -> None:
    assert compile_glob("/etc/Shadow", ignore_case=True)("/ETC/shadow")
    assert GlobSet(["/Etc/*"], ignore_case=True)("/etc/SHADOW")


SEVENTEEN = "{" + ",".join("abcdefghijklmnopq") + "}"


@pytest.mark.parametrize("glob", ["/etc/[abc", "/srv/[]", "/x/[z-a]", SEVENTEEN * 2],
                         ids=["unclosed", "empty", "backwards range", "289 alternatives"])
def test_patterns_the_dialect_cannot_read_are_errors(glob: str) -> None:
    with pytest.raises(GlobError):
        check_glob(glob)


def test_brace_sets_are_globs_and_expand() -> None:
    assert is_glob("/etc/{passwd,shadow}") and not is_glob("/etc/{x}") and not is_glob("/etc/x")
    assert expand_braces("a{b,c{d,e}}f") == ["abf", "acdf", "acef"]


def test_two_globs_intersect_when_some_path_matches_both() -> None:
    assert glob_intersects("/home/*/.ssh/*", "/home/**/id_rsa")
    assert not glob_intersects("/home/*/.ssh/*.pub", "/etc/**")
    assert glob_intersects("/etc/{passwd,shadow}", "/etc/shadow")


# -- every condition that takes a glob agrees --------------------------------------------------

PATH_CASES: list[tuple[str, str, bool]] = [
    ("/etc/{passwd,shadow}", "/etc/shadow", True),
    ("/etc/{passwd,shadow}", "/etc/group", False),
    ("/zz/app/*", "/zz/app/config.yml", True),
    ("/zz/app/*", "/zz/app/sub/config.yml", False),
    ("/zz/app/**", "/zz/app/sub/config.yml", True),
    ("/zz/data/**/secret.txt", "/zz/data/secret.txt", True),
    ("/zz/data/**/secret.txt", "/zz/data/a/b/secret.txt", True),
    ("/zz/srv/data?.csv", "/zz/srv/data1.csv", True),
    ("/zz/srv/data?.csv", "/zz/srv/data10.csv", False),
    ("/zz/srv/[a-c]*.log", "/zz/srv/b1.log", True),
    ("/zz/srv/[a-c]*.log", "/zz/srv/d1.log", False),
    ("/zz/srv/[!a-c]*.log", "/zz/srv/d1.log", True),
    ("/zz/srv/{a,b/{c,d}}/x", "/zz/srv/b/d/x", True),
    ("/zz/srv/{a,b/{c,d}}/x", "/zz/srv/b/x", False),
    ("/zz/home/*/.ssh/id_*", "/zz/home/bob/.ssh/id_rsa", True),
    ("/zz/Keys/*", "/zz/keys/a", False),
]


def _deny(rule: dict[str, Any]) -> Guard:
    return Guard.from_dict({"version": 1, "default": "allow",
                            "rules": [{"id": "g", "effect": "deny", **rule}]})


def _permission(string: str) -> Guard:
    return Guard.from_dict({"version": 1, "default": "allow", "deny": [string]})


def _path_conditions(glob: str) -> dict[str, tuple[Guard, str, dict[str, Any]]]:
    """Each condition that takes a path glob: (guard, tool, args with {} for the path)."""
    read = ("read_file", {"path": "{}"})
    return {
        "args": (_deny({"match": {"tool": "read_file"}, "args": {"path": glob}}), *read),
        "paths": (_deny({"match": {"kind": "file.read"},
                         "paths": {"deny": [glob], "resolve_symlinks": False}}), *read),
        "Read()": (_permission(f"Read({glob})"), *read),
        "Edit()": (_permission(f"Edit({glob})"), "edit_file", {"path": "{}"}),
        "shell reads": (_deny({"match": {"kind": "shell"}, "shell": {"reads": [glob]}}),
                        "bash", {"command": "cat {}"}),
        "shell writes": (_deny({"match": {"kind": "shell"}, "shell": {"writes": [glob]}}),
                         "bash", {"command": "tee {} < /dev/null"}),
        "shell rule args": (_deny({"match": {"kind": "shell"},
                                   "shell": {"rules": [{"program": "cat", "args": [glob]}]}}),
                            "bash", {"command": "cat {}"}),
        "shell pattern": (_deny({"match": {"kind": "shell"}, "shell": {"deny": [f"cat {glob}"]}}),
                          "bash", {"command": "cat {}"}),
    }


@pytest.mark.parametrize(("glob", "path", "expected"), PATH_CASES)
def test_every_path_condition_agrees(glob: str, path: str, expected: bool) -> None:
    seen = {}
    for name, (guard, tool, args) in _path_conditions(glob).items():
        filled = {k: v.replace("{}", path) for k, v in args.items()}
        seen[name] = guard.check(tool, filled).effect == "deny"
    assert seen == dict.fromkeys(seen, expected)


NAME_CASES: list[tuple[str, str, bool]] = [
    ("mcp__github__*", "mcp__github__create_issue", True),
    ("mcp__github__*", "mcp__gitlab__create_issue", False),
    ("mcp__{github,gitlab}__*", "mcp__gitlab__create_issue", True),
    ("read_?ile", "read_file", True),
    ("[rw]rite_file", "write_file", True),
    ("[!rw]rite_file", "write_file", False),
    ("*_file", "delete_file", True),
    ("deploy_{prod,staging}", "deploy_dev", False),
    ("Deploy*", "deploy_prod", False),
]


@pytest.mark.parametrize(("glob", "tool", "expected"), NAME_CASES)
def test_every_name_glob_agrees(glob: str, tool: str, expected: bool) -> None:
    seen = {
        "match tool": _deny({"match": {"tool": glob}}).check(tool, {}).effect == "deny",
        "args": _deny({"args": {"name": glob}}).check("t", {"name": tool}).effect == "deny",
        "permission": _permission(glob).check(tool, {}).effect == "deny",
        "tool profile": Guard.from_dict({"version": 1, "tools": {glob: {"kind": "payment"}}})
        .profile(tool).kind == "payment",
    }
    asker = Guard.from_dict({"version": 1, "rules": [{"id": "a", "effect": "ask"}]})
    asked = asker.check(tool, {}, session="s", agent="bot")
    other = asker.check("something_else", {}, session="s", agent="bot")
    asker.approvals.remember(other, scope="tool", by="alice", tool=glob)
    seen["grant"] = asker.approvals.granted(asked) is not None
    assert seen == dict.fromkeys(seen, expected)


UNREADABLE = "/etc/[abc"


@pytest.mark.parametrize("rule", [
    {"match": {"tool": "read_[file"}},
    {"args": {"path": UNREADABLE}},
    {"paths": {"deny": [UNREADABLE]}},
    {"shell": {"reads": [UNREADABLE]}},
    {"shell": {"writes": [UNREADABLE]}},
    {"shell": {"deny": [f"cat {UNREADABLE}"]}},
    {"shell": {"rules": [{"program": "cat", "args": [UNREADABLE]}]}},
], ids=["match", "args", "paths", "reads", "writes", "pattern", "rule args"])
def test_a_glob_no_condition_can_read_fails_to_load(rule: dict[str, Any]) -> None:
    with pytest.raises(PolicyError, match=r"never closed|\["):
        _deny(rule)


@pytest.mark.parametrize("string", [f"Read({UNREADABLE})", "read_[file", f"Bash(cat {UNREADABLE})"])
def test_a_permission_string_no_condition_can_read_fails_to_load(string: str) -> None:
    with pytest.raises(PolicyError):
        _permission(string)


def test_a_grant_with_an_unreadable_tool_glob_is_refused() -> None:
    guard = Guard.from_dict({"version": 1, "rules": [{"id": "a", "effect": "ask"}]})
    decision = guard.check("t", {}, session="s")
    with pytest.raises(ValueError, match="never closed"):
        guard.approvals.remember(decision, scope="tool", by="alice", tool="t[")


def test_shell_reads_with_a_brace_set_deny_what_it_names() -> None:
    """The brace set was once read literally by shell: reads/writes: a fail-open."""
    guard = _deny({"match": {"kind": "shell"}, "shell": {"reads": ["/etc/{passwd,shadow}"]}})
    assert guard.check("bash", {"command": "cat /etc/shadow"}).effect == "deny"
    assert guard.check("bash", {"command": "cat /etc/passwd"}).effect == "deny"
    assert guard.check("bash", {"command": "cat /etc/hostname"}).effect == "allow"


# -- the literal-ends shortcut never changes an answer -----------------------------------------

_PIECES = ["a", "b", "/", ".", "*", "**", "?", "[ab]", "[!a]", "{a,b/c}", "x", "/**/", ".ssh"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), min_size=1, max_size=6),
       st.lists(st.lists(st.sampled_from(_PIECES), min_size=1, max_size=6), min_size=1,
                max_size=4),
       st.booleans())
def test_a_set_of_globs_intersects_exactly_when_one_of_them_does(
        mine: list[str], patterns: list[list[str]], dotfiles: bool) -> None:
    glob = "/" + "".join(mine)
    texts = ["/" + "".join(p) for p in patterns]
    try:
        table = GlobTable([(t, t, False) for t in texts])
    except GlobError:
        assume(False)
    found = table.intersects(glob, dotfiles=dotfiles)
    expected = [t for t in texts if glob_intersects(glob, t, dotfiles=dotfiles)]
    assert (found is None) == (not expected), (glob, texts)
    assert found is None or found in expected


def test_globs_whose_ends_differ_do_not_intersect_and_those_that_may_do() -> None:
    texts = ["/**/.aws/credentials", "/etc/**", "/w/src/**", "/**/*.pem"]
    globs = GlobTable([(t, t, False) for t in texts])
    assert globs.intersects("/w/src/**/*.py") == "/w/src/**"
    assert globs.intersects("/w/lib/**/*.py") is None
    assert globs.intersects("/**/*") is not None
    assert globs.intersects("/.aws/credentials") == "/**/.aws/credentials"  # **/ may be empty
    assert globs.intersects("/w/src") == "/w/src/**"  # a/** matches a
