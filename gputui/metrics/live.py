"""The latest state of a session, kept for scrapes.

:class:`LiveMetrics` is an observer: the session calls it from its dispatch thread
(never the sampler's), and it replaces one immutable :class:`MetricsSnapshot` per
update.  A scrape reads ``snapshot`` once; swapping a reference is atomic, so
neither side ever waits for the other and a scrape does no work beyond formatting.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from gputui.check.result import CheckResult, name_and_gpu
from gputui.model import GpuProcess, HostSample, Sample, Throughput
from gputui.protocol import JsonObject
from gputui.record import events as ev
from gputui.record.events import Event
from gputui.record.observer import Observer
from gputui.record.schema import Header
from gputui.session import ranks


@dataclass(frozen=True)
class GpuLabels:
    """What dcgm-exporter labels a GPU's series with."""

    gpu: str
    uuid: str
    model_name: str


@dataclass(frozen=True)
class OpenFinding:
    kind: str
    gpu: int | None
    severity: ev.Severity | None


@dataclass(frozen=True)
class CheckValue:
    """One ``gputui check`` result as Prometheus labels it: the check's name without its
    GPU (``micro.matmul_bf16``) and the GPU apart."""

    name: str
    gpu: int | None
    status: str
    value: float | None
    unit: str
    ratio: float | None  # measured / expected, for targets


@dataclass(frozen=True)
class MetricsSnapshot:
    hostname: str = ""
    preset: str = ""
    version: str = ""
    cpu_available: float | None = None
    gpus: dict[int, GpuLabels] = field(default_factory=dict)
    sample: Sample | None = None
    host: HostSample | None = None  # the newest host part (a sub-second sampler reads it once a second)
    energy_start_mj: dict[int, int] = field(default_factory=dict)  # per GPU, the session's first reading
    gpu_processes: dict[int, list[GpuProcess]] = field(default_factory=dict)  # per GPU, its newest process list
    throughput: float | None = None  # the latest live reading, in ``unit``s per second
    unit: str = "samples"  # what it counts: samples, tokens or steps
    samples_done: float = 0.0  # summed over the readings: their samples, or rate x their window
    last_reading_t: float | None = None  # the previous live reading's time: the next one's window
    findings: dict[str, OpenFinding] = field(default_factory=dict)  # open ones, by finding id
    finding_kinds: frozenset[tuple[str, int | None]] = frozenset()  # every (kind, gpu) seen: closed ones read 0
    price_per_hour: float | None = None
    # A data-parallel run (gputui.session.ranks): each rank's latest reading, the GPU each
    # rank drives (the header's order), its size and the one-GPU baseline's rate.
    rank_rates: dict[int, float] = field(default_factory=dict)
    rank_gpus: tuple[int, ...] = ()
    world_size: int | None = None
    baseline_rate: float | None = None
    # The latest gputui check's results, by id: kept across the sessions that follow it
    # (the dashboard watches again after a check), replaced by the next check's.
    checks: dict[str, CheckValue] = field(default_factory=dict)

    @property
    def scaling_efficiency(self) -> float | None:
        return ranks.live_efficiency(self.throughput, self.world_size, self.baseline_rate)


def samples_covered(reading: Throughput, previous_t: float | None, t: float) -> float:
    """The samples a reading accounts for: its own count; else its rate over its window's
    seconds; else (a bare "512 samples/sec" line) its rate over the time since the
    previous reading, the window it most likely covers.  The first bare reading has no
    window: 0 rather than a guess."""
    if reading.samples is not None:
        return float(reading.samples)
    seconds = reading.seconds if reading.seconds is not None else (t - previous_t if previous_t is not None else 0.0)
    return float(reading.samples_per_sec) * max(0.0, seconds)


