"""Preflight GPU checks: facts read through the fake NVML, graded by hand-made facts,
the CUDA device count through a double of libcuda, and the stage on a real GPU."""

from __future__ import annotations

from pathlib import Path

import pynvml
import pytest

from gputui.check.preflight import run_preflight_stage
from gputui.check.preflight_gpu import (
    NOT_REPORTED,
    CudaDevices,
    GpuFacts,
    SystemFacts,
    count_cuda_devices,
    grade_cuda_devices,
    grade_gpu,
    grade_system,
    read_gpu_facts,
    read_system_facts,
)
from gputui.check.result import FAIL, INFO, OK, SKIPPED, STATUSES, WARN
from gputui.check.stage_context import CheckOptions, GpuUnderTest, StageContext, gpus_under_test
from gputui.gpus.models import find_model
from gputui.model import GpuInfo
from gputui.telemetry.gpu import GpuTelemetry
from gputui.telemetry.nvml import Nvml
from tests.support.fake_nvml import GIB, FakeGpu, FakeNvml

UNCORRECTED = pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED


def h200(index: int = 0, name: str = "NVIDIA H200") -> GpuUnderTest:
    info = GpuInfo(index=index, name=name, memory_total=141 * GIB)
    return GpuUnderTest(info=info, model=find_model(info.name, info.memory_total))


def healthy(**changes) -> GpuFacts:
    facts = GpuFacts(
        name="NVIDIA H200",
        power_limit_w=700.0,
        power_default_w=700.0,
        sm_clock_max_mhz=1980,
        persistence_on=True,
        mig_on=False,
        mig_pending_on=False,
        ecc_on=True,
        ecc_pending_on=True,
        ecc_volatile_uncorrected=0,
        ecc_aggregate_uncorrected=0,
        remapped_rows_correctable=0,
        remapped_rows_uncorrectable=0,
        remap_pending=False,
        remap_failure=False,
        temp_c=35.0,
        temp_slowdown_c=89.0,
        temp_shutdown_c=95.0,
    )
    for key, value in changes.items():
        setattr(facts, key, value)
    return facts


def by_id(results):
    ids = [r.id for r in results]
    assert len(ids) == len(set(ids)), ids
    return {r.id: r for r in results}


def opened_nvml(fake: FakeNvml) -> Nvml:
    nvml = Nvml(fake)
    assert nvml.init() is None
    return nvml


# --- reading facts ----------------------------------------------------------------------


def test_read_gpu_facts_reads_every_value_in_model_units():
    gpu = FakeGpu(
        power_limit_mw=450_000,
        persistence_mode=0,
        mig_mode=(1, 0),
        ecc_mode=(1, 0),
        ecc_errors={(UNCORRECTED, pynvml.NVML_VOLATILE_ECC): 2, (UNCORRECTED, pynvml.NVML_AGGREGATE_ECC): 7},
        retired_pages={pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR: [0x1000, 0x2000]},
        retired_pages_pending=1,
        remapped_rows=(3, 1, 1, 0),
        temp_c=44,
    )
    fake = FakeNvml([gpu])
    nvml = opened_nvml(fake)
    facts = read_gpu_facts(nvml, nvml.call("nvmlDeviceGetHandleByIndex", 0))
    assert (facts.name, facts.power_limit_w, facts.power_default_w, facts.sm_clock_max_mhz) == ("NVIDIA H200", 450.0, 700.0, 1980)
    assert (facts.persistence_on, facts.mig_on, facts.mig_pending_on) == (False, True, False)
    assert (facts.ecc_on, facts.ecc_pending_on) == (True, False)
    assert (facts.ecc_volatile_uncorrected, facts.ecc_aggregate_uncorrected) == (2, 7)
    assert (facts.retired_pages_sbe, facts.retired_pages_dbe, facts.retired_pages_pending) == (0, 2, True)
    assert (facts.remapped_rows_correctable, facts.remapped_rows_uncorrectable) == (3, 1)
    assert (facts.remap_pending, facts.remap_failure) == (True, False)
    assert (facts.temp_c, facts.temp_slowdown_c, facts.temp_shutdown_c) == (44.0, 89.0, 95.0)


