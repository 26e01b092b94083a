"""The headless face: a compact line on stderr about once a second, a summary table at the end.

stderr may vanish under us (the SSH session dropped, nohup without a log, ``| head``):
the lines go through :mod:`gputui.console`, whose first failed write turns the printing
off rather than the run.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TextIO

from gputui import console, fmt
from gputui.model import BURSTY_NOTE, HostSample, Sample, Throughput
from gputui.record import events as ev
from gputui.record.events import Event
from gputui.record.observer import Observer
from gputui.record.schema import Header, PresetRecord, Stats, Summary, ThroughputSummary
from gputui.run.outcome import Outcome
from gputui.run.throughput import CLAIM_SOURCE
from gputui.session.pass_through import PassThrough
from gputui.session.summary import SummaryBuilder

PRINT_EVERY_S = 0.95  # a line about once a second (a 1 s sampler's ticks jitter a little)
# Off a terminal each line stays in a log for good: a slower pace keeps the command's own
# lines readable among them.
PRINT_EVERY_OFF_TERMINAL_S = 10.0
STALE_READING_S = 10.0  # a live rate older than this is left out of the live line


class ProgressPrinter(Observer):
    """The live line, gputui's messages, and the summary at the end.  With a terminal
    ``face``, the live line is its status row and the messages go between the
    command's lines; ``live=False`` (--quiet) leaves the live line and the messages
    out, not the summary."""

    def __init__(
        self,
        summary: SummaryBuilder,
        stream: TextIO | None = None,
        *,
        face: PassThrough | None = None,
        live: bool = True,
        every_s: float = PRINT_EVERY_S,
    ) -> None:
        self._summary = summary
        self._out = console.stderr if stream is None else console.LineWriter(stream)
        self._face = face if face is not None and face.messages_here else None
        self._status = face if face is not None and face.is_terminal else None
        self._live = live
        self._every_s = every_s
        self._rate: float | None = None
        self._rate_t = 0.0  # when the newest reading came
        self._unit: str | None = None
        self._phase: str | None = None
        self._findings: dict[str, ev.Finding] = {}  # open findings by id
        self._host: HostSample | None = None  # the newest host part (not every sample has one)
        self._printed_t: float | None = None

    def _print(self, text: str) -> None:
        if self._face is not None:
            self._face.message(text)
        else:
            self._out.line(text)

    def _say(self, text: str) -> None:
        """A message of the live kind: left out with the live line."""
        if self._live:
            self._print(text)

    def on_header(self, header: Header) -> None:
        if not self._live:
            return
        gpus = header.gpu_list
        if gpus:
            names = ", ".join(f"{g.index}: {fmt.printable(g.name)}" for g in gpus)
            self._print(f"gputui: {len(gpus)} GPU(s) [{names}], driver {header.driver_version}, CUDA {header.cuda_version}")
        else:
            self._print(f"gputui: no GPU: {fmt.printable(header.gpu_unavailable_reason)}")
        if header.command:
            self._print("gputui: running " + " ".join(fmt.printable(arg) for arg in header.command) + fmt.printable(_origin(header.preset)))

    def on_event(self, event: Event) -> None:
        payload = event.payload
        if event.kind == ev.THROUGHPUT and isinstance(payload, Throughput) and not payload.final:
            self._rate = payload.samples_per_sec
            self._rate_t = event.t
            self._unit = payload.unit
            self._phase = payload.phase or self._phase
        elif isinstance(payload, (Outcome, ev.Stopping)):
            # The message may be the run's own last stderr line: user text.
            said = payload.message if isinstance(payload, Outcome) else payload.reason
            self._say(f"gputui: {event.kind}: {fmt.printable(said)}")
        elif isinstance(payload, ev.Oom):
            self._say(f"gputui: out of memory: {fmt.printable(payload.message or '')}")
        elif isinstance(payload, ev.Finding):
            self._on_finding(payload)

    def _on_finding(self, finding: ev.Finding) -> None:
        """Say when a finding opens, changes severity or closes; the final updates at
        the end of a run repeat nothing."""
        known = self._findings.get(finding.id)
        if finding.state == "closed":
            self._findings.pop(finding.id, None)
            self._say(f"gputui: finding cleared: {fmt.printable(finding.title)} ({fmt.duration((finding.until or 0) - (finding.since or 0))})")
        elif known is None or known.severity != finding.severity:
            self._findings[finding.id] = finding
            self._say(f"gputui: finding [{finding.severity}]: {fmt.printable(finding.title)}")
        else:
            self._findings[finding.id] = finding

    def on_sample(self, sample: Sample) -> None:
        if sample.host is not None:
            self._host = sample.host
        if not self._live:
            return
        # At a sub-second interval a line per sample would flood a log: one a second.
        every = PRINT_EVERY_S if self._status is not None else self._every_s
        if self._printed_t is not None and sample.t - self._printed_t < every:
            return
        self._printed_t = sample.t
        shown = sample if sample.host is not None else replace(sample, host=self._host)
        # A rate nobody has repeated for a while is no longer the run's: its idle tail
        # would otherwise go on showing the last training figure.
        rate = self._rate if sample.t - self._rate_t <= STALE_READING_S else None
        line = progress_line(shown, self._phase, rate, self._summary, list(self._findings.values()), self._unit)
        if self._status is not None:
            self._status.status(line)
        else:
            self._out.line(line)

    def on_summary(self, summary: Summary) -> None:
        for line in summary_table(summary):
            self._print(line)


def _origin(preset: PresetRecord | None) -> str:
    """Where a preset that replaces a built-in of the same name comes from: a
    ./presets.toml in a shared folder must not change what `smoke` runs unseen."""
    if preset is None or not preset.overrides:
        return ""
    return f" (preset {preset.name!r} from {preset.source}, which overrides the built-in)"


def finding_label(finding: ev.Finding) -> str:
    """A finding in a few characters: its kind, and its GPU where it has one."""
    label = finding.kind.replace("_", "-")
    gpu = (finding.evidence or {}).get("gpu")
    return f"{label} GPU{gpu}" if gpu is not None else label


def progress_line(
    sample: Sample, phase: str | None, current: float | None, summary: SummaryBuilder, findings: list[ev.Finding] | None = None, unit: str | None = None
) -> str:
    parts = [f"{sample.t:7.1f}s"]
    if current is not None:
        median = summary.recent_median()
        parts.append(f"{phase or 'run'} {fmt.rate_in(current, unit)} (median {fmt.rate(median)})")
    for gpu in sample.gpus:
        if gpu.lost:
            parts.append(f"GPU{gpu.index} LOST")
            continue
        text = f"GPU{gpu.index} {fmt.pct(gpu.util_gpu)}"
        if gpu.sm_active is not None:
            text += f" SM {fmt.pct(gpu.sm_active)}"
        text += f" {fmt.num(gpu.temp_c, '°C')} {fmt.num(gpu.power_w, 'W')} {fmt.gib(gpu.memory_used)}/{fmt.gib(gpu.memory_total)}GiB"
        active = [r for r in (gpu.throttle_reasons or []) if r != "GpuIdle"]
        if active:
            text += " [" + ",".join(active) + "]"
        parts.append(text)
    host = sample.host
    if host is not None:
        text = f"CPU {fmt.pct(host.cpu_percent)}"
        if host.processes:
            workers = [p for p in host.processes if p.role == "worker"]
            run_cpu = sum(p.cpu_percent or 0 for p in host.processes)
            text += f" run {run_cpu:.0f}%"
            if workers:
                text += f" ({len(workers)} workers)"
        parts.append(text)
    if findings:
        parts.append("! " + ", ".join(finding_label(f) for f in findings))
    return " | ".join(parts)


def rank_rows(tp: ThroughputSummary, device: str | None = None) -> list[tuple[str, str]]:
    """A data-parallel run's ranks and its scaling, as (label, value) rows; ``device`` is
    the workload's ("cpu": gloo ranks on the host, counted as ranks rather than GPUs)."""
    rows = [(f"rank {r.rank} median", fmt.rate_in(r.median, tp.unit)) for r in tp.ranks or []]
    scaling = tp.scaling
    if scaling and scaling.efficiency is not None:
        unit = "rank" if device == "cpu" else "GPU"
        rows.append(
            (
                f"scaling on {tp.world_size} {unit}{'' if tp.world_size == 1 else 's'}",
                f"{scaling.efficiency:.0%} of {tp.world_size}× {fmt.rate_in(scaling.baseline_samples_per_sec, tp.unit)}"
                f" on one ({fmt.printable(scaling.baseline_source)})",
            )
        )
    return rows


