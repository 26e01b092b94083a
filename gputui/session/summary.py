"""The summary of a run, accumulated as samples and events stream past.

GPU and host series are kept as counts of their values at 0.1 resolution
(:class:`~gputui.stats.ValueCounts`), so memory stays flat however long the run; the
throughput readings are kept whole in ``array('d')`` (8 bytes a reading).  GPU and host
statistics cover the measured phase when the workload announced one; else, for any
other job, its training phase (:mod:`gputui.session.phases`: from its first progress to its
last, evaluation and stalls left out); else, for a job that shows no progress (``--pid``),
the samples in which a GPU worked; else the whole session.  The summary says which
(``window``), and lists the phases it told apart.
"""

from __future__ import annotations

import dataclasses
from array import array
from collections import Counter

from gputui.model import BURSTY_BELOW, SAMPLES, STEPS, WORKLOAD_SOURCE, GpuSample, HostSample, Sample, Throughput, memory_of, others_of
from gputui.protocol import MEASURE
from gputui.record import events as ev
from gputui.record.events import Event
from gputui.record.observer import Observer
from gputui.record.schema import Baseline, GpuSummary, Header, HostSummary, RankRate, Reported, RunSettings, Scaling, Stats, Summary, ThroughputSummary
from gputui.run.outcome import Outcome
from gputui.run.throughput import COUNTED_FROM_START, evaluation_seen
from gputui.session.phases import TRAINING, PhaseTracker, gpu_busy
from gputui.stats import RollingMedian, ValueCounts, spread

# Other processes seen on a GPU are counted present until the next process read, but
# no longer than this (a gap in the samples is not presence)
OTHERS_GAP_S = 5.0
# The running median a live reading carries covers this many of the latest readings.
RECENT_READINGS = 1000
GPU_SERIES = ("util_gpu", "sm_active", "sm_occupancy", "tensor_active", "temp_c", "power_w", "sm_clock_mhz")


def _median_max(values: ValueCounts) -> Stats | None:
    median, top = values.percentile(50.0), values.max()
    if median is None or top is None:
        return None
    return Stats(median=median, max=top)


