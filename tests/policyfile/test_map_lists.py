"""Map lists (key -> attributes) and list files in CSV and JSON (callwarden.policyfile.lists)."""

from __future__ import annotations

import copy
import json
import pickle
import re
from pathlib import Path
from typing import Any

import pytest

from callwarden import Guard
from callwarden.cli import main
from callwarden.conditions.base import ConfigError
from callwarden.exceptions import PolicyError
from callwarden.policyfile.compile import load_policy_file
from callwarden.policyfile.lists import NamedList, NamedMap, load_lists

CSV = "id,name,owner\nf-1,Q3 report.pdf,alice\nf-2, Payroll 2024.xlsx ,bob\n\n"


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def one(config: Any, folder: Path) -> NamedList | NamedMap:
    return load_lists({"x": config}, folder)["x"]


# --- the forms ----------------------------------------------------------------------------------

def test_an_inline_map_keys_entries_of_attributes(tmp_path: Path) -> None:
    files = one({"map": {"f-1": {"name": "Q3 report.pdf", "size": 3, "shared": True}}}, tmp_path)
    assert isinstance(files, NamedMap) and files.name == "x"
    assert dict(files["f-1"]) == {"name": "Q3 report.pdf", "size": 3, "shared": True}
    assert "f-1" in files and "Q3 report.pdf" not in files


def test_a_csv_file_with_key_is_a_map_of_its_rows_cells_trimmed(tmp_path: Path) -> None:
    write(tmp_path, "files.csv", CSV)
    files = one({"file": "files.csv", "key": "id"}, tmp_path)
    assert isinstance(files, NamedMap)
    assert list(files) == ["f-1", "f-2"]
    assert dict(files["f-2"]) == {"id": "f-2", "name": "Payroll 2024.xlsx", "owner": "bob"}


def test_a_csv_file_handles_quotes_bom_and_crlf(tmp_path: Path) -> None:
    (tmp_path / "f.csv").write_bytes('\ufeffid,name\r\nf-1,"Smith, J. ""CV"".pdf"\r\n'.encode())
    files = one({"file": "f.csv", "key": "id"}, tmp_path)
    assert isinstance(files, NamedMap) and files["f-1"]["name"] == 'Smith, J. "CV".pdf'


def test_a_json_object_of_objects_is_a_map(tmp_path: Path) -> None:
    write(tmp_path, "f.json", json.dumps({"f-1": {"name": "a", "size": 1.5}, "f-2": {}}))
    files = one({"file": "f.json"}, tmp_path)
    assert isinstance(files, NamedMap)
    assert dict(files["f-1"]) == {"name": "a", "size": 1.5} and dict(files["f-2"]) == {}


def test_a_json_array_of_objects_with_key_is_a_map(tmp_path: Path) -> None:
    write(tmp_path, "f.json", json.dumps([{"id": "f-1", "name": "a"}, {"id": "f-2", "n": 2}]))
    files = one({"file": "f.json", "key": "id"}, tmp_path)
    assert list(files) == ["f-1", "f-2"]
    assert isinstance(files, NamedMap) and dict(files["f-2"]) == {"id": "f-2", "n": 2}


def test_a_json_array_of_strings_is_a_set_and_combines_with_items(tmp_path: Path) -> None:
    write(tmp_path, "v.json", '["acme", "globex"]')
    vendors = one({"items": ["initech", "acme"], "file": "v.json"}, tmp_path)
    assert isinstance(vendors, NamedList)
    assert list(vendors) == ["initech", "acme", "globex"]


def test_an_inline_map_and_files_combine_in_order(tmp_path: Path) -> None:
    write(tmp_path, "files.csv", CSV)
    write(tmp_path, "more.json", '{"f-3": {"name": "c"}}')
    files = one({"map": {"f-0": {"name": "z"}}, "file": ["files.csv", "more.json"], "key": "id"},
                tmp_path)
    assert list(files) == ["f-0", "f-1", "f-2", "f-3"]


def test_text_files_and_inline_items_are_unchanged(tmp_path: Path) -> None:
    write(tmp_path, "c.txt", "a@x.test  # comment\nb@x.test\n")
    assert list(one({"file": "c.txt"}, tmp_path)) == ["a@x.test", "b@x.test"]
    assert list(one(["a", "b"], tmp_path)) == ["a", "b"]


def test_a_named_map_is_read_only_and_survives_pickle_and_copy(tmp_path: Path) -> None:
    files = NamedMap("files", {"f-1": {"name": "a"}, "f-0": {"name": "b"}})
    with pytest.raises(TypeError):
        files["f-1"]["name"] = "evil"  # type: ignore[index]
    for clone in (pickle.loads(pickle.dumps(files)), copy.deepcopy(files)):
        assert isinstance(clone, NamedMap) and clone.name == "files"
        assert list(clone) == ["f-1", "f-0"] and clone == files
    assert repr(files) == "NamedMap('files', 2 entries)"