def test_values_a_gpu_does_not_report_are_skipped_never_failed():
    unsupported = {
        "nvmlDeviceGetRetiredPages",
        "nvmlDeviceGetRetiredPagesPendingStatus",
        "nvmlDeviceGetMigMode",
        "nvmlDeviceGetPersistenceMode",
        "nvmlDeviceGetEccMode",
        "nvmlDeviceGetTotalEccErrors",
    }
    fake = FakeNvml([FakeGpu(unsupported=unsupported)], missing={"nvmlDeviceGetRemappedRows"})
    nvml = opened_nvml(fake)
    results = by_id(grade_gpu(read_gpu_facts(nvml, nvml.call("nvmlDeviceGetHandleByIndex", 0)), h200()))
    for key in ("retired_pages", "mig", "persistence", "ecc_mode", "ecc_uncorrected", "remapped_rows"):
        result = results[f"gpu0.{key}"]
        assert result.status == SKIPPED and result.cause.startswith(NOT_REPORTED), key
    assert results["gpu0.power_limit"].status == OK


def test_everything_absent_gives_only_skipped_lines():
    results = grade_gpu(GpuFacts(), h200())
    assert {r.status for r in results} == {SKIPPED}
    assert all(NOT_REPORTED in r.cause for r in results)
    assert all(r.id.startswith("gpu0.") and r.gpu == 0 and r.group == "preflight" for r in results)


# --- power and clocks --------------------------------------------------------------------


def test_power_limit_at_60_percent_of_the_default_fails():
    result = by_id(grade_gpu(healthy(power_limit_w=420.0), h200()))["gpu0.power_limit"]
    assert result.status == FAIL
    assert (result.value, result.unit, result.expected) == (420.0, "W", 700.0)
    assert result.cause == "power-limited to 420 W of its 700 W default"
    assert "nvidia-smi -pl 700" in result.advice


@pytest.mark.parametrize(("limit", "status"), [(700.0, OK), (650.0, OK), (560.0, WARN), (500.0, FAIL)])
def test_power_limit_grades_by_ratio_to_the_default(limit, status):
    assert by_id(grade_gpu(healthy(power_limit_w=limit), h200()))["gpu0.power_limit"].status == status


def test_default_limit_and_max_clock_against_the_datasheet():
    results = by_id(grade_gpu(healthy(power_default_w=500.0, power_limit_w=500.0, sm_clock_max_mhz=1400), h200()))
    default = results["gpu0.power_default"]
    assert default.status == FAIL and default.expected == 700.0 and "datasheet" in default.expected_source
    assert "500 W" in default.cause and "700 W" in default.cause
    clock = results["gpu0.sm_clock_max"]
    assert clock.status == FAIL and clock.expected == 1980.0 and "1400 MHz" in clock.cause
    # The enforced limit equals this card's own default: no complaint there.
    assert results["gpu0.power_limit"].status == OK


def test_a_gpu_not_in_the_reference_table_gets_measurements_without_verdicts():
    unknown = GpuUnderTest(info=GpuInfo(index=1, name="Mystery Accelerator 9000", memory_total=48 * GIB), model=None)
    results = by_id(grade_gpu(healthy(power_default_w=300.0, power_limit_w=300.0, sm_clock_max_mhz=1400), unknown))
    for key, value in (("power_default", 300.0), ("sm_clock_max", 1400)):
        result = results[f"gpu1.{key}"]
        assert result.status == INFO and result.value == value and result.expected is None
        assert "no reference" in result.detail and "Mystery Accelerator 9000" in result.detail
    measured = [r for r in results.values() if r.status != SKIPPED]
    assert [r.id for r in results.values() if r.status == SKIPPED] == ["gpu1.retired_pages"]  # not in the facts
    assert all(r.status in (OK, INFO) and r.value is not None for r in measured)