class _GpuWindow:
    """Per-GPU accumulators over one time window."""

    def __init__(self) -> None:
        self.series: dict[str, ValueCounts] = {name: ValueCounts() for name in GPU_SERIES}
        self.samples = 0
        self.lost = False
        self.peak_memory: int | None = None
        self.throttle_counts: Counter[str] = Counter()
        self.energy_first: tuple[float, int] | None = None  # (t, mJ)
        self.energy_last: tuple[float, int] | None = None
        # Where the energy counter is absent: power integrated over time (trapezoids)
        self.power_joules = 0.0
        self.power_seconds = 0.0
        self.power_last: tuple[float, float] | None = None  # (t, W)
        self.throttle_first: tuple[float, dict[str, int]] | None = None  # (t, ns by reason)
        self.throttle_last: tuple[float, dict[str, int]] | None = None
        # Other processes (not the run's): their peak memory together, and for how long
        # any was present (from one process read to the next)
        self.others_peak_memory: int | None = None
        self.others_seconds = 0.0
        self.others_max = 0
        self.processes_last: tuple[float, bool] | None = None  # (t, others present) at the last read

    def add(self, t: float, gpu: GpuSample) -> None:
        if gpu.lost:
            self.lost = True
            return
        self.samples += 1
        for name in GPU_SERIES:
            value = getattr(gpu, name)
            if value is not None:
                self.series[name].append(value)
        if gpu.memory_used is not None:
            self.peak_memory = max(self.peak_memory or 0, gpu.memory_used)
        self.throttle_counts.update(gpu.throttle_reasons or ())
        if gpu.energy_mj is not None:
            if self.energy_first is None:
                self.energy_first = (t, gpu.energy_mj)
            self.energy_last = (t, gpu.energy_mj)
        if gpu.power_w is not None:
            if self.power_last is not None and t > self.power_last[0]:
                dt = t - self.power_last[0]
                self.power_joules += (self.power_last[1] + gpu.power_w) / 2 * dt
                self.power_seconds += dt
            self.power_last = (t, gpu.power_w)
        if gpu.throttle_time_ns:
            if self.throttle_first is None:
                self.throttle_first = (t, gpu.throttle_time_ns)
            self.throttle_last = (t, gpu.throttle_time_ns)
        if gpu.processes is not None:
            self._add_processes(t, gpu)

    def _add_processes(self, t: float, gpu: GpuSample) -> None:
        if gpu.processes and all(p.owner is None for p in gpu.processes):
            return  # nobody told whose they are (no run to match, an older recording)
        others = others_of(gpu.processes)
        if self.processes_last is not None and self.processes_last[1]:
            self.others_seconds += min(OTHERS_GAP_S, max(0.0, t - self.processes_last[0]))
        self.processes_last = (t, bool(others))
        self.others_max = max(self.others_max, len(others))
        if others:
            self.others_peak_memory = max(self.others_peak_memory or 0, memory_of(others))

    def energy(self) -> tuple[float, float] | None:
        """(joules, seconds) between the first and last energy-counter reading of the
        window (exact); without two counter readings, power integrated over the window."""
        if self.energy_first is not None and self.energy_last is not None:
            seconds = self.energy_last[0] - self.energy_first[0]
            joules = (self.energy_last[1] - self.energy_first[1]) / 1000.0
            if seconds > 0 and joules >= 0:
                return joules, seconds
        if self.power_seconds > 0:
            return self.power_joules, self.power_seconds
        return None

    def throttle_share(self) -> tuple[dict[str, float], list[str]]:
        """Share of the window in each clock-event reason, and which reasons came from
        the driver's cumulative time counters (exact) rather than the sampled mask
        (the share of samples that caught the reason active)."""
        shares = {name: n / self.samples for name, n in self.throttle_counts.items()} if self.samples else {}
        counted: list[str] = []
        if self.throttle_first is not None and self.throttle_last is not None:
            (t0, first), (t1, last) = self.throttle_first, self.throttle_last
            if t1 > t0:
                for name in sorted(first.keys() & last.keys()):
                    counted.append(name)
                    share = min(1.0, max(0.0, (last[name] - first[name]) / 1e9 / (t1 - t0)))
                    if share > 0:
                        shares[name] = share
                    else:
                        shares.pop(name, None)
        return {name: round(shares[name], 4) for name in sorted(shares)}, counted

    def build(self, index: int) -> GpuSummary:
        series = {name: _median_max(values) for name, values in self.series.items()}
        shares, counted = self.throttle_share() if self.samples else (None, [])
        energy = self.energy()
        attributed = self.processes_last is not None  # processes were read (and attributed where owners are known)
        return GpuSummary(
            index=index,
            samples=self.samples,
            lost=self.lost,
            **series,
            peak_memory_used=self.peak_memory,
            throttle_share=shares,
            throttle_share_counted=counted or None,
            energy_j=round(energy[0], 3) if energy else None,
            energy_seconds=round(energy[1], 3) if energy else None,
            others_max=self.others_max if attributed else None,
            others_seconds=round(self.others_seconds, 3) if attributed else None,
            others_peak_memory=self.others_peak_memory if attributed else None,
        )


class _HostWindow:
    def __init__(self) -> None:
        self.cpu = ValueCounts()
        self.peak_memory: int | None = None
        self.process_cpu = ValueCounts()  # the run's whole tree, % of one core
        self.peak_tree_rss: int | None = None
        self.max_workers = 0

    def add(self, host: HostSample | None) -> None:
        if host is None:
            return
        if host.cpu_percent is not None:
            self.cpu.append(host.cpu_percent)
        if host.memory_used is not None:
            self.peak_memory = max(self.peak_memory or 0, host.memory_used)
        if host.processes:
            self.process_cpu.append(sum(p.cpu_percent or 0.0 for p in host.processes))
            self.peak_tree_rss = max(self.peak_tree_rss or 0, sum(p.rss or 0 for p in host.processes))
            self.max_workers = max(self.max_workers, sum(p.role == "worker" for p in host.processes))

    def build(self) -> HostSummary:
        return HostSummary(
            cpu_percent=_median_max(self.cpu),
            run_cpu_percent=_median_max(self.process_cpu),
            peak_memory_used=self.peak_memory,
            run_peak_rss=self.peak_tree_rss,
            max_workers=self.max_workers,
        )


