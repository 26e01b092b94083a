"""Failing hardware: XID errors, new uncorrected ECC errors, row remapping pending or
failed, PCIe replays growing.  Critical at once and for the rest of the run: a GPU
that showed one of these is not trusted again until it has been reset and checked."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from gputui.diagnosis.context import Context, rnd
from gputui.diagnosis.hold import Hold
from gputui.diagnosis.rules.base import Description, Observation, Rule, RuleFinding, clean
from gputui.diagnosis_settings import Settings
from gputui.gpus.xid import ADVICE, REPLACE, RESET, UNKNOWN_ADVICE, XID_MEANINGS, xid_meaning
from gputui.model import GpuSample

REPLAY_WINDOW_S = 60.0


@dataclass
class _GpuHealth:
    """One GPU's counters at the start of the run and what has gone wrong since."""

    ecc_first: int | None = None
    replays_first: int | None = None
    replays: deque[tuple[float, int]] = field(default_factory=deque)
    xids: list[int] = field(default_factory=list)
    failing: bool = False


class FailingHardware(Rule):
    kind = "failing_hardware"
    during_warmup = True  # a fault does not wait for the measured phase
    include_lost = True  # XID 79 comes with the GPU falling off the bus

    def __init__(self) -> None:
        self._seen: dict[int, _GpuHealth] = {}

    def hold(self, s: Settings) -> Hold:
        return Hold(0.0, s.close_after_s, s.hold_share, s.clear_share)  # open on the first sign

    def observe(self, ctx: Context, gpu: GpuSample | None) -> Observation:
        assert gpu is not None  # a per-GPU rule: the engine asks it of each GPU
        seen = self._seen.setdefault(gpu.index, _GpuHealth())
        if seen.ecc_first is None:
            seen.ecc_first = gpu.ecc_uncorrected
        if seen.replays_first is None:
            seen.replays_first = gpu.pcie_replays
        seen.xids += gpu.xids or []
        ecc_new = gpu.ecc_uncorrected - seen.ecc_first if gpu.ecc_uncorrected is not None and seen.ecc_first is not None else None
        replay_rate = self._replay_rate(seen, ctx.now, gpu.pcie_replays)
        replays_new = gpu.pcie_replays - seen.replays_first if gpu.pcie_replays is not None and seen.replays_first is not None else None
        known = (gpu.ecc_uncorrected, gpu.remap_pending, gpu.pcie_replays, gpu.xids)
        if not seen.failing and all(v is None for v in known):
            return Observation(None, {})
        seen.failing = seen.failing or bool(
            gpu.xids
            or (ecc_new and ecc_new > 0)
            or gpu.remap_pending
            or gpu.remap_failure
            or (replay_rate is not None and replay_rate > ctx.settings.pcie_replays_per_min)
        )
        return Observation(
            3 if seen.failing else 0,
            {
                "xid_count": float(len(seen.xids)),
                "ecc_new": ecc_new,
                "remap_pending": None if gpu.remap_pending is None else float(gpu.remap_pending),
                "remap_failure": None if gpu.remap_failure is None else float(gpu.remap_failure),
                "replays_new": replays_new,
                "replay_rate": replay_rate,
            },
        )

    @staticmethod
    def _replay_rate(seen: _GpuHealth, t: float, replays: int | None) -> float | None:
        """PCIe replays per minute over the last REPLAY_WINDOW_S (or since the first reading)."""
        if replays is None:
            return None
        seen.replays.append((t, replays))
        while seen.replays and seen.replays[0][0] < t - REPLAY_WINDOW_S:
            seen.replays.popleft()
        t0, first = seen.replays[0]
        if t - t0 <= 0:
            return None
        return max(0, replays - first) / max(t - t0, 1.0) * 60.0

    def describe(self, f: RuleFinding, ctx: Context) -> Description:
        seen = self._seen.get(f.gpu) if f.gpu is not None else None
        xids = seen.xids if seen else []
        ecc_new = max(f.series("ecc_new"), default=None)
        pending = max(f.series("remap_pending"), default=0.0) > 0
        failure = max(f.series("remap_failure"), default=0.0) > 0
        replays_new = max(f.series("replays_new"), default=None)
        replay_rate = max(f.series("replay_rate"), default=None)
        too_many_replays = replay_rate is not None and replay_rate > ctx.settings.pcie_replays_per_min
        evidence = clean(
            {
                "gpu": f.gpu,
                "xid": xids[-1] if xids else None,
                "xid_count": len(xids) or None,
                **{f"xid_{x}_count": xids.count(x) for x in sorted(set(xids))},
                "ecc_uncorrected_new": int(ecc_new) if ecc_new else None,
                "row_remap_pending": 1 if pending else None,
                "row_remap_failure": 1 if failure else None,
                "pcie_replays_new": int(replays_new) if replays_new and too_many_replays else None,
                "pcie_replays_per_min_max": rnd(replay_rate) if too_many_replays else None,
                "pcie_replays_per_min_limit": ctx.settings.pcie_replays_per_min if too_many_replays else None,
            }
        )
        what = []
        for x in dict.fromkeys(xids):
            what.append(f"XID {x} ({xid_meaning(x)})")
        if ecc_new:
            what.append(f"{ecc_new:.0f} new uncorrected ECC error(s)")
        if failure:
            what.append("row remapping failed")
        elif pending:
            what.append("row remapping pending")
        if too_many_replays and replay_rate is not None:
            what.append(f"PCIe replays at {replay_rate:.0f}/min")
        title = f"GPU{f.gpu} failing hardware: " + "; ".join(what or ["a fault was reported"])
        advice = []
        for x in dict.fromkeys(xids):
            culprit = XID_MEANINGS.get(x, ("", ""))[1]
            text = f"XID {x}: " + ADVICE.get(culprit, UNKNOWN_ADVICE)
            if text not in advice:
                advice.append(text)
        if ecc_new or pending:
            advice.append("Uncorrectable memory errors: results computed since may be wrong. " + ADVICE[RESET])
        if failure:
            advice.append("Row remapping failed: the GPU has run out of spare memory rows. " + ADVICE[REPLACE])
        if too_many_replays:
            advice.append(
                "The PCIe link retransmits packets: a poorly seated card, a riser or a failing slot. "
                "Reseat or move the card; on a rented machine, report it and move."
            )
        advice.append("`nvidia-smi -q -d ECC,ROW_REMAPPER,PCIE` and the kernel log (`dmesg | grep -i xid`) show the details.")
        return Description(title, evidence, advice)
