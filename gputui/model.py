"""The one data model shared by live sampling, recording and replay.

Every telemetry value is optional: ``None`` means "this machine or driver does not
report it", never zero.  ``to_dict`` drops absent values so recordings stay small,
and ``from_dict`` restores them, so a sample read back from a recording is equal to
the sample that was written.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

T = TypeVar("T")


_SCALARS = (int, float, str, bool)
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
_FIELD_SETS: dict[type, frozenset[str]] = {}


def _field_names(cls: type) -> tuple[str, ...] | None:
    """A dataclass's field names (looked up once per class: the recorder converts a
    sample every tick), or None for anything else."""
    names = _FIELD_NAMES.get(cls)
    if names is None and dataclasses.is_dataclass(cls):
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def to_dict(obj: Any) -> Any:
    """Dataclasses (nested, in lists) to plain JSON-ready dicts, without None values."""
    if isinstance(obj, _SCALARS) or obj is None:
        return obj
    names = _field_names(type(obj))
    if names is not None:
        out = {}
        for name in names:
            value = getattr(obj, name)
            if value is None:
                continue
            out[name] = value if isinstance(value, _SCALARS) else to_dict(value)
        return out
    if isinstance(obj, (list, tuple)):
        return [to_dict(item) for item in obj]
    if isinstance(obj, dict):
        return {key: to_dict(value) for key, value in obj.items()}
    return obj


def from_dict(cls: type[T], data: dict[str, Any]) -> T:
    """Build ``cls`` from a dict written by :func:`to_dict`; unknown keys are ignored
    so that older readers can load newer recordings."""
    nested = getattr(cls, "_nested", {})
    kwargs = {}
    names = _FIELD_SETS.get(cls)
    if names is None:
        names = _FIELD_SETS[cls] = frozenset(_field_names(cls) or ())  # a reader builds a sample a line
    for key, value in data.items():
        if key not in names:
            continue
        if key in nested and value is not None:
            inner = nested[key]
            value = [from_dict(inner, v) for v in value] if isinstance(value, list) else from_dict(inner, value)
        kwargs[key] = value
    return cls(**kwargs)


# --- GPU -------------------------------------------------------------------------


# Whose a GPU process is (GpuProcess.owner), judged by gputui.telemetry.gpu_processes:
Owner = Literal["run", "other", "hidden", "unmatched"]
RUN: Owner = "run"  # the run's own: its pid is in the run's process tree
OTHER: Owner = "other"  # another process this PID namespace shows (another user's, another job)
HIDDEN: Owner = "hidden"  # a pid this PID namespace does not show, while NVML's pids match ours: another container
UNMATCHED: Owner = "unmatched"  # a pid we cannot see, and NVML's pids were never seen to match ours: ours or not, unknown
OWNERS: tuple[Owner, ...] = (RUN, OTHER, HIDDEN, UNMATCHED)


@dataclass
class GpuProcess:
    """One process with a context on a GPU (NVML's compute and graphics lists), read on
    the sampler's slow cadence.  ``owner`` is None where nothing was attributed (no run
    to match against, recordings from before attribution)."""

    pid: int
    used_memory: int | None = None  # bytes; None where NVML does not say (NVML_VALUE_NOT_AVAILABLE)
    name: str | None = None
    owner: Owner | None = None
    kind: str | None = None  # "compute", "graphics" or "compute+graphics"
    user: str | None = None  # where this PID namespace shows the process
    command: str | None = None  # short: the program and its script, no other arguments
    sm_util: float | None = None  # % of the GPU's SMs it kept busy since the last read, where NVML says

    @property
    def is_others(self) -> bool:
        """Someone else's for sure: another process we can see, or another container's."""
        return self.owner in (OTHER, HIDDEN)

    def label(self) -> str:
        """Who it is, in a few words: "pid 4343 alice python3 train.py", "pid 4343 (another container)"."""
        if self.owner == HIDDEN:
            return f"pid {self.pid} (another container)"
        who = " ".join(part for part in (self.user, self.command or self.name) if part)
        return f"pid {self.pid} {who}" if who else f"pid {self.pid}"


def co_runners(processes: list[GpuProcess] | None, memory_bytes: float, sm_pct: float) -> list[GpuProcess]:
    """Others' processes that hold at least ``memory_bytes`` of GPU memory or keep at least
    ``sm_pct`` % of its SMs busy (a display server's few MiB are not a co-tenant), biggest
    first: what the co_tenant finding and ``gputui check`` name."""
    return [p for p in others_of(processes) if (p.used_memory or 0) >= memory_bytes or (p.sm_util or 0.0) >= sm_pct]


def others_of(processes: list[GpuProcess] | None) -> list[GpuProcess]:
    """The processes known to be someone else's, biggest memory first."""
    return sorted((p for p in processes or () if p.is_others), key=lambda p: -(p.used_memory or 0))


def memory_of(processes: list[GpuProcess]) -> int:
    return sum(p.used_memory or 0 for p in processes)


@dataclass
class GpuInfo:
    """What does not change during a run: written once, in the recording's header."""

    index: int
    name: str
    uuid: str | None = None
    memory_total: int | None = None  # bytes
    driver_version: str | None = None
    cuda_version: str | None = None  # e.g. "13.0"
    power_limit_w: float | None = None  # enforced limit at start
    power_default_limit_w: float | None = None
    temp_slowdown_c: float | None = None
    temp_shutdown_c: float | None = None
    temp_max_gpu_c: float | None = None
    sm_clock_max_mhz: int | None = None
    mem_clock_max_mhz: int | None = None
    pcie_max_gen: int | None = None
    pcie_max_width: int | None = None
    gpm_supported: bool = False


@dataclass
class GpuSample:
    index: int
    lost: bool = False  # the GPU stopped answering; the others keep being sampled
    util_gpu: float | None = None  # % of time any kernel ran
    util_mem: float | None = None
    memory_used: int | None = None  # bytes
    memory_total: int | None = None
    temp_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    energy_mj: int | None = None  # cumulative since driver load; read every few seconds
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    throttle_mask: int | None = None
    throttle_reasons: list[str] | None = None  # decoded names of throttle_mask
    # Cumulative ns in each clock-event reason the driver counts (read with energy_mj)
    throttle_time_ns: dict[str, int] | None = None
    pstate: int | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    # Read on the slow cadence: a list on the ticks that read it, None between (and
    # where NVML does not report processes); [] is "read, and none"
    processes: list[GpuProcess] | None = None
    # Signs of failing hardware: volatile uncorrected ECC errors (since the driver
    # loaded), row remapping pending (a reset applies it) or failed, PCIe replays
    # (link retransmissions, cumulative), and the XIDs received since the last sample.
    ecc_uncorrected: int | None = None
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    pcie_replays: int | None = None
    xids: list[int] | None = None
    # GPM (Hopper and newer), all in percent except the PCIe rates
    sm_active: float | None = None
    sm_occupancy: float | None = None
    tensor_active: float | None = None
    dram_active: float | None = None
    pcie_tx_bps: float | None = None  # bytes per second
    pcie_rx_bps: float | None = None

    _nested = {"processes": GpuProcess}


# --- Host ------------------------------------------------------------------------


@dataclass
class HostInfo:
    hostname: str
    os: str
    cpu_model: str | None = None
    cpu_logical: int | None = None
    cpu_physical: int | None = None
    # Cores this process may use: CPU affinity, capped by a cgroup CPU quota.  Rented
    # containers often see the host's 128 cores but may use 8.
    cpu_available: float | None = None
    memory_total: int | None = None  # bytes
    memory_limit: int | None = None  # a cgroup memory limit below memory_total
    python: str | None = None


@dataclass
class ProcessSample:
    pid: int
    ppid: int | None = None
    name: str | None = None
    role: str = "child"  # "main", "worker" (data loader) or "child"
    cpu_percent: float | None = None  # 100 = one full core
    rss: int | None = None  # bytes
    threads: int | None = None
    # Its busiest thread, % of one core: a Python training loop is one thread, so a
    # process at 100 % spread over 20 threads says less than one thread at 100 %.  The
    # main thread counts with PyTorch's autograd threads, which work while it waits.
    # Read for processes busy enough to have such a thread (gputui.telemetry.host).
    top_thread_pct: float | None = None
    read_bps: float | None = None
    write_bps: float | None = None


@dataclass
class HostSample:
    cpu_percent: float | None = None  # whole machine, 0-100
    per_core: list[float] | None = None
    load_avg: list[float] | None = None  # 1, 5, 15 minutes
    memory_used: int | None = None
    memory_total: int | None = None
    memory_available: int | None = None
    swap_used: int | None = None
    swap_total: int | None = None
    disk_read_bps: float | None = None
    disk_write_bps: float | None = None
    steal_pct: float | None = None  # % of CPU time the hypervisor gave to other guests
    # This process's cgroup CPU quota counters (cpu.stat), cumulative: periods, periods
    # in which the cgroup was throttled, and the time it was throttled.
    cpu_periods: int | None = None
    cpu_throttled_periods: int | None = None
    cpu_throttled_s: float | None = None
    processes: list[ProcessSample] = field(default_factory=list)

    _nested = {"processes": ProcessSample}


# --- One tick of the sampler -------------------------------------------------------


@dataclass
class Sample:
    t: float  # seconds since the session started
    gpus: list[GpuSample] = field(default_factory=list)
    host: HostSample | None = None

    _nested = {"gpus": GpuSample, "host": HostSample}


# --- Throughput ----------------------------------------------------------------------


#: What a throughput reading counts.  Samples (images, sequences, examples) where the tool
#: says so or a batch size converts its steps; tokens stay tokens (LLM jobs count them);
#: steps (optimizer steps, iterations, batches) where nothing says how big a step is.
Unit = Literal["samples", "tokens", "steps"]
SAMPLES: Unit = "samples"
TOKENS: Unit = "tokens"
STEPS: Unit = "steps"
UNITS: tuple[Unit, ...] = (SAMPLES, TOKENS, STEPS)


@dataclass(frozen=True)
class Throughput:
    """One throughput reading parsed from a run's output (or reported by the probe).

    ``samples_per_sec`` keeps its name from the first recordings (schema 1): it is the
    rate in ``unit`` per second, which is samples unless the reading says otherwise."""

    samples_per_sec: float
    source: str  # which parser produced it, e.g. "gputui", "tqdm", "keras"
    phase: str | None = None  # "warmup" or "measure" when the tool says so
    final: bool = False  # the tool's own end result rather than a live reading
    samples: float | None = None  # samples in the window the rate covers
    seconds: float | None = None
    rank: int | None = None  # one rank's own reading in a data-parallel run
    ranks: int | None = None  # a data-parallel total: how many ranks' readings it adds
    unit: Unit = SAMPLES


#: The source of readings from gputui's own benchmark workloads: windows of timed steps,
#: whose median is the workload's own headline figure.
WORKLOAD_SOURCE = "gputui"

#: A job whose mean (samples over seconds) is this far under the median of its readings
#: works in bursts with stalls between them, which the median leaves out.
BURSTY_BELOW = 0.90
BURSTY_NOTE = "it stalls between bursts, which the median leaves out"
