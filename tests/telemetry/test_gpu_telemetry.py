"""GpuTelemetry against a test double of pynvml: values, absences, lost GPUs, GPM."""

from __future__ import annotations

import logging

import pynvml
import pytest

from gputui.model import to_dict
from gputui.telemetry.gpu import THROTTLE_REASONS, GpuTelemetry, decode_throttle_reasons
from tests.support.fake_nvml import GIB, FakeGpu, FakeNvml


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def opened(fake: FakeNvml, **kwargs) -> GpuTelemetry:
    telemetry = GpuTelemetry(fake, **kwargs)
    telemetry.open()
    return telemetry


# --- throttle reasons --------------------------------------------------------------


def test_decode_throttle_reasons_names_each_set_bit_in_order():
    assert decode_throttle_reasons(0) == []
    assert decode_throttle_reasons(0x1) == ["GpuIdle"]
    assert decode_throttle_reasons(0x4 | 0x40) == ["SwPowerCap", "HwThermalSlowdown"]
    assert decode_throttle_reasons(0x1FF) == list(THROTTLE_REASONS.values())


def test_decode_throttle_reasons_keeps_unknown_bits_visible():
    assert decode_throttle_reasons(0x8 | 0x400) == ["HwSlowdown", "0x400"]


def test_throttle_table_matches_pynvml_constants():
    assert THROTTLE_REASONS[pynvml.nvmlClocksEventReasonSwPowerCap] == "SwPowerCap"
    assert THROTTLE_REASONS[pynvml.nvmlClocksEventReasonHwPowerBrakeSlowdown] == "HwPowerBrakeSlowdown"
    assert THROTTLE_REASONS[pynvml.nvmlClocksEventReasonDisplayClockSetting] == "DisplayClockSetting"


# --- static facts and one sample ---------------------------------------------------------


def test_open_reads_static_facts_in_model_units():
    telemetry = opened(FakeNvml([FakeGpu(), FakeGpu(name="NVIDIA A100", uuid="GPU-b", gpm=None)]))
    assert telemetry.available and telemetry.unavailable_reason is None
    assert telemetry.driver_version == "580.159.03"
    assert telemetry.cuda_version == "13.0"
    h200, a100 = telemetry.infos
    assert (h200.index, h200.name, h200.memory_total) == (0, "NVIDIA H200", 141 * GIB)
    assert h200.driver_version == "580.159.03" and h200.cuda_version == "13.0"
    assert (h200.power_limit_w, h200.power_default_limit_w) == (700.0, 700.0)
    assert (h200.temp_slowdown_c, h200.temp_shutdown_c, h200.temp_max_gpu_c) == (89.0, 95.0, 87.0)
    assert (h200.sm_clock_max_mhz, h200.mem_clock_max_mhz) == (1980, 3201)
    assert (h200.pcie_max_gen, h200.pcie_max_width) == (5, 16)
    assert h200.gpm_supported is True
    assert (a100.index, a100.name, a100.uuid, a100.gpm_supported) == (1, "NVIDIA A100", "GPU-b", False)


def test_cuda_version_decodes_minor():
    assert opened(FakeNvml(cuda=12040)).cuda_version == "12.4"


def test_sample_reports_every_field_in_model_units():
    fake = FakeNvml([FakeGpu()])
    (s,) = opened(fake).sample()
    assert not s.lost
    assert (s.util_gpu, s.util_mem) == (97.0, 40.0)
    assert (s.memory_used, s.memory_total) == (3 * GIB, 141 * GIB)
    assert s.temp_c == 51.0
    assert (s.power_w, s.power_limit_w) == (312.5, 700.0)
    assert s.energy_mj == 9_000_000
    assert (s.sm_clock_mhz, s.mem_clock_mhz) == (1980, 3201)
    assert s.throttle_mask == 0x24
    assert s.throttle_reasons == ["SwPowerCap", "SwThermalSlowdown"]
    assert s.pstate == 0
    assert (s.pcie_gen, s.pcie_width) == (5, 16)
    assert [(p.pid, p.used_memory, p.kind) for p in s.processes or ()] == [(4242, 2 * GIB, "compute"), (4343, None, "compute")]


def test_unknown_pstate_is_absent():
    (s,) = opened(FakeNvml([FakeGpu(pstate=pynvml.NVML_PSTATE_UNKNOWN)])).sample()
    assert s.pstate is None


# --- absent values ------------------------------------------------------------------------


