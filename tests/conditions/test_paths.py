"""Tests for path canonicalization and the ``paths:`` condition."""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callwarden._call import ToolCall
from callwarden._profiles import ToolProfile, default_profile
from callwarden.analysis.globs import glob_intersects, glob_to_regex
from callwarden.analysis.globs import literal_prefix as glob_literal_prefix
from callwarden.analysis.paths import (
    PathCanonicalizer,
    canonical_path,
    load_sensitive_globs,
    resolve_physical,
)
from callwarden.conditions.base import CompileEnv, ConfigError, Subject, get_condition
from callwarden.conditions.paths import PathMatcher

ROOT = "/home/dev/project"
HOME = "/home/dev"
DATA = Path(__file__).parents[1] / "data"


def canon(raw: str) -> Any:
    return canonical_path(raw, root=ROOT, home=HOME)


def matcher(tmp_path: Path, **config: Any) -> PathMatcher:
    """A matcher whose symlink resolution sees only tmp_path (an empty fake filesystem)."""
    base: dict[str, Any] = {"root": ROOT, "home": HOME, "fs_root": str(tmp_path)}
    base.update(config)
    return PathMatcher(base, CompileEnv())


def subject(tool: str, args: dict[str, Any], profile: ToolProfile | None = None) -> Subject:
    return Subject(ToolCall.create(tool, args), profile or default_profile(tool))


# ------------------------------------------------------------------ canonicalization


def test_tilde_expands_to_the_configured_home() -> None:
    assert canon("~/.ssh/id_rsa").path == "/home/dev/.ssh/id_rsa"


@pytest.mark.parametrize(("raw", "expected"), [
    ("~dev/.aws/credentials", "/home/dev/.aws/credentials"),
    ("~alice/.netrc", "/home/alice/.netrc"),
    ("~root/.ssh/id_rsa", "/root/.ssh/id_rsa"),
])
def test_tilde_user_maps_to_that_users_home(raw: str, expected: str) -> None:
    assert canon(raw).path == expected


@pytest.mark.parametrize("raw", ["$HOME/.ssh/id_rsa", "${HOME}/.ssh/id_rsa",
                                 "${HOME:-/tmp}/.ssh/id_rsa", "%USERPROFILE%\\.ssh\\id_rsa"])
def test_home_variables_expand_to_the_configured_home(raw: str) -> None:
    assert "/home/dev/.ssh/id_rsa" in canon(raw).variants


def test_relative_path_is_relative_to_the_root() -> None:
    assert canon("src/main.py").path == "/home/dev/project/src/main.py"


@pytest.mark.parametrize(("raw", "expected"), [
    ("src/../../.ssh/id_rsa", "/home/dev/.ssh/id_rsa"),
    ("/home/dev/./.netrc", "/home/dev/.netrc"),
    ("//proc//self//environ", "/proc/self/environ"),
    ("../../../../../../../etc/shadow", "/etc/shadow"),
])
def test_dot_segments_and_doubled_slashes_collapse(raw: str, expected: str) -> None:
    assert canon(raw).path == expected


@pytest.mark.parametrize("raw", [
    "%2e%2e/.ssh/id_rsa",           # percent-encoded dots
    "%252e%252e/.ssh/id_rsa",       # double-encoded
    "%c0%ae%c0%ae/.ssh/id_rsa",     # overlong UTF-8
    "%u002e%u002e/.ssh/id_rsa",     # IIS %u encoding
    "..%2f.ssh%2fid_rsa",           # encoded separators
    "..%5c.ssh%5cid_rsa",           # encoded backslashes
    "\uff0e\uff0e/.ssh/id_rsa",     # fullwidth dots
    "..\\.ssh\\id_rsa",             # Windows separators
])
def test_encoded_traversal_has_a_decoded_variant(raw: str) -> None:
    assert "/home/dev/.ssh/id_rsa" in canon(raw).variants


def test_percent_decoding_keeps_the_literal_form_too() -> None:
    assert canon("assets/logo%20v2.png").variants == (
        "/home/dev/project/assets/logo%20v2.png", "/home/dev/project/assets/logo v2.png")


def test_windows_drive_path_maps_users_folder_to_home_and_is_case_insensitive() -> None:
    result = canon("C:\\Users\\dev\\.aws\\credentials")
    assert (result.path, result.nocase) == ("/home/dev/.aws/credentials", True)


def test_windows_namespace_prefix_is_stripped() -> None:
    assert canon("\\\\?\\C:\\Windows\\System32\\config\\SAM").path == (
        "/Windows/System32/config/SAM")


