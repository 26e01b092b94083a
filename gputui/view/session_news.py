"""The kinds of news a session sends the dashboard, one frozen dataclass each.

:class:`~gputui.view.bridge.SessionBridge` queues these on the session's thread and
:meth:`~gputui.view.state.DashboardState.apply` folds them in on the app's; replay and
the tests build the same objects.  Typed items rather than tagged tuples, so a new kind
of news is a class the type checker follows to every place that must handle it.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputui.model import Sample
from gputui.record.events import Event
from gputui.record.schema import Header, Summary


@dataclass(frozen=True)
class RunStarted:
    """The supervisor started this ticket's session."""


@dataclass(frozen=True)
class Note:
    """A line for the output pane from the dashboard itself (not the workload)."""

    text: str


@dataclass(frozen=True)
class RecordingStarted:
    path: str


@dataclass(frozen=True)
class RunKept:
    """The run's copy in the run history."""

    path: str


@dataclass(frozen=True)
class HeaderArrived:
    header: Header


@dataclass(frozen=True)
class SampleArrived:
    sample: Sample


@dataclass(frozen=True)
class EventArrived:
    event: Event
    # The summary builder's running median including this reading, for a live
    # throughput reading; None for every other event.
    running_median: float | None = None


@dataclass(frozen=True)
class SummaryArrived:
    summary: Summary


@dataclass(frozen=True)
class SessionEnded:
    """The session is over: ``error`` is "Type: message" if it failed, else None."""

    error: str | None = None


News = RunStarted | Note | RecordingStarted | RunKept | HeaderArrived | SampleArrived | EventArrived | SummaryArrived | SessionEnded
