"""What the dashboard knows, folded from session news; no Textual here.

The app applies each batch of news as it arrives (cheap: appends and counters) and
bumps a version per section; widgets redraw on the app's refresh timer only when
their section's version moved.  History lives in bounded deques and a binned
throughput series, so memory stays flat over a 24-hour run.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gputui import fmt
from gputui.model import GpuInfo, GpuProcess, GpuSample, HostSample, Sample, Throughput
from gputui.presets.preset import Preset, Reference
from gputui.protocol import WARMUP, JsonObject
from gputui.record import events as ev
from gputui.record.events import Event
from gputui.record.history import outcome_word
from gputui.record.schema import Header, Summary
from gputui.run.outcome import Outcome
from gputui.session import ranks
from gputui.view.charts import Bin
from gputui.view.session_news import (
    EventArrived,
    HeaderArrived,
    News,
    Note,
    RecordingStarted,
    RunKept,
    RunStarted,
    SampleArrived,
    SessionEnded,
    SummaryArrived,
)
from gputui.view.supervisor import SessionTicket

if TYPE_CHECKING:
    from gputui.live.registry import LiveRun
    from gputui.record.history import KeptRun

HISTORY = 240  # samples per sparkline series: 4 minutes at 1 s, more than the widest panel shows
LOG_LINES = 10_000  # the output pane's scrollable history
MAX_BINS = 1024  # throughput bins per run; pairs merge beyond this
FIRST_BIN_S = 0.25

# Sections the widgets watch.
HEADER, GPUS, HOST, THROUGHPUT, RUNS, LOG, FINDINGS, STATUS = ("header", "gpus", "host", "throughput", "runs", "log", "findings", "status")
SECTIONS = (HEADER, GPUS, HOST, THROUGHPUT, RUNS, LOG, FINDINGS, STATUS)


class GpuHistory:
    """One GPU: its facts, latest sample and recent series for sparklines."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.info: GpuInfo | None = None
        self.latest: GpuSample | None = None
        self.samples = 0  # ever added: where the series' newest values fall on a paged sparkline
        self.util: deque[float | None] = deque(maxlen=HISTORY)  # SM active where GPM exists, else util
        self.temp: deque[float | None] = deque(maxlen=HISTORY)
        self.power: deque[float | None] = deque(maxlen=HISTORY)
        self.processes: list[GpuProcess] | None = None  # the newest list read (about once a second)

    def add(self, sample: GpuSample) -> None:
        self.latest = sample
        self.samples += 1
        if sample.processes is not None:
            self.processes = sample.processes
        if sample.lost:
            for series in (self.util, self.temp, self.power):
                series.append(None)
            return
        # SM activity is the honest number where GPM exists ("util" reads 100% on a GPU
        # doing little); one series never mixes the two.
        gpm = self.info is not None and self.info.gpm_supported
        self.util.append(sample.sm_active if gpm else sample.util_gpu)
        self.temp.append(sample.temp_c)
        self.power.append(sample.power_w)


