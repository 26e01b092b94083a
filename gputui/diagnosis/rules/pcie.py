"""PCIe: a link trained below its generation or width, and host-to-GPU copies the GPU waits on."""

from __future__ import annotations

from gputui.diagnosis.context import Context, med, rnd
from gputui.diagnosis.rules.base import Description, Observation, Rule, RuleFinding, clean, percent, throughput_evidence
from gputui.model import GpuSample

# Bytes per second per lane and direction, after line coding, by PCIe generation.
PCIE_LANE_BPS = {1: 250e6, 2: 500e6, 3: 984.6e6, 4: 1969.2e6, 5: 3938.5e6, 6: 7877e6}


def link_bps(gen: int | None, width: int | None) -> float | None:
    if not gen or not width:
        return None
    return PCIE_LANE_BPS.get(gen, PCIE_LANE_BPS[max(PCIE_LANE_BPS)]) * width


class PcieLink(Rule):
    kind = "pcie_link"

    def observe(self, ctx: Context, gpu: GpuSample | None) -> Observation:
        assert gpu is not None  # a per-GPU rule: the engine asks it of each GPU
        info = ctx.gpu_info.get(gpu.index)
        if info is None or gpu.util_gpu is None or gpu.util_gpu < ctx.settings.pcie_busy_util_pct:
            return Observation(None, {})  # GPUs lower the link at idle to save power: judge it only under load
        gen_low = gpu.pcie_gen is not None and info.pcie_max_gen is not None and gpu.pcie_gen < info.pcie_max_gen
        width_low = gpu.pcie_width is not None and info.pcie_max_width is not None and gpu.pcie_width < info.pcie_max_width
        if gpu.pcie_gen is None and gpu.pcie_width is None:
            return Observation(None, {})
        return Observation(2 if gen_low or width_low else 0, {"gen": gpu.pcie_gen, "width": gpu.pcie_width, "util": gpu.util_gpu})

    def describe(self, f: RuleFinding, ctx: Context) -> Description:
        info = ctx.info_of(f.gpu)
        gens, widths = f.series("gen"), f.series("width")
        gen = int(min(gens)) if gens else None
        width = int(min(widths)) if widths else None
        max_gen, max_width = (info.pcie_max_gen, info.pcie_max_width) if info else (None, None)
        evidence = clean(
            {
                "gpu": f.gpu,
                "pcie_gen": gen,
                "pcie_max_gen": max_gen,
                "pcie_width": width,
                "pcie_max_width": max_width,
                "link_bps": rnd(link_bps(gen, width), 0),
                "max_link_bps": rnd(link_bps(max_gen, max_width), 0),
                "gpu_util_pct": rnd(med(f.series("util"))),
                "duration_s": rnd(f.until - f.since),
            }
        )
        title = f"GPU{f.gpu} PCIe link at Gen{gen} x{width} under load, below its Gen{max_gen} x{max_width}"
        advice = [
            "GPUs lower the link at idle to save power; this one stayed low while busy.",
            "Reseat the card or try another slot; check riser cables (an older-generation riser holds a newer card back) and the BIOS PCIe setting.",
            "Compare `nvidia-smi -q -d PCIE` (or `lspci -vv`: LnkSta against LnkCap). On a rented machine, report it.",
        ]
        return Description(title, evidence, advice)


class PcieTraffic(Rule):
    kind = "pcie_traffic"

    def observe(self, ctx: Context, gpu: GpuSample | None) -> Observation:
        assert gpu is not None  # a per-GPU rule: the engine asks it of each GPU
        if gpu.pcie_rx_bps is None:
            return Observation(None, {})
        s = ctx.settings
        info = ctx.gpu_info.get(gpu.index)
        gen = gpu.pcie_gen or (info.pcie_max_gen if info else None)
        width = gpu.pcie_width or (info.pcie_max_width if info else None)
        link = link_bps(gen, width)
        if link is None:
            return Observation(None, {})
        if gpu.sm_active is not None:
            under = gpu.sm_active < s.input_sm_active_pct
        elif gpu.util_gpu is not None:
            under = gpu.util_gpu < s.input_util_pct
        else:
            return Observation(None, {})
        heavy = gpu.pcie_rx_bps >= link * s.pcie_heavy_pct / 100.0
        return Observation(
            2 if heavy and under else 0,
            {
                "rx": gpu.pcie_rx_bps,
                "tx": gpu.pcie_tx_bps,
                "link": link,
                "gen": gen,
                "width": width,
                "sm": gpu.sm_active,
                "util": gpu.util_gpu,
            },
        )

    def describe(self, f: RuleFinding, ctx: Context) -> Description:
        rx, link = med(f.series("rx")), med(f.series("link"))
        gens, widths = f.series("gen"), f.series("width")
        sm = med(f.series("sm"))
        evidence = clean(
            {
                "gpu": f.gpu,
                "pcie_rx_bps": rnd(rx, 0),
                "pcie_tx_bps": rnd(med(f.series("tx")), 0),
                "link_bps": rnd(link, 0),
                "rx_link_pct": rnd(percent(rx, link)),
                "sm_active_pct": rnd(sm),
                "gpu_util_pct": rnd(med(f.series("util"))),
                **throughput_evidence(f),
                "duration_s": rnd(f.until - f.since),
            }
        )
        busy = f"SM activity {sm:.0f}%" if sm is not None else f"utilization {evidence.get('gpu_util_pct', 0):.0f}%"
        link_name = f"Gen{gens[-1]:.0f} x{widths[-1]:.0f}" if gens and widths else "PCIe"
        title = (
            f"GPU{f.gpu} waits on host-to-GPU copies: {(rx or 0) / 1e9:.1f} GB/s in "
            f"({evidence.get('rx_link_pct', 0):.0f}% of the {link_name} link) while {busy}"
        )
        advice = [
            "Pin host memory and copy asynchronously: DataLoader(pin_memory=True) with .to('cuda', non_blocking=True), and prefetch the next batch to the GPU.",
            "Send fewer bytes: uint8 images normalised on the GPU (4x fewer than float32); keep a dataset that fits in GPU memory on the GPU.",
            "If the link runs below its generation or width, see the PCIe link finding.",
        ]
        return Description(title, evidence, advice)
