"""Busy but not working (launch- or latency-bound) and idle without cause."""

from __future__ import annotations

from gputui.diagnosis.context import Context, Obs, med, rnd
from gputui.diagnosis.hold import Hold
from gputui.diagnosis.rules.base import Description, Observation, Rule, RuleFinding, clean, throughput_evidence
from gputui.diagnosis.rules.gpu_busy import known_ceiling, read_busy, signal_evidence
from gputui.diagnosis_settings import Settings
from gputui.fmt import duration as fmt_duration
from gputui.model import GpuSample


class LaunchBound(Rule):
    kind = "launch_bound"

    def hold(self, s: Settings) -> Hold:
        return Hold(s.launch_open_after_s, s.close_after_s, s.hold_share, s.clear_share)

    def observe(self, ctx: Context, gpu: GpuSample | None) -> Observation:
        assert gpu is not None  # a per-GPU rule: the engine asks it of each GPU
        if gpu.util_gpu is None:
            return Observation(None, {})
        s = ctx.settings
        obs = {"util": gpu.util_gpu, "sm": gpu.sm_active, "occ": gpu.sm_occupancy, "tensor": gpu.tensor_active}
        if gpu.sm_active is not None:
            level = 2 if gpu.util_gpu >= s.busy_util_pct and gpu.sm_active < s.launch_sm_active_pct else 0
            return Observation(level, obs)
        return self._without_gpm(ctx, gpu, gpu.util_gpu, obs)

    def _without_gpm(self, ctx: Context, gpu: GpuSample, util: float, obs: Obs) -> Observation:
        """No SM activity: "busy" by utilization but drawing little power, and (where
        this preset's ceiling here is known) well below it."""
        s = ctx.settings
        if "input_bound" in ctx.open_kinds:
            return Observation(None, {})  # waiting for data explains it: the input-bound finding says so
        busy = read_busy(ctx, [gpu], sm_below=s.launch_sm_active_pct, util_below=0.0)
        if busy.power_pct is None:
            return Observation(None, {})  # utilization alone cannot tell
        rate, ceiling = ctx.recent_rate(), known_ceiling(ctx)
        slow = rate < ceiling * s.ceiling_below_pct / 100.0 if ceiling and rate is not None else None
        if slow is False:
            return Observation(0, obs)  # it delivers what this preset delivers here: not starved
        low_power = busy.power_pct < s.launch_power_pct
        level = 2 if util >= s.busy_util_pct and low_power else 0
        return Observation(
            level,
            {
                **obs,
                "power_pct": busy.power_pct,
                "power_w": gpu.power_w,
                "clock_pct": busy.clock_pct,
                "sig_power": float(low_power),
                "sig_throughput": float(bool(slow)),
            },
        )

    def describe(self, f: RuleFinding, ctx: Context) -> Description:
        util, sm = med(f.series("util")), med(f.series("sm"))
        power_pct = med(f.series("power_pct"))
        batch = ctx.setting("batch_size")
        ceiling = known_ceiling(ctx)
        rate = f.rate()
        evidence = clean(
            {
                "gpu": f.gpu,
                "gpu_util_pct": rnd(util),
                "sm_active_pct": rnd(sm),
                "sm_occupancy_pct": rnd(med(f.series("occ"))),
                "tensor_active_pct": rnd(med(f.series("tensor"))),
                "gpu_power_pct_of_limit": rnd(power_pct) if sm is None else None,
                "power_median_w": rnd(med(f.series("power_w"))) if sm is None else None,
                **(signal_evidence(f) if sm is None else {}),
                "batch_size": batch if isinstance(batch, int) else None,
                **throughput_evidence(f),
                "ceiling_samples_per_sec": ceiling if sm is None else None,
                "ceiling_pct": rnd(100.0 * rate / ceiling) if sm is None and ceiling and rate is not None else None,
                "duration_s": rnd(f.until - f.since),
            }
        )
        if sm is not None:
            title = f"GPU{f.gpu} busy but not working: utilization {util:.0f}% but SM activity {sm:.0f}% (launch- or latency-bound)"
        else:
            title = f"GPU{f.gpu} busy but not working: utilization {util:.0f}% but power {power_pct:.0f}% of its limit (no GPM; launch- or latency-bound)"
            if evidence.get("ceiling_pct") is not None:
                title += f"; {rate:.0f} samples/s is {evidence['ceiling_pct']:.0f}% of the {ceiling:.0f} this preset reaches here"
        advice = [
            f"The kernels are too small to fill the GPU: raise the batch size{f' ({batch} now)' if batch else ''}.",
            "Cut launch overhead: CUDA graphs (torch.compile(mode='reduce-overhead'), torch.cuda.CUDAGraph) or compile and fuse (torch.compile, XLA jit_compile=True).",
            "Mixed precision (bf16/fp16), and channels_last for CNNs.",
            "Avoid host synchronisation in the loop: .item(), .cpu(), printing the loss every step.",
        ]
        return Description(title, evidence, advice)


