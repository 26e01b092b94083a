"""The Output pane: a scrollable history of the run's output that follows the tail
until the user scrolls up, and keeps stdout and stderr in arrival order."""

from __future__ import annotations

import sys
import textwrap
import threading
import time
from pathlib import Path

from gputui.presets.preset import Preset
from gputui.run.runner import Runner
from gputui.tui.widgets.log import LogPane
from gputui.view import state as st
from tests.support.dashboard import app_for, fake_gpus
from tests.support.tui import run_async, shown, stop_the_run, wait_until

CRASH = textwrap.dedent(
    """
    for i in range(30):
        print(f"step {i} loss 0.{i:03d}")
    def deep(n):
        if n == 0:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        deep(n - 1)
    deep(12)
    """
)


def crash_preset(tmp_path: Path) -> dict[str, Preset]:
    preset = Preset(name="crasher", source=tmp_path / "p.toml", command=(sys.executable, "-c", CRASH))
    return {preset.name: preset}


def pane_text(app) -> str:
    return app.dashboard.query_one(LogPane).build().plain


def test_after_a_crash_at_80x24_the_traceback_can_be_reached_and_the_tail_is_followed(tmp_path):

    async def scenario():
        app = app_for(crash_preset(tmp_path), tmp_path, start_preset="crasher", gpu_factory=fake_gpus(1))
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(pilot, lambda: app.state.run is not None and app.state.run.ended, what="the crash")
            await wait_until(pilot, lambda: app.screen is not app.dashboard, what="the run's summary")
            await pilot.press("escape")  # back from the summary to the dashboard
            await wait_until(pilot, lambda: app.screen is app.dashboard, what="the dashboard")
            await shown(pilot)
            pane = app.dashboard.query_one(LogPane)
            tail = pane_text(app)
            assert "── run #1 crasher: " in tail  # following the tail: the last line shows
            assert "Traceback" not in tail  # too small to hold it all at 80×24
            pane.focus()
            for _ in range(40):  # PgUp until the traceback's first line shows
                if "Traceback (most recent call last)" in pane_text(app):
                    break
                await pilot.press("pageup")
            assert "Traceback (most recent call last)" in await shown(pilot)
            assert "above" in str(pane.border_subtitle)  # it says where the view is
            assert app.focused is pane, app.focused
            await pilot.press("home")
            assert "step 0 loss 0.000" in await shown(pilot)
            await pilot.press("end")
            assert "── run #1 crasher: " in await shown(pilot)
            assert pane.following

    run_async(scenario())


async def wheel(pilot, widget, up: bool) -> None:
    """One notch of the mouse wheel over the widget."""
    from textual import events

    event_type = events.MouseScrollUp if up else events.MouseScrollDown
    region = widget.region
    x, y = region.x + 1, region.y + 1
    widget.post_message(event_type(widget, x, y, 0, 0, 0, False, False, False, screen_x=x, screen_y=y))
    await pilot.pause()


def _fill(state: st.DashboardState, lines: int) -> None:
    for i in range(lines):
        state.log_line("stdout", f"line {i}")


def test_scrolled_up_the_view_stays_put_while_output_arrives_and_the_wheel_scrolls(tmp_path):

    async def scenario():
        app = app_for({}, tmp_path, gpu_factory=fake_gpus(1))
        async with app.run_test(size=(120, 40)) as pilot:
            _fill(app.state, 200)
            await shown(pilot)
            pane = app.dashboard.query_one(LogPane)
            height = pane.content_size.height
            assert height >= 3
            lines = pane_text(app).splitlines()
            # a full pane, ending at the newest line: no "newer half" jump, no blank rows
            assert len(lines) == height and lines[-1] == "line 199"
            await wheel(pilot, pane, up=True)
            await wheel(pilot, pane, up=True)
            scrolled = pane_text(app).splitlines()
            assert scrolled[-1] == "line 193" and not pane.following
            for i in range(200, 260):
                app.state.log_line("stderr", f"line {i}")
            assert (await shown(pilot)) and pane_text(app).splitlines() == scrolled
            await wheel(pilot, pane, up=False)
            await wheel(pilot, pane, up=False)
            assert pane_text(app).splitlines()[-1] == "line 199"
            await pilot.press("end")  # not focused: End reaches the pane only when focused
            pane.focus()
            await pilot.press("end")
            assert pane_text(app).splitlines()[-1] == "line 259" and pane.following

    run_async(scenario())


def test_the_history_keeps_the_last_ten_thousand_lines():
    state = st.DashboardState()
    _fill(state, 10_050)
    assert len(state.log) == 10_000 and state.log[0] == ("stdout", "line 50")


ORDER = textwrap.dedent(
    """
    import sys, time
    print("out 1", flush=True)
    time.sleep(0.3)
    print("err 1", file=sys.stderr, flush=True)
    time.sleep(1.2)
    print("out 2", flush=True)
    """
)


def test_stdout_and_stderr_lines_arrive_in_the_order_they_were_written():
    """A consumer that is slow on one line must not let the other stream overtake it."""
    seen: list[str] = []
    first = threading.Event()

    def on_line(line) -> None:
        if line.text == "out 1" and not first.is_set():
            first.set()
            time.sleep(0.8)  # busy with out 1 while err 1 is written
        seen.append(line.text)

    runner = Runner([sys.executable, "-c", ORDER], on_line=on_line)
    runner.start()
    try:
        runner.wait(30)
    finally:
        runner.close()
    assert seen == ["out 1", "err 1", "out 2"]


# A tqdm-style bar: '\r' redraws, five in half a second, then a long step with the line
# still open (a slow batch, a checkpoint): a terminal shows "5/5" until the line ends.
STALLED_BAR = textwrap.dedent(
    """
    import sys, time
    for i in range(1, 6):
        sys.stdout.write(f"\\rtrain: {i}/5 [{'#' * i}{'.' * (5 - i)}]")
        sys.stdout.flush()
        time.sleep(0.1)
    time.sleep(60)
    print()
    """
)


def test_the_pane_shows_a_redrawn_bars_current_state_before_its_line_ends(tmp_path):
    """The pane shows what the terminal shows: the bar's latest redraw, not its first
    (redraws are recorded at most once a second, so the latest of a burst comes after
    it) and not only once the line ends."""
    (tmp_path / "bar.py").write_text(STALLED_BAR)  # a file: the pane's command line holds no "train: "
    preset = Preset(name="bar", source=tmp_path / "p.toml", command=(sys.executable, str(tmp_path / "bar.py")))

    async def scenario():
        app = app_for({preset.name: preset}, tmp_path, start_preset="bar", gpu_factory=fake_gpus(1))
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_until(pilot, lambda: "train: " in pane_text(app), timeout=30, what="the bar in the pane")
            try:
                await wait_until(pilot, lambda: "train: 5/5 [#####]" in pane_text(app), timeout=10, what="the bar's latest state")
            except AssertionError:
                raise AssertionError(f"the pane shows {pane_text(app)!r}, the terminal 'train: 5/5 [#####]'") from None
            assert "train: 5/5 [#####]" in await shown(pilot)  # on screen, not only in the pane's text
            assert pane_text(app).count("train: ") == 1  # each redraw replaced the one before
            assert app.state.run is not None and not app.state.run.ended  # the line is still open
            await stop_the_run(pilot)

    run_async(scenario())
