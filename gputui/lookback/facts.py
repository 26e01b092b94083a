"""The facts a report shows and a comparison lines up, taken from one recording.

Numbers stay numbers here; ``fmt`` turns them into text where they are shown.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from gputui import fmt
from gputui.lookback.load import is_check, measured_rates, recorded_findings, run_summary
from gputui.model import run_figure
from gputui.record import events as ev
from gputui.record.recording import Recording, recording_stem


@dataclass
class ReferenceFact:
    """A published figure for the preset (``header.preset.reference``)."""

    gpu: str
    samples_per_sec: float
    source: str
    ratio: float | None  # this run's figure (gputui.model.run_figure) over the published one
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
    throughput: dict[str, Any]  # median, p5, p95, readings, source, reported (the summary's)
    rates: list[float]  # the measured readings
    energy_per_sample_j: float | None
    price_per_hour: float | None
    cost_per_million: float | None  # USD per million samples at the run's figure
    peak_vram_workload: int | None  # bytes, the workload's own peak (its result line)
    peak_vram_source: str | None
    peak_vram_nvml: dict[int, int]  # GPU index -> bytes used at the peak sample
    throttle: dict[int, dict[str, float]]  # GPU index -> reason -> share of samples; only GPUs sampled
    findings: list[dict[str, Any]]
    findings_replayed: bool
    references: list[ReferenceFact] = field(default_factory=list)
    window: str = "all"
    unit: str = "samples"  # what the throughput counts (gputui.model.UNITS)
    phases: list[dict[str, Any]] = field(default_factory=list)  # a job's own phases (gputui.session.phases)

    @property
    def figure(self) -> float | None:
        """The figure the run is known by (gputui.model.run_figure)."""
        return run_figure(self.throughput)


def cost_per_million(price_per_hour: float | None, samples_per_sec: float | None) -> float | None:
    """USD for a million samples at this rate, on an instance billed by the hour."""
    if not price_per_hour or not samples_per_sec:
        return None
    return price_per_hour / 3600.0 / samples_per_sec * 1e6


def machine_of(header: dict[str, Any]) -> str:
    host = header.get("host") or {}
    parts = [host.get("hostname") or "?"]
    if host.get("cpu_model"):
        cores = host.get("cpu_available") or host.get("cpu_logical")
        parts.append(f"{host['cpu_model']}" + (f", {fmt.num(cores)} cores" if cores else ""))
    if host.get("memory_total"):
        parts.append(f"{fmt.gib(host['memory_total'])} GiB RAM")
    return "; ".join(parts)


def gpu_of(header: dict[str, Any]) -> tuple[str, str | None]:
    """("2× NVIDIA H200 (140.4 GiB), driver 580.95.05", "NVIDIA H200"), or why there is none."""
    gpus = header.get("gpus") or []
    if not gpus:
        return f"none ({header.get('gpu_unavailable_reason') or 'no GPU found'})", None
    names = sorted({g.get("name", "?") for g in gpus})
    text = ", ".join(f"{sum(g.get('name', '?') == n for g in gpus)}× {n}" for n in names)
    memory = gpus[0].get("memory_total")
    if memory:
        text += f" ({fmt.gib(memory)} GiB)"
    if header.get("driver_version"):
        text += f", driver {header['driver_version']}"
    return text, names[0] if len(names) == 1 else None


def outcome_of(summary: dict[str, Any], cut: str | None) -> tuple[str, bool | None]:
    outcome = summary.get("outcome")
    if not outcome:
        return ("cut before the run ended" if cut else "no command run (telemetry only)"), None
    text = outcome.get("message") or outcome.get("kind", "?")
    if outcome.get("duration_s") is not None:
        text += f" after {fmt.duration(outcome['duration_s'])}"
    return text, outcome.get("ok")


def references_of(header: dict[str, Any], figure: float | None, gpu_name: str | None) -> list[ReferenceFact]:
    raw = (header.get("preset") or {}).get("reference") or []
    if isinstance(raw, dict):
        raw = [raw]
    out = []
    for ref in raw:
        published = ref.get("samples_per_sec")
        if not isinstance(published, (int, float)) or published <= 0:
            continue
        out.append(
            ReferenceFact(
                gpu=str(ref.get("gpu", "?")),
                samples_per_sec=float(published),
                source=str(ref.get("source", "")),
                ratio=figure / published if figure else None,
                same_gpu=gpu_name is not None and ref.get("gpu") == gpu_name,
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
    check = recording.header.get("check")
    price = check.get("price_per_hour") if isinstance(check, dict) else None
    return price if isinstance(price, (int, float)) and price > 0 else None


def run_facts(recording: Recording, price_per_hour: float | None = None) -> RunFacts:
    header = recording.header
    summary = run_summary(recording)
    throughput = dict(summary.get("throughput") or {})
    gpu_text, gpu_name = gpu_of(header)
    outcome, ok = outcome_of(summary, recording.cut)
    peak_workload, peak_source = _peak_vram_workload(recording)
    findings, replayed = recorded_findings(recording)
    command = header.get("command")
    price = price_of(recording, price_per_hour)
    figure = run_figure(throughput)
    return RunFacts(
        label=recording_stem(recording.path),
        machine=machine_of(header),
        gpu=gpu_text,
        gpu_name=gpu_name,
        preset=(header.get("preset") or {}).get("name"),
        command=shlex.join(command) if isinstance(command, list) else command,
        outcome=outcome,
        ok=ok,
        cut=recording.cut,
        check=is_check(recording),
        throughput=throughput,
        rates=measured_rates(recording),
        energy_per_sample_j=summary.get("energy_per_sample_j"),
        price_per_hour=price,
        cost_per_million=cost_per_million(price, figure),
        peak_vram_workload=peak_workload,
        peak_vram_source=peak_source,
        peak_vram_nvml={g["index"]: g["peak_memory_used"] for g in summary.get("gpus", []) if "peak_memory_used" in g},
        throttle=_throttle_of(summary),
        findings=findings,
        findings_replayed=replayed,
        references=references_of(header, figure, gpu_name),
        window=summary.get("window", "all"),
        unit=throughput.get("unit") or "samples",
        phases=[p for p in summary.get("phases") or [] if isinstance(p, dict)],
    )


def _throttle_of(summary: dict[str, Any]) -> dict[int, dict[str, float]]:
    """Each sampled GPU's active reasons; a GPU without samples has no share to report
    (the summary leaves throttle_share out), so it is left out rather than read as 0%."""
    return {g["index"]: {k: v for k, v in g["throttle_share"].items() if v} for g in summary.get("gpus", []) if "throttle_share" in g}


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
    return "; ".join(f"{f.get('severity', '?')}: {f.get('title') or f.get('kind', '?')}" for f in facts.findings) or "none"
