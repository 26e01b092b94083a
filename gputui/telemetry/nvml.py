"""The one boundary where NVML (pynvml) errors are turned into gputui's terms.

Above this module nobody catches pynvml exceptions.  A call either returns its value,
returns ``None`` ("this GPU, driver or nvidia-ml-py does not report it"), or raises
:class:`GpuLost` when the GPU stopped answering.  Initialisation never raises: it
returns a reason string a person can act on.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

# NVML return codes (nvml.h); read from the module when it has them, these are the
# fallbacks so a minimal test double does not need to define every constant.
_CODES = {
    "NVML_ERROR_UNINITIALIZED": 1,
    "NVML_ERROR_NOT_SUPPORTED": 3,
    "NVML_ERROR_NO_PERMISSION": 4,
    "NVML_ERROR_DRIVER_NOT_LOADED": 9,
    "NVML_ERROR_LIBRARY_NOT_FOUND": 12,
    "NVML_ERROR_FUNCTION_NOT_FOUND": 13,
    "NVML_ERROR_GPU_IS_LOST": 15,
    "NVML_ERROR_LIB_RM_VERSION_MISMATCH": 18,
    "NVML_ERROR_GPU_NOT_FOUND": 28,
    "NVML_ERROR_UNKNOWN": 999,
}


class GpuLost(Exception):
    """The GPU stopped answering (fell off the bus, needs a reset): stop asking it."""


_FAILED = object()  # what _invoke returns for "unsupported or failing"


class _NeverRaised(Exception):
    """Stands in for exception types a module does not define."""


class Nvml:
    """A thin wrapper around the pynvml module.

    ``module`` is injectable so tests can pass a test double; by default pynvml is
    imported lazily, on :meth:`init`, so importing gputui never needs it.
    Not thread-safe: use one instance from one thread (the sampler's).
    """

    def __init__(self, module: Any = None) -> None:
        self._module = module
        self.initialized = False
        self._logged: set[tuple[str, str]] = set()
        # Devices that have answered at least once: an NVML "Unknown Error" from such
        # a device means it went away, not that the call is unsupported.
        self._answered: set[int] = set()

    @property
    def module(self) -> Any:
        if self._module is None:
            import pynvml  # lazy: only needed where there may be a GPU

            self._module = pynvml
        return self._module

    def const(self, name: str, default: Any = None) -> Any:
        """A constant of the module (``NVML_CLOCK_SM`` …), or ``default``."""
        return getattr(self.module, name, default)

    def _code(self, name: str) -> int:
        return self.const(name, _CODES[name])

    # --- lifecycle ------------------------------------------------------------------

    def init(self) -> str | None:
        """Initialise NVML. Returns None on success, else why there is no NVML."""
        try:
            module = self.module
        except ImportError:
            return "nvidia-ml-py is not installed (pip install nvidia-ml-py)"
        try:
            module.nvmlInit()
        except Exception as exc:  # noqa: BLE001 - any failure here means "no NVML"
            return self._init_reason(exc)
        self.initialized = True
        return None

    def _init_reason(self, exc: Exception) -> str:
        code = getattr(exc, "value", None)
        if code == self._code("NVML_ERROR_LIBRARY_NOT_FOUND"):
            return "NVML library not found (no NVIDIA driver installed?)"
        if code == self._code("NVML_ERROR_DRIVER_NOT_LOADED"):
            return "NVIDIA driver not loaded (is the kernel module loaded? try nvidia-smi)"
        if code == self._code("NVML_ERROR_NO_PERMISSION"):
            return "no permission to use NVML (check access to /dev/nvidia*)"
        if code == self._code("NVML_ERROR_LIB_RM_VERSION_MISMATCH"):
            return "NVML library and kernel driver versions differ (reboot after a driver update?)"
        return f"NVML failed to initialise: {exc or type(exc).__name__}"

    def shutdown(self) -> None:
        if not self.initialized:
            return
        self.initialized = False
        try:
            self.module.nvmlShutdown()
        except Exception as exc:  # noqa: BLE001 - nothing useful to do at shutdown
            log.debug("nvmlShutdown failed: %s", exc)

    # --- calls ----------------------------------------------------------------------

    def call(self, fn_name: str, *args: Any) -> Any:
        """``module.fn_name(*args)``; None when unsupported or failing, GpuLost when lost."""
        value = self._invoke(fn_name, args)
        return None if value is _FAILED else value

    def call_ok(self, fn_name: str, *args: Any) -> bool:
        """For functions that return nothing (``nvmlDeviceRegisterEvents``): did it work?
        False when unsupported or failing, GpuLost when lost."""
        return self._invoke(fn_name, args) is not _FAILED

    def _invoke(self, fn_name: str, args: tuple[Any, ...]) -> Any:
        fn = getattr(self.module, fn_name, None)
        if fn is None:  # older nvidia-ml-py without this function
            self._log_once(fn_name, "missing from nvidia-ml-py; upgrade it to get this value", logging.INFO)
            return _FAILED
        try:
            value = fn(*args)
        except self._errors() as exc:
            code = getattr(exc, "value", None)
            device = id(args[0]) if args and fn_name.startswith("nvmlDevice") else None
            if code in (self._code("NVML_ERROR_GPU_IS_LOST"), self._code("NVML_ERROR_GPU_NOT_FOUND")):
                raise GpuLost(f"{fn_name}: {exc}") from exc
            if code == self._code("NVML_ERROR_UNKNOWN") and device in self._answered:
                raise GpuLost(f"{fn_name}: {exc} (after the GPU had answered)") from exc
            # NotSupported, FunctionNotFound, NoPermission, NoData, ...: absent, said once.
            self._log_once(fn_name, f"{exc or type(exc).__name__}; reported as absent", logging.DEBUG)
            return _FAILED
        if args and fn_name.startswith("nvmlDevice") and not fn_name.startswith("nvmlDeviceGetHandle"):
            self._answered.add(id(args[0]))
        return value

    def _errors(self) -> tuple[type[BaseException], ...]:
        # NVMLLibraryMismatchError: pynvml's versioned wrappers raise it when the
        # driver is older than the struct version nvidia-ml-py asks for.
        return (
            getattr(self.module, "NVMLError", _NeverRaised),
            getattr(self.module, "NVMLLibraryMismatchError", _NeverRaised),
        )

    def _log_once(self, fn_name: str, why: str, level: int) -> None:
        key = (fn_name, why)
        if key not in self._logged:
            self._logged.add(key)
            log.log(level, "%s: %s", fn_name, why)
