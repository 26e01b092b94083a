"""The phases of a job gputui did not write: start-up, training, evaluation, checkpoint
I/O, stalls and the idle tail, told apart from when it makes progress and what the GPU
and the disk do meanwhile.

Progress is a live throughput reading (not one whose window counted nothing: a bar
redrawn after an evaluation) or a probe window with optimizer steps.  A
sample within a few reading intervals of the last progress is training; before the
first progress it is start-up (imports, data loading, compilation); in a longer gap
it is evaluation when a GPU works, checkpoint I/O when the disk writes while the GPUs
rest, else a stall; the gap after the last progress is the idle tail, known only at the
end.  Where the probe saw an evaluation (a window of batches with no backward or step
between them, :meth:`PhaseTracker.on_evaluation`), its span is evaluation whatever the
GPU did, from where the window began, however short the gap; no later progress makes it
training, and it stays evaluation at the end (a closing validation is no idle tail).
Without the probe, the summary does the same for an evaluation the run's output shows
(gputui.run.throughput.evaluation_seen: the Trainer's evaluation metrics, nanoGPT's
evaluation line, validation bars).
Gputui's own workloads announce warm-up and measure phases instead (the summary uses
those where they exist).
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
    seen: bool = False  # an evaluation the probe saw, not one guessed from a gap

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
        self.evaluating = False  # the probe's last word: an evaluation goes on
        self._evaluated: float | None = None  # when the probe last reported an evaluation window

    def on_progress(self, t: float) -> None:
        if self.last_progress is not None and t > self.last_progress:
            self._intervals.append(t - self.last_progress)
        if self.first_progress is None:
            self.first_progress = t
        self.last_progress = t
        self.evaluating = False  # training again (the evaluation's last window may have been lost)
        # Samples since the last progress were training after all (a slow reading).
        last = self.spans[-1] if self.spans else None
        if last is not None and not last.seen and last.phase in (EVALUATION, CHECKPOINT, STALL) and last.since >= t - self.gap_s():
            last.phase = TRAINING
            self._merge_last()

    def on_evaluation(self, t: float, seconds: float, ongoing: bool) -> None:
        """The probe's evaluation window, received at ``t``: the ``seconds`` before it were
        evaluation (samples taken meanwhile are relabelled); ``ongoing``: more to come."""
        self.evaluating = ongoing
        self._evaluated = t
        since = t - max(0.0, seconds)
        spans = self.spans
        until = max(t, spans[-1].until) if spans else t
        i = len(spans)
        while i > 0 and spans[i - 1].until > since and not spans[i - 1].seen:
            i -= 1
        if i < len(spans):
            relabelled = spans[i]
            del spans[i:]
            if relabelled.since < since:  # the part before the evaluation keeps its phase
                spans.append(Span(relabelled.phase, relabelled.since, since))
        elif spans and not spans[-1].seen and spans[-1].until < since:
            spans[-1].until = since  # no sample between: the phase before lasted until it began
        if spans and spans[-1].seen:  # the same evaluation, reported in parts
            spans[-1].until = until
        else:
            spans.append(Span(EVALUATION, spans[-1].until if spans else since, until, seen=True))

    def gap_s(self) -> float:
        """How long without progress still counts as training."""
        usual = spread(self._intervals).get("median") if self._intervals else None
        return max(MIN_GAP_S, GAP_INTERVALS * usual) if usual else MIN_GAP_S

    def classify(self, sample: Sample) -> str:
        """The phase of this sample, as known at its time; the span list grows with it."""
        t = sample.t
        seen = self.evaluating
        # After an evaluation and before progress again, the loop may have ended: what
        # comes is not known as training until progress says so (on_progress relabels it).
        evaluated_last = self._evaluated is not None and self.last_progress is not None and self._evaluated > self.last_progress
        if seen:
            phase = EVALUATION
        elif self.last_progress is None:
            phase = STARTUP
        elif t - self.last_progress <= self.gap_s() and not evaluated_last:
            phase = TRAINING
        elif gpu_busy(sample):
            phase = EVALUATION
        elif disk_writing(sample):
            phase = CHECKPOINT
        else:
            phase = STALL
        last = self.spans[-1] if self.spans else None
        if last is not None and last.phase == phase and last.seen == seen:
            last.until = t
        else:
            since = last.until if last is not None else t
            self.spans.append(Span(phase, since, t, seen=seen))
        return phase

    def _merge_last(self) -> None:
        if len(self.spans) >= 2 and self.spans[-2].phase == self.spans[-1].phase and self.spans[-2].seen == self.spans[-1].seen:
            last = self.spans.pop()
            self.spans[-1].until = last.until

    def build(self) -> list[PhaseSpan]:
        """The spans, the gap after the last progress (or the probe's last evaluation)
        named the idle tail; [] for a run that never made progress nor evaluated
        (nothing tells its phases apart)."""
        if self.first_progress is None and self._evaluated is None:
            return []
        spans = [Span(s.phase, s.since, s.until, s.seen) for s in self.spans]
        tail: Span | None = None
        while spans and spans[-1].phase != TRAINING and not spans[-1].seen:  # everything after the last training
            last = spans.pop()
            tail = Span(TAIL, last.since, tail.until if tail else last.until)
        if tail is not None:
            spans.append(tail)
        merged: list[Span] = []
        for span in spans:  # as the summary lists them: one row a phase in a row
            if merged and merged[-1].phase == span.phase:
                merged[-1].until = span.until
            else:
                merged.append(span)
        return [s.record() for s in merged]
