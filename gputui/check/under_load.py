"""What the GPUs did while the check loaded them: heat, throttling and power.

:class:`LoadWatcher` is a Session observer: between :meth:`LoadWatcher.begin` and
:meth:`LoadWatcher.end` (the micro-benchmarks and workloads) it folds every GPU sample
into per-GPU tallies; :func:`load_results` grades them.  Power capping alone is how a
busy modern GPU normally runs (it boosts until it meets its limit), so it is shown,
not failed; thermal slowdown, hardware slowdown and power-brake are faults.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field

from gputui.check.result import AT_MOST, FAIL, INFO, OK, UNDER_LOAD, WARN, CheckResult, skipped
from gputui.check.stage_context import GpuUnderTest
from gputui.check.thresholds import THERMAL_WARN_C, THROTTLE_FAULT_SHARE
from gputui.diagnosis_settings import DEFAULTS
from gputui.model import GpuProcess, Sample, co_runners
from gputui.record.observer import Observer

MIB = 1024**2

# Clock-event reasons that mean the card protects itself, not that it is merely busy.
FAULT_REASONS = ("SwThermalSlowdown", "HwThermalSlowdown", "HwSlowdown", "HwPowerBrakeSlowdown")
THERMAL_REASONS = ("SwThermalSlowdown", "HwThermalSlowdown")


@dataclass
class _Tally:
    samples: int = 0
    max_temp: float | None = None
    max_power: float | None = None
    power_limit: float | None = None
    reasons: Counter[str] = field(default_factory=Counter)
    # Others' processes seen while loaded (the co_tenant finding's thresholds), by pid, with their peak memory
    co_runners: dict[int, tuple[GpuProcess, int]] = field(default_factory=dict)

    def add(self, gpu) -> None:
        if gpu.lost:
            return
        self.samples += 1
        for p in co_runners(gpu.processes, DEFAULTS.cotenant_memory_mib * MIB, DEFAULTS.cotenant_sm_pct):
            peak = max(p.used_memory or 0, self.co_runners[p.pid][1] if p.pid in self.co_runners else 0)
            self.co_runners[p.pid] = (p, peak)
        if gpu.temp_c is not None:
            self.max_temp = max(self.max_temp or gpu.temp_c, gpu.temp_c)
        if gpu.power_w is not None:
            self.max_power = max(self.max_power or gpu.power_w, gpu.power_w)
        if gpu.power_limit_w is not None:
            self.power_limit = gpu.power_limit_w
        self.reasons.update(gpu.throttle_reasons or ())

    def named_co_runners(self, limit: int = 3) -> list[tuple[GpuProcess, int]]:
        """Others' processes seen so far, biggest peak memory first."""
        return sorted(list(self.co_runners.values()), key=lambda entry: -entry[1])[:limit]

    def share(self, *names: str) -> float:
        """Share of samples in which any of ``names`` was active (counted once a sample
        would need the raw masks; the largest single share is a lower bound)."""
        if not self.samples:
            return 0.0
        return max((self.reasons[n] for n in names), default=0) / self.samples


class LoadWatcher(Observer):
    def __init__(self) -> None:
        self._loaded = threading.Event()
        self.tallies: dict[int, _Tally] = {}

    def begin(self) -> None:
        self._loaded.set()

    def end(self) -> None:
        self._loaded.clear()

    def on_sample(self, sample: Sample) -> None:
        if not self._loaded.is_set():
            return
        for gpu in sample.gpus:
            self.tallies.setdefault(gpu.index, _Tally()).add(gpu)

    def co_runners_text(self, gpu: int) -> str | None:
        """Who else has used ``gpu`` under load so far ("pid 42 alice python3 hog.py 20.0 GiB"):
        "" for nobody, None before any loaded sample (not known yet)."""
        tally = self.tallies.get(gpu)
        if tally is None or not tally.samples:
            return None
        return _named(tally.named_co_runners())


def load_results(watcher: LoadWatcher, gpus: list[GpuUnderTest]) -> list[CheckResult]:
    results = []
    for gpu in gpus:
        tally = watcher.tallies.get(gpu.index)
        i = gpu.index
        if tally is None or not tally.samples:
            results.append(skipped(f"gpu{i}.temp_under_load", UNDER_LOAD, "Temperature under load", "no samples were taken under load", gpu=i))
            continue
        results.append(_temperature(gpu, tally))
        results.append(_throttling(gpu, tally))
        results.append(_power(gpu, tally))
        results.append(_co_runners(gpu, tally))
    return results


