"""The headless face: a compact line on stderr about once a second, a summary table at the end.

stderr may vanish under us (the SSH session dropped, nohup without a log, ``| head``):
the lines go through :mod:`gputui.console`, whose first failed write turns the printing
off rather than the run.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, TextIO

from gputui import console, fmt
from gputui.model import BURSTY_NOTE, HostSample, Sample, Throughput, is_bursty, mean_is_figure
from gputui.record import events as ev
from gputui.record.events import Event, Observer
from gputui.run.outcome import Outcome
from gputui.session.summary import SummaryBuilder

PRINT_EVERY_S = 0.95  # a line about once a second (a 1 s sampler's ticks jitter a little)


class ProgressPrinter(Observer):
    def __init__(self, summary: SummaryBuilder, stream: TextIO | None = None) -> None:
        self._summary = summary
        self._out = console.stderr if stream is None else console.LineWriter(stream)
        self._rate: float | None = None
        self._unit: str | None = None
        self._phase: str | None = None
        self._findings: dict[str, ev.Finding] = {}  # open findings by id
        self._host: HostSample | None = None  # the newest host part (not every sample has one)
        self._printed_t: float | None = None

    def _print(self, text: str) -> None:
        self._out.line(text)

    def on_header(self, header: dict[str, Any]) -> None:
        gpus = header.get("gpus") or []
        if gpus:
            names = ", ".join(f"{g['index']}: {fmt.printable(g['name'])}" for g in gpus)
            self._print(f"gputui: {len(gpus)} GPU(s) [{names}], driver {header.get('driver_version')}, CUDA {header.get('cuda_version')}")
        else:
            self._print(f"gputui: no GPU: {fmt.printable(header.get('gpu_unavailable_reason'))}")
        if header.get("command"):
            self._print("gputui: running " + " ".join(fmt.printable(arg) for arg in header["command"]) + fmt.printable(_origin(header.get("preset") or {})))

    def on_event(self, event: Event) -> None:
        payload = event.payload
        if event.kind == ev.THROUGHPUT and isinstance(payload, Throughput) and not payload.final:
            self._rate = payload.samples_per_sec
            self._unit = payload.unit
            self._phase = payload.phase or self._phase
        elif isinstance(payload, (Outcome, ev.Stopping)):
            # The message may be the run's own last stderr line: user text.
            said = payload.message if isinstance(payload, Outcome) else payload.reason
            self._print(f"gputui: {event.kind}: {fmt.printable(said)}")
        elif isinstance(payload, ev.Oom):
            self._print(f"gputui: out of memory: {fmt.printable(payload.message or '')}")
        elif isinstance(payload, ev.Finding):
            self._on_finding(payload)

    def _on_finding(self, finding: ev.Finding) -> None:
        """Say when a finding opens, changes severity or closes; the final updates at
        the end of a run repeat nothing."""
        known = self._findings.get(finding.id)
        if finding.state == "closed":
            self._findings.pop(finding.id, None)
            self._print(f"gputui: finding cleared: {fmt.printable(finding.title)} ({fmt.duration((finding.until or 0) - (finding.since or 0))})")
        elif known is None or known.severity != finding.severity:
            self._findings[finding.id] = finding
            self._print(f"gputui: finding [{finding.severity}]: {fmt.printable(finding.title)}")
        else:
            self._findings[finding.id] = finding

    def on_sample(self, sample: Sample) -> None:
        if sample.host is not None:
            self._host = sample.host
        # At a sub-second interval a line per sample would flood a log: one a second.
        if self._printed_t is not None and sample.t - self._printed_t < PRINT_EVERY_S:
            return
        self._printed_t = sample.t
        shown = sample if sample.host is not None else replace(sample, host=self._host)
        self._print(progress_line(shown, self._phase, self._rate, self._summary, list(self._findings.values()), self._unit))

    def on_summary(self, summary: dict[str, Any]) -> None:
        for line in summary_table(summary):
            self._print(line)


def _origin(preset: dict[str, Any]) -> str:
    """Where a preset that replaces a built-in of the same name comes from: a
    ./presets.toml in a shared folder must not change what `smoke` runs unseen."""
    if not preset.get("overrides"):
        return ""
    return f" (preset {preset.get('name')!r} from {preset.get('source')}, which overrides the built-in)"


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


def rank_rows(tp: dict[str, Any], device: str | None = None) -> list[tuple[str, str]]:
    """A data-parallel run's ranks and its scaling, as (label, value) rows; ``device`` is
    the workload's ("cpu": gloo ranks on the host, counted as ranks rather than GPUs)."""
    rows = [(f"rank {r['rank']} median", fmt.rate_in(r.get("median"), tp.get("unit"))) for r in tp.get("ranks") or []]
    scaling = tp.get("scaling")
    if scaling and scaling.get("efficiency") is not None:
        unit = "rank" if device == "cpu" else "GPU"
        rows.append(
            (
                f"scaling on {tp.get('world_size')} {unit}{'' if tp.get('world_size') == 1 else 's'}",
                f"{scaling['efficiency']:.0%} of {tp.get('world_size')}× {fmt.rate_in(scaling.get('baseline_samples_per_sec'), tp.get('unit'))}"
                f" on one ({fmt.printable(scaling.get('baseline_source'))})",
            )
        )
    return rows


