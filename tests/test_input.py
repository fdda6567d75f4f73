"""Bad input ends in a decision or a clear error, never a crash or a hang; snapshots are immutable."""

from __future__ import annotations

import asyncio
import datetime
import threading

import pytest

from callwarden import Effect, FrozenDict, Guard, ToolCall, ToolDenied, Verdict, policy, thaw
from callwarden.exceptions import InvalidCall


@pytest.fixture
def guard() -> Guard:
    return Guard.from_dict({"version": 1, "rules": [
        {"id": "no-prod", "match": {"tool": "deploy"}, "args": {"env": "prod"}, "effect": "deny"},
    ]})


def test_args_given_as_a_json_string_are_parsed(guard: Guard) -> None:
    assert guard.check("deploy", '{"env": "prod"}').effect is Effect.DENY


@pytest.mark.parametrize(("args", "code"), [
    ("{not json", "args_not_json"),
    ("[1, 2]", "args_not_object"),
    (42, "args_not_object"),
    (["a"], "args_not_object"),
])
def test_args_that_are_not_a_json_object_are_denied_with_a_reason(guard: Guard, args, code) -> None:
    d = guard.check("deploy", args)
    assert d.effect is Effect.DENY
    assert d.reasons[0].code == code
    assert d.rule == "input"
    assert "JSON object" in d.message


def test_none_args_mean_no_arguments(guard: Guard) -> None:
    assert guard.check("deploy", None).effect is Effect.ALLOW


def test_cyclic_args_are_denied(guard: Guard) -> None:
    cyclic: dict = {"a": []}
    cyclic["a"].append(cyclic)
    d = guard.check("deploy", cyclic)
    assert d.effect is Effect.DENY
    assert d.reasons[0].code == "args_cycle"


def test_ten_thousand_deep_nesting_is_denied_without_recursion_error(guard: Guard) -> None:
    deep: dict = {}
    node = deep
    for _ in range(10_000):
        node["x"] = {}
        node = node["x"]
    d = guard.check("deploy", deep)
    assert d.effect is Effect.DENY
    assert d.reasons[0].code == "args_too_deep"


def test_deeply_nested_json_string_is_denied(guard: Guard) -> None:
    d = guard.check("deploy", "[" * 100_000 + "]" * 100_000)
    assert d.effect is Effect.DENY


def test_ten_megabyte_string_is_decided(guard: Guard) -> None:
    big = "x" * (10 * 1024 * 1024)
    d = guard.check("deploy", {"env": "prod", "blob": big})
    assert d.effect is Effect.DENY
    assert d.rule == "no-prod"
    assert asyncio.run(guard.acheck("deploy", {"blob": big})).effect is Effect.ALLOW


def test_non_json_serializable_values_are_decided_and_serialized_safely(guard: Guard) -> None:
    import json

    args = {"when": datetime.datetime(2026, 1, 1), "lock": threading.Lock(), "raw": b"\xff",
            "n": float("nan"), 3: "int key", "s": {1, 2}}
    d = guard.check("deploy", args)
    assert d.effect is Effect.ALLOW
    text = json.dumps(d.to_dict(), allow_nan=False)
    assert "2026" in text and "lock" in text


@pytest.mark.parametrize("tool", ["", None, 7])
def test_invalid_tool_names_are_denied(guard: Guard, tool) -> None:
    d = guard.check(tool, {})
    assert d.effect is Effect.DENY
    assert d.reasons[0].code == "invalid_tool"


def test_unknown_tool_follows_the_default() -> None:
    allow = Guard.from_dict({"version": 1})
    deny = Guard.from_dict({"version": 1, "default": "deny"})
    assert allow.check("never_heard_of_it", {}).effect is Effect.ALLOW
    d = deny.check("never_heard_of_it", {})
    assert d.effect is Effect.DENY and d.rule == "default"


def test_unknown_tools_can_be_matched_by_kind() -> None:
    g = Guard.from_dict({"version": 1, "rules": [
        {"id": "unknown-tools", "match": {"kind": "unknown"}, "effect": "ask"}]})
    assert g.check("mystery", {}).effect is Effect.ASK
    assert g.check("read_file", {"path": "a"}).effect is Effect.ALLOW


def test_run_with_bad_input_raises_tool_denied_and_never_calls_the_tool(guard: Guard) -> None:
    ran = []
    with pytest.raises(ToolDenied) as info:
        guard.run("deploy", "{oops", lambda **kw: ran.append(kw))
    assert ran == []
    assert info.value.decision.reasons[0].code == "args_not_json"