def _window_note(summary: Summary) -> str:
    """Which samples the GPU medians cover, where that is not the whole run."""
    return f" ({summary.window})" if summary.window in ("training", "gpu-active") else ""


def _median(stats: Stats | None) -> float | None:
    return stats.median if stats else None


def summary_table(summary: Summary) -> list[str]:
    rows: list[tuple[str, str]] = []
    tp = summary.throughput or ThroughputSummary()
    if tp.median is not None:
        readings = f"({tp.readings} readings, {tp.source})"
        if tp.mean_is_figure:  # a job of the user's: counted the way its own tools count
            why = f": {BURSTY_NOTE}" if tp.is_bursty else ""
            rows.append(("throughput", f"{fmt.rate_in(tp.mean, tp.unit)}, {tp.unit_name} over seconds of training{why}"))
            rows.append(("throughput median", f"{fmt.rate_in(tp.median, tp.unit)} {readings}"))
        else:
            rows.append(("throughput median", f"{fmt.rate_in(tp.median, tp.unit)} {readings}"))
        rows.append(("throughput p5 / p95", f"{fmt.rate(tp.p5)} / {fmt.rate(tp.p95)}"))
    if tp.reported:
        claim = " (the script's own claim, not measured by gputui)" if tp.reported.source == CLAIM_SOURCE else ""
        rows.append(("reported by the run", fmt.rate_in(tp.reported.samples_per_sec, tp.reported.unit) + claim))
    if summary.phases:
        rows.append(("phases", fmt.phase_line([(p.phase, p.duration_s) for p in summary.phases])))
    rows += rank_rows(tp, summary.workload.device if summary.workload else None)
    for gpu in summary.gpus:
        name = f"GPU{gpu.index}"
        rows.append((f"{name} util / SM active", f"{fmt.pct(_median(gpu.util_gpu))} / {fmt.pct(_median(gpu.sm_active))} median{_window_note(summary)}"))
        rows.append((f"{name} temp / power", f"{fmt.num(gpu.temp_c.max if gpu.temp_c else None, '°C')} max / {fmt.num(_median(gpu.power_w), 'W')} median"))
        rows.append((f"{name} peak memory", f"{fmt.gib(gpu.peak_memory_used)} GiB"))
        throttled = {k: v for k, v in (gpu.throttle_share or {}).items() if k != "GpuIdle" and v > 0}
        if throttled:
            rows.append((f"{name} throttled", ", ".join(f"{k} {v:.0%}" for k, v in throttled.items())))
    if summary.energy_per_sample_j is not None:
        rows.append(("energy per sample", f"{summary.energy_per_sample_j:.4f} J"))
    outcome = summary.outcome
    if outcome:
        rows.append(("outcome", fmt.printable(outcome.message or outcome.kind)))
    rows.append(("duration", fmt.duration(summary.duration_s)))
    for finding in summary.findings or []:
        span = f"{fmt.duration(finding.since)}-{fmt.duration(finding.until)}"
        rows.append((f"finding ({finding.severity})", f"{fmt.printable(finding.title)} [{span}]"))
    rows += [("note", fmt.printable(note)) for note in summary.notes or []]
    width = max(len(label) for label, _ in rows)
    return ["", "gputui summary"] + [f"  {label:<{width}}  {value}" for label, value in rows]
