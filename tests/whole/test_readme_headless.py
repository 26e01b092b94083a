"""The README's "Recording headless" commands are headless wherever they are typed: on a
terminal, `--record` alone opens the dashboard, so each needs `--headless` or `--detach`."""

from __future__ import annotations

import re

from tests.support.process import REPO


def section_commands(title: str) -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    return [line.split("  #")[0].strip() for block in blocks for line in block.splitlines() if line.startswith("gputui ")]


def test_every_command_that_runs_something_under_recording_headless_is_headless():
    commands = section_commands("Recording headless")
    runs = [c for c in commands if not re.match(r"gputui (attach|stop)\b", c)]
    assert len(runs) >= 5, commands
    assert [c for c in runs if "--headless" not in c.split() and "--detach" not in c.split()] == []
