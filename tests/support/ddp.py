"""A scripted data-parallel run for the dashboard tests (no tests here): the
ScriptedSession's script, plus each rank's own reading beside every total, as
gputui.session.session emits them for torchrun's ranks."""

from __future__ import annotations

from gputui.record import events as ev
from gputui.session.session import SessionConfig
from tests.support.fake_nvml import FakeGpu, FakeNvml
from tests.support.tui import ScriptedSession, demo_gpus

SLOW_SHARE = 0.8  # the slow rank's share of an even split


class DataParallelSession(ScriptedSession):
    def __init__(self, config: SessionConfig, nvml: FakeNvml, world: int, slow_rank: int | None, findings: list[dict] | None) -> None:
        super().__init__(config, nvml, 24, findings)
        self.world = world
        self.slow_rank = slow_rank

    def _event(self, t: float, what: str, **data) -> None:
        super()._event(t, what, **data)
        if what == ev.THROUGHPUT:  # each rank's share of the total, the slow one behind
            for rank in range(self.world):
                share = data["samples_per_sec"] / self.world * (SLOW_SHARE if rank == self.slow_rank else 1.0)
                super()._event(t, ev.RANK_THROUGHPUT, samples_per_sec=round(share), rank=rank, ranks=self.world, phase=data.get("phase"), source="gputui")


def ddp_factory(gpus: list[FakeGpu] | None = None, world: int = 2, slow_rank: int | None = None, findings: list[dict] | None = None):
    def make(config: SessionConfig) -> DataParallelSession:
        return DataParallelSession(config, FakeNvml(gpus if gpus is not None else demo_gpus()), world, slow_rank, findings)

    return make


def straggler_finding(rank: int) -> dict:
    """What the Straggler rule opens when one rank falls behind."""
    return {
        "id": "straggler-1",
        "kind": "straggler",
        "state": "open",
        "severity": "warning",
        "title": f"Straggler: rank {rank} runs 20% slower than the other ranks",
        "since": 8.0,
        "evidence": {"world_size": 8, "rank": rank, "slower_pct": 20.0},
        "advice": [f"Rank {rank} falls behind the others"],
    }
