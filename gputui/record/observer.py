"""What a Session tells its observers (the recorder, the progress line, the dashboard).

Observers are called from one thread, in order: header first, then samples and events
as they happen (with ``on_idle`` whenever the session has caught up), then the summary.
"""

from __future__ import annotations

from gputui.model import Sample
from gputui.record.events import Event
from gputui.record.schema import Header, Summary


class Observer:
    """Base class: override what you need."""

    def on_header(self, header: Header) -> None:
        pass

    def on_sample(self, sample: Sample) -> None:
        pass

    def on_event(self, event: Event) -> None:
        pass

    def on_summary(self, summary: Summary) -> None:
        pass

    def on_idle(self) -> None:
        """The session has handled everything queued so far: a moment to flush what
        was held back to be written together."""

    def close(self) -> None:
        """Whoever added it is done with it: release what it holds (a recorder, its file).
        Called more than once, it does nothing more."""
