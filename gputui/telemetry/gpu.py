"""GPU telemetry from NVML: static facts once (:class:`GpuInfo`), then one
:class:`GpuSample` per GPU per tick.

Every NVML call goes through :class:`~gputui.telemetry.nvml.Nvml`, which turns
"unsupported" into ``None`` and a GPU that went away into :class:`GpuLost`.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from gputui.model import GpuInfo, GpuProcess, GpuSample
from gputui.telemetry.gpu_processes import ProcessAttributor, merge_lists
from gputui.telemetry.nvml import GpuLost, Nvml

log = logging.getLogger(__name__)

# Clock-event ("throttle") reason bits, nvmlClocksEventReason* in nvml.h.
THROTTLE_REASONS: dict[int, str] = {
    0x1: "GpuIdle",
    0x2: "ApplicationsClocksSetting",
    0x4: "SwPowerCap",
    0x8: "HwSlowdown",
    0x10: "SyncBoost",
    0x20: "SwThermalSlowdown",
    0x40: "HwThermalSlowdown",
    0x80: "HwPowerBrakeSlowdown",
    0x100: "DisplayClockSetting",
}


def decode_throttle_reasons(mask: int) -> list[str]:
    """Names of the bits set in ``mask``, lowest bit first.  Bits newer than this
    table are kept as hex (``"0x200"``) rather than silently dropped."""
    names = []
    bit = 1
    while bit <= mask:
        if mask & bit:
            names.append(THROTTLE_REASONS.get(bit, f"0x{bit:x}"))
        bit <<= 1
    return names


NO_GPM_ENV = "GPUTUI_NO_GPM"  # =1: sample as on a GPU without GPM (the fallback rules' test)


def gpm_wanted(setting: bool = True) -> bool:
    """Whether to sample GPM: the ``[diagnosis] use_gpm`` setting, unless the
    environment says ``GPUTUI_NO_GPM=1``."""
    return setting and os.environ.get(NO_GPM_ENV, "").strip() not in ("1", "true", "yes")


PCIE_LINK_TTL_S = 5.0  # link gen/width change only with power state: no need per tick
# The enforced power limit, the memory clock and the lists of processes change rarely
# (an admin, a process starting): read once a second (the power limit and the clock
# repeated between, the processes only on the tick that read them), they take a third
# of a 10 Hz tick's NVML calls off it.
SLOW_FIELDS_TTL_S = 1.0
# Each process's SM share (nvmlDeviceGetProcessUtilization) is the dearest call of a tick
# (the driver spins while it waits; docs/performance.md#figures-behind-the-codes-choices), and
# most of the sampler's NVML time at 1 s. It is a mean over NVML's samples since the
# last read, so a read this often loses only resolution; the GPU's process list changing
# (a newcomer, a process gone) reads it at once, and the shares are carried between.
PROCESS_UTIL_EVERY_S = 5.0
# Cumulative counters are read this often and whenever a caller asks for an exact
# reading (a phase change, the run's end): a difference of two readings is exact
# whatever lies between.  Energy and the time in each clock-event reason are dear to read
# (docs/performance.md#figures-behind-the-codes-choices): read every 30 s, NVIDIA's own
# example scrape interval for dcgm-exporter, they feed the exporter's counters and the
# summary (read exactly at its ends) and no live rule.
COUNTER_INTERVAL_S = 30.0
# ECC errors, row remaps and PCIe replays (cheap to read) feed the failing-hardware rule: a
# finding within 10 s (XIDs, the urgent sign, are events and come at once).
FAULT_COUNTER_INTERVAL_S = 10.0

# Clock-event reason -> NVML field id of its cumulative time (ns), nvml.h's
# NVML_FI_DEV_CLOCKS_EVENT_REASON_* (74 and 76 are the PERF_POLICY ids older
# nvidia-ml-py names them by).
THROTTLE_TIME_FIELDS: dict[str, tuple[str, int]] = {
    "SwPowerCap": ("NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP", 74),
    "SyncBoost": ("NVML_FI_DEV_CLOCKS_EVENT_REASON_SYNC_BOOST", 76),
    "SwThermalSlowdown": ("NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN", 269),
    "HwThermalSlowdown": ("NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN", 270),
    "HwPowerBrakeSlowdown": ("NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN", 271),
}
_MIB = 1024 * 1024

# GpuSample field <- GPM metric constant name, and the factor to the model's unit.
# nvml.h: the *_UTIL metrics are percent (0-100); PCIE_*_PER_SEC are MiB/s.
_GPM_METRICS: dict[str, tuple[str, float]] = {
    "sm_active": ("NVML_GPM_METRIC_SM_UTIL", 1.0),
    "sm_occupancy": ("NVML_GPM_METRIC_SM_OCCUPANCY", 1.0),
    "tensor_active": ("NVML_GPM_METRIC_ANY_TENSOR_UTIL", 1.0),
    "dram_active": ("NVML_GPM_METRIC_DRAM_BW_UTIL", 1.0),
    "pcie_tx_bps": ("NVML_GPM_METRIC_PCIE_TX_PER_SEC", _MIB),
    "pcie_rx_bps": ("NVML_GPM_METRIC_PCIE_RX_PER_SEC", _MIB),
}


def nvml_text(value: Any) -> str | None:
    """pynvml returns str, older versions bytes."""
    if value is None:
        return None
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def nvml_watts(milliwatts: Any) -> float | None:
    return None if milliwatts is None else milliwatts / 1000.0


def cuda_version(raw: int | None) -> str | None:
    """NVML encodes CUDA 13.0 as 13000, 12.4 as 12040."""
    if not raw:
        return None
    return f"{raw // 1000}.{(raw % 1000) // 10}"


def read_fault_counters(nvml: Nvml, handle: Any, sample: GpuSample) -> None:
    """Uncorrected ECC errors, row remapping and PCIe replays into ``sample`` (absent
    where the GPU has no ECC, as GeForce cards, or no row remapping, before Ampere)."""
    sample.ecc_uncorrected = nvml.call(
        "nvmlDeviceGetTotalEccErrors", handle, nvml.const("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1), nvml.const("NVML_VOLATILE_ECC", 0)
    )
    remapped = nvml.call("nvmlDeviceGetRemappedRows", handle)
    if remapped is not None:  # (correctable, uncorrectable, pending, failure)
        sample.remap_pending, sample.remap_failure = bool(remapped[2]), bool(remapped[3])
    sample.pcie_replays = nvml.call("nvmlDeviceGetPcieReplayCounter", handle)


@dataclass
class _Gpu:
    """What we keep per GPU between ticks."""

    index: int
    handle: Any
    lost: bool = False
    pcie: tuple[int | None, int | None] = (None, None)
    pcie_read_at: float | None = None
    gpm_samples: list[Any] = field(default_factory=list)  # two, used alternately
    gpm_have_previous: bool = False
    preferred: dict[str, int] = field(default_factory=dict)  # which fallback answered
    counters_read_at: float | None = None
    faults_read_at: float | None = None
    slow: tuple[float | None, int | None] = (None, None)  # power limit, memory clock
    slow_read_at: float | None = None
    process_util_seen_us: int = 0  # the newest per-process utilization sample read (NVML's µs timestamp)
    process_util_read_at: float | None = None
    process_util_pids: frozenset[int] = frozenset()  # the processes listed when it was read
    process_utils: dict[int, float] | None = None  # carried until the next read
    # The GPM request and its metric names, built once: ctypes set-up is a good part
    # of a 10 Hz tick.  None until the first pair of samples.
    gpm_request: Any = None
    gpm_names: list[str] = field(default_factory=list)


class GpuTelemetry:
    """Reads NVML.  ``open`` never raises; without a driver or GPU, ``infos`` and
    ``sample()`` are empty and ``unavailable_reason`` says why.

    A GPU that raises GpuLost stays lost for the rest of the session: NVML's "GPU is
    lost" needs a reset or reboot to clear, and asking again only costs time.
    """

    def __init__(
        self,
        nvml_module: Any = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        pcie_ttl_s: float = PCIE_LINK_TTL_S,
        use_gpm: bool | None = None,
        watch_xids: bool = False,
        counter_interval_s: float = COUNTER_INTERVAL_S,
    ) -> None:
        self._nvml = Nvml(nvml_module)
        self.use_gpm = gpm_wanted() if use_gpm is None else use_gpm
        self._watch_xids = watch_xids
        self._xids: Any = None  # gputui.telemetry.xid_watcher.XidWatcher while open
        self._clock = clock
        self._pcie_ttl_s = pcie_ttl_s
        self._counter_interval_s = counter_interval_s
        self._gpus: list[_Gpu] = []
        self._attributor: ProcessAttributor | None = None  # made on the first process read
        self._run_pids: Callable[[], Collection[int] | None] = lambda: None
        self._read_run_pids = True
        self._tick_run_pids: Collection[int] | None = None
        self._open = False
        self.available = False
        self.unavailable_reason: str | None = "GPU telemetry not opened yet"
        self.infos: list[GpuInfo] = []
        self.driver_version: str | None = None
        self.cuda_version: str | None = None

    def follow_run(self, run_pids: Callable[[], Collection[int] | None]) -> None:
        """Tell the run's GPU processes from others': ``run_pids()`` gives the run's
        process tree (None while not known yet), asked on each process read."""
        self._run_pids = run_pids

    # --- lifecycle ------------------------------------------------------------------

    def open(self) -> None:
        if self._open:
            return
        self._open = True
        reason = self._nvml.init()
        if reason is not None:
            self.unavailable_reason = reason
            return
        self.available = True
        call = self._nvml.call
        self.driver_version = nvml_text(call("nvmlSystemGetDriverVersion"))
        self.cuda_version = cuda_version(call("nvmlSystemGetCudaDriverVersion"))
        count = call("nvmlDeviceGetCount") or 0
        for index in range(count):
            self._open_gpu(index)
        if count == 0:
            self.unavailable_reason = "NVML found no GPU"
        elif not self.infos:
            self.unavailable_reason = f"NVML found {count} GPU(s) but none could be opened"
        else:
            self.unavailable_reason = None
            self._start_xid_watcher()

    def _start_xid_watcher(self) -> None:
        """XID events arrive on NVML's event API, waited on in a thread of its own."""
        if not self._watch_xids:
            return
        from gputui.telemetry.xid_watcher import XidWatcher  # only sessions that watch need it

        self._xids = XidWatcher([g.index for g in self._gpus if not g.lost], self._nvml.module)
        self._xids.start()

    def _open_gpu(self, index: int) -> None:
        try:
            handle = self._nvml.call("nvmlDeviceGetHandleByIndex", index)
        except GpuLost:
            handle = None
            lost = True
        else:
            lost = False
            if handle is None:  # e.g. no permission for this one GPU in a container
                log.warning("GPU %d: NVML gives no handle; leaving it out", index)
                return
        gpu = _Gpu(index=index, handle=handle, lost=lost)
        info = GpuInfo(index=index, name=f"GPU {index}", driver_version=self.driver_version, cuda_version=self.cuda_version)
        if not lost:
            try:
                self._read_info(gpu, info)
            except GpuLost as exc:
                log.warning("GPU %d lost while reading its facts: %s", index, exc)
                gpu.lost = True
        self._gpus.append(gpu)
        self.infos.append(info)

    def _read_info(self, gpu: _Gpu, info: GpuInfo) -> None:
        nvml, h = self._nvml, gpu.handle
        call = nvml.call
        info.name = nvml_text(call("nvmlDeviceGetName", h)) or info.name
        info.uuid = nvml_text(call("nvmlDeviceGetUUID", h))
        memory = call("nvmlDeviceGetMemoryInfo", h)
        info.memory_total = memory.total if memory is not None else None
        info.power_limit_w = nvml_watts(call("nvmlDeviceGetEnforcedPowerLimit", h))
        info.power_default_limit_w = nvml_watts(call("nvmlDeviceGetPowerManagementDefaultLimit", h))
        info.temp_slowdown_c = self._threshold(h, "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", 1)
        info.temp_shutdown_c = self._threshold(h, "NVML_TEMPERATURE_THRESHOLD_SHUTDOWN", 0)
        info.temp_max_gpu_c = self._threshold(h, "NVML_TEMPERATURE_THRESHOLD_GPU_MAX", 3)
        info.sm_clock_max_mhz = call("nvmlDeviceGetMaxClockInfo", h, nvml.const("NVML_CLOCK_SM", 1))
        info.mem_clock_max_mhz = call("nvmlDeviceGetMaxClockInfo", h, nvml.const("NVML_CLOCK_MEM", 2))
        info.pcie_max_gen = call("nvmlDeviceGetMaxPcieLinkGeneration", h)
        info.pcie_max_width = call("nvmlDeviceGetMaxPcieLinkWidth", h)
        support = call("nvmlGpmQueryDeviceSupport", h) if self.use_gpm else None
        if support is not None and getattr(support, "isSupportedDevice", False):
            info.gpm_supported = self._alloc_gpm(gpu)

    def _threshold(self, handle: Any, const_name: str, default: int) -> float | None:
        value = self._nvml.call("nvmlDeviceGetTemperatureThreshold", handle, self._nvml.const(const_name, default))
        return None if value is None else float(value)

    def _alloc_gpm(self, gpu: _Gpu) -> bool:
        """Two GPM sample buffers per GPU, allocated once and used alternately."""
        for _ in range(2):
            sample = self._nvml.call("nvmlGpmSampleAlloc")
            if sample is None:
                self._free_gpm(gpu)
                return False
            gpu.gpm_samples.append(sample)
        return True

    def _free_gpm(self, gpu: _Gpu) -> None:
        for sample in gpu.gpm_samples:
            try:
                self._nvml.call("nvmlGpmSampleFree", sample)
            except GpuLost:
                pass  # the buffer is host memory; nothing more to do
        gpu.gpm_samples = []
        gpu.gpm_have_previous = False

    def keep_only(self, indices: list[int]) -> None:
        """Sample only these GPUs (a preset pinned them), in this order; the others'
        GPM buffers are freed now."""
        by_index = {gpu.index: (gpu, info) for gpu, info in zip(self._gpus, self.infos)}
        for gpu, _ in by_index.values():
            if gpu.index not in indices:
                self._free_gpm(gpu)
        kept = [by_index[i] for i in indices if i in by_index]
        self._gpus = [gpu for gpu, _ in kept]
        self.infos = [info for _, info in kept]

    def close(self) -> None:
        """Free GPM buffers and shut NVML down.  ``infos`` stay readable; ``sample()``
        returns [] afterwards."""
        if self._xids is not None:
            self._xids.stop()
            self._xids = None
        for gpu in self._gpus:
            self._free_gpm(gpu)
        self._gpus = []
        self._nvml.shutdown()

    # --- sampling -------------------------------------------------------------------

    def sample(self, exact: bool = False) -> list[GpuSample]:
        """One sample per GPU.  Cumulative counters (``energy_mj``, ``throttle_time_ns``)
        are read every ``counter_interval_s``, the fault counters every
        FAULT_COUNTER_INTERVAL_S, and both whenever ``exact`` is true (a window's ends);
        in between they are ``None``."""
        samples = []
        self._read_run_pids = True  # asked once per tick, by the first GPU that reads its processes
        for gpu in self._gpus:
            if gpu.lost:
                samples.append(GpuSample(index=gpu.index, lost=True))
                continue
            try:
                samples.append(self._sample_gpu(gpu, exact))
            except GpuLost as exc:
                log.warning("GPU %d lost: %s", gpu.index, exc)
                gpu.lost = True
                samples.append(GpuSample(index=gpu.index, lost=True))
        self._forget_ended(samples)
        if self._xids is not None:
            for event in self._xids.take():
                for sample in samples:
                    if sample.index == event.gpu:
                        sample.xids = (sample.xids or []) + [event.xid]
        return samples

    def _forget_ended(self, samples: list[GpuSample]) -> None:
        """On a tick that listed every GPU's processes, forget the ones none lists now."""
        if self._attributor is not None and samples and all(s.processes is not None or s.lost for s in samples):
            self._attributor.forget_except({p.pid for s in samples for p in s.processes or ()})

    def _sample_gpu(self, gpu: _Gpu, exact: bool) -> GpuSample:
        nvml, h = self._nvml, gpu.handle
        call = nvml.call
        s = GpuSample(index=gpu.index)
        util = call("nvmlDeviceGetUtilizationRates", h)
        if util is not None:
            s.util_gpu, s.util_mem = float(util.gpu), float(util.memory)
        memory = call("nvmlDeviceGetMemoryInfo", h)
        if memory is not None:
            s.memory_used, s.memory_total = memory.used, memory.total
        sensor = nvml.const("NVML_TEMPERATURE_GPU", 0)
        temp = self._first(gpu, "temp", [("nvmlDeviceGetTemperatureV", sensor), ("nvmlDeviceGetTemperature", sensor)])
        s.temp_c = None if temp is None else float(temp)
        s.power_w = nvml_watts(call("nvmlDeviceGetPowerUsage", h))
        s.sm_clock_mhz = call("nvmlDeviceGetClockInfo", h, nvml.const("NVML_CLOCK_SM", 1))
        due = exact or gpu.slow_read_at is None or self._clock() - gpu.slow_read_at >= SLOW_FIELDS_TTL_S
        s.power_limit_w, s.mem_clock_mhz = self._slow_fields(gpu, due)
        if due:
            s.processes = self._processes(gpu)
        # "ClocksEvent" is the current name; "ClocksThrottle" the one older drivers know.
        mask = self._first(gpu, "throttle", [("nvmlDeviceGetCurrentClocksEventReasons",), ("nvmlDeviceGetCurrentClocksThrottleReasons",)])
        if mask is not None:
            s.throttle_mask, s.throttle_reasons = mask, decode_throttle_reasons(mask)
        pstate = call("nvmlDeviceGetPerformanceState", h)
        s.pstate = None if pstate is None or pstate == nvml.const("NVML_PSTATE_UNKNOWN", 32) else pstate
        s.pcie_gen, s.pcie_width = self._pcie_link(gpu)
        for name, value in self._gpm(gpu).items():
            setattr(s, name, value)
        now = self._clock()
        if exact or gpu.counters_read_at is None or now - gpu.counters_read_at >= self._counter_interval_s:
            gpu.counters_read_at = now
            s.energy_mj = call("nvmlDeviceGetTotalEnergyConsumption", h)
            s.throttle_time_ns = self._throttle_times(h)
        if exact or gpu.faults_read_at is None or now - gpu.faults_read_at >= FAULT_COUNTER_INTERVAL_S:
            gpu.faults_read_at = now
            read_fault_counters(nvml, h, s)
        return s

    def _throttle_times(self, handle: Any) -> dict[str, int] | None:
        """Cumulative ns spent in each clock-event reason the driver counts, or None
        where it counts none (the sampled mask is then the only source)."""
        nvml = self._nvml
        ids = {name: nvml.const(const, default) for name, (const, default) in THROTTLE_TIME_FIELDS.items()}
        values = nvml.call("nvmlDeviceGetFieldValues", handle, list(ids.values()))
        if values is None:
            return None
        ok = nvml.const("NVML_SUCCESS", 0)
        times = {name: int(value.value.ullVal) for name, value in zip(ids, values) if value.nvmlReturn == ok}
        return times or None

    def _first(self, gpu: _Gpu, key: str, variants: list[tuple[Any, ...]]) -> Any:
        """The first of several equivalent NVML calls that answers; the one that
        answered last time is tried first, so a tick normally costs one call."""
        start = gpu.preferred.get(key, 0)
        order = [start] + [i for i in range(len(variants)) if i != start]
        for i in order:
            fn_name, *args = variants[i]
            value = self._nvml.call(fn_name, gpu.handle, *args)
            if value is not None:
                gpu.preferred[key] = i
                return value
        return None

    def _slow_fields(self, gpu: _Gpu, due: bool) -> tuple[float | None, int | None]:
        if due:
            nvml, h = self._nvml, gpu.handle
            gpu.slow = (nvml_watts(nvml.call("nvmlDeviceGetEnforcedPowerLimit", h)), nvml.call("nvmlDeviceGetClockInfo", h, nvml.const("NVML_CLOCK_MEM", 2)))
            gpu.slow_read_at = self._clock()
        return gpu.slow

    def _processes(self, gpu: _Gpu) -> list[GpuProcess] | None:
        """The GPU's compute and graphics processes, each attributed to the run or to
        others (gputui.telemetry.gpu_processes); None where NVML does not list compute
        processes (the graphics list alone cannot say the GPU is free of training jobs)."""
        call, h = self._nvml.call, gpu.handle
        compute = call("nvmlDeviceGetComputeRunningProcesses", h)
        if compute is None:
            return None
        graphics = call("nvmlDeviceGetGraphicsRunningProcesses", h)
        entries = merge_lists(compute, graphics)
        if self._attributor is None:
            self._attributor = ProcessAttributor()
        if self._read_run_pids:
            self._read_run_pids, self._tick_run_pids = False, self._run_pids()
        utils = self._process_utilization(gpu, frozenset(e.pid for e in entries)) if entries else None
        return self._attributor.attribute(entries, self._tick_run_pids, utils)

    def _process_utilization(self, gpu: _Gpu, pids: frozenset[int]) -> dict[int, float] | None:
        """The processes' SM shares: read every PROCESS_UTIL_EVERY_S and whenever the
        listed processes change, the last reading in between."""
        now = self._clock()
        fresh = gpu.process_util_read_at is not None and now - gpu.process_util_read_at < PROCESS_UTIL_EVERY_S
        if not (fresh and pids == gpu.process_util_pids):
            gpu.process_util_read_at, gpu.process_util_pids = now, pids
            gpu.process_utils = self._read_process_utilization(gpu)
        return gpu.process_utils

    def _read_process_utilization(self, gpu: _Gpu) -> dict[int, float] | None:
        """Each process's mean SM utilization over NVML's samples since the last read
        (None where the GPU does not report it, or reported nothing new)."""
        samples = self._nvml.call("nvmlDeviceGetProcessUtilization", gpu.handle, gpu.process_util_seen_us)
        if not samples:
            return None
        by_pid: dict[int, list[float]] = {}
        for sample in samples:
            by_pid.setdefault(int(sample.pid), []).append(float(sample.smUtil))
            gpu.process_util_seen_us = max(gpu.process_util_seen_us, int(sample.timeStamp))
        return {pid: sum(values) / len(values) for pid, values in by_pid.items()}

    def _pcie_link(self, gpu: _Gpu) -> tuple[int | None, int | None]:
        now = self._clock()
        if gpu.pcie_read_at is None or now - gpu.pcie_read_at >= self._pcie_ttl_s:
            call = self._nvml.call
            gpu.pcie = (call("nvmlDeviceGetCurrPcieLinkGeneration", gpu.handle), call("nvmlDeviceGetCurrPcieLinkWidth", gpu.handle))
            gpu.pcie_read_at = now
        return gpu.pcie

    def _gpm(self, gpu: _Gpu) -> dict[str, float]:
        """GPM metrics between the previous tick's GPM sample and this one's.
        The first tick only takes a sample, so its metrics are absent."""
        if not gpu.gpm_samples:
            return {}
        nvml = self._nvml
        previous, current = gpu.gpm_samples
        if nvml.call("nvmlGpmSampleGet", gpu.handle, current) is None:
            gpu.gpm_have_previous = False  # no valid pair until two samples in a row
            return {}
        gpu.gpm_samples.reverse()  # this tick's sample is the next tick's "previous"
        if not gpu.gpm_have_previous:
            gpu.gpm_have_previous = True
            return {}
        return self._gpm_metrics(gpu, previous, current)

    def _gpm_request(self, gpu: _Gpu) -> Any:
        """The GPU's GPM request (metric ids set), built on first use; None without GPM structs."""
        if gpu.gpm_request is None:
            nvml = self._nvml
            struct_type = nvml.const("c_nvmlGpmMetricsGet_t")
            if struct_type is None:
                return None
            ids = {name: nvml.const(const) for name, (const, _) in _GPM_METRICS.items()}
            ids = {name: metric_id for name, metric_id in ids.items() if metric_id is not None}
            request = struct_type()
            request.version = nvml.const("NVML_GPM_METRICS_GET_VERSION", 1)
            request.numMetrics = len(ids)
            for slot, metric_id in enumerate(ids.values()):
                request.metrics[slot].metricId = metric_id
            gpu.gpm_request, gpu.gpm_names = request, list(ids)
        return gpu.gpm_request

    def _gpm_metrics(self, gpu: _Gpu, previous: Any, current: Any) -> dict[str, float]:
        nvml = self._nvml
        request = self._gpm_request(gpu)
        if request is None:
            return {}
        request.sample1, request.sample2 = previous, current
        if nvml.call("nvmlGpmMetricsGet", request) is None:
            return {}
        ok = nvml.const("NVML_SUCCESS", 0)
        values = {}
        for slot, name in enumerate(gpu.gpm_names):
            metric = request.metrics[slot]
            if metric.nvmlReturn == ok:  # each metric reports its own support
                values[name] = metric.value * _GPM_METRICS[name][1]
        return values
