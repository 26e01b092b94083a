"""Replay: a recording played back through the same bridge, state and widgets as a
live run.

:class:`ReplayPlayer` plays the recorded header, samples and events into a
:class:`~gputui.summary.SummaryBuilder` and a :class:`~gputui.tui.bridge.SessionBridge`
in the order a Session calls its observers (the builder first, so the bridge's
running median includes each reading), and folds the bridge's news
(:mod:`gputui.tui.news`) into a :class:`~gputui.tui.state.DashboardState` with
``apply``, as the live app does with ``SessionNews``.  Time is the recording's ``t``:
playing moves a position forward (speed × wall time); seeking back starts the fold
again from the top, since the state only ever moves forward.  Nothing here runs a command or opens NVML.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from textual.binding import Binding

from gputui import events as ev
from gputui.errors import UserError
from gputui.escape import for_terminal
from gputui.events import Event
from gputui.model import Sample
from gputui.presets import Preset, check_preset
from gputui.protocol import MEASURE
from gputui.record import Recording
from gputui.summary import SummaryBuilder
from gputui.tui import state as st
from gputui.tui.bridge import SessionBridge
from gputui.tui.dashboard_app import REFRESH_S, DashboardApp, app_themes
from gputui.tui.settings import settings_path as default_settings_path
from gputui.tui.state import ReplayStatus, speed_label
from gputui.tui.supervisor import SessionTicket

TICK_S = 0.1  # how often playing moves on
MAX_ITEMS_PER_TICK = 500  # "as fast as possible": this much of the recording per tick
SPEEDS: tuple[float | None, ...] = (1.0, 10.0, 60.0, None)  # None: as fast as it draws
EPSILON = 1e-6


def preset_from_header(header: dict[str, Any], path: Path) -> Preset:
    """The recorded preset (its reference results too); a watch recording gets a
    stand-in named for what it watched, so it replays as a run."""
    from gputui.history import run_label

    recorded = dict(header.get("preset") or {})
    name = recorded.pop("name", None)
    source = Path(recorded.pop("source", None) or path)
    if not name:
        return Preset(name=run_label(header), source=path)
    try:
        return check_preset(name, recorded, source)
    except UserError:  # a key this gputui does not know: the name is what matters here
        return Preset(name=name, source=source)


class ReplayPlayer:
    """A recording folded into a DashboardState up to a position; no Textual here
    beyond the bridge's message type."""

    _position: float  # where the dashboard has been fed to (set by _reset)
    _finished: bool

    def __init__(self, recording: Recording, speed: float | None = 1.0) -> None:
        self.recording = recording
        self.preset = preset_from_header(recording.header, recording.path)
        self.ticket = SessionTicket(serial=1, preset=self.preset)
        # By t; at one t a sample before an event, each in file order.
        samples: Iterator[tuple[tuple[float, int, int], Sample | Event]] = (((s.t, 0, i), s) for i, s in enumerate(recording.samples))
        events: Iterator[tuple[tuple[float, int, int], Sample | Event]] = (((e.t, 1, i), e) for i, e in enumerate(recording.events))
        self.timeline = [(key[0], item) for key, item in heapq.merge(samples, events, key=lambda x: x[0])]
        self.start_t = 0.0
        self.end_t = max([t for t, _ in self.timeline] + [0.0])
        self.speed = speed
        self.playing = True
        self.state = st.DashboardState()
        self._reset(self.state)

    # -- Where things are ------------------------------------------------------------
    @property
    def position(self) -> float:
        return self._position

    @property
    def at_end(self) -> bool:
        return self._next >= len(self.timeline) and self._finished

    def measure_t(self) -> float | None:
        for event in self.recording.events:
            if isinstance(event.payload, ev.PhaseChange) and event.payload.phase == MEASURE:
                return event.t
        return None

    def finding_times(self) -> list[float]:
        """When each finding first opened (the dashboard learns of it then)."""
        seen, times = set(), []
        for event in self.recording.events:
            if isinstance(event.payload, ev.Finding) and event.payload.id not in seen:
                seen.add(event.payload.id)
                times.append(event.t)
        return times

    def next_finding(self) -> float | None:
        return next((t for t in self.finding_times() if t > self._position + EPSILON), None)

    def previous_finding(self) -> float | None:
        return next((t for t in reversed(self.finding_times()) if t < self._position - EPSILON), None)

    def status(self) -> ReplayStatus:
        return ReplayStatus(self._position, self.end_t, self.speed, self.playing, self.recording.cut, self.at_end)

    # -- Moving ----------------------------------------------------------------------
    def seek(self, t: float) -> None:
        """Show the recording as it stood at ``t`` (the end: with its summary)."""
        t = min(max(t, self.start_t), self.end_t)
        if t < self._position - EPSILON:
            fresh = st.DashboardState()
            fresh.versions = self.state.versions.copy()  # versions only grow: widgets see the change
            fresh.touch(*st.SECTIONS)
            self.state = fresh
            self._reset(fresh)
        self._feed(lambda when: when <= t + EPSILON)
        self._position = max(self._position, t)
        if t >= self.end_t - EPSILON:
            self._finish()
        self._fold()

    def advance(self, wall_seconds: float) -> None:
        """Play on by this much wall time at the current speed."""
        if not self.playing or self.at_end:
            return
        if self.speed is None:
            fed = self._feed(lambda when: True, limit=MAX_ITEMS_PER_TICK)
            self._position = self.timeline[self._next - 1][0] if fed and self._next else self._position
            if self._next >= len(self.timeline):
                self._position = self.end_t
                self._finish()
            self._fold()
            return
        self.seek(self._position + wall_seconds * self.speed)

    # -- Folding -------------------------------------------------------------------------
    def _reset(self, state: st.DashboardState) -> None:
        self._builder = SummaryBuilder()
        self._bridge = SessionBridge(self.ticket, post=lambda message: None, running_median=self._builder.recent_median)
        self._observers = (self._builder, self._bridge)
        self._next = 0
        self._position = self.start_t
        self._finished = False
        self._bridge.started()
        self._bridge.on_header(self.recording.header)
        self._fold()

    def _feed(self, due: Callable[[float], bool], limit: int | None = None) -> int:
        fed = 0
        while self._next < len(self.timeline) and due(self.timeline[self._next][0]):
            _, item = self.timeline[self._next]
            for observer in self._observers:
                observer.on_sample(item) if isinstance(item, Sample) else observer.on_event(item)
            self._next += 1
            fed += 1
            if limit is not None and fed >= limit:
                break
        return fed

    def _finish(self) -> None:
        if self._finished:
            return
        self._finished = True
        if self.recording.summary is not None:
            self._bridge.on_summary(self.recording.summary)
            self._bridge.ended(None)
        self._fold()
        if self.recording.summary is None:
            self.state.recording_cut(self.ticket, self.recording.cut or "it has no summary")
        self.playing = False

    def _fold(self) -> None:
        self.state.apply(self.ticket, self._bridge.take())
        self.show_status()

    def show_status(self) -> None:
        """Tell the header: position, speed, playing or paused."""
        self.state.replay = self.status()
        self.state.touch(st.STATUS)


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