def test_unsupported_calls_become_absent_and_the_rest_still_reads():
    gpu = FakeGpu(
        unsupported={
            "nvmlDeviceGetPowerUsage",
            "nvmlDeviceGetTotalEnergyConsumption",
            "nvmlDeviceGetTemperatureThreshold",
            "nvmlDeviceGetComputeRunningProcesses",
        }
    )
    telemetry = opened(FakeNvml([gpu]))
    (info,) = telemetry.infos
    assert info.temp_slowdown_c is None and info.temp_shutdown_c is None
    assert info.name == "NVIDIA H200"
    (s,) = telemetry.sample()
    assert s.power_w is None and s.energy_mj is None and s.processes is None
    assert s.temp_c == 51.0 and s.sm_clock_mhz == 1980
    recorded = to_dict(s)
    assert "power_w" not in recorded and "energy_mj" not in recorded
    assert recorded["temp_c"] == 51.0


def test_functions_missing_from_the_module_are_tolerated_and_fall_back():
    missing = {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetTemperatureV", "nvmlGpmQueryDeviceSupport", "nvmlDeviceGetTotalEnergyConsumption"}
    fake = FakeNvml([FakeGpu(throttle_mask=0x8)], missing=missing)
    telemetry = opened(fake)
    assert telemetry.infos[0].gpm_supported is False
    first, second = telemetry.sample(), telemetry.sample()
    for (s,) in (first, second):
        assert s.throttle_reasons == ["HwSlowdown"]  # from the older ...ThrottleReasons
        assert s.temp_c == 51.0  # from the older nvmlDeviceGetTemperature
        assert s.energy_mj is None
        assert s.sm_active is None


def test_fallback_sticks_to_the_variant_that_answered():
    fake = FakeNvml([FakeGpu()], missing={"nvmlDeviceGetTemperatureV"})
    telemetry = opened(fake)
    telemetry.sample()
    fake.missing.clear()  # the newer call appears: we keep the one that worked
    for _ in range(3):
        assert telemetry.sample()[0].temp_c == 51.0
    assert fake.calls["nvmlDeviceGetTemperature"] == 4
    assert fake.calls["nvmlDeviceGetTemperatureV"] == 0


def test_an_absent_value_is_logged_once_not_every_sample(caplog):
    fake = FakeNvml([FakeGpu(unsupported={"nvmlDeviceGetPowerUsage"})])
    telemetry = opened(fake)
    with caplog.at_level(logging.DEBUG, logger="gputui.telemetry"):
        for _ in range(5):
            telemetry.sample()
    power_logs = [r for r in caplog.records if "nvmlDeviceGetPowerUsage" in r.getMessage()]
    assert len(power_logs) == 1
    assert fake.calls["nvmlDeviceGetPowerUsage"] == 5  # still asked: only the log is once


# --- lost GPUs ------------------------------------------------------------------------------


@pytest.mark.parametrize("error", [pynvml.NVMLError_GpuIsLost, pynvml.NVMLError_GpuNotFound, pynvml.NVMLError_Unknown])
def test_a_lost_gpu_is_marked_lost_while_the_other_keeps_reporting(error):
    gpus = [FakeGpu(), FakeGpu(name="second", lost_error=error)]
    fake = FakeNvml(gpus)
    telemetry = opened(fake)
    before = telemetry.sample()
    assert [s.lost for s in before] == [False, False] and before[1].temp_c == 51.0

    gpus[1].lost = True
    for _ in range(2):
        ok, lost = telemetry.sample()
        assert lost.lost is True
        assert to_dict(lost) == {"index": 1, "lost": True}  # nothing else
        assert not ok.lost and ok.temp_c == 51.0 and ok.power_w == 312.5

    # It stays lost even if it answers again: a lost GPU needs a reset.
    gpus[1].lost = False
    assert telemetry.sample()[1].lost is True


def test_a_gpu_lost_while_opening_is_reported_lost():
    gpus = [FakeGpu(lost=True), FakeGpu()]
    telemetry = opened(FakeNvml(gpus))
    assert [info.index for info in telemetry.infos] == [0, 1]
    lost, ok = telemetry.sample()
    assert lost.lost and not ok.lost and ok.memory_used == 3 * GIB


def test_unknown_error_before_the_gpu_ever_answered_is_only_an_absent_value():
    gpu = FakeGpu(unsupported=set())
    fake = FakeNvml([gpu])

    def name_fails(handle):  # the first device call fails with an unknown error
        fake.calls["nvmlDeviceGetName"] += 1
        raise pynvml.NVMLError_Unknown()

    fake.nvmlDeviceGetName = name_fails
    telemetry = opened(fake)
    assert telemetry.infos[0].name == "GPU 0"
    (s,) = telemetry.sample()
    assert not s.lost and s.temp_c == 51.0


# --- no NVML, no GPU ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "error, words",
    [
        (pynvml.NVMLError_LibraryNotFound, "library not found"),
        (pynvml.NVMLError_DriverNotLoaded, "driver not loaded"),
        (pynvml.NVMLError_NoPermission, "permission"),
    ],
)
def test_init_failure_gives_no_gpus_and_a_reason(error, words):
    telemetry = GpuTelemetry(FakeNvml(init_error=error))
    telemetry.open()  # must not raise
    assert telemetry.available is False
    assert telemetry.infos == []
    assert telemetry.sample() == []
    assert words in telemetry.unavailable_reason.lower()
    telemetry.close()


