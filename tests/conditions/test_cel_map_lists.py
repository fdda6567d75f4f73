"""Map lists in CEL: ``lists.files[args.file_id].name``, ``in`` on keys, and narrowing a map to
the entries a call can reach (callwarden.conditions.cel, callwarden.conditions.cel_lists)."""

from __future__ import annotations

from typing import Any

import cel
import pytest

from callwarden import Guard
from callwarden._call import ToolCall
from callwarden._profiles import default_profile
from callwarden.conditions.base import CompileEnv, ConfigError, Subject
from callwarden.conditions.cel import CelCondition, CelError
from callwarden.policyfile.lists import NamedList, NamedMap

FILES: dict[str, dict[str, Any]] = {
    "f-1": {"name": "Q3 report.pdf", "owner": "alice", "size": 120, "shared": True},
    "f-2": {"name": "Payroll 2024.xlsx", "owner": "bob", "size": 7, "shared": False},
    "f-3": {"name": "notes.txt", "owner": "alice", "size": 1, "shared": False, "parent": "f-1"},
    "f4": {"name": "plain key", "owner": "carol", "size": 2, "shared": True},
}
LISTS = {
    "files": NamedMap("files", FILES),
    "owners": NamedList("owners", ["alice", "bob"]),
}
ENV = CompileEnv(lists=LISTS)
BIG = NamedMap("files", {f"f-{i}": {"name": f"file {i}.pdf", "owner": f"user{i % 7}"}
                         for i in range(10_000)})
BIG_ENV = CompileEnv(lists={"files": BIG, "owners": NamedList("owners", ["user3"])})


def subject(args: Any = None, *, tool: str = "delete_file", **call: Any) -> Subject:
    return Subject(ToolCall.create(tool, args or {}, **call), default_profile(tool), {})


def holds(expression: str, args: Any = None, *, env: CompileEnv = ENV, **call: Any) -> bool:
    return CelCondition(expression, env)(subject(args, **call)) is not None


def passed(condition: CelCondition, args: Any, **call: Any) -> dict[str, Any]:
    """The ``lists`` variable the condition hands CEL for this call."""
    activation = {name: get(subject(args, **call)) for name, get in condition._getters}
    return condition._lists_for(activation)


# --- reading a map ----------------------------------------------------------------------------

def test_a_lookup_by_an_argument_reads_the_entry() -> None:
    expression = 'lists.files[args.file_id].name == "Q3 report.pdf"'
    assert holds(expression, {"file_id": "f-1"})
    assert not holds(expression, {"file_id": "f-2"})


def test_numbers_and_booleans_keep_their_type() -> None:
    assert holds("lists.files[args.id].size > 100 && lists.files[args.id].shared", {"id": "f-1"})
    assert not holds("lists.files[args.id].size > 100", {"id": "f-2"})


def test_in_a_map_tests_its_keys_not_its_values() -> None:
    assert holds("args.file_id in lists.files", {"file_id": "f-2"})
    assert not holds("args.file_id in lists.files", {"file_id": "Q3 report.pdf"})
    assert not holds("args.file_id in lists.files", {"file_id": "f-99"})


def test_a_missing_key_is_an_evaluation_error() -> None:
    with pytest.raises(CelError, match="no such key"):
        CelCondition("lists.files[args.file_id].owner == 'alice'", ENV)(
            subject({"file_id": "f-99"}))


def test_a_membership_test_guards_the_lookup() -> None:
    expression = "args.file_id in lists.files && lists.files[args.file_id].owner == 'alice'"
    assert not holds(expression, {"file_id": "f-99"})
    assert holds(expression, {"file_id": "f-3"})


def test_has_of_an_index_is_refused_at_load_as_in_cel() -> None:
    with pytest.raises(ConfigError, match="has"):
        CelCondition("has(lists.files[args.file_id])", ENV)


def test_has_and_select_by_a_key_that_is_an_identifier() -> None:
    assert holds('has(lists.files.f4) && lists.files.f4.owner == "carol"')
    assert not holds("has(lists.files.f5)")


