"""What the rules read: the run as known so far (header, phase, throughput) and the
current sample with the figures several rules share, plus :class:`Accum`, the
bounded per-finding series that evidence is computed from."""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gputui.diagnosis_settings import Settings
from gputui.model import RUN, SAMPLES, GpuInfo, GpuProcess, GpuSample, HostSample, ProcessSample, Sample, Unit
from gputui.protocol import JsonObject
from gputui.record.events import ProbeReport
from gputui.record.schema import Header, PresetRecord
from gputui.stats import median

RATE_KEEP_S = 300.0  # throughput readings kept for baselines
RATE_RECENT_S = 10.0  # "current" throughput: median of this many seconds of readings
BASELINE_S = 60.0  # throughput before a finding: median of this many seconds before it began
SWAP_WINDOW_S = 30.0
CPU_STAT_WINDOW_S = 30.0  # cgroup throttling is judged on its growth over this long
# A GPU's process list is read about once a second; one older than this is not "now"
PROCESSES_STALE_S = 5.0

# What a rule saw in one sample, by name: the numbers a finding's evidence is computed
# from (None: not known in this sample).
Obs = dict[str, float | None]


@dataclass
class Throttling:
    """cgroup CPU throttling over the last CPU_STAT_WINDOW_S seconds."""

    throttled_pct: float  # % of the CPU periods in which the cgroup was throttled
    throttled_periods: int
    throttled_s_per_s: float | None  # seconds throttled per second of the window


@dataclass
class Derived:
    """Figures of one sample that several rules use."""

    procs: list[ProcessSample] = field(default_factory=list)  # the run's, with a CPU reading
    workers: list[ProcessSample] = field(default_factory=list)
    main: ProcessSample | None = None
    run_cpu: float | None = None  # % of one core, whole tree
    run_rss: float | None = None
    run_read_bps: float | None = None
    run_gpus: list[GpuSample] = field(default_factory=list)
    top_thread: ProcessSample | None = None  # the run's process (not a data-loader worker) with the busiest thread


