"""One trial of ``gputui tune``: the user's command run afresh, recorded and kept in the
run history like any run, with one set of data-loading settings put into its training
DataLoaders by the probe, until its training figure is steady or its time is up.

A trial is stopped by gputui once it has measured what it came for (the user asked for
trials, not for the job), and it never passes the command's output to the terminal: a
trial's output is in its recording, and a failed trial shows its last line.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gputui.live.host import HostSpec, record_run
from gputui.live.wiring import RunWiring
from gputui.lookback.noise import Window, rate_of
from gputui.model import Sample
from gputui.presets.preset import Preset
from gputui.record import events as ev
from gputui.record.events import Event
from gputui.record.observer import Observer
from gputui.record.schema import Summary
from gputui.session.options import RunOptions
from gputui.session.session import Session
from gputui.tune.settings import ENV, LoaderSettings

STOP_REASON = "gputui tune: the trial has its figure"
NO_TRAINING = "no training measured: the probe saw no optimizer step after the first window"
ARM_WAIT_S = 60.0  # a PyTorch script imports torch well before this; one that has not is no PyTorch job
STEADY_MIN_WINDOWS = 8
STEADY_HALF_WIDTH = 0.02  # the window rates' 95 % interval of their mean within +-2 %
SHM = "/dev/shm"  # DataLoader workers hand batches over in shared memory


@dataclass(frozen=True)
class TrialPlan:
    """How long a trial may go: ``training_s`` of training after start-up at most (less
    once steady, but never under ``min_training_s``), and ``startup_s`` to start training."""

    training_s: float = 60.0
    min_training_s: float = 15.0
    startup_s: float = 300.0


@dataclass
class Trial:
    """What one trial measured.  ``windows`` are the probe's training windows after the
    first (which holds the start: workers starting, the first batches)."""

    number: int
    asked: LoaderSettings
    windows: list[Window] = field(default_factory=list)
    unit: str = "samples"
    data_wait_s: float = 0.0
    written: LoaderSettings | None = None  # the training loader as the script builds it
    built: LoaderSettings | None = None  # as this trial built it
    left_alone: list[str] = field(default_factory=list)  # loaders not changed, and why
    workers_seen: int | None = None  # the DataLoader's worker count in the training windows
    cpus: int | None = None  # cores the training process may run on (its affinity)
    own_batches: bool = False  # the loop makes its own batches: no DataLoader to change
    armed: bool = False  # the probe hooked PyTorch in the command (never: no torch, or Keras/TF, JAX)
    frameworks: list[str] = field(default_factory=list)  # loaded when the loaders were built (Lightning, transformers...)
    gpu_busy_pct: float | None = None
    gpus_used: int | None = None  # busy ones
    gpus_seen: int = 0  # every GPU the session watched: pinned memory helps copies to one
    cpu_cores: float | None = None  # the run's process tree, in cores (median)
    peak_rss: int | None = None
    shm_used: int | None = None  # the most /dev/shm held above what it held at the start
    input_bound_finding: bool = False
    failure: str | None = None
    recording: str | None = None
    stopped_by_user: bool = False

    @property
    def training_s(self) -> float:
        return sum(seconds for _, seconds in self.windows)

    @property
    def rate(self) -> float | None:
        return rate_of(self.windows)

    @property
    def data_wait(self) -> float | None:
        """The share of the training time the loop waited for data."""
        seconds = self.training_s
        return min(1.0, self.data_wait_s / seconds) if seconds > 0 else None

    @property
    def ok(self) -> bool:
        return self.failure is None and len(self.windows) > 0

    @property
    def settings(self) -> LoaderSettings:
        """The settings the training loader ran with, as far as known."""
        return self.built or self.asked.over(self.written or LoaderSettings())


def steady(windows: list[Window], plan: TrialPlan) -> bool:
    """Enough training to stop: ``plan.training_s``, or ``plan.min_training_s`` with
    window rates whose mean is known within STEADY_HALF_WIDTH."""
    seconds = sum(s for _, s in windows)
    if seconds >= plan.training_s:
        return True
    if seconds < plan.min_training_s or len(windows) < STEADY_MIN_WINDOWS:
        return False
    rates = [n / s for n, s in windows if s > 0]
    mean = statistics.fmean(rates)
    return mean > 0 and 1.96 * statistics.stdev(rates) / math.sqrt(len(rates)) / mean <= STEADY_HALF_WIDTH


class TrialWatch(Observer):
    """Reads a trial's probe lines and samples as they come, and stops the session once
    the trial has its figure (or never started training)."""

    def __init__(self, trial: Trial, session: Session, plan: TrialPlan, clock: Callable[[], float] = time.monotonic) -> None:
        self.trial = trial
        self.session = session
        self.plan = plan
        self._clock = clock
        self._began = clock()
        self._first_window_seen = False
        self._shm_start = _shm_used()

    def on_event(self, event: Event) -> None:
        payload = event.payload
        if isinstance(payload, ev.ProbeStatus):
            self._status(payload.fields)
        elif isinstance(payload, ev.ProbeReport) and not payload.evaluation and payload.steps:
            self._window(payload)
        self._give_up_waiting()

    def on_sample(self, sample: Sample) -> None:
        used = _shm_used()
        if used is not None and self._shm_start is not None:
            self.trial.shm_used = max(self.trial.shm_used or 0, used - self._shm_start)
        self._give_up_waiting()

    def _give_up_waiting(self) -> None:
        """No PyTorch in the command (the probe never armed), no training in time, or the
        trial's settings not applied: nothing more to measure."""
        if self.trial.failure is not None:
            self.session.stop(STOP_REASON)
            return
        if self._first_window_seen:
            return
        waited = self._clock() - self._began
        if not self.trial.armed and waited > min(ARM_WAIT_S, self.plan.startup_s):
            self.trial.failure = NO_TRAINING
        elif waited > self.plan.startup_s:
            self.trial.failure = f"no training step in {self.plan.startup_s:.0f} s"
        else:
            return
        self.session.stop(STOP_REASON)

    def _status(self, fields: Mapping[str, Any]) -> None:
        trial = self.trial
        if fields.get("state") == "off":
            trial.failure = f"the probe switched itself off: {fields.get('error')}"
            return
        if fields.get("state") == "armed":
            trial.armed = True
        if fields.get("state") != "loader":
            return
        if isinstance(fields.get("cpus"), int):
            trial.cpus = fields["cpus"]
        if isinstance(fields.get("frameworks"), list):
            names = [n.replace("pytorch_lightning", "lightning") for n in fields["frameworks"] if isinstance(n, str)]
            trial.frameworks = list(dict.fromkeys([*trial.frameworks, *names]))
        if fields.get("error"):
            trial.failure = f"the settings could not be applied: {fields['error']}"
        elif fields.get("training"):
            trial.written = trial.written or LoaderSettings.from_fields(fields.get("had"))
            trial.built = LoaderSettings.from_fields(fields.get("got"))
        elif isinstance(fields.get("why"), str) and fields["why"] not in trial.left_alone:
            trial.left_alone.append(fields["why"])

    def _window(self, report: ev.ProbeReport) -> None:
        trial = self.trial
        looks, data_looks = report.fields.get("looks"), report.fields.get("data_looks")
        sampled = not report.batches and isinstance(looks, int) and looks > 0 and isinstance(data_looks, int)
        trial.own_batches = trial.own_batches or sampled  # a loop of its own batches: the sampler's looks, no DataLoader
        if not self._first_window_seen:  # the start: workers starting, the first batches
            self._first_window_seen = True
            return
        seconds = report.seconds or 0.0
        samples = report.fields.get("samples")
        if seconds <= 0:
            return
        if isinstance(samples, int) and samples > 0:
            trial.windows.append((float(samples), seconds))
        else:
            trial.unit = "steps"
            trial.windows.append((float(report.steps or 0), seconds))
        if sampled:
            trial.data_wait_s += seconds * data_looks / looks  # type: ignore[operator]  # ints, checked above
        else:
            trial.data_wait_s += report.data_wait_s or 0.0
        if report.workers is not None:
            trial.workers_seen = report.workers
        if steady(trial.windows, self.plan):
            self.session.stop(STOP_REASON)

    def on_summary(self, summary: Summary) -> None:
        _read_summary(self.trial, summary)


