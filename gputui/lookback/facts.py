"""The facts a report shows and a comparison lines up, taken from one recording.

Numbers stay numbers here; ``fmt`` turns them into text where they are shown.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from gputui import fmt
from gputui.lookback.load import is_check, measured_rates, recorded_findings, run_summary
from gputui.record import events as ev
from gputui.record.recording import Recording, recording_stem
from gputui.record.schema import Header, PhaseSpan, Summary, ThroughputSummary


@dataclass
class ReferenceFact:
    """A published figure for the preset (``header.preset.reference``)."""

    gpu: str
    samples_per_sec: float
    source: str
    ratio: float | None  # this run's figure (ThroughputSummary.run_figure) over the published one
    same_gpu: bool  # the reference was measured on this run's GPU model


@dataclass
class RunFacts:
    label: str  # the file's name without .jsonl or .jsonl.gz
    machine: str
    gpu: str
    gpu_name: str | None
    preset: str | None
    command: str | None
    outcome: str
    ok: bool | None
    cut: str | None
    check: bool
    throughput: ThroughputSummary  # the summary's
    rates: list[float]  # the measured readings
    energy_per_sample_j: float | None
    price_per_hour: float | None
    cost_per_million: float | None  # USD per million samples at the run's figure
    peak_vram_workload: int | None  # bytes, the workload's own peak (its result line)
    peak_vram_source: str | None
    peak_vram_nvml: dict[int, int]  # GPU index -> bytes used at the peak sample
    throttle: dict[int, dict[str, float]]  # GPU index -> reason -> share of samples; only GPUs sampled
    findings: list[ev.Finding]
    findings_replayed: bool
    references: list[ReferenceFact] = field(default_factory=list)
    window: str = "all"
    unit: str = "samples"  # what the throughput counts (gputui.model.UNITS)
    phases: list[PhaseSpan] = field(default_factory=list)  # a job's own phases (gputui.session.phases)

    @property
    def figure(self) -> float | None:
        """The figure the run is known by (ThroughputSummary.run_figure)."""
        return self.throughput.run_figure


def cost_per_million(price_per_hour: float | None, samples_per_sec: float | None) -> float | None:
    """USD for a million samples at this rate, on an instance billed by the hour."""
    if not price_per_hour or not samples_per_sec:
        return None
    return price_per_hour / 3600.0 / samples_per_sec * 1e6


def machine_of(header: Header) -> str:
    host = header.host
    if host is None:
        return "?"
    parts = [host.hostname or "?"]
    if host.cpu_model:
        cores = host.cpu_available or host.cpu_logical
        parts.append(f"{host.cpu_model}" + (f", {fmt.num(cores)} cores" if cores else ""))
    if host.memory_total:
        parts.append(f"{fmt.gib(host.memory_total)} GiB RAM")
    return "; ".join(parts)


def gpu_of(header: Header) -> tuple[str, str | None]:
    """("2× NVIDIA H200 (140.4 GiB), driver 580.95.05", "NVIDIA H200"), or why there is none
    ("none: NVML library not found (...)": a colon, as the reason may hold parentheses)."""
    gpus = header.gpu_list
    if not gpus:
        reason = header.gpu_unavailable_reason
        return (f"none: {reason}" if reason else "none found"), None
    names = sorted({g.name for g in gpus})
    text = ", ".join(f"{sum(g.name == n for g in gpus)}× {n}" for n in names)
    memory = gpus[0].memory_total
    if memory:
        text += f" ({fmt.gib(memory)} GiB)"
    if header.driver_version:
        text += f", driver {header.driver_version}"
    return text, names[0] if len(names) == 1 else None


LIVE_OUTCOME = "still running (live: figures so far)"


def outcome_of(summary: Summary, cut: str | None, live: bool = False) -> tuple[str, bool | None]:
    outcome = summary.outcome
    if outcome is None:
        if live:
            return LIVE_OUTCOME, None
        return ("cut before the run ended" if cut else "no command run (telemetry only)"), None
    text = outcome.message or outcome.kind or "?"
    if outcome.duration_s is not None:
        text += f" after {fmt.duration(outcome.duration_s)}"
    return text, outcome.ok


def references_of(header: Header, figure: float | None, gpu_name: str | None) -> list[ReferenceFact]:
    out = []
    for ref in header.preset.references if header.preset is not None else []:
        published = ref.samples_per_sec
        if published is None or published <= 0:
            continue
        out.append(
            ReferenceFact(
                gpu=ref.gpu or "?",
                samples_per_sec=float(published),
                source=ref.source or "",
                ratio=figure / published if figure else None,
                same_gpu=gpu_name is not None and ref.gpu == gpu_name,
            )
        )
    return out


def _peak_vram_workload(recording: Recording) -> tuple[int | None, str | None]:
    results = recording.events_of(ev.RESULT)
    for event in reversed(results):
        result = event.payload
        if isinstance(result, ev.Result) and result.peak_memory_bytes is not None:
            return int(result.peak_memory_bytes), result.peak_memory_source
    return None, None


def price_of(recording: Recording, price_per_hour: float | None) -> float | None:
    """--price wins; else a price the recording was made with (gputui check --price)."""
    if price_per_hour is not None:
        return price_per_hour
    check = recording.header.check
    price = check.price_per_hour if check is not None else None
    return price if price is not None and price > 0 else None


def run_facts(recording: Recording, price_per_hour: float | None = None) -> RunFacts:
    header = recording.header
    summary = run_summary(recording)
    throughput = summary.throughput or ThroughputSummary()
    gpu_text, gpu_name = gpu_of(header)
    outcome, ok = outcome_of(summary, recording.cut, recording.live)
    peak_workload, peak_source = _peak_vram_workload(recording)
    findings, replayed = recorded_findings(recording)
    command = header.command
    price = price_of(recording, price_per_hour)
    figure = throughput.run_figure
    return RunFacts(
        label=recording_stem(recording.path),
        machine=machine_of(header),
        gpu=gpu_text,
        gpu_name=gpu_name,
        preset=header.preset_name,
        command=shlex.join(command) if command is not None else None,
        outcome=outcome,
        ok=ok,
        cut=recording.cut,
        check=is_check(recording),
        throughput=throughput,
        rates=measured_rates(recording),
        energy_per_sample_j=summary.energy_per_sample_j,
        price_per_hour=price,
        cost_per_million=cost_per_million(price, figure),
        peak_vram_workload=peak_workload,
        peak_vram_source=peak_source,
        peak_vram_nvml={g.index: g.peak_memory_used for g in summary.gpus if g.peak_memory_used is not None},
        throttle=_throttle_of(summary),
        findings=findings,
        findings_replayed=replayed,
        references=references_of(header, figure, gpu_name),
        window=summary.window or "all",
        unit=throughput.unit_name,
        phases=list(summary.phases or []),
    )


def _throttle_of(summary: Summary) -> dict[int, dict[str, float]]:
    """Each sampled GPU's active reasons; a GPU without samples has no share to report
    (the summary leaves throttle_share out), so it is left out rather than read as 0%."""
    return {g.index: {k: v for k, v in g.throttle_share.items() if v} for g in summary.gpus if g.throttle_share is not None}


NOT_MEASURED = "not measured (no GPU)"


def throttle_text(facts: RunFacts) -> str:
    """ "GPU0: SwThermalSlowdown 25%, SwPowerCap 3%", "none", or NOT_MEASURED for a run
    without GPU samples (no throttling was seen because nothing was watched)."""
    if not facts.throttle:
        return NOT_MEASURED
    parts = []
    for index, shares in sorted(facts.throttle.items()):
        if shares:
            reasons = ", ".join(f"{name} {fmt.pct(share * 100)}" for name, share in sorted(shares.items(), key=lambda kv: -kv[1]))
            parts.append(f"GPU{index}: {reasons}")
    return "; ".join(parts) or "none"


def findings_text(facts: RunFacts) -> str:
    """Titles of the findings, one phrase each, or "none"."""
    return "; ".join(f"{f.severity or '?'}: {f.title or f.kind or '?'}" for f in facts.findings) or "none"