# --- mistakes are policy errors naming the list ----------------------------------------------

BAD: list[tuple[str, dict[str, str], Any, str]] = [
    ("duplicate key in a CSV file", {"f.csv": "id,n\na,1\na,2\n"}, {"file": "f.csv", "key": "id"},
     "has the key 'a' twice"),
    ("duplicate key across sources", {"f.csv": "id\na\n"},
     {"map": {"a": {}}, "file": "f.csv", "key": "id"}, "has the key 'a' twice"),
    ("duplicate key in a JSON object", {"f.json": '{"a": {}, "a": {}}'}, {"file": "f.json"},
     "has the key 'a' twice"),
    ("duplicate key in a JSON array", {"f.json": '[{"id": "a"}, {"id": "a"}]'},
     {"file": "f.json", "key": "id"}, "has the key 'a' twice"),
    ("key column missing from the header", {"f.csv": "name,owner\nx,y\n"},
     {"file": "f.csv", "key": "id"}, "has no column 'id'"),
    ("a row without its key", {"f.csv": "id,name\n,orphan\n"}, {"file": "f.csv", "key": "id"},
     "line 2 has no 'id'"),
    ("a short row", {"f.csv": "id,name,owner\nf-1,x\n"}, {"file": "f.csv", "key": "id"},
     "line 2 has 2 fields"),
    ("a repeated column", {"f.csv": "id,name,name\nf-1,x,y\n"}, {"file": "f.csv", "key": "id"},
     "empty or repeated column"),
    ("an empty CSV file", {"f.csv": "\n"}, {"file": "f.csv", "key": "id"}, "is empty"),
    ("a CSV file without key", {"f.csv": CSV}, {"file": "f.csv"}, "needs key"),
    ("a JSON object missing its key", {"f.json": '[{"id": "a"}, {"name": "b"}]'},
     {"file": "f.json", "key": "id"}, "object 1 .* has no 'id'"),
    ("a JSON array of objects without key", {"f.json": '[{"id": "a"}]'}, {"file": "f.json"},
     "needs key"),
    ("a nested value", {"f.json": '{"a": {"owner": {"name": "x"}}}'}, {"file": "f.json"},
     "owner is dict"),
    ("a null value", {"f.json": '{"a": {"owner": null}}'}, {"file": "f.json"},
     "owner is NoneType"),
    ("a list value", {}, {"map": {"a": {"tags": ["x"]}}}, "tags is list"),
    ("NaN", {"f.json": '{"a": {"size": NaN}}'}, {"file": "f.json"}, "not valid JSON"),
    ("invalid JSON", {"f.json": '{"a": '}, {"file": "f.json"}, "not valid JSON"),
    ("a JSON scalar", {"f.json": "3"}, {"file": "f.json"}, "must hold an array of strings"),
    ("a JSON entry that is no object", {"f.json": '{"a": "b"}'}, {"file": "f.json"},
     "must be a mapping of attributes"),
    ("a number as a JSON key", {"f.json": '[{"id": 17}]'}, {"file": "f.json", "key": "id"},
     "not a non-empty string"),
    ("a number as an inline key", {}, {"map": {17: {"name": "x"}}}, "not a non-empty string"),
    ("an inline map that is a list", {}, {"map": ["a"]}, "must be a mapping of keys"),
    ("key: with no file that uses it", {"f.txt": "a\n"}, {"file": "f.txt", "key": "id"},
     "no CSV file or JSON array of objects uses it"),
    ("items and a map in one list", {}, {"items": ["a"], "map": {"b": {}}}, "mixes items"),
    ("a JSON set and a CSV map in one list", {"a.json": '["x"]', "b.csv": "id\ny\n"},
     {"file": ["a.json", "b.csv"], "key": "id"}, "mixes items"),
    ("key that is not a string", {}, {"map": {"a": {}}, "key": 3}, "must be a column name"),
    ("only a key", {}, {"key": "id"}, "is empty"),
    ("an unknown key", {}, {"map": {}, "keys": "id"}, "unknown key"),
]


@pytest.mark.parametrize(("files", "config", "message"), [b[1:] for b in BAD],
                         ids=[b[0] for b in BAD])
def test_a_mistake_is_a_config_error_naming_the_list(tmp_path: Path, files: dict[str, str],
                                                      config: Any, message: str) -> None:
    for name, text in files.items():
        write(tmp_path, name, text)
    with pytest.raises(ConfigError, match=message) as info:
        load_lists({"files": config}, tmp_path)
    assert info.value.key == "files"
    assert info.value.hint


