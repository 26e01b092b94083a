"""Small order statistics shared by the workloads and the recording summary."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100) with linear interpolation; None for no values."""
    if not values:
        return None
    return _interpolated(sorted(values), q)


def _interpolated(ordered: Sequence[float], q: float) -> float:
    """The q-th percentile of values already sorted, at least one."""
    if len(ordered) == 1:
        return float(ordered[0])
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return float(ordered[low] + (ordered[high] - ordered[low]) * (rank - low))


def median(values: Sequence[float]) -> float | None:
    return percentile(values, 50.0)


def spread(values: Sequence[float]) -> dict[str, float]:
    """median, p5, p95, min, max and mean of a series; empty dict for no values."""
    if not values:
        return {}
    ordered = sorted(values)
    return {
        "median": _interpolated(ordered, 50.0),
        "p5": _interpolated(ordered, 5.0),
        "p95": _interpolated(ordered, 95.0),
        "min": float(min(values)),
        "max": float(max(values)),
        "mean": float(sum(values) / len(values)),
    }
