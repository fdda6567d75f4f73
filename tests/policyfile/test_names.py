"""Slips in kinds and permission names are load errors with "did you mean"; deliberate custom
names are declared in ``tools:``."""

from __future__ import annotations

import pytest

from callwarden import Effect, Guard, PolicyError


def problems(text: str) -> list[str]:
    with pytest.raises(PolicyError) as info:
        Guard.from_yaml(text)
    return [f"{p.message} ({p.hint})" for p in info.value.problems]


def loads(text: str) -> Guard:
    return Guard.from_yaml(text)


# --- kinds in match: ---------------------------------------------------------------------

@pytest.mark.parametrize(("kind", "suggestion"), [
    ("shel", "shell"), ("Shell", "shell"), ("file.raed", "file.read"), ("htp", "http"),
    ("fil.*", "file.*"),
])
def test_unknown_match_kind_is_an_error_with_did_you_mean(kind: str, suggestion: str) -> None:
    found = problems(f"version: 1\nrules:\n  - id: r\n    match: {{kind: '{kind}'}}\n")
    assert any(f"unknown kind '{kind}'" in p and f"did you mean '{suggestion}'" in p
               for p in found), found


@pytest.mark.parametrize("kind", ["shell", "file", "file.*", "file.read", "unknown", "mcp"])
def test_known_kinds_and_families_are_accepted_in_match(kind: str) -> None:
    guard = loads(f"version: 1\nrules:\n  - id: r\n    match: {{kind: '{kind}'}}\n")
    assert [r.id for r in guard.engine.rules] == ["r"]


def test_a_family_selects_every_kind_in_it() -> None:
    guard = loads("version: 1\nrules:\n  - id: no-files\n    match: {kind: file}\n")
    assert guard.check("read_file", {"path": "a"}).effect is Effect.DENY
    assert guard.check("write_file", {"path": "a"}).effect is Effect.DENY
    assert guard.check("fetch", {"url": "https://a.test"}).effect is Effect.ALLOW


def test_custom_kind_in_match_must_be_declared_in_tools() -> None:
    found = problems("version: 1\nrules:\n  - id: r\n    match: {kind: crm.write}\n")
    assert any("unknown kind 'crm.write'" in p and "declared in tools:" in p for p in found)


@pytest.mark.parametrize("kind", ["crm.write", "crm", "crm.*"])
def test_declared_custom_kind_and_its_family_are_accepted(kind: str) -> None:
    guard = loads("version: 1\ntools:\n  crm_update: {kind: crm.write}\nrules:\n"
                  f"  - id: r\n    match: {{kind: '{kind}'}}\n    effect: ask\n")
    assert guard.check("crm_update", {}).effect is Effect.ASK


# --- kinds in tools: ---------------------------------------------------------------------

@pytest.mark.parametrize(("kind", "suggestion"), [
    ("shel", "shell"), ("Shell", "shell"), ("file.raed", "file.read"), ("File.Read", "file.read"),
])
def test_profile_kind_slip_is_an_error_with_did_you_mean(kind: str, suggestion: str) -> None:
    found = problems(f"version: 1\ntools:\n  runner: {{kind: '{kind}'}}\n")
    assert any(f"did you mean '{suggestion}'" in p for p in found), found


@pytest.mark.parametrize("kind", ["crm.write", "http.post", "file.delete", "mcp.admin"])
def test_dotted_custom_profile_kinds_are_accepted(kind: str) -> None:
    guard = loads(f"version: 1\ntools:\n  t: {{kind: '{kind}'}}\n")
    assert guard.profile("t").kind == kind


# --- permission names --------------------------------------------------------------------

@pytest.mark.parametrize(("name", "suggestion"), [
    ("Bsh", "Bash"), ("bash", "Bash"), ("BASH", "Bash"), ("read", "Read"), ("WebFech", "WebFetch"),
    ("Wrte", "Write"), ("grep", "Grep"),
])
def test_permission_name_that_looks_built_in_is_an_error(name: str, suggestion: str) -> None:
    found = problems(f'version: 1\ndeny: ["{name}(x *)"]\n')
    assert any(f"unknown permission name '{name}'" in p and f"did you mean '{suggestion}'" in p
               and "declare it under tools:" in p for p in found), found