class LiveMetrics(Observer):
    """Feeds :attr:`snapshot`; one instance can follow one session after another
    (the dashboard's watch and run sessions): each header starts afresh."""

    def __init__(self, price_per_hour: float | None = None) -> None:
        self._price = price_per_hour
        self.snapshot = MetricsSnapshot(price_per_hour=price_per_hour)

    def _update(self, **changes: Any) -> None:
        self.snapshot = dataclasses.replace(self.snapshot, **changes)

    def on_header(self, header: Header) -> None:
        host = header.host
        gpus = {g.index: GpuLabels(gpu=str(g.index), uuid=g.uuid or "", model_name=g.name or "") for g in header.gpu_list}
        checks = {} if header.check is not None else self.snapshot.checks  # a new check starts afresh
        self.snapshot = MetricsSnapshot(
            checks=checks,
            hostname=(host.hostname if host else None) or "",
            preset=header.preset_name or "",
            version=header.gputui or "",
            cpu_available=host.cpu_available if host else None,
            gpus=gpus,
            price_per_hour=self._price,
            rank_gpus=tuple(ranks.rank_gpus(header)),
            baseline_rate=ranks.header_baseline_rate(header),
        )

    def on_sample(self, sample: Sample) -> None:
        start = self.snapshot.energy_start_mj
        missing = {g.index: g.energy_mj for g in sample.gpus if g.energy_mj is not None and g.index not in start}
        host = sample.host if sample.host is not None else self.snapshot.host
        read = {g.index: g.processes for g in sample.gpus if g.processes is not None}  # only slow-cadence samples carry them
        processes = {**self.snapshot.gpu_processes, **read} if read else self.snapshot.gpu_processes
        self._update(sample=sample, host=host, energy_start_mj={**start, **missing} if missing else start, gpu_processes=processes)

    def on_event(self, event: Event) -> None:
        payload = event.payload
        if event.kind == ev.THROUGHPUT and isinstance(payload, Throughput):
            self._on_throughput(payload, event.t)
        elif event.kind == ev.RANK_THROUGHPUT and isinstance(payload, Throughput):
            self._on_rank_throughput(payload)
        elif isinstance(payload, ev.WorkloadInfo):
            self._update(world_size=ranks.world_size_of(ev.payload_fields(payload)) or self.snapshot.world_size)
        elif isinstance(payload, ev.Finding):
            self._on_finding(payload)
        elif event.kind == ev.CHECK:
            self._on_check(ev.payload_fields(payload))

    def _on_check(self, fields: JsonObject) -> None:
        try:
            result = CheckResult.from_dict(fields)
        except (KeyError, TypeError, ValueError):  # not a check this gputui knows how to read: no metric
            return
        name, gpu = name_and_gpu(result.id)
        value, ratio = result.value, result.ratio
        number = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        entry = CheckValue(name, gpu, result.status, number, result.unit, round(ratio, 4) if ratio is not None else None)
        self._update(checks={**self.snapshot.checks, result.id: entry})

    def _on_throughput(self, reading: Throughput, t: float) -> None:
        if reading.final:  # the tool's own end figure repeats what the readings said
            return
        done = self.snapshot.samples_done
        if reading.unit == "samples":
            done += samples_covered(reading, self.snapshot.last_reading_t, t)
        self._update(throughput=float(reading.samples_per_sec), samples_done=done, unit=reading.unit, last_reading_t=t)

    def _on_rank_throughput(self, reading: Throughput) -> None:
        world = ranks.world_size_of(ev.payload_fields(reading)) or self.snapshot.world_size
        if reading.final or reading.rank is None:
            self._update(world_size=world)
            return
        self._update(rank_rates={**self.snapshot.rank_rates, reading.rank: float(reading.samples_per_sec)}, world_size=world)

    def _on_finding(self, finding: ev.Finding) -> None:
        gpu = (finding.evidence or {}).get("gpu")
        gpu = gpu if isinstance(gpu, int) else None
        kind = finding.kind or "unknown"
        findings = dict(self.snapshot.findings)
        if finding.state == "open":
            findings[finding.id] = OpenFinding(kind=kind, gpu=gpu, severity=finding.severity)
        else:
            findings.pop(finding.id, None)
        self._update(findings=findings, finding_kinds=self.snapshot.finding_kinds | {(kind, gpu)})