@pytest.mark.parametrize("raw", [".env. ", ".env...", ".env::$DATA", ".env:stream"])
def test_windows_trailing_dots_spaces_and_streams_have_a_trimmed_variant(raw: str) -> None:
    assert "/home/dev/project/.env" in canon(raw).variants


def test_nul_byte_truncates_like_a_c_string() -> None:
    assert canon("/etc/shadow\x00.png").path == "/etc/shadow"


@pytest.mark.parametrize(("raw", "expected"), [
    ("file:///etc/shadow", "/etc/shadow"),
    ("file://localhost/etc/shadow", "/etc/shadow"),
    ("FILE:///home/dev/.netrc", "/home/dev/.netrc"),
])
def test_file_urls_become_paths(raw: str, expected: str) -> None:
    assert canon(raw).path == expected


@pytest.mark.parametrize(("raw", "expected"), [
    ("/proc/self/root/etc/shadow", "/etc/shadow"),
    ("/proc/thread-self/root/etc/shadow", "/etc/shadow"),
    ("/proc/self/cwd/../.ssh/id_rsa", "/home/dev/.ssh/id_rsa"),
    ("/proc/self/cwd/src/app.py", "/home/dev/project/src/app.py"),
])
def test_proc_self_magic_links_are_followed(raw: str, expected: str) -> None:
    assert canon(raw).path == expected


def test_unknown_leading_variable_is_an_error() -> None:
    assert "cannot be resolved" in (canon("$SECRET_DIR/key").error or "")


def test_dollar_inside_a_file_name_is_literal() -> None:
    assert canon("build/Outer$Inner.class").path == "/home/dev/project/build/Outer$Inner.class"


def test_empty_path_is_an_error() -> None:
    assert canon("").error == "path is empty"


def test_overlong_path_is_an_error() -> None:
    assert "longer than" in (canon("a/" * 20000).error or "")


def test_glob_argument_is_flagged() -> None:
    assert canon("/home/dev/.kube/*").is_glob


def test_canonicalizer_caches_results() -> None:
    canonicalizer = PathCanonicalizer(root=ROOT, home=HOME)
    assert canonicalizer("~/x") is canonicalizer("~/x")


def test_canonicalizer_cache_is_bounded() -> None:
    canonicalizer = PathCanonicalizer(root=ROOT, home=HOME, cache_size=8)
    for i in range(20):
        canonicalizer(f"f{i}")
    assert len(canonicalizer._cache) == 8


def test_case_insensitive_canonical_path_is_lower_case() -> None:
    assert canonical_path("~/.SSH/ID_RSA", root=ROOT, home=HOME,
                          case_insensitive=True).path == "/home/dev/.ssh/id_rsa"


