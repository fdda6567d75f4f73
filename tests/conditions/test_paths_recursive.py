"""Recursive reads in the ``paths:`` condition: a directory holding credentials, and search
tools whose file glob selects sensitive files."""

from __future__ import annotations

from pathlib import Path

import pytest

from callwarden._call import ToolCall
from callwarden._profiles import ToolProfile, default_profile
from callwarden.conditions.base import Subject
from callwarden.conditions.paths import PathMatcher

ROOT, HOME = "/home/dev/project", "/home/dev"


def sensitive(tmp_path: Path) -> PathMatcher:
    return PathMatcher({"root": ROOT, "home": HOME, "sensitive": True, "fs_root": str(tmp_path)})


def call(tool: str, **args: object) -> Subject:
    return Subject(ToolCall(tool, args), default_profile(tool))


@pytest.mark.parametrize("directory", ["~", "/home/dev/", "~/.config", "/etc", "/proc/self", "/"])
def test_check_tree_of_a_directory_holding_credentials_is_a_hit(tmp_path: Path,
                                                               directory: str) -> None:
    hit = sensitive(tmp_path).check_tree(directory)
    assert hit is not None and hit.code == "path.sensitive"


@pytest.mark.parametrize("directory", [".", "src", "/usr/share/doc", "/tmp",
                                       "~/.ssh/id_ed25519.pub", "/etc/os-release"])
def test_check_tree_of_a_directory_without_credentials_is_not_a_hit(tmp_path: Path,
                                                                   directory: str) -> None:
    assert sensitive(tmp_path).check_tree(directory) is None


def test_check_tree_ignores_names_sensitive_at_any_depth(tmp_path: Path) -> None:
    """Every project may hold a .env; searching the project is still allowed."""
    assert sensitive(tmp_path).check_tree(ROOT) is None


def test_search_tool_with_a_glob_selecting_env_files_is_a_hit(tmp_path: Path) -> None:
    subject = call("Grep", pattern="password", path=ROOT, glob="**/.env")
    hit = sensitive(tmp_path)(subject)
    assert hit is not None and hit.code == "path.sensitive"


def test_search_tool_with_a_bare_name_glob_matches_at_any_depth(tmp_path: Path) -> None:
    assert sensitive(tmp_path)(call("Grep", pattern="x", path=ROOT, glob=".env")) is not None


def test_search_tool_with_an_ordinary_glob_is_not_a_hit(tmp_path: Path) -> None:
    assert sensitive(tmp_path)(call("Grep", pattern="x", path=ROOT, glob="*.py")) is None


def test_content_search_of_the_home_directory_is_a_hit(tmp_path: Path) -> None:
    assert sensitive(tmp_path)(call("Grep", pattern="password", path=HOME)) is not None


def test_content_search_of_the_project_is_not_a_hit(tmp_path: Path) -> None:
    assert sensitive(tmp_path)(call("Grep", pattern="password", path=ROOT)) is None


def test_glob_tool_pattern_is_read_as_a_file_glob(tmp_path: Path) -> None:
    assert sensitive(tmp_path)(call("Glob", pattern="**/.env")) is not None


@pytest.mark.parametrize("path", ["/proc/self/task/1/environ", "/proc/1/task/1/environ",
                                  "/proc/thread-self/environ", "/proc/self/task/7/mem"])
def test_per_thread_proc_files_are_sensitive(tmp_path: Path, path: str) -> None:
    assert sensitive(tmp_path).check_path(path) is not None


def test_proc_status_is_not_sensitive(tmp_path: Path) -> None:
    assert sensitive(tmp_path).check_path("/proc/self/status") is None


@pytest.mark.parametrize(("args", "declared", "hit"), [
    ({"path": ROOT, "include": "**/.env"}, None, True),
    ({"path": ROOT, "file_glob": "**/.env"}, None, True),
    ({"path": ROOT, "query": "password"}, None, False),  # a content search of the project
    ({"path": HOME, "regex": "password"}, None, True),
    ({"path": ROOT, "selector": "**/.env"}, "selector", True),
    ({"path": ROOT, "file_glob": "**/.env"}, "selector", False),  # the declared name is it
    ({"path": ROOT}, None, False),
])
def test_a_read_is_a_search_by_any_name_its_glob_or_pattern_may_have(
        tmp_path: Path, args: dict[str, str], declared: str | None, hit: bool) -> None:
    profile = ToolProfile("read_many", kind="file.read",
                          args={"path": "path", **({"glob": declared} if declared else {})})
    found = sensitive(tmp_path)(Subject(ToolCall("read_many", args), profile))
    assert (found is not None) is hit, found
