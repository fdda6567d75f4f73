"""``PathMatcher.union``: one condition for the deny globs of many, finding nothing exactly
when none of them would (the engine then passes over their rules together)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callwarden._call import ToolCall
from callwarden._profiles import ToolProfile
from callwarden.conditions.base import CompileEnv, Subject
from callwarden.conditions.paths import PathMatcher

ROOT, HOME = "/home/dev/project", "/home/dev"
DATA = Path(__file__).parents[1] / "data"
GLOBS = ["~/.ssh/**", "~/.aws/**", "/etc/shadow", "**/.env", "*.pem", "/proc/*/environ",
         "~/.config/gh/hosts.yml", "src/**", "/tmp/*", "**/id_rsa*", "~/.kube/config",
         "/var/run/docker.sock", "*.key", "~/.netrc", "/etc/**", "~/.git-credentials",
         "{~/.docker,~/.npmrc}/**", "/home/*/.bash_history", "build/[a-c]*.log"]
_LINK_RE = re.compile(r"ln -s ([^\s`]+) ([^\s`]+)")


def _paths() -> list[str]:
    lines = [ln for ln in (DATA / "path_traversal.tsv").read_text("utf-8").splitlines()
             if ln and not ln.startswith("#")]
    return [ln.split("\t")[3] for ln in lines[1:]]


PATHS = _paths()
READ = ToolProfile("read_file", kind="file.read", args={"path": "path"})
WRITE = ToolProfile("write_file", kind="file.write", args={"path": "path"})
GREP = ToolProfile("Grep", kind="file.read", args={"path": "path"})


@pytest.fixture(scope="module")
def fs_root(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A fake root holding every symlink the corpus rows describe."""
    root = tmp_path_factory.mktemp("fs")
    (root / ROOT.lstrip("/")).mkdir(parents=True)
    lines = (DATA / "path_traversal.tsv").read_text("utf-8").splitlines()
    for line in lines:
        found = _LINK_RE.search(line)
        if found:
            target, link = found.groups()
            target = HOME + target[1:] if target.startswith("~") else target
            link_path = root / ROOT.lstrip("/") / link
            link_path.parent.mkdir(parents=True, exist_ok=True)
            if not link_path.is_symlink():
                os.symlink(target, link_path)
    return str(root)


def matcher(fs_root: str, *globs: str, **config: Any) -> PathMatcher:
    return PathMatcher({"deny": list(globs), "root": ROOT, "home": HOME, "fs_root": fs_root,
                        **config}, CompileEnv())


def subjects(path: str) -> list[Subject]:
    return [Subject(ToolCall("read_file", {"path": path}), READ),
            Subject(ToolCall("write_file", {"path": path, "content": "x"}), WRITE),
            Subject(ToolCall("Grep", {"path": path, "pattern": "key"}), GREP),
            Subject(ToolCall("Grep", {"path": ROOT, "glob": path, "pattern": "k"}), GREP),
            Subject(ToolCall("write_file", {"path": "a.txt", "destination": path}), WRITE)]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(chosen=st.lists(st.sampled_from(GLOBS), min_size=2, max_size=6, unique=True),
       case=st.booleans())
def test_a_union_finds_something_exactly_when_one_of_its_matchers_does(
        fs_root: str, chosen: list[str], case: bool) -> None:
    members = [matcher(fs_root, glob, case_insensitive=case) for glob in chosen]
    union = PathMatcher.union(members)
    for path in PATHS:
        for subject in subjects(path):
            alone = [m(subject) for m in members]
            together = union(Subject(subject.call, subject.profile))
            assert (together is None) == all(hit is None for hit in alone), (path, chosen)


@pytest.mark.parametrize("config", [
    {"deny": ["~/.ssh/**", "!~/.ssh/*.pub"]},  # an exemption would reach the others' globs
    {"deny": ["~/.ssh/**"], "sensitive": True},
    {"deny": ["~/.ssh/**"], "allow_roots": ["."]},
    {"deny": ["~/.ssh/**"], "read_roots": ["/usr"]},
    {"sensitive": True},
])
def test_a_matcher_judging_more_than_its_deny_globs_has_no_group(config: dict[str, Any]) -> None:
    assert PathMatcher({"root": ROOT, "home": HOME, **config}, CompileEnv()).group_key is None


def test_matchers_of_other_settings_are_not_one_group(fs_root: str) -> None:
    plain = matcher(fs_root, "~/.ssh/**")
    assert plain.group_key == matcher(fs_root, "~/.aws/**").group_key
    for other in (matcher(fs_root, "~/.aws/**", case_insensitive=True),
                  matcher(fs_root, "~/.aws/**", resolve_symlinks=False),
                  matcher(fs_root, "~/.aws/**", root="/srv"),
                  matcher(fs_root, "~/.aws/**", home="/home/ops"),
                  matcher(fs_root, "~/.aws/**", args=["target"]),
                  PathMatcher({"deny": ["~/.aws/**"], "root": ROOT, "home": HOME},
                              CompileEnv())):
        assert other.group_key != plain.group_key
        with pytest.raises(ValueError, match="group_key"):
            PathMatcher.union([plain, other])


def test_a_union_finds_what_its_matchers_do_whatever_changed_on_disk_since(
        tmp_path: Path) -> None:
    """The members resolved ~ through a link when they loaded; the link moves before the
    union is made: the union still has their forms, so it finds what they find."""
    from callwarden.conditions import paths as module

    (tmp_path / "data/dev").mkdir(parents=True)
    (tmp_path / "other/dev").mkdir(parents=True)
    (tmp_path / "home").mkdir()
    (tmp_path / "home/dev").symlink_to("/data/dev")
    members = [matcher(str(tmp_path), "~/.ssh/**"), matcher(str(tmp_path), "~/.aws/**")]
    (tmp_path / "home/dev").unlink()
    (tmp_path / "home/dev").symlink_to("/other/dev")
    module._LOAD_TIME_RESOLVED.clear()
    union = PathMatcher.union(members)
    subject = Subject(ToolCall("read_file", {"path": "/data/dev/.aws/credentials"}), READ)
    assert members[1](subject) is not None
    assert union(Subject(subject.call, subject.profile)) is not None