def _co_runners(gpu: GpuUnderTest, tally: _Tally) -> CheckResult:
    """Other processes on the GPU while the check loaded it, named as the co_tenant finding names them."""
    named = tally.named_co_runners(limit=len(tally.co_runners))
    result = CheckResult(
        id=f"gpu{gpu.index}.co_runners",
        group=UNDER_LOAD,
        name="Other processes under load",
        gpu=gpu.index,
        status=OK,
        value=len(named),
        unit="processes",
        expected=0,
        bound=AT_MOST,
        expected_source=f"none holding {DEFAULTS.cotenant_memory_mib:g} MiB or {DEFAULTS.cotenant_sm_pct:g}% of the SMs (the co_tenant finding's thresholds)",
        detail=_named(named[:3]) or "no other process on the GPU",
        data={"pids": [p.pid for p, _ in named]},
    )
    if named:
        result.status = WARN
        result.cause = "another process used the GPU while the check measured it: the figures above understate the GPU"
        result.advice = "wait for it to end or ask its owner, then check again; `nvidia-smi` lists the GPU's processes"
    return result


def _named(processes: list[tuple[GpuProcess, int]]) -> str:
    return "; ".join(f"{p.label()} {peak / 1024**3:.1f} GiB" for p, peak in processes)


def _temperature(gpu: GpuUnderTest, tally: _Tally) -> CheckResult:
    i, slowdown = gpu.index, gpu.info.temp_slowdown_c
    thermal_share = tally.share(*THERMAL_REASONS)
    result = CheckResult(
        id=f"gpu{i}.temp_under_load",
        group=UNDER_LOAD,
        name="Temperature under load",
        gpu=i,
        status=OK,
        value=tally.max_temp,
        unit="°C",
        expected=THERMAL_WARN_C,
        bound=AT_MOST,
        expected_source="below 80 °C: above it GPUs throttle themselves (seed 003)",
        detail=f"hottest reading; slowdown at {slowdown:g} °C" if slowdown else "hottest reading",
    )
    if tally.max_temp is None:
        return skipped(result.id, UNDER_LOAD, result.name, "the GPU reports no temperature", gpu=i)
    if thermal_share > THROTTLE_FAULT_SHARE or (slowdown and tally.max_temp >= slowdown):
        result.status = FAIL
        result.cause = (
            f"the GPU slowed itself down for heat in {thermal_share:.0%} of the loaded samples"
            if thermal_share
            else f"it reached its {slowdown:g} °C slowdown threshold"
        )
        result.advice = (
            "poor cooling: blocked airflow, cards packed without spacing, a failed fan; "
            "ask the provider for another machine, or cap power (nvidia-smi -pl) to trade speed for heat"
        )
    elif tally.max_temp >= THERMAL_WARN_C:
        result.status = WARN
        result.cause = f"it ran at {tally.max_temp:g} °C, at or above 80 °C, within a short check"
        result.advice = "long runs will be hotter still: watch it with gputui and expect thermal throttling"
    return result


def _throttling(gpu: GpuUnderTest, tally: _Tally) -> CheckResult:
    i = gpu.index
    shares = {name: round(n / tally.samples, 3) for name, n in sorted(tally.reasons.items()) if name != "GpuIdle"}
    faults = {name: share for name, share in shares.items() if name in FAULT_REASONS and share > THROTTLE_FAULT_SHARE}
    detail = ", ".join(f"{name} {share:.0%}" for name, share in shares.items()) or "no clock-event reason active"
    result = CheckResult(
        id=f"gpu{i}.throttle_under_load",
        group=UNDER_LOAD,
        name="Throttling under load",
        gpu=i,
        status=OK,
        value=round(max(faults.values(), default=0.0), 3),
        unit="share",
        expected=THROTTLE_FAULT_SHARE,
        bound=AT_MOST,
        expected_source="thermal, hardware-slowdown and power-brake reasons in at most 5 % of samples",
        detail=detail,
        data={"shares": shares, "samples": tally.samples},
    )
    if faults:
        names = ", ".join(faults)
        result.status = FAIL
        result.cause = f"the GPU slowed its clocks for {names}: a hardware protection, not the workload"
        result.advice = (
            "HwSlowdown / HwPowerBrakeSlowdown point at the power supply or an external slowdown signal, thermal reasons at cooling: report it to the provider"
        )
    return result


def _power(gpu: GpuUnderTest, tally: _Tally) -> CheckResult:
    i = gpu.index
    cap_share = tally.share("SwPowerCap")
    detail = f"at its power cap in {cap_share:.0%} of loaded samples" if cap_share else "never at its power cap"
    return CheckResult(
        id=f"gpu{i}.power_under_load",
        group=UNDER_LOAD,
        name="Power under load",
        gpu=i,
        status=INFO,
        value=tally.max_power,
        unit="W",
        expected=tally.power_limit,
        bound=AT_MOST,
        expected_source="the enforced power limit",
        detail=detail,
    )
