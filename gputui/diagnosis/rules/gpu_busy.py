"""Is the GPU under-busy?  The signals every NVIDIA GPU has, for the rules that ask.

GPM's SM activity (Hopper and newer) is the honest number; "utilization" is only the
share of time any kernel ran, and reads 100% on a GPU doing little.  Without GPM the
GPU's own power draw against its limit and its SM clock against its maximum say how
hard it works, and a throughput ceiling measured for the same preset on the same GPU
model says how fast it should go.  Each verdict names the signal it rests on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gputui.diagnosis.context import Context, Obs
from gputui.diagnosis.rules.base import RuleFinding
from gputui.gpus.models import GpuModel, find_model
from gputui.model import SAMPLES, GpuSample

SM_ACTIVE, UTILIZATION, POWER, SM_CLOCK, THROUGHPUT = "sm_active", "utilization", "power", "sm_clock", "throughput"
SIGNALS = (SM_ACTIVE, UTILIZATION, POWER, SM_CLOCK, THROUGHPUT)
# Clock-event reasons that explain a low clock other than a lack of work: the clock
# rule judges those (thermal, power cap, hardware slowdown), not the busy signals.
_CLOCK_HELD = {"SwPowerCap", "HwSlowdown", "SwThermalSlowdown", "HwThermalSlowdown", "HwPowerBrakeSlowdown"}


@dataclass
class Busy:
    """The busiest of the run's GPUs, by each signal it reports (None: not reported)."""

    sm_active: float | None = None  # %
    util: float | None = None  # %
    power_pct: float | None = None  # % of the enforced limit
    power_w: float | None = None
    clock_pct: float | None = None  # % of the maximum SM clock, None while a reason holds it down
    signals: list[str] = field(default_factory=list)  # the signals that say "under-busy", best first

    def obs(self) -> Obs:
        """For a finding's series: the numbers, and one 0/1 series per signal."""
        out: Obs = {
            "sm_active": self.sm_active,
            "util_gpu": self.util,
            "power_pct": self.power_pct,
            "power_w": self.power_w,
            "clock_pct": self.clock_pct,
        }
        for name in SIGNALS:
            out[f"sig_{name}"] = float(name in self.signals)
        return out


def _power_pct(ctx: Context, gpu: GpuSample) -> float | None:
    info = ctx.gpu_info.get(gpu.index)
    limit = gpu.power_limit_w or (info.power_limit_w if info else None)
    if gpu.power_w is None or not limit:
        return None
    return 100.0 * gpu.power_w / limit


def _clock_pct(ctx: Context, gpu: GpuSample) -> float | None:
    info = ctx.gpu_info.get(gpu.index)
    top = info.sm_clock_max_mhz if info else None
    if gpu.sm_clock_mhz is None or not top:
        return None
    if gpu.throttle_reasons and _CLOCK_HELD.intersection(gpu.throttle_reasons):
        return None  # held down for a reason: that is not a lack of work
    return 100.0 * gpu.sm_clock_mhz / top


def _top(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def read_busy(ctx: Context, gpus: list[GpuSample], *, sm_below: float, util_below: float) -> Busy:
    """The busiest GPU's numbers (one busy GPU among idle ones is not under-busy) and
    the signals that say it is under-busy.  With GPM, SM activity alone decides."""
    busy = Busy(
        sm_active=_top([g.sm_active for g in gpus]),
        util=_top([g.util_gpu for g in gpus]),
        power_pct=_top([_power_pct(ctx, g) for g in gpus]),
        power_w=_top([g.power_w for g in gpus]),
        clock_pct=_top([_clock_pct(ctx, g) for g in gpus]),
    )
    s = ctx.settings
    if busy.sm_active is not None:
        if busy.sm_active < sm_below:
            busy.signals.append(SM_ACTIVE)
        return busy
    if busy.util is not None and busy.util < util_below:
        busy.signals.append(UTILIZATION)
    if busy.power_pct is not None and busy.power_pct < s.input_power_pct:
        busy.signals.append(POWER)
    if busy.clock_pct is not None and busy.clock_pct < s.input_clock_pct:
        busy.signals.append(SM_CLOCK)
    return busy


def readable(busy: Busy) -> bool:
    return any(v is not None for v in (busy.sm_active, busy.util, busy.power_pct, busy.clock_pct))


# --- the throughput ceiling -------------------------------------------------------------


def gpu_model(ctx: Context) -> GpuModel | None:
    """The datasheet entry of the run's first GPU (gputui/gpus/data/gpus.toml)."""
    info = ctx.gpu_info.get(min(ctx.gpu_info)) if ctx.gpu_info else None
    return find_model(info.name, info.memory_total) if info else None


def known_ceiling(ctx: Context) -> float | None:
    """The samples/s this preset should reach here: the ``ceiling_samples_per_sec``
    setting, else gputui's measured baseline for this preset on this GPU model
    (baselines.toml, e.g. ``resnet50_tuned`` for ``torch-resnet50-tuned``), else the
    highest of the preset's own references measured on this GPU model."""
    if ctx.rate_unit != SAMPLES:
        return None  # every ceiling is in samples/s: tokens or steps are not comparable
    if ctx.settings.ceiling_samples_per_sec:
        return ctx.settings.ceiling_samples_per_sec
    model = gpu_model(ctx)
    name = ctx.preset.name or ""
    if model is None or not name:
        return None
    metric = name.removeprefix("torch-").replace("-", "_")
    baseline = model.baselines.get(metric)
    if isinstance(baseline, (int, float)) and not isinstance(baseline, bool):
        return float(baseline)
    rates = [float(ref.samples_per_sec) for ref in ctx.preset.references if ref.samples_per_sec is not None and find_model(ref.gpu or "") == model]
    return max(rates) if rates else None


def main_signal(f: RuleFinding) -> str | None:
    """The signal that said "under-busy" most often during the finding."""
    shares = {name: f.share(f"sig_{name}") or 0.0 for name in SIGNALS}
    best = max(shares, key=lambda name: shares[name])
    return best if shares[best] > 0 else None


def signal_evidence(f: RuleFinding) -> dict[str, float]:
    """``judged_by_SIGNAL``: the % of the finding's samples in which each signal said
    "under-busy" (only those that did), so the evidence names what the verdict rests on."""
    out = {}
    for name in SIGNALS:
        share = f.share(f"sig_{name}")
        if share:
            out[f"judged_by_{name}_pct"] = round(100.0 * share, 1)
    return out


def title_of(busy_signal: str | None, sm: float | None, util: float | None, power_pct: float | None, clock_pct: float | None) -> str:
    """How the title says the GPU is under-busy, by the signal the verdict rests on."""
    if busy_signal == SM_ACTIVE and sm is not None:
        return f"SM activity {sm:.0f}%"
    if busy_signal == POWER and power_pct is not None:
        return f"power {power_pct:.0f}% of its limit (no GPM)"
    if busy_signal == SM_CLOCK and clock_pct is not None:
        return f"SM clock {clock_pct:.0f}% of its maximum (no GPM)"
    if util is not None and busy_signal in (UTILIZATION, None):
        return f"utilization {util:.0f}%"
    if sm is not None:
        return f"SM activity {sm:.0f}%"
    return "under-busy"
