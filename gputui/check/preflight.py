"""The preflight stage of ``gputui check``: seconds, no load.

Driver and GPU checks come first, then the host, then the disk read test (the one
slow step); each result is reported the moment it is known.  A machine without a
usable GPU still gets every host check, and one line saying why there is no GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from gputui.check.preflight_gpu import (
    RESET_ADVICE,
    CudaDevices,
    count_cuda_devices,
    grade_gpu,
    grade_system,
    read_gpu_facts,
    read_system_facts,
)
from gputui.check.preflight_host import (
    READ_BUDGET_S,
    READ_QUICK_BUDGET_S,
    READ_TEST_BYTES,
    READ_TEST_QUICK_BYTES,
    SHM_PATH,
    STEAL_INTERVAL_S,
    STEAL_QUICK_INTERVAL_S,
    grade_disk_read,
    grade_host,
    grade_steal,
    measure_read_throughput,
    measure_steal,
    read_host_facts,
)
from gputui.check.result import FAIL, PREFLIGHT, CheckResult, skipped
from gputui.check.stage_context import GpuUnderTest, StageContext
from gputui.telemetry.nvml import GpuLost

PCI_DEVICES = Path("/sys/bus/pci/devices")
NVIDIA_VENDOR = "0x10de"
DISPLAY_CLASS = "0x03"  # PCI base class 03: VGA and 3D controllers (not NVIDIA's audio or NVSwitch functions)


def nvidia_pci_devices(root: Path = PCI_DEVICES) -> list[str]:
    """The PCI addresses of NVIDIA GPUs on the bus, whether or not a driver drives them."""
    found = []
    try:
        entries = sorted(root.iterdir())
    except OSError:
        return []
    for device in entries:
        try:
            vendor = (device / "vendor").read_text().strip().lower()
            kind = (device / "class").read_text().strip().lower()
        except OSError:
            continue
        if vendor == NVIDIA_VENDOR and kind.startswith(DISPLAY_CLASS):
            found.append(device.name)
    return found


def no_gpu_result(reason: str | None, pci_gpus: list[str] | None = None) -> CheckResult:
    """The one line a machine without a usable GPU gets in place of every GPU check: a
    skip where there is none, a failure where NVIDIA GPUs sit on the PCI bus unused."""
    reason = reason or "NVML found no GPU"
    if not pci_gpus:
        return skipped("gpu.none", PREFLIGHT, "GPU", f"no GPU to check: {reason}")
    shown = ", ".join(pci_gpus[:4]) + (f" and {len(pci_gpus) - 4} more" if len(pci_gpus) > 4 else "")
    return CheckResult(
        id="gpu.driver",
        group=PREFLIGHT,
        name="NVIDIA GPUs usable",
        status=FAIL,
        value=0,
        unit="GPUs",
        expected=len(pci_gpus),
        expected_source="NVIDIA devices on the PCI bus (/sys/bus/pci/devices)",
        detail=f"{len(pci_gpus)} NVIDIA GPU{'s' if len(pci_gpus) != 1 else ''} on the PCI bus ({shown})",
        cause=f"the machine has NVIDIA GPUs but NVML cannot use them: {reason}",
        advice=(
            "The driver is not loaded, its library is missing, or the two are of different versions: "
            "nvidia-smi says which; reboot after a driver update; in a container, start it with the GPUs "
            "(docker run --gpus all, the NVIDIA container toolkit)."
        ),
    )


def lost_gpu_result(gpu: GpuUnderTest, error: str) -> CheckResult:
    return CheckResult(
        id=f"gpu{gpu.index}.answers",
        group=PREFLIGHT,
        name="GPU answers NVML",
        status=FAIL,
        gpu=gpu.index,
        detail=error,
        cause="the GPU stopped answering while its facts were read (fallen off the bus, or hung)",
        advice=RESET_ADVICE,
    )


def run_preflight_stage(
    ctx: StageContext,
    *,
    cuda_devices: Callable[[], CudaDevices] = count_cuda_devices,
    cgroup_root: Path | None = None,
    shm_path: Path = SHM_PATH,
    cpu_times: Callable[[], Any] = psutil.cpu_times,
    read_test_bytes: int | None = None,
    pci_root: Path = PCI_DEVICES,
) -> None:
    """Report every preflight check through ``ctx.report``.  The keyword arguments let
    tests point the readers at fakes; the defaults read this machine."""
    _gpu_checks(ctx, cuda_devices, pci_root)
    if ctx.stopped.is_set():
        return
    for result in grade_host(read_host_facts(ctx.options.workdir, cgroup_root=cgroup_root, shm_path=shm_path), ctx.gpus):
        ctx.report(result)
    interval = STEAL_QUICK_INTERVAL_S if ctx.options.quick else STEAL_INTERVAL_S
    ctx.report(grade_steal(measure_steal(interval, cpu_times=cpu_times, sleep=ctx.stopped.wait), interval))
    if ctx.stopped.is_set():
        return
    if read_test_bytes is None:
        read_test_bytes = READ_TEST_QUICK_BYTES if ctx.options.quick else READ_TEST_BYTES
    budget = READ_QUICK_BUDGET_S if ctx.options.quick else READ_BUDGET_S
    ctx.report(grade_disk_read(measure_read_throughput(ctx.options.workdir, read_test_bytes, budget_s=budget, stopped=ctx.stopped.is_set)))


def _gpu_checks(ctx: StageContext, cuda_devices: Callable[[], CudaDevices], pci_root: Path) -> None:
    nvml = ctx.nvml
    if nvml is None or not ctx.gpus:
        reason = ctx.gpu_unavailable_reason
        if nvml is not None and reason is None:
            reason = "none of the GPUs asked for (--gpus) exists"
        # GPUs on the bus that NVML cannot use are a broken machine, not a machine without GPUs
        unused = nvidia_pci_devices(pci_root) if not ctx.options.gpus else []
        ctx.report(no_gpu_result(reason, unused))
        return
    for result in grade_system(read_system_facts(nvml), cuda_devices()):
        ctx.report(result)
    for gpu in ctx.gpus:
        if ctx.stopped.is_set():
            return
        try:
            handle = nvml.call("nvmlDeviceGetHandleByIndex", gpu.index)
            if handle is None:
                ctx.report(
                    skipped(
                        f"gpu{gpu.index}.answers",
                        PREFLIGHT,
                        "GPU answers NVML",
                        "NVML gives no handle for this GPU (no permission in this container?)",
                        gpu=gpu.index,
                    )
                )
                continue
            facts = read_gpu_facts(nvml, handle)
        except GpuLost as exc:
            ctx.report(lost_gpu_result(gpu, str(exc)))
            continue
        for result in grade_gpu(facts, gpu):
            ctx.report(result)
