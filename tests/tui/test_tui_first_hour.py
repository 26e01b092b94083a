"""A new user's first hour, by keys through Pilot: the dashboard's letter keys stay out
of the preset editor and from under views, the editor's form says what it holds,
replay offers only what it can do, the top line keeps its status under a pop-up, a
command run is named once, and presets can be deleted from the dashboard.  The burst
typed after Tab: tests/tui/test_tui_first_hour_tmux.py."""

from __future__ import annotations

import re
import time

from textual.widgets import Input, Select

from gputui.presets.preset import load_presets
from gputui.tui.screens.command_screen import CommandScreen
from gputui.tui.screens.dashboard_screen import DashboardScreen
from gputui.tui.screens.editor import PresetEditorScreen
from tests.support.dashboard import app_for, make_dashboard
from tests.support.editor import USER_SMOKE, open_editor, setup
from tests.support.fake_nvml import FakeNvml
from tests.support.tui import ScriptedSession, demo_gpus, demo_preset, run_async, shown, wait_until

LETTER_KEYS = ("t Theme", "k Check", "x Command")


def footer_keys(screen) -> set[str]:
    """The actions a screen's footer offers now."""
    return {key.action for key in screen.query("FooterKey")}


def test_dashboard_letter_keys_do_nothing_in_the_editor_and_are_not_in_its_footer(tmp_path):
    """With a dropdown focused, k opened the Check screen over the editor, x the command
    dialog, t the next theme; the editor's footer listed them."""
    presets = load_presets(cwd=tmp_path)

    async def scenario():
        app = app_for(presets, tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            editor = await open_editor(pilot, app, "smoke")
            editor.query_one("#field-framework", Select).focus()
            await pilot.pause()
            footer = (await shown(pilot)).splitlines()[-1]
            assert "^s Save" in footer, footer
            for key in LETTER_KEYS:
                assert key not in footer, footer
            theme = app.theme
            for key in ("k", "x", "t"):
                await pilot.press(key)
                await pilot.pause(0.2)
                assert app.screen is editor, f"{key} opened {app.screen} over the editor"
            assert app.theme == theme

    run_async(scenario())


def test_under_a_dialog_the_dashboards_footer_offers_none_of_its_keys(tmp_path):
    """The dashboard's footer, still in view under a dialog, listed keys that do nothing there."""
    presets = load_presets(cwd=tmp_path)

    async def scenario():
        app = app_for(presets, tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: "check" in footer_keys(app.dashboard), what="k Check offered")
            await pilot.press("x")
            await wait_until(pilot, lambda: isinstance(app.screen, CommandScreen), what="the command dialog")
            await pilot.pause(0.2)
            footer = (await shown(pilot)).splitlines()[-1]
            for key in (*LETTER_KEYS, "q Quit", "e Edit", "n New"):
                assert key not in footer, footer
            await pilot.press("escape")
            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen), what="back on the dashboard")
            await wait_until(pilot, lambda: "check" in footer_keys(app.dashboard), what="k Check offered again")

    run_async(scenario())


