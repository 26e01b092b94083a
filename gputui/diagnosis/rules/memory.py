"""Memory: GPU memory nearly full, host memory pressure, out-of-memory events."""

from __future__ import annotations

from gputui.diagnosis.context import Context, rnd
from gputui.diagnosis.rules.base import MIB, Description, Observation, Rule, RuleFinding, clean, gib, share_pct
from gputui.model import GpuSample


class VramFull(Rule):
    kind = "vram_full"

    def observe(self, ctx: Context, gpu: GpuSample | None) -> Observation:
        assert gpu is not None  # a per-GPU rule: the engine asks it of each GPU
        info = ctx.gpu_info.get(gpu.index)
        total = gpu.memory_total or (info.memory_total if info else None)
        if gpu.memory_used is None or not total:
            return Observation(None, {})
        pct = 100.0 * gpu.memory_used / total
        full = pct >= ctx.settings.vram_full_pct
        level = (1 if ctx.framework == "tf" else 2) if full else 0
        processes = ctx.processes_of(gpu.index)
        return Observation(
            level,
            {
                "used_pct": pct,
                "used": float(gpu.memory_used),
                "total": float(total),
                "procs": float(len(processes)) if processes is not None else None,
            },
        )

    def describe(self, f: RuleFinding, ctx: Context) -> Description:
        used = max(f.series("used"), default=None)
        total = max(f.series("total"), default=None)
        procs = max(f.series("procs"), default=None)
        evidence = clean(
            {
                "gpu": f.gpu,
                "memory_used_max": int(used) if used is not None else None,
                "memory_total": int(total) if total is not None else None,
                "used_pct_max": rnd(max(f.series("used_pct"), default=None)),
                "threshold_pct": ctx.settings.vram_full_pct,
                "gpu_processes": int(procs) if procs is not None else None,
                "duration_s": rnd(f.until - f.since),
            }
        )
        title = f"GPU{f.gpu} memory {evidence.get('used_pct_max', 0):.0f}% full ({gib(used)} of {gib(total)} GiB)"
        advice = []
        if ctx.framework == "tf":
            title += ": TensorFlow reserves most of it up front"
            advice.append(
                "TensorFlow maps nearly all GPU memory by default, so this need not be real use: set TF_FORCE_GPU_ALLOW_GROWTH=true (or tf.config.experimental.set_memory_growth) and read tf.config.experimental.get_memory_info('GPU:0')['peak'] for the real peak."
            )
        else:
            advice.append(
                "One step from out-of-memory: a longer sequence or a bigger batch will fail. Lower the batch size, use mixed precision (bf16/fp16) or activation checkpointing; torch.cuda.max_memory_allocated() gives the framework's own peak."
            )
        if procs and procs > 1:
            advice.append(f"{procs:.0f} processes hold memory on this GPU: see nvidia-smi for the others.")
        return Description(title, evidence, advice)


class HostMemory(Rule):
    kind = "host_memory"
    scope = "run"
    during_warmup = True  # the kernel's or the provider's OOM killer does not wait for warm-up

    def observe(self, ctx: Context, gpu: GpuSample | None) -> Observation:
        host = ctx.host
        if host is None or not host.memory_total or host.memory_available is None:
            return Observation(None, {})
        s = ctx.settings
        used = 100.0 * (1 - host.memory_available / host.memory_total)
        growth = ctx.swap_growth()
        swapping = growth is not None and growth >= s.swap_growth_mib * MIB
        level = 3 if used >= s.host_memory_critical_pct else 2 if used >= s.host_memory_pct or swapping else 0
        return Observation(
            level,
            {
                "used_pct": used,
                "available": float(host.memory_available),
                "total": float(host.memory_total),
                "swap_used": host.swap_used,
                "swap_growth": growth,
                "swapping": float(swapping),
                "run_rss": ctx.derived.run_rss,
            },
        )

    def describe(self, f: RuleFinding, ctx: Context) -> Description:
        used = max(f.series("used_pct"), default=None)
        swap_growth = max(f.series("swap_growth"), default=None)
        rss = max(f.series("run_rss"), default=None)
        evidence = clean(
            {
                "memory_used_pct_max": rnd(used),
                "memory_available_min": int(min(f.series("available"), default=0)) if f.series("available") else None,
                "memory_total": int(max(f.series("total"))) if f.series("total") else None,
                "swap_used_max": int(max(f.series("swap_used"))) if f.series("swap_used") else None,
                "swap_growth_30s_max": int(swap_growth) if swap_growth is not None else None,
                "swapping_pct": rnd(share_pct(f.share("swapping"))),
                "run_rss_max": int(rss) if rss else None,
                "duration_s": rnd(f.until - f.since),
            }
        )
        title = f"Host memory {used:.0f}% used" if used is not None else "Host memory pressure"
        if evidence.get("swapping_pct"):
            title += ", swapping"
        advice = [
            "Rented instances kill processes that go over their memory limit (AutoDL guide): the run may die without a Python error.",
            "Use less host memory: fewer data-loader workers (each holds a copy of the dataset object), a shorter prefetch queue, no whole-dataset cache in RAM (tf.data .cache() crashed EfficientNet-B7 training on a 12 GB Colab), or cache to a file.",
        ]
        if evidence.get("swapping_pct"):
            advice.append("The machine is swapping: every touch of swapped memory waits on the disk. Free memory or use a machine with more RAM.")
        return Description(title, evidence, advice)


class OutOfMemory(Rule):
    """Fed by events: the workload's ``oom`` line, an ``oom`` outcome, or a SIGKILL
    while host memory was short."""

    kind = "oom"
    scope = "run"
    event_only = True

    def describe(self, f: RuleFinding, ctx: Context) -> Description:
        data = f.data
        killed = data.get("killed")
        batch = data.get("batch_size")
        evidence = clean(
            {
                "oom_events": f.count,
                "batch_size": batch if isinstance(batch, (int, float)) and not isinstance(batch, bool) else None,
                "host_memory_used_pct": rnd(ctx.last_memory_used_pct),
                "gpu_memory_used_pct_max": rnd(data.get("gpu_memory_used_pct")),
            }
        )
        searching = bool(ctx.setting("find_max_batch"))
        if killed:
            title = (
                f"The run was killed ({killed}) while host memory was {ctx.last_memory_used_pct:.0f}% used: likely the machine's or the instance's memory limit"
            )
            advice = [
                "Rented instances kill processes over their memory limit (AutoDL guide); so does the kernel's OOM killer (see `dmesg`).",
                "Use less host memory: fewer data-loader workers, a shorter prefetch queue, no whole-dataset cache in RAM.",
            ]
        else:
            title = "Out of memory" + (f" at batch size {batch}" if batch else "")
            message = str(data.get("message") or "").strip()
            if message:
                title += ": " + message.splitlines()[0][:120]
            if searching:
                title += " (expected while searching for the largest batch)"
            advice = [
                "Lower the batch size (find_max_batch = true searches the largest that fits), use mixed precision (bf16/fp16) or activation checkpointing.",
                "TensorFlow: enable memory growth (TF_FORCE_GPU_ALLOW_GROWTH=true) so one process does not hold all of it; check nvidia-smi for other processes on the GPU.",
            ]
        return Description(title, evidence, advice)
