"""Help and the footer: ``?`` and F1 open gputui's own keys by context, Esc or ``?``
close them; the footer shows the keys that apply now, edit and new included, and hides
stop, run again, findings and summary when they do not apply."""

from __future__ import annotations

import inspect

import pytest
from textual.binding import Binding

from gputui.tui.screens.dashboard_screen import DashboardScreen
from gputui.tui.screens.help import HELP, HelpScreen
from gputui.tui.screens.summary_screen import SummaryScreen
from gputui.tui.screenshot import screen_text
from tests.support.dashboard import make_dashboard
from tests.support.fake_nvml import FakeNvml
from tests.support.snapshots import FINDING
from tests.support.tui import ScriptedSession, demo_gpus, demo_preset, run_async, shown, stop_the_run, wait_until


def scripted(tmp_path, findings=None, settings=None, **kwargs):
    """The demo preset's dashboard; ``findings`` come in runs only, not while watching."""
    preset = demo_preset()

    def session_factory(config):
        return ScriptedSession(config, FakeNvml(demo_gpus()), 24, findings if config.preset else None)

    return make_dashboard(
        {preset.name: preset},
        session_factory=session_factory,
        settings_file=settings or tmp_path / "settings.toml",
        user_themes_dir=tmp_path / "no-themes",
        **kwargs,
    )


def footer(text: str) -> str:
    return text.rstrip("\n").splitlines()[-1]


async def shown_footer(pilot) -> str:
    """The footer's line once it is drawn: Textual's Footer composes its keys anew after
    the bindings change (a run starting or ending), and a loaded machine can catch it
    blank in between."""
    text = await shown(pilot)
    if not footer(text).strip():
        await wait_until(pilot, lambda: footer(screen_text(pilot.app)).strip(), what="the footer drawn")
        text = await shown(pilot)
    return footer(text)


def test_question_mark_and_f1_open_help_by_context_and_esc_or_question_mark_close_it(tmp_path):
    app = scripted(tmp_path)

    async def scenario():
        async with app.run_test(size=(100, 50)) as pilot:
            await wait_until(pilot, lambda: app.state.header is not None, what="watching")
            await pilot.press("question_mark")
            await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
            text = await shown(pilot)
            await pilot.press("end")  # the sections past the first screen
            text += await shown(pilot)
            for context in ("Dashboard", "Preset editor", "Findings", "Run summary", "Check"):
                assert context in text
            assert "edit the highlighted preset" in text and "a new preset" in text
            assert "Ctrl+S" in text and "Esc / f" in text
            await pilot.press("escape")
            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen), what="closed by Esc")
            await pilot.press("f1")
            await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen), what="help by F1")
            await pilot.press("question_mark")
            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen), what="closed by ?")

    run_async(scenario())


def _gputui_binding_ids() -> set[str]:
    """Every binding id of gputui's screens and widgets (the replay's and dialogs' too)."""
    import gputui.tui.live_app as app_module
    import gputui.tui.replay_app as replay
    from gputui.tui.screens import check, editor
    from gputui.tui.screens import compare_screen as compare
    from gputui.tui.screens import dashboard_screen as dashboard
    from gputui.tui.screens import findings_screen as findings
    from gputui.tui.screens import summary_screen as summary
    from gputui.tui.widgets import presets, runs

    ids = set()
    for module in (app_module, replay, check, compare, dashboard, editor, findings, summary, presets, runs):
        for _name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__:
                ids |= {b.id for b in cls.__dict__.get("BINDINGS", []) if isinstance(b, Binding) and b.id}
    return ids


def test_help_lists_every_key_gputui_binds_except_quits_inside_views_and_dialog_keys():
    listed = {binding_id for _context, rows in HELP for binding_id, _keys, _what in rows if binding_id}
    # Each view's own q (quit from there) and the small dialogs say their keys on screen.
    not_listed = {b for b in _gputui_binding_ids() if b.endswith("_quit") or b.startswith(("name_", "conflict_", "leave_"))}
    # no_findings: f while there are none, listed as show_findings (its twin on the same key)
    assert _gputui_binding_ids() - not_listed - {"quit_ctrl_c", "replay_speed_10", "replay_speed_60", "replay_speed_max", "no_findings"} <= listed


def test_help_shows_keys_as_remapped_in_settings(tmp_path):
    settings = tmp_path / "settings.toml"
    settings.write_text('[keys]\nshow_findings = "g"\n')
    app = scripted(tmp_path, settings=settings)

    async def scenario():
        async with app.run_test(size=(100, 50)) as pilot:
            await pilot.press("f1")
            await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
            line = next(row for row in (await shown(pilot)).splitlines() if "what holds the run back" in row)
            assert " g " in line and " f " not in line

    run_async(scenario())


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_the_footer_shows_the_keys_that_apply_now(tmp_path, size):
    app = scripted(tmp_path, findings=[FINDING])
    preset = demo_preset()

    async def scenario():
        async with app.run_test(size=size) as pilot:
            await wait_until(pilot, lambda: app.state.header is not None, what="watching")
            idle = await shown_footer(pilot)
            for key in ("e Edit", "n New", "? Help", "q Quit"):
                assert key in idle, idle
            for key in ("s Stop", "r Run again", "f Findings", "u Summary"):
                assert key not in idle, idle
            app.start_preset(preset.name)
            await wait_until(pilot, lambda: app.state.open_findings(), what="a finding")
            running = await shown_footer(pilot)
            for key in ("s Stop", "f Findings", "q Quit"):
                assert key in running, running
            assert "r Run again" not in running and "u Summary" not in running, running
            await stop_the_run(pilot)
            await wait_until(pilot, lambda: isinstance(app.screen, SummaryScreen), what="summary")
            await pilot.press("escape")
            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen), what="back")
            ended = await shown_footer(pilot)
            for key in ("r Run again", "u Summary", "f Findings", "q Quit"):
                assert key in ended, ended
            assert "s Stop" not in ended, ended

    run_async(scenario())
