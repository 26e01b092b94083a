"""A :class:`MetricsSnapshot` as Prometheus metric families.

GPU fields carry dcgm-exporter's names, units and labels (``gpu``, ``UUID``,
``modelName``, ``Hostname``), so Grafana dashboards built for it work unchanged;
gputui's own metrics are ``gputui_*`` in base units (seconds, bytes, joules, ratios).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gputui.metrics.live import GpuLabels, LiveMetrics, MetricsSnapshot
from gputui.model import RUN, GpuProcess, GpuSample
from gputui.record.events import Severity
from gputui.safe_write import write_atomic
from gputui.session import ranks
from gputui.telemetry.gpu import THROTTLE_REASONS

MIB = 1024**2
GPU_LABELS = ["gpu", "UUID", "modelName", "Hostname"]
SEVERITY_LEVEL: dict[Severity | None, int] = {"info": 1, "warning": 2, "critical": 3}
PROCESSES_PER_GPU = 8  # gputui_gpu_process_memory_bytes: the biggest this many per GPU, so the series stay few


@dataclass(frozen=True)
class DcgmField:
    name: str
    type: str  # dcgm-exporter's: "gauge" or "counter"
    help: str
    value: Callable[[GpuSample], float | None]


def _scaled(attr: str, factor: float) -> Callable[[GpuSample], float | None]:
    def value(gpu: GpuSample) -> float | None:
        raw = getattr(gpu, attr)
        return None if raw is None else raw * factor

    return value


def _fb_free(gpu: GpuSample) -> float | None:
    if gpu.memory_total is None or gpu.memory_used is None:
        return None
    return (gpu.memory_total - gpu.memory_used) / MIB


# Names, types and units as in dcgm-exporter's etc/default-counters.csv (the DCGM_FI_PROF
# ones as in its DCP section: ratios 0-1, PCIe in bytes per second).
DCGM_FIELDS: tuple[DcgmField, ...] = (
    DcgmField("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", _scaled("sm_clock_mhz", 1)),
    DcgmField("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", _scaled("mem_clock_mhz", 1)),
    DcgmField("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", _scaled("temp_c", 1)),
    DcgmField("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", _scaled("power_w", 1)),
    DcgmField("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ).", _scaled("energy_mj", 1)),
    DcgmField("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", _scaled("util_gpu", 1)),
    DcgmField("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", _scaled("util_mem", 1)),
    DcgmField("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", _fb_free),
    DcgmField("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", _scaled("memory_used", 1 / MIB)),
    DcgmField("DCGM_FI_PROF_SM_ACTIVE", "gauge", "The ratio of cycles an SM has at least 1 warp assigned.", _scaled("sm_active", 0.01)),
    DcgmField("DCGM_FI_PROF_SM_OCCUPANCY", "gauge", "The ratio of number of warps resident on an SM.", _scaled("sm_occupancy", 0.01)),
    DcgmField("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active.", _scaled("tensor_active", 0.01)),
    DcgmField(
        "DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles the device memory interface is active sending or receiving data.", _scaled("dram_active", 0.01)
    ),
    DcgmField("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", "The rate of data transmitted over the PCIe bus, in bytes per second.", _scaled("pcie_tx_bps", 1)),
    DcgmField("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", "The rate of data received over the PCIe bus, in bytes per second.", _scaled("pcie_rx_bps", 1)),
)


def _dcgm_family(spec: DcgmField) -> Metric:
    if spec.type == "gauge":
        return GaugeMetricFamily(spec.name, spec.help, labels=GPU_LABELS)
    # dcgm-exporter's counters have no _total suffix, which prometheus-client adds to
    # every counter: exposed untyped, the name stays the one dashboards query.
    return Metric(spec.name, spec.help, "unknown")


class SnapshotCollector(Collector):
    """Registered in a CollectorRegistry; each scrape formats the latest snapshot."""

    def __init__(self, live: LiveMetrics) -> None:
        self._live = live

    def collect(self) -> Iterator[Metric]:
        return iter(metric_families(self._live.snapshot))


def metric_families(snap: MetricsSnapshot) -> list[Metric]:
    return [*_gpu_families(snap), _process_family(snap), *_run_families(snap), *_host_families(snap), *_check_families(snap)]


def _owner_label(process: GpuProcess) -> str:
    """run, other (another process or another container), unknown (not attributed)."""
    return "run" if process.owner == RUN else "other" if process.is_others else "unknown"


def _process_family(snap: MetricsSnapshot) -> Metric:
    """GPU memory of each process on a GPU, the run's and others', the biggest
    PROCESSES_PER_GPU per GPU (a pid is a label: without the bound a busy shared machine
    would grow the series without end)."""
    family = GaugeMetricFamily(
        "gputui_gpu_process_memory_bytes",
        "GPU memory a process holds, by owner (run, other, unknown); the biggest per GPU.",
        labels=[*GPU_LABELS, "pid", "owner"],
    )
    live = {g.index for g in _live_gpus(snap)}
    for index, processes in sorted(snap.gpu_processes.items()):
        if index not in live:
            continue
        known = [p for p in processes if p.used_memory is not None]
        for process in sorted(known, key=lambda p: -(p.used_memory or 0))[:PROCESSES_PER_GPU]:
            family.add_metric([*_gpu_label_values(snap, index), str(process.pid), _owner_label(process)], float(process.used_memory or 0))
    return family


def _gpu_label_values(snap: MetricsSnapshot, index: int) -> list[str]:
    info = snap.gpus.get(index) or GpuLabels(gpu=str(index), uuid="", model_name="")
    return [info.gpu, info.uuid, info.model_name, snap.hostname]


def _live_gpus(snap: MetricsSnapshot) -> list[GpuSample]:
    return [g for g in snap.sample.gpus if not g.lost] if snap.sample else []


def _gpu_families(snap: MetricsSnapshot) -> list[Metric]:
    gpus = _live_gpus(snap)
    out: list[Metric] = []
    for spec in DCGM_FIELDS:
        family = _dcgm_family(spec)
        for gpu in gpus:
            value = spec.value(gpu)
            if value is None:
                continue
            labels = _gpu_label_values(snap, gpu.index)
            if isinstance(family, GaugeMetricFamily):
                family.add_metric(labels, value)
            else:
                family.add_sample(spec.name, dict(zip(GPU_LABELS, labels)), value)
        out.append(family)
    throttle = GaugeMetricFamily(
        "gputui_gpu_throttle_reason_active", "1 while this clock-event (throttle) reason holds the GPU's clocks down, else 0.", labels=[*GPU_LABELS, "reason"]
    )
    energy = CounterMetricFamily("gputui_gpu_energy_joules", "Energy the GPU used since this session began.", labels=GPU_LABELS)
    for gpu in gpus:
        labels = _gpu_label_values(snap, gpu.index)
        if gpu.throttle_reasons is not None:
            active = set(gpu.throttle_reasons)
            for reason in [*THROTTLE_REASONS.values(), *sorted(active - set(THROTTLE_REASONS.values()))]:
                throttle.add_metric([*labels, reason], 1.0 if reason in active else 0.0)
        start = snap.energy_start_mj.get(gpu.index)
        if gpu.energy_mj is not None and start is not None:
            energy.add_metric(labels, max(0.0, (gpu.energy_mj - start) / 1000.0))
    lost = GaugeMetricFamily("gputui_gpu_lost", "1 when the GPU stopped answering NVML.", labels=GPU_LABELS)
    for gpu in snap.sample.gpus if snap.sample else []:
        lost.add_metric(_gpu_label_values(snap, gpu.index), 1.0 if gpu.lost else 0.0)
    return [*out, throttle, energy, lost]


def _run_families(snap: MetricsSnapshot) -> list[Metric]:
    if not snap.version:  # no session has begun yet
        return []
    host = ["Hostname"]
    info = GaugeMetricFamily("gputui_session_info", "The session: which preset runs (empty while watching).", labels=[*host, "preset", "version"])
    info.add_metric([snap.hostname, snap.preset, snap.version], 1.0)
    out: list[Metric] = [info]
    if snap.sample is not None:
        out.append(GaugeMetricFamily("gputui_session_elapsed_seconds", "Seconds since the session began, at the latest sample.", value=snap.sample.t))
    # One name whatever the job counts: the unit label says samples, tokens or steps.
    throughput = GaugeMetricFamily(
        "gputui_throughput_samples_per_second", "The run's latest throughput reading, per second, in its unit.", labels=[*host, "preset", "unit"]
    )
    if snap.throughput is not None:
        throughput.add_metric([snap.hostname, snap.preset, snap.unit], snap.throughput)
    done = CounterMetricFamily(
        "gputui_samples_processed", "Samples the run processed: its readings' counts, or their rate over their window.", labels=[*host, "preset"]
    )
    done.add_metric([snap.hostname, snap.preset], snap.samples_done)
    out += [throughput, done, *_rank_families(snap)]
    if snap.price_per_hour is not None:
        out.append(GaugeMetricFamily("gputui_price_usd_per_hour", "The machine's price given with --price.", value=snap.price_per_hour))
        cost = GaugeMetricFamily(
            "gputui_cost_usd_per_million_samples", "What a million samples cost at the latest throughput and --price.", labels=[*host, "preset"]
        )
        if snap.throughput and snap.unit == "samples":
            cost.add_metric([snap.hostname, snap.preset], snap.price_per_hour / 3600.0 / snap.throughput * 1e6)
        out.append(cost)
    return [*out, *_finding_families(snap)]


def _rank_families(snap: MetricsSnapshot) -> list[Metric]:
    """A data-parallel run's ranks (``gpu`` is the NVML index each drives, empty for a
    rank on another machine) and its scaling against the one-GPU baseline, when known."""
    host = ["Hostname", "preset"]
    per_rank = GaugeMetricFamily(
        "gputui_rank_throughput_samples_per_second", "One rank's latest throughput reading in a data-parallel run.", labels=[*host, "rank", "gpu"]
    )
    for rank, rate in sorted(snap.rank_rates.items()):
        gpu = ranks.gpu_of_rank(list(snap.rank_gpus), rank)
        per_rank.add_metric([snap.hostname, snap.preset, str(rank), "" if gpu is None else str(gpu)], rate)
    out: list[Metric] = [per_rank]
    efficiency = snap.scaling_efficiency
    if efficiency is not None:
        scaling = GaugeMetricFamily(
            "gputui_scaling_efficiency_ratio", "The latest throughput over N times the one-GPU baseline's (--baseline): 1 is perfect scaling.", labels=host
        )
        scaling.add_metric([snap.hostname, snap.preset], efficiency)
        out.append(scaling)
    return out


def _finding_families(snap: MetricsSnapshot) -> list[Metric]:
    labels = ["Hostname", "kind", "gpu"]
    active = GaugeMetricFamily("gputui_findings_active", "Open diagnosis findings of this kind (on this GPU; gpu is empty for run-wide ones).", labels=labels)
    severity = GaugeMetricFamily("gputui_findings_severity", "The worst open finding's severity: 0 none, 1 info, 2 warning, 3 critical.", labels=labels)
    counts: Counter[tuple[str, int | None]] = Counter()
    worst: dict[tuple[str, int | None], int] = {}
    for finding in snap.findings.values():
        key = (finding.kind, finding.gpu)
        counts[key] += 1
        worst[key] = max(worst.get(key, 0), SEVERITY_LEVEL.get(finding.severity, 1))
    for key in sorted(snap.finding_kinds, key=lambda k: (k[0], -1 if k[1] is None else k[1])):
        values = [snap.hostname, key[0], "" if key[1] is None else str(key[1])]
        active.add_metric(values, float(counts[key]))
        severity.add_metric(values, float(worst.get(key, 0)))
    return [active, severity]


def _host_families(snap: MetricsSnapshot) -> list[Metric]:
    host = snap.host
    out: list[Metric] = []
    if snap.cpu_available is not None:
        out.append(
            GaugeMetricFamily("gputui_host_cpu_available_cores", "Cores this machine lets the run use (affinity, cgroup quota).", value=snap.cpu_available)
        )
    if host is None:
        return out
    if host.cpu_percent is not None:
        out.append(GaugeMetricFamily("gputui_host_cpu_utilization_ratio", "The whole machine's CPU use, 0-1.", value=host.cpu_percent / 100.0))
    for attr, name in (("memory_used", "used"), ("memory_available", "available"), ("memory_total", "total")):
        value = getattr(host, attr)
        if value is not None:
            out.append(GaugeMetricFamily(f"gputui_host_memory_{name}_bytes", f"Host memory {name}.", value=value))
    cores = GaugeMetricFamily("gputui_run_cpu_cores", "CPU the run's processes use, in cores, by role (main, worker, child).", labels=["role"])
    rss = GaugeMetricFamily("gputui_run_memory_rss_bytes", "Resident memory of the run's processes, by role.", labels=["role"])
    procs = GaugeMetricFamily("gputui_run_processes", "The run's processes, by role.", labels=["role"])
    by_role: dict[str, list[float]] = {}
    for proc in host.processes:
        totals = by_role.setdefault(proc.role, [0.0, 0.0, 0.0])
        totals[0] += (proc.cpu_percent or 0.0) / 100.0
        totals[1] += proc.rss or 0
        totals[2] += 1
    for role in sorted(by_role):
        cores.add_metric([role], by_role[role][0])
        rss.add_metric([role], by_role[role][1])
        procs.add_metric([role], by_role[role][2])
    return [*out, cores, rss, procs]


# A check's status as a number an alert can compare: ok (and info) 0, warn 1, fail 2.
# A skipped check has no series: it measured nothing.
CHECK_STATUS_LEVEL = {"ok": 0, "info": 0, "warn": 1, "fail": 2}


def _check_families(snap: MetricsSnapshot) -> list[Metric]:
    """The latest gputui check: a status per check and GPU, and what it measured, so a
    fleet's alerts fire on a failing node (status 2) or a slow one (ratio under 0.92)."""
    if not snap.checks:
        return []
    labels = ["Hostname", "check", "gpu"]
    status = GaugeMetricFamily("gputui_check_status", "The latest gputui check's result: 0 ok, 1 warn, 2 fail.", labels=labels)
    value = GaugeMetricFamily("gputui_check_value", "What the latest gputui check measured, in the unit of its unit label.", labels=[*labels, "unit"])
    ratio = GaugeMetricFamily("gputui_check_ratio", "Measured over expected, for checks with a target (1 = as fast as this GPU should be).", labels=labels)
    for entry in sorted(snap.checks.values(), key=lambda c: (c.name, -1 if c.gpu is None else c.gpu)):
        values = [snap.hostname, entry.name, "" if entry.gpu is None else str(entry.gpu)]
        if entry.status in CHECK_STATUS_LEVEL:
            status.add_metric(values, float(CHECK_STATUS_LEVEL[entry.status]))
        if entry.value is not None:
            value.add_metric([*values, entry.unit], entry.value)
        if entry.ratio is not None:
            ratio.add_metric(values, entry.ratio)
    return [status, value, ratio]


def write_metrics_file(path: Path, live: LiveMetrics) -> None:
    """``live``'s latest snapshot in Prometheus' text format, replacing ``path``
    atomically: what node_exporter's textfile collector reads (it must never see half a
    file).  For a one-shot command (gputui check), which no scraper could reach."""
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(live))
    write_atomic(path, generate_latest(registry).decode("utf-8"))
