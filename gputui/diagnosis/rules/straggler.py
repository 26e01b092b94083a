"""Rules for data-parallel runs: a straggler holds every rank back.

In synchronous data parallelism (DDP, MirroredStrategy) each step ends with an
all-reduce of the gradients, so every rank waits for the slowest: one slow rank, or one
GPU that throttles while the others run free, sets the pace of all of them.
"""

from __future__ import annotations

from gputui.diagnosis.context import Context, Obs, med, rnd
from gputui.diagnosis.rules.base import Description, Observation, Rule, RuleFinding, clean
from gputui.model import GpuSample
from gputui.record.events import Evidence
from gputui.stats import median

# A rank this much slower than the median of the others is a straggler.  Ranks of a
# synchronous run mostly measure alike (they wait for each other inside the step), so
# a gap this size means a rank spends time outside it: its input, its host, its GPU.
STRAGGLER_SLOWER_PCT = 10.0
# Clock-event reasons that slow a GPU down (GpuIdle and the clock settings do not).
SLOWING_REASONS = ("SwPowerCap", "HwSlowdown", "SwThermalSlowdown", "HwThermalSlowdown", "HwPowerBrakeSlowdown")


def slowest_rank(rates: dict[int, float]) -> tuple[int, float, float] | None:
    """(rank, its rate, the median of the other ranks) for the rank furthest below the
    others' median; None with fewer than two ranks."""
    if len(rates) < 2:
        return None
    worst: tuple[int, float, float] | None = None
    for rank, rate in sorted(rates.items()):
        others = median([r for k, r in rates.items() if k != rank])
        if others and (worst is None or rate / others < worst[1] / worst[2]):
            worst = (rank, rate, others)
    return worst


def lone_throttled_gpu(gpus: list[GpuSample]) -> tuple[GpuSample, list[str]] | None:
    """The one GPU of several that a slowing clock event holds back while the others run
    free, with its reasons; None when none, or more than one, is."""
    slowed = [(g, [r for r in g.throttle_reasons or [] if r in SLOWING_REASONS]) for g in gpus if not g.lost]
    hit = [(g, reasons) for g, reasons in slowed if reasons]
    if len(slowed) < 2 or len(hit) != 1:
        return None
    return hit[0]


class Straggler(Rule):
    kind = "straggler"
    scope = "run"

    def observe(self, ctx: Context, gpu: GpuSample | None) -> Observation:
        world = ctx.setting("world_size") or ctx.setting("replicas") or (len(ctx.rank_rates) or None)
        if not world or world < 2:
            return Observation(None, {})  # not a data-parallel run
        obs: Obs = {"world": float(world)}
        level = 0
        slow = slowest_rank(ctx.recent_rank_rates())
        if slow is not None:
            rank, rate, others = slow
            slower_pct = 100.0 * (1 - rate / others)
            obs.update({"slower_pct": slower_pct, "rank_rate": rate, "others_rate": others})
            if slower_pct >= STRAGGLER_SLOWER_PCT:
                level, obs["rank"] = 2, float(rank)
        lone = lone_throttled_gpu(ctx.derived.run_gpus)
        if lone is not None:
            throttled, reasons = lone
            free_clocks = [float(g.sm_clock_mhz) for g in ctx.derived.run_gpus if g is not throttled and g.sm_clock_mhz is not None]
            level = 2
            obs.update(
                {
                    "throttled_gpu": float(throttled.index),
                    "sm_clock": throttled.sm_clock_mhz,
                    "others_sm_clock": med(free_clocks),
                    "power_cap": float("SwPowerCap" in reasons),
                    "thermal": float(any("Thermal" in r for r in reasons)),
                    "hardware": float(any(r in ("HwSlowdown", "HwPowerBrakeSlowdown") for r in reasons)),
                }
            )
        return Observation(level, obs)

    def describe(self, f: RuleFinding, ctx: Context) -> Description:
        ranks, gpus = f.series("rank"), f.series("throttled_gpu")
        world = f.series("world")
        evidence: Evidence = {"world_size": int(world[-1]) if world else None, "duration_s": rnd(f.until - f.since)}
        advice: list[str] = []
        title = ""
        if gpus:
            gpu = int(gpus[-1])
            evidence.update(
                {
                    "gpu": gpu,
                    "sm_clock_median_mhz": rnd(med(f.series("sm_clock", f.since)), 0),
                    "others_sm_clock_median_mhz": rnd(med(f.series("others_sm_clock", f.since)), 0),
                }
            )
            why = [
                name
                for key, name in (("thermal", "thermal"), ("power_cap", "power cap"), ("hardware", "hardware slowdown"))
                if any(v > 0 for v in f.series(key))
            ]
            evidence["reasons"] = why
            title = f"Straggler: GPU{gpu} throttled ({', '.join(why) or 'clock events'}) while the other GPUs run free: every step waits for it"
            advice.append(
                f"Every rank waits for GPU{gpu} at each gradient all-reduce: fix its cooling or power "
                f"limit (see its thermal or power finding), or leave it out with gpus = [...] in the preset."
            )
        if ranks:
            rank = int(ranks[-1])
            slower = med(f.series("slower_pct", f.since))
            evidence.update(
                {
                    "rank": rank,
                    "slower_pct": rnd(slower, 1),
                    "rank_samples_per_sec": rnd(med(f.series("rank_rate", f.since)), 1),
                    "others_samples_per_sec": rnd(med(f.series("others_rate", f.since)), 1),
                }
            )
            if not title:
                title = f"Straggler: rank {rank} runs {slower or 0:.0f}% slower than the other ranks"
            advice.append(
                f"Rank {rank} falls behind the others: look at what only it does (its data-loader "
                f"workers and their CPU cores, its GPU's clocks and PCIe link, logging or checkpointing on rank {rank})."
            )
        advice.append("The run's throughput is set by its slowest rank: balanced ranks scale, one straggler caps all of them.")
        return Description(title or "Straggler", clean(evidence), advice)


def make_scaling_rules() -> list[Rule]:
    return [Straggler()]
