"""Synthetic telemetry for the long-run and app-scale benchmarks: samples shaped like
an 8-GPU H200 node's (every field filled, GPM and counters included) with as many
host cores and run processes as asked, at fast-forwarded times."""

from __future__ import annotations

from gputui.model import GpuProcess, GpuSample, HostSample, ProcessSample, Sample

GIB = 1024**3


def gpu_sample(index: int, i: int, counters: bool) -> GpuSample:
    wobble = (i * 7 + index * 3) % 11
    return GpuSample(
        index=index,
        util_gpu=95.0 + wobble % 5,
        util_mem=40.0 + wobble,
        memory_used=(60 + wobble) * GIB,
        memory_total=141 * GIB,
        temp_c=60.0 + wobble,
        power_w=520.5 + 3.25 * wobble,
        power_limit_w=700.0,
        energy_mj=9_000_000 + 520 * i if counters else None,
        sm_clock_mhz=1980 - 15 * (wobble % 3),
        mem_clock_mhz=3201,
        throttle_mask=0x4 if wobble > 8 else 0,
        throttle_reasons=["SwPowerCap"] if wobble > 8 else [],
        throttle_time_ns={"SwPowerCap": 10_000_000 * i, "SyncBoost": 0, "SwThermalSlowdown": 0, "HwThermalSlowdown": 0, "HwPowerBrakeSlowdown": 0}
        if counters
        else None,
        pstate=0,
        pcie_gen=5,
        pcie_width=16,
        processes=[GpuProcess(pid=4242 + index, used_memory=(58 + wobble) * GIB)],
        sm_active=80.0 + wobble * 1.5,
        sm_occupancy=40.25 + wobble,
        tensor_active=55.5 + wobble,
        dram_active=38.0 + wobble,
        pcie_tx_bps=1.2e8 + wobble * 1e6,
        pcie_rx_bps=3.4e8 + wobble * 1e6,
    )


def host_sample(i: int, cores: int, processes: int) -> HostSample:
    per_core = [float((i * 13 + c * 7) % 101) for c in range(cores)]
    procs = [ProcessSample(pid=4242, ppid=4240, name="python", role="main", cpu_percent=101.5, rss=3 * GIB, threads=42, read_bps=0.0, write_bps=4096.0)]
    procs += [
        ProcessSample(
            pid=4300 + n,
            ppid=4242,
            name="pt_data_worker",
            role="worker",
            cpu_percent=90.0 + (i + n) % 9,
            rss=410 * 1024**2,
            threads=4,
            read_bps=1.5e6,
            write_bps=0.0,
        )
        for n in range(processes - 1)
    ]
    return HostSample(
        cpu_percent=round(sum(per_core) / cores, 1),
        per_core=per_core,
        load_avg=[30.5, 29.8, 28.1],
        memory_used=600 * GIB,
        memory_total=2000 * GIB,
        memory_available=1400 * GIB,
        swap_used=0,
        swap_total=0,
        disk_read_bps=2.5e7,
        disk_write_bps=1.0e6,
        processes=procs,
    )


def sample(i: int, interval: float, gpus: int, cores: int, processes: int, counter_every: int = 10) -> Sample:
    """Sample number ``i``; the cumulative counters are in every ``counter_every``-th, as
    gputui reads them every 10 s at 1 Hz."""
    counters = i % counter_every == 0
    return Sample(t=round(i * interval, 4), gpus=[gpu_sample(n, i, counters) for n in range(gpus)], host=host_sample(i, cores, processes))
