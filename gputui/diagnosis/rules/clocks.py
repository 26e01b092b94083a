"""Held back clocks: heat, the power limit, a hardware slowdown or power brake."""

from __future__ import annotations

from gputui.diagnosis.context import Context, med, rnd
from gputui.diagnosis.hold import Hold
from gputui.diagnosis.rules.base import (
    THERMAL_REASONS,
    Description,
    Observation,
    Rule,
    RuleFinding,
    clean,
    clock_evidence,
    share_pct,
    throughput_evidence,
)
from gputui.diagnosis_settings import Settings
from gputui.model import GpuSample


class Thermal(Rule):
    kind = "thermal"

    def observe(self, ctx: Context, gpu: GpuSample | None) -> Observation:
        assert gpu is not None  # a per-GPU rule: the engine asks it of each GPU
        reasons = gpu.throttle_reasons
        if reasons is None and gpu.temp_c is None:
            return Observation(None, {})
        throttled = any(r in THERMAL_REASONS for r in reasons or ())
        hot = gpu.temp_c is not None and gpu.temp_c >= ctx.settings.thermal_warn_c
        level = 3 if throttled else 2 if hot else 0
        obs = {
            "temp": gpu.temp_c,
            "sm_clock": gpu.sm_clock_mhz,
            "power": gpu.power_w,
            "throttled": None if reasons is None else float(throttled),
        }
        return Observation(level, obs)

    def describe(self, f: RuleFinding, ctx: Context) -> Description:
        info = ctx.info_of(f.gpu)
        temps = f.series("temp")
        tmax, tmed = max(temps, default=None), med(temps)
        slowdown = info.temp_slowdown_c if info else None
        throttled_since = f.first_t("throttled")
        evidence = clean(
            {
                "gpu": f.gpu,
                "temp_max_c": rnd(tmax),
                "temp_median_c": rnd(tmed),
                "warn_c": ctx.settings.thermal_warn_c,
                "slowdown_c": slowdown,
                "shutdown_c": info.temp_shutdown_c if info else None,
                "margin_to_slowdown_c": rnd(slowdown - tmax) if slowdown is not None and tmax is not None else None,
                "throttled_pct": rnd(share_pct(f.share("throttled"))),
                **clock_evidence(f, ctx, throttled_since),
                **throughput_evidence(f, throttled_since),
                "duration_s": rnd(f.until - f.since),
            }
        )
        name = f"GPU{f.gpu}"
        own = f"; it slows itself at {slowdown:.0f} °C" if slowdown is not None else ""
        if f.level >= 3:
            title = f"{name} thermal throttling at up to {tmax:.0f} °C" if tmax is not None else f"{name} thermal throttling"
            if evidence.get("clock_drop_pct") is not None:
                title += f": SM clock {evidence['sm_clock_median_mhz']} MHz, {evidence['clock_drop_pct']:.0f}% below its {evidence['sm_clock_max_mhz']} MHz max"
            if evidence.get("throughput_drop_pct") is not None:
                title += f", throughput {evidence['throughput_drop_pct']:.0f}% lower"
        else:
            title = f"{name} hot: up to {tmax:.0f} °C (warning at {ctx.settings.thermal_warn_c:.0f} °C{own})"
        advice = []
        if f.level >= 3:
            advice.append("The GPU confirms it is slowing itself down for heat (SwThermalSlowdown / HwThermalSlowdown): the clock drop is lost speed.")
        advice += [
            "Improve cooling: airflow through the case, clean filters and heatsinks, working fans; leave a slot between cards or use PCIe risers (Tim Dettmers' GPU guide: above 80 °C a GPU throttles).",
            "On a rented machine, report the temperature to the provider or move to another machine: cooling is theirs to fix.",
            "A lower power limit (nvidia-smi -pl) cuts heat for a small loss: capping 50 W cost about 7% of BERT-large throughput on an RTX 2080 Ti (same guide).",
        ]
        return Description(title, evidence, advice)


# --- 3. Power cap ----------------------------------------------------------------------


