"""Python policies and providers: the protocol, the @policy decorator, and failing closed."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from pathlib import Path

import pytest

from callwarden import Decision, Effect, FrozenDict, Guard, PolicyError, Verdict, policy

PROVIDERS = Path(__file__).parents[1] / "fixtures" / "providers"
sys.path.insert(0, str(PROVIDERS))

import house_rules  # noqa: E402, F401  (makes the module importable by name for the loader)


def use(target: str, *, timeout: str = "300ms", on_error: str | None = None, **extra) -> Guard:
    rule = {"id": "p", "use": target, **extra}
    if on_error:
        rule["on_error"] = on_error
    return Guard.from_dict({"version": 1, "timeout": timeout, "rules": [rule]})


def both(guard: Guard, tool: str, args: dict) -> list[Decision]:
    """Decides the same call through check and acheck."""
    return [guard.check(tool, args), asyncio.run(guard.acheck(tool, args))]


def test_provider_loaded_by_class_path_with_config_kwargs() -> None:
    g = use("house_rules:MaxAmount", config={"limit": 100, "message": "Ask finance."})
    for d in both(g, "pay", {"amount": 500}):
        assert d.effect is Effect.DENY
        assert d.message == "Ask finance."
        assert d.reasons[0].code == "amount.too_high"
    assert g.check("pay", {"amount": 5}).effect is Effect.ALLOW


def test_provider_loaded_from_a_file_next_to_the_policy(tmp_path: Path) -> None:
    (tmp_path / "guards.py").write_text(
        "from callwarden import Verdict\n"
        "def deny_all(call):\n    return Verdict.deny('nope')\n")
    policy_file = tmp_path / "p.yaml"
    policy_file.write_text("version: 1\nrules:\n  - id: x\n    use: guards.py:deny_all\n")
    assert Guard.from_file(policy_file).check("t", {}).effect is Effect.DENY


def test_decorated_function_used_from_the_policy_file() -> None:
    g = use("house_rules:no_prod_deploys")
    assert [d.effect for d in both(g, "deploy", {"env": "prod"})] == [Effect.DENY] * 2
    assert g.check("deploy", {"env": "dev"}).effect is Effect.ALLOW


def test_plain_function_receives_config_as_keywords() -> None:
    g = use("house_rules:plain_function", config={"tool_prefix": "danger_"})
    assert g.check("danger_x", {}).effect is Effect.DENY
    assert g.check("safe", {}).effect is Effect.ALLOW


def test_mutating_provider_rewrites_args_before_validation() -> None:
    g = Guard.from_dict({"version": 1, "rules": [
        {"id": "dry", "use": "house_rules:add_dry_run"},
        {"id": "need-dry", "match": {"tool": "deploy"}, "args": {"dry_run": False},
         "effect": "deny"},
    ]})
    for d in both(g, "deploy", {"dry_run": False}):
        assert d.effect is Effect.MODIFY
        assert d.args["dry_run"] is True


def test_async_only_provider_works_in_check_and_acheck() -> None:
    g = use("house_rules:AsyncOnly")
    assert [d.effect for d in both(g, "t", {"ask": True})] == [Effect.ASK] * 2
    assert [d.effect for d in both(g, "t", {})] == [Effect.ALLOW] * 2


@pytest.mark.parametrize(
    ("target", "code"),
    [
        ("house_rules:Raises", "policy_error"),
        ("house_rules:Garbage", "policy_invalid_result"),
        ("house_rules:Hangs", "policy_timeout"),
        ("house_rules:AsyncHangs", "policy_timeout"),
    ],
)
def test_failing_provider_fails_closed_with_a_distinct_code(target: str, code: str) -> None:
    g = use(target, timeout="100ms")
    for d in both(g, "t", {}):
        assert d.effect is Effect.DENY
        assert d.reasons[0].code == code
        assert d.rule == "p"


def test_a_hanging_provider_does_not_hold_the_decision_past_the_deadline() -> None:
    g = use("house_rules:Hangs", timeout="100ms")
    started = time.monotonic()
    g.check("t", {})
    asyncio.run(g.acheck("t", {}))
    # Two decisions with a 100 ms deadline each; the provider sleeps 5 s.
    assert time.monotonic() - started < 4


def test_on_error_halt_and_per_rule_override() -> None:
    assert use("house_rules:Raises", on_error="halt").check("t", {}).effect is Effect.HALT
    g = Guard.from_dict({"version": 1, "on_error": "halt",
                         "rules": [{"id": "p", "use": "house_rules:Raises", "on_error": "deny"}]})
    assert g.check("t", {}).effect is Effect.DENY


def test_on_error_allow_is_an_explicit_fail_open_that_is_still_recorded() -> None:
    d = use("house_rules:Raises", on_error="allow").check("t", {})
    assert d.effect is Effect.ALLOW
    assert any(r.code == "policy_error" for r in d.reasons)


def test_broken_provider_cannot_override_another_rules_deny() -> None:
    g = Guard.from_dict({"version": 1, "on_error": "allow", "rules": [
        {"id": "p", "use": "house_rules:Raises"},
        {"id": "no", "effect": "deny"},
    ]})
    assert g.check("t", {}).effect is Effect.DENY


def test_modify_from_a_validate_phase_policy_is_an_error() -> None:
    @policy
    def sneaky(call):
        return Verdict.modify({"x": 1})

    d = Guard.from_dict({"version": 1}, policies=[sneaky]).check("t", {})
    assert d.effect is Effect.DENY
    assert d.reasons[0].code == "policy_invalid_result"
    assert "phase: mutate" in d.reasons[0].message


@pytest.mark.parametrize("is_async", [False, True])
def test_python_policy_on_a_guard_sync_and_async(is_async: bool) -> None:
    if is_async:
        @policy
        async def limit(call):
            await asyncio.sleep(0)
            return Verdict.deny("too many") if call.args.get("n", 0) > 3 else None
    else:
        @policy
        def limit(call):
            return Verdict.deny("too many") if call.args.get("n", 0) > 3 else None

    g = Guard(policies=[limit])
    assert [d.effect for d in both(g, "t", {"n": 5})] == [Effect.DENY] * 2
    assert [d.effect for d in both(g, "t", {"n": 1})] == [Effect.ALLOW] * 2


def test_policy_receives_the_profile_in_ctx() -> None:
    seen = []

    @policy
    def spy(call, ctx):
        seen.append(ctx.profile.kind)

    Guard(policies=[spy]).check("bash", {"command": "ls"})
    assert seen == ["shell"]


def test_policy_may_return_a_bare_effect_or_a_decision() -> None:
    @policy
    def bare(call):
        return Effect.ASK

    assert Guard(policies=[bare]).check("t", {}).effect is Effect.ASK
    inner = Guard.from_dict({"version": 1, "rules": [{"id": "x", "effect": "halt"}]})

    @policy
    def delegate(call):
        return inner.check(call.tool, call.args)

    assert Guard(policies=[delegate]).check("t", {}).effect is Effect.HALT


def test_object_with_evaluate_is_a_policy_without_a_base_class() -> None:
    class Deny:
        def evaluate(self, call, ctx):
            return Verdict.deny("no")

    assert Guard(policies=[Deny()]).check("t", {}).effect is Effect.DENY


def test_policy_mutating_the_args_it_sees_is_refused_and_fails_closed() -> None:
    @policy
    def mutate(call):
        call.args["x"] = 1

    d = Guard(policies=[mutate]).check("t", {"x": 0})
    assert d.effect is Effect.DENY
    assert d.reasons[0].code == "policy_error"
    assert d.args["x"] == 0


def test_on_error_allow_ignores_the_failed_rule_but_never_overrides_default_deny() -> None:
    g = Guard.from_dict({"version": 1, "default": "deny", "on_error": "allow",
                         "rules": [{"id": "p", "use": "house_rules:Raises"}]})
    d = g.check("t", {})
    assert d.effect is Effect.DENY and d.rule == "default"
    assert any(r.code == "policy_error" for r in d.reasons)


def test_acheck_runs_a_sync_policy_function_off_the_event_loop() -> None:
    started, loop_ran = threading.Event(), threading.Event()
    seen = []

    @policy
    def waits_for_the_loop(call):
        started.set()
        seen.append(loop_ran.wait(3))  # the loop can only set it if the policy does not block it

    async def main() -> None:
        async def other_task() -> None:
            while not started.is_set():
                await asyncio.sleep(0)
            loop_ran.set()

        await asyncio.gather(Guard(policies=[waits_for_the_loop], timeout="10s").acheck("t", {}),
                             other_task())

    asyncio.run(main())
    assert seen == [True]


def test_acheck_decides_at_the_deadline_while_a_sync_policy_function_hangs() -> None:
    release, finished = threading.Event(), threading.Event()

    @policy
    def hangs(call):
        release.wait(3)
        finished.set()

    try:
        d = asyncio.run(Guard(policies=[hangs], timeout="100ms").acheck("t", {}))
        assert not finished.is_set()  # returned before the 3 s wait ended
    finally:
        release.set()
    assert d.effect is Effect.DENY
    assert d.reasons[0].code == "policy_timeout"


def _cyclic() -> dict:
    node: dict = {}
    node["self"] = node
    return node


def _deep(levels: int) -> dict:
    root: dict = {}
    node = root
    for _ in range(levels):
        node["x"] = {}
        node = node["x"]
    return root


@pytest.mark.parametrize("bad", ["x", [1, 2], 42, _cyclic(), _deep(100)],
                         ids=["string", "list", "int", "cyclic", "100-deep"])
def test_mutate_policy_returning_unusable_args_fails_closed_naming_the_rule(bad) -> None:
    @policy(phase="mutate")
    def bad_rewrite(call):
        return Verdict.modify(bad)

    for d in both(Guard(policies=[bad_rewrite]), "t", {"a": 1}):
        assert d.effect is Effect.DENY
        assert d.reasons[0].code == "policy_invalid_result"
        assert "bad_rewrite" in d.reasons[0].message
        assert dict(d.args) == {"a": 1}


def test_mutate_policy_returning_unusable_args_follows_on_error() -> None:
    @policy(phase="mutate")
    def bad_rewrite(call):
        return Verdict.modify([1, 2])

    assert Guard(policies=[bad_rewrite], on_error="halt").check("t", {}).effect is Effect.HALT


def test_mutate_policy_rewrite_is_refrozen_even_when_built_as_a_frozen_dict() -> None:
    live = [1]

    @policy(phase="mutate")
    def rewrite(call):
        return Verdict.modify(FrozenDict({"items": live}))

    d = Guard(policies=[rewrite]).check("t", {})
    live.append(2)
    assert d.args["items"] == (1,)


# -- loading a provider runs no code it should not -----------------------------------------


def _policy_file(folder: Path, use_line: str, config: str = "") -> Path:
    path = folder / "p.yaml"
    path.write_text(f"version: 1\nrules:\n  - id: p\n    use: {use_line}\n{config}")
    return path


def test_a_class_without_evaluate_is_never_instantiated(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    path = _policy_file(tmp_path, "subprocess:Popen",
                        f'    config: {{args: "touch {marker}", shell: true}}\n')
    with pytest.raises(PolicyError) as info:
        Guard.from_file(path)
    assert not marker.exists()
    problem = info.value.problems[0]
    assert "is not a policy" in problem.message
    assert (problem.line, problem.key) == (4, "rules[0].use")


@pytest.mark.parametrize("target", ["os:getcwd", "builtins:print", "collections:OrderedDict"])
def test_builtins_and_other_classes_are_not_policies(target: str) -> None:
    with pytest.raises(PolicyError, match="is not a policy"):
        use(target)


def test_a_special_attribute_is_never_looked_up() -> None:
    with pytest.raises(PolicyError, match="names a special attribute"):
        use("house_rules:MaxAmount.__init__")


def test_instantiate_checks_the_protocol_before_calling_a_class() -> None:
    from callwarden.engine.user import instantiate

    calls = []

    class NotAPolicy:
        def __init__(self) -> None:
            calls.append("init")

    with pytest.raises(TypeError, match="not a policy"):
        instantiate(NotAPolicy, {})
    assert calls == []


def test_an_applications_own_callable_object_still_works_as_a_guard_policy() -> None:
    import functools

    def deny_tool(call, ctx, *, tool):
        return Verdict.deny("no") if call.tool == tool else None

    g = Guard(policies=[functools.partial(deny_tool, tool="rm")])
    assert g.check("rm", {}).effect is Effect.DENY
    assert g.check("ls", {}).effect is Effect.ALLOW


# -- providers="check": lint imports nothing ----------------------------------------------------


def _side_effect_module(folder: Path) -> Path:
    (folder / "guards.py").write_text(
        "from pathlib import Path\n"
        "Path(__file__).with_name('imported').touch()\n"
        "class Deny:\n    def evaluate(self, call, ctx):\n        return None\n")
    return folder / "imported"


def test_check_mode_imports_and_instantiates_nothing(tmp_path: Path) -> None:
    from callwarden.policyfile import load_policy_file

    marker = _side_effect_module(tmp_path)
    path = _policy_file(tmp_path, "guards.py:Deny", "    config: {x: 1}\n")
    loaded = load_policy_file(path, providers="check")
    assert not marker.exists()
    assert [r.id for r in loaded.rules] == ["p"]
    assert "not imported" in loaded.notes[0].message
    assert loaded.notes[0].line == 4


def test_load_mode_is_the_default_and_imports(tmp_path: Path) -> None:
    marker = _side_effect_module(tmp_path)
    with pytest.raises(PolicyError, match="cannot create the policy"):  # Deny takes no x
        Guard.from_file(_policy_file(tmp_path, "guards.py:Deny", "    config: {x: 1}\n"))
    assert marker.exists()


def test_check_mode_still_reports_a_malformed_target(tmp_path: Path) -> None:
    from callwarden.policyfile import load_policy_file

    with pytest.raises(PolicyError, match="is not a module name"):
        load_policy_file(_policy_file(tmp_path, '"not a module:x"'), providers="check")


def test_a_provider_not_loaded_fails_closed_if_asked_to_decide(tmp_path: Path) -> None:
    from callwarden.policyfile import load_policy_file

    _side_effect_module(tmp_path)
    loaded = load_policy_file(_policy_file(tmp_path, "guards.py:Deny"), providers="check")
    decision = Guard.from_loaded(loaded).check("t", {})
    assert decision.effect is Effect.DENY
    assert decision.reasons[0].code == "policy_error"


def test_check_mode_skips_the_examples_and_says_so(tmp_path: Path) -> None:
    from callwarden.policyfile import load_policy_file

    marker = _side_effect_module(tmp_path)
    path = tmp_path / "p.yaml"
    path.write_text("version: 1\nrules:\n  - id: p\n    use: guards.py:Deny\n"
                    "  - id: q\n    match: {tool: x}\n    examples:\n"
                    "      deny: [{tool: x}]\n")
    loaded = load_policy_file(path, providers="check")
    assert not marker.exists()
    assert any("inline example(s) not run" in n.message for n in loaded.notes)


def test_check_mode_does_not_import_audit_targets(tmp_path: Path) -> None:
    from callwarden.policyfile import load_policy_file

    (tmp_path / "sink.py").write_text(
        "from pathlib import Path\nPath(__file__).with_name('imported').touch()\n"
        "def ship(event):\n    pass\n")
    path = tmp_path / "p.yaml"
    path.write_text("version: 1\naudit:\n  - {callable: sink.py:ship}\n")
    load_policy_file(path, providers="check")
    assert not (tmp_path / "imported").exists()
    load_policy_file(path)
    assert (tmp_path / "imported").exists()


# -- CALLWARDEN_PROVIDERS / allowed_providers ------------------------------------------------


def test_allowlist_from_the_environment_refuses_other_modules(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CALLWARDEN_PROVIDERS", "mycompany.guards, ./providers")
    path = _policy_file(tmp_path, "house_rules:MaxAmount", "    config: {limit: 1}\n")
    with pytest.raises(PolicyError) as info:
        Guard.from_file(path)
    problem = info.value.problems[0]
    assert "'house_rules:MaxAmount' is not an allowed provider" in problem.message
    assert (problem.line, problem.key) == (4, "rules[0].use")
    assert "mycompany.guards, ./providers" in (problem.hint or "")


def test_allowlist_is_checked_in_check_mode_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from callwarden.policyfile import load_policy_file

    monkeypatch.setenv("CALLWARDEN_PROVIDERS", "mycompany")
    with pytest.raises(PolicyError, match="not an allowed provider"):
        load_policy_file(_policy_file(tmp_path, "house_rules:MaxAmount"), providers="check")


def test_empty_allowlist_refuses_every_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CALLWARDEN_PROVIDERS", "")
    with pytest.raises(PolicyError, match="allows only: nothing"):
        use("house_rules:no_prod_deploys")


def test_unset_allowlist_allows_anything(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CALLWARDEN_PROVIDERS", raising=False)
    assert use("house_rules:no_prod_deploys").check("deploy", {"env": "prod"}).effect \
        is Effect.DENY


@pytest.mark.parametrize(("entry", "allowed"), [
    ("house_rules", True), ("house", False), ("house_rules.sub", False), ("other,house_rules", True),
])
def test_allowlist_module_entries_are_dotted_prefixes(
        entry: str, allowed: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CALLWARDEN_PROVIDERS", entry)
    if allowed:
        use("house_rules:no_prod_deploys")
    else:
        with pytest.raises(PolicyError, match="not an allowed provider"):
            use("house_rules:no_prod_deploys")


def test_allowlist_folder_entry_allows_files_inside_it_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CALLWARDEN_PROVIDERS", "./providers")
    (tmp_path / "providers").mkdir()
    code = "from callwarden import Verdict\ndef deny_all(call):\n    return Verdict.deny('no')\n"
    (tmp_path / "providers" / "g.py").write_text(code)
    (tmp_path / "g.py").write_text(code)
    inside = _policy_file(tmp_path, "providers/g.py:deny_all")
    assert Guard.from_file(inside).check("t", {}).effect is Effect.DENY
    for target in ("g.py:deny_all", "providers/../g.py:deny_all"):
        with pytest.raises(PolicyError, match="not an allowed provider"):
            Guard.from_file(_policy_file(tmp_path, target))


def test_allowed_providers_keyword_replaces_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from callwarden.policyfile import load_policy_file

    monkeypatch.setenv("CALLWARDEN_PROVIDERS", "")
    path = _policy_file(tmp_path, "house_rules:no_prod_deploys")
    load_policy_file(path, allowed_providers=["house_rules"])
    with pytest.raises(PolicyError, match="not an allowed provider"):
        load_policy_file(path, allowed_providers=[])


def test_allowlist_covers_audit_callable_sinks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CALLWARDEN_PROVIDERS", "mycompany")
    path = tmp_path / "p.yaml"
    path.write_text("version: 1\naudit:\n  sinks:\n    - {callable: house_rules:plain_function}\n")
    with pytest.raises(PolicyError) as info:
        Guard.from_file(path)
    assert "not an allowed provider" in info.value.problems[0].message
    assert info.value.problems[0].line == 4


def test_an_unknown_providers_mode_is_refused_rather_than_importing() -> None:
    from callwarden.exceptions import ConfigError
    from callwarden.policyfile import compile_policy

    with pytest.raises(ConfigError, match="'load' or 'check'"):
        compile_policy({"version": 1}, providers="none")  # type: ignore[arg-type]