def test_canonical_path_resolves_symlinks_when_asked(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    result = canonical_path(str(tmp_path / "link" / "f.txt"), root=str(tmp_path), home=HOME,
                            resolve_symlinks=True)
    assert result.physical == (str(tmp_path / "real" / "f.txt"),)


# ------------------------------------------------------------------ symlink resolution


def test_resolve_physical_follows_links_inside_a_filesystem_root(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    os.symlink("/b/target", tmp_path / "a" / "link")
    assert resolve_physical("/a/link", str(tmp_path)) == "/b/target"


def test_resolve_physical_keeps_missing_components(tmp_path: Path) -> None:
    assert resolve_physical(str(tmp_path / "new" / "file.txt")) == str(
        tmp_path / "new" / "file.txt")


def test_resolve_physical_applies_dotdot_after_a_link(tmp_path: Path) -> None:
    (tmp_path / "deep" / "dir").mkdir(parents=True)
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "link").symlink_to(tmp_path / "deep" / "dir")
    assert resolve_physical(str(tmp_path / "proj" / "link" / ".." / "x")) == str(
        tmp_path / "deep" / "x")


def test_resolve_physical_follows_a_dangling_link_to_its_target(tmp_path: Path) -> None:
    (tmp_path / "link").symlink_to(tmp_path / "nowhere" / "authorized_keys")
    assert resolve_physical(str(tmp_path / "link")) == str(
        tmp_path / "nowhere" / "authorized_keys")


def test_a_path_pointed_elsewhere_after_a_decision_is_resolved_again(tmp_path: Path) -> None:
    """Where an existing path led is kept, checked with one stat: a file swapped for a
    symlink to a denied file (or a link retargeted) is decided by where it leads now."""
    from callwarden import Effect, Guard

    project, secret, other = tmp_path / "proj", tmp_path / "secret", tmp_path / "other"
    for folder in (project, secret, other):
        folder.mkdir()
    (secret / "key").write_text("k")
    (other / "doc").write_text("d")
    note = project / "notes.txt"
    note.write_text("n")
    guard = Guard.from_dict({"version": 1, "rules": [
        {"id": "no-secrets", "paths": {"deny": [f"{secret}/**"]}, "effect": "deny"}]},
        base_dir=project)

    def read() -> Effect:
        return guard.check("read_file", {"path": str(note)}).effect

    for _ in range(2):
        assert read() is Effect.ALLOW
    note.unlink()
    note.symlink_to(secret / "key")
    for _ in range(2):
        assert read() is Effect.DENY
    note.unlink()
    note.symlink_to(other / "doc")
    assert read() is Effect.ALLOW
    (other / "doc").unlink()
    (other / "doc").symlink_to(secret / "key")  # the link's target now leads to the secret
    assert read() is Effect.DENY


def test_resolve_physical_gives_up_on_a_link_loop(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to("/b")
    (tmp_path / "b").symlink_to("/a")
    assert resolve_physical("/a/x", str(tmp_path)) is None


# ------------------------------------------------------------------ globs


@pytest.mark.parametrize(("glob", "path", "expected"), [
    ("/a/**", "/a", True),
    ("/a/**", "/a/b/c", True),
    ("/a/**/z", "/a/z", True),
    ("/a/**/z", "/a/b/c/z", True),
    ("/a/*", "/a/b/c", False),
    ("/a/?", "/a/bc", False),
    ("/**/.env", "/x/y/.env", True),
    ("/**/.env.*", "/x/.env.d/README", False),
    ("/a/{b,c}.txt", "/a/c.txt", True),
    ("/a/[!x]y", "/a/zy", True),
    ("/a/[!x]y", "/a/xy", False),
])
def test_glob_to_regex_semantics(glob: str, path: str, expected: bool) -> None:
    assert bool(re.fullmatch(glob_to_regex(glob), path)) is expected


@pytest.mark.parametrize(("arg", "policy", "expected"), [
    ("/home/dev/.kube/*", "/home/*/.kube/**", True),
    ("/home/dev/.net*", "/home/dev/.netrc", True),
    ("/home/dev/.ssh/id_*", "/home/dev/.ssh/**", True),
    ("/home/dev/project/src/*.py", "/**/.env", False),
    ("/home/dev/project/**/*.py", "/home/*/.ssh/**", False),
    ("/etc/[sp]hadow", "/etc/shadow", True),
])
def test_glob_intersects_decides_whether_two_globs_share_a_path(
        arg: str, policy: str, expected: bool) -> None:
    assert glob_intersects(arg, policy) is expected


def test_glob_wildcards_skip_dotfiles_like_a_shell() -> None:
    assert not glob_intersects("/p/*", "/**/.env", dotfiles=False)


def test_glob_wildcards_match_dotfiles_when_asked() -> None:
    assert glob_intersects("/p/*", "/**/.env", dotfiles=True)


def test_glob_literal_prefix_stops_at_the_first_wildcard_segment() -> None:
    assert glob_literal_prefix("/a/b/c*/d") == "/a/b"


# ------------------------------------------------------------------ the matcher


def test_paths_condition_is_registered() -> None:
    assert get_condition("paths") is PathMatcher


@pytest.mark.parametrize("raw", [
    "~/.ssh/id_rsa", "$HOME/.ssh/id_rsa", "../.ssh/id_rsa", "%2e%2e/.ssh/id_rsa",
    "%252e%252e%252f.ssh/id_rsa", "\uff5e/.ssh/id_rsa", "/proc/self/root/home/dev/.ssh/id_rsa",
    "file:///home/dev/.ssh/id_rsa", "~dev/.ssh/config",
])
def test_deny_glob_catches_every_spelling(tmp_path: Path, raw: str) -> None:
    hit = matcher(tmp_path, deny=["~/.ssh/**"]).check_path(raw)
    assert hit is not None and hit.code == "path.denied"


def test_deny_hit_names_the_pattern_and_the_resolved_path(tmp_path: Path) -> None:
    hit = matcher(tmp_path, deny=["~/.ssh/**"]).check_path("../.ssh/id_rsa")
    assert hit is not None and "/home/dev/.ssh/id_rsa" in hit.detail and "~/.ssh/**" in hit.detail


@pytest.mark.parametrize("raw", ["README.md", "src/main.py", "docs/ssh-setup.md",
                                 "fixtures/id_rsa_test.pub", "src/config/.env.d/README"])
def test_project_files_pass_the_deny_list(tmp_path: Path, raw: str) -> None:
    m = matcher(tmp_path, deny=["~/.ssh/**", "~/.aws/**", "**/.env", "**/.env.*", "/etc/shadow"])
    assert m.check_path(raw) is None


def test_slashless_deny_glob_matches_at_any_depth(tmp_path: Path) -> None:
    assert matcher(tmp_path, deny=["*.pem"]).check_path("deploy/keys/server.pem") is not None


def test_relative_deny_glob_with_a_slash_is_relative_to_the_root(tmp_path: Path) -> None:
    m = matcher(tmp_path, deny=["config/*.key"])
    assert (m.check_path("config/master.key") is not None,
            m.check_path("vendor/config/master.key")) == (True, None)


@pytest.mark.parametrize("raw", ["/etc/shadow", "/proc/1/environ", "~/.aws/credentials",
                                 "/root/.ssh/id_rsa", "/home/alice/.ssh/id_ed25519",
                                 "/Users/bob/.aws/credentials", ".env.production",
                                 "infra/terraform.tfstate", "~/.docker/config.json"])
def test_sensitive_list_flags_credential_stores(tmp_path: Path, raw: str) -> None:
    hit = matcher(tmp_path, sensitive=True).check_path(raw)
    assert hit is not None and hit.code == "path.sensitive"


@pytest.mark.parametrize("raw", ["~/.ssh/id_ed25519.pub", ".env.example", "src/app.py"])
def test_sensitive_list_exemptions_and_ordinary_files_pass(tmp_path: Path, raw: str) -> None:
    assert matcher(tmp_path, sensitive=True).check_path(raw) is None


def test_shipped_sensitive_list_covers_the_documented_locations() -> None:
    globs = set(load_sensitive_globs())
    assert {"/proc/*/environ", "/proc/*/mem", "/etc/shadow", "/etc/sudoers", "~/.ssh/**",
            "~/.aws/**", "~/.config/gcloud/**", "~/.azure/**", "~/.kube/**",
            "~/.docker/config.json", "~/.netrc", "~/.pgpass", "~/.git-credentials",
            "~/.gnupg/**", "~/Library/Keychains/**", ".env"} <= globs


def test_path_outside_allowed_roots_is_a_hit(tmp_path: Path) -> None:
    hit = matcher(tmp_path, allow_roots=["."]).check_path("/opt/other/file")
    assert hit is not None and hit.code == "path.outside_root"


def test_path_inside_an_allowed_root_passes(tmp_path: Path) -> None:
    assert matcher(tmp_path, allow_roots=[".", "/tmp"]).check_path("/tmp/build.log") is None


def test_allowed_root_prefix_does_not_admit_a_sibling_directory(tmp_path: Path) -> None:
    assert matcher(tmp_path, allow_roots=["."]).check_path("/home/dev/project2/x") is not None


def test_read_roots_admit_reads(tmp_path: Path) -> None:
    m = matcher(tmp_path, allow_roots=["."], read_roots=["/usr"])
    assert m.check_path("/usr/share/dict/words", write=False) is None


def test_read_roots_do_not_admit_writes(tmp_path: Path) -> None:
    m = matcher(tmp_path, allow_roots=["."], read_roots=["/usr"])
    assert m.check_path("/usr/share/dict/words", write=True) is not None


def test_case_insensitive_option_matches_upper_case_credentials(tmp_path: Path) -> None:
    m = matcher(tmp_path, deny=["~/.ssh/**"], case_insensitive=True)
    assert m.check_path("~/.SSH/ID_RSA") is not None


def test_matching_is_case_sensitive_by_default(tmp_path: Path) -> None:
    assert matcher(tmp_path, deny=["~/.ssh/**"]).check_path("~/.SSH/ID_RSA") is None


def test_windows_drive_paths_match_case_insensitively(tmp_path: Path) -> None:
    m = matcher(tmp_path, deny=["~/.aws/**"])
    assert m.check_path("C:\\USERS\\dev\\.AWS\\credentials") is not None


def test_glob_argument_that_can_reach_a_denied_file_is_a_hit(tmp_path: Path) -> None:
    assert matcher(tmp_path, sensitive=True).check_path("/home/dev/.git-credentia*") is not None


def test_glob_argument_inside_the_project_passes(tmp_path: Path) -> None:
    m = matcher(tmp_path, sensitive=True, allow_roots=["."])
    assert m.check_path("src/**/*.py") is None


def test_glob_argument_reaching_outside_the_root_is_a_hit(tmp_path: Path) -> None:
    assert matcher(tmp_path, allow_roots=["."]).check_path("/home/*/notes.txt") is not None


def test_unresolvable_variable_is_an_invalid_hit(tmp_path: Path) -> None:
    hit = matcher(tmp_path, deny=["~/.ssh/**"]).check_path("$KEYDIR/id_rsa")
    assert hit is not None and hit.code == "path.invalid"


def test_non_string_path_is_an_invalid_hit(tmp_path: Path) -> None:
    hit = matcher(tmp_path, deny=["~/.ssh/**"])(subject("read_file", {"path": 42}))
    assert hit is not None and hit.code == "path.invalid"


def test_symlink_into_a_denied_location_is_a_hit(tmp_path: Path) -> None:
    (tmp_path / "home/dev/project/docs").mkdir(parents=True)
    os.symlink("/home/dev/.ssh/id_rsa", tmp_path / "home/dev/project/docs/notes.txt")
    hit = matcher(tmp_path, sensitive=True, allow_roots=["."]).check_path("docs/notes.txt")
    assert hit is not None and "/home/dev/.ssh/id_rsa" in hit.detail


def test_symlinks_are_ignored_when_resolution_is_off(tmp_path: Path) -> None:
    (tmp_path / "home/dev/project/docs").mkdir(parents=True)
    os.symlink("/home/dev/.ssh/id_rsa", tmp_path / "home/dev/project/docs/notes.txt")
    m = matcher(tmp_path, sensitive=True, resolve_symlinks=False)
    assert m.check_path("docs/notes.txt") is None


def test_symlink_created_after_a_first_check_is_caught(tmp_path: Path) -> None:
    (tmp_path / "home/dev/project").mkdir(parents=True)
    m = matcher(tmp_path, sensitive=True)
    assert m.check_path("notes.txt") is None
    os.symlink("/home/dev/.aws/credentials", tmp_path / "home/dev/project/notes.txt")
    assert m.check_path("notes.txt") is not None


def test_symlinks_resolve_on_the_real_filesystem(tmp_path: Path) -> None:
    project, secrets = tmp_path / "project", tmp_path / "secrets"
    project.mkdir()
    secrets.mkdir()
    (project / "data.txt").symlink_to(secrets / "token")
    m = PathMatcher({"root": str(project), "home": HOME, "allow_roots": ["."]}, CompileEnv())
    hit = m.check_path("data.txt")
    assert hit is not None and hit.code == "path.outside_root"


@pytest.mark.parametrize("change", ["file becomes a link", "folder becomes a link",
                                    "parent replaced by a link", "parent removed"])
def test_a_new_file_checked_again_sees_what_changed_on_the_real_filesystem(
        tmp_path: Path, change: str) -> None:
    """A path to a file that does not exist yet is resolved once and checked again cheaply:
    whatever turns it into a way out of the project since is seen on the next check."""
    project, secrets = tmp_path / "project", tmp_path / "secrets"
    (project / "out").mkdir(parents=True)
    secrets.mkdir()
    m = PathMatcher({"root": str(project), "home": HOME, "allow_roots": ["."]}, CompileEnv())
    target = "out/new/report.txt" if change == "folder becomes a link" else "out/report.txt"
    for _ in range(2):  # the second check reuses the first one's resolution
        assert m.check_path(target, write=True) is None
    if change == "file becomes a link":
        (project / "out" / "report.txt").symlink_to(secrets / "report.txt")
    elif change == "folder becomes a link":
        (project / "out" / "new").symlink_to(secrets)
    elif change == "parent replaced by a link":
        (project / "out").rename(tmp_path / "old-out")
        (project / "out").symlink_to(secrets)
    else:
        (project / "out").rmdir()
        assert resolve_physical(str(project / target)) == str(project / target)
        return
    hit = m.check_path(target, write=True)
    assert hit is not None and hit.code == "path.outside_root"


@pytest.mark.parametrize("path", ["/proc/self/environ", "/proc/thread-self/environ",
                                  "/proc/self/task/{tid}/environ", "/proc/{pid}/environ",
                                  "/proc/{pid}/task/{tid}/mem", "/proc/1/environ"])
def test_a_process_s_environment_is_sensitive_however_it_is_named(tmp_path: Path,
                                                                  path: str) -> None:
    """On the real /proc: ``/proc/self`` and ``/proc/thread-self`` lead to this process's
    folder, which the compiled policy does not name (the deciding process is not the agent's
    tool); every spelling still reaches a ``/proc/*/...`` entry of the sensitive list."""
    m = PathMatcher({"root": str(tmp_path), "home": HOME, "sensitive": True}, CompileEnv())
    hit = m.check_path(path.format(pid=os.getpid(), tid=threading.get_native_id()))
    assert hit is not None and hit.code == "path.sensitive"


def test_the_compiled_sensitive_paths_do_not_name_the_process_that_compiled_them() -> None:
    m = PathMatcher({"root": ROOT, "home": HOME, "sensitive": True}, CompileEnv())
    assert m._sensitive is not None
    assert not [glob for glob, _ in m._sensitive.globs if f"/proc/{os.getpid()}" in glob]


def test_dangling_symlink_write_is_judged_by_its_target(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "out.txt").symlink_to(tmp_path / "elsewhere" / "authorized_keys")
    m = PathMatcher({"root": str(project), "home": HOME, "allow_roots": ["."]}, CompileEnv())
    assert m.check_path("out.txt", write=True) is not None


def test_symlinked_project_root_still_admits_its_own_files(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "a.py").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    m = PathMatcher({"root": str(tmp_path / "link"), "home": HOME, "allow_roots": ["."]},
                    CompileEnv())
    assert m.check_path("a.py") is None


def test_call_checks_the_tools_path_argument(tmp_path: Path) -> None:
    hit = matcher(tmp_path, sensitive=True)(subject("Read", {"file_path": "~/.aws/credentials"}))
    assert hit is not None and hit.code == "path.sensitive"


def test_call_checks_every_path_in_a_list(tmp_path: Path) -> None:
    m = matcher(tmp_path, sensitive=True)
    call = subject("read_many_files", {"paths": ["README.md", "src/a.py", "/etc/shadow"]})
    assert m(call) is not None


def test_call_checks_source_and_destination_arguments(tmp_path: Path) -> None:
    m = matcher(tmp_path, allow_roots=["."])
    call = subject("move_file", {"source": "notes.txt", "destination": "/etc/cron.d/job"})
    assert m(call) is not None


def test_call_ignores_source_argument_of_code_tools(tmp_path: Path) -> None:
    m = matcher(tmp_path, allow_roots=["."])
    assert m(subject("run_code", {"source": "/etc/x = 1"})) is None


def test_call_without_a_path_argument_is_no_hit(tmp_path: Path) -> None:
    assert matcher(tmp_path, sensitive=True)(subject("Glob", {"pattern": "*.py"})) is None


def test_write_tools_do_not_get_read_roots(tmp_path: Path) -> None:
    m = matcher(tmp_path, allow_roots=["."], read_roots=["/etc"])
    assert (m(subject("read_file", {"path": "/etc/hosts"})),
            m(subject("write_file", {"path": "/etc/hosts"})) is not None) == (None, True)


def test_check_paths_returns_the_first_hit(tmp_path: Path) -> None:
    hit = matcher(tmp_path, sensitive=True).check_paths(["a.txt", "~/.netrc", "/etc/shadow"])
    assert hit is not None and "~/.netrc" in hit.detail


def test_too_many_paths_is_an_invalid_hit(tmp_path: Path) -> None:
    hit = matcher(tmp_path, sensitive=True).check_paths(["a"] * 2000)
    assert hit is not None and hit.code == "path.invalid"


@pytest.mark.parametrize(("config", "key"), [
    ({"deny": "x", "bogus": 1}, "bogus"),
    ({"deny": [1, 2]}, "deny"),
    ({"sensitive": "yes"}, "sensitive"),
    ({"allow_roots": ["src/*"]}, "allow_roots[0]"),
    ({"root": 5, "sensitive": True}, "root"),
])
def test_bad_config_names_the_key(config: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        PathMatcher(config, CompileEnv())
    assert info.value.key == key


def test_config_without_any_check_is_rejected() -> None:
    with pytest.raises(ConfigError, match="at least one"):
        PathMatcher({"root": "/x"}, CompileEnv())


def test_config_that_is_not_a_mapping_is_rejected() -> None:
    with pytest.raises(ConfigError):
        PathMatcher(["~/.ssh/**"], CompileEnv())


def test_relative_root_is_relative_to_the_policy_folder(tmp_path: Path) -> None:
    m = PathMatcher({"root": "proj", "home": HOME, "allow_roots": ["."]},
                    CompileEnv(base_dir=tmp_path))
    assert m.check_path(str(tmp_path / "proj" / "a.txt")) is None


# ------------------------------------------------------------------ the shared corpus


def _corpus_rows() -> list[dict[str, str]]:
    lines = [ln for ln in (DATA / "path_traversal.tsv").read_text("utf-8").splitlines()
             if ln and not ln.startswith("#")]
    header = lines[0].split("\t")
    return [dict(zip(header, ln.split("\t"), strict=True)) for ln in lines[1:]]


_ROWS = _corpus_rows()
_LINK_RE = re.compile(r"ln -s ([^\s`]+) ([^\s`]+)")


@pytest.fixture(scope="module")
def corpus_fs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fake root holding every symlink the corpus rows describe."""
    fs_root = tmp_path_factory.mktemp("fs")
    (fs_root / ROOT.lstrip("/")).mkdir(parents=True)
    for row in _ROWS:
        m = _LINK_RE.search(row["target"])
        if m:
            target, link = m.groups()
            target = HOME + target[1:] if target.startswith("~") else target
            link_path = fs_root / ROOT.lstrip("/") / link
            link_path.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(target, link_path)
    return fs_root


@pytest.fixture(scope="module")
def corpus_matcher(corpus_fs: Path) -> PathMatcher:
    """The corpus policy, with every symlink the rows describe created under a fake root."""
    return PathMatcher({"sensitive": True, "allow_roots": [".", "/tmp"],
                        "read_roots": ["/usr", "/etc"], "root": ROOT, "home": HOME,
                        "fs_root": str(corpus_fs), "case_insensitive": True}, CompileEnv())


@pytest.mark.parametrize("row", [r for r in _ROWS if r["label"].startswith("sensitive")],
                         ids=lambda r: f"{r['technique']}:{r['path']}")
def test_corpus_sensitive_row_is_denied(corpus_matcher: PathMatcher, row: dict[str, str]) -> None:
    assert corpus_matcher.check_path(row["path"]) is not None


@pytest.mark.parametrize("row", [r for r in _ROWS if r["label"] == "benign"],
                         ids=lambda r: r["path"])
def test_corpus_benign_row_is_allowed(corpus_matcher: PathMatcher, row: dict[str, str]) -> None:
    assert corpus_matcher.check_path(row["path"]) is None


# ------------------------------------------------------------------ unions of deny lists
# PathMatcher.union: one condition for the deny globs of many, finding nothing exactly when
# none of them would (the engine then passes over their rules together).

GLOBS = ["~/.ssh/**", "~/.aws/**", "/etc/shadow", "**/.env", "*.pem", "/proc/*/environ",
         "~/.config/gh/hosts.yml", "src/**", "/tmp/*", "**/id_rsa*", "~/.kube/config",
         "/var/run/docker.sock", "*.key", "~/.netrc", "/etc/**", "~/.git-credentials",
         "{~/.docker,~/.npmrc}/**", "/home/*/.bash_history", "build/[a-c]*.log"]


PATHS = [row["path"] for row in _ROWS]
READ = ToolProfile("read_file", kind="file.read", args={"path": "path"})
WRITE = ToolProfile("write_file", kind="file.write", args={"path": "path"})
GREP = ToolProfile("Grep", kind="file.read", args={"path": "path"})


def union_member(fs_root: str, *globs: str, **config: Any) -> PathMatcher:
    return PathMatcher({"deny": list(globs), "root": ROOT, "home": HOME, "fs_root": fs_root,
                        **config}, CompileEnv())


def union_subjects(path: str) -> list[Subject]:
    return [Subject(ToolCall("read_file", {"path": path}), READ),
            Subject(ToolCall("write_file", {"path": path, "content": "x"}), WRITE),
            Subject(ToolCall("Grep", {"path": path, "pattern": "key"}), GREP),
            Subject(ToolCall("Grep", {"path": ROOT, "glob": path, "pattern": "k"}), GREP),
            Subject(ToolCall("write_file", {"path": "a.txt", "destination": path}), WRITE)]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(chosen=st.lists(st.sampled_from(GLOBS), min_size=2, max_size=6, unique=True),
       case=st.booleans())
def test_a_union_finds_something_exactly_when_one_of_its_matchers_does(
        corpus_fs: Path, chosen: list[str], case: bool) -> None:
    members = [union_member(str(corpus_fs), glob, case_insensitive=case) for glob in chosen]
    union = PathMatcher.union(members)
    for path in PATHS:
        for subject in union_subjects(path):
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


def test_matchers_of_other_settings_are_not_one_group(corpus_fs: Path) -> None:
    fs_root = str(corpus_fs)
    plain = union_member(fs_root, "~/.ssh/**")
    assert plain.group_key == union_member(fs_root, "~/.aws/**").group_key
    for other in (union_member(fs_root, "~/.aws/**", case_insensitive=True),
                  union_member(fs_root, "~/.aws/**", resolve_symlinks=False),
                  union_member(fs_root, "~/.aws/**", root="/srv"),
                  union_member(fs_root, "~/.aws/**", home="/home/ops"),
                  union_member(fs_root, "~/.aws/**", args=["target"]),
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
    members = [union_member(str(tmp_path), "~/.ssh/**"), union_member(str(tmp_path), "~/.aws/**")]
    (tmp_path / "home/dev").unlink()
    (tmp_path / "home/dev").symlink_to("/other/dev")
    module._LOAD_TIME_RESOLVED.clear()
    union = PathMatcher.union(members)
    subject = Subject(ToolCall("read_file", {"path": "/data/dev/.aws/credentials"}), READ)
    assert members[1](subject) is not None
    assert union(Subject(subject.call, subject.profile)) is not None


# ------------------------------------------------------------------ case-folding filesystems


def test_whether_a_filesystem_folds_case_is_looked_up(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The directory's name with its case swapped is looked up: the same directory there is a
    filesystem that folds case (made here by a link, as this one tells case apart)."""
    from callwarden.analysis import paths as analysis_paths

    folds = analysis_paths.folds_case
    (tmp_path / "Workspace").mkdir()
    (tmp_path / "Folding").mkdir()
    (tmp_path / "fOLDING").symlink_to(tmp_path / "Folding")
    (tmp_path / "123").mkdir()
    folds.cache_clear()
    try:
        for platform in ("linux", "darwin"):  # looked up: the platform does not matter
            monkeypatch.setattr(analysis_paths.sys, "platform", platform)
            folds.cache_clear()
            assert folds(str(tmp_path / "Workspace")) is False
            assert folds(str(tmp_path / "Folding")) is True
            assert folds(str(tmp_path / "Folding" / "123")) is True  # its lettered part
            assert folds(str(tmp_path / "Workspace" / "123")) is False
        # Nothing to look up (no letters, no such directory): the platform's rule.
        for platform, rule in (("linux", False), ("darwin", True), ("win32", True)):
            monkeypatch.setattr(analysis_paths.sys, "platform", platform)
            folds.cache_clear()
            assert folds("/") is rule and folds(str(tmp_path / "No-such-dir")) is rule
    finally:
        folds.cache_clear()


def test_on_a_filesystem_that_folds_case_a_deny_catches_every_spelling(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """macOS and Windows as installed: ``~/.SSH/id_rsa`` is ``~/.ssh/id_rsa``, so a deny of
    ``~/.ssh/**`` denies it; a policy's own ``case_insensitive: false`` still stands."""
    from callwarden import Guard
    from callwarden.conditions import paths as condition_paths

    def policy() -> Guard:
        return Guard.from_dict({"version": 1, "deny": ["Read(~/.ssh/**)"], "rules": [
            {"id": "exact-case", "match": {"tool": "read_notes"},
             "paths": {"deny": ["~/.notes/**"], "case_insensitive": False}, "effect": "deny"}],
            "tools": {"read_notes": {"kind": "file.read", "path": "path"}}})

    here = policy()  # this machine's filesystem tells case apart: another file
    assert here.check("Read", {"file_path": "~/.SSH/id_rsa"}).effect == "allow"
    monkeypatch.setattr(condition_paths, "folds_case", lambda directory: True)
    folding = policy()
    for spelling in ("~/.SSH/id_rsa", "~/.Ssh/config", "~/.ssh/ID_RSA", "~/.ssh/id_rsa"):
        assert folding.check("Read", {"file_path": spelling}).rule == "deny:Read(~/.ssh/**)"
    assert folding.check("read_notes", {"path": "~/.notes/a"}).effect == "deny"
    assert folding.check("read_notes", {"path": "~/.NOTES/a"}).effect == "allow"


@pytest.mark.parametrize("args", [
    {"pattern": "~/.ssh/*"}, {"pattern": "/root-home/.ssh/*"}, {"pattern": "~/.ssh/id_*"},
    {"pattern": "/root-home/.s?h/*"}, {"pattern": ".ssh/*", "path": "/root-home"},
    {"pattern": "*", "path": "~/.ssh"}, {"pattern": "/.ssh/*", "path": "/root-home"}])
def test_a_glob_tool_listing_a_denied_folder_is_caught_however_it_is_anchored(
        args: dict[str, Any]) -> None:
    """A Glob tool reads a pattern from ``/`` or ``~`` as written (it listed ``~/.ssh`` when
    the pattern was joined to the search path); ripgrep's anchored ``/x`` is read too."""
    m = PathMatcher({"deny": ["~/.ssh/**"], "home": "/root-home", "root": "/work"},
                    CompileEnv())
    assert m(subject("Glob", args)) is not None, args


def test_a_glob_tool_elsewhere_stays_allowed() -> None:
    m = PathMatcher({"deny": ["~/.ssh/**"], "home": "/root-home", "root": "/work"},
                    CompileEnv())
    for args in ({"pattern": "/work/src/**/*.py"}, {"pattern": "~/projects/*"},
                 {"pattern": "**/*.md"}, {"pattern": "/src/*", "path": "/work"}):
        assert m(subject("Glob", args)) is None, args
