"""Headroom (information, not a fault): the run uses a small share of what the GPU can
do: achieved TFLOP/s against the datasheet peak for its precision, or, where the
workload counts no FLOPs, peak GPU memory against the GPU's."""

from __future__ import annotations

from gputui.diagnosis.context import Context, med, rnd
from gputui.diagnosis.hold import Hold
from gputui.diagnosis.rules.base import GIB, Description, Observation, Rule, RuleFinding, clean
from gputui.diagnosis.rules.gpu_busy import gpu_model
from gputui.diagnosis_settings import Settings
from gputui.model import GpuSample

# Workload precision -> the datasheet peak it runs at (gputui/gpus/data/gpus.toml).
PEAK_KEYS = {
    "bf16": "bf16_tflops",
    "mixed_bfloat16": "bf16_tflops",
    "fp16": "fp16_tflops",
    "mixed_float16": "fp16_tflops",
    "tf32": "tf32_tflops",
    "fp32": "fp32_tflops",
}


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


class Headroom(Rule):
    kind = "headroom"
    scope = "run"

    def hold(self, s: Settings) -> Hold:
        return Hold(s.headroom_open_after_s, s.close_after_s, s.hold_share, s.clear_share)

    def observe(self, ctx: Context, gpu: GpuSample | None) -> Observation:
        d, s = ctx.derived, ctx.settings
        if not ctx.run_uses_gpu or not d.run_gpus:
            return Observation(None, {})
        if "input_bound" in ctx.open_kinds:
            return Observation(None, {})  # the GPU waits for data: a bigger batch would not help; that finding says what will
        totals = [(g.memory_used, g.memory_total or self._total(ctx, g.index)) for g in d.run_gpus]
        shares = [100.0 * used / total for used, total in totals if used is not None and total]
        memory_pct = max(shares) if shares else None
        used = max((u for u, _ in totals if u is not None), default=None)
        total = max((t for _, t in totals if t), default=None)
        tflops, peak = self._tflops(ctx)
        obs = {
            "tflops": tflops,
            "peak": peak,
            "memory_pct": memory_pct,
            "memory_used": None if used is None else float(used),
            "memory_total": None if total is None else float(total),
        }
        if tflops is not None and peak:
            return Observation(1 if 100.0 * tflops / peak < s.headroom_tflops_pct else 0, obs)
        if memory_pct is None:
            return Observation(None, {})
        working = any((g.util_gpu or 0) >= s.idle_gpu_pct for g in d.run_gpus)
        return Observation(1 if working and memory_pct < s.headroom_memory_pct else 0, obs)

    @staticmethod
    def _total(ctx: Context, index: int) -> int | None:
        info = ctx.gpu_info.get(index)
        return info.memory_total if info else None

    @staticmethod
    def _tflops(ctx: Context) -> tuple[float | None, float | None]:
        """Achieved TFLOP/s now (the workload's FLOPs per sample x the recent rate) and
        one GPU's peak for the run's precision.  One GPU: gputui's workloads run on one."""
        flops, rate = _number(ctx.setting("flops_per_sample")), ctx.recent_rate()
        model = gpu_model(ctx)
        key = PEAK_KEYS.get(str(ctx.setting("precision") or ""))
        peak = _number(model.spec(key)) if model and key else None
        return (flops * rate / 1e12 if flops and rate is not None else None), peak

    def describe(self, f: RuleFinding, ctx: Context) -> Description:
        tflops, peak = med(f.series("tflops")), med(f.series("peak"))
        memory_pct = max(f.series("memory_pct"), default=None)
        used, total = max(f.series("memory_used"), default=None), max(f.series("memory_total"), default=None)
        precision = ctx.setting("precision")
        batch = ctx.setting("batch_size")
        model = gpu_model(ctx)
        evidence = clean(
            {
                "achieved_tflops": rnd(tflops),
                "peak_tflops": rnd(peak, 0),
                "peak_pct": rnd(100.0 * tflops / peak) if tflops is not None and peak else None,
                "memory_used_max": int(used) if used is not None else None,
                "memory_total": int(total) if total is not None else None,
                "memory_used_pct_max": rnd(memory_pct),
                "batch_size": batch if isinstance(batch, int) and not isinstance(batch, bool) else None,
                "samples_per_sec": rnd(f.rate(), 1),
                "duration_s": rnd(f.until - f.since),
            }
        )
        gpu_name = model.model if model else "the GPU"
        memory = (
            f"{used / GIB:.1f} of {total / GIB:.0f} GiB of GPU memory ({memory_pct:.0f}%)" if used is not None and total and memory_pct is not None else None
        )
        if evidence.get("peak_pct") is not None:
            title = f"Headroom: {tflops:.1f} TFLOP/s is {evidence['peak_pct']:.0f}% of the {gpu_name}'s {peak:.0f} TFLOP/s {precision} peak"
            if memory:
                title += f", using {memory}"
        else:
            title = f"Headroom: the run uses {memory or 'little GPU memory'}"
        advice = []
        now = f" ({batch} now)" if isinstance(batch, int) else ""
        advice.append(
            f"A larger batch{now} fills the GPU better: the largest that fits is found by "
            "find_max_batch = true in the preset (`python -m gputui.workloads ... --find-max-batch`); "
            "scale the learning rate with it."
        )
        if precision in ("fp32", "tf32", None):
            advice.append(
                'bf16 (torch.autocast(dtype=torch.bfloat16), precision = "bf16") runs the tensor cores at twice the TF32 rate and halves activation memory.'
            )
        if not ctx.setting("channels_last") and ctx.setting("image_size"):
            advice.append(
                "channels_last memory format (model.to(memory_format=torch.channels_last)) lets convolutions use the tensor cores without transposes."
            )
        if not ctx.setting("compile"):
            advice.append("torch.compile(model) fuses the small element-wise kernels that leave the GPU idle between big ones.")
        advice.append("This is information, not a fault: a small model or a latency-bound use can be right as it is.")
        return Description(title, evidence, advice)