def scaling_efficiency(total_rate: float | None, world_size: int | None, single_rate: float | None) -> float | None:
    """How much of N times the one-GPU rate N GPUs reach: total / (N x single), 1.0 perfect."""
    if not total_rate or not world_size or not single_rate or single_rate <= 0:
        return None
    return total_rate / (world_size * single_rate)


class SummaryBuilder(Observer):
    def __init__(self, baseline: Baseline | None = None) -> None:
        # The same preset on one GPU, to judge scaling against: samples_per_sec and
        # where it comes from (a recording's path, or "this session").
        self.baseline = baseline
        self.rank_rates: dict[int, array] = {}  # each rank's measured readings (data-parallel runs)
        self.world_size: int | None = None
        self.phase: str | None = None
        self.first_t: float | None = None
        self.last_t: float | None = None
        self.samples = 0
        self.gpus_all: dict[int, _GpuWindow] = {}
        self.gpus_measure: dict[int, _GpuWindow] = {}
        self.host_all = _HostWindow()
        self.host_measure = _HostWindow()
        # A job without announced phases: its training samples, and (no progress seen at
        # all) the samples in which a GPU worked.
        self.phases = PhaseTracker()
        self._probe_reported = False  # the probe tells evaluation apart: the output's word is not needed
        self.gpus_train: dict[int, _GpuWindow] = {}
        self.host_train = _HostWindow()
        self.gpus_active: dict[int, _GpuWindow] = {}
        self.host_active = _HostWindow()
        self.rates = array("d")  # measured throughput readings
        self._recent_rates = RollingMedian(RECENT_READINGS)
        self.rate_samples = 0.0  # samples those readings cover
        self.rate_seconds = 0.0
        self.rate_counted = 0  # readings that said how many samples in how many seconds
        self._started = False  # a window was seen: the run's start is behind it, whatever series follows
        self.rate_source: str | None = None
        self.unit = SAMPLES  # what the readings count (gputui.model.UNITS)
        self._reported_by_unit: dict[str, Throughput] = {}  # the tool's own final figures, by unit
        self.workload: ev.WorkloadInfo | None = None
        self.outcome: Outcome | None = None
        self.attach_pid: int | None = None  # a job started elsewhere (--pid), from the header

    # -- Observer --------------------------------------------------------------
    def on_header(self, header: Header) -> None:
        self.attach_pid = header.attach_pid

    def on_sample(self, sample: Sample) -> None:
        self.samples += 1
        self.first_t = sample.t if self.first_t is None else self.first_t
        self.last_t = sample.t
        measuring = self.phase == MEASURE
        training = self.phases.classify(sample) == TRAINING
        active = gpu_busy(sample)
        for gpu in sample.gpus:
            self.gpus_all.setdefault(gpu.index, _GpuWindow()).add(sample.t, gpu)
            if measuring:
                self.gpus_measure.setdefault(gpu.index, _GpuWindow()).add(sample.t, gpu)
            if training:
                self.gpus_train.setdefault(gpu.index, _GpuWindow()).add(sample.t, gpu)
            if active:
                self.gpus_active.setdefault(gpu.index, _GpuWindow()).add(sample.t, gpu)
        self.host_all.add(sample.host)
        if measuring:
            self.host_measure.add(sample.host)
        if training:
            self.host_train.add(sample.host)
        if active:
            self.host_active.add(sample.host)

    def on_event(self, event: Event) -> None:
        payload = event.payload
        if isinstance(payload, ev.PhaseChange):
            self.phase = payload.phase
        elif isinstance(payload, ev.WorkloadInfo):
            self.workload = payload
            # a data-parallel run's size: torchrun's ranks, or MirroredStrategy's replicas in one process
            self.world_size = payload.world_size or payload.replicas or self.world_size
        elif isinstance(payload, Outcome):
            self.outcome = payload
        elif isinstance(payload, Throughput) and event.kind == ev.RANK_THROUGHPUT:
            if payload.rank is not None and not payload.final and payload.phase in (None, MEASURE):
                self.rank_rates.setdefault(payload.rank, array("d")).append(payload.samples_per_sec)
            self.world_size = payload.ranks or self.world_size
        elif isinstance(payload, Throughput) and event.kind == ev.THROUGHPUT:
            if payload.final:
                self._reported_by_unit[payload.unit] = payload
            elif payload.phase in (None, MEASURE):  # tools without phases: every reading counts
                if payload.phase is None and payload.samples != 0:  # a window that counted nothing is no progress
                    self.phases.on_progress(event.t)
                self._add_rate(payload)
        elif isinstance(payload, ev.ProbeReport):
            self._probe_reported = True
            if payload.evaluation:
                self.phases.on_evaluation(event.t, payload.seconds or 0.0, payload.ongoing)
            elif payload.steps:
                self.phases.on_progress(event.t)
        elif isinstance(payload, ev.Output) and payload.text and not self._probe_reported:
            self._evaluation_in_output(event.t, payload.text)

    def _evaluation_in_output(self, t: float, text: str) -> None:
        """An evaluation the run's output shows (:func:`evaluation_seen`): a phase where
        the probe does not tell one."""
        seen = evaluation_seen(text)
        since = self.phases.last_progress
        if seen is None:
            return
        if seen.seconds is not None:
            self.phases.on_evaluation(t, seen.seconds, seen.ongoing)
        elif since is not None:  # before the first progress it is start-up (Lightning's sanity check, nanoGPT's first evaluation)
            self.phases.on_evaluation(t, t - since, seen.ongoing)

    def _add_rate(self, reading: Throughput) -> None:
        """One live reading.  A new unit (steps become samples once the probe tells the
        batch size) or a new source (the probe taking over from a progress bar) starts
        the series afresh: one series, one unit, one way of measuring."""
        if self.rates and (reading.unit != self.unit or reading.source != self.rate_source):
            if reading.unit == STEPS and self.unit != STEPS:
                return  # never back from samples or tokens to bare steps
            self.rates = array("d")
            self._recent_rates.clear()
            self.rate_samples = self.rate_seconds = 0.0
            self.rate_counted = 0
        self.unit = reading.unit
        self.rates.append(reading.samples_per_sec)
        self._recent_rates.add(reading.samples_per_sec)
        self.rate_source = reading.source
        if reading.samples is not None and reading.seconds:  # a bar's clock may run on without progress: 0 samples
            # The run's first window holds the start (compile, first batch), which the probe
            # and a step timer do not count; a tool's own counter does (a tqdm bar's count
            # over its elapsed clock), and the figure is then counted as the tool counts it.
            # A series that starts afresh later (the probe taking over) has no start in it.
            if self._started or reading.source in COUNTED_FROM_START:
                self.rate_samples += reading.samples
                self.rate_seconds += reading.seconds
            self.rate_counted += 1
            self._started = True

    # -- Result ----------------------------------------------------------------
    def _window(self) -> tuple[str, dict[int, _GpuWindow], _HostWindow]:
        """The window the summary's statistics cover (see the module docstring)."""
        for name, gpus, host in (
            (MEASURE, self.gpus_measure, self.host_measure),
            ("training", self.gpus_train, self.host_train),
            ("gpu-active", self.gpus_active, self.host_active),
        ):
            if name == "gpu-active" and self.phases.first_progress is not None:
                continue  # a job that made progress is judged by its training phase
            if gpus or host.cpu:
                return name, gpus, host
        return "all", self.gpus_all, self.host_all

    def build(self) -> Summary:
        window, gpus, host = self._window()
        throughput = self._throughput()
        energy = [e for e in (g.energy() for g in gpus.values()) if e]
        joules = sum(e[0] for e in energy)
        seconds = max((e[1] for e in energy), default=0.0)
        rate = throughput.run_figure
        workload = None
        if self.workload is not None and self.workload.fields:
            workload = RunSettings.from_dict({k: v for k, v in self.workload.fields.items() if k not in ("event", "v")})
        return Summary(
            window=window,
            duration_s=round((self.last_t or 0.0) - (self.first_t or 0.0), 3),
            samples=self.samples,
            outcome=self.outcome,
            throughput=throughput,
            gpus=[gpus[i].build(i) for i in sorted(gpus)],
            host=host.build(),
            energy_j=round(joules, 3) if energy else None,
            energy_per_sample_j=round(joules / seconds / rate, 6) if energy and rate else None,
            # Lost GPUs outside the window still deserve a mention.
            lost_gpus=sorted(i for i, g in self.gpus_all.items() if g.lost),
            phases=self.phases.build() or None,
            workload=workload,
            notes=self._notes(throughput) or None,
        )

    def _notes(self, throughput: ThroughputSummary) -> list[str]:
        """Why the summary lacks what a run usually has, where the reason is not plain."""
        if self.attach_pid is not None and not throughput.readings and throughput.reported is None:
            return [
                "no throughput: a job watched with --pid tells gputui nothing of its progress (no output to read, no probe),"
                " so it has no phases either; run it as `gputui -- COMMAND` for both"
            ]
        return []

    def counted(self, event: Event) -> Event:
        """``event`` added to the summary, and returned as the other observers get it: a
        live throughput reading carries the running median, itself included, so that no
        observer depends on hearing it after this builder."""
        self.on_event(event)
        if ev.is_live_reading(event):
            return dataclasses.replace(event, running_median=self.recent_median())
        return event

    def recent_median(self) -> float | None:
        """Median of the latest RECENT_READINGS measured readings, kept in order as they
        come: every live reading asks (ten a second from gputui's workloads)."""
        return self._recent_rates.median

    def _throughput(self) -> ThroughputSummary:
        stats = spread(self.rates)
        median = stats.get("median")
        mean = self.rate_samples / self.rate_seconds if self.rate_seconds > 0 and self.rate_samples > 0 else None  # samples over time, not a mean of rates
        # A job of the user's own, whose readings said how many samples in how many seconds,
        # is known by its mean over the training phase (the first window, the start-up, left
        # out): how its own tools count, and how the bill does.  gputui's own workloads keep
        # the median of their timed windows.
        mean_counts = mean is not None and self.rate_source != WORKLOAD_SOURCE
        figure = mean if mean_counts else median
        # in the run's unit, else the last one the tool gave
        reported = self._reported_by_unit.get(self.unit) or next(reversed(self._reported_by_unit.values()), None)
        return ThroughputSummary(
            readings=len(self.rates),
            unit=self.unit,
            source=self.rate_source or None,
            median=median,
            p5=stats.get("p5"),
            p95=stats.get("p95"),
            mean=mean,
            figure=figure,
            bursty=True if mean_counts and median is not None and mean is not None and mean < BURSTY_BELOW * median else None,
            reported=Reported.of(reported) if reported else None,
            world_size=self.world_size or None,
            ranks=self._ranks() if self.world_size else None,
            scaling=self._scaling(median) if self.world_size and self.baseline else None,
        )

    def _ranks(self) -> list[RankRate]:
        """Each rank's median rate."""
        return [RankRate(rank=rank, median=spread(rates).get("median"), readings=len(rates)) for rank, rates in sorted(self.rank_rates.items())]

    def _scaling(self, total: float | None) -> Scaling | None:
        """The scaling against the one-GPU baseline."""
        if self.baseline is None:
            return None
        single = self.baseline.samples_per_sec
        efficiency = scaling_efficiency(total, self.world_size, single)
        return Scaling(
            baseline_samples_per_sec=single, baseline_source=self.baseline.source, efficiency=round(efficiency, 4) if efficiency is not None else None
        )
