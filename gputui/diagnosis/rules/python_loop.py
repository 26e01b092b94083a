"""Python-bound main loop: one thread of the job runs flat out while the GPU waits.

A training loop is one Python thread.  When it is the bottleneck (tiny batches, a host
synchronisation such as ``loss.item()`` every step, Python-side work per step) that
thread works most of the time (about two thirds of a core, the rest spent waiting
on the GPU's stream in other threads: docs/performance.md#figures-behind-the-codes-choices)
and the GPU is idle between its launches.  A process's
total CPU cannot show it (PyTorch runs dozens of threads): the sampler reads the
busiest thread of each busy process, the main thread counted with the autograd threads
that run its backward on a GPU (gputui.telemetry.host).  With the probe, the loop's
data wait tells a saturated loop from one that loads its own data; without it (``--pid``)
the finding says that it could not see the difference.
"""

from __future__ import annotations

from gputui.diagnosis.context import Context, med, rnd
from gputui.diagnosis.rules.base import Description, Observation, Rule, RuleFinding, clean
from gputui.diagnosis.rules.gpu_busy import read_busy, readable
from gputui.model import GpuSample


class PythonBound(Rule):
    kind = "python_bound"
    scope = "run"
    needs = "a GPU's utilization"  # a thread flat out says nothing without a GPU left waiting

    def observe(self, ctx: Context, gpu: GpuSample | None) -> Observation:
        s, d = ctx.settings, ctx.derived
        top = d.top_thread
        if top is None or not d.run_gpus or not ctx.run_uses_gpu:
            return Observation(None, {})  # no busy thread read, or no GPU to starve
        wait = ctx.data_wait_share()
        if wait is None and "input_bound" in ctx.open_kinds:
            return Observation(None, {})  # without the probe, the input-bound finding already names the saturated main process
        busy = read_busy(ctx, d.run_gpus, sm_below=s.python_gpu_busy_pct, util_below=s.python_gpu_busy_pct)
        if not readable(busy):
            return Observation(None, {})
        saturated = (top.top_thread_pct or 0.0) >= s.python_thread_pct
        waiting = wait is not None and wait * 100.0 >= s.python_data_wait_pct
        level = 2 if saturated and busy.signals and not waiting else 0
        return Observation(
            level,
            {
                **busy.obs(),
                "thread_pct": top.top_thread_pct,
                "process_cpu": top.cpu_percent,
                "threads": float(top.threads) if top.threads is not None else None,
                "data_wait": 100.0 * wait if wait is not None else None,
                "rate": ctx.recent_rate(),
            },
        )

    def describe(self, f: RuleFinding, ctx: Context) -> Description:
        thread, sm, util = med(f.series("thread_pct")), med(f.series("sm_active")), med(f.series("util_gpu"))
        wait = med(f.series("data_wait"))
        batch = ctx.setting("batch_size")
        gpu_text = f"SM activity {sm:.0f}%" if sm is not None else f"utilization {util:.0f}%" if util is not None else "under-busy"
        evidence = clean(
            {
                "busiest_thread_pct": rnd(thread),
                "process_cpu_pct": rnd(med(f.series("process_cpu"))),
                "process_threads": int(max(f.series("threads"), default=0)) or None,
                "gpu_sm_active_pct": rnd(sm),
                "gpu_util_pct": rnd(util),
                "data_wait_pct": rnd(wait),
                "rate": rnd(f.rate(), 1),
                "rate_unit": ctx.rate_unit,
                "duration_s": rnd(f.until - f.since),
                "seen": "probe and threads" if wait is not None else "threads only (no probe: data loading in the loop cannot be told apart)",
            }
        )
        if wait is not None and ctx.probe_sampled:
            # nanoGPT's get_batch(): the sampler saw how little of the loop's time it takes
            evidence["data_loading"] = f"in the loop, without a DataLoader: {wait:.0f}% of its time, sampled from its stack"
        elif wait is not None and ctx.probe_workers() is None:
            # a probe without the sampler (recordings before it): batches made in the loop count as its own work
            evidence["data_loading"] = "in the loop, without a DataLoader: preparing batches counts as the loop's own work"
        title = f"Python-bound main loop: it works {thread:.0f}% of a core while the GPU's {gpu_text}"
        title += f"; the loop waits for data only {wait:.0f}% of its time" if wait is not None else " (no probe: it may also be loading its own data)"
        advice = [
            f"Give the GPU more work per step: a larger batch{f' ({batch} now)' if isinstance(batch, int) else ''}, with gradient accumulation if memory is short.",
            "Cut Python and launch overhead per step: torch.compile(model), or CUDA graphs (torch.compile(mode='reduce-overhead')).",
            "Avoid host synchronisation every step: .item(), .cpu(), .tolist() and printing the loss block the loop until the GPU catches up; log every N steps.",
            "Move per-step Python work (metrics, logging, data reshaping) out of the loop or onto the GPU.",
        ]
        if "data_loading" in evidence and not ctx.probe_sampled:  # sampled, the evidence says how little it is
            advice.insert(
                0,
                "The loop prepares its own batches (no DataLoader): move that work into a DataLoader with workers, or onto the GPU, and overlap it with the step.",
            )
        if wait is None:
            advice.append(
                "Run the job as `gputui -- python train.py ...` for the probe's data-wait figure: it tells a saturated loop from one that loads its own data."
            )
        return Description(title, evidence, advice)