def test_bare_permission_name_slip_is_an_error_too() -> None:
    assert any("did you mean 'Bash'" in p for p in problems('version: 1\nask: ["bash"]\n'))


@pytest.mark.parametrize("item", ["Task", "LS", "TodoWrite", "sh(rm *)", "mcp__github__*",
                                  "delete_repo", "Bash(rm -rf *)", "WebFetch(domain:x.test)"])
def test_well_known_tool_names_and_built_ins_are_no_slip(item: str) -> None:
    guard = loads(f'version: 1\ndeny: ["{item}"]\n')
    assert len(guard.engine.rules) == 1


def test_declared_tool_named_like_a_built_in_is_accepted() -> None:
    guard = loads('version: 1\ntools:\n  bash: {kind: shell}\ndeny: ["bash(rm -rf *)"]\n')
    assert len(guard.engine.rules) == 1


def test_declared_tool_pattern_is_read_by_its_kind_not_as_text() -> None:
    guard = loads('version: 1\ntools:\n  bash: {kind: shell}\ndeny: ["bash(rm -rf *)"]\n')
    assert guard.check("bash", {"command": "ls && rm -rf /"}).effect is Effect.DENY
    assert guard.check("bash", {"command": "rm -fr build"}).effect is Effect.DENY
    assert guard.check("bash", {"command": "ls -la"}).effect is Effect.ALLOW


def test_declared_tool_pattern_governs_that_tool_only() -> None:
    guard = loads('version: 1\ntools:\n  bash: {kind: shell}\ndeny: ["bash(rm -rf *)"]\n')
    assert guard.check("run_shell_command", {"command": "rm -rf /"}).effect is Effect.ALLOW


def test_declared_tool_allow_string_covers_only_what_its_patterns_cover() -> None:
    guard = loads("version: 1\ndefault: deny\ntools:\n  bash: {kind: shell}\n"
                  'allow: ["bash(ls *)"]\n')
    assert guard.check("bash", {"command": "ls -la"}).effect is Effect.ALLOW
    assert guard.check("bash", {"command": "ls && rm -rf /"}).effect is Effect.DENY


def test_pattern_on_a_tool_with_no_primary_argument_is_an_error() -> None:
    found = problems('version: 1\ntools:\n  crm_update: {kind: crm.write}\n'
                     'deny: ["crm_update(acme*)"]\n')
    assert any("has no argument a pattern can match" in p for p in found), found


def test_pattern_on_an_unknown_tool_is_an_error_naming_tools() -> None:
    found = problems('version: 1\ndeny: ["deploy_service(prod*)"]\n')
    assert any("has no argument a pattern can match" in p and "tools:" in p for p in found)


def test_pattern_on_a_well_known_tool_name_is_read_by_its_default_kind() -> None:
    guard = loads('version: 1\ndeny: ["run_shell_command(rm -rf *)"]\n')
    assert guard.check("run_shell_command", {"command": "ls && rm -rf /"}).effect is Effect.DENY


@pytest.mark.parametrize("command", ["rm -rf /", "rm x", "rm", "ls && rm -fr ~"])
def test_gemini_shell_pattern_is_a_prefix_of_whole_words_as_gemini_reads_it(command: str) -> None:
    """Gemini CLI's run_shell_command(rm) is every rm command; read exactly, rm -rf / passed."""
    guard = loads('version: 1\ndeny: ["run_shell_command(rm)"]\n')
    assert guard.check("run_shell_command", {"command": command}).effect is Effect.DENY


def test_gemini_shell_prefix_is_of_whole_words() -> None:
    guard = loads('version: 1\ndeny: ["run_shell_command(rm)"]\n')
    assert guard.check("run_shell_command", {"command": "rmdir build"}).effect is Effect.ALLOW


def test_gemini_shell_allow_prefix_still_needs_every_part_covered() -> None:
    guard = loads('version: 1\ndefault: deny\nallow: ["run_shell_command(git status)"]\n')
    assert guard.check("run_shell_command", {"command": "git status --short"}).effect \
        is Effect.ALLOW
    assert guard.check("run_shell_command", {"command": "git status && rm x"}).effect \
        is Effect.DENY


