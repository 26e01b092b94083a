"""A resize storm (with keys in between) over the dashboard while a run streams: the
terminal is dragged from 1x1 to 300x100 in bursts faster than the app redraws.
Nothing crashes, the app still answers and quits with 0, and it draws at the end."""

from __future__ import annotations

import random

import pytest
from textual.events import Resize
from textual.geometry import Size

from tests.support.keys import STORM_KEYS, scripted_app, send_keys
from tests.support.tui import close_all_and_quit, run_async, wait_until

SIZES = [(1, 1), (2, 1), (10, 3), (20, 5), (40, 10), (80, 24), (100, 30), (140, 40), (300, 100), (1000, 1)]
# The command palette would end the storm: a letter or two, then Enter, can pick its
# Quit (as q would; the key storms of test_trust_keys go through the palette).
KEYS = [key for key in STORM_KEYS if key != "ctrl+p"]


def send_resizes(app, sizes: list[tuple[int, int]]) -> None:
    """Queue resizes at once, as a terminal reports a window being dragged."""
    for width, height in sizes:
        size = Size(width, height)
        app._driver._size = size  # the headless driver's idea of the terminal, as pilot.resize_terminal sets it
        app.post_message(Resize(size, size))


@pytest.mark.parametrize("seed", [1, 7])
def test_a_resize_storm_with_keys_between_crashes_nothing(tmp_path, monkeypatch, seed):
    app = scripted_app(tmp_path, monkeypatch)
    rng = random.Random(seed)

    async def scenario():
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            for _ in range(40):
                send_resizes(app, [rng.choice(SIZES) for _ in range(rng.randint(1, 8))])
                if rng.random() < 0.5:
                    send_keys(app, *(rng.choice(KEYS) for _ in range(rng.randint(1, 3))))
                await pilot.pause(rng.choice([0, 0, 0.02]))
                assert app.is_running
            await pilot.resize_terminal(120, 36)
            await wait_until(pilot, lambda: app.size == Size(120, 36), what="the last size taken")  # after the storm's queue
            assert "gputui" in app.export_screenshot().lower()  # it draws at the final size
            await wait_until(pilot, lambda: app.is_running, what="still running")
            await close_all_and_quit(app, pilot)
        assert app.return_value == 0

    run_async(scenario())


def test_a_redraw_tick_while_the_app_closes_is_skipped_not_a_crash(tmp_path, monkeypatch):
    """Textual's shutdown takes each screen's widgets before it stops the app's timers.  A
    redraw tick in between (the run's recording just finished, so it wanted the GPU grid)
    once met a dashboard without one: NoMatches, a crash on quit (CI, 1 run in ~30).  Here
    the tick is made to come right after the dashboard's widgets are gone."""
    from textual.app import App

    from gputui.view import state as st

    app = scripted_app(tmp_path, monkeypatch)
    real_prune = App._prune
    ticked: list[int] = []

    def prune_then_tick(self, *nodes, parent=None):
        removing = real_prune(self, *nodes, parent=parent)
        if self is not app or app.dashboard not in nodes:
            return removing

        async def then_tick():
            await removing
            app.state.touch(st.HEADER)  # the GPUs "changed": the tick wants the grid
            app.refresh_dashboard(force=True)
            ticked.append(len(app.screen_stack))

        return then_tick()

    monkeypatch.setattr(App, "_prune", prune_then_tick)

    async def scenario():
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause(0.3)
            await pilot.press("q")
        assert app.return_value == 0

    run_async(scenario())
    assert ticked and ticked[0] >= 1  # it came while the screens were still stacked


def _screens_over_the_dashboard(app):
    """Every screen gputui pushes over the dashboard, built as the app builds them."""
    from gputui.record.events import Finding
    from gputui.tui.screens.check import CheckScreen
    from gputui.tui.screens.compare_screen import CompareScreen
    from gputui.tui.screens.editor import PresetEditorScreen
    from gputui.tui.screens.findings_screen import FindingsScreen
    from gputui.tui.screens.help import HelpScreen
    from gputui.tui.screens.summary_screen import SummaryScreen
    from gputui.view.state import RunView
    from gputui.view.supervisor import SessionTicket

    preset = next(iter(app.presets.values()))
    return {
        "summary": lambda: SummaryScreen(RunView(SessionTicket(serial=1, run=1, preset=preset)), []),
        "findings": lambda: FindingsScreen([Finding(id="idle-run-1", kind="idle", title="The run is idle", severity="warning")]),
        "help": lambda: HelpScreen({}),
        "check": lambda: CheckScreen(app.make_check),
        "compare": lambda: CompareScreen(["check", "a", "b"], [["x", "1", "2"]], ["a", "b"]),
        "editor": lambda: PresetEditorScreen(None, new=True),
    }


@pytest.mark.parametrize("name", ["summary", "findings", "help", "check", "compare", "editor"])
def test_a_screen_pushed_in_the_tick_the_app_exits_is_not_a_crash(tmp_path, monkeypatch, name):
    """A run ends (its summary opens) in the very tick the user quits: Textual then mounts
    the screen without its children, and a summary that looked up its panel in on_mount
    raised NoMatches on the way out (seen once in a full run with a core hogged)."""
    app = scripted_app(tmp_path, monkeypatch)

    async def scenario():
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            app.push_screen(_screens_over_the_dashboard(app)[name]())
            await app.quit_now()
        assert app.return_value == 0

    run_async(scenario())