class Context:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.gpu_info: dict[int, GpuInfo] = {}
        self.cores: float | None = None  # cpu_available may be a fraction (a cgroup quota)
        self.n_gpus = 0
        self.preset = PresetRecord()  # the header's (an empty one where nothing was run)
        self.workload: JsonObject = {}
        self.expects_phases = False
        self.phase: str | None = None
        self.first_t: float | None = None
        self.now = 0.0  # the latest sample's time (its t)
        self.ended = False
        self.sample: Sample | None = None
        # The newest host part: at a sub-second interval only about one sample a second
        # carries one (the session reads the host at most once a second).
        self.host: HostSample | None = None
        # Each GPU's newest process list and when it was read (only slow-cadence samples carry one)
        self.gpu_processes: dict[int, tuple[float, list[GpuProcess]]] = {}
        self.derived = Derived()  # figures of the latest sample
        self.rates: deque[tuple[float, float]] = deque()
        self._recent_key: tuple | None = None  # what recent_rate() was last worked out for
        self._recent_rate: float | None = None
        self.rank_rates: dict[int, deque[tuple[float, float]]] = {}  # data-parallel runs: each rank's
        self.swap: deque[tuple[float, float]] = deque()
        self.cpu_stat: deque[tuple[float, int, int, float | None]] = deque()
        self.cores_visible: int | None = None  # the machine's logical CPUs, whatever we may use
        self.last_memory_used_pct: float | None = None
        self.open_kinds: set[str] = set()  # kinds of the findings open now (the engine keeps it)
        # The probe's windows (gputui.probe): (t, seconds, data-wait seconds, workers, rank)
        self.probe: deque[tuple[float, float, float, int | None, int | None]] = deque()
        self.probe_sampled = False  # the last window's data wait was the sampler's (no DataLoader)
        self.evaluating = False  # the probe says an evaluation goes on: the training is not judged by it
        self.probe_site: str | None = None  # and the data work it saw most, e.g. "get_batch (train.py:112)"
        self.first_progress_t: float | None = None  # the first throughput reading or probe step
        self.rate_unit = SAMPLES  # what self.rates count: one unit at a time

    # --- the run -------------------------------------------------------------------
    def on_header(self, header: Header) -> None:
        for info in header.gpu_list:
            self.gpu_info[info.index] = info
        self.n_gpus = len(self.gpu_info)
        host = header.host
        # cpu_available: cores the run may use (affinity, cgroup quota) where recorded
        self.cores = (host.cpu_available or host.cpu_logical) if host else None
        self.cores_visible = host.cpu_logical if host else None
        self.preset = header.preset or PresetRecord()
        self.expects_phases = self.preset.framework is not None  # gputui's own workloads announce phases

    def setting(self, key: str) -> Any:
        """What the run itself says (workload line, else preset), e.g. pipeline, workers."""
        value = self.workload.get(key)
        return self.preset.setting(key) if value is None else value

    @property
    def framework(self) -> str | None:
        return self.setting("framework")

    @property
    def run_uses_gpu(self) -> bool:
        """False for runs that say they run on the CPU (the smoke workload, device "cpu"):
        the machine's idle GPUs say nothing about them."""
        return self.framework != "smoke" and self.setting("device") != "cpu"

    def add_probe(self, t: float, report: ProbeReport) -> None:
        if report.evaluation:  # an evaluation's data wait is not the training loop's
            self.evaluating = report.ongoing
            return
        self.evaluating = False
        seconds, wait = report.seconds, report.loop_wait_s
        if report.steps:
            self.first_progress_t = t if self.first_progress_t is None else self.first_progress_t
        if not seconds or wait is None:
            return
        # where the wait was seen: around DataLoader batches, or sampled in the loop's own code
        self.probe_sampled = report.sampled_wait
        self.probe_site = report.data_site if report.sampled_wait else None
        self.probe.append((t, float(seconds), float(wait), report.workers, report.rank))
        while self.probe and self.probe[0][0] < t - RATE_KEEP_S:
            self.probe.popleft()

    def data_wait_share(self) -> float | None:
        """The share of the last RATE_RECENT_S the training loop spent waiting for its
        next batch (every rank's windows together); None without the probe."""
        recent = [(s, w) for (t, s, w, _, _) in self.probe if self.now - RATE_RECENT_S <= t <= self.now + 1.0]
        seconds = sum(s for s, _ in recent)
        return min(1.0, sum(w for _, w in recent) / seconds) if seconds > 0 else None

    def probe_workers(self) -> int | None:
        """The DataLoader's worker count the probe saw last."""
        return next((w for (_, _, _, w, _) in reversed(self.probe) if w is not None), None)

    def add_rate(self, t: float, rate: float, unit: Unit = SAMPLES) -> None:
        self.first_progress_t = t if self.first_progress_t is None else self.first_progress_t
        if unit != self.rate_unit:  # steps became samples (the batch size is known now): start afresh
            self.rates.clear()
            self.rate_unit = unit
        self.rates.append((t, rate))
        while self.rates and self.rates[0][0] < t - RATE_KEEP_S:
            self.rates.popleft()

    def add_rank_rate(self, rank: object, t: float, rate: float) -> None:
        if not isinstance(rank, int):
            return
        rates = self.rank_rates.setdefault(rank, deque())
        rates.append((t, rate))
        while rates and rates[0][0] < t - RATE_KEEP_S:
            rates.popleft()

    def recent_rank_rates(self) -> dict[int, float]:
        """Each rank's median rate over the last RATE_RECENT_S (ranks without one left out)."""
        out = {}
        for rank, rates in self.rank_rates.items():
            recent = median([r for (t, r) in rates if self.now - RATE_RECENT_S <= t <= self.now])
            if recent is not None:
                out[rank] = recent
        return out

    def rates_between(self, t0: float, t1: float) -> list[float]:
        return [r for (t, r) in self.rates if t0 <= t <= t1]

    def recent_rate(self) -> float | None:
        """The median reading of the last RATE_RECENT_S.  Several rules ask on every
        sample, over RATE_KEEP_S of readings (3,000 at ten a second): worked out once
        per sample and new reading, from the newest back (readings come in time order)."""
        key = (self.now, len(self.rates), self.rates[-1] if self.rates else None)
        if key != self._recent_key:
            t0, recent = self.now - RATE_RECENT_S, []
            for t, rate in reversed(self.rates):
                if t < t0:
                    break
                if t <= self.now:
                    recent.append(rate)
            self._recent_key, self._recent_rate = key, median(recent)
        return self._recent_rate

    # --- one sample ------------------------------------------------------------------
    def on_sample(self, sample: Sample) -> None:
        self.sample = sample
        self.now = sample.t
        if self.first_t is None:
            self.first_t = sample.t
        d = Derived()
        fresh = sample.host
        if fresh is not None:
            self.host = fresh
        host = self.host
        if host is not None and host.processes:
            d.procs = [p for p in host.processes if p.cpu_percent is not None]
            d.workers = [p for p in d.procs if p.role == "worker"]
            d.main = next((p for p in d.procs if p.role == "main"), None)
            threads = [p for p in d.procs if p.role != "worker" and p.top_thread_pct is not None]
            d.top_thread = max(threads, key=lambda p: p.top_thread_pct or 0.0) if threads else None
            if d.procs:
                d.run_cpu = sum(p.cpu_percent or 0.0 for p in d.procs)
            d.run_rss = float(sum(p.rss or 0 for p in host.processes))
            reads = [p.read_bps for p in host.processes if p.read_bps is not None]
            d.run_read_bps = sum(reads) if reads else None
        gpus = [g for g in sample.gpus if not g.lost]
        for g in gpus:
            if g.processes is not None:
                self.gpu_processes[g.index] = (sample.t, g.processes)
        pids = {p.pid for p in host.processes} if host is not None else set()
        mine = [g for g in gpus if any(p.owner == RUN or p.pid in pids for p in self.processes_of(g.index) or ())]
        d.run_gpus = mine or gpus  # containers report other PIDs: then every GPU
        self.derived = d
        if fresh is not None:
            host = fresh
            if host.swap_used is not None:
                self.swap.append((sample.t, float(host.swap_used)))
                while self.swap and self.swap[0][0] < sample.t - SWAP_WINDOW_S:
                    self.swap.popleft()
            if host.cpu_periods is not None and host.cpu_throttled_periods is not None:
                self.cpu_stat.append((sample.t, host.cpu_periods, host.cpu_throttled_periods, host.cpu_throttled_s))
                while self.cpu_stat and self.cpu_stat[0][0] < sample.t - CPU_STAT_WINDOW_S:
                    self.cpu_stat.popleft()
            if host.memory_total and host.memory_available is not None:
                self.last_memory_used_pct = 100.0 * (1 - host.memory_available / host.memory_total)

    def info_of(self, index: int | None) -> GpuInfo | None:
        """The header's description of GPU ``index`` (None: not described, or no GPU)."""
        return self.gpu_info.get(index) if index is not None else None

    def processes_of(self, index: int) -> list[GpuProcess] | None:
        """The GPU's processes as last read, None where none was read lately."""
        entry = self.gpu_processes.get(index)
        if entry is None or self.now - entry[0] > PROCESSES_STALE_S:
            return None
        return entry[1]

    def throttling(self) -> Throttling | None:
        """How much the cgroup throttled the run's CPU over the last CPU_STAT_WINDOW_S."""
        if len(self.cpu_stat) < 2:
            return None
        t0, periods0, throttled0, secs0 = self.cpu_stat[0]
        t1, periods1, throttled1, secs1 = self.cpu_stat[-1]
        periods, throttled = periods1 - periods0, throttled1 - throttled0
        if periods <= 0 or throttled < 0:
            return None  # no CPU used in the window, or the counters restarted
        per_s = (secs1 - secs0) / (t1 - t0) if secs0 is not None and secs1 is not None and t1 > t0 else None
        return Throttling(100.0 * throttled / periods, throttled, per_s)

    def swap_growth(self) -> float | None:
        """Bytes the swap grew within the last SWAP_WINDOW_S seconds."""
        if len(self.swap) < 2:
            return None
        low = min(v for _, v in self.swap)
        return max(0.0, self.swap[-1][1] - low)


