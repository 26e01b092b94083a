"""The preset editor's Form makes command presets: the workload's fields step aside,
the command stays as typed, and the sidebar shows it quoted for a shell."""

from __future__ import annotations

import shlex
import time

import pytest
from textual.widgets import Input

from gputui.presets.preset import load_file, load_presets
from gputui.tui.screens.editor import PresetEditorScreen
from gputui.tui.widgets.presets import PresetDetails, PresetList
from tests.support.dashboard import app_for
from tests.support.tmux import needs_tmux, tmux, wait_gone  # noqa: F401 (tmux: the fixture)
from tests.support.tui import run_async, shown, shown_field, wait_until

COMMAND = "python3 -c \"print('hi there')\""


def test_readable_join_quotes_as_a_person_would_and_a_shell_splits_it_back():
    from gputui.tui.screens.editor import readable_join

    for argv in (["python3", "-c", "print('hi there')"], ["echo", "it's $HOME"], ["a b", "c"], ["plain"]):
        assert shlex.split(readable_join(argv)) == argv
    assert readable_join(["python3", "-c", "print('hi there')"]) == COMMAND
    assert "'\"'\"'" not in readable_join(["python3", "-c", "print('hi there')"])


def test_a_command_typed_in_the_form_saves_a_command_preset_kept_as_typed(tmp_path):
    user = tmp_path / "xdg" / "gputui" / "presets.toml"
    presets = load_presets(cwd=tmp_path)

    async def scenario():
        app = app_for(presets, tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("n")
            editor = await wait_until(pilot, lambda: isinstance(app.screen, PresetEditorScreen) and app.screen, what="editor")
            text = await shown(pilot)
            assert "not saved yet" in text and "saved to" not in text.replace("saves it to", "")
            name = editor.query_one("#field-name", Input)
            name.focus()
            await pilot.press("end", *["backspace"] * 20, *"hello")
            editor.query_one("#field-command", Input).focus()
            await pilot.press(*COMMAND)
            await pilot.pause()
            # the workload's rows step aside; the template's workload keys are not kept
            assert not editor.query_one("#row-framework").display
            assert not editor.query_one("#row-batch_size").display
            assert "✓ valid" in await shown(pilot)
            await pilot.press("ctrl+s")
            await wait_until(pilot, lambda: user.exists() and "hello" in load_file(user), what="the save")
            saved = load_file(user)["hello"]
            assert saved.command == ("python3", "-c", "print('hi there')")
            assert saved.framework is None and saved.warmup_steps is None
            assert "not saved yet" not in await shown(pilot)
            # the TOML tab and back: the command comes back as typed
            await pilot.press("escape")
            await wait_until(pilot, lambda: app.screen is app.dashboard, what="the dashboard")
            app.dashboard.query_one(PresetList).select_name("hello")
            await pilot.pause()
            details = app.dashboard.query_one(PresetDetails)
            assert shlex.join(saved.command) in str(details.render())
            await pilot.press("e")
            editor = await wait_until(pilot, lambda: isinstance(app.screen, PresetEditorScreen) and app.screen, what="editor")
            assert editor.query_one("#field-command", Input).value == COMMAND
            assert not editor.query_one("#row-steps").display

    run_async(scenario())


def test_typing_into_a_field_tabbed_into_adds_to_it(tmp_path):
    presets = load_presets(cwd=tmp_path)

    async def scenario():
        app = app_for(presets, tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("n")
            editor = await wait_until(pilot, lambda: isinstance(app.screen, PresetEditorScreen) and app.screen, what="editor")
            await pilot.pause()
            assert app.focused is editor.query_one("#field-name", Input)
            await pilot.press("tab")  # into the description
            description = editor.query_one("#field-description", Input)
            assert app.focused is description
            before = description.value
            await pilot.press(*" (mine)")
            assert description.value == before + " (mine)"

    run_async(scenario())


@pytest.mark.serial  # a real terminal (tests/tui/test_tui_tmux.py)
@needs_tmux
def test_a_command_preset_made_with_the_form_alone_runs_in_a_real_terminal(tmux, tmp_path):  # noqa: F811
    user = tmp_path / "xdg" / "gputui" / "presets.toml"
    gputui = tmux.start([])  # 80×24
    tmux.wait_for(r"Presets")
    tmux.keys("n")
    tmux.wait_for(r"New preset, not saved yet")
    tmux.wait_for(r"✓ valid")
    tmux.keys(*["BSpace"] * 12)
    tmux.wait_for(shown_field("name", ""))
    tmux.keys("-l", "by-keys")
    tmux.wait_for(shown_field("name", "by-keys"))
    tmux.keys("Tab", "Tab")  # description, command
    time.sleep(0.5)
    tmux.keys("-l", "python3 -c \"print('hello from the form')\"")
    tmux.wait_for(shown_field("command", r"python3 -c \"print\('hello from the form'\)\""))
    tmux.wait_for(r"✓ valid")  # no framework, batch size or warmup_steps asked for
    tmux.keys("C-r")  # save and run
    tmux.wait_for(r"hello from the form")  # in the output pane
    tmux.wait_for(r"Run #1 by-keys — ok")  # ended: q quits without asking
    tmux.keys("q")
    wait_gone([gputui])
    preset = load_file(user)["by-keys"]
    assert preset.command == ("python3", "-c", "print('hello from the form')") and preset.framework is None
