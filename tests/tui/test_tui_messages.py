"""Screens and widgets ask the app through Messages (gputui.tui.widget_messages), and panels
draw the state handed to them: none of them reaches into the concrete App."""

from __future__ import annotations

from pathlib import Path

from textual.app import App, ComposeResult

from gputui.record.history import KeptRun
from gputui.record.recording import read_recording
from gputui.tui.replay_app import make_replay_app
from gputui.tui.widget_messages import CompareRuns, OpenRun, StartPreset
from gputui.tui.widgets.gpu_panel import GpuPanel
from gputui.tui.widgets.presets import PresetList
from gputui.tui.widgets.runs import RunsList
from gputui.view import state as st
from tests.support.process import REPO
from tests.support.tui import run_async, wait_until

TUI = REPO / "gputui" / "tui"


def test_no_screen_or_widget_reaches_the_app_past_the_type_checker():
    hits = [
        f"{path.relative_to(REPO)}:{n}"
        for path in sorted(TUI.rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "# type: ignore[attr-defined]" in line
    ]
    assert hits == []


class RunsOnly(App[None]):
    """A bare App (not gputui's): the Runs list needs only the state it is given."""

    def __init__(self, state: st.DashboardState) -> None:
        super().__init__()
        self.dashboard_state = state
        self.asked: list[object] = []

    def compose(self) -> ComposeResult:
        yield RunsList(id="runs", source=lambda: self.dashboard_state)

    def on_open_run(self, message: OpenRun) -> None:
        self.asked.append(message)

    def on_compare_runs(self, message: CompareRuns) -> None:
        self.asked.append(message)


def test_the_runs_list_draws_its_given_state_and_asks_the_app_by_message(tmp_path: Path):
    state = st.DashboardState()
    older, newer = (KeptRun(path=tmp_path / f"{name}.jsonl", size=1, label=name, outcome="ok") for name in ("older", "newer"))
    state.set_history([newer, older])

    async def scenario() -> None:
        app = RunsOnly(state)
        async with app.run_test(size=(60, 10)) as pilot:
            runs = app.query_one(RunsList)
            runs.focus()
            runs.sync(force=True)
            await pilot.pause()
            assert "newer" in runs.render().plain and "older" in runs.render().plain
            await pilot.press("enter")
            await wait_until(pilot, lambda: app.asked, what="OpenRun")
            opened = app.asked.pop()
            assert isinstance(opened, OpenRun) and opened.entry is newer
            await pilot.press("c", "down", "c")
            await wait_until(pilot, lambda: app.asked, what="CompareRuns")
            compared = app.asked.pop()
            assert isinstance(compared, CompareRuns) and compared.entries == [newer, older]

    run_async(scenario())


def test_a_replay_answers_the_dashboards_messages_and_its_panels_follow_a_seek_back(tmp_path: Path):
    recording = read_recording(REPO / "docs" / "recordings" / "torch-resnet50-input-bound.jsonl")

    async def scenario() -> None:
        app = make_replay_app(recording, start_paused=True, settings_file=tmp_path / "s.toml", user_themes_dir=tmp_path / "no-themes")
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_until(pilot, lambda: app.dashboard.query(GpuPanel), what="GPU panel")
            notes: list[str] = []
            app.notify = lambda message, **kwargs: notes.append(str(message))
            app.dashboard.query_one(PresetList).post_message(StartPreset(next(iter(app.presets))))
            await wait_until(pilot, lambda: notes, what="the replay's answer")
            assert notes == ["A replay runs nothing."]

            await pilot.press("end")
            await wait_until(pilot, lambda: app.state.run and app.state.run.ended, what="the end")
            before = app.state
            await pilot.press("home")  # a seek back: the replay starts a fresh state object
            await wait_until(pilot, lambda: app.state is not before, what="seek back")
            assert app.dashboard.query_one(GpuPanel).state is app.state

    run_async(scenario())
