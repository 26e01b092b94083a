"""The dashboard's preset editor, by keys through Pilot: edit a preset's batch size,
save, run it and find the new batch size in the recording; an invalid edit leaves the
file byte-identical; a built-in is read-only; a change on disk asks to overwrite or reload."""

from __future__ import annotations

import time

import pytest
from textual.widgets import Input

from gputui.presets.preset import load_file, load_presets
from gputui.tui.screens.dashboard_screen import DashboardScreen
from gputui.tui.screens.editor import ConflictScreen, NameScreen, PresetEditorScreen
from tests.support.dashboard import app_for
from tests.support.editor import USER_SMOKE, open_editor, setup
from tests.support.process import try_read
from tests.support.tmux import needs_tmux, tmux, wait_gone  # noqa: F401 (tmux: the fixture)
from tests.support.tui import run_async, shown, shown_field, wait_until


async def retype(pilot, editor: PresetEditorScreen, field: str, text: str) -> None:
    editor.query_one(f"#field-{field}").focus()
    await pilot.press("end", *["backspace"] * 12, *text)
    await pilot.pause()


def test_edit_batch_size_save_run_and_see_it_in_the_recording(tmp_path):
    user, presets = setup(tmp_path)
    record = tmp_path / "run.jsonl"

    async def scenario():
        app = app_for(presets, tmp_path, record_path=record)
        async with app.run_test(size=(120, 40)) as pilot:
            editor = await open_editor(pilot, app, "smoke")
            assert f"From {user}" in await shown(pilot)
            await retype(pilot, editor, "batch_size", "48")
            assert "✓ valid" in await shown(pilot)
            await pilot.press("ctrl+s")
            await wait_until(pilot, lambda: load_file(user)["smoke"].batch_size == 48, what="saved")
            assert app.presets["smoke"].batch_size == 48
            await pilot.press("ctrl+r")
            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) or app.state.run, what="back")
            run = await wait_until(pilot, lambda: app.state.run, what="run started")
            assert run.preset.batch_size == 48
            await wait_until(pilot, lambda: run.ended, timeout=60, what="run ended")

    run_async(scenario())
    after = user.read_text()
    assert after == USER_SMOKE.replace("batch_size = 32   # small", "batch_size = 48   # small")
    recording = try_read(record)
    assert recording.header.preset.batch_size == 48
    assert "--batch-size" in recording.header.command and "48" in recording.header.command


