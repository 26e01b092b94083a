"""Diagnosis settings: every threshold and hold time, with its default and its check.

The ``[diagnosis]`` table of a presets file (and a preset's own ``diagnosis`` table)
sets these keys; :func:`check_value` validates one value and :class:`Settings` holds
the merged result.  This module imports nothing from the rest of gputui, so the
presets loader can use it without a cycle.  The defaults are documented in
docs/diagnosis.md and written out in the built-in presets.toml.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Settings:
    enabled: bool = True
    # GPM (Hopper and newer) gives SM activity; false (or GPUTUI_NO_GPM=1) makes the
    # sampler skip it, so the rules' fallback for GPUs without GPM runs on any GPU.
    use_gpm: bool = True
    # Hold machinery: a finding opens when its condition held for ``hold_share`` of
    # the samples over ``open_after_s`` seconds, and closes when it held for at most
    # ``clear_share`` of them over ``close_after_s`` seconds.
    start_grace_s: float = 30.0  # runs without phases: nothing is judged before this
    open_after_s: float = 10.0
    close_after_s: float = 20.0
    hold_share: float = 0.8
    clear_share: float = 0.2
    # Input-bound
    input_sm_active_pct: float = 50.0  # GPU under-busy: SM activity below this (GPM) ...
    input_util_pct: float = 70.0  # ... or, without GPM, utilization below this
    worker_busy_pct: float = 85.0  # a data-loader worker at this % of one core is saturated
    run_cores_busy_pct: float = 85.0  # ... or the run uses this % of the machine's cores
    ceiling_samples_per_sec: float | None = None  # synthetic-pipeline throughput of this model here
    ceiling_below_pct: float = 70.0  # under-busy when throughput < this % of the ceiling
    # Without GPM (utilization reads 100% on a GPU doing little): the GPU is under-busy
    # when its power is below this % of its limit, or its SM clock below this % of its
    # maximum with no reason given for the drop.
    input_power_pct: float = 35.0
    input_clock_pct: float = 60.0
    # With the probe: the training loop waits for the next batch in this % of its time
    data_wait_pct: float = 40.0
    # Python-bound main loop: the run's busiest thread at this % of one core while the
    # GPU is less busy than python_gpu_busy_pct (SM activity where read, else utilization)
    # and the loop waits for data in less than python_data_wait_pct of its time
    python_thread_pct: float = 50.0
    python_gpu_busy_pct: float = 60.0
    python_data_wait_pct: float = 40.0
    # Thermal
    thermal_warn_c: float = 80.0
    # Power cap
    power_limit_pct: float = 95.0  # power at >= this % of the limit counts as "at the limit"
    clock_below_max_pct: float = 97.0  # SM clock below this % of its max counts as "below max"
    power_cap_share: float = 0.55  # share of the hold window that must be capped to open
    # Memory
    vram_full_pct: float = 95.0
    host_memory_pct: float = 90.0  # warning
    host_memory_critical_pct: float = 97.0
    swap_growth_mib: float = 64.0  # swap that grew this much within 30 s means swapping
    # Busy but not working (launch / latency bound)
    busy_util_pct: float = 90.0
    launch_sm_active_pct: float = 35.0
    launch_open_after_s: float = 30.0
    launch_power_pct: float = 40.0  # without GPM: busy but drawing less than this % of the power limit
    # Idle without cause
    idle_gpu_pct: float = 10.0
    idle_cpu_pct: float = 20.0  # the run's processes together, % of one core
    price_per_hour: float | None = None  # what the machine costs (USD/hour): the idle finding prices its time
    # Host contention
    cpu_throttled_pct: float = 10.0  # cgroup-throttled in this % of the CPU periods (over 30 s)
    steal_pct: float = 10.0  # the hypervisor gives this % of the CPU time to others
    # Failing hardware: PCIe replays (link retransmissions) faster than this per
    # minute (DCGM's health-check default); XIDs, new uncorrected ECC errors and
    # row remapping pending or failed need no threshold.
    pcie_replays_per_min: float = 8.0
    # Headroom (information): achieved TFLOP/s below this % of the GPU's peak for the
    # run's precision, or (FLOPs unknown) peak GPU memory below this % of the GPU's.
    headroom_tflops_pct: float = 12.0
    headroom_memory_pct: float = 10.0
    headroom_open_after_s: float = 30.0  # a whole-run property: an evaluation pass is not it
    # Co-tenant: another process on a GPU the run uses holds this much GPU memory or
    # keeps this % of its SMs busy, while throughput is below this % of the ceiling
    cotenant_memory_mib: float = 256.0
    cotenant_sm_pct: float = 5.0
    cotenant_below_ceiling_pct: float = 95.0
    # PCIe
    pcie_busy_util_pct: float = 50.0  # the link is judged only while the GPU is this busy
    pcie_heavy_pct: float = 50.0  # host-to-device traffic at this % of the link's bandwidth

    @classmethod
    def from_tables(cls, *tables: Mapping[str, Any] | None) -> Settings:
        """Defaults, then each table in turn (later keys win).  Tables must be checked
        already (the presets loader does it); unknown keys raise KeyError."""
        merged: dict[str, Any] = {}
        for table in tables:
            merged.update(table or {})
        unknown = set(merged) - set(KEYS)
        if unknown:
            raise KeyError(f"unknown diagnosis setting {sorted(unknown)[0]!r}")
        return cls(**merged)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


DEFAULTS = Settings()
KEYS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Settings))

_BOOLS = {"enabled", "use_gpm"}
_SECONDS = {"start_grace_s", "open_after_s", "close_after_s", "launch_open_after_s", "headroom_open_after_s"}


def check_value(key: str, value: Any) -> Any:
    """The value converted (ints to floats), or ValueError saying what was expected.
    KeyError for a key that is not a setting."""
    if key not in KEYS:
        raise KeyError(key)
    if key in _BOOLS:
        if not isinstance(value, bool):
            raise ValueError("true or false")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(_expected(key))
    value = float(value)
    ok = {
        "s": value >= 0,
        "hold_share": 0.5 < value <= 1,
        "clear_share": 0 <= value < 0.5,
        "share": 0 < value <= 1,
        "pct": 0 < value <= 100,
        "positive": value > 0,
    }[_kind(key)]
    if not ok or value != value:  # NaN
        raise ValueError(_expected(key))
    return value


def _kind(key: str) -> str:
    if key in _SECONDS:
        return "s"
    if key in ("hold_share", "clear_share"):
        return key
    if key.endswith("_share"):
        return "share"
    if key.endswith("_pct"):
        return "pct"
    return "positive"


def _expected(key: str) -> str:
    return {
        "s": "a number of seconds, 0 or more",
        "hold_share": "a share above 0.5 and at most 1 (e.g. 0.8)",
        "clear_share": "a share from 0 to below 0.5 (e.g. 0.2)",
        "share": "a share above 0 and at most 1",
        "pct": "a percentage above 0 and at most 100",
        "positive": "a number greater than 0",
    }[_kind(key)]
