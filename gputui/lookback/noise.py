"""Is a throughput difference between two runs real, or noise?

A percentile bootstrap of the ratio of medians: resample each run's measured
readings with replacement, take median(B*) / median(A*), repeat, and read the 2.5th
and 97.5th percentiles.  An interval that contains 1 means the runs cannot be told
apart from their readings: "within noise".  The seed is fixed so that the same two
recordings always give the same answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy loads only when an interval is computed
    import numpy as np

RESAMPLES = 2000
SEED = 20240611
CONFIDENCE = 0.95
MIN_READINGS = 3  # fewer: no interval, the runs are compared on their medians alone
CHUNK_VALUES = 2_000_000  # resampled values held at once (16 MB), so a 24-hour run fits


@dataclass
class RatioInterval:
    ratio: float  # median(B) / median(A)
    low: float | None  # bootstrap interval; None with too few readings
    high: float | None

    @property
    def known(self) -> bool:
        return self.low is not None and self.high is not None

    @property
    def within_noise(self) -> bool | None:
        """True when the interval contains 1; None when there is no interval."""
        if self.low is None or self.high is None:
            return None
        return self.low <= 1.0 <= self.high

    def verdict(self) -> str:
        if not self.known:
            return f"too few readings to tell (fewer than {MIN_READINGS})"
        if self.within_noise:
            return "within noise"
        return f"real: {'faster' if self.ratio > 1 else 'slower'}"


def _bootstrap_medians(values: Sequence[float], resamples: int, rng: np.random.Generator) -> np.ndarray:
    import numpy as np

    data = np.asarray(values, dtype=float)
    n = len(data)
    per_chunk = max(1, CHUNK_VALUES // n)
    medians = []
    done = 0
    while done < resamples:
        count = min(per_chunk, resamples - done)
        picks = rng.integers(0, n, size=(count, n))
        medians.append(np.median(data[picks], axis=1))
        done += count
    return np.concatenate(medians)


def ratio_of_medians(
    a: Sequence[float], b: Sequence[float], *, resamples: int = RESAMPLES, seed: int = SEED, confidence: float = CONFIDENCE
) -> RatioInterval | None:
    """median(b) / median(a) with its bootstrap interval; None when either run has no readings
    or a median of zero."""
    import numpy as np

    if not a or not b:
        return None
    median_a, median_b = float(np.median(a)), float(np.median(b))
    if median_a <= 0:
        return None
    if len(a) < MIN_READINGS or len(b) < MIN_READINGS:
        return RatioInterval(median_b / median_a, None, None)
    rng = np.random.default_rng(seed)
    boot_a = _bootstrap_medians(a, resamples, rng)
    boot_b = _bootstrap_medians(b, resamples, rng)
    valid = boot_a > 0
    ratios = boot_b[valid] / boot_a[valid]
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(ratios, [tail, 100.0 - tail])
    return RatioInterval(median_b / median_a, float(low), float(high))
