"""Every number that turns a measurement into ok / warn / fail, in one place.

docs/check.md explains each; change them here and nowhere else.

Ratios compare a measurement with its expectation (``measured / expected``, or the
inverse for "lower is better").  An expectation is either a baseline measured on the
same GPU model with gputui's own check, or a datasheet peak times the share of it
that real code reaches (``gputui.gpus.models.ACHIEVABLE``): datasheet peaks are never reached, so a
healthy card judged against its raw peak would always warn.
"""

from __future__ import annotations

from typing import overload

from gputui.check.result import FAIL, OK, WARN, Verdict

OK_RATIO = 0.90  # ok at >= 90 % of expected
WARN_RATIO = 0.75  # warn at >= 75 %, fail below

# A GPU's own figures (matmul, memory bandwidth) against a baseline measured on the same
# model: repeat runs on one healthy card spread by about 1 % (docs/check.md, "How sure"),
# so 6 % under the baseline is past noise and a card 10 % slow warns; 15 % slow fails.
# Datasheet shares (below) are estimates across architectures and keep the wider bands.
BASELINE_OK_RATIO = 0.94
BASELINE_WARN_RATIO = 0.85
BASELINE_BANDED_METRICS = ("matmul_bf16", "matmul_fp16", "matmul_tf32", "memory_bandwidth")

# GPUs of one box (or one fleet) measure within a few percent of each other; one more than
# 8 % under the median of its peers on a micro-benchmark or workload is an outlier.
PEER_OUTLIER_BELOW = 0.08

# PCIe payload rate per lane and direction, GB/s, after line encoding (8b/10b up to
# Gen2, 128b/130b from Gen3): 2.5, 5, 8, 16, 32, 64 GT/s.
PCIE_LANE_GBS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}

# Host: the 4-8 CPU cores per GPU of seed 004 (AutoDL's guide).
CORES_PER_GPU_OK = 4.0
CORES_PER_GPU_FAIL = 1.0  # below one core per GPU the input pipeline cannot keep up at all
# Host RAM per GPU against that GPU's memory: a data pipeline, pinned buffers and a
# checkpoint in RAM need about as much host memory as the GPU has.
RAM_PER_VRAM_OK = 1.0
RAM_PER_VRAM_FAIL = 0.5
# /dev/shm carries every batch from DataLoader workers to the trainer: Docker's default
# 64 MB crashes workers ("bus error").  A 256-image 224 px float batch is 154 MB, and
# workers x prefetch batches are in flight at once.
SHM_FAIL_BYTES = 1 * 1024**3
SHM_WARN_BYTES = 4 * 1024**3
# Free disk in the working directory: checkpoints and datasets.
DISK_FREE_FAIL_BYTES = 5 * 1024**3
DISK_FREE_WARN_BYTES = 20 * 1024**3
# Sequential read of the working directory, MB/s: streaming ImageNet-size JPEGs
# (~110 KB) at 3,000 images/s needs ~330 MB/s.
DISK_READ_EXPECTED_MBS = 500.0
# cgroup CPU throttling: share of scheduler periods in which the quota ran out.
CPU_THROTTLED_WARN_SHARE = 0.05
CPU_THROTTLED_FAIL_SHARE = 0.25
# Steal time (a hypervisor giving our vCPUs to others), percent of CPU time.
STEAL_WARN_PCT = 5.0
STEAL_FAIL_PCT = 20.0
# Temperature under load: seed 003's 80 °C line (warn); the GPU's own slowdown
# threshold or thermal-slowdown flags (fail).
THERMAL_WARN_C = 80.0
# Retired GPU memory pages (pre-Ampere dynamic page retirement): NVIDIA's field
# guidance treats 60 retired pages (single- plus double-bit causes) as a board to
# replace; fewer is the mechanism working as designed.
RETIRED_PAGES_FAIL = 60
# Under load, share of samples with a throttle reason other than power capping
# (thermal, hardware slowdown, power brake) before it is a fault.
THROTTLE_FAULT_SHARE = 0.05


@overload
def grade_ratio(ratio: float, bands: tuple[float, float] = ...) -> Verdict: ...
@overload
def grade_ratio(ratio: float | None, bands: tuple[float, float] = ...) -> Verdict | None: ...
def grade_ratio(ratio: float | None, bands: tuple[float, float] = (OK_RATIO, WARN_RATIO)) -> Verdict | None:
    """ok / warn / fail for ``measured / expected`` (higher is better); None if unknown.
    ``bands`` is (ok at or above, warn at or above)."""
    if ratio is None:
        return None
    ok_at, warn_at = bands
    if ratio >= ok_at:
        return OK
    if ratio >= warn_at:
        return WARN
    return FAIL


def ratio_bands(metric: str, from_baseline: bool) -> tuple[float, float]:
    """The (ok, warn) ratios for ``metric``: tight against a same-model baseline for the
    GPU's own figures, the general ones otherwise."""
    if from_baseline and metric in BASELINE_BANDED_METRICS:
        return BASELINE_OK_RATIO, BASELINE_WARN_RATIO
    return OK_RATIO, WARN_RATIO


def grade_floor(value: float, *, ok_at: float, fail_below: float) -> Verdict:
    """ok at ``ok_at`` or more, fail below ``fail_below``, warn between."""
    if value >= ok_at:
        return OK
    if value < fail_below:
        return FAIL
    return WARN


def grade_ceiling(value: float, *, warn_at: float, fail_at: float) -> Verdict:
    """ok below ``warn_at``, fail at ``fail_at`` or more, warn between (lower is better)."""
    if value >= fail_at:
        return FAIL
    if value >= warn_at:
        return WARN
    return OK


def pcie_gbs(gen: int | None, width: int | None) -> float | None:
    """What a link of this generation and width carries per direction, GB/s."""
    if not gen or not width or gen not in PCIE_LANE_GBS:
        return None
    return PCIE_LANE_GBS[gen] * width