class ThroughputSeries:
    """Readings binned by time; bins double in width past MAX_BINS (flat memory)."""

    def __init__(self, bin_s: float = FIRST_BIN_S, max_bins: int = MAX_BINS) -> None:
        self.bin_s = bin_s
        self.max_bins = max_bins
        self._bins: dict[int, list[Any]] = {}  # index -> [sum, count, warm, median]
        self.readings = 0
        self.last_t = 0.0

    def add(self, t: float, rate: float, warmup: bool, median: float | None) -> None:
        self.readings += 1
        self.last_t = max(self.last_t, t)
        slot = self._bins.setdefault(int(t // self.bin_s), [0.0, 0, False, None])
        slot[0] += rate
        slot[1] += 1
        slot[2] = slot[2] or warmup
        if median is not None:
            slot[3] = median
        if len(self._bins) > self.max_bins:
            self._merge()

    def _merge(self) -> None:
        merged: dict[int, list[Any]] = {}
        for index in sorted(self._bins):
            total, count, warm, median = self._bins[index]
            slot = merged.setdefault(index // 2, [0.0, 0, False, None])
            slot[0] += total
            slot[1] += count
            slot[2] = slot[2] or warm
            slot[3] = median if median is not None else slot[3]
        self._bins = merged
        self.bin_s *= 2

    def bins(self) -> list[Bin]:
        return [Bin(i * self.bin_s, (i + 1) * self.bin_s, s[0] / s[1], s[2], s[3]) for i, s in sorted(self._bins.items())]


@dataclass
class RunView:
    """One preset run of this dashboard session, live or ended."""

    ticket: SessionTicket
    series: ThroughputSeries = field(default_factory=ThroughputSeries)
    phase: str | None = None
    current: float | None = None  # latest reading, in ``unit``s per second
    unit: str | None = None  # what the readings count (samples, tokens, steps)
    median: float | None = None  # running median of the measured readings
    reported: float | None = None  # the tool's own final figure
    workload: JsonObject | None = None  # the workload event's fields
    pid: int | None = None
    last_t: float = 0.0
    stopping: str | None = None
    outcome: Outcome | None = None
    summary: Summary | None = None
    error: str | None = None
    ended: bool = False
    cut: str | None = None  # a replayed recording that ends early: why
    kept_path: Path | None = None  # its copy in the run history
    findings: dict[str, ev.Finding] = field(default_factory=dict)
    rank_rates: dict[int, float] = field(default_factory=dict)  # a data-parallel run's: each rank's latest reading
    world_size: int | None = None  # its ranks (torchrun) or replicas (MirroredStrategy)

    @property
    def preset(self) -> Preset:
        assert self.ticket.preset is not None
        return self.ticket.preset

    @property
    def number(self) -> int:
        return self.ticket.run or 0

    @property
    def label(self) -> str:
        """ "#2 resnet50" for this session's runs; a past run has no number."""
        return f"#{self.number} {self.preset.name}" if self.number else self.preset.name

    @property
    def result(self) -> float | None:
        """The figure a run is remembered by: its summary's (ThroughputSummary.run_figure), else the live median."""
        return (self.summary.figure if self.summary else None) or self.median or self.reported

    @property
    def summary_unit(self) -> str | None:
        """What the summary's throughput counts, where it says."""
        return self.summary.throughput.unit if self.summary and self.summary.throughput else None

    @property
    def outcome_word(self) -> str:
        if not self.ended:
            return "stopping" if self.stopping else "running"
        if self.error:
            return "error"
        if self.cut:
            return "cut"
        return outcome_word(self.outcome)


def speed_label(speed: float | None) -> str:
    return "max" if speed is None else f"{speed:g}x"


@dataclass
class ReplayStatus:
    """What the header shows of a replay."""

    position: float  # the recording's t shown now
    end: float
    speed: float | None  # None: as fast as it draws
    playing: bool
    cut: str | None  # the recording ends early: why
    at_end: bool = False

    def text(self) -> str:
        """REPLAY ▶ 10x 0:25/0:44"""
        mark = "▶" if self.playing else "❚❚"
        where = f"{fmt.duration(self.position)}/{fmt.duration(self.end)}"
        end = (" cut here" if self.cut else " end") if self.at_end else ""
        return f"REPLAY {mark} {speed_label(self.speed)} {where}{end}"


def _normal(name: str) -> str:
    name = name.lower()
    for noise in ("nvidia", "geforce", "tesla", "quadro"):
        name = name.replace(noise, "")
    return re.sub(r"[^a-z0-9]", "", name)


def pick_reference(preset: Preset | None, gpu_names: list[str]) -> tuple[Reference, bool] | None:
    """The preset's reference for this machine's GPU (True), else its first (False)."""
    if preset is None or not preset.reference:
        return None
    names = [_normal(n) for n in gpu_names]
    best: Reference | None = None
    for ref in preset.reference:
        key = _normal(ref.gpu)
        if not key:
            continue
        # "a10" must not match "a100": the match may not run on into more digits
        if any(re.search(re.escape(key) + r"(?![0-9])", n) for n in names):
            if best is None or len(key) > len(_normal(best.gpu)):
                best = ref
    return (best, True) if best is not None else (preset.reference[0], False)


class DashboardState:
    def __init__(self) -> None:
        self.header: Header | None = None
        self.gpus: dict[int, GpuHistory] = {}
        self.host: HostSample | None = None
        self.session: SessionTicket | None = None  # the session now running
        self.runs: list[RunView] = []
        self.log: deque[tuple[str, str]] = deque(maxlen=LOG_LINES)  # (stream, text)
        self.log_count = 0  # lines ever logged, so views can tell where the deque starts
        self._last_is_redraw = False  # the log's last line is a progress bar's, to be replaced
        self.watch_findings: dict[str, ev.Finding] = {}
        self.recording: str | None = None  # the recording's path, once one started
        self.recording_state = ""  # "on", then "done" (summary written) or "cut"
        self._recording_serial: int | None = None
        self.history: list[KeptRun] = []  # kept runs of earlier sessions, newest first
        self.live_runs: dict[Path, LiveRun] = {}  # runs going elsewhere, by their kept file (or their live copy)
        self.replay: ReplayStatus | None = None  # set while replaying a recording
        self.watched_pid: int | None = None  # --pid: the job started elsewhere being watched
        self.watched_exit: str | None = None  # ... and, once it has gone, what ended it
        self.versions: Counter[str] = Counter()

    # -- Reading ------------------------------------------------------------------
    @property
    def run(self) -> RunView | None:
        """The run on screen: the live one, else the latest."""
        return self.runs[-1] if self.runs else None

    @property
    def live_run(self) -> RunView | None:
        run = self.run
        return run if run is not None and not run.ended else None

    def idle_note(self) -> str:
        """What the run's panels say while no run has started here."""
        if self.watched_pid is None:
            return "No run yet: pick a preset and press Enter."
        if self.watched_exit:
            return f"{self.watched_exit}; watching the machine. Pick a preset and press Enter to run one."
        return (
            f"Watching pid {self.watched_pid}: its GPUs, CPU and processes are followed; its throughput and output are not read (they go to its own terminal)."
        )

    def gpu_names(self) -> list[str]:
        return [g.name for g in self.header.gpu_list if g.name] if self.header else []

    def findings(self) -> dict[str, ev.Finding]:
        """The live run's findings (the latest run's when idle), then watching's."""
        own = self.run.findings if self.run else {}
        return {**self.watch_findings, **own}

    def open_findings(self) -> list[ev.Finding]:
        rank: dict[str | None, int] = {"critical": 0, "warning": 1, "info": 2}
        found = [f for f in self.findings().values() if f.state == "open"]
        return sorted(found, key=lambda f: (rank.get(f.severity, 3), f.since or 0))

    # -- A data-parallel run (gputui.session.ranks) ------------------------------------------
    def rank_of_gpu(self) -> dict[int, int]:
        """GPU index -> the rank driving it, while a data-parallel run goes; {} otherwise."""
        run = self.live_run
        if run is None or not run.rank_rates:
            return {}
        order = ranks.rank_gpus(self.header)
        return {gpu: rank for rank, gpu in enumerate(order[: run.world_size or len(order)])}

    def scaling_efficiency(self) -> float | None:
        """The live run's latest total against N times its one-GPU baseline."""
        run = self.live_run
        if run is None:
            return None
        return ranks.live_efficiency(run.current, run.world_size, ranks.header_baseline_rate(self.header))

    def straggler_gpus(self) -> set[int]:
        return ranks.straggler_gpus(self.open_findings(), ranks.rank_gpus(self.header))

    def touch(self, *sections: str) -> None:
        for section in sections:
            self.versions[section] += 1

    # -- Writing ------------------------------------------------------------------
    def session_started(self, ticket: SessionTicket) -> RunView | None:
        self.session = ticket
        self.touch(STATUS)
        if ticket.attach_pid is not None:
            self.watched_pid, self.watched_exit = ticket.attach_pid, None
            self.touch(THROUGHPUT, LOG)
        if not ticket.is_run:
            return None
        run = RunView(ticket=ticket)
        self.runs.append(run)
        self.note(f"── run #{run.number}: {run.preset.name} ──" if run.number else f"── {run.preset.name} ──")
        self.touch(RUNS, THROUGHPUT, FINDINGS)
        return run

    def note(self, text: str) -> None:
        self.log_line("note", text)

    def log_line(self, stream: str, text: str, redraw: bool = False) -> None:
        """One line of the log; a ``redraw`` (a bar's '\r'-ended state) is replaced by
        the output's next line, as on a terminal."""
        if self._last_is_redraw and stream != "note" and self.log:
            self.log[-1] = (stream, text)
        else:
            self.log.append((stream, text))
            self.log_count += 1
        self._last_is_redraw = redraw
        self.touch(LOG)

    def apply(self, ticket: SessionTicket, items: list[News]) -> list[RunView]:
        """Fold a batch of news in; returns runs that ended in this batch."""
        run = self._run_for(ticket)
        ended: list[RunView] = []
        for item in items:
            match item:
                case SampleArrived(sample):
                    self._sample(sample)
                case RunStarted():
                    run = self.session_started(ticket)
                case Note(text):
                    self.note(text)
                case RunKept(path) if run is not None:
                    run.kept_path = Path(path)
                case RecordingStarted(path):
                    self.recording, self._recording_serial, self.recording_state = path, ticket.serial, "on"
                    self.touch(STATUS)
                case EventArrived(event, running_median):
                    self._event(ticket, run, event, running_median)
                case HeaderArrived(header):
                    self.header = header
                    self._gpu_infos(header.gpu_list)
                    self.touch(HEADER, GPUS)
                case SummaryArrived(summary) if run is not None:
                    run.summary = summary
                    self.touch(RUNS, THROUGHPUT)
                case SessionEnded(error):
                    if self.recording and ticket.serial == self._recording_serial:
                        self.recording_state = "cut" if error else "done"
                        self._recording_serial = None
                    if self.session == ticket:
                        self.session = None
                        self.touch(STATUS)
                    if error:
                        self.note(f"session failed: {error}")
                    if run is not None and not run.ended:
                        run.ended, run.error = True, error
                        self.note(f"── run {run.label}: {run.outcome_word} ──")
                        self.touch(RUNS, THROUGHPUT, STATUS, FINDINGS)
                        ended.append(run)
        return ended

    def recording_cut(self, ticket: SessionTicket, reason: str) -> None:
        """A replayed recording ends here, without its summary."""
        run = self._run_for(ticket)
        self.note(f"the recording ends here: {reason}")
        if self.session == ticket:
            self.session = None
        if run is not None and not run.ended:
            run.ended, run.cut = True, reason
        self.touch(RUNS, THROUGHPUT, STATUS, FINDINGS)

    def set_history(self, runs: list[KeptRun], live: list[LiveRun] | None = None) -> None:
        self.history = runs
        self.live_runs = {run.kept_path or run.recording: run for run in live or []}
        self.touch(RUNS)

    def _run_for(self, ticket: SessionTicket) -> RunView | None:
        if not ticket.is_run:
            return None
        for run in reversed(self.runs):
            if run.ticket == ticket:
                return run
        return None

    def _gpu_infos(self, infos: list[GpuInfo]) -> None:
        for info in infos:
            self.gpus.setdefault(info.index, GpuHistory(info.index)).info = info

    def _sample(self, sample: Sample) -> None:
        for gpu in sample.gpus:
            self.gpus.setdefault(gpu.index, GpuHistory(gpu.index)).add(gpu)
        if sample.host is not None:
            self.host = sample.host
        run = self.live_run
        if run is not None and self.session == run.ticket:
            run.last_t = max(run.last_t, sample.t)
        self.touch(GPUS, HOST, STATUS)

    def _event(self, ticket: SessionTicket, run: RunView | None, event: Event, median: float | None) -> None:
        payload = event.payload
        if isinstance(payload, ev.Finding):
            findings = run.findings if run is not None else self.watch_findings
            findings[payload.id] = payload  # the views read it as the summary lists it: typed
            self.touch(FINDINGS)
            return
        if run is None:
            if isinstance(payload, ev.Stopping) and ticket.attach_pid is not None:  # the watched job is gone
                self.watched_exit = str(payload.reason or f"process {ticket.attach_pid} ended")
                self.note(f"── {self.watched_exit}: watching the machine only ──")
                self.touch(THROUGHPUT, STATUS)
            return  # watching has no output, throughput or outcome to show
        run.last_t = max(run.last_t, event.t)
        if event.kind == ev.THROUGHPUT and isinstance(payload, Throughput):
            if payload.final:
                run.reported = payload.samples_per_sec
            else:
                rate = float(payload.samples_per_sec)
                if run.unit not in (None, payload.unit):
                    run.series = ThroughputSeries()  # a new unit (the batch size became known): a new chart
                run.unit = payload.unit
                run.current = rate
                run.median = median if median is not None else run.median
                phase = payload.phase or run.phase
                run.series.add(event.t, rate, phase == WARMUP, run.median)
            self.touch(THROUGHPUT)
        elif event.kind == ev.RANK_THROUGHPUT and isinstance(payload, Throughput):
            if not payload.final and payload.rank is not None:
                run.rank_rates[payload.rank] = float(payload.samples_per_sec)
            run.world_size = ranks.world_size_of(ev.payload_fields(payload)) or run.world_size
            self.touch(GPUS)
        elif isinstance(payload, ev.Output):
            self.log_line(payload.stream or "stdout", str(payload.text or ""), redraw=bool(payload.progress))
        elif isinstance(payload, ev.PhaseChange):
            run.phase = payload.phase
            self.touch(THROUGHPUT, STATUS)
        elif isinstance(payload, ev.Started):
            run.pid = payload.pid
            self.note("$ " + shlex.join(payload.command or []))  # as a shell would take it back
        elif isinstance(payload, ev.WorkloadInfo):
            run.workload = dict(payload.fields)
            run.world_size = ranks.world_size_of(run.workload) or run.world_size
            self.touch(THROUGHPUT)
        elif isinstance(payload, ev.Result):
            if payload.samples_per_sec is not None:
                run.reported = payload.samples_per_sec
                self.touch(THROUGHPUT)
        elif isinstance(payload, ev.Oom):
            self.note(f"out of memory: {payload.message or ''}")
        elif isinstance(payload, ev.Stopping):
            run.stopping = payload.reason or "stopping"
            self.touch(STATUS, RUNS)
        elif isinstance(payload, Outcome):
            run.outcome = payload
            if payload.message:
                self.note(payload.message)
            self.touch(RUNS)