@pytest.mark.parametrize("name", ["f.csv", "f.json"])
def test_a_csv_or_json_file_outside_the_folder_is_refused(tmp_path: Path, name: str) -> None:
    write(tmp_path, name, "id\na\n" if name.endswith("csv") else '{"a": {}}')
    (tmp_path / "policies").mkdir()
    with pytest.raises(ConfigError, match="outside the policy's folder") as info:
        load_lists({"files": {"file": f"../{name}", "key": "id"}}, tmp_path / "policies")
    assert info.value.key == "files"


@pytest.mark.parametrize("name", ["f.csv", "f.json"])
def test_csv_and_json_files_count_against_the_byte_cap(tmp_path: Path, name: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from callwarden.policyfile import lists as lists_module

    monkeypatch.setattr(lists_module, "MAX_LIST_BYTES", 100)
    rows = [f"f-{i}" for i in range(40)]
    write(tmp_path, name, "id\n" + "\n".join(rows) if name.endswith("csv")
          else json.dumps({r: {} for r in rows}))
    with pytest.raises(ConfigError, match="past") as info:
        load_lists({"files": {"file": name, "key": "id"}}, tmp_path)
    assert info.value.key == "files"


def test_a_policy_error_names_the_list_line(tmp_path: Path) -> None:
    write(tmp_path, "files.csv", "id,name\nf-1,a\nf-1,b\n")
    policy = write(tmp_path, "policy.yaml", "version: 1\nlists:\n"
                   "  files: {file: files.csv, key: id}\n")
    with pytest.raises(PolicyError, match=r"policy.yaml:3: .*has the key 'f-1' twice"):
        load_policy_file(policy)


# --- other conditions see a map's keys ---------------------------------------------------------

def test_a_list_reference_stands_for_a_maps_keys() -> None:
    guard = Guard.from_dict({
        "version": 1, "default": "deny",
        "lists": {"files": {"map": {"f-1": {"name": "a"}, "f-2": {"name": "b"}}}},
        "rules": [{"id": "known-files", "match": {"tool": "read_file"}, "effect": "allow",
                   "args": {"file_id": [{"list": "files"}]}}],
    })
    assert guard.check("read_file", {"file_id": "f-2"}).allowed
    assert not guard.check("read_file", {"file_id": "a"}).allowed


def test_roles_in_a_map_list_look_up_its_keys() -> None:
    guard = Guard.from_dict({
        "version": 1,
        "lists": {"files": {"map": {"f-1": {"name": "a"}}},
                  "people": {"map": {"ann@corp.test": {"team": "x"}}}},
        "rules": [{"id": "strangers", "match": {"tool": "send_email"}, "effect": "deny",
                   "roles": {"recipient": {"in": ["people"]}}},
                  {"id": "known-files", "match": {"tool": "share_file"}, "effect": "deny",
                   "roles": {"file_id": {"in": ["files"]}}}],
    })
    assert guard.check("send_email", {"to": "Ann@corp.test"}).allowed
    assert not guard.check("send_email", {"to": "eve@corp.test"}).allowed
    assert guard.check("share_file", {"file_id": "f-1"}).allowed
    assert not guard.check("share_file", {"file_id": "a"}).allowed


# --- the README example, run by `callwarden test` --------------------------------------------

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_example(text: str) -> tuple[str, str]:
    """The README's "delete only the file the user named" policy, and the CSV file beside it."""
    blocks = re.findall(r"```(\w+)\n(.*?)```", text, re.S)
    policy = next((body for kind, body in blocks
                   if kind == "yaml" and "delete-only-what-was-named" in body), None)
    rows = next((body for kind, body in blocks if kind == "csv"), None)
    assert policy and rows, "README.md lacks the map lists example (### Named lists and map lists)"
    return policy, rows


def test_the_readme_policy_passes_callwarden_test(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    policy, rows = readme_example(README.read_text(encoding="utf-8"))
    write(tmp_path, "files.csv", rows)
    write(tmp_path, "policy.yaml", policy)
    assert main(["test", str(tmp_path / "policy.yaml")]) == 0
    assert "3 passed, 0 failed" in capsys.readouterr().out
    # the examples catch a rule that lets another file go
    write(tmp_path, "loose.yaml", policy.replace(
        "containsIgnoreCase(lists.files[args.file_id].name)", "size() > 0"))
    assert main(["test", str(tmp_path / "loose.yaml")]) == 1


def test_a_date_yaml_reads_in_an_inline_map_asks_to_be_quoted() -> None:
    with pytest.raises(PolicyError, match=r"<policy>:3: .*d is date .*quote a date"):
        Guard.from_yaml("version: 1\nlists:\n  f:\n    map: {a: {d: 2024-01-01}}\n")
    assert Guard.from_yaml('version: 1\nlists:\n  f:\n    map: {a: {d: "2024-01-01"}}\n')
