"""Replay: the dashboard on a recording (``gputui replay FILE``), played by
:class:`~gputui.view.replay_player.ReplayPlayer`."""

from __future__ import annotations

import time
from pathlib import Path

from textual.binding import Binding

from gputui.escape import for_terminal
from gputui.record.recording import Recording
from gputui.tui.app_base import REFRESH_S, DashboardApp, app_themes
from gputui.tui.screens.help import Section, help_sections
from gputui.tui.user_settings import settings_path as default_settings_path
from gputui.view.replay_player import SPEEDS, TICK_S, ReplayPlayer
from gputui.view.state import speed_label

# What help leaves out in a replay: the sections and binding ids of runs and presets.
REPLAY_LEAVES_OUT = frozenset(
    {"Preset editor", "Check", "run_preset", "stop_run", "run_again", "edit_preset", "new_preset", "delete_preset", "check", "run_command", "summary_run_again"}
)


class ReplayApp(DashboardApp):
    """The dashboard on a recording.  Keys: space play/pause, m the measured phase,
    ] and [ the next and previous finding, Home and End, 1 2 3 4 for 1x 10x 60x max."""

    BINDINGS = [
        Binding("space", "toggle_play", "Play/pause", id="replay_play"),
        Binding("m", "seek_measure", "Measured", id="replay_measure"),
        Binding("right_square_bracket", "seek_finding(1)", "Next finding", id="replay_next_finding"),
        Binding("left_square_bracket", "seek_finding(-1)", "Prev finding", id="replay_previous_finding", show=False),
        # priority: the preset list would take Home and End for itself
        Binding("home", "seek_start", "Start", id="replay_start", show=False, priority=True),
        Binding("end", "seek_end", "End", id="replay_end", show=False, priority=True),
        Binding("1", "speed(0)", "1x", id="replay_speed_1", show=False),
        Binding("2", "speed(1)", "10x", id="replay_speed_10", show=False),
        Binding("3", "speed(2)", "60x", id="replay_speed_60", show=False),
        Binding("4", "speed(3)", "Max speed", id="replay_speed_max", show=False),
    ]

    def __init__(self, recording: Recording, *, speed: float | None, start_paused: bool, **kwargs) -> None:
        self.player = ReplayPlayer(recording, speed)
        super().__init__(presets={self.player.preset.name: self.player.preset}, **kwargs)
        self.player.playing = not start_paused
        self.player.show_status()
        self.state = self.player.state
        self.sub_title = for_terminal(f"replay {recording.path.name}")
        self._clock = time.monotonic
        self._last_tick: float | None = None

    def help_sections(self) -> tuple[Section, ...]:
        """The replay's keys first; none that run or edit a preset (a replay does neither)."""
        return help_sections(first="Replay", leave_out=REPLAY_LEAVES_OUT)

    def start_source(self) -> None:
        if self.player.recording.cut:
            self.notify(f"{self.player.recording.path.name} ends early: {self.player.recording.cut}", severity="warning", timeout=8)
        self.set_interval(TICK_S, self._tick)

    def _tick(self) -> None:
        now = self._clock()
        last, self._last_tick = self._last_tick, now
        if last is None or not self.player.playing:
            return
        self.player.advance(now - last)
        self._show()

    def _show(self, force: bool = False) -> None:
        self.state = self.player.state  # a seek back starts a fresh state
        if force:
            self.refresh_dashboard(force=True)

    def _seek(self, t: float | None, missing: str) -> None:
        if t is None:
            self.notify(missing)
            return
        self.player.seek(t)
        self._show(force=True)

    # -- Keys --------------------------------------------------------------------------
    def action_toggle_play(self) -> None:
        player = self.player
        if player.at_end and not player.playing:
            player.seek(player.start_t)  # play again from the start
        player.playing = not player.playing
        self._last_tick = self._clock()
        player.show_status()
        self._show(force=True)

    def action_seek_measure(self) -> None:
        self._seek(self.player.measure_t(), "This recording has no measured phase.")

    def action_seek_finding(self, direction: int) -> None:
        t = self.player.next_finding() if direction > 0 else self.player.previous_finding()
        self._seek(t, "No finding after this point." if direction > 0 else "No finding before this point.")

    def action_seek_start(self) -> None:
        self._seek(self.player.start_t, "")

    def action_seek_end(self) -> None:
        self._seek(self.player.end_t, "")

    def action_speed(self, index: int) -> None:
        self.player.speed = SPEEDS[index]
        self.player.show_status()
        self.notify(f"speed {speed_label(self.player.speed)}", timeout=2)
        self._show(force=True)


def make_replay_app(
    recording: Recording,
    *,
    speed: float | None = 1.0,
    start_paused: bool = False,
    theme: str | None = None,
    settings_file: Path | None = None,
    user_themes_dir: Path | None = None,
    refresh_interval: float = REFRESH_S,
) -> ReplayApp:
    themes, problems = app_themes(theme, user_themes_dir)
    return ReplayApp(
        recording,
        speed=speed,
        start_paused=start_paused,
        themes=themes,
        theme_problems=problems,
        settings_file=settings_file or default_settings_path(),
        theme=theme,
        refresh_interval=refresh_interval,
    )
