"""The phases of a job gputui did not write: start-up, training, evaluation, checkpoint
I/O, stalls and the idle tail, told apart from when it makes progress and what the GPU
and the disk do meanwhile.

Progress is a live throughput reading or a probe window with optimizer steps.  A
sample within a few reading intervals of the last progress is training; before the
first progress it is start-up (imports, data loading, compilation); in a longer gap
it is evaluation when a GPU works, checkpoint I/O when the disk writes while the GPUs
rest, else a stall; the gap after the last progress is the idle tail, known only at the
end.  Gputui's own workloads announce warm-up and measure phases instead (the summary
uses those where they exist).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Literal

from gputui.model import Sample
from gputui.record.schema import PhaseSpan
from gputui.stats import spread

Phase = Literal["startup", "training", "evaluation", "checkpoint", "stall", "tail"]
STARTUP: Phase = "startup"
TRAINING: Phase = "training"
EVALUATION: Phase = "evaluation"
CHECKPOINT: Phase = "checkpoint"
STALL: Phase = "stall"
TAIL: Phase = "tail"
PHASES: tuple[Phase, ...] = (STARTUP, TRAINING, EVALUATION, CHECKPOINT, STALL, TAIL)

MIN_GAP_S = 3.0  # progress this recent means training, however fast the readings come
GAP_INTERVALS = 3.0  # ... or within this many of the run's usual intervals between readings
GPU_BUSY_PCT = 10.0  # a GPU at this utilization or more is working (evaluation, not a stall)
DISK_BUSY_BPS = 20e6  # written this fast with the GPUs resting: a checkpoint


def gpu_busy(sample: Sample) -> bool:
    """Whether any GPU of the sample works (utilization, or SM activity where read)."""
    return any((g.util_gpu or 0.0) >= GPU_BUSY_PCT or (g.sm_active or 0.0) >= GPU_BUSY_PCT for g in sample.gpus if not g.lost)


def disk_writing(sample: Sample) -> bool:
    """Whether the run (or, not knowing its processes, the machine) writes to disk."""
    host = sample.host
    if host is None:
        return False
    written = sum(p.write_bps or 0.0 for p in host.processes) if host.processes else host.disk_write_bps or 0.0
    return written >= DISK_BUSY_BPS


@dataclass
class Span:
    phase: Phase
    since: float
    until: float

    def record(self) -> PhaseSpan:
        """As the summary lists it."""
        return PhaseSpan(phase=self.phase, since=round(self.since, 3), until=round(self.until, 3), duration_s=round(self.until - self.since, 3))


class PhaseTracker:
    """Classifies each sample as it comes (:meth:`classify`) and keeps the spans."""

    def __init__(self) -> None:
        self.first_progress: float | None = None
        self.last_progress: float | None = None
        self._intervals: deque[float] = deque(maxlen=20)
        self.spans: list[Span] = []

    def on_progress(self, t: float) -> None:
        if self.last_progress is not None and t > self.last_progress:
            self._intervals.append(t - self.last_progress)
        if self.first_progress is None:
            self.first_progress = t
        self.last_progress = t
        # Samples since the last progress were training after all (a slow reading).
        if self.spans and self.spans[-1].phase in (EVALUATION, CHECKPOINT, STALL) and self.spans[-1].since >= t - self.gap_s():
            self.spans[-1].phase = TRAINING
            self._merge_last()

    def gap_s(self) -> float:
        """How long without progress still counts as training."""
        usual = spread(self._intervals).get("median") if self._intervals else None
        return max(MIN_GAP_S, GAP_INTERVALS * usual) if usual else MIN_GAP_S

    def classify(self, sample: Sample) -> str:
        """The phase of this sample, as known at its time; the span list grows with it."""
        t = sample.t
        if self.last_progress is None:
            phase = STARTUP
        elif t - self.last_progress <= self.gap_s():
            phase = TRAINING
        elif gpu_busy(sample):
            phase = EVALUATION
        elif disk_writing(sample):
            phase = CHECKPOINT
        else:
            phase = STALL
        if self.spans and self.spans[-1].phase == phase:
            self.spans[-1].until = t
        else:
            since = self.spans[-1].until if self.spans else t
            self.spans.append(Span(phase, since, t))
        return phase

    def _merge_last(self) -> None:
        if len(self.spans) >= 2 and self.spans[-2].phase == self.spans[-1].phase:
            last = self.spans.pop()
            self.spans[-1].until = last.until

    def build(self) -> list[PhaseSpan]:
        """The spans, the gap after the last progress named the idle tail; [] for a run
        that never made progress (nothing tells its phases apart)."""
        if self.first_progress is None:
            return []
        spans = [Span(s.phase, s.since, s.until) for s in self.spans]
        tail: Span | None = None
        while spans and spans[-1].phase != TRAINING:  # everything after the last training
            last = spans.pop()
            tail = Span(TAIL, last.since, tail.until if tail else last.until)
        if tail is not None:
            spans.append(tail)
        return [s.record() for s in spans]
