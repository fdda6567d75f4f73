"""run / arun / protect: tools run only when allowed, with the effective arguments."""

from __future__ import annotations

import pytest

from callwarden import ApprovalRequired, Effect, Guard, RunHalted, ToolDenied, policy


@pytest.fixture
def guard() -> Guard:
    return Guard.from_dict({"version": 1, "rules": [
        {"id": "no-prod", "match": {"tool": "deploy"}, "args": {"env": "prod"}, "effect": "deny",
         "message": "Deploy to staging."},
        {"id": "pay", "match": {"tool": "pay"}, "effect": "ask"},
        {"id": "stop", "match": {"tool": "drop_db"}, "effect": "halt"},
        {"id": "cap", "match": {"tool": "search"}, "effect": "modify", "cap": {"limit": 10}},
    ]})


def test_run_calls_the_tool_with_args_when_allowed(guard: Guard) -> None:
    assert guard.run("deploy", {"env": "dev"}, lambda env: f"deployed {env}") == "deployed dev"


def test_run_passes_rewritten_args(guard: Guard) -> None:
    assert guard.run("search", {"q": "x", "limit": 99}, lambda q, limit: limit) == 10


@pytest.mark.parametrize(("tool", "exc", "effect"), [
    ("deploy", ToolDenied, Effect.DENY),
    ("pay", ApprovalRequired, Effect.ASK),
    ("drop_db", RunHalted, Effect.HALT),
])
def test_run_raises_with_the_decision_and_never_calls_the_tool(guard, tool, exc, effect) -> None:
    ran = []
    with pytest.raises(exc) as info:
        guard.run(tool, {"env": "prod"}, lambda **kw: ran.append(kw))
    assert ran == []
    assert info.value.decision.effect is effect


@pytest.mark.parametrize(("tool", "exc"), [
    ("deploy", ToolDenied), ("pay", ApprovalRequired), ("drop_db", RunHalted)])
async def test_arun_raises_and_never_awaits_the_tool(guard, tool, exc) -> None:
    ran = []

    async def body(**kw):
        ran.append(kw)

    with pytest.raises(exc):
        await guard.arun(tool, {"env": "prod"}, body)
    assert ran == []


async def test_arun_awaits_async_tools_and_calls_sync_ones(guard: Guard) -> None:
    async def async_tool(q, limit):
        return limit

    assert await guard.arun("search", {"q": "x", "limit": 50}, async_tool) == 10
    assert await guard.arun("search", {"q": "x", "limit": 5}, lambda q, limit: limit) == 5


def test_denied_exception_message_is_the_message_for_the_model(guard: Guard) -> None:
    with pytest.raises(ToolDenied, match=r"Deploy to staging\."):
        guard.run("deploy", {"env": "prod"}, lambda **kw: None)


def test_protect_guards_a_sync_function_named_after_it(guard: Guard) -> None:
    calls = []

    @guard.protect
    def deploy(env: str, dry_run: bool = False) -> str:
        calls.append((env, dry_run))
        return env

    assert deploy("dev") == "dev"
    with pytest.raises(ToolDenied):
        deploy(env="prod")
    assert calls == [("dev", False)]
    assert deploy.__name__ == "deploy"


async def test_protect_guards_an_async_function_with_a_tool_name(guard: Guard) -> None:
    @guard.protect(tool="search")
    async def find(q: str, limit: int = 100) -> int:
        return limit

    assert await find("x") == 10


def test_protect_passes_context_fields() -> None:
    g = Guard.from_dict({"version": 1, "rules": [
        {"id": "interns", "match": {"agent": "intern"}, "effect": "deny"}]})

    @g.protect(agent="intern")
    def anything() -> str:
        return "ran"

    with pytest.raises(ToolDenied):
        anything()


def test_protect_handles_var_keyword_arguments(guard: Guard) -> None:
    @guard.protect(tool="search")
    def find(q: str, **options) -> dict:
        return options

    assert find("x", limit=50, lang="en") == {"limit": 10, "lang": "en"}


