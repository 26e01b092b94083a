"""Which NVML GPUs a preset's ``gpus`` key means.

A preset pins GPUs the way CUDA does, with ``CUDA_VISIBLE_DEVICES``: by index or by
UUID (a unique prefix is enough, as for CUDA).  The child gets
``CUDA_DEVICE_ORDER=PCI_BUS_ID`` too, so its index N is NVML's index N (CUDA's default
order is "fastest first", which differs on machines with mixed GPUs).
"""

from __future__ import annotations

from collections.abc import Sequence

from gputui.model import GpuInfo


def match_gpus(infos: Sequence[GpuInfo], selectors: Sequence[str]) -> tuple[list[int], list[str]]:
    """The NVML indices ``selectors`` name, in the order given, and the selectors that
    name no GPU here (unknown index, unknown or ambiguous UUID prefix)."""
    found: list[int] = []
    unmatched: list[str] = []
    for selector in selectors:
        index = _match_one(infos, selector.strip())
        if index is None:
            unmatched.append(selector)
        elif index not in found:
            found.append(index)
    return found, unmatched


def _match_one(infos: Sequence[GpuInfo], selector: str) -> int | None:
    if selector.isdigit():
        wanted = int(selector)
        return wanted if any(info.index == wanted for info in infos) else None
    prefix = selector.lower()
    hits = [info.index for info in infos if info.uuid and info.uuid.lower().startswith(prefix)]
    return hits[0] if len(hits) == 1 else None
