"""Named lists: loading the ``lists:`` section and resolving ``{list: name}`` references."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path
from typing import Any

import pytest

from callwarden.conditions.base import CompileEnv, ConfigError
from callwarden.policyfile.lists import NamedList, load_lists, read_list_file, resolve_items


@pytest.fixture
def base(tmp_path: Path) -> Path:
    (tmp_path / "contacts.txt").write_text(
        "# team contacts\n"
        "alice@example.com\n"
        "\n"
        "  bob@example.com   # on call\n"
        "zoë@exämple.de\n"
        "C#\n",
        encoding="utf-8",
    )
    (tmp_path / "more.txt").write_text("globex.test\nacme.test\n", encoding="utf-8")
    return tmp_path


# --- load_lists -----------------------------------------------------------------------------

def test_inline_sequence_is_a_list(base: Path) -> None:
    lists = load_lists({"payees": ["acme", "globex"]}, base)
    assert list(lists["payees"]) == ["acme", "globex"]


def test_file_is_read_relative_to_base_dir(base: Path) -> None:
    lists = load_lists({"contacts": {"file": "contacts.txt"}}, base)
    assert list(lists["contacts"]) == ["alice@example.com", "bob@example.com",
                                       "zoë@exämple.de", "C#"]


def test_items_and_file_combine_items_first(base: Path) -> None:
    lists = load_lists({"domains": {"items": ["example.com"], "file": "more.txt"}}, base)
    assert list(lists["domains"]) == ["example.com", "globex.test", "acme.test"]


def test_several_files_are_concatenated(base: Path) -> None:
    lists = load_lists({"all": {"file": ["more.txt", "contacts.txt"]}}, base)
    assert list(lists["all"])[:3] == ["globex.test", "acme.test", "alice@example.com"]


def test_duplicates_are_removed_keeping_first(base: Path) -> None:
    lists = load_lists({"d": {"items": ["acme.test", "x"], "file": "more.txt"}}, base)
    assert list(lists["d"]) == ["acme.test", "x", "globex.test"]


def test_membership_is_a_set_lookup(base: Path) -> None:
    lists = load_lists({"payees": ["acme", "globex"]}, base)
    assert "globex" in lists["payees"]
    assert isinstance(lists["payees"], frozenset)


def test_named_list_knows_its_name(base: Path) -> None:
    assert load_lists({"payees": ["acme"]}, base)["payees"].name == "payees"


def test_lists_keep_declaration_order(base: Path) -> None:
    lists = load_lists({"b": ["1"], "a": ["2"]}, base)
    assert list(lists) == ["b", "a"]


def test_none_section_is_no_lists(base: Path) -> None:
    assert load_lists(None, base) == {}


def test_utf8_bom_is_ignored(tmp_path: Path) -> None:
    (tmp_path / "bom.txt").write_bytes("\ufeffalpha\nbeta\n".encode())
    assert list(load_lists({"x": {"file": "bom.txt"}}, tmp_path)["x"]) == ["alpha", "beta"]


def test_crlf_line_endings_are_handled(tmp_path: Path) -> None:
    (tmp_path / "crlf.txt").write_bytes(b"alpha\r\nbeta\r\n")
    assert list(load_lists({"x": {"file": "crlf.txt"}}, tmp_path)["x"]) == ["alpha", "beta"]


def test_absolute_file_path_inside_the_policy_folder_is_read(base: Path) -> None:
    lists = load_lists({"x": {"file": str(base / "more.txt")}}, base)
    assert "acme.test" in lists["x"]


def test_file_in_a_subfolder_is_read(base: Path) -> None:
    (base / "data").mkdir()
    (base / "data" / "d.txt").write_text("deep.test\n")
    assert list(load_lists({"x": {"file": "data/d.txt"}}, base)["x"]) == ["deep.test"]


def test_absolute_file_path_elsewhere_is_refused(base: Path, tmp_path_factory: Any) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    with pytest.raises(ConfigError, match="outside the policy's folder") as info:
        load_lists({"x": {"file": str(base / "more.txt")}}, elsewhere)
    assert info.value.key == "x"
    assert "'../' and absolute paths elsewhere are refused" in (info.value.hint or "")


def test_dot_dot_escape_is_refused(base: Path) -> None:
    (base / "policies").mkdir()
    with pytest.raises(ConfigError, match="outside the policy's folder"):
        load_lists({"x": {"file": "../more.txt"}}, base / "policies")


def test_symlink_pointing_out_of_the_folder_is_refused(base: Path,
                                                       tmp_path_factory: Any) -> None:
    policy_dir = tmp_path_factory.mktemp("policy")
    (policy_dir / "link.txt").symlink_to(base / "more.txt")
    with pytest.raises(ConfigError, match="outside the policy's folder"):
        load_lists({"x": {"file": "link.txt"}}, policy_dir)


def test_file_in_an_extra_root_is_read(base: Path, tmp_path_factory: Any) -> None:
    child = tmp_path_factory.mktemp("child")
    lists = load_lists({"x": {"file": str(base / "more.txt")}}, child, roots=[base])
    assert "acme.test" in lists["x"]


def test_list_files_past_the_byte_cap_are_refused(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from callwarden.policyfile import lists as lists_module

    monkeypatch.setattr(lists_module, "MAX_LIST_BYTES", 100)
    (tmp_path / "a.txt").write_text("x" * 60 + "\n")
    load_lists({"a": {"file": "a.txt"}}, tmp_path)
    with pytest.raises(ConfigError, match="past") as info:
        load_lists({"a": {"file": ["a.txt", "a.txt"]}}, tmp_path)
    assert info.value.key == "a"


def test_named_list_survives_pickle_and_copy() -> None:
    named = NamedList("x", ["b", "a"])
    for clone in (pickle.loads(pickle.dumps(named)), copy.deepcopy(named)):
        assert list(clone) == ["b", "a"]
        assert clone.name == "x"


@pytest.mark.parametrize(("config", "message"), [
    ({"contacts": {"file": "missing.txt"}}, "does not exist"),
    ({"contacts": "contacts.txt"}, "must be a sequence of strings or a mapping"),
    ({"contacts": {"path": "contacts.txt"}}, "unknown key"),
    ({"contacts": {}}, "is empty"),
    ({"contacts": [1, 2]}, "non-string"),
    ({"contacts": ["a", None]}, "non-string"),
    ({"contacts": ["a", ""]}, "empty item"),
    ({"contacts": {"items": "a"}}, "must be a sequence of strings"),
    ({"contacts": {"file": 3}}, "must be a sequence of strings"),
])
def test_bad_list_is_config_error_naming_the_list(base: Path, config: dict[str, Any],
                                                  message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        load_lists(config, base)
    assert info.value.key == "contacts"
    assert info.value.hint


@pytest.mark.parametrize("name", ["my-list", "1st", "a b", ""])
def test_bad_list_name_is_config_error(base: Path, name: str) -> None:
    with pytest.raises(ConfigError, match="invalid list name") as info:
        load_lists({name: ["x"]}, base)
    assert info.value.key == name


def test_section_that_is_not_a_mapping_is_config_error(base: Path) -> None:
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_lists(["a", "b"], base)  # type: ignore[arg-type]


def test_directory_as_file_is_config_error(base: Path) -> None:
    (base / "sub").mkdir()
    with pytest.raises(ConfigError, match="cannot read") as info:
        load_lists({"x": {"file": "sub"}}, base)
    assert info.value.key == "x"


def test_non_utf8_file_is_config_error(tmp_path: Path) -> None:
    (tmp_path / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    with pytest.raises(ConfigError, match="not UTF-8") as info:
        read_list_file(tmp_path / "latin1.txt", name="x")
    assert info.value.key == "x"


# --- resolve_items --------------------------------------------------------------------------

ENV = CompileEnv(lists={"blocked": NamedList("blocked", ["evil.test", "*.bad.test"])})


def test_plain_strings_pass_through() -> None:
    assert resolve_items(["a", "b"], ENV) == ["a", "b"]


def test_single_string_becomes_one_item() -> None:
    assert resolve_items("a", ENV) == ["a"]


def test_reference_expands_in_place() -> None:
    assert resolve_items(["x", {"list": "blocked"}, "y"], ENV) == [
        "x", "evil.test", "*.bad.test", "y"]


def test_lone_reference_expands() -> None:
    assert resolve_items({"list": "blocked"}, ENV) == ["evil.test", "*.bad.test"]


def test_at_sign_string_is_literal() -> None:
    assert resolve_items(["@blocked"], ENV) == ["@blocked"]


def test_expanded_duplicates_are_removed() -> None:
    assert resolve_items(["evil.test", {"list": "blocked"}], ENV) == ["evil.test", "*.bad.test"]


def test_reference_to_loaded_list(base: Path) -> None:
    env = CompileEnv(lists=load_lists({"c": {"file": "contacts.txt"}}, base))
    assert resolve_items([{"list": "c"}], env)[0] == "alice@example.com"


def test_unknown_list_is_config_error_with_key() -> None:
    with pytest.raises(ConfigError, match="unknown list 'nope'") as info:
        resolve_items([{"list": "nope"}], ENV, key="deny_domains")
    assert info.value.key == "deny_domains"
    assert info.value.hint and "blocked" in info.value.hint


@pytest.mark.parametrize("ref", [{"list": "blocked", "x": 1}, {"lists": "blocked"}, {"list": 3}])
def test_malformed_reference_is_config_error(ref: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=r"exactly \{list: <name>\}"):
        resolve_items([ref], ENV)


@pytest.mark.parametrize("item", [1, None, True, ["nested"]])
def test_non_string_item_is_config_error(item: Any) -> None:
    with pytest.raises(ConfigError, match="expected a string"):
        resolve_items(["a", item], ENV)