class PowerCap(Rule):
    kind = "power_cap"

    def hold(self, s: Settings) -> Hold:
        return Hold(s.open_after_s, s.close_after_s, s.power_cap_share, s.clear_share)

    def observe(self, ctx: Context, gpu: GpuSample | None) -> Observation:
        assert gpu is not None  # a per-GPU rule: the engine asks it of each GPU
        reasons = gpu.throttle_reasons
        if reasons is None:
            return Observation(None, {})
        s = ctx.settings
        info = ctx.gpu_info.get(gpu.index)
        limit = gpu.power_limit_w or (info.power_limit_w if info else None)
        top = info.sm_clock_max_mhz if info else None
        capped = "SwPowerCap" in reasons
        if capped and gpu.power_w is not None and limit:
            capped = gpu.power_w >= limit * s.power_limit_pct / 100.0
        if capped and gpu.sm_clock_mhz is not None and top:
            capped = gpu.sm_clock_mhz < top * s.clock_below_max_pct / 100.0
        default = info.power_default_limit_w if info else None
        lowered = bool(limit and default and limit < 0.98 * default)
        level = (2 if lowered else 1) if capped else 0
        obs = {"capped": float(capped), "power": gpu.power_w, "limit": limit, "sm_clock": gpu.sm_clock_mhz if capped else None}
        return Observation(level, obs)

    def describe(self, f: RuleFinding, ctx: Context) -> Description:
        info = ctx.info_of(f.gpu)
        limit = med(f.series("limit"))
        default = info.power_default_limit_w if info else None
        evidence = clean(
            {
                "gpu": f.gpu,
                "capped_pct": rnd(share_pct(f.share("capped"))),
                "power_median_w": rnd(med(f.series("power"))),
                "power_limit_w": rnd(limit),
                "power_default_limit_w": default,
                **clock_evidence(f, ctx),
                **throughput_evidence(f),
                "duration_s": rnd(f.until - f.since),
            }
        )
        lowered = bool(limit and default and limit < 0.98 * default)
        where = f"its {limit:.0f} W limit" if limit else "its power limit"
        if lowered:
            where += f" (default {default:.0f} W)"
        title = f"GPU{f.gpu} power-capped {evidence.get('capped_pct', 0):.0f}% of the time at {where}"
        if evidence.get("clock_drop_pct") is not None:
            title += f": SM clock {evidence['sm_clock_median_mhz']} MHz, {evidence['clock_drop_pct']:.0f}% below max"
        advice = []
        if lowered:
            advice.append(
                f"The enforced limit ({limit:.0f} W) is below the card's default ({default:.0f} W): restore it with `sudo nvidia-smi -i {f.gpu} -pl {default:.0f}`, or ask the provider why it is lowered."
            )
        else:
            advice.append(
                "The GPU draws all the power it is allowed: under heavy load this is normal and the clock drop is the price; compare energy per sample (in the summary) rather than clocks."
            )
        advice += [
            "A hot GPU needs more power for the same work: check the temperature and cooling as well.",
            "Mixed precision (bf16/fp16) and fused kernels do more work per joule.",
        ]
        return Description(title, evidence, advice)


# --- 4. Hardware slowdown / power brake ---------------------------------------------------


class HwSlowdown(Rule):
    kind = "hw_slowdown"

    def observe(self, ctx: Context, gpu: GpuSample | None) -> Observation:
        assert gpu is not None  # a per-GPU rule: the engine asks it of each GPU
        reasons = gpu.throttle_reasons
        if reasons is None:
            return Observation(None, {})
        thermal = "HwThermalSlowdown" in reasons  # HwSlowdown with it is heat: the thermal rule's
        hw = "HwSlowdown" in reasons and not thermal
        brake = "HwPowerBrakeSlowdown" in reasons
        obs = {
            "hw": float(hw),
            "brake": float(brake),
            "active": float(hw or brake),
            "sm_clock": gpu.sm_clock_mhz if hw or brake else None,
            "temp": gpu.temp_c,
            "power": gpu.power_w,
        }
        return Observation(3 if hw or brake else 0, obs)

    def describe(self, f: RuleFinding, ctx: Context) -> Description:
        hw, brake = f.share("hw") or 0.0, f.share("brake") or 0.0
        evidence = clean(
            {
                "gpu": f.gpu,
                "active_pct": rnd(100.0 * (f.share("active") or 0.0)),
                "hw_slowdown_pct": rnd(100.0 * hw),
                "power_brake_pct": rnd(100.0 * brake),
                **clock_evidence(f, ctx),
                "temp_max_c": rnd(max(f.series("temp"), default=None)),
                "power_median_w": rnd(med(f.series("power"))),
                **throughput_evidence(f),
                "duration_s": rnd(f.until - f.since),
            }
        )
        names = ", ".join(n for n, v in (("HwSlowdown", hw), ("HwPowerBrakeSlowdown", brake)) if v > 0)
        title = f"GPU{f.gpu} hardware slowdown ({names}) {evidence['active_pct']:.0f}% of the time"
        if evidence.get("clock_drop_pct") is not None:
            title += f": SM clock {evidence['sm_clock_median_mhz']} MHz, {evidence['clock_drop_pct']:.0f}% below max"
        advice = []
        if brake:
            advice.append(
                "HwPowerBrakeSlowdown: the system asserted the external power brake; the host's power supply or power budget cannot feed the GPU. Check PSU capacity and cabling, or report the machine to the provider."
            )
        if hw:
            advice.append(
                "HwSlowdown without a thermal reason: a power-delivery or cooling fault on the host (the GPU cuts its clocks by half or more). See `nvidia-smi -q -d PERFORMANCE`; check the power cables and PSU."
            )
        advice.append("No change to the training code fixes this: on a rented machine, move to another one and report it.")
        return Description(title, evidence, advice)
