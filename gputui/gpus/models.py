"""What a GPU model should deliver: datasheet figures and measured baselines, shipped as
data in ``gputui/gpus/data``, and the share of a datasheet peak that real code reaches.

:func:`find_model` maps the name NVML reports to a datasheet entry; :func:`expect`
gives the expectation for one metric with where it comes from.  A GPU that is in no
table still gets every measurement, with "no reference" instead of a verdict.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gputui.config import tomllib

DATA = Path(__file__).parent / "data"
GIB = 1024**3

# Share of a datasheet peak that a healthy card reaches in the check's micro-benchmarks,
# used only where no measured baseline exists for the GPU model: each at or a little under
# what healthy cards sustained at their power cap, not a short burst at the boost clock
# (docs/check.md#where-expectations-come-from).
ACHIEVABLE = {
    "matmul": 0.70,
    "memory_bandwidth": 0.85,
    "pcie": 0.80,
}

# metric -> (datasheet field, ACHIEVABLE key)
_DATASHEET_METRICS: dict[str, tuple[str, str]] = {
    "matmul_bf16": ("bf16_tflops", "matmul"),
    "matmul_fp16": ("fp16_tflops", "matmul"),
    "matmul_tf32": ("tf32_tflops", "matmul"),
    "memory_bandwidth": ("bandwidth_gbs", "memory_bandwidth"),
}


@dataclass(frozen=True)
class GpuModel:
    model: str
    match: tuple[str, ...]
    source: str
    specs: dict[str, Any] = field(default_factory=dict)  # every other key of the entry
    baselines: dict[str, Any] = field(default_factory=dict)  # metric -> value, plus "measured"

    def spec(self, key: str) -> Any:
        return self.specs.get(key)


@dataclass(frozen=True)
class Expectation:
    value: float
    source: str
    from_baseline: bool = False  # measured on this GPU model, not a share of its datasheet


@functools.lru_cache(maxsize=4)
def load_models(data_dir: Path = DATA) -> tuple[GpuModel, ...]:
    with open(data_dir / "gpus.toml", "rb") as fh:
        sheet = tomllib.load(fh)
    with open(data_dir / "baselines.toml", "rb") as fh:
        baselines = {entry["model"]: entry for entry in tomllib.load(fh).get("baseline", [])}
    models = []
    for entry in sheet.get("gpu", []):
        entry = dict(entry)
        name = entry.pop("model")
        match = tuple(entry.pop("match", ()))
        source = entry.pop("source", "datasheet")
        models.append(
            GpuModel(model=name, match=match, source=source, specs=entry, baselines={k: v for k, v in baselines.get(name, {}).items() if k != "model"})
        )
    return tuple(models)


def find_model(nvml_name: str | None, memory_total: int | None = None, models: tuple[GpuModel, ...] | None = None) -> GpuModel | None:
    """The datasheet entry for a GPU NVML calls ``nvml_name``, or None."""
    if not nvml_name:
        return None
    if models is None:
        return _find_in_datasheet(nvml_name, memory_total)
    return _match(nvml_name, memory_total, models)


# The diagnosis asks for the run's GPU model on every sample (the throughput ceiling):
# matching every entry's patterns each time was a tenth to a fifth of the session's
# dispatch thread (docs/performance.md#figures-behind-the-codes-choices).  The datasheet is read
# once, so its answers keep.
@functools.lru_cache(maxsize=64)
def _find_in_datasheet(nvml_name: str, memory_total: int | None) -> GpuModel | None:
    return _match(nvml_name, memory_total, load_models())


def _match(nvml_name: str, memory_total: int | None, models: tuple[GpuModel, ...]) -> GpuModel | None:
    candidates = [m for m in models if any(re.search(p, nvml_name, re.IGNORECASE) for p in m.match)]
    if not candidates:
        return None
    if memory_total is not None:  # "A100" alone: the entry whose memory matches NVML's
        gib = memory_total / GIB
        for model in candidates:
            size = model.spec("memory_gb")
            if size and abs(size - gib) <= 0.15 * size:
                return model
    return candidates[0]


def expect(model: GpuModel | None, metric: str) -> Expectation | None:
    """The expectation for ``metric`` on ``model``: a measured baseline where there is
    one, else the achievable share of the datasheet peak, else None."""
    if model is None:
        return None
    if metric in model.baselines:
        when = model.baselines.get("measured", "")
        return Expectation(float(model.baselines[metric]), f"baseline measured by gputui on {model.model}" + (f" ({when})" if when else ""), from_baseline=True)
    if metric in _DATASHEET_METRICS:
        key, share_key = _DATASHEET_METRICS[metric]
        peak = model.spec(key)
        if peak:
            share = ACHIEVABLE[share_key]
            return Expectation(peak * share, f"{share:.0%} of the datasheet's {peak:g} ({model.source})")
    return None


def datasheet_peak(model: GpuModel | None, metric: str) -> float | None:
    """The raw datasheet figure behind ``metric`` (for "x % of peak" beside a verdict)."""
    if model is None or metric not in _DATASHEET_METRICS:
        return None
    value = model.spec(_DATASHEET_METRICS[metric][0])
    return float(value) if value else None
