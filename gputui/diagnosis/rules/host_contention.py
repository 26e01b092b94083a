"""Host contention: the run's CPU is taken away by its cgroup's quota (CFS throttling)
or by the hypervisor (steal), and its worker count is judged against the cores it may
actually use, not the cores the machine shows."""

from __future__ import annotations

import math

from gputui.diagnosis.context import Context, med, rnd
from gputui.diagnosis.rules.base import Description, Observation, Rule, RuleFinding, clean, throughput_evidence
from gputui.model import GpuSample


class HostContention(Rule):
    kind = "host_contention"
    scope = "run"

    def observe(self, ctx: Context, gpu: GpuSample | None) -> Observation:
        host = ctx.host
        if host is None:
            return Observation(None, {})
        s = ctx.settings
        throttling = ctx.throttling()
        steal = host.steal_pct
        if throttling is None and steal is None:
            return Observation(None, {})
        throttled = throttling is not None and throttling.throttled_pct >= s.cpu_throttled_pct
        stolen = steal is not None and steal >= s.steal_pct
        return Observation(
            2 if throttled or stolen else 0,
            {
                "throttled_pct": throttling.throttled_pct if throttling else None,
                "throttled_periods": float(throttling.throttled_periods) if throttling else None,
                "throttled_s_per_s": throttling.throttled_s_per_s if throttling else None,
                "throttled": float(throttled),
                "steal": steal,
                "stolen": float(stolen),
                "workers": float(len(ctx.derived.workers)),
                "run_cpu": ctx.derived.run_cpu,
            },
        )

    def describe(self, f: RuleFinding, ctx: Context) -> Description:
        throttled_pct = med(f.series("throttled_pct"))
        per_s = med(f.series("throttled_s_per_s"))
        steal = med(f.series("steal"))
        workers = int(max(f.series("workers"), default=0))
        cores, visible = ctx.cores, ctx.cores_visible
        throttled = (f.share("throttled") or 0.0) > 0
        stolen = (f.share("stolen") or 0.0) > 0
        evidence = clean(
            {
                "cpu_throttled_pct": rnd(throttled_pct) if throttled else None,
                "throttled_s_per_min": rnd(60.0 * per_s, 1) if throttled and per_s is not None else None,
                "throttled_periods_30s_max": int(max(f.series("throttled_periods"))) if throttled else None,
                "steal_pct": rnd(steal),
                "cores_available": cores,
                "cores_visible": visible,
                "workers": workers,
                "run_cpu_pct": rnd(med(f.series("run_cpu"))),
                **throughput_evidence(f),
                "duration_s": rnd(f.until - f.since),
            }
        )
        parts = []
        if throttled and throttled_pct is not None:
            lost = f" (throttled {60.0 * per_s:.1f} s per minute)" if per_s is not None else ""
            parts.append(f"its cgroup throttled the run in {throttled_pct:.0f}% of CPU periods{lost}")
        if stolen and steal is not None:
            parts.append(f"the hypervisor takes {steal:.0f}% of the CPU time (steal)")
        title = "Host CPU contended: " + " and ".join(parts or ["CPU taken away"])
        over = workers + 1 > cores if cores else False
        if over:
            shown = f"; the machine shows {visible}" if visible and visible != cores else ""
            title += f"; {workers} data-loader workers and the main process on {cores:g} available cores{shown}"
        advice = []
        if throttled:
            fit = max(1, math.floor(cores) - 1) if cores else None
            if over and fit is not None:
                advice.append(
                    f"The run asks for more CPU than its quota gives: use at most {fit} data-loader workers "
                    f"(the {cores:g} cores of the quota less one for the main process), not a count taken "
                    "from os.cpu_count(), which shows the whole machine."
                )
            else:
                advice.append(
                    f"The CPU quota ({cores:g} cores) is used up: every throttled period stops the run's threads "
                    "until the next one. Fewer threads (torch.set_num_threads, OMP_NUM_THREADS) and workers "
                    "that fit the quota waste less of it."
                )
            advice.append("Rent an instance with more vCPUs per GPU (4-8 per GPU is the usual advice), or ask the provider for a higher CPU quota.")
        if stolen:
            advice.append(
                "Steal is time the hypervisor gave to other guests on the same host: a noisy neighbour. "
                "Nothing in the run fixes it; move to another instance, or to dedicated (bare-metal) CPUs."
            )
        advice.append("`cat /sys/fs/cgroup/cpu.stat` shows nr_throttled and throttled_usec; `top` shows steal (st).")
        return Description(title, evidence, advice)
