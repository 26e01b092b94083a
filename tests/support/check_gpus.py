"""GPUs under test and micro-benchmark lines, as the check's grading tests build them."""

from __future__ import annotations

from gputui.check.result import CheckResult
from gputui.check.stage_context import GpuUnderTest, gpus_under_test
from gputui.model import GpuInfo

GIB = 1024**3
COPY_METRICS = ("h2d", "d2h", "memory_bandwidth", "p2p", "allreduce")  # measured in GB/s


def gpu(name: str, memory_gib: float, index: int = 0, pcie: tuple[int, int] = (5, 16)) -> GpuUnderTest:
    info = GpuInfo(index=index, name=name, memory_total=int(memory_gib * GIB), pcie_max_gen=pcie[0], pcie_max_width=pcie[1])
    return gpus_under_test([info], None)[0]


def h200(index: int = 0) -> GpuUnderTest:
    return gpu("NVIDIA H200", 141, index)


def h100(index: int = 0) -> GpuUnderTest:
    return gpu("NVIDIA H100 80GB HBM3", 80, index)


def a100(index: int = 0) -> GpuUnderTest:
    """A model with no measured baseline: graded against its datasheet."""
    return gpu("NVIDIA A100-SXM4-80GB", 80, index, pcie=(4, 16))


def unknown_gpu(index: int = 0) -> GpuUnderTest:
    return gpu("Acme Accelerator 9000", 48, index, pcie=(4, 16))


def micro(metric: str, value: float, **fields) -> dict:
    """One ``micro`` line of the benchmark child."""
    return {"event": "micro", "metric": metric, "value": value, "unit": "GB/s" if metric in COPY_METRICS else "TFLOP/s", **fields}


def by_id(results: list[CheckResult]) -> dict[str, CheckResult]:
    ids = [r.id for r in results]
    assert len(ids) == len(set(ids)), ids
    return {r.id: r for r in results}
