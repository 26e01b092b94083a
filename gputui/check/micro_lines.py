"""The micro-benchmark child's protocol lines: what :mod:`gputui.check.micro` writes and
:mod:`gputui.check.micro_stage` reads, declared once for both sides.

The child builds each measurement's fields as one of the ``*Fields`` shapes and writes
them after the line's ``metric`` and GPU keys.  The stage reads a decoded payload as the
line its ``event`` names (:func:`read_line`); every key past ``event`` may be missing
(a child cut short, a newer child), so the stage reads them with ``get``.

Part of the child: it imports nothing of gputui.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypedDict, cast

# --- what the child measures: one line's fields, by metric -----------------------------


class SweepShape(TypedDict):
    """One shape of the matmul sweep: TFLOP/s, the median of ``windows``."""

    shape: list[int]
    value: float
    windows: int


class MatmulFields(TypedDict, total=False):
    """A matmul sweep: the best shape's sustained figure (``size`` for a square), and every shape."""

    value: float
    unit: str
    size: int
    shape: list[int]
    best_window: float
    windows: int
    sweep: list[SweepShape]


class CopyFields(TypedDict):
    """Device memory bandwidth."""

    value: float
    unit: str
    bytes: int


class HostCopyFields(TypedDict):
    """A pinned host-device copy, with the PCIe link read while it ran (None: not read)."""

    value: float
    unit: str
    bytes: int
    pcie_gen_loaded: int | None
    pcie_width_loaded: int | None


class PeerCopyFields(TypedDict):
    """A copy from one GPU to another."""

    value: float
    unit: str
    access: bool
    bytes: int


class AllreduceFields(TypedDict):
    """NCCL all-reduce bus bandwidth over ``gpus`` GPUs."""

    value: float
    unit: str
    gpus: int
    bytes: int


MicroFields = MatmulFields | CopyFields | HostCopyFields | PeerCopyFields | AllreduceFields


# --- the lines as the stage reads them ----------------------------------------------------


class _MeasuredEvent(TypedDict):
    event: Literal["micro"]


class Measured(_MeasuredEvent, total=False):
    """``micro``: one measurement.  ``gpu`` is the NVML index (``peer`` the other GPU of
    a copy between two); ``device`` names the CPU in ``--device cpu`` mode."""

    metric: str
    gpu: int
    peer: int
    device: str
    value: float
    unit: str
    size: int
    shape: list[int]
    best_window: float
    windows: int
    sweep: list[SweepShape]
    bytes: int
    pcie_gen_loaded: int
    pcie_width_loaded: int
    access: bool
    gpus: int


class _SkippedEvent(TypedDict):
    event: Literal["micro_skipped"]


class Skipped(_SkippedEvent, total=False):
    """``micro_skipped``: a measurement that could not be made, and why."""

    metric: str
    gpu: int
    peer: int
    device: str
    reason: str


class _UnavailableEvent(TypedDict):
    event: Literal["micro_unavailable"]


class Unavailable(_UnavailableEvent, total=False):
    """``micro_unavailable``: nothing can be measured (no PyTorch, no usable GPU)."""

    reason: str


class _EnvEvent(TypedDict):
    event: Literal["micro_env"]


class Env(_EnvEvent, total=False):
    """``micro_env``: the child's PyTorch and the GPUs it tests (nothing to grade)."""

    torch: str
    cuda: str | None
    device: str
    device_count: int
    devices: list[str]
    gpus: list[int]


MicroLine = Measured | Skipped | Unavailable | Env
EVENTS = ("micro", "micro_skipped", "micro_unavailable", "micro_env")


def read_line(payload: Mapping[str, object]) -> MicroLine | None:
    """A decoded protocol payload as the micro line its ``event`` names; None for any
    other event (a newer child's).  The keys are taken as the child wrote them."""
    if payload.get("event") not in EVENTS:
        return None
    return cast(MicroLine, payload)