# --- memory health -----------------------------------------------------------------------


def test_a_volatile_uncorrected_ecc_error_fails():
    result = by_id(grade_gpu(healthy(ecc_volatile_uncorrected=1, ecc_aggregate_uncorrected=1), h200()))["gpu0.ecc_uncorrected"]
    assert result.status == FAIL and result.value == 1 and result.expected == 0
    assert "since the driver loaded" in result.cause and "reset" in result.advice


def test_uncorrected_errors_only_in_the_aggregate_count_warn():
    result = by_id(grade_gpu(healthy(ecc_aggregate_uncorrected=4), h200()))["gpu0.ecc_uncorrected"]
    assert result.status == WARN and "4 uncorrected" in result.cause and result.data["aggregate"] == 4


def test_ecc_turned_off_warns_and_has_no_counts():
    results = by_id(grade_gpu(healthy(ecc_on=False, ecc_pending_on=True, ecc_volatile_uncorrected=None, ecc_aggregate_uncorrected=None), h200()))
    assert results["gpu0.ecc_mode"].status == WARN and "next reboot" in results["gpu0.ecc_mode"].detail
    assert results["gpu0.ecc_uncorrected"].status == SKIPPED and "ECC is off" in results["gpu0.ecc_uncorrected"].cause


def test_uncorrected_ecc_error_read_through_the_fake_nvml_fails():
    fake = FakeNvml([FakeGpu(ecc_errors={(UNCORRECTED, pynvml.NVML_VOLATILE_ECC): 3})])
    nvml = opened_nvml(fake)
    facts = read_gpu_facts(nvml, nvml.call("nvmlDeviceGetHandleByIndex", 0))
    assert by_id(grade_gpu(facts, h200()))["gpu0.ecc_uncorrected"].status == FAIL


def test_row_remapping_pending_warns_and_failure_fails():
    pending = by_id(grade_gpu(healthy(remapped_rows_uncorrectable=1, remap_pending=True), h200()))
    assert pending["gpu0.remapped_rows"].status == WARN and "reset" in pending["gpu0.remapped_rows"].cause
    failed = by_id(grade_gpu(healthy(remap_pending=True, remap_failure=True), h200()))
    assert failed["gpu0.remapped_rows"].status == FAIL and "another machine" in failed["gpu0.remapped_rows"].advice


def test_retired_pages_pending_warn_and_many_fail():
    pending = by_id(grade_gpu(healthy(retired_pages_sbe=2, retired_pages_dbe=1, retired_pages_pending=True), h200()))["gpu0.retired_pages"]
    assert pending.status == WARN and pending.value == 3
    many = by_id(grade_gpu(healthy(retired_pages_sbe=40, retired_pages_dbe=20, retired_pages_pending=False), h200()))["gpu0.retired_pages"]
    assert many.status == FAIL and "60" in many.cause


# --- modes and temperature ---------------------------------------------------------------


def test_persistence_off_and_mig_on_warn():
    results = by_id(grade_gpu(healthy(persistence_on=False, mig_on=True, mig_pending_on=True), h200()))
    assert results["gpu0.persistence"].status == WARN and "nvidia-smi -pm 1" in results["gpu0.persistence"].advice
    assert results["gpu0.mig"].status == WARN and "slice" in results["gpu0.mig"].cause


def test_temperature_is_information_until_it_passes_the_slowdown_threshold():
    results = by_id(grade_gpu(healthy(temp_c=45.0), h200()))
    cool = results["gpu0.temperature"]
    assert cool.status == INFO and cool.expected == 89.0 and "shutdown at 95" in cool.detail
    hot = by_id(grade_gpu(healthy(temp_c=91.0), h200()))["gpu0.temperature"]
    assert hot.status == FAIL and "89 °C slowdown" in hot.cause


