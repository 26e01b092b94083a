"""The Observer that carries a Session's news to the app.

The Session calls observers from its own thread.  The bridge appends what it hears to
a list; the app takes the whole list at its redraw tick (once a second), or when the
bridge wakes it (``wake(bridge)``: the live app posts itself a message).  The bridge
wakes the app only for news that cannot wait for the tick (a run starting or ending, its header, a finding, a
note), and only while none is in flight.  Routine news (samples, throughput readings,
output lines) waits: the panels draw it at the tick anyway, and a run reporting ten
times a second would otherwise wake the app's thread ten times a second for nothing
(a large share of the main thread's time on a small machine:
docs/performance.md#figures-behind-the-codes-choices).  Nothing is dropped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from gputui.model import Sample
from gputui.record import events as ev
from gputui.record.events import Event
from gputui.record.observer import Observer
from gputui.record.schema import Header, Summary
from gputui.view.session_news import (
    EventArrived,
    HeaderArrived,
    News,
    Note,
    RecordingStarted,
    RunKept,
    RunStarted,
    SampleArrived,
    SessionEnded,
    SummaryArrived,
)
from gputui.view.supervisor import SessionTicket


def is_routine(item: News) -> bool:
    """Whether the news can wait for the app's redraw tick."""
    if isinstance(item, SampleArrived):
        return True
    return isinstance(item, EventArrived) and item.event.kind in ev.ROUTINE_EVENTS


class SessionBridge(Observer):
    def __init__(self, ticket: SessionTicket, wake: Callable[[SessionBridge], Any]) -> None:
        self.ticket = ticket
        self._wake = wake
        self._lock = threading.Lock()
        self._items: list[News] = []
        self._posted = False  # a wake-up is in flight: the app takes everything with it

    def take(self) -> list[News]:
        with self._lock:
            items, self._items = self._items, []
            self._posted = False
        return items

    def _put(self, item: News) -> None:
        with self._lock:
            self._items.append(item)
            post = not self._posted and not is_routine(item)
            self._posted = self._posted or post
        if post:
            try:
                self._wake(self)
            except RuntimeError:  # the app's loop has closed: the session is ending too
                pass

    # -- From the supervisor's thread -------------------------------------------------
    def started(self) -> None:
        self._put(RunStarted())

    def note(self, text: str) -> None:
        self._put(Note(text))

    def recording(self, path: str) -> None:
        self._put(RecordingStarted(path))

    def kept(self, path: str) -> None:
        """The run's copy in the run history."""
        self._put(RunKept(path))

    # -- Observer (called from the session's thread) ---------------------------------
    def on_header(self, header: Header) -> None:
        self._put(HeaderArrived(header))

    def on_sample(self, sample: Sample) -> None:
        self._put(SampleArrived(sample))

    def on_event(self, event: Event) -> None:
        self._put(EventArrived(event, event.running_median))  # set on live readings (SummaryBuilder.counted)

    def on_summary(self, summary: Summary) -> None:
        self._put(SummaryArrived(summary))

    def ended(self, error: BaseException | None) -> None:
        self._put(SessionEnded(None if error is None else f"{type(error).__name__}: {error}"))