def test_an_entry_value_can_be_tested_against_a_set_list() -> None:
    assert holds("lists.files[args.id].owner in lists.owners", {"id": "f-2"})
    assert not holds("lists.files[args.id].owner in lists.owners", {"id": "f4"})


def test_an_unknown_map_list_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"unknown list 'lists\.folders'"):
        CelCondition("lists.folders[args.id].name == 'x'", ENV)


# --- narrowing: only the entries the call can reach -------------------------------------------

@pytest.mark.parametrize(("expression", "args", "call", "keys"), [
    ("lists.files[args.file_id].name == 'file 5.pdf'", {"file_id": "f-5"}, {}, ["f-5"]),
    ("args.file_id in lists.files", {"file_id": "f-5", "other": "f-6"}, {}, ["f-5"]),
    ('lists["files"][args.file_id].owner == "user5"', {"file_id": "f-5"}, {}, ["f-5"]),
    ('lists.files["f-7"].name == "file 7.pdf"', {}, {}, ["f-7"]),
    ("args.ids.all(i, i in lists.files && lists.files[i].owner == principal)",
     {"ids": ["f-1", "f-8"]}, {"principal": "user1"}, ["f-1", "f-8"]),
    ("args.groups.all(g, g.ids.all(i, lists.files[i].owner == 'user1'))",
     {"groups": [{"ids": ["f-1"]}, {"ids": ["f-8"]}]}, {}, ["f-1", "f-8"]),
    ("lists.files[args.file_id].name.lowerAscii() == 'file 5.pdf'",
     {"file_id": "f-5"}, {}, ["f-5"]),  # a string built from an entry is no key
    ("lists.files[args.id].owner in lists.owners", {"id": "f-3"}, {}, ["f-3"]),
])
def test_a_lookup_by_keys_from_the_call_passes_only_their_entries(
        expression: str, args: dict[str, Any], call: dict[str, Any], keys: list[str]) -> None:
    condition = CelCondition(expression, BIG_ENV)
    assert condition._lists is not None
    assert condition._lists.maps == ("files",)
    assert sorted(passed(condition, args, **call)["files"]) == sorted(keys)
    assert condition(subject(args, **call)) is not None


def test_a_set_list_sees_the_strings_of_the_picked_entries() -> None:
    condition = CelCondition("lists.files[args.id].owner in lists.owners", BIG_ENV)
    assert passed(condition, {"id": "f-3"})["owners"] == ["user3"]
    assert condition(subject({"id": "f-3"})) is not None
    assert condition(subject({"id": "f-4"})) is None


@pytest.mark.parametrize("expression", [
    "lists.files[args.file_id.lowerAscii()].name == 'file 5.pdf'",  # a computed key
    "args.file_id + '' in lists.files",
    "size(lists.files) > 0 && args.file_id in lists.files",  # the map as a whole
    "lists.files.exists(k, k == args.file_id)",
    "lists.files[lists.files[args.file_id].name] == 'x' || args.file_id in lists.files",
    "lists.files == {} || args.file_id in lists.files",
    "args.file_id.split(',').exists(i, i in lists.files)",  # a name bound over built strings
    "string(args.file_id) in lists.files",
])
def test_a_map_read_other_than_by_call_keys_is_passed_whole(expression: str) -> None:
    condition = CelCondition(expression, BIG_ENV)
    assert condition._lists is not None
    assert condition._lists.maps == ()
    assert len(passed(condition, {"file_id": "f-5"})["files"]) == 10_000


def test_arguments_too_deep_to_walk_pass_the_whole_map() -> None:
    deep: Any = "f-5"
    for _ in range(150):
        deep = [deep]
    condition = CelCondition("args.file_id in lists.files", BIG_ENV)
    # deeper than a ToolCall allows: the walk gives up, so the analysis is unsure
    assert len(condition._lists_for({"args": {"file_id": "f-5", "deep": deep}})["files"]) \
        == 10_000


