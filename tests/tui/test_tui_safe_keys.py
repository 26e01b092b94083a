"""No single key loses work: in the preset editor q and Ctrl+C never quit (text fields
copy with Ctrl+C); leaving it with unsaved changes asks (save, discard, cancel); q while
a run is going asks for a second q (unless --no-confirm-quit); Esc closes Textual's
Keys panel."""

from __future__ import annotations

from textual.widgets import Input, TabbedContent, Tabs, TextArea

from gputui.presets.preset import user_presets_path
from gputui.tui.screens.dashboard_screen import DashboardScreen
from gputui.tui.screens.editor import LeaveEditorScreen, PresetEditorScreen
from tests.support.dashboard import make_dashboard
from tests.support.tui import demo_preset, run_async, scripted_factory, wait_until


def scripted(tmp_path, **kwargs):
    preset = demo_preset()
    return make_dashboard(
        {preset.name: preset}, session_factory=scripted_factory(), settings_file=tmp_path / "s.toml", user_themes_dir=tmp_path / "no-themes", **kwargs
    )


async def open_new_preset(app, pilot) -> PresetEditorScreen:
    await wait_until(pilot, lambda: app.state.header is not None, what="watching")
    await pilot.press("n")
    editor = await wait_until(pilot, lambda: isinstance(app.screen, PresetEditorScreen) and app.screen, what="editor")
    await pilot.pause()
    return editor


async def type_name(pilot, editor: PresetEditorScreen, name: str) -> Input:
    field = editor.query_one("#field-name", Input)
    field.value = ""
    field.focus()
    await pilot.press(*name)
    return field


def test_q_and_ctrl_c_in_the_editor_never_quit_and_the_edit_stays(tmp_path):
    app = scripted(tmp_path)

    async def scenario():
        async with app.run_test(size=(100, 40)) as pilot:
            editor = await open_new_preset(app, pilot)
            field = await type_name(pilot, editor, "mine")
            editor.query_one(Tabs).focus()  # focus off the text fields: q is no longer typed
            await pilot.press("q", "ctrl+c", "ctrl+q")
            await pilot.pause()
            assert app.is_running and app.screen is editor
            assert field.value == "mine"
            editor.query_one("#editor-tabs", TabbedContent).active = "tab-toml"
            await pilot.pause()
            toml = editor.query_one("#editor-toml", TextArea)
            toml.focus()
            toml.select_all()
            await pilot.press("ctrl+c")  # the text area's copy, not quit
            await pilot.pause()
            assert app.is_running and app.screen is editor
            assert app.clipboard == toml.text and "[presets.mine]" in toml.text

    run_async(scenario())


def test_esc_with_unsaved_changes_asks_cancel_keeps_editing_discard_closes_without_saving(tmp_path):
    app = scripted(tmp_path)

    async def scenario():
        async with app.run_test(size=(100, 40)) as pilot:
            editor = await open_new_preset(app, pilot)
            field = await type_name(pilot, editor, "mine")
            await pilot.press("escape")
            await wait_until(pilot, lambda: isinstance(app.screen, LeaveEditorScreen), what="asked")
            await pilot.press("escape")  # cancel: back to the edit
            await wait_until(pilot, lambda: app.screen is editor, what="still editing")
            assert field.value == "mine"
            await pilot.press("escape")
            await wait_until(pilot, lambda: isinstance(app.screen, LeaveEditorScreen), what="asked again")
            await pilot.press("d")
            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen), what="discarded")
            assert not user_presets_path().exists()
            assert "mine" not in app.presets

    run_async(scenario())


def test_esc_then_save_writes_the_preset_and_closes(tmp_path):
    app = scripted(tmp_path)

    async def scenario():
        async with app.run_test(size=(100, 40)) as pilot:
            editor = await open_new_preset(app, pilot)
            await type_name(pilot, editor, "mine")
            await pilot.press("escape")
            await wait_until(pilot, lambda: isinstance(app.screen, LeaveEditorScreen), what="asked")
            await pilot.press("s")
            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen), what="saved and closed")
            assert "[presets.mine]" in user_presets_path().read_text()
            assert "mine" in app.presets

    run_async(scenario())


def test_esc_without_changes_closes_at_once(tmp_path):
    app = scripted(tmp_path)

    async def scenario():
        async with app.run_test(size=(100, 40)) as pilot:
            await open_new_preset(app, pilot)
            await pilot.press("escape")
            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen), what="closed")

    run_async(scenario())


def test_q_while_a_run_is_going_asks_and_a_second_q_quits(tmp_path):
    preset = demo_preset()
    app = scripted(tmp_path, start_preset=preset.name)

    async def scenario():
        async with app.run_test(size=(100, 40)) as pilot:
            await wait_until(pilot, lambda: app.state.live_run, what="a run going")
            await pilot.press("q")
            await pilot.pause()
            assert app.is_running and app.state.live_run
            assert any("press q again" in n.message for n in app._notifications)
            await pilot.press("q")
            await wait_until(pilot, lambda: not app.is_running, what="quit")

    run_async(scenario())


def test_no_confirm_quit_lets_one_q_stop_the_run_and_quit(tmp_path):
    preset = demo_preset()
    app = scripted(tmp_path, start_preset=preset.name, confirm_quit=False)

    async def scenario():
        async with app.run_test(size=(100, 40)) as pilot:
            await wait_until(pilot, lambda: app.state.live_run, what="a run going")
            await pilot.press("q")
            await wait_until(pilot, lambda: not app.is_running, what="quit")

    run_async(scenario())


def test_q_with_no_run_going_quits_at_once(tmp_path):
    app = scripted(tmp_path)

    async def scenario():
        async with app.run_test(size=(100, 40)) as pilot:
            await wait_until(pilot, lambda: app.state.header is not None, what="watching")
            await pilot.press("q")
            await wait_until(pilot, lambda: not app.is_running, what="quit")

    run_async(scenario())


def test_esc_closes_textuals_keys_panel_and_nothing_else(tmp_path):
    app = scripted(tmp_path)

    async def scenario():
        async with app.run_test(size=(120, 40)) as pilot:
            editor = await open_new_preset(app, pilot)
            app.action_show_help_panel()
            await wait_until(pilot, lambda: app.screen.query("HelpPanel"), what="keys panel")
            await pilot.press("escape")
            await wait_until(pilot, lambda: not app.screen.query("HelpPanel"), what="keys panel closed")
            assert app.screen is editor  # the editor stays
            await pilot.press("escape")
            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen), what="editor closed")

    run_async(scenario())
