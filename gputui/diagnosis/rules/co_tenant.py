"""Co-tenant: another process shares a GPU the run uses, holding its memory or keeping
its SMs busy, while the run is slower than it should be.

Whose a process is was decided by the sampler (gputui.telemetry.gpu_processes): only
processes known to be others' count (another process we can see, or another
container's), never a pid our PID namespace could not match.  A GPU counts as the run's
when one of the run's own processes is on it."""

from __future__ import annotations

from dataclasses import dataclass

from gputui.diagnosis.context import Context, rnd
from gputui.diagnosis.rules.base import MIB, Description, Observation, Rule, RuleFinding, clean, gib, throughput_evidence
from gputui.diagnosis.rules.gpu_busy import known_ceiling
from gputui.model import HIDDEN, RUN, GpuProcess, GpuSample, co_runners, memory_of

NAMED = 3  # processes the evidence names, biggest first


@dataclass
class _CoRunner:
    """One co-runner as seen over the run: its latest entry and its peaks."""

    process: GpuProcess
    memory_max: int
    sm_util_max: float | None
    last_t: float


class CoTenant(Rule):
    kind = "co_tenant"

    def __init__(self) -> None:
        self._seen: dict[int, dict[int, _CoRunner]] = {}  # gpu -> pid -> what was seen

    def observe(self, ctx: Context, gpu: GpuSample | None) -> Observation:
        assert gpu is not None  # a per-GPU rule: the engine asks it of each GPU
        processes = ctx.processes_of(gpu.index)
        if processes is None or not any(p.owner == RUN for p in processes):
            return Observation(None, {})  # no process list lately, or not a GPU the run uses
        s = ctx.settings
        others = co_runners(processes, s.cotenant_memory_mib * MIB, s.cotenant_sm_pct)
        self._remember(gpu.index, others, ctx.now)
        ceiling, rate = known_ceiling(ctx), ctx.recent_rate()
        below = None if ceiling is None or rate is None else rate < ceiling * s.cotenant_below_ceiling_pct / 100.0
        level = 0 if not others or below is False else (2 if below else 1)  # no ceiling to judge by: information
        utils = [p.sm_util for p in others if p.sm_util is not None]
        return Observation(
            level,
            {
                "others": float(len(others)),
                "others_memory": float(memory_of(others)),
                "others_sm_util": sum(utils) if utils else None,
                "ceiling": ceiling,
            },
        )

    def _remember(self, index: int, others: list[GpuProcess], t: float) -> None:
        seen = self._seen.setdefault(index, {})
        for p in others:
            known = seen.get(p.pid)
            memory = max(p.used_memory or 0, known.memory_max if known else 0)
            utils = [u for u in (p.sm_util, known.sm_util_max if known else None) if u is not None]
            seen[p.pid] = _CoRunner(p, memory, max(utils) if utils else None, t)

    def named(self, f: RuleFinding) -> list[_CoRunner]:
        """The co-runners seen during the finding, biggest memory first."""
        seen = [s for s in self._seen.get(f.gpu if f.gpu is not None else -1, {}).values() if f.since <= s.last_t]
        return sorted(seen, key=lambda s: -s.memory_max)[:NAMED]

    def describe(self, f: RuleFinding, ctx: Context) -> Description:
        named = self.named(f)
        memory = max(f.series("others_memory"), default=None)
        ceiling = max(f.series("ceiling"), default=None)
        sm = max(f.series("others_sm_util"), default=None)
        evidence = clean(
            {
                "gpu": f.gpu,
                "processes": [
                    clean(
                        {
                            "pid": s.process.pid,
                            "owner": s.process.owner,
                            "user": s.process.user,
                            "command": s.process.command or s.process.name,
                            "memory_max": s.memory_max,
                            "sm_util_max_pct": rnd(s.sm_util_max),
                        }
                    )
                    for s in named
                ],
                "others_max": int(max(f.series("others"), default=0)),
                "others_memory_max": int(memory) if memory is not None else None,
                "others_sm_util_max_pct": rnd(sm),
                "ceiling_samples_per_sec": rnd(ceiling, 1),
                **throughput_evidence(f),
                "duration_s": rnd(f.until - f.since),
            }
        )
        first = named[0] if named else None
        who = first.process.label() if first else "another process"
        holds = f"{gib(first.memory_max if first else memory)} GiB" + (f", SM {first.sm_util_max:.0f}%" if first and first.sm_util_max is not None else "")
        more = f" and {len(named) - 1} more" if len(named) > 1 else ""
        title = f"GPU{f.gpu} shared: {who} holds {holds}{more}"
        rate = f.rate()
        if ceiling and rate is not None:
            title += f"; throughput {rate:.0f}/s is {100.0 * rate / ceiling:.0f}% of the {ceiling:.0f}/s expected"
        advice = [
            "Another process on this GPU takes SM time and memory bandwidth from the run, and its memory from what the run can use: "
            "a benchmark measured now says little about the GPU.",
        ]
        if first is not None and first.process.owner == HIDDEN:
            advice.append("It belongs to another container on the same GPU: the machine's GPU is shared; ask the provider for an exclusive one.")
        else:
            advice.append("Ask its owner, wait for it to end, or move the run to a free GPU (CUDA_VISIBLE_DEVICES); `nvidia-smi` lists the GPU's processes.")
        advice.append("On a machine you administer, `nvidia-smi -c EXCLUSIVE_PROCESS` lets one process at a time use the GPU.")
        return Description(title, evidence, advice)
