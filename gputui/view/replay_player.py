"""Replay's player: a recording played back through the same bridge and state as a
live run, with no app around it (the dashboard's Runs list reads past summaries with
it too).

:class:`ReplayPlayer` plays the recorded header, samples and events into a
:class:`~gputui.session.summary.SummaryBuilder` and a :class:`~gputui.view.bridge.SessionBridge`
in the order a Session calls its observers (the builder first, so the bridge's
running median includes each reading), and folds the bridge's news
(:mod:`gputui.view.session_news`) into a :class:`~gputui.view.state.DashboardState` with
``apply``, as the live app does with ``SessionNews``.  Time is the recording's ``t``:
playing moves a position forward (speed × wall time); seeking back starts the fold
again from the top, since the state only ever moves forward.  Nothing here runs a command or opens NVML.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from pathlib import Path

from gputui.errors import UserError
from gputui.model import Sample
from gputui.presets.preset import Preset, check_preset
from gputui.protocol import MEASURE
from gputui.record import events as ev
from gputui.record.events import Event
from gputui.record.recording import Recording
from gputui.record.schema import Header
from gputui.session.summary import SummaryBuilder
from gputui.view import state as st
from gputui.view.bridge import SessionBridge
from gputui.view.state import ReplayStatus
from gputui.view.supervisor import SessionTicket

TICK_S = 0.1  # how often playing moves on
MAX_ITEMS_PER_TICK = 500  # "as fast as possible": this much of the recording per tick
SPEEDS: tuple[float | None, ...] = (1.0, 10.0, 60.0, None)  # None: as fast as it draws
EPSILON = 1e-6


def preset_from_header(header: Header, path: Path) -> Preset:
    """The recorded preset (its reference results too); a watch recording gets a
    stand-in named for what it watched, so it replays as a run."""
    from gputui.record.history import run_label

    name = header.preset_name
    if header.preset is None or not name:
        return Preset(name=run_label(header), source=path)
    source = Path(header.preset.source or path)
    # its presets.toml table again: every key the header kept, less what names it
    table = {k: v for k, v in header.preset.to_dict().items() if k not in ("name", "source")}
    try:
        return check_preset(name, table, source)
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
        self._bridge = SessionBridge(self.ticket, wake=lambda bridge: None)
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
            if isinstance(item, Sample):
                self._builder.on_sample(item)
                self._bridge.on_sample(item)
            else:  # a live reading carries the running median, as in a live session
                self._bridge.on_event(self._builder.counted(item))
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
