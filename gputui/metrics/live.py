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

from gputui import events as ev
from gputui import ranks
from gputui.events import Event, Observer
from gputui.model import HostSample, Sample


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
    severity: str


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
    throughput: float | None = None  # the latest reading, samples per second
    samples_done: float = 0.0  # summed over the readings that say how many samples they cover
    findings: dict[str, OpenFinding] = field(default_factory=dict)  # open ones, by finding id
    finding_kinds: frozenset[tuple[str, int | None]] = frozenset()  # every (kind, gpu) seen: closed ones read 0
    price_per_hour: float | None = None
    # A data-parallel run (gputui.ranks): each rank's latest reading, the GPU each
    # rank drives (the header's order), its size and the one-GPU baseline's rate.
    rank_rates: dict[int, float] = field(default_factory=dict)
    rank_gpus: tuple[int, ...] = ()
    world_size: int | None = None
    baseline_rate: float | None = None

    @property
    def scaling_efficiency(self) -> float | None:
        return ranks.live_efficiency(self.throughput, self.world_size, self.baseline_rate)


class LiveMetrics(Observer):
    """Feeds :attr:`snapshot`; one instance can follow one session after another
    (the dashboard's watch and run sessions): each header starts afresh."""

    def __init__(self, price_per_hour: float | None = None) -> None:
        self._price = price_per_hour
        self.snapshot = MetricsSnapshot(price_per_hour=price_per_hour)

    def _update(self, **changes: Any) -> None:
        self.snapshot = dataclasses.replace(self.snapshot, **changes)

    def on_header(self, header: dict[str, Any]) -> None:
        host = header.get("host") or {}
        preset = header.get("preset") or {}
        gpus = {
            int(g["index"]): GpuLabels(gpu=str(g["index"]), uuid=str(g.get("uuid") or ""), model_name=str(g.get("name") or ""))
            for g in header.get("gpus") or []
        }
        self.snapshot = MetricsSnapshot(
            hostname=str(host.get("hostname") or ""),
            preset=str(preset.get("name") or ""),
            version=str(header.get("gputui") or ""),
            cpu_available=host.get("cpu_available"),
            gpus=gpus,
            price_per_hour=self._price,
            rank_gpus=tuple(ranks.rank_gpus(header)),
            baseline_rate=ranks.header_baseline_rate(header),
        )

    def on_sample(self, sample: Sample) -> None:
        start = self.snapshot.energy_start_mj
        missing = {g.index: g.energy_mj for g in sample.gpus if g.energy_mj is not None and g.index not in start}
        host = sample.host if sample.host is not None else self.snapshot.host
        self._update(sample=sample, host=host, energy_start_mj={**start, **missing} if missing else start)

    def on_event(self, event: Event) -> None:
        if event.kind == ev.THROUGHPUT:
            self._on_throughput(event.data)
        elif event.kind == ev.RANK_THROUGHPUT:
            self._on_rank_throughput(event.data)
        elif event.kind == ev.WORKLOAD:
            self._update(world_size=ranks.world_size_of(event.data) or self.snapshot.world_size)
        elif event.kind == ev.FINDING:
            self._on_finding(event.data)

    def _on_throughput(self, data: dict[str, Any]) -> None:
        rate = data.get("samples_per_sec")
        if not isinstance(rate, (int, float)):
            return
        done = self.snapshot.samples_done
        counted = data.get("samples")
        if not data.get("final") and isinstance(counted, (int, float)):  # a final result repeats what was counted
            done += counted
        self._update(throughput=float(rate), samples_done=done)

    def _on_rank_throughput(self, data: dict[str, Any]) -> None:
        rank, rate = data.get("rank"), data.get("samples_per_sec")
        world = ranks.world_size_of(data) or self.snapshot.world_size
        if data.get("final") or not isinstance(rank, int) or not isinstance(rate, (int, float)):
            self._update(world_size=world)
            return
        self._update(rank_rates={**self.snapshot.rank_rates, rank: float(rate)}, world_size=world)

    def _on_finding(self, data: dict[str, Any]) -> None:
        ident = str(data.get("id"))
        gpu = (data.get("evidence") or {}).get("gpu")
        gpu = gpu if isinstance(gpu, int) else None
        kind = str(data.get("kind") or "unknown")
        findings = dict(self.snapshot.findings)
        if data.get("state") == "open":
            findings[ident] = OpenFinding(kind=kind, gpu=gpu, severity=str(data.get("severity") or ""))
        else:
            findings.pop(ident, None)
        self._update(findings=findings, finding_kinds=self.snapshot.finding_kinds | {(kind, gpu)})
