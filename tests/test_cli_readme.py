"""The README's first screen gets a new user from install to a working ``callwarden`` command
(issue 13, item 17)."""

from __future__ import annotations

import re
from pathlib import Path

README = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
FIRST_SCREEN = README.split("\n## The decision", 1)[0]


def _commands(text: str) -> list[str]:
    """The shell commands of the first screen's bash blocks, comments dropped."""
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        lines += [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]
    return lines


def test_first_screen_activates_the_virtualenv_before_running_bare_commands() -> None:
    commands = _commands(FIRST_SCREEN)
    creates = next(i for i, c in enumerate(commands) if "python3 -m venv .venv" in c)
    activates = next(i for i, c in enumerate(commands)
                     if c in ("source .venv/bin/activate", ". .venv/bin/activate"))
    bare = [i for i, c in enumerate(commands) if c.startswith(("callwarden ", "python "))]
    assert creates < activates < min(bare)


def test_first_screen_says_how_to_run_without_activating() -> None:
    assert "`.venv/bin/callwarden`" in FIRST_SCREEN


def test_first_screen_says_to_save_the_example_as_policy_yaml() -> None:
    before_example = FIRST_SCREEN.split("```yaml policy.yaml", 1)[0]
    last_paragraph = before_example.strip().rsplit("\n\n", 1)[-1]
    assert re.search(r"[Ss]ave .*`policy\.yaml`", last_paragraph), last_paragraph
