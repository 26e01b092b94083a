"""The extra numbers a check result carries (:attr:`CheckResult.data
<gputui.check.result.CheckResult.data>`), one shape per kind of check.

They are written as the result's ``data`` object (the recording's ``check`` events, ``gputui
check --json``) in the order their keys are set, and read back from there unchecked
(:meth:`CheckResult.from_dict <gputui.check.result.CheckResult.from_dict>`).
"""

from __future__ import annotations

from typing import TypedDict

from gputui.check.micro_lines import SweepShape


class NoData(TypedDict):
    """A result without extra numbers (``data`` is left out of its JSON)."""


class DatasheetData(TypedDict, total=False):
    """A micro-benchmark graded against the datasheet: a matmul's sweep (size only for a
    square), or the bytes a memory copy moved, then the share of the datasheet's peak."""

    size: int
    shape: list[int]
    best_window: float
    windows: int
    sweep: list[SweepShape]
    bytes: int
    datasheet_peak: float
    datasheet_share: float


class HostCopyData(TypedDict):
    """A host-device copy: its size and the PCIe link read while it ran (None: not read)."""

    bytes: int | None
    pcie_gen_loaded: int | None
    pcie_width_loaded: int | None


class LinkData(TypedDict):
    """The PCIe link under load against the one the card is built for."""

    gen: int | None
    width: int | None
    card_gen: int | None
    card_width: int | None


class PeerCopyData(TypedDict):
    """A copy from one GPU to another (``access``: direct peer access)."""

    access: bool | None
    peer: int | None
    bytes: int | None


class AllreduceData(TypedDict):
    gpus: int | None
    bytes: int | None


class EccData(TypedDict):
    """Uncorrected ECC errors since the driver loaded and over the card's life."""

    volatile: int | None
    aggregate: int | None


class RetiredPagesData(TypedDict):
    single_bit: int | None
    double_bit: int | None
    pending: bool | None


class RemappedRowsData(TypedDict):
    correctable: int | None
    uncorrectable: int | None
    pending: bool | None
    failure: bool | None


class DiskReadData(TypedDict):
    """The disk read test: the file's size, the block read at a time, whether with O_DIRECT,
    and each pass's rate."""

    bytes: int
    block_bytes: int
    direct: bool
    passes_mb_per_s: list[float]


class CoRunnersData(TypedDict):
    """Other processes on the GPU while it was loaded, biggest first."""

    pids: list[int]


class ThrottleData(TypedDict):
    """Each clock-event reason's share of the loaded samples."""

    shares: dict[str, float]
    samples: int


class XidEvent(TypedDict):
    xid: int
    at: float  # seconds since the epoch


class XidData(TypedDict):
    events: list[XidEvent]


class WorkloadData(TypedDict, total=False):
    """A standard workload's run: its batch, its preset and, when its FLOPs are known, what it achieved."""

    batch_size: int | None
    preset: str
    achieved_tflops: float
    share_of_bf16_peak: float


class PipelineData(TypedDict, total=False):
    """The host image pipeline, and how many cores it would take to feed the GPU."""

    workers: int
    cores_available: float
    per_core_images_per_sec: float
    gpu_images_per_sec: float
    cores_to_feed_gpu: float | None


CheckData = (
    NoData
    | DatasheetData
    | HostCopyData
    | LinkData
    | PeerCopyData
    | AllreduceData
    | EccData
    | DiskReadData
    | RetiredPagesData
    | RemappedRowsData
    | CoRunnersData
    | ThrottleData
    | XidData
    | WorkloadData
    | PipelineData
)
