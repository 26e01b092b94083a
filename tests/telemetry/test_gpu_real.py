"""GpuTelemetry against the real NVML: run only where a GPU and driver exist."""

from __future__ import annotations

import re
import time

import pytest

from gputui.telemetry.gpu import GpuTelemetry, decode_throttle_reasons

pytestmark = pytest.mark.gpu


@pytest.fixture
def telemetry():
    t = GpuTelemetry()
    t.open()
    yield t
    t.close()


def test_real_gpus_have_static_facts(telemetry):
    assert telemetry.available and telemetry.unavailable_reason is None
    assert re.fullmatch(r"\d+\.\d+(\.\d+)?", telemetry.driver_version)
    assert re.fullmatch(r"\d+\.\d+", telemetry.cuda_version)
    assert telemetry.infos
    for info in telemetry.infos:
        assert info.name and info.uuid.startswith(("GPU-", "MIG-"))
        assert info.memory_total > 1024**3
        assert info.power_limit_w and 10 < info.power_limit_w < 2000
        assert info.sm_clock_max_mhz and info.sm_clock_max_mhz > 100
        if info.temp_slowdown_c is not None and info.temp_shutdown_c is not None:
            assert 40 < info.temp_slowdown_c <= info.temp_shutdown_c < 130


def test_real_samples_are_plausible(telemetry):
    first = telemetry.sample()
    time.sleep(0.3)
    second = telemetry.sample(exact=True)  # exact: the cumulative counters too
    assert len(first) == len(second) == len(telemetry.infos)
    for info, before, s in zip(telemetry.infos, first, second):
        assert not s.lost
        assert 0 <= s.util_gpu <= 100 and 0 <= s.util_mem <= 100
        assert 0 < s.memory_used <= s.memory_total == info.memory_total
        assert 5 < s.temp_c < 110
        assert 1 < s.power_w < 2000
        assert s.sm_clock_mhz > 0 and s.mem_clock_mhz > 0
        assert s.throttle_mask is not None
        assert s.throttle_reasons == decode_throttle_reasons(s.throttle_mask)
        assert all(not name.startswith("0x") for name in s.throttle_reasons), s.throttle_reasons
        assert s.pstate is not None and 0 <= s.pstate <= 15
        if s.energy_mj is not None:
            assert s.energy_mj >= before.energy_mj
        if s.throttle_time_ns is not None:  # the driver's cumulative clock-event times
            assert all(ns >= before.throttle_time_ns.get(name, 0) for name, ns in s.throttle_time_ns.items())
        assert s.processes is not None
        if info.gpm_supported:
            assert before.sm_active is None  # GPM needs two samples
            for value in (s.sm_active, s.sm_occupancy, s.tensor_active, s.dram_active):
                assert value is not None and 0 <= value <= 100
            assert s.pcie_tx_bps is not None and s.pcie_tx_bps >= 0
            assert s.pcie_rx_bps is not None and s.pcie_rx_bps >= 0
