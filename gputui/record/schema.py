"""A recording's header and summary lines, declared once (docs/record-format.md).

The session builds a :class:`Header` and the SummaryBuilder a :class:`Summary`; the
recorder writes them (``to_dict``), and the reader holds each line to these same classes
(gputui.record.codec) before it builds them, so every face reads attributes of objects
that were checked, never keys of a dict.  Frozen: one header and one summary go to every
observer, and none may change what the others see.

None is "not known": fields the writer always wrote are written as null (``NULL``),
the others are left out.  Keys a class has no field for (a newer gputui's, or the
workload's own in ``workload``) are kept in its ``extra`` and written back, in the
order they came (``key_order``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from gputui.model import SAMPLES, GpuInfo, HostInfo, Throughput
from gputui.protocol import JsonObject
from gputui.record import events as ev
from gputui.record.codec import NULL, from_record, to_record
from gputui.run.outcome import Outcome

SCHEMA_VERSION = 1
R = TypeVar("R", bound="_Record")


def _extra() -> Any:
    """The ``extra`` field: keys the class has no field for, kept to be written back."""
    return field(default_factory=dict, kw_only=True)


def _key_order() -> Any:
    """The ``key_order`` field: the order the keys were read in, to write them back in
    (no part of the value: two objects that differ only in it are equal)."""
    return field(default=(), kw_only=True, compare=False, repr=False)


def _null() -> Any:
    return field(default=None, metadata=NULL)


class _Record:
    """to_dict and from_dict for the dataclasses below (gputui.record.codec)."""

    def to_dict(self) -> JsonObject:
        return to_record(self)

    @classmethod
    def from_dict(cls: type[R], data: Mapping[str, Any]) -> R:
        """Built from a JSON object already checked (the reader checks before it builds)."""
        return from_record(cls, data)


# --- Run settings: the workload's start line, the summary's copy, the header's preset ---


@dataclass(frozen=True)
class RunSettings(_Record):
    """The settings gputui reads from what a run says of itself; the other keys it said
    (``flops_per_sample``, ``image_size``, ...) are kept in ``extra``."""

    framework: str | None = None
    model: str | None = None
    device: str | None = None
    pipeline: str | None = None
    precision: str | None = None
    batch_size: int | None = None
    workers: int | None = None
    find_max_batch: bool | None = None
    extra: Mapping[str, Any] = _extra()
    key_order: tuple[str, ...] = _key_order()

    def setting(self, key: str) -> Any:
        """One setting by name (the diagnosis asks for them by name), None when absent."""
        if key not in ("extra", "key_order") and key in self.__dataclass_fields__:
            return getattr(self, key)
        return self.extra.get(key)


@dataclass(frozen=True)
class PresetReference(_Record):
    """A published result the preset compares against (``reference`` in presets.toml)."""

    gpu: str | None = None
    samples_per_sec: float | None = None
    source: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class PresetRecord(RunSettings):
    """The preset as resolved (gputui.presets.Preset.describe): every key it has, these
    held to their types, the rest (command, env, gpus, ...) in ``extra``."""

    name: str | None = None
    source: str | None = None  # its file
    overrides: str | None = None  # the built-in file it replaces
    description: str | None = None
    reference: list[PresetReference] | PresetReference | None = None  # presets.toml takes one table or a list

    @property
    def references(self) -> list[PresetReference]:
        ref = self.reference
        return [ref] if isinstance(ref, PresetReference) else list(ref or [])


@dataclass(frozen=True)
class OomLine:
    """The keys gputui reads from a workload's ``oom`` line (gputui.record.events.Oom)."""

    message: str | None = None
    batch_size: int | None = None


# --- Header -----------------------------------------------------------------------


@dataclass(frozen=True)
class Baseline(_Record):
    """A data-parallel run's one-GPU baseline (gputui.session.baseline)."""

    samples_per_sec: float | None = None
    source: str | None = None  # the recording's path, or "this session, one GPU"
    preset: str | None = None  # the recording's preset


@dataclass(frozen=True)
class CheckSettings(_Record):
    """A ``gputui check`` recording's options (gputui.check.stage_context.CheckOptions)."""

    quick: bool | None = _null()
    price_per_hour: float | None = _null()
    gpus: list[int] | None = _null()
    skip: list[str] | None = _null()
    workdir: str | None = _null()
    interval: float | None = _null()
    presets_file: str | None = _null()
    extra: Mapping[str, Any] = _extra()
    key_order: tuple[str, ...] = _key_order()


@dataclass(frozen=True)
class Header(_Record):
    """The first line: what ran where."""

    schema: int = SCHEMA_VERSION
    gputui: str | None = _null()
    started_at: str | None = _null()  # UTC, ISO 8601
    interval: float | None = _null()
    host: HostInfo | None = _null()
    driver_version: str | None = _null()
    cuda_version: str | None = _null()
    gpus: list[GpuInfo] | None = _null()
    gpu_unavailable_reason: str | None = _null()
    preset: PresetRecord | None = _null()
    command: list[str] | None = _null()
    env: dict[str, str] | None = _null()
    env_redacted: list[str] | None = _null()
    cwd: str | None = _null()
    attach_pid: int | None = _null()
    probe: bool | None = None  # a command's run: whether the zero-code probe was put in
    python: str | None = _null()
    diagnosis: JsonObject | None = _null()  # the settings in force (gputui.diagnosis_settings checks them)
    baseline: Baseline | None = None
    check: CheckSettings | None = None  # a gputui check recording
    extra: Mapping[str, Any] = _extra()
    key_order: tuple[str, ...] = _key_order()

    @property
    def gpu_list(self) -> list[GpuInfo]:
        return self.gpus or []

    @property
    def preset_name(self) -> str | None:
        return self.preset.name if self.preset is not None else None