# -- immutability ------------------------------------------------------------------------------


def test_call_args_are_a_deep_read_only_snapshot() -> None:
    original = {"list": [1, 2], "nested": {"k": "v"}}
    call = ToolCall.create("t", original)
    original["list"].append(3)
    original["nested"]["k"] = "changed"
    assert call.args["list"] == (1, 2)
    assert call.args["nested"]["k"] == "v"
    with pytest.raises(TypeError):
        call.args["new"] = 1
    with pytest.raises(TypeError):
        call.args["nested"]["k"] = "x"
    with pytest.raises(AttributeError):
        call.args["list"].append(4)
    with pytest.raises(AttributeError):
        call.tool = "other"  # type: ignore[misc]


def test_caller_mutating_args_after_check_does_not_change_the_decision(guard: Guard) -> None:
    args = {"env": "prod"}
    d = guard.check("deploy", args)
    args["env"] = "dev"
    assert d.call.args["env"] == "prod"
    assert d.args["env"] == "prod"


def test_tool_mutating_its_args_does_not_change_what_the_decision_recorded() -> None:
    g = Guard.from_dict({"version": 1, "rules": [
        {"id": "pin", "effect": "modify", "set": {"items": [1]}}]})
    seen = {}

    def tool(**kwargs):
        kwargs["items"].append(99)
        kwargs["extra"] = True
        seen.update(kwargs)
        return "ok"

    g.run("t", {"items": []}, tool)
    d = g.check("t", {"items": []})
    assert seen["items"] == [1, 99]
    assert d.args["items"] == (1,)
    assert d.call.args["items"] == ()


def test_policy_cannot_mutate_what_later_policies_or_the_decision_see() -> None:
    @policy(isolated=False)
    def vandal(call):
        try:
            call.args["env"] = "dev"
        except TypeError:
            return None
        return Verdict.allow()

    g = Guard(policies=[vandal], rules=[
        {"id": "no-prod", "match": {"tool": "deploy"}, "args": {"env": "prod"}, "effect": "deny"}])
    assert g.check("deploy", {"env": "prod"}).effect is Effect.DENY


def test_thaw_returns_plain_mutable_copies() -> None:
    frozen = ToolCall.create("t", {"a": [{"b": 1}]}).args
    thawed = thaw(frozen)
    assert type(thawed) is dict and type(thawed["a"]) is list and type(thawed["a"][0]) is dict
    thawed["a"][0]["b"] = 2
    assert frozen["a"][0]["b"] == 1
    assert isinstance(frozen, FrozenDict)


def test_invalid_call_error_carries_a_code() -> None:
    with pytest.raises(InvalidCall) as info:
        ToolCall.create("t", "nope")
    assert info.value.code == "args_not_json"


# -- who/where fields ----------------------------------------------------------------------------

_FIELDS = ["agent", "session", "principal", "framework", "call_id"]


@pytest.fixture
def agent_guard() -> Guard:
    return Guard.from_dict({"version": 1, "rules": [
        {"id": "interns", "match": {"tool": "deploy", "agent": "intern"}, "effect": "deny"}]})


@pytest.mark.parametrize("field", _FIELDS)
def test_non_string_call_field_is_denied_with_a_reason(agent_guard: Guard, field: str) -> None:
    d = agent_guard.check("deploy", {}, **{field: ["x"]})
    assert d.effect is Effect.DENY
    assert d.reasons[0].code == "invalid_call_field"
    assert field in d.reasons[0].message


@pytest.mark.parametrize("field", _FIELDS)
def test_non_string_call_field_is_denied_by_acheck_and_run(agent_guard: Guard, field: str) -> None:
    d = asyncio.run(agent_guard.acheck("deploy", {}, **{field: ["x"]}))
    assert d.reasons[0].code == "invalid_call_field"
    ran = []
    with pytest.raises(ToolDenied):
        agent_guard.run("deploy", {}, lambda: ran.append(1), **{field: {"x": 1}})
    assert ran == []


def test_decision_for_an_object_principal_serializes_to_json(agent_guard: Guard) -> None:
    import json

    d = agent_guard.check("deploy", {}, principal=object())
    assert d.effect is Effect.DENY
    assert json.loads(json.dumps(d.to_dict()))["call"]["principal"] is None


