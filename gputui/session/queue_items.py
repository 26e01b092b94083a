"""What the Session's threads hand its dispatch thread: one frozen dataclass per kind of
news (the sampler's samples, the child's output lines, the probe's reports, events posted
by a driver, the child's end, a wake-up), so the dispatch matches on the class.

News carries the session time it arrived at (``t``): the dispatch handles it in batches
(``DISPATCH_BATCH_S``), and its events, and the rates of formats timed by gputui (Keras's
progress bar), are of when it came, not of when it was handled."""

from __future__ import annotations

from dataclasses import dataclass

from gputui.model import Sample
from gputui.protocol import JsonObject
from gputui.run.outcome import Outcome
from gputui.run.output_stream import OutputLine


@dataclass(frozen=True)
class SampleTaken:
    sample: Sample


@dataclass(frozen=True)
class LineRead:
    line: OutputLine
    t: float


@dataclass(frozen=True)
class ProbeReported:
    text: str  # one datagram of the probe's, as it came
    t: float


@dataclass(frozen=True)
class EventPosted:
    """An event from another thread (``gputui check``), written in order with the samples."""

    kind: str
    data: JsonObject
    t: float


@dataclass(frozen=True)
class RunEnded:
    outcome: Outcome | None  # None: the runner could not tell (it never started)


@dataclass(frozen=True)
class Wake:
    """Nothing to handle: the dispatch thread looks at its stop flag now."""


QueueItem = SampleTaken | LineRead | ProbeReported | EventPosted | RunEnded | Wake