def test_a_key_that_is_no_string_is_not_found_either_way() -> None:
    assert not holds("args.id in lists.files", {"id": 5}, env=BIG_ENV)
    with pytest.raises(CelError):
        CelCondition("lists.files[args.id].name == ''", BIG_ENV)(subject({"id": 5}))


EQUIVALENT = [
    "lists.files[args.a].owner == principal",
    "args.a in lists.files && lists.files[args.a].size > 5",
    "args.a in lists.files || args.b in lists.files",
    "args.list.all(i, i in lists.files)",
    "args.list.exists(i, lists.files[i].shared)",
    "has(lists.files.f4) && !(args.a in lists.files)",
    "lists.files[args.a].owner in lists.owners",
    "lists.files[args.a].parent in lists.files",  # a key from an entry: passed whole
    "args.m.all(k, v, k in lists.files && v == lists.files[k].owner)",
]
CALLS = [
    ({"a": "f-1", "b": "x", "list": ["f-1", "f-3"], "m": {"f-1": "alice"}}, "alice"),
    ({"a": "f-3", "b": "f4", "list": ["f-2", "nope"], "m": {"f-2": "eve"}}, "bob"),
    ({"a": "nope", "b": "f-2", "list": [], "m": {}}, "alice"),
    ({"a": 1, "b": None, "list": [1, "f-1"], "m": {"x": 1}}, None),
]


@pytest.mark.parametrize("expression", EQUIVALENT)
def test_narrowed_maps_answer_as_the_whole_map_does(expression: str) -> None:
    condition = CelCondition(expression, ENV)
    assert condition._lists is not None
    assert condition._lists.maps == (() if "parent" in expression else ("files",))
    whole = {"files": {k: dict(v) for k, v in FILES.items()}, "owners": ["alice", "bob"]}
    for args, principal in CALLS:
        try:
            expected: Any = cel.evaluate(expression, {"args": args, "principal": principal,
                                                      "lists": whole})
        except Exception:
            expected = CelError
        try:
            got: Any = condition(subject(args, principal=principal)) is not None
        except CelError:
            got = CelError
        assert got == expected, (expression, args)


# --- one rule: delete only the file the request names ----------------------------------------

DELETE_NAMED = {
    "version": 1,
    "lists": {"files": {"map": {"f-1": {"name": "Q3 report.pdf", "owner": "alice"},
                                "f-2": {"name": "Payroll 2024.xlsx", "owner": "bob"}}}},
    "rules": [{
        "id": "delete-only-what-was-named", "match": {"tool": "delete_file"}, "effect": "deny",
        "if": "!(args.file_id in lists.files"
              " && request.text.containsIgnoreCase(lists.files[args.file_id].name))",
        "message": "Delete only a file the user named; ask which file they mean.",
    }],
}


@pytest.mark.parametrize(("file_id", "request_text", "allowed"), [
    ("f-1", "please delete the q3 REPORT.pdf", True),
    ("f-2", "please delete the q3 report.pdf", False),  # another file than the one named
    ("f-9", "delete f-9", False),  # not a known file
    ("f-1", None, False),  # no request: nothing was named
])
def test_delete_only_the_file_the_request_names(file_id: str, request_text: str | None,
                                                allowed: bool) -> None:
    guard = Guard.from_dict(DELETE_NAMED)
    context = None if request_text is None else {"request": request_text}
    decision = guard.check("delete_file", {"file_id": file_id}, context=context)
    assert decision.allowed is allowed
    if not allowed:
        assert decision.rule == "delete-only-what-was-named"
        assert "named" in (decision.message or "")


def test_the_rule_stays_cheap_with_a_map_of_10000_files() -> None:
    condition = CelCondition(DELETE_NAMED["rules"][0]["if"], BIG_ENV)  # type: ignore[index]
    assert condition._lists is not None and condition._lists.maps == ("files",)
    call = {"file_id": "f-42"}
    assert list(passed(condition, call, context={"request": "drop file 42.PDF"})["files"]) == \
        ["f-42"]
    assert condition(subject(call, context={"request": "drop file 42.PDF"})) is None
    assert condition(subject(call, context={"request": "drop file 43.pdf"})) is not None
