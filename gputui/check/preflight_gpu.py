"""Preflight checks of the driver and each GPU, before any load: is this the card that
was rented, at its full power and clocks, with healthy memory?

Readers (``read_*``, ``count_cuda_devices``) touch NVML (only through
:class:`~gputui.telemetry.nvml.Nvml`) or the CUDA driver; graders (``grade_*``) are
pure, so tests grade hand-made facts.  A value a GPU does not report is ``skipped``,
never a failure.  A GPU missing from the datasheet table keeps the checks that need
no datasheet (its own default power limit, its temperature thresholds, its error
counters); the datasheet comparisons become ``info`` with "no reference".
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gputui.check.result import AT_MOST, FAIL, INFO, OK, PREFLIGHT, WARN, CheckResult, ResultFields, Status, skipped
from gputui.check.stage_context import GpuUnderTest
from gputui.check.thresholds import RETIRED_PAGES_FAIL, grade_ratio
from gputui.telemetry.gpu import cuda_version, nvml_text, nvml_watts

if TYPE_CHECKING:
    from typing_extensions import Unpack

NOT_REPORTED = "not reported by this GPU/driver"
NVML_SOURCE = "NVML"

# --- driver and CUDA ---------------------------------------------------------------


@dataclass
class SystemFacts:
    driver_version: str | None = None
    cuda_driver_version: str | None = None  # the newest CUDA this driver runs, e.g. "13.0"
    nvml_gpu_count: int | None = None  # every GPU NVML sees, not only those under test


@dataclass
class CudaDevices:
    """What the CUDA driver API sees from this process."""

    count: int | None  # None: not counted (no libcuda.so.1)
    error: str | None = None  # why count is None, or cuInit's error when it is 0
    visible_devices: str | None = None  # CUDA_VISIBLE_DEVICES, None when unset


def read_system_facts(nvml: Any) -> SystemFacts:
    return SystemFacts(
        driver_version=nvml_text(nvml.call("nvmlSystemGetDriverVersion")),
        cuda_driver_version=cuda_version(nvml.call("nvmlSystemGetCudaDriverVersion")),
        nvml_gpu_count=nvml.call("nvmlDeviceGetCount"),
    )


CUDA_SUCCESS = 0
CUDA_ERROR_NO_DEVICE = 100


def _load_libcuda() -> Any:
    return ctypes.CDLL("libcuda.so.1")


def _cuda_error_name(lib: Any, code: int) -> str:
    name = ctypes.c_char_p()
    try:
        if lib.cuGetErrorName(code, ctypes.byref(name)) == CUDA_SUCCESS and name.value:
            return name.value.decode(errors="replace")
    except (AttributeError, ctypes.ArgumentError):
        pass
    return f"CUDA error {code}"


def count_cuda_devices(load: Callable[[], Any] = _load_libcuda, environ: Mapping[str, str] | None = None) -> CudaDevices:
    """Count devices with cuInit + cuDeviceGetCount, as every CUDA program will see them
    (the driver applies CUDA_VISIBLE_DEVICES).  ``load`` returns the library (tests
    pass a double); OSError from it means there is no libcuda."""
    visible = (os.environ if environ is None else environ).get("CUDA_VISIBLE_DEVICES")
    try:
        lib = load()
    except OSError as exc:
        return CudaDevices(None, f"libcuda.so.1 could not be loaded ({exc})", visible)
    code = lib.cuInit(0)
    if code != CUDA_SUCCESS:
        return CudaDevices(0, f"cuInit: {_cuda_error_name(lib, code)}", visible)
    count = ctypes.c_int(0)
    code = lib.cuDeviceGetCount(ctypes.byref(count))
    if code != CUDA_SUCCESS:
        return CudaDevices(0, f"cuDeviceGetCount: {_cuda_error_name(lib, code)}", visible)
    return CudaDevices(count.value, None, visible)


def _listed_devices(visible: str) -> int:
    """How many devices CUDA_VISIBLE_DEVICES lists; CUDA stops at a negative entry."""
    listed = 0
    for entry in visible.split(","):
        entry = entry.strip()
        if not entry or entry.startswith("-"):
            break
        listed += 1
    return listed


def grade_system(facts: SystemFacts, cuda: CudaDevices) -> list[CheckResult]:
    results = []
    if facts.driver_version:
        results.append(
            CheckResult(id="driver.version", group=PREFLIGHT, name="NVIDIA driver", status=INFO, value=facts.driver_version, expected_source=NVML_SOURCE)
        )
    else:
        results.append(skipped("driver.version", PREFLIGHT, "NVIDIA driver", NOT_REPORTED))
    if facts.cuda_driver_version:
        results.append(
            CheckResult(
                id="driver.cuda",
                group=PREFLIGHT,
                name="CUDA version of the driver",
                status=INFO,
                value=facts.cuda_driver_version,
                expected_source=NVML_SOURCE,
                detail="the newest CUDA this driver runs: frameworks built for a newer CUDA will not use the GPU",
            )
        )
    else:
        results.append(skipped("driver.cuda", PREFLIGHT, "CUDA version of the driver", NOT_REPORTED))
    results.append(grade_cuda_devices(cuda, facts.nvml_gpu_count))
    return results


def grade_cuda_devices(cuda: CudaDevices, nvml_count: int | None) -> CheckResult:
    """The GPUs CUDA programs can use against the GPUs NVML sees."""
    name = "GPUs CUDA sees"
    if cuda.count is None:
        return skipped("cuda.devices", PREFLIGHT, name, f"{cuda.error}; in a container, NVIDIA_DRIVER_CAPABILITIES must include 'compute'")
    result = CheckResult(
        id="cuda.devices", group=PREFLIGHT, name=name, status=OK, value=cuda.count, unit="GPUs", expected=nvml_count, expected_source="the GPUs NVML sees"
    )
    if cuda.visible_devices is not None:
        result.detail = f"CUDA_VISIBLE_DEVICES={cuda.visible_devices!r}"
    if nvml_count is None or cuda.count >= nvml_count:
        result.status = OK if cuda.count == nvml_count else INFO
        if nvml_count is not None and cuda.count > nvml_count:
            result.detail = f"CUDA sees more devices than NVML's {nvml_count} GPUs (MIG instances?)"
        return result
    hidden_by_variable = cuda.visible_devices is not None and cuda.count >= min(nvml_count, _listed_devices(cuda.visible_devices))
    if hidden_by_variable and cuda.count > 0:
        result.status = INFO
        result.detail = f"CUDA_VISIBLE_DEVICES={cuda.visible_devices!r} hides {nvml_count - cuda.count} of the {nvml_count} GPUs"
    elif hidden_by_variable:
        result.status = WARN
        result.cause = f"CUDA_VISIBLE_DEVICES={cuda.visible_devices!r} hides every GPU: nothing will run on them"
        result.advice = "Unset CUDA_VISIBLE_DEVICES, or list the GPUs to use (e.g. 0,1)."
    elif cuda.count == 0:
        result.status = FAIL
        why = f" ({cuda.error})" if cuda.error else ""
        result.cause = f"CUDA sees no GPU while NVML sees {nvml_count}{why}: the driver's CUDA part is broken, mismatched or not mounted into the container"
        result.advice = (
            "In a container use the NVIDIA runtime (docker run --gpus all) with "
            "NVIDIA_DRIVER_CAPABILITIES including compute; otherwise ask the provider: a driver "
            "and kernel module of different versions need a reboot."
        )
    else:
        result.status = FAIL
        result.cause = f"CUDA sees {cuda.count} of the {nvml_count} GPUs NVML sees: a GPU may be in a bad state (look for Xid lines in dmesg or nvidia-smi -q)"
        result.advice = "Ask the provider to reset the missing GPUs, or for another machine."
    return result


# --- one GPU -----------------------------------------------------------------------


@dataclass
class GpuFacts:
    """What NVML says about one GPU at rest.  None: not reported."""

    name: str | None = None
    power_limit_w: float | None = None  # enforced now
    power_default_w: float | None = None
    sm_clock_max_mhz: int | None = None
    persistence_on: bool | None = None
    mig_on: bool | None = None
    mig_pending_on: bool | None = None
    ecc_on: bool | None = None
    ecc_pending_on: bool | None = None  # after the next reset
    ecc_volatile_uncorrected: int | None = None  # since the driver loaded
    ecc_aggregate_uncorrected: int | None = None  # over the card's life
    retired_pages_sbe: int | None = None  # pre-Ampere page retirement
    retired_pages_dbe: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_correctable: int | None = None  # Ampere+ row remapping
    remapped_rows_uncorrectable: int | None = None
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    temp_c: float | None = None
    temp_slowdown_c: float | None = None
    temp_shutdown_c: float | None = None


def _flag(value: Any) -> bool | None:
    return None if value is None else bool(value)


def _pair(value: Any) -> tuple[bool | None, bool | None]:
    """(current, pending) of the [current, pending] lists NVML mode getters return."""
    if value is None:
        return None, None
    return bool(value[0]), bool(value[1])


def _count(value: Any) -> int | None:
    return None if value is None else len(value)


def read_gpu_facts(nvml: Any, handle: Any) -> GpuFacts:
    """Read one GPU's facts.  May raise GpuLost (the GPU stopped answering)."""
    call, const = nvml.call, nvml.const
    facts = GpuFacts(name=nvml_text(call("nvmlDeviceGetName", handle)))
    facts.power_limit_w = nvml_watts(call("nvmlDeviceGetEnforcedPowerLimit", handle))
    facts.power_default_w = nvml_watts(call("nvmlDeviceGetPowerManagementDefaultLimit", handle))
    facts.sm_clock_max_mhz = call("nvmlDeviceGetMaxClockInfo", handle, const("NVML_CLOCK_SM", 1))
    facts.persistence_on = _flag(call("nvmlDeviceGetPersistenceMode", handle))
    facts.mig_on, facts.mig_pending_on = _pair(call("nvmlDeviceGetMigMode", handle))
    facts.ecc_on, facts.ecc_pending_on = _pair(call("nvmlDeviceGetEccMode", handle))
    uncorrected = const("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
    facts.ecc_volatile_uncorrected = call("nvmlDeviceGetTotalEccErrors", handle, uncorrected, const("NVML_VOLATILE_ECC", 0))
    facts.ecc_aggregate_uncorrected = call("nvmlDeviceGetTotalEccErrors", handle, uncorrected, const("NVML_AGGREGATE_ECC", 1))
    facts.retired_pages_sbe = _count(call("nvmlDeviceGetRetiredPages", handle, const("NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS", 0)))
    facts.retired_pages_dbe = _count(call("nvmlDeviceGetRetiredPages", handle, const("NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1)))
    facts.retired_pages_pending = _flag(call("nvmlDeviceGetRetiredPagesPendingStatus", handle))
    remapped = call("nvmlDeviceGetRemappedRows", handle)
    if remapped is not None:
        correctable, uncorrectable, pending, failure = remapped
        facts.remapped_rows_correctable, facts.remapped_rows_uncorrectable = correctable, uncorrectable
        facts.remap_pending, facts.remap_failure = bool(pending), bool(failure)
    sensor = const("NVML_TEMPERATURE_GPU", 0)
    temp = call("nvmlDeviceGetTemperatureV", handle, sensor)
    if temp is None:
        temp = call("nvmlDeviceGetTemperature", handle, sensor)
    facts.temp_c = None if temp is None else float(temp)
    facts.temp_slowdown_c = _threshold(nvml, handle, "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", 1)
    facts.temp_shutdown_c = _threshold(nvml, handle, "NVML_TEMPERATURE_THRESHOLD_SHUTDOWN", 0)
    return facts


def _threshold(nvml: Any, handle: Any, const_name: str, default: int) -> float | None:
    value = nvml.call("nvmlDeviceGetTemperatureThreshold", handle, nvml.const(const_name, default))
    return None if value is None else float(value)


# Advice shared by several memory checks.
RESET_ADVICE = "The GPU needs a reset (nvidia-smi -r, root on the host) or the machine a reboot: ask the provider, or move to another machine."
REPLACE_ADVICE = "This GPU's memory is failing: ask the provider for another machine (quote this line)."


class _Grader:
    """Builds one GPU's results: ids ``gpu{i}.<key>``, the group, the GPU index."""

    def __init__(self, gpu: GpuUnderTest) -> None:
        self.gpu = gpu
        self.index = gpu.index

    def result(self, key: str, name: str, status: Status, **fields: Unpack[ResultFields]) -> CheckResult:
        return CheckResult(id=f"gpu{self.index}.{key}", group=PREFLIGHT, name=name, status=status, gpu=self.index, **fields)

    def not_reported(self, key: str, name: str, why: str = "") -> CheckResult:
        return skipped(f"gpu{self.index}.{key}", PREFLIGHT, name, NOT_REPORTED + why, gpu=self.index)

    def no_reference(self, key: str, name: str, value: Any, unit: str) -> CheckResult:
        """A reading kept without a verdict: no datasheet entry to compare with."""
        if self.gpu.model is None:
            why = f"{self.gpu.info.name!r} is not in the datasheet table"
        else:
            why = f"the datasheet table has no such figure for {self.gpu.model.model}"
        return self.result(key, name, INFO, value=value, unit=unit, detail=f"no reference: {why}")


def grade_gpu(facts: GpuFacts, gpu: GpuUnderTest) -> list[CheckResult]:
    g = _Grader(gpu)
    return [
        _power_limit(facts, g),
        _power_default(facts, g),
        _sm_clock(facts, g),
        _persistence(facts, g),
        _mig(facts, g),
        _ecc_mode(facts, g),
        _ecc_errors(facts, g),
        _retired_pages(facts, g),
        _remapped_rows(facts, g),
        _temperature(facts, g),
    ]


def _power_limit(facts: GpuFacts, g: _Grader) -> CheckResult:
    name = "Power limit"
    limit, default = facts.power_limit_w, facts.power_default_w
    if limit is None:
        return g.not_reported("power_limit", name)
    if default is None:
        return g.result("power_limit", name, INFO, value=limit, unit="W", detail="no default limit reported to compare with")
    status = grade_ratio(limit / default) if default else INFO
    result = g.result("power_limit", name, status or INFO, value=limit, unit="W", expected=default, expected_source="the GPU's default power limit (NVML)")
    if result.status in (WARN, FAIL):
        result.cause = f"power-limited to {limit:.0f} W of its {default:.0f} W default"
        result.advice = (
            f"Compute-bound work runs up to {1 - limit / default:.0%} slower. Ask the provider to "
            f"restore the default (nvidia-smi -pl {default:.0f}, root on the host) or for a discount."
        )
    return result


def _power_default(facts: GpuFacts, g: _Grader) -> CheckResult:
    return _against_datasheet(
        g,
        "power_default",
        "Default power limit",
        facts.power_default_w,
        "W",
        "tdp_w",
        "board power",
        cause="its default power limit is {value:.0f} W where the {model} datasheet says {spec} W: a lower-power variant, or a board configured lower",
        advice="Expect lower compute throughput; if you rented the full-power model, ask the provider.",
    )


def _sm_clock(facts: GpuFacts, g: _Grader) -> CheckResult:
    return _against_datasheet(
        g,
        "sm_clock_max",
        "Max SM clock",
        facts.sm_clock_max_mhz,
        "MHz",
        "boost_clock_mhz",
        "boost clock",
        cause="its maximum SM clock is {value} MHz where the {model} datasheet says {spec} MHz: a lower-clocked variant, or not the model its name suggests",
        advice="Expect compute throughput lower by about as much; the micro-benchmarks below measure it.",
    )


def _against_datasheet(
    g: _Grader, key: str, name: str, value: float | None, unit: str, spec_key: str, spec_words: str, *, cause: str, advice: str
) -> CheckResult:
    """A reading graded against one datasheet figure: not reported, no reference, or a ratio."""
    if value is None:
        return g.not_reported(key, name)
    model = g.gpu.model
    spec = model.spec(spec_key) if model else None
    if not spec or model is None:
        return g.no_reference(key, name, value, unit)
    result = g.result(
        key, name, grade_ratio(value / spec) or INFO, value=value, unit=unit, expected=float(spec), expected_source=f"{spec_words}, {model.source}"
    )
    if result.status in (WARN, FAIL):
        result.cause = cause.format(value=value, model=model.model, spec=spec)
        result.advice = advice
    return result


def _persistence(facts: GpuFacts, g: _Grader) -> CheckResult:
    name = "Persistence mode"
    if facts.persistence_on is None:
        return g.not_reported("persistence", name)
    if facts.persistence_on:
        return g.result("persistence", name, OK, value="on", expected="on")
    return g.result(
        "persistence",
        name,
        WARN,
        value="off",
        expected="on",
        cause="persistence mode is off: the driver tears the GPU down whenever no program uses it, so every "
        "CUDA start waits seconds for it to initialise again",
        advice="nvidia-smi -pm 1 (root on the host), or run nvidia-persistenced; in a container ask the provider.",
    )


def _mig(facts: GpuFacts, g: _Grader) -> CheckResult:
    name = "MIG mode"
    if facts.mig_on is None:
        return g.not_reported("mig", name, " (no MIG on this GPU)")
    detail = None
    if facts.mig_pending_on is not None and facts.mig_pending_on != facts.mig_on:
        detail = f"turns {'on' if facts.mig_pending_on else 'off'} at the next GPU reset"
    if not facts.mig_on:
        return g.result("mig", name, OK, value="off", expected="off", detail=detail)
    return g.result(
        "mig",
        name,
        WARN,
        value="on",
        expected="off",
        detail=detail,
        cause="MIG mode is on: you have a slice of this GPU (a MIG instance), not the whole card",
        advice="If you paid for whole GPUs, ask the provider to turn MIG off (nvidia-smi -mig 0 and a GPU reset) or for another machine.",
    )


def _ecc_mode(facts: GpuFacts, g: _Grader) -> CheckResult:
    name = "ECC mode"
    if facts.ecc_on is None:
        return g.not_reported("ecc_mode", name)
    detail = None
    if facts.ecc_pending_on is not None and facts.ecc_pending_on != facts.ecc_on:
        detail = f"turns {'on' if facts.ecc_pending_on else 'off'} at the next reboot"
    if facts.ecc_on:
        return g.result("ecc_mode", name, OK, value="on", expected="on", detail=detail)
    return g.result(
        "ecc_mode",
        name,
        WARN,
        value="off",
        expected="on",
        detail=detail,
        cause="ECC is off: memory errors go undetected and can silently corrupt results",
        advice="nvidia-smi -e 1 and a reboot (root on the host): ask the provider.",
    )


def _ecc_errors(facts: GpuFacts, g: _Grader) -> CheckResult:
    name = "Uncorrected ECC errors"
    volatile, aggregate = facts.ecc_volatile_uncorrected, facts.ecc_aggregate_uncorrected
    if facts.ecc_on is False:
        return skipped(f"gpu{g.index}.ecc_uncorrected", PREFLIGHT, name, "ECC is off: no error counts", gpu=g.index)
    if volatile is None and aggregate is None:
        return g.not_reported("ecc_uncorrected", name)
    result = g.result(
        "ecc_uncorrected",
        name,
        OK,
        value=volatile if volatile is not None else aggregate,
        unit="errors",
        expected=0,
        expected_source="none on a healthy GPU",
        detail=f"{_n(volatile)} since the driver loaded, {_n(aggregate)} over the GPU's life",
        data={"volatile": volatile, "aggregate": aggregate},
    )
    if volatile:
        result.status = FAIL
        result.cause = f"{volatile} uncorrected ECC error(s) since the driver loaded: GPU memory failed in use"
        result.advice = (
            "Programs on this GPU may crash or compute wrong results. " + RESET_ADVICE + " If errors come back after the reset, the GPU needs replacing."
        )
    elif aggregate:
        result.status = WARN
        result.cause = f"{aggregate} uncorrected ECC error(s) over the GPU's life, none since the driver loaded"
        result.advice = "Usually repaired by page retirement or row remapping (see those lines); watch for new errors with nvidia-smi -q -d ECC."
    return result


def _n(value: int | None) -> str:
    return "?" if value is None else str(value)


def _retired_pages(facts: GpuFacts, g: _Grader) -> CheckResult:
    name = "Retired memory pages"
    sbe, dbe, pending = facts.retired_pages_sbe, facts.retired_pages_dbe, facts.retired_pages_pending
    if sbe is None and dbe is None and pending is None:
        return g.not_reported("retired_pages", name, " (Ampere and newer GPUs remap rows instead)")
    total = (sbe or 0) + (dbe or 0)
    result = g.result(
        "retired_pages",
        name,
        OK,
        value=total,
        unit="pages",
        detail=f"{_n(sbe)} after single-bit, {_n(dbe)} after double-bit errors; NVIDIA replaces a GPU at {RETIRED_PAGES_FAIL}",
        data={"single_bit": sbe, "double_bit": dbe, "pending": pending},
    )
    if total >= RETIRED_PAGES_FAIL:
        result.status = FAIL
        result.cause = f"{total} memory pages retired: at NVIDIA's replacement threshold"
        result.advice = REPLACE_ADVICE
    elif pending:
        result.status = WARN
        result.cause = "a memory page waits to be retired: the bad page stays in use until the GPU is reset"
        result.advice = RESET_ADVICE
    return result


def _remapped_rows(facts: GpuFacts, g: _Grader) -> CheckResult:
    name = "Remapped memory rows"
    correctable, uncorrectable = facts.remapped_rows_correctable, facts.remapped_rows_uncorrectable
    if correctable is None and uncorrectable is None:
        return g.not_reported("remapped_rows", name, " (GPUs before Ampere retire pages instead)")
    result = g.result(
        "remapped_rows",
        name,
        OK,
        value=(correctable or 0) + (uncorrectable or 0),
        unit="rows",
        detail=f"{_n(correctable)} after correctable, {_n(uncorrectable)} after uncorrectable errors",
        data={"correctable": correctable, "uncorrectable": uncorrectable, "pending": facts.remap_pending, "failure": facts.remap_failure},
    )
    if facts.remap_failure:
        result.status = FAIL
        result.cause = "row remapping failed: a bad memory row could not be replaced"
        result.advice = REPLACE_ADVICE
    elif facts.remap_pending:
        result.status = WARN
        result.cause = "a row remap waits for a GPU reset: until then the bad row stays in use"
        result.advice = RESET_ADVICE
    return result


def _temperature(facts: GpuFacts, g: _Grader) -> CheckResult:
    name = "Temperature at rest"
    temp, slowdown, shutdown = facts.temp_c, facts.temp_slowdown_c, facts.temp_shutdown_c
    if temp is None:
        return g.not_reported("temperature", name)
    thresholds = (("slowdown", slowdown), ("shutdown", shutdown))
    limits = ", ".join(f"{label} at {value:.0f} °C" for label, value in thresholds if value is not None)
    result = g.result(
        "temperature",
        name,
        INFO,
        value=temp,
        unit="°C",
        expected=slowdown,
        bound=AT_MOST,
        expected_source="the GPU's slowdown threshold (NVML)" if slowdown is not None else None,
        detail=limits or "no slowdown threshold reported",
    )
    if slowdown is not None and temp >= slowdown:
        result.status = FAIL
        result.cause = (
            f"{temp:.0f} °C before any load, at or above its {slowdown:.0f} °C slowdown threshold: the cooling is failing (fans, airflow, a hot rack)"
        )
        result.advice = "This GPU will throttle under load: ask the provider to check the cooling, or move."
    return result
