"""A live run as a viewer sees it: its recording, read from the start and then as it grows,
told to observers in the order a Session tells them.

The recording is the run's source of truth, so a viewer needs nothing else: attaching
late rebuilds the whole run (chart, findings, phases) from its first line, any number of
viewers can follow one run, and a viewer that goes away leaves the run as it was.  A
:class:`FollowedRun` is what the dashboard's supervisor drives in place of a Session
while it shows a live run: :meth:`run` follows until the summary (or until the run's
process is gone without one: ``lost`` says so), :meth:`stop` asks the run to stop
(gputui.live.stop_request), :meth:`release` stops following and leaves the run going.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from gputui.live.registry import LiveRun
from gputui.live.stop_request import request_stop
from gputui.model import Sample
from gputui.record.events import Event
from gputui.record.follow import RecordingTail, TailItem
from gputui.record.observer import Observer
from gputui.record.schema import Header, Summary
from gputui.session.summary import SummaryBuilder

POLL_S = 0.5  # how often a caught-up viewer looks for new lines; the run flushes about once a second
# The samples a viewer catching up on a long run reads: more than any panel draws (a
# sparkline holds 240); the events, all of them, make the chart, the findings and phases.
RECENT_SAMPLES = 600
QUIET_CHECK_S = 3.0  # this long without a new line, ask whether the run's process is still there


class FollowedRun:
    """A live run followed through its recording; see the module docstring.  Made from
    the run's entry, or from a function that starts the run and returns its entry
    (called by :meth:`run`, in the caller's thread: starting takes a second or two)."""

    def __init__(self, live: LiveRun | Callable[[], LiveRun], *, poll_s: float = POLL_S) -> None:
        self._start = None if isinstance(live, LiveRun) else live
        self.live: LiveRun | None = live if isinstance(live, LiveRun) else None
        self._poll_s = poll_s
        self._observers: list[Observer] = []
        self._listed: list[Callable[[LiveRun], None]] = []
        self._lock = threading.Lock()
        self._stop_reason: str | None = None  # asked before the run had started
        self._released = threading.Event()
        self.summary_builder = SummaryBuilder()  # carries the running median, as a Session's does
        self.lost: str | None = None  # why it ended without a summary

    def add_observer(self, observer: Observer) -> None:
        self._observers.append(observer)

    def when_started(self, callback: Callable[[LiveRun], None]) -> None:
        """Call ``callback`` with the run's entry once it is known (at once if it is)."""
        self._listed.append(callback)

    def stop(self, reason: str) -> None:
        """Ask the run to stop; it says so in its recording, which this keeps following.
        A UserError when it has ended or is not the user's."""
        with self._lock:
            live = self.live
            if live is None:
                self._stop_reason = reason  # asked as soon as it has started
                return
        request_stop(live, reason)

    def release(self) -> None:
        """Stop following (the viewer is closing); the run goes on.  Thread-safe."""
        self._released.set()

    def _started(self) -> LiveRun:
        live = self._start() if self._start is not None else self.live
        assert live is not None  # made from an entry, or from what starts one
        with self._lock:
            self.live = live
            asked = self._stop_reason
        for callback in self._listed:
            callback(live)
        if asked is not None:
            request_stop(live, asked)
        return live

    def run(self) -> Summary | None:
        """Start the run if this was made to, then follow its recording until its
        summary, the run's end without one, or release()."""
        live = self._started()
        tail = RecordingTail(live.recording, recent_samples=RECENT_SAMPLES)
        quiet_s = 0.0
        caught_up = True
        try:
            while not self._released.is_set():
                items = tail.read()
                if items:
                    self._tell(items)
                    quiet_s, caught_up = 0.0, False
                    continue
                if not caught_up:  # as a Session does once it has handled what was queued
                    caught_up = True
                    for observer in self._observers:
                        observer.on_idle()
                if tail.ended:
                    break
                if quiet_s >= QUIET_CHECK_S and self._run_is_gone(tail):
                    break
                if self._released.wait(self._poll_s):
                    break
                quiet_s += self._poll_s
        finally:
            tail.close()
        return tail.summary

    def _run_is_gone(self, tail: RecordingTail) -> bool:
        """Its process is gone and nothing more came after it let go of the file."""
        assert self.live is not None
        if self.live.alive() or not tail.writer_gone():
            return False
        rest = tail.read()
        if rest:
            self._tell(rest)
        if not tail.ended:
            self.lost = f"{self.live.name}: its process ({self.live.pid}) ended without finishing the recording (killed?)"
        return True

    def _tell(self, items: list[TailItem]) -> None:
        builder = self.summary_builder
        for item in items:
            if isinstance(item, Sample):
                builder.on_sample(item)
                for observer in self._observers:
                    observer.on_sample(item)
            elif isinstance(item, Event):
                event = builder.counted(item)  # a live reading carries the running median
                for observer in self._observers:
                    observer.on_event(event)
            elif isinstance(item, Header):
                builder.on_header(item)
                for observer in self._observers:
                    observer.on_header(item)
            else:
                for observer in self._observers:
                    observer.on_summary(item)