def test_every_result_that_is_not_ok_says_why_and_what_to_do():
    bad = healthy(
        power_limit_w=300.0,
        power_default_w=500.0,
        sm_clock_max_mhz=1000,
        persistence_on=False,
        mig_on=True,
        ecc_volatile_uncorrected=1,
        remap_failure=True,
        temp_c=99.0,
    )
    for result in grade_gpu(bad, h200()):
        assert result.status in STATUSES
        if result.status in (WARN, FAIL):
            assert result.cause and result.advice, result.id


# --- driver and CUDA ---------------------------------------------------------------------


class FakeLibcuda:
    """Answers like libcuda.so.1's cuInit / cuDeviceGetCount / cuGetErrorName."""

    def __init__(self, count: int = 1, init_code: int = 0) -> None:
        self.count, self.init_code = count, init_code

    def cuInit(self, flags):
        return self.init_code

    def cuDeviceGetCount(self, out):
        out._obj.value = self.count
        return 0

    def cuGetErrorName(self, code, out):
        out._obj.value = {100: b"CUDA_ERROR_NO_DEVICE", 804: b"CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE"}[code]
        return 0


def test_count_cuda_devices_through_the_driver_api():
    assert count_cuda_devices(lambda: FakeLibcuda(count=8), environ={}) == CudaDevices(8, None, None)
    no_device = count_cuda_devices(lambda: FakeLibcuda(init_code=100), environ={"CUDA_VISIBLE_DEVICES": ""})
    assert (no_device.count, no_device.error, no_device.visible_devices) == (0, "cuInit: CUDA_ERROR_NO_DEVICE", "")


def test_count_cuda_devices_without_libcuda_is_skipped():
    def missing():
        raise OSError("libcuda.so.1: cannot open shared object file")

    cuda = count_cuda_devices(missing, environ={})
    assert cuda.count is None
    result = grade_cuda_devices(cuda, 8)
    assert result.status == SKIPPED and "libcuda.so.1" in result.cause


def test_cuda_devices_matching_nvml_are_ok():
    assert grade_cuda_devices(CudaDevices(8), 8).status == OK


def test_cuda_seeing_no_gpu_while_nvml_does_fails():
    result = grade_cuda_devices(CudaDevices(0, "cuInit: CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE"), 8)
    assert result.status == FAIL and "NVML sees 8" in result.cause
    assert "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE" in result.cause and "--gpus all" in result.advice


def test_gpus_hidden_by_cuda_visible_devices_are_information():
    hidden = grade_cuda_devices(CudaDevices(2, None, "0,1"), 8)
    assert hidden.status == INFO and "hides 6 of the 8 GPUs" in hidden.detail
    all_hidden = grade_cuda_devices(CudaDevices(0, "cuInit: CUDA_ERROR_NO_DEVICE", "-1"), 8)
    assert all_hidden.status == WARN and "hides every GPU" in all_hidden.cause
    # The variable lists four, CUDA sees two: not the variable's doing.
    assert grade_cuda_devices(CudaDevices(2, None, "0,1,2,3"), 8).status == FAIL


def test_driver_versions_are_information():
    nvml = opened_nvml(FakeNvml([FakeGpu(), FakeGpu()]))
    facts = read_system_facts(nvml)
    assert facts == SystemFacts(driver_version="580.159.03", cuda_driver_version="13.0", nvml_gpu_count=2)
    results = by_id(grade_system(facts, CudaDevices(2)))
    assert results["driver.version"].status == INFO and results["driver.version"].value == "580.159.03"
    assert results["driver.cuda"].value == "13.0"
    assert results["cuda.devices"].status == OK


# --- the stage with GPUs -------------------------------------------------------------------


