"""A test double of the pynvml module.

It raises pynvml's own exception classes and fills pynvml's own ctypes structs (both
work without the NVML library), so the code under test sees what it would see on a
real machine.  Configure GPUs with :class:`FakeGpu`; make functions unsupported per
GPU, missing from the module, or make a GPU go lost between ticks.
"""

from __future__ import annotations

import ctypes
import queue
from collections import Counter
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml

SM_UTIL = pynvml.NVML_GPM_METRIC_SM_UTIL
SM_OCCUPANCY = pynvml.NVML_GPM_METRIC_SM_OCCUPANCY
ANY_TENSOR_UTIL = pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL
DRAM_BW_UTIL = pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL
PCIE_TX_PER_SEC = pynvml.NVML_GPM_METRIC_PCIE_TX_PER_SEC
PCIE_RX_PER_SEC = pynvml.NVML_GPM_METRIC_PCIE_RX_PER_SEC

GIB = 1024**3


def _h200_gpm() -> dict[int, float]:
    return {SM_UTIL: 42.0, SM_OCCUPANCY: 21.5, ANY_TENSOR_UTIL: 30.0, DRAM_BW_UTIL: 55.0, PCIE_TX_PER_SEC: 100.0, PCIE_RX_PER_SEC: 2.5}


@dataclass
class FakeGpu:
    name: str = "NVIDIA H200"
    uuid: str = "GPU-00000000-1111-2222-3333-444444444444"
    memory_total: int = 141 * GIB
    memory_used: int = 3 * GIB
    util_gpu: int = 97
    util_mem: int = 40
    temp_c: int = 51
    power_mw: int = 312_500
    power_limit_mw: int = 700_000
    default_limit_mw: int = 700_000
    energy_mj: int = 9_000_000
    sm_clock: int = 1980
    mem_clock: int = 3201
    sm_clock_max: int = 1980
    mem_clock_max: int = 3201
    thresholds: dict[int, int] = field(
        default_factory=lambda: {
            pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: 89,
            pynvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN: 95,
            pynvml.NVML_TEMPERATURE_THRESHOLD_GPU_MAX: 87,
        }
    )
    throttle_mask: int = 0x4 | 0x20
    # Cumulative clock-event times (ns) by NVML field id; a field left out answers
    # NOT_SUPPORTED in its slot, as a driver without that counter does.
    field_values: dict[int, int] = field(default_factory=lambda: {74: 5_000_000_000, 76: 0, 269: 0, 270: 0, 271: 0})
    pstate: int = 0
    pcie_gen: int = 5
    pcie_width: int = 16
    pcie_max_gen: int = 5
    pcie_max_width: int = 16
    pci: tuple[int, int, int] = (0, 0x19, 0)  # domain, bus, device
    processes: list[tuple[int, int | None]] = field(default_factory=lambda: [(4242, 2 * GIB), (4343, None)])
    graphics_processes: list[tuple[int, int | None]] = field(default_factory=list)  # (pid, used memory)
    # nvmlDeviceGetProcessUtilization's samples: (pid, timestamp in µs, SM %); only those
    # newer than the caller's timestamp are returned, none raises NOT_FOUND as NVML does
    process_util: list[tuple[int, int, int]] = field(default_factory=list)
    gpm: dict[int, float] | None = field(default_factory=_h200_gpm)  # None: no GPM
    # Preflight facts: modes are NVML's [current, pending] pairs; ECC counts are keyed
    # (error type, counter type); retired pages by cause; remapped rows as NVML's
    # (correctable, uncorrectable, pending, failure).
    persistence_mode: int = 1
    mig_mode: tuple[int, int] = (0, 0)
    ecc_mode: tuple[int, int] = (1, 1)
    ecc_errors: dict[tuple[int, int], int] = field(default_factory=dict)  # absent: 0
    retired_pages: dict[int, list[int]] = field(default_factory=dict)  # absent: none
    retired_pages_pending: int = 0
    remapped_rows: tuple[int, int, int, int] = (0, 0, 0, 0)
    pcie_replays: int = 0  # nvmlDeviceGetPcieReplayCounter
    event_types: int = pynvml.nvmlEventTypeAll  # what nvmlDeviceGetSupportedEventTypes reports
    unsupported: set[str] = field(default_factory=set)  # raise NotSupported on this GPU
    lost: bool = False  # every call on this GPU raises lost_error
    lost_error: type = pynvml.NVMLError_GpuIsLost


class _Handle:
    def __init__(self, index: int) -> None:
        self.index = index


class _EventSet:
    """Events registered per GPU; delivered through a thread-safe queue."""

    def __init__(self) -> None:
        self.registered: dict[int, int] = {}  # gpu index -> event type mask
        self.pending: queue.Queue = queue.Queue()
        self.freed = False