# --- Summary ----------------------------------------------------------------------


@dataclass(frozen=True)
class Stats(_Record):
    """A series over the summary's window."""

    median: float | None = None
    max: float | None = None


@dataclass(frozen=True)
class RankRate(_Record):
    """One rank's own readings in a data-parallel run."""

    rank: int
    median: float | None = _null()
    readings: int | None = None


@dataclass(frozen=True)
class Scaling(_Record):
    """A data-parallel run against its one-GPU baseline."""

    baseline_samples_per_sec: float | None = _null()
    baseline_source: str | None = _null()
    efficiency: float | None = _null()  # median / (world size x baseline), 1.0 perfect


@dataclass(frozen=True)
class Reported(_Record):
    """The tool's own final figure (a ``final`` throughput reading)."""

    samples_per_sec: float | None = None
    source: str | None = None
    unit: str | None = None

    @classmethod
    def of(cls, reading: Throughput) -> Reported:
        return cls(reading.samples_per_sec, reading.source, reading.unit)


@dataclass(frozen=True)
class ThroughputSummary(_Record):
    """The run's throughput: the spread of its measured readings and the one figure it
    is known by."""

    readings: int | None = None
    unit: str | None = None  # samples (also when absent: recordings before units), tokens or steps
    source: str | None = None
    median: float | None = None
    p5: float | None = None
    p95: float | None = None
    mean: float | None = None  # samples over seconds, the first window left out
    figure: float | None = None  # absent in summaries before 2026-11-26
    bursty: bool | None = None
    reported: Reported | None = None
    world_size: int | None = None
    ranks: list[RankRate] | None = None
    scaling: Scaling | None = None

    @property
    def run_figure(self) -> float | None:
        """The one figure a run is known by: the summary's ``figure``, else its median."""
        figure = self.figure if self.figure is not None else self.median
        return float(figure) if figure is not None else None

    @property
    def mean_is_figure(self) -> bool:
        """Whether the figure is the mean (a job of the user's own, counted as its tools count)."""
        return self.figure is not None and self.figure == self.mean

    @property
    def is_bursty(self) -> bool:
        """Whether the job stalls between bursts, which its mean (its figure) counts."""
        return bool(self.bursty) and self.mean_is_figure

    @property
    def unit_name(self) -> str:
        return self.unit or SAMPLES


@dataclass(frozen=True)
class GpuSummary(_Record):
    """One GPU over the summary's window."""

    index: int
    samples: int | None = None
    lost: bool | None = None
    util_gpu: Stats | None = None
    sm_active: Stats | None = None
    sm_occupancy: Stats | None = None
    tensor_active: Stats | None = None
    temp_c: Stats | None = None
    power_w: Stats | None = None
    sm_clock_mhz: Stats | None = None
    peak_memory_used: int | None = None  # bytes
    throttle_share: dict[str, float] | None = None  # reason -> share of the window
    throttle_share_counted: list[str] | None = None  # the reasons counted exactly
    energy_j: float | None = None
    energy_seconds: float | None = None
    others_max: int | None = None
    others_seconds: float | None = None
    others_peak_memory: int | None = None


@dataclass(frozen=True)
class HostSummary(_Record):
    cpu_percent: Stats | None = None
    run_cpu_percent: Stats | None = None  # the run's process tree, 100 = one core
    peak_memory_used: int | None = None
    run_peak_rss: int | None = None
    max_workers: int | None = None


@dataclass(frozen=True)
class PhaseSpan(_Record):
    """One of a job's phases (gputui.session.phases)."""

    phase: str | None = None
    since: float | None = None
    until: float | None = None
    duration_s: float | None = None


@dataclass(frozen=True)
class CheckSummary(_Record):
    """A ``gputui check``'s verdict and its counts by status."""

    verdict: str | None = None
    counts: dict[str, int] | None = None
    scope: str | None = None  # "host only" when no GPU check came to a verdict
    stopped: bool | None = None


@dataclass(frozen=True)
class Summary(_Record):
    """The last line: the run's statistics over its window, its outcome and findings."""

    window: str | None = None  # measure, training, gpu-active or all
    duration_s: float | None = None
    samples: int | None = None
    outcome: Outcome | None = _null()
    throughput: ThroughputSummary | None = None
    gpus: list[GpuSummary] = field(default_factory=list)
    host: HostSummary | None = None
    energy_j: float | None = None
    energy_per_sample_j: float | None = None
    lost_gpus: list[int] | None = None
    phases: list[PhaseSpan] | None = None
    workload: RunSettings | None = None
    findings: list[ev.Finding] | None = None  # None: a summary from before the diagnosis
    notes: list[str] | None = None  # what the run could not tell, and why (absent in older summaries)
    output_lines_skipped: int | None = None
    check: CheckSummary | None = None
    extra: Mapping[str, Any] = _extra()
    key_order: tuple[str, ...] = _key_order()

    @property
    def figure(self) -> float | None:
        """The figure the run is known by (ThroughputSummary.run_figure)."""
        return self.throughput.run_figure if self.throughput is not None else None


# --- Events: the keys of each kind held to their types --------------------------------

EVENT_SHAPES: dict[str, type] = {
    ev.STARTED: ev.Started,
    ev.WORKLOAD: RunSettings,
    ev.PHASE: ev.PhaseChange,
    ev.THROUGHPUT: Throughput,
    ev.RANK_THROUGHPUT: Throughput,
    ev.OUTPUT: ev.Output,
    ev.OOM: OomLine,
    ev.OUTCOME: Outcome,
    ev.STOPPING: ev.Stopping,
    ev.FINDING: ev.Finding,
}