def stage_context(fake, tmp_path: Path, reported: list) -> StageContext:
    telemetry = GpuTelemetry(fake)
    telemetry.open()
    return StageContext(
        CheckOptions(quick=True, workdir=tmp_path),
        gpus_under_test(telemetry.infos, None),
        report=reported.append,
        nvml=opened_nvml(fake),
        gpu_unavailable_reason=telemetry.unavailable_reason,
    )


def test_stage_reports_driver_and_gpu_checks_first_and_the_disk_read_last(tmp_path):
    reported = []
    fake = FakeNvml([FakeGpu(), FakeGpu(power_limit_mw=420_000)])
    steal_times = iter([_times(0, 0), _times(100, 0)])
    run_preflight_stage(
        stage_context(fake, tmp_path, reported),
        cuda_devices=lambda: CudaDevices(2),
        cgroup_root=tmp_path / "no-cgroup",
        cpu_times=lambda: next(steal_times),
        read_test_bytes=1024**2,
    )
    ids = [r.id for r in reported]
    assert ids[:3] == ["driver.version", "driver.cuda", "cuda.devices"]
    assert ids.index("gpu1.temperature") < ids.index("host.cores")
    assert ids[-1] == "host.disk_read"
    results = by_id(reported)
    assert results["gpu1.power_limit"].status == FAIL and results["gpu0.power_limit"].status == OK
    assert "for 2 GPU(s)" in results["host.cores"].detail
    assert "gpu.none" not in results


def _times(total: float, steal: float):
    from collections import namedtuple

    Times = namedtuple("Times", "user nice system idle iowait irq softirq steal guest guest_nice")
    return Times(total - steal, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, steal, 0.0, 0.0)


def test_stage_reports_a_gpu_that_stops_answering_as_a_failure(tmp_path):
    reported = []
    fake = FakeNvml([FakeGpu(), FakeGpu()])
    ctx = stage_context(fake, tmp_path, reported)
    fake.gpus[1].lost = True
    ctx.stopped.set()  # the GPU checks only: the stage ends before the host checks
    run_preflight_stage(ctx, cuda_devices=lambda: CudaDevices(2))
    ids = [r.id for r in reported]
    assert ids[:3] == ["driver.version", "driver.cuda", "cuda.devices"]
    assert "gpu1.answers" not in ids  # stopped before the GPU loop
    ctx.stopped.clear()
    reported.clear()
    run_preflight_stage(
        ctx, cuda_devices=lambda: CudaDevices(2), cgroup_root=tmp_path, cpu_times=iter([_times(0, 0), _times(10, 0)]).__next__, read_test_bytes=1024**2
    )
    lost = by_id(reported)["gpu1.answers"]
    assert lost.status == FAIL and "stopped answering" in lost.cause
    assert by_id(reported)["gpu0.power_limit"].status == OK


# --- a real GPU ------------------------------------------------------------------------------


@pytest.mark.gpu
def test_preflight_stage_on_real_nvml(tmp_path):
    telemetry = GpuTelemetry()
    telemetry.open()
    nvml = Nvml()
    assert nvml.init() is None
    reported = []
    ctx = StageContext(CheckOptions(quick=True, workdir=tmp_path), gpus_under_test(telemetry.infos, None), report=reported.append, nvml=nvml)
    try:
        run_preflight_stage(ctx)
    finally:
        nvml.shutdown()
        telemetry.close()
    results = by_id(reported)
    assert results["driver.version"].status == INFO and results["driver.version"].value
    assert results["cuda.devices"].status in (OK, INFO, SKIPPED)
    for gpu in ctx.gpus:
        limit = results[f"gpu{gpu.index}.power_limit"]
        assert limit.status != SKIPPED and limit.value > 0
        assert results[f"gpu{gpu.index}.temperature"].value > 0
    assert results["host.disk_read"].status != SKIPPED and results["host.disk_read"].value > 0
    for result in reported:
        if result.status in (WARN, FAIL):
            assert result.cause and result.advice, result.id
