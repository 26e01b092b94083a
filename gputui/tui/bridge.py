"""The Observer that carries a Session's news to the app, as Textual Messages.

The Session calls observers from its own thread.  The bridge appends what it hears to
a list and posts one :class:`SessionNews` message when the list goes from empty to
non-empty; the app takes the whole list when it handles the message.  So however fast
a run prints, at most one message per session is in flight, and nothing is dropped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from textual.message import Message

from gputui.model import Sample
from gputui.record.events import Event
from gputui.record.observer import Observer
from gputui.record.schema import Header, Summary
from gputui.tui.news import (
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
from gputui.tui.supervisor import SessionTicket


class SessionNews(Message):
    """Something happened in a session: call ``bridge.take()`` for the news."""

    def __init__(self, bridge: SessionBridge) -> None:
        super().__init__()
        self.bridge = bridge


class SessionBridge(Observer):
    def __init__(self, ticket: SessionTicket, post: Callable[[Message], Any]) -> None:
        self.ticket = ticket
        self._post = post
        self._lock = threading.Lock()
        self._items: list[News] = []

    def take(self) -> list[News]:
        with self._lock:
            items, self._items = self._items, []
        return items

    def _put(self, item: News) -> None:
        with self._lock:
            self._items.append(item)
            first = len(self._items) == 1
        if first:
            try:
                self._post(SessionNews(self))
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
