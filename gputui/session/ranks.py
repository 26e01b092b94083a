"""A data-parallel run's ranks as the dashboard and the exporter show them live: which
GPU each rank drives, and the scaling so far against the one-GPU baseline.

Rank N drives the Nth GPU the child sees: torchrun's local rank N calls
``torch.cuda.set_device(N)``, MirroredStrategy's replica N takes the Nth visible GPU.
A pinned preset shows the child its GPUs in the order written (``CUDA_VISIBLE_DEVICES``
with ``CUDA_DEVICE_ORDER=PCI_BUS_ID``), and the session narrows its telemetry to the
same GPUs in the same order, so the header's ``gpus`` list is the ranks' order.
Unpinned, the header lists every GPU in NVML (PCI bus) order, which is CUDA's too on a
machine of one GPU model (pin the GPUs on a mixed box to be sure).
"""

from __future__ import annotations

from collections.abc import Mapping

from gputui.record import events as ev
from gputui.record.schema import Header
from gputui.session.summary import scaling_efficiency

STRAGGLER = "straggler"  # the diagnosis rule's finding kind (gputui.diagnosis.rules.straggler)


def rank_gpus(header: Header | None) -> list[int]:
    """The NVML index each rank drives, rank 0 first (only single-machine runs: a rank
    past the list is on another machine)."""
    return [g.index for g in header.gpu_list] if header is not None else []


def gpu_of_rank(order: list[int], rank: int) -> int | None:
    return order[rank] if 0 <= rank < len(order) else None


def header_baseline_rate(header: Header | None) -> float | None:
    """The one-GPU baseline's samples/s the session was given (``--baseline`` or
    ``--baseline-run``; the header's ``baseline``), else None."""
    rate = header.baseline.samples_per_sec if header is not None and header.baseline is not None else None
    return float(rate) if rate is not None and rate > 0 else None


def world_size_of(data: Mapping[str, object]) -> int | None:
    """A data-parallel size from a workload or rank_throughput event: torchrun's ranks,
    or MirroredStrategy's replicas in one process; None for a plain run."""
    for key in ("world_size", "replicas", "ranks"):
        value = data.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def live_efficiency(total_rate: float | None, world_size: int | None, baseline_rate: float | None) -> float | None:
    """The latest total over N times the one-GPU rate; None unless data-parallel (N ≥ 2)."""
    if world_size is None or world_size < 2:
        return None
    return scaling_efficiency(total_rate, world_size, baseline_rate)


def straggler_gpus(findings: list[ev.Finding], order: list[int]) -> set[int]:
    """The GPUs open straggler findings name: a throttled GPU, or the GPU of a slow rank."""
    out: set[int] = set()
    for finding in findings:
        if finding.kind != STRAGGLER or finding.state != "open":
            continue
        evidence = finding.evidence or {}
        throttled, rank = evidence.get("gpu"), evidence.get("rank")
        if isinstance(throttled, int):
            out.add(throttled)
        if isinstance(rank, int):
            gpu = gpu_of_rank(order, rank)
            if gpu is not None:
                out.add(gpu)
    return out