def _window_note(summary: dict[str, Any]) -> str:
    """Which samples the GPU medians cover, where that is not the whole run."""
    window = summary.get("window")
    return f" ({window})" if window in ("training", "gpu-active") else ""


def summary_table(summary: dict[str, Any]) -> list[str]:
    rows: list[tuple[str, str]] = []
    tp = summary.get("throughput") or {}
    if tp.get("median") is not None:
        readings = f"({tp.get('readings')} readings, {tp.get('source')})"
        if mean_is_figure(tp):  # a job of the user's: counted the way its own tools count
            why = f": {BURSTY_NOTE}" if is_bursty(tp) else ""
            rows.append(("throughput", f"{fmt.rate_in(tp['mean'], tp.get('unit'))}, samples over seconds of training{why}"))
            rows.append(("throughput median", f"{fmt.rate_in(tp['median'], tp.get('unit'))} {readings}"))
        else:
            rows.append(("throughput median", f"{fmt.rate_in(tp['median'], tp.get('unit'))} {readings}"))
        rows.append(("throughput p5 / p95", f"{fmt.rate(tp.get('p5'))} / {fmt.rate(tp.get('p95'))}"))
    if tp.get("reported"):
        reported = tp["reported"]
        rows.append(("reported by the run", fmt.rate_in(reported.get("samples_per_sec"), reported.get("unit"))))
    phases = summary.get("phases") or []
    if phases:
        rows.append(("phases", fmt.phase_line(phases)))
    rows += rank_rows(tp, (summary.get("workload") or {}).get("device"))
    for gpu in summary.get("gpus", []):
        name = f"GPU{gpu['index']}"
        util = gpu.get("util_gpu") or {}
        sm = gpu.get("sm_active") or {}
        temp = gpu.get("temp_c") or {}
        power = gpu.get("power_w") or {}
        rows.append((f"{name} util / SM active", f"{fmt.pct(util.get('median'))} / {fmt.pct(sm.get('median'))} median{_window_note(summary)}"))
        rows.append((f"{name} temp / power", f"{fmt.num(temp.get('max'), '°C')} max / {fmt.num(power.get('median'), 'W')} median"))
        rows.append((f"{name} peak memory", f"{fmt.gib(gpu.get('peak_memory_used'))} GiB"))
        throttled = {k: v for k, v in (gpu.get("throttle_share") or {}).items() if k != "GpuIdle" and v > 0}
        if throttled:
            rows.append((f"{name} throttled", ", ".join(f"{k} {v:.0%}" for k, v in throttled.items())))
    if summary.get("energy_per_sample_j") is not None:
        rows.append(("energy per sample", f"{summary['energy_per_sample_j']:.4f} J"))
    outcome = summary.get("outcome")
    if outcome:
        rows.append(("outcome", fmt.printable(outcome.get("message") or outcome.get("kind"))))
    rows.append(("duration", fmt.duration(summary.get("duration_s"))))
    for finding in summary.get("findings") or []:
        span = f"{fmt.duration(finding.get('since'))}-{fmt.duration(finding.get('until'))}"
        rows.append((f"finding ({finding.get('severity')})", f"{fmt.printable(finding.get('title'))} [{span}]"))
    width = max(len(label) for label, _ in rows)
    return ["", "gputui summary"] + [f"  {label:<{width}}  {value}" for label, value in rows]