def test_str_subclass_call_fields_are_recorded_as_plain_strings(agent_guard: Guard) -> None:
    class Name(str):
        pass

    d = agent_guard.check("deploy", {}, agent=Name("intern"))
    assert d.effect is Effect.DENY and d.rule == "interns"
    assert type(d.call.agent) is str


# -- immutability of values that are not plain data ----------------------------------------------


class _Box:
    def __init__(self) -> None:
        self.items: list[str] = []


def test_bytearray_args_are_snapshotted_as_bytes() -> None:
    data = bytearray(b"safe")
    call = ToolCall.create("t", {"data": data})
    data[:] = b"EVIL"
    assert call.args["data"] == b"safe"
    assert type(call.args["data"]) is bytes


def test_tool_cannot_change_the_recorded_bytes_of_a_bytearray_arg() -> None:
    recorded = []

    @policy(isolated=False)
    def spy(call):
        recorded.append(call)

    def tool(data):
        try:
            data[:] = b"EVIL"
        except TypeError:
            return "refused"
        return "changed"

    Guard(policies=[spy]).run("t", {"data": bytearray(b"safe")}, tool)
    assert recorded[0].args["data"] == b"safe"


def test_a_policy_cannot_replace_a_custom_object_the_decision_recorded() -> None:
    @policy(isolated=False)
    def vandal(call):
        with pytest.raises(AttributeError):
            call.args["box"].items = ["evil"]

    Guard(policies=[vandal]).check("t", {"box": _Box()})


def test_the_tool_gets_the_object_the_policy_inspected_not_the_callers() -> None:
    inspected = []

    @policy(isolated=False)
    def spy(call):
        inspected.append(call.args["box"].unwrap())

    received = []

    def tool(box):
        received.append(box)
        box.items.append("written by the tool")

    mine = _Box()
    Guard(policies=[spy]).run("t", {"box": mine}, tool)
    assert received[0] is inspected[0] and mine.items == []


class _Shifty:
    """Copies itself as a different command each time it is copied: once a policy's
    unwrap() saw `ls` while the tool received `rm -rf /`."""

    copies = 0

    def __init__(self, command: str) -> None:
        self.command = command

    def __deepcopy__(self, memo: dict) -> _Shifty:
        _Shifty.copies += 1
        return _Shifty("ls" if _Shifty.copies % 2 else "rm -rf /")


def test_a_lying_deep_copy_cannot_show_the_policy_another_value() -> None:
    seen = []

    @policy(isolated=False)
    def reads_command(call):
        seen.append(call.args["job"].unwrap().command)

    ran = []
    Guard(policies=[reads_command]).run("t", {"job": _Shifty("x")},
                                         lambda job: ran.append(job.command))
    assert ran == seen


def test_custom_objects_are_recorded_by_their_repr_at_snapshot_time() -> None:
    box = _Box()
    call = ToolCall.create("t", {"box": box})
    box.items.append("later")
    assert call.to_dict()["args"]["box"] == repr(box)


def test_caller_built_nested_frozen_dict_is_frozen_again() -> None:
    live = [1]
    call = ToolCall.create("t", {"a": FrozenDict({"x": live})})
    live.append(2)
    assert call.args["a"]["x"] == (1,)


def test_immutable_values_are_kept_as_they_are() -> None:
    import decimal
    import pathlib
    import uuid

    values = {"when": datetime.datetime(2026, 1, 1), "amount": decimal.Decimal("1.5"),
              "id": uuid.UUID(int=1), "path": pathlib.PurePosixPath("/tmp")}
    call = ToolCall.create("t", values)
    assert dict(call.args) == values
    assert all(call.args[k] is v for k, v in values.items())


def test_decision_ids_stay_unique_in_a_forked_child(guard: Guard) -> None:
    """A decision id binds approvals and audit records: a pre-fork server's workers (and any
    child the agent forks) must not hand out the ids their parent and siblings do."""
    import os

    read, write = os.pipe()
    children = []
    for _ in range(2):
        pid = os.fork()
        if pid == 0:  # the child: three decisions' ids, one per line
            try:
                ids = [guard.check("read_file", {"path": "a.txt"}).decision_id for _ in range(3)]
                os.write(write, ("\n".join(ids) + "\n").encode())
            finally:
                os._exit(0)
        children.append(pid)
    for pid in children:
        os.waitpid(pid, 0)
    os.close(write)
    with os.fdopen(read) as pipe:
        seen = pipe.read().split()
    seen += [guard.check("read_file", {"path": "a.txt"}).decision_id for _ in range(3)]
    assert len(seen) == 9
    assert len(set(seen)) == 9, seen