def price_of(ctx: Context) -> float | None:
    """USD per hour of this machine: ``--price`` or the ``price_per_hour`` setting, else
    a ``price_per_hour`` the run's preset itself carries."""
    price = ctx.settings.price_per_hour or ctx.setting("price_per_hour")
    return float(price) if isinstance(price, (int, float)) and not isinstance(price, bool) and price > 0 else None


def idle_cost(f: RuleFinding, ctx: Context) -> float | None:
    """What the idle time cost: its length at the machine's price per hour."""
    price = price_of(ctx)
    return None if price is None else (f.until - f.since) / 3600.0 * price


# Findings that name why a run waits: while one is open, "idle without cause" is not the news.
NAMED_WAITS = ("input_bound", "python_bound", "host_contention", "host_memory", "straggler")


class Idle(Rule):
    kind = "idle"
    scope = "run"

    def observe(self, ctx: Context, gpu: GpuSample | None) -> Observation:
        s, d = ctx.settings, ctx.derived
        if not d.procs or d.run_cpu is None:
            return Observation(None, {})
        wait = ctx.data_wait_share()
        if ctx.open_kinds.intersection(NAMED_WAITS) or (wait is not None and wait * 100.0 >= s.data_wait_pct):
            # A named wait, or the probe's data wait that input-bound is about to name.  Clear
            # rather than unknown, so that an idle finding opened before the cause was named closes.
            return Observation(0, {})
        util = None
        if d.run_gpus and ctx.run_uses_gpu:
            utils = [g.util_gpu for g in d.run_gpus if g.util_gpu is not None]
            if not utils:
                return Observation(None, {})
            sms = [g.sm_active for g in d.run_gpus if g.sm_active is not None]
            util = max(utils)
            gpu_idle = util < s.idle_gpu_pct and (not sms or max(sms) < s.idle_gpu_pct)
        elif ctx.n_gpus == 0 or not ctx.run_uses_gpu:
            gpu_idle = True  # no GPU at all, or the run uses none: the CPU decides
        else:
            return Observation(None, {})  # the GPUs are lost
        host = ctx.host
        level = 2 if gpu_idle and d.run_cpu < s.idle_cpu_pct else 0
        return Observation(
            level,
            {
                "util": util,
                "run_cpu": d.run_cpu,
                "host_cpu": host.cpu_percent if host else None,
                "disk_read": host.disk_read_bps if host else None,
                "run_read": d.run_read_bps,
                "pid": float(d.main.pid) if d.main else None,
            },
        )

    def describe(self, f: RuleFinding, ctx: Context) -> Description:
        util, cpu = med(f.series("util")), med(f.series("run_cpu"))
        disk = med(f.series("disk_read"))
        evidence = clean(
            {
                "gpu_util_pct": rnd(util),
                "run_cpu_pct": rnd(cpu),
                "host_cpu_pct": rnd(med(f.series("host_cpu"))),
                "disk_read_bps": rnd(disk, 0),
                "run_read_bps": rnd(med(f.series("run_read")), 0),
                **throughput_evidence(f),
                "duration_s": rnd(f.until - f.since),
            }
        )
        if util is not None:
            title = f"The run is idle: GPU {util:.0f}% busy and its processes use {cpu:.0f}% of one core"
        else:
            title = f"The run is idle: its processes use {cpu:.0f}% of one core (no GPU)"
        cost = idle_cost(f, ctx)
        if cost is not None:
            evidence["idle_cost_usd"], evidence["price_per_hour"] = round(cost, 2), price_of(ctx)
            title += f"; idle for {fmt_duration(f.until - f.since)} that cost ${cost:.2f} at ${price_of(ctx):.2f}/hour"
        pids = f.series("pid")
        pid = f"{pids[-1]:.0f}" if pids else "PID"
        io = f" (the machine reads {disk / 1e6:.1f} MB/s)" if disk is not None else ""
        advice = [
            f"It is waiting, not working: on disk or network I/O{io}, a lock or a collective (NCCL, a barrier), or a sleep.",
            f"See where it waits: `py-spy dump --pid {pid}` prints every thread's stack.",
            "Data on network storage: copy it to the local disk first; many small files: pack them (tar shards, TFRecord, WebDataset).",
        ]
        return Description(title, evidence, advice)
