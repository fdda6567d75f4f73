"""``extends:``: the policies this one builds on (bundled ones such as ``callwarden:recommended``,
or files next to it), loaded deepest first.

``extends:`` can name any file, and its errors reach the model (``callwarden hook`` prints
them), so an error about a file that is not a policy never quotes the file: a YAML error gives
its position only, and a document that is not a mapping with ``version`` is "not a policy",
with nothing read from it reported. Once a file says ``version``, it is a policy and its
problems are reported like the main file's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from callwarden.exceptions import PolicyError
from callwarden.policyfile.check import TOP_KEYS, Checker, Path_
from callwarden.policyfile.oap import OAP_PREFIX, load_passport, passport_policy
from callwarden.policyfile.yamlsrc import Lines, load_yaml, read_source

__all__ = ["BUILTIN_POLICIES", "Base", "load_bases"]

BUILTIN_POLICIES = {
    "callwarden:recommended": Path(__file__).parent / "recommended.yaml",
    "callwarden:shell": Path(__file__).parent / "shell.yaml",
}


class Base:
    """A policy this one extends: its data, lines, folder, own problem list, and notes (what
    it says that callwarden does not enforce)."""

    __slots__ = ("check", "data", "folder", "lines", "notes")

    def __init__(self, data: Mapping[str, Any], lines: Lines, folder: Path,
                 notes: Sequence[str] = ()) -> None:
        self.data = data
        self.lines = lines
        self.folder = folder
        self.check = Checker(lines)
        self.notes = tuple(notes)


def load_bases(raw: Any, path: Path_, check: Checker, folder: Path,
           chain: tuple[Path, ...]) -> list[Base]:
    """Loads the policies named by ``extends:`` (and theirs), deepest first."""
    names = [raw] if isinstance(raw, str) else raw
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        check.error(path, "must name a policy or a list of policies",
                    "e.g. extends: callwarden:recommended (or a path next to this file, or "
                    "oap:passport.json)")
        return []
    out: list[Base] = []
    for i, name in enumerate(names):
        item_path = path if isinstance(raw, str) else (*path, i)
        if name.startswith(OAP_PREFIX):
            out.extend(_passport(name, item_path, check, folder))
            continue
        if name.startswith("callwarden:"):
            target = BUILTIN_POLICIES.get(name)
            if target is None:
                check.error(item_path, f"no built-in policy {name!r}",
                            f"built-in policies: {', '.join(sorted(BUILTIN_POLICIES))}")
                continue
        else:
            target = (folder / name).resolve()
        if target in chain:
            check.error(item_path, f"{name!r} extends itself (directly or through another)")
            continue
        try:
            text = read_source(target)
        except PolicyError as e:  # named where `extends:` points at it
            check.error(item_path, f"{name!r}: {e.problems[0].message}", e.problems[0].hint)
            continue
        try:
            data, lines = load_yaml(text, str(target), collect=True, quote=False)
        except PolicyError as e:
            check.problems.extend(e.problems)
            continue
        if not isinstance(data, Mapping) or "version" not in data:
            check.error(item_path, f"{name!r} is not a policy",
                        "a policy is a mapping that starts with 'version: 1'; extends: names "
                        "policy files only")
            continue
        base = Base(data, lines, target.parent)
        if data["version"] != 1:
            base.check.error(("version",), "unsupported version", "this callwarden reads version 1")
        base.check.problems.extend(lines.problems)
        base.check.keys(data, (), TOP_KEYS, "the policy")
        if "extends" in data:
            out.extend(load_bases(data["extends"], ("extends",), base.check, target.parent,
                              (*chain, target)))
        out.append(base)
    return out


def _passport(name: str, path: Path_, check: Checker, folder: Path) -> list[Base]:
    """An Open Agent Passport named by ``extends: oap:FILE``, as a policy (policyfile.oap)."""
    target = (folder / name[len(OAP_PREFIX):]).resolve()
    try:
        passport = load_passport(target)
    except PolicyError as e:  # named where `extends:` points at it
        for problem in e.problems:
            check.error(path, f"{name!r}: {problem.message}", problem.hint)
        return []
    data, notes = passport_policy(passport, target.name)
    return [Base(data, Lines(str(target)), target.parent, notes)]
