"""The preset editor as tests open it (a test helper, no tests): a user presets file that
overrides the built-in smoke preset, and the editor opened on a preset by its key."""

from __future__ import annotations

from pathlib import Path

from gputui.presets.preset import load_presets
from gputui.tui.screens.editor import PresetEditorScreen
from gputui.tui.widgets.presets import PresetList
from tests.support.tui import wait_until

USER_SMOKE = """\
# my copy of smoke
[presets.smoke]
description = "smoke, my way"
framework = "smoke"
batch_size = 32   # small
steps = 20
warmup_steps = 2
"""


def setup(tmp_path) -> tuple[Path, dict]:
    user = tmp_path / "xdg" / "gputui" / "presets.toml"
    user.parent.mkdir(parents=True)
    user.write_text(USER_SMOKE)
    return user, load_presets(cwd=tmp_path)


async def open_editor(pilot, app, name: str) -> PresetEditorScreen:
    """The editor on preset ``name``, once its form is up (on a loaded machine the screen is
    pushed a moment before its fields are mounted)."""
    app.dashboard.query_one(PresetList).select_name(name)
    await pilot.press("e")
    return await wait_until(pilot, lambda: isinstance(app.screen, PresetEditorScreen) and app.screen.query("#field-name") and app.screen, what="editor")
