"""What a Session tells its observers (the recorder, the progress line, the dashboard).

Observers are called from one thread, in order: header first, then samples and events
as they happen, then the summary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gputui.model import Sample

# Event kinds, in the order a run usually produces them.
STARTED = "started"  # the command was launched: pid, command
WORKLOAD = "workload"  # the workload's own start line: model, batch size, FLOPs per sample
PHASE = "phase"  # warm-up -> measure
THROUGHPUT = "throughput"  # one reading parsed from the output (a data-parallel run's: all ranks added)
RANK_THROUGHPUT = "rank_throughput"  # one rank's own reading in a data-parallel run (its ``rank``)
RESULT = "result"  # the workload's own final result line, whole
OUTPUT = "output"  # one line of the child's output (progress redraws are skipped)
OOM = "oom"  # the workload reported running out of memory
OUTCOME = "outcome"  # how the run ended
STOPPING = "stopping"  # gputui was asked to stop (key, signal, duration)
# A diagnosis finding opened, changed or closed.  Fields: id (stable for one finding),
# kind ("input_bound", "thermal", ...), state ("open" or "closed"), severity ("info",
# "warning", "critical"), title (one line), since, until (t, seconds), evidence (a dict
# of numbers), advice (a list of strings).
FINDING = "finding"


@dataclass
class Event:
    t: float  # seconds since the session started
    kind: str
    data: dict[str, Any] = field(default_factory=dict)


class Observer:
    """Base class: override what you need."""

    def on_header(self, header: dict[str, Any]) -> None:
        pass

    def on_sample(self, sample: Sample) -> None:
        pass

    def on_event(self, event: Event) -> None:
        pass

    def on_summary(self, summary: dict[str, Any]) -> None:
        pass