def test_nvml_without_gpus_says_so():
    telemetry = opened(FakeNvml([]))
    assert telemetry.available is True
    assert telemetry.infos == [] and telemetry.sample() == []
    assert telemetry.unavailable_reason == "NVML found no GPU"


def test_reason_before_open_and_shutdown_after_close():
    fake = FakeNvml()
    telemetry = GpuTelemetry(fake)
    assert telemetry.unavailable_reason and telemetry.sample() == []
    telemetry.open()
    assert fake.initialized == 1
    telemetry.close()
    assert fake.initialized == 0
    assert telemetry.sample() == []
    assert telemetry.infos[0].name == "NVIDIA H200"  # static facts stay for the report


# --- GPM -------------------------------------------------------------------------------------


def test_gpm_is_absent_on_the_first_sample_then_reported():
    fake = FakeNvml([FakeGpu(), FakeGpu(gpm=None)])
    telemetry = opened(fake)
    first = telemetry.sample()
    assert all(s.sm_active is None and s.pcie_tx_bps is None for s in first)
    for _ in range(3):  # every later tick pairs the previous sample with a new one
        h200, no_gpm = telemetry.sample()
        assert (h200.sm_active, h200.sm_occupancy, h200.tensor_active, h200.dram_active) == (42.0, 21.5, 30.0, 55.0)
        assert h200.pcie_tx_bps == 100.0 * 1024 * 1024  # NVML says MiB/s, the model wants bytes/s
        assert h200.pcie_rx_bps == 2.5 * 1024 * 1024
        assert no_gpm.sm_active is None and no_gpm.util_gpu == 97.0


def test_gpm_metric_unsupported_on_its_own_is_absent():
    gpu = FakeGpu()
    del gpu.gpm[pynvml.NVML_GPM_METRIC_SM_OCCUPANCY]
    telemetry = opened(FakeNvml([gpu]))
    telemetry.sample()
    (s,) = telemetry.sample()
    assert s.sm_occupancy is None and s.sm_active == 42.0


def test_gpm_buffers_are_allocated_once_and_freed_on_close():
    fake = FakeNvml([FakeGpu(), FakeGpu()])
    telemetry = opened(fake)
    for _ in range(5):
        telemetry.sample()
    assert fake.calls["nvmlGpmSampleAlloc"] == 4  # two per GPU, reused every tick
    assert fake.gpm_buffers_in_use == 4
    telemetry.close()
    assert fake.gpm_buffers_in_use == 0


def test_gpm_restarts_after_a_failed_gpm_sample():
    gpu = FakeGpu()
    telemetry = opened(FakeNvml([gpu]))
    telemetry.sample()
    assert telemetry.sample()[0].sm_active == 42.0
    gpu.unsupported.add("nvmlGpmSampleGet")
    assert telemetry.sample()[0].sm_active is None
    gpu.unsupported.clear()
    assert telemetry.sample()[0].sm_active is None  # a fresh first sample
    assert telemetry.sample()[0].sm_active == 42.0


# --- slow calls stay off the per-sample path ----------------------------------------------------


def test_pcie_link_is_reread_only_after_its_ttl():
    clock = FakeClock()
    gpu = FakeGpu(pcie_gen=4)
    fake = FakeNvml([gpu])
    telemetry = opened(fake, clock=clock, pcie_ttl_s=5.0)
    for _ in range(4):
        assert telemetry.sample()[0].pcie_gen == 4
        clock.now += 1.0
    assert fake.calls["nvmlDeviceGetCurrPcieLinkGeneration"] == 1
    gpu.pcie_gen, gpu.pcie_width = 1, 8  # idle GPUs drop their link speed
    assert telemetry.sample()[0].pcie_gen == 4  # 4 s since the read: still cached
    clock.now += 1.0
    s = telemetry.sample()[0]
    assert (s.pcie_gen, s.pcie_width) == (1, 8)
    assert fake.calls["nvmlDeviceGetCurrPcieLinkGeneration"] == 2


def test_pcie_throughput_is_never_called():
    fake = FakeNvml([FakeGpu(), FakeGpu()])
    telemetry = opened(fake)
    samples = [telemetry.sample() for _ in range(3)]
    assert all(s.pcie_tx_bps is not None for s in samples[-1])  # PCIe rates come from GPM
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 0