def test_check_puts_extra_keywords_into_context(guard: Guard) -> None:
    d = guard.check("t", {}, agent="a", session="s", principal="p", framework="f",
                    user_request="tidy up")
    assert (d.call.agent, d.call.session, d.call.principal, d.call.framework) == ("a", "s", "p", "f")
    assert d.call.context["user_request"] == "tidy up"


class _Client:
    def __init__(self) -> None:
        self.sent: list[str] = []


def test_protect_method_changes_its_own_instance() -> None:
    g = Guard.from_dict({"version": 1})

    class Svc:
        count = 0

        @g.protect
        def bump(self, n: int) -> None:
            self.count += n

    s = Svc()
    s.bump(5)
    assert s.count == 5


async def test_protect_async_method_changes_its_own_instance() -> None:
    g = Guard.from_dict({"version": 1})

    class Svc:
        count = 0

        @g.protect
        async def bump(self, n: int) -> None:
            self.count += n

    s = Svc()
    await s.bump(5)
    assert s.count == 5


def test_protect_leaves_self_and_cls_out_of_the_policy_args() -> None:
    seen = []

    @policy(isolated=False)
    def spy(call):
        seen.append(sorted(call.args))

    g = Guard(policies=[spy])

    class Svc:
        @g.protect
        def bump(self, n: int) -> int:
            return n

        @classmethod
        @g.protect
        def make(cls, n: int) -> int:
            return n

    assert Svc().bump(1) == 1 and Svc.make(2) == 2
    assert seen == [["n"], ["n"]]


def test_protect_passes_what_was_decided_not_the_callers_live_objects() -> None:
    g = Guard.from_dict({"version": 1})
    received = []

    @g.protect
    def send(client: _Client, msg: str) -> None:
        client.sent.append(msg)
        received.append(client)

    client = _Client()
    send(client, "hi")
    assert client.sent == [] and received[0] is not client and received[0].sent == ["hi"]


def test_protect_passes_rewritten_values() -> None:
    g = Guard.from_dict({"version": 1, "rules": [
        {"id": "cap", "match": {"tool": "send"}, "effect": "modify", "cap": {"limit": 10}}]})

    @g.protect
    def send(msg: str, limit: int) -> int:
        return limit

    assert send("hi", 99) == 10


def test_protect_hands_the_function_the_object_the_policy_inspected() -> None:
    inspected = []

    @policy(isolated=False)
    def spy(call):
        inspected.append(call.args["client"].unwrap())

    g = Guard(policies=[spy])
    received = []

    @g.protect
    def send(client: _Client, msg: str) -> None:
        received.append(client)

    send(_Client(), "hi")
    assert received[0] is inspected[0]


def test_protect_runs_the_approved_list_not_one_edited_while_pending() -> None:
    """A person approved to=['alice']; the caller then appended 'mallory' to its own list
    while the approval was pending: the function must get what was approved."""
    g = Guard.from_dict({"version": 1, "rules": [
        {"id": "mail-asks", "match": {"tool": "send_mail"}, "effect": "ask"}]})
    recipients = ["alice"]
    sent = []

    def approver(request):
        recipients.append("mallory")  # the caller's list changes while the person looks
        return True

    @g.protect(approver=approver)
    def send_mail(to: list[str]) -> None:
        sent.append(list(to))

    send_mail(recipients)
    assert sent == [["alice"]]


def test_protect_handles_var_positional_arguments() -> None:
    g = Guard.from_dict({"version": 1})

    @g.protect
    def total(first: int, *rest: int) -> int:
        return first + sum(rest)

    assert total(1, 2, 3) == 6


def test_run_with_an_async_tool_raises_a_type_error_pointing_to_arun(guard: Guard) -> None:
    ran = []

    async def tool(env: str) -> None:
        ran.append(env)

    with pytest.raises(TypeError, match=r"guard\.arun"):
        guard.run("deploy", {"env": "dev"}, tool)
    assert ran == []