# --- per-finding series ----------------------------------------------------------------

ACCUM_CAP = 20_000  # values per series; beyond it every other one is dropped


class Accum:
    """Named series of one finding, aligned on time, bounded in memory: when full,
    every other value is dropped and only every second new one kept (and so on), so
    a day-long finding still has an even spread of its samples."""

    def __init__(self) -> None:
        self.t = array("d")
        self.series: dict[str, array] = {}
        self._stride = 1
        self._skip = 0

    def add(self, t: float, obs: Obs | None) -> None:
        self._skip += 1
        if self._skip < self._stride:
            return
        self._skip = 0
        n = len(self.t)
        self.t.append(t)
        for key, value in (obs or {}).items():
            values = self.series.get(key)
            if values is None:
                values = self.series[key] = array("d", [math.nan] * n)
            values.append(math.nan if value is None else float(value))
        for values in self.series.values():
            if len(values) == n:
                values.append(math.nan)
        if len(self.t) >= ACCUM_CAP:
            self.t = self.t[::2]
            self.series = {k: v[::2] for k, v in self.series.items()}
            self._stride *= 2

    def values(self, key: str, until: float | None = None, since: float | None = None) -> list[float]:
        values = self.series.get(key)
        if values is None:
            return []
        lo = bisect_left(self.t, since) if since is not None else 0
        hi = bisect_right(self.t, until) if until is not None else len(self.t)
        return [v for v in values[lo:hi] if not math.isnan(v)]


def med(values: Iterable[float]) -> float | None:
    return median(list(values))


def rnd(value: float | None, digits: int = 1) -> float | None:
    if value is None:
        return None
    value = round(value, digits)
    return int(value) if digits == 0 else value