def test_a_claude_code_shell_pattern_stays_exact() -> None:
    guard = loads('version: 1\ndeny: ["Bash(git push)"]\n')
    assert guard.check("Bash", {"command": "git push"}).effect is Effect.DENY
    assert guard.check("Bash", {"command": "git push origin"}).effect is Effect.ALLOW


def test_glob_of_tool_names_with_a_pattern_still_matches_text() -> None:
    guard = loads('version: 1\ndeny: ["mcp__fs__*(/etc/*)"]\n')
    assert guard.check("mcp__fs__read_file", {"path": "/etc/passwd"}).effect is Effect.DENY
    assert guard.check("mcp__fs__read_file", {"path": "/tmp/x"}).effect is Effect.ALLOW


def test_slips_in_an_extended_policy_are_reported_in_that_file(tmp_path) -> None:
    (tmp_path / "base.yaml").write_text('version: 1\ndeny: ["Bsh(rm *)"]\n')
    (tmp_path / "p.yaml").write_text("version: 1\nextends: base.yaml\n")
    with pytest.raises(PolicyError) as info:
        Guard.from_file(tmp_path / "p.yaml")
    assert f"{tmp_path / 'base.yaml'}:2" in str(info.value)
    assert "did you mean 'Bash'" in str(info.value)


@pytest.mark.parametrize("effect", ["deny", "ask", "allow"])
def test_an_mcp_servers_name_alone_covers_every_tool_of_that_server(effect: str) -> None:
    """``mcp__github`` is every tool of the github server, as Claude Code reads it (it used
    to name a tool called exactly that, so a deny of the server let its tools through)."""
    default = "deny" if effect == "allow" else "allow"
    guard = loads(f'version: 1\ndefault: {default}\n{effect}: ["mcp__github"]\n')
    for tool in ("mcp__github__create_issue", "mcp__github__delete_repo", "mcp__github"):
        decision = guard.check(tool, {})
        assert (decision.effect, decision.rule) == (effect, f"{effect}:mcp__github"), tool
    for other in ("mcp__github_enterprise__create_issue", "mcp__gitlab__create_issue",
                  "mcp__githubx"):
        assert guard.check(other, {}).effect == default, other


def test_an_mcp_tools_full_name_stays_that_tool_alone() -> None:
    guard = loads('version: 1\ndeny: ["mcp__github__delete_repo"]\n')
    assert guard.check("mcp__github__delete_repo", {}).effect == "deny"
    assert guard.check("mcp__github__delete_repo_x", {}).effect == "allow"
    assert guard.check("mcp__github__delete_repo__v2", {}).effect == "allow"


@pytest.mark.parametrize(("permission", "tool", "args"), [
    ("ShellTool(rm -rf)", "run_shell_command", {"command": "rm -rf /"}),
    ("ReadFileTool", "read_file", {"absolute_path": "/tmp/notes.txt"}),
    ("WriteFileTool(/etc/**)", "write_file", {"file_path": "/etc/hosts", "content": "x"}),
    ("WebFetchTool", "web_fetch", {"prompt": "summarize https://example.org"}),
])
def test_gemini_class_names_govern_the_tools_the_model_calls(permission: str, tool: str,
                                                            args: dict[str, object]) -> None:
    """Gemini CLI's settings name tools by class too (excludeTools: ["ShellTool(rm -rf)"]):
    declared as a tool of its own, ShellTool(...) governed a tool nobody calls."""
    guard = loads(f'version: 1\ndeny: ["{permission}"]\n')
    assert guard.check(tool, args).effect is Effect.DENY


def test_a_gemini_class_names_pattern_still_reads_as_its_tools() -> None:
    guard = loads('version: 1\ndeny: ["ShellTool(rm -rf)", "WriteFileTool(/etc/**)"]\n')
    assert guard.check("run_shell_command", {"command": "ls -la"}).effect is Effect.ALLOW
    assert guard.check("write_file", {"file_path": "/tmp/x", "content": "x"}).effect \
        is Effect.ALLOW