def test_a_new_presets_description_follows_the_framework_and_model_picked(tmp_path):
    """A new preset kept "…until you pick a framework and model" after both were picked."""
    presets = load_presets(cwd=tmp_path)

    async def scenario():
        app = app_for(presets, tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("n")
            editor = await wait_until(
                pilot, lambda: isinstance(app.screen, PresetEditorScreen) and app.screen.query("#field-name") and app.screen, what="editor"
            )
            description = editor.query_one("#field-description", Input)
            await wait_until(pilot, lambda: "until you pick a framework and model" in description.value, what="the template's description")
            editor.query_one("#field-framework", Select).value = "torch"
            await wait_until(pilot, lambda: ("resnet50", "resnet50") in editor.query_one("#field-model", Select)._options, what="torch's models listed")
            editor.query_one("#field-model", Select).value = "resnet50"
            await wait_until(pilot, lambda: "until you pick" not in description.value, what="the description says what the preset runs")
            assert description.value == "PyTorch ResNet-50 training"
            assert "PyTorch ResNet-50 training" in await shown(pilot)
            # a description the user wrote stays theirs
            description.value = "mine"
            editor.query_one("#field-model", Select).value = "mobilenetv2"
            await pilot.pause(0.2)
            assert description.value == "mine"

    run_async(scenario())


def test_a_reopened_preset_shows_its_model_and_precision(tmp_path):
    """A reopened preset showed its model as "Select" (none chosen)."""
    presets = load_presets(cwd=tmp_path)

    async def scenario():
        app = app_for(presets, tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            editor = await open_editor(pilot, app, "torch-resnet50")
            await pilot.pause(0.3)
            assert editor.query_one("#field-model", Select).value == "resnet50"
            assert editor.query_one("#field-precision", Select).value == "tf32"
            text = await shown(pilot)
            assert re.search(r"model\s+▊resnet50\s", text), text
            assert "✓ valid" in text

    run_async(scenario())


def replay_app(tmp_path):
    from gputui.record.recording import read_recording
    from gputui.tui.replay_app import make_replay_app
    from tests.support.replay import INPUT_BOUND

    return make_replay_app(read_recording(INPUT_BOUND), start_paused=True, settings_file=tmp_path / "s.toml")


def test_the_replays_summary_offers_no_run_again(tmp_path):
    """In replay the summary offered `r run again`, which did nothing."""
    from gputui.tui.screens.summary_screen import SummaryScreen

    app = replay_app(tmp_path)

    async def scenario():
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("end")  # the recording's end: its run has ended
            await wait_until(pilot, lambda: any(run.ended for run in app.state.runs), what="the run ended")
            await pilot.press("u")
            summary = await wait_until(pilot, lambda: isinstance(app.screen, SummaryScreen) and app.screen, what="the summary")
            text = await shown(pilot)
            assert "Run summary" in text and "run again" not in text.lower(), text
            assert "summary_run_again" not in {binding.binding.id for binding in summary.active_bindings.values()}
            await pilot.press("r")
            await pilot.pause(0.2)
            assert app.screen is summary and not any("runs nothing" in n.message for n in app._notifications)

    run_async(scenario())


def test_the_replays_help_shows_the_replay_keys_first_and_none_it_cannot_do(tmp_path):
    """The replay keys sat on the third page of help, after keys that do not apply in a replay."""
    from gputui.tui.screens.help import HelpScreen

    app = replay_app(tmp_path)

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause(0.3)
            await pilot.press("question_mark")
            await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
            text = await shown(pilot)
            first_page = text[text.index("gputui keys") :]
            assert re.search(r"Replay\s*│?\s*\n.*Space\s+play or pause", first_page), first_page
            assert first_page.index("Replay") < first_page.index("Dashboard"), first_page
            whole = str(app.screen.query_one("#help-text").render())
            for absent in (
                "run the highlighted preset",
                "stop the run",
                "run the last preset again",
                "Preset editor",
                "edit the highlighted preset",
                "check this machine",
            ):
                assert absent not in whole, absent

    run_async(scenario())


def slow_to_watch_again(config):
    """Sessions whose watching after a run takes its time to start (opening NVML on a real machine)."""
    if config.preset is None and slow_to_watch_again.runs_seen:
        time.sleep(4)
    slow_to_watch_again.runs_seen = slow_to_watch_again.runs_seen or config.preset is not None
    return ScriptedSession(config, FakeNvml(demo_gpus()), 4)


def test_under_the_summary_the_top_line_says_how_the_run_ended_not_a_bare_ellipsis(tmp_path):
    """Between a run's end and the watching after it the status was "…"; under the
    summary, which opens then, the top line is not drawn again, and "…" stayed."""
    from gputui.tui.screens.summary_screen import SummaryScreen
    from gputui.tui.widgets.header import RunStatus

    preset = demo_preset()
    slow_to_watch_again.runs_seen = False
    app = make_dashboard(
        {preset.name: preset},
        session_factory=slow_to_watch_again,
        settings_file=tmp_path / "settings.toml",
        confirm_quit=False,
    )

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            app.start_preset(preset.name)
            await wait_until(pilot, lambda: app.state.live_run is not None, what="the run")
            app.supervisor.stop_run()
            await wait_until(pilot, lambda: isinstance(app.screen, SummaryScreen), what="the summary")
            assert app.state.session is None  # the watching has not started yet
            status = str(app.dashboard.query_one(RunStatus).render())
            top = (await shown(pilot)).splitlines()[0]
            assert "#1 resnet50-demo stopped" in status and "…" not in status, status
            assert "#1 resnet50-demo stopped" in top, top

    run_async(scenario())


def test_a_command_runs_side_panel_names_the_command_once(tmp_path):
    """For `x` runs the side panel showed the command twice: as its description and as what it runs."""
    from gputui.presets.command_preset import command_preset
    from gputui.tui.widgets.presets import describe_preset

    presets = load_presets(cwd=tmp_path)
    as_given = command_preset(["python3", "train.py", "--lr", "3e-4"], presets)  # gputui -- python3 train.py ...
    assert describe_preset(as_given, [], compact=False).plain.count("python3 train.py --lr 3e-4") == 1

    async def scenario():
        app = app_for(presets, tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("x")
            await wait_until(pilot, lambda: isinstance(app.screen, CommandScreen), what="the command dialog")
            await pilot.press(*"python3 -c pass", "enter")
            await wait_until(pilot, lambda: any(run.preset.command for run in app.state.runs), what="the command's run")
            await pilot.pause(0.5)
            details = str(app.dashboard.query_one("#preset-details").render())
            assert details.count("python3 -c pass") == 1, details

    run_async(scenario())


MINE = """
[presets.mine]
description = "my own"
framework = "smoke"
steps = 10
"""


def notices(app) -> str:
    return "\n".join(str(notification.message) for notification in app._notifications)


def test_d_deletes_a_user_preset_after_asking_and_refuses_a_builtin(tmp_path):
    """Presets could be created in the dashboard but not deleted there."""
    from gputui.presets.preset import builtin_presets_path, load_file
    from gputui.tui.screens.delete_preset import DeletePresetScreen
    from gputui.tui.widgets.presets import PresetList

    user, _presets = setup(tmp_path)
    user.write_text(USER_SMOKE + MINE)
    presets = load_presets(cwd=tmp_path)
    builtin_before = builtin_presets_path().read_bytes()

    async def scenario():
        app = app_for(presets, tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            plist = app.dashboard.query_one(PresetList)
            assert "d Delete" in (await shown(pilot)).splitlines()[-1]
            # a built-in: said so, nothing asked, nothing written
            plist.select_name("torch-smoke")
            await pilot.press("d")
            await wait_until(pilot, lambda: "built-in" in notices(app), what="the built-in refusal")
            assert "cannot be deleted" in notices(app) and isinstance(app.screen, DashboardScreen)
            # a user preset: asked first; n keeps it
            plist.select_name("mine")
            await pilot.press("d")
            await wait_until(pilot, lambda: isinstance(app.screen, DeletePresetScreen), what="asked first")
            assert "Delete preset mine?" in await shown(pilot)
            await pilot.press("n")
            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen), what="kept")
            assert user.read_text() == USER_SMOKE + MINE
            # y deletes it from the file, the list and the app's presets
            await pilot.press("d")
            await wait_until(pilot, lambda: isinstance(app.screen, DeletePresetScreen), what="asked again")
            await pilot.press("y")
            await wait_until(pilot, lambda: "mine" not in load_file(user), what="deleted from the file")
            assert user.read_text() == USER_SMOKE  # the rest of the file as it was, comments too
            assert user.with_name("presets.toml.bak").read_text() == USER_SMOKE + MINE
            assert "mine" not in app.presets and "mine" not in plist.matching()
            assert "deleted mine" in notices(app)
            # a user preset that hid a built-in: the built-in shows again
            plist.select_name("smoke")
            await pilot.press("d")
            await wait_until(pilot, lambda: isinstance(app.screen, DeletePresetScreen), what="asked")
            assert "shows again" in await shown(pilot)
            await pilot.press("y")
            await wait_until(pilot, lambda: "smoke" not in load_file(user), what="smoke deleted from the file")
            assert app.presets["smoke"].source == builtin_presets_path() and "smoke" in plist.matching()
            assert "A few seconds of pure-Python CPU work" in str(app.dashboard.query_one("#preset-details").render())

    run_async(scenario())
    assert builtin_presets_path().read_bytes() == builtin_before


def test_builtin_preset_descriptions_say_what_a_user_gets_without_our_jargon():
    """The side panel read "Seed table", "Seed 002", "PyTorch twin", "tf-metal method"."""
    from gputui.presets.preset import builtin_presets_path, load_file

    jargon = re.compile(r"seed|twin|tf-metal", re.IGNORECASE)
    described = {name: preset.description for name, preset in load_file(builtin_presets_path()).items()}
    assert {name: text for name, text in described.items() if jargon.search(text)} == {}
    assert all(described.values()), "every built-in preset says what it is"
    # the facts stay: the model, the batch and the precision
    assert re.search(r"ResNet-?50.*synthetic.*batch 32, fp32", described["tf-resnet50"]), described["tf-resnet50"]
    assert re.search(r"ResNet-50.*batch 32, TF32", described["torch-resnet50"]), described["torch-resnet50"]


def test_at_80x24_the_replays_footer_cuts_no_key(tmp_path):
    """The replay's footer ran past the screen's width: `m Measure▏^p Commands`."""
    from textual.widgets._footer import FooterKey

    app = replay_app(tmp_path)

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("end")  # its end: a finding and the summary add f and u
            await wait_until(pilot, lambda: any(run.ended for run in app.state.runs), what="the run ended")
            await pilot.pause(0.3)
            footer = (await shown(pilot)).splitlines()[-1]
            keys = list(app.dashboard.query(FooterKey))
            palette = [key for key in keys if key.has_class("-command-palette")]
            right = palette[0].region.x if palette else 80
            assert all(key.region.right <= right for key in keys if key not in palette), footer
            assert "space Play/pause" in footer and "? Help" in footer, footer

    run_async(scenario())