def _shm_used() -> int | None:
    try:
        return shutil.disk_usage(SHM).used
    except OSError:
        return None


BUSY_GPU_PCT = 10.0  # a GPU this busy at its 95th percentile is one the run uses


def _read_summary(trial: Trial, summary: Summary) -> None:
    """The trial's GPU, CPU and memory over its training window, its findings, and how it ended."""
    busy = [g.util_gpu.median for g in summary.gpus if g.util_gpu and g.util_gpu.median is not None and (g.util_gpu.max or 0) >= BUSY_GPU_PCT]
    trial.gpu_busy_pct = statistics.fmean(busy) if busy else None
    trial.gpus_used = len(busy) or None
    trial.gpus_seen = len(summary.gpus)
    run_cpu = summary.host.run_cpu_percent if summary.host else None
    trial.cpu_cores = run_cpu.median / 100.0 if run_cpu and run_cpu.median is not None else None
    trial.peak_rss = summary.host.run_peak_rss if summary.host else None
    trial.input_bound_finding = any(f.kind == "input_bound" for f in summary.findings or [])
    outcome = summary.outcome
    if trial.failure is None and outcome is not None and not outcome.ok and outcome.kind != "stopped":
        trial.failure = outcome.message or outcome.kind
    if trial.failure is None and not trial.windows:
        trial.failure = NO_TRAINING


def run_trial(number: int, asked: LoaderSettings, preset: Preset, options: RunOptions, wiring: RunWiring, plan: TrialPlan) -> Trial:
    """Run ``preset`` once with ``asked`` put into its training DataLoaders; what it measured."""
    trial = Trial(number=number, asked=asked)
    env = {**preset.env, ENV: asked.env()}
    trial_preset = dataclasses.replace(preset, env=env, probe=True)
    cap = plan.startup_s + 3 * plan.training_s  # a loop slower than its windows still ends
    spec = HostSpec(options=dataclasses.replace(options, preset=trial_preset, duration=cap), wiring=wiring, progress=False, pass_output=False)
    kept: list[str] = []

    def watch(session: Session) -> Observer:
        return TrialWatch(trial, session, plan)

    result = record_run(spec, ready=lambda live: kept.append(str(live.kept_path or live.recording)), observe=watch)
    trial.recording = kept[0] if kept else None
    trial.stopped_by_user = bool(result.signals)
    if result.summary is None and trial.failure is None:
        trial.failure = "the trial was interrupted"
    return trial
