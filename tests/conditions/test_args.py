"""The ``args:`` condition, and the union of those of one top-level argument each."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callwarden._call import ToolCall
from callwarden._profiles import ToolProfile
from callwarden.conditions.args import ArgsMatcher
from callwarden.conditions.base import CompileEnv, Subject

PROFILE = ToolProfile("deploy")
NAMES = ["env", "region", "build"]
PATTERNS = ["prod", "prod-*", "us-gov", "cn-*", "b-0", "*-rc[0-9]", 0, 1.5, True, None,
            "{eu,us}-west"]
VALUES = ["prod", "prod-2", "staging", "us-gov", "cn-north", "b-0", "b-rc1", "eu-west", 0,
          0.0, 1.5, True, False, None, ["prod"], {"x": 1}, "PROD"]


def subject(args: dict[str, Any]) -> Subject:
    return Subject(ToolCall.create("deploy", args), PROFILE)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(conditions=st.lists(st.tuples(st.sampled_from(NAMES),
                                     st.lists(st.sampled_from(PATTERNS), min_size=1,
                                              max_size=3)), min_size=2, max_size=6),
       call=st.dictionaries(st.sampled_from(NAMES), st.sampled_from(VALUES)))
def test_a_union_holds_exactly_when_one_of_its_conditions_does(
        conditions: list[tuple[str, list[Any]]], call: dict[str, Any]) -> None:
    members = [ArgsMatcher({name: patterns}, CompileEnv()) for name, patterns in conditions]
    union = ArgsMatcher.union(members)
    alone = [m(subject(call)) for m in members]
    assert (union(subject(call)) is None) == all(hit is None for hit in alone)


@pytest.mark.parametrize("config", [{"env": "prod", "region": "eu"}, {"spec.env": "prod"}])
def test_a_condition_of_several_or_nested_arguments_has_no_union(config: dict[str, Any]) -> None:
    matcher = ArgsMatcher(config, CompileEnv())
    assert matcher.group_key is None
    with pytest.raises(ValueError, match="one top-level argument"):
        ArgsMatcher.union([matcher, ArgsMatcher({"env": "dev"}, CompileEnv())])
