"""Shared test setup: GPU tests run only where NVML finds a GPU, and say why not."""

from __future__ import annotations

import functools

import pytest


@functools.lru_cache(maxsize=1)
def _gpu_unavailable_reason() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            if pynvml.nvmlDeviceGetCount() == 0:
                return "NVML found no GPU"
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:  # any failure means: no usable GPU here
        return f"no NVIDIA GPU or driver ({type(exc).__name__}: {exc})"
    return None


def pytest_collection_modifyitems(config, items):
    reason = _gpu_unavailable_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"GPU test skipped: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