class FakeNvml:
    """Stands in for the ``pynvml`` module.  ``calls`` counts every nvml* call."""

    def __init__(
        self,
        gpus: list[FakeGpu] | None = None,
        *,
        init_error: type | None = None,
        missing: set[str] | frozenset[str] = frozenset(),
        driver: str = "580.159.03",
        cuda: int = 13000,
    ) -> None:
        self.gpus = [FakeGpu()] if gpus is None else gpus
        self.init_error = init_error
        self.missing = set(missing)
        self.driver, self.cuda = driver, cuda
        self.calls: Counter[str] = Counter()
        self.initialized = 0
        self._handles = [_Handle(i) for i in range(len(self.gpus))]
        self._gpm_buffers: dict[int, ctypes.c_uint64] = {}  # address -> keeps it alive
        self._gpm_taken: dict[int, tuple[int, int]] = {}  # address -> (gpu index, seq)
        self._seq = 0
        self.event_sets: list[_EventSet] = []

    # Constants, error classes and ctypes structs come from the real module; a
    # function listed in ``missing`` is absent, as in an older nvidia-ml-py.
    def __getattribute__(self, name: str) -> Any:
        if name.startswith("nvml") and name in object.__getattribute__(self, "missing"):
            raise AttributeError(name)
        return object.__getattribute__(self, name)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("nvml") and callable(getattr(pynvml, name, None)):
            raise AttributeError(name)  # a function this double does not implement
        return getattr(pynvml, name)

    # --- helpers --------------------------------------------------------------------

    def _count(self, fn: str) -> None:
        self.calls[fn] += 1
        if not self.initialized:
            raise pynvml.NVMLError_Uninitialized()

    def _gpu(self, fn: str, handle: _Handle) -> FakeGpu:
        self._count(fn)
        gpu = self.gpus[handle.index]
        if gpu.lost:
            raise gpu.lost_error()
        if fn in gpu.unsupported:
            raise pynvml.NVMLError_NotSupported()
        return gpu

    @staticmethod
    def _address(sample: Any) -> int:
        return ctypes.cast(sample, ctypes.c_void_p).value or 0

    # --- system ---------------------------------------------------------------------

    def nvmlInit(self) -> None:
        self.calls["nvmlInit"] += 1
        if self.init_error is not None:
            raise self.init_error()
        self.initialized += 1

    def nvmlShutdown(self) -> None:
        self._count("nvmlShutdown")
        self.initialized -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._count("nvmlSystemGetDriverVersion")
        return self.driver

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._count("nvmlSystemGetCudaDriverVersion")
        return self.cuda

    def nvmlDeviceGetCount(self) -> int:
        self._count("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:
        self._count("nvmlDeviceGetHandleByIndex")
        if index >= len(self.gpus):
            raise pynvml.NVMLError_InvalidArgument()
        return self._handles[index]

    # --- static facts ---------------------------------------------------------------

    def nvmlDeviceGetName(self, h):
        return self._gpu("nvmlDeviceGetName", h).name

    def nvmlDeviceGetUUID(self, h):
        return self._gpu("nvmlDeviceGetUUID", h).uuid

    def nvmlDeviceGetPowerManagementDefaultLimit(self, h):
        return self._gpu("nvmlDeviceGetPowerManagementDefaultLimit", h).default_limit_mw

    def nvmlDeviceGetTemperatureThreshold(self, h, threshold):
        gpu = self._gpu("nvmlDeviceGetTemperatureThreshold", h)
        if threshold not in gpu.thresholds:
            raise pynvml.NVMLError_NotSupported()
        return gpu.thresholds[threshold]

    def nvmlDeviceGetMaxClockInfo(self, h, clock):
        gpu = self._gpu("nvmlDeviceGetMaxClockInfo", h)
        return {pynvml.NVML_CLOCK_SM: gpu.sm_clock_max, pynvml.NVML_CLOCK_MEM: gpu.mem_clock_max}[clock]

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h):
        return self._gpu("nvmlDeviceGetMaxPcieLinkGeneration", h).pcie_max_gen

    def nvmlDeviceGetMaxPcieLinkWidth(self, h):
        return self._gpu("nvmlDeviceGetMaxPcieLinkWidth", h).pcie_max_width

    def nvmlDeviceGetPciInfo(self, h):
        domain, bus, device = self._gpu("nvmlDeviceGetPciInfo", h).pci
        bus_id = f"{domain:08X}:{bus:02X}:{device:02X}.0".encode()
        return pynvml.nvmlPciInfo_t(busIdLegacy=bus_id, domain=domain, bus=bus, device=device, busId=bus_id)

    # --- per tick -------------------------------------------------------------------

    def nvmlDeviceGetUtilizationRates(self, h):
        gpu = self._gpu("nvmlDeviceGetUtilizationRates", h)
        return pynvml.c_nvmlUtilization_t(gpu=gpu.util_gpu, memory=gpu.util_mem)

    def nvmlDeviceGetMemoryInfo(self, h, version=None):
        gpu = self._gpu("nvmlDeviceGetMemoryInfo", h)
        used = gpu.memory_used
        return pynvml.c_nvmlMemory_t(total=gpu.memory_total, free=gpu.memory_total - used, used=used)

    def nvmlDeviceGetTemperatureV(self, h, sensor, version=pynvml.nvmlTemperature_v1):
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return self._gpu("nvmlDeviceGetTemperatureV", h).temp_c

    def nvmlDeviceGetTemperature(self, h, sensor):
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return self._gpu("nvmlDeviceGetTemperature", h).temp_c

    def nvmlDeviceGetPowerUsage(self, h):
        return self._gpu("nvmlDeviceGetPowerUsage", h).power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return self._gpu("nvmlDeviceGetEnforcedPowerLimit", h).power_limit_mw

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        return self._gpu("nvmlDeviceGetTotalEnergyConsumption", h).energy_mj

    def nvmlDeviceGetFieldValues(self, h, field_ids):
        gpu = self._gpu("nvmlDeviceGetFieldValues", h)
        values = (pynvml.c_nvmlFieldValue_t * len(field_ids))()
        for slot, field_id in zip(values, field_ids):
            slot.fieldId = field_id
            if field_id in gpu.field_values:
                slot.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
                slot.value.ullVal = gpu.field_values[field_id]
            else:
                slot.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
        return values

    def nvmlDeviceGetClockInfo(self, h, clock):
        gpu = self._gpu("nvmlDeviceGetClockInfo", h)
        return {pynvml.NVML_CLOCK_SM: gpu.sm_clock, pynvml.NVML_CLOCK_MEM: gpu.mem_clock}[clock]

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return self._gpu("nvmlDeviceGetCurrentClocksEventReasons", h).throttle_mask

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h):
        return self._gpu("nvmlDeviceGetCurrentClocksThrottleReasons", h).throttle_mask

    def nvmlDeviceGetPerformanceState(self, h):
        return self._gpu("nvmlDeviceGetPerformanceState", h).pstate

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h):
        return self._gpu("nvmlDeviceGetCurrPcieLinkGeneration", h).pcie_gen

    def nvmlDeviceGetCurrPcieLinkWidth(self, h):
        return self._gpu("nvmlDeviceGetCurrPcieLinkWidth", h).pcie_width

    def nvmlDeviceGetPcieThroughput(self, h, counter):
        self._gpu("nvmlDeviceGetPcieThroughput", h)
        return 1234  # KB/s; the real call blocks ~20 ms

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        gpu = self._gpu("nvmlDeviceGetComputeRunningProcesses", h)
        return [SimpleNamespace(pid=pid, usedGpuMemory=used, gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF) for pid, used in gpu.processes]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h):
        gpu = self._gpu("nvmlDeviceGetGraphicsRunningProcesses", h)
        return [SimpleNamespace(pid=pid, usedGpuMemory=used, gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF) for pid, used in gpu.graphics_processes]

    def nvmlDeviceGetProcessUtilization(self, h, timestamp):
        gpu = self._gpu("nvmlDeviceGetProcessUtilization", h)
        samples = [pynvml.c_nvmlProcessUtilizationSample_t(pid, at, sm, 0, 0, 0) for pid, at, sm in gpu.process_util if at > timestamp]
        if not samples:
            raise pynvml.NVMLError_NotFound()
        return samples

    # --- GPM ------------------------------------------------------------------------

    def nvmlGpmQueryDeviceSupport(self, h):
        gpu = self._gpu("nvmlGpmQueryDeviceSupport", h)
        support = pynvml.c_nvmlGpmSupport_t()
        support.version = pynvml.NVML_GPM_SUPPORT_VERSION
        support.isSupportedDevice = int(gpu.gpm is not None)
        return support

    def nvmlGpmSampleAlloc(self):
        self._count("nvmlGpmSampleAlloc")
        buffer = ctypes.c_uint64()
        sample = ctypes.cast(ctypes.pointer(buffer), pynvml.c_nvmlGpmSample_t)
        self._gpm_buffers[self._address(sample)] = buffer
        return sample

    def nvmlGpmSampleFree(self, sample):
        self._count("nvmlGpmSampleFree")
        address = self._address(sample)
        if address not in self._gpm_buffers:
            raise pynvml.NVMLError_InvalidArgument()
        del self._gpm_buffers[address]
        self._gpm_taken.pop(address, None)

    def nvmlGpmSampleGet(self, h, sample):
        self._gpu("nvmlGpmSampleGet", h)
        address = self._address(sample)
        if address not in self._gpm_buffers:
            raise pynvml.NVMLError_InvalidArgument()
        self._seq += 1
        self._gpm_taken[address] = (h.index, self._seq)
        return sample

    def nvmlGpmMetricsGet(self, request):
        self._count("nvmlGpmMetricsGet")
        first = self._gpm_taken.get(self._address(request.sample1))
        second = self._gpm_taken.get(self._address(request.sample2))
        # Real NVML wants two samples of the same GPU, the older one first.
        if request.version != pynvml.NVML_GPM_METRICS_GET_VERSION or first is None or second is None or first[0] != second[0] or first[1] >= second[1]:
            raise pynvml.NVMLError_InvalidArgument()
        gpu = self.gpus[first[0]]
        if gpu.lost:
            raise gpu.lost_error()
        for slot in range(request.numMetrics):
            metric = request.metrics[slot]
            if gpu.gpm and metric.metricId in gpu.gpm:
                metric.value = gpu.gpm[metric.metricId]
                metric.nvmlReturn = pynvml.NVML_SUCCESS
            else:
                metric.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
        return request

    @property
    def gpm_buffers_in_use(self) -> int:
        return len(self._gpm_buffers)

    # --- preflight facts ------------------------------------------------------------

    def nvmlDeviceGetIndex(self, h):
        self._gpu("nvmlDeviceGetIndex", h)
        return h.index

    def nvmlDeviceGetPersistenceMode(self, h):
        return self._gpu("nvmlDeviceGetPersistenceMode", h).persistence_mode

    def nvmlDeviceGetMigMode(self, h):
        return list(self._gpu("nvmlDeviceGetMigMode", h).mig_mode)

    def nvmlDeviceGetEccMode(self, h):
        return list(self._gpu("nvmlDeviceGetEccMode", h).ecc_mode)

    def nvmlDeviceGetTotalEccErrors(self, h, error_type, counter_type):
        gpu = self._gpu("nvmlDeviceGetTotalEccErrors", h)
        if not gpu.ecc_mode[0]:
            raise pynvml.NVMLError_NotSupported()  # as real NVML with ECC off
        return gpu.ecc_errors.get((error_type, counter_type), 0)

    def nvmlDeviceGetRetiredPages(self, h, cause):
        return list(self._gpu("nvmlDeviceGetRetiredPages", h).retired_pages.get(cause, []))

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h):
        return self._gpu("nvmlDeviceGetRetiredPagesPendingStatus", h).retired_pages_pending

    def nvmlDeviceGetRemappedRows(self, h):
        return tuple(self._gpu("nvmlDeviceGetRemappedRows", h).remapped_rows)

    def nvmlDeviceGetPcieReplayCounter(self, h):
        return self._gpu("nvmlDeviceGetPcieReplayCounter", h).pcie_replays

    # --- events ---------------------------------------------------------------------

    def nvmlEventSetCreate(self):
        self._count("nvmlEventSetCreate")
        event_set = _EventSet()
        self.event_sets.append(event_set)
        return event_set

    def nvmlDeviceGetSupportedEventTypes(self, h):
        return self._gpu("nvmlDeviceGetSupportedEventTypes", h).event_types

    def nvmlDeviceRegisterEvents(self, h, event_types, event_set):
        gpu = self._gpu("nvmlDeviceRegisterEvents", h)
        if event_types & ~gpu.event_types:
            raise pynvml.NVMLError_NotSupported()
        event_set.registered[h.index] = event_set.registered.get(h.index, 0) | event_types

    def nvmlEventSetWait_v2(self, event_set, timeout_ms):
        return self._wait("nvmlEventSetWait_v2", event_set, timeout_ms)

    def nvmlEventSetWait(self, event_set, timeout_ms):
        return self._wait("nvmlEventSetWait", event_set, timeout_ms)

    def _wait(self, fn: str, event_set: _EventSet, timeout_ms: int) -> Any:
        self._count(fn)
        try:
            return event_set.pending.get(timeout=timeout_ms / 1000.0)
        except queue.Empty:
            raise pynvml.NVMLError_Timeout() from None

    def nvmlEventSetFree(self, event_set):
        self._count("nvmlEventSetFree")
        event_set.freed = True

    def emit_xid(self, index: int, xid: int) -> int:
        """The driver reports XID ``xid`` on GPU ``index``: every event set registered for
        XIDs on it receives the event.  Returns how many sets received it."""
        kind = pynvml.nvmlEventTypeXidCriticalError
        received = 0
        for event_set in self.event_sets:
            if not event_set.freed and event_set.registered.get(index, 0) & kind:
                event_set.pending.put(
                    SimpleNamespace(device=self._handles[index], eventType=kind, eventData=xid, gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF)
                )
                received += 1
        return received

    @property
    def event_sets_in_use(self) -> int:
        return sum(not event_set.freed for event_set in self.event_sets)
