"""Small order statistics shared by the workloads and the recording summary."""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections import deque
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


class RollingMedian:
    """The median of the latest ``window`` values, kept in order as they come: a new
    value costs a binary search and a move of at most ``window`` floats, where
    ``median(values[-window:])`` sorts them all again (a run's every reading asks).
    Values that are not finite are left out: they have no place in an order."""

    def __init__(self, window: int) -> None:
        self.window = window
        self._recent: deque[float] = deque()
        self._ordered: list[float] = []

    def add(self, value: float) -> None:
        if not math.isfinite(value):
            return
        self._recent.append(value)
        insort(self._ordered, value)
        if len(self._recent) > self.window:
            del self._ordered[bisect_left(self._ordered, self._recent.popleft())]

    def clear(self) -> None:
        self._recent.clear()
        self._ordered.clear()

    @property
    def median(self) -> float | None:
        return _interpolated(self._ordered, 50.0) if self._ordered else None


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


class ValueCounts:
    """A long series kept as counts of its values rounded to ``digits`` decimals, so its
    memory is bounded by how many distinct values occur (a GPU's percentages, °C, watts
    and MHz at 0.1 resolution: a few thousand at most), not by the run's length: a
    24-hour, 8-GPU run at 10 Hz would otherwise keep ~0.4 GB of floats for its medians.
    Percentiles are :func:`percentile`'s, over the rounded values."""

    def __init__(self, digits: int = 1) -> None:
        self.digits = digits
        self._counts: dict[float, int] = {}
        self._n = 0

    def append(self, value: float) -> None:
        key = round(float(value), self.digits)
        self._counts[key] = self._counts.get(key, 0) + 1
        self._n += 1

    def __len__(self) -> int:
        return self._n

    def max(self) -> float | None:
        return max(self._counts) if self._counts else None

    def percentile(self, q: float) -> float | None:
        if not self._n:
            return None
        rank = (self._n - 1) * q / 100.0
        low = math.floor(rank)
        high = min(low + 1, self._n - 1)
        at_low = at_high = None
        seen = 0
        for value in sorted(self._counts):  # walk the ranks in value order
            seen += self._counts[value]
            if at_low is None and seen > low:
                at_low = value
            if seen > high:
                at_high = value
                break
        assert at_low is not None and at_high is not None
        return float(at_low + (at_high - at_low) * (rank - low))