def test_an_invalid_edit_in_the_app_leaves_the_file_byte_identical(tmp_path):
    user, presets = setup(tmp_path)
    before = user.read_bytes()

    async def scenario():
        app = app_for(presets, tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            editor = await open_editor(pilot, app, "smoke")
            await retype(pilot, editor, "batch_size", "0")
            status = str(editor.query_one("#editor-status").render())
            assert "[presets.smoke].batch_size: expected a whole number of 1 or more" in status
            await pilot.press("ctrl+s")
            await pilot.pause(0.2)
            assert user.read_bytes() == before
            await retype(pilot, editor, "batch_size", "32")
            # the raw TOML tab, with an unknown key
            editor.query_one("#editor-tabs").active = "tab-toml"
            await pilot.pause(0.2)
            area = editor.query_one("#editor-toml")
            area.text = area.text.replace("steps = 20", "stepz = 20")
            await pilot.pause(0.2)
            assert "[presets.smoke].stepz: unknown key" in str(editor.query_one("#editor-status").render())
            await pilot.press("ctrl+s")
            await pilot.pause(0.2)
            assert user.read_bytes() == before
            assert app.presets["smoke"].batch_size == 32

    run_async(scenario())
    assert user.read_bytes() == before
    assert not user.with_name("presets.toml.bak").exists()


def test_a_builtin_is_read_only_and_save_as_makes_an_editable_copy(tmp_path):
    user = tmp_path / "xdg" / "gputui" / "presets.toml"
    presets = load_presets(cwd=tmp_path)

    async def scenario():
        app = app_for(presets, tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            editor = await open_editor(pilot, app, "smoke")
            assert "built-in, read-only" in await shown(pilot)
            await retype(pilot, editor, "steps", "7")
            await pilot.press("ctrl+s")
            await pilot.pause(0.2)
            assert not user.exists()
            await pilot.press("ctrl+o")
            await pilot.pause(0.3)
            await pilot.press(*["backspace"] * 10, *"my-smoke", "enter")
            await wait_until(pilot, lambda: user.exists() and "my-smoke" in load_file(user), what="copy saved")
            assert load_file(user)["my-smoke"].steps == 7
            assert "my-smoke" in app.presets

    run_async(scenario())


def test_a_change_on_disk_asks_to_overwrite_or_reload(tmp_path):
    user, presets = setup(tmp_path)

    async def scenario():
        app = app_for(presets, tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            editor = await open_editor(pilot, app, "smoke")
            user.write_text(USER_SMOKE.replace("steps = 20", "steps = 21"))  # someone else saved
            await retype(pilot, editor, "batch_size", "40")
            await pilot.press("ctrl+s")
            await wait_until(pilot, lambda: isinstance(app.screen, ConflictScreen), what="conflict")
            await pilot.press("r")
            await wait_until(pilot, lambda: app.screen is editor, what="back to the editor")
            assert editor.query_one("#field-steps").value == "21"
            assert editor.query_one("#field-batch_size").value == "32"
            await retype(pilot, editor, "batch_size", "40")
            await pilot.press("ctrl+s")
            await wait_until(pilot, lambda: load_file(user)["smoke"].batch_size == 40, what="saved")
            assert load_file(user)["smoke"].steps == 21

    run_async(scenario())


@pytest.mark.serial  # a real terminal (tests/tui/test_tui_tmux.py)
@needs_tmux
def test_create_a_preset_in_a_real_terminal_with_keys_alone(tmux, tmp_path):  # noqa: F811 (tmux: the fixture)
    user = tmp_path / "xdg" / "gputui" / "presets.toml"  # the tmux fixture's XDG_CONFIG_HOME: nothing there yet
    gputui = tmux.start([])
    tmux.wait_for(r"Presets")
    tmux.keys("n")
    tmux.wait_for(r"New preset, not saved yet")
    tmux.wait_for(r"✓ valid")  # the form is up, the name field has the focus
    # Wait for each key's effect: keys typed faster than the app reads them may merge.
    tmux.keys(*["BSpace"] * 12)
    tmux.wait_for(shown_field("name", ""))
    tmux.keys("-l", "from-keys")
    tmux.wait_for(shown_field("name", "from-keys"))
    tmux.keys(*["Tab"] * 5)  # description, command, framework, model, batch size
    time.sleep(0.5)
    tmux.keys(*["BSpace"] * 6)
    tmux.wait_for(shown_field("batch size", ""))
    tmux.keys("-l", "99")
    tmux.wait_for(shown_field("batch size", "99"))
    tmux.keys("C-s")
    tmux.wait_for(r"saved from-keys")
    tmux.keys("Escape")
    tmux.wait_for(r"(?m)^\s*│?\s*from-keys")  # in the preset list
    tmux.keys("q")
    wait_gone([gputui])
    preset = load_file(user)["from-keys"]
    assert preset.batch_size == 99 and preset.framework == "smoke"


# A valid name and a description with the characters a shell or TOML treats specially.
BURST_NAME = ("burst-" + "abcdefghij0123456789_." * 10)[:200]
BURST_DESCRIPTION = ("typed at once: 'quotes' \"double\" a=b, c/d? e! (f) [g] #h ~i " * 4)[:200]


@pytest.mark.serial  # a real terminal (tests/tui/test_tui_tmux.py)
@needs_tmux
def test_a_burst_of_200_keys_lands_whole_in_the_name_and_the_description(tmux, tmp_path):  # noqa: F811 (tmux: the fixture)
    """Issue 25, item 1: tmux send-keys with no delay (a laggy SSH link) into the name and
    the description; the saved file holds exactly what was typed."""
    user = tmp_path / "xdg" / "gputui" / "presets.toml"
    gputui = tmux.start([])
    tmux.wait_for(r"Presets")
    tmux.keys("n")
    tmux.wait_for(r"✓ valid")  # the form is up, the name field has the focus
    # no waiting between keys: each call is one burst, as a slow link delivers them
    tmux.keys("C-u")
    tmux.keys("-l", BURST_NAME)
    tmux.keys("Tab", "C-u")  # the description, emptied
    tmux.keys("-l", BURST_DESCRIPTION)
    time.sleep(1)
    tmux.keys("C-s")
    tmux.wait_for(r"(?s)From\s+/.*✓ valid", timeout=10)  # saved: the editor names the file it saved to
    assert {name: preset.description for name, preset in load_file(user).items()} == {BURST_NAME: BURST_DESCRIPTION}
    tmux.keys("Escape")
    tmux.wait_for(r"Presets")
    tmux.keys("q")
    wait_gone([gputui])


def notices(app) -> str:
    return "\n".join(str(notification.message) for notification in app._notifications)


def test_save_as_on_a_builtin_offers_a_name_not_taken(tmp_path):
    """Issue 25, item 9: "Save as" on a built-in offered the built-in's own name."""
    user = tmp_path / "xdg" / "gputui" / "presets.toml"
    user.parent.mkdir(parents=True)
    user.write_text('[presets.smoke-copy]\ndescription = "taken"\nframework = "smoke"\n')
    presets = load_presets(cwd=tmp_path)

    async def scenario():
        app = app_for(presets, tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await open_editor(pilot, app, "smoke")
            await pilot.press("ctrl+o")
            name_screen = await wait_until(pilot, lambda: isinstance(app.screen, NameScreen) and app.screen, what="save-as name")
            assert name_screen.query_one("#save-as-name", Input).value == "smoke-copy-2"

    run_async(scenario())


def test_saving_under_a_builtins_name_says_it_overrides_the_builtin(tmp_path):
    user = tmp_path / "xdg" / "gputui" / "presets.toml"
    presets = load_presets(cwd=tmp_path)

    async def scenario():
        app = app_for(presets, tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await open_editor(pilot, app, "smoke")
            await pilot.press("ctrl+o")
            await wait_until(pilot, lambda: isinstance(app.screen, NameScreen), what="save-as name")
            await pilot.press("ctrl+u", *"smoke", "enter")
            await wait_until(pilot, lambda: user.exists(), what="saved")
            await pilot.pause()
            assert "overrides the built-in preset smoke" in notices(app)

    run_async(scenario())


def background(widget) -> object:
    return widget.background_colors[1]  # its own, blended over what is behind it


@pytest.mark.parametrize("theme", ["gputui-dark", "gputui-light", "gputui-high-contrast"])
def test_fields_show_as_boxes_and_the_focused_one_stands_out_at_80x24(tmp_path, theme):
    """Issue 25, item 8: the fields had no box and no focus mark beyond the cursor."""
    presets = load_presets(cwd=tmp_path)

    async def scenario():
        app = app_for(presets, tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            app.theme = theme
            editor = await open_editor(pilot, app, "smoke")
            await pilot.pause()
            focused, unfocused = editor.query_one("#field-name", Input), editor.query_one("#field-description", Input)
            assert focused.has_focus
            # edges at its sides: the ANSI theme has no tints to tell a field from the screen
            assert unfocused.styles.border_left[0] not in ("", "none", "hidden"), "a field has no box"
            assert focused.styles.border_left != unfocused.styles.border_left, "the focused field's box looks like the others"
            if not app.current_theme.ansi:
                assert background(unfocused) != background(editor) and background(focused) != background(unfocused)

    run_async(scenario())


def test_ctrl_t_switches_between_the_form_and_toml_tabs_and_the_footer_says_so(tmp_path):
    presets = load_presets(cwd=tmp_path)

    async def scenario():
        app = app_for(presets, tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            editor = await open_editor(pilot, app, "smoke")
            assert "^t Form/TOML" in await shown(pilot)
            tabs = editor.query_one("#editor-tabs")
            await pilot.press("ctrl+t")
            await wait_until(pilot, lambda: tabs.active == "tab-toml" and editor.query_one("#editor-toml").has_focus, what="TOML tab")
            await pilot.press("ctrl+t")
            await wait_until(pilot, lambda: tabs.active == "tab-form" and editor.query_one("#field-name").has_focus, what="form tab")

    run_async(scenario())
