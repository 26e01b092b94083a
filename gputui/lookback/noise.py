"""Is a throughput difference between two runs real, or noise?

A percentile bootstrap of the ratio of medians: resample each run's measured
readings with replacement, take median(B*) / median(A*), repeat, and read the 2.5th
and 97.5th percentiles.  An interval that contains 1 means the runs cannot be told
apart from their readings: "within noise".  The seed is fixed so that the same two
recordings always give the same answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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


def _bootstrap(data: np.ndarray, statistic: Callable[[np.ndarray], np.ndarray], resamples: int, rng: np.random.Generator) -> np.ndarray:
    """``statistic`` of ``resamples`` resamples of ``data``'s rows (each drawn with
    replacement, as many as there are), chunked so that memory stays bounded."""
    import numpy as np

    n = len(data)
    per_chunk = max(1, CHUNK_VALUES // n)
    values = []
    done = 0
    while done < resamples:
        count = min(per_chunk, resamples - done)
        picks = rng.integers(0, n, size=(count, n))
        values.append(statistic(data[picks]))
        done += count
    return np.concatenate(values)


def _medians(picked: np.ndarray) -> np.ndarray:
    import numpy as np

    return np.median(picked, axis=1)


def _ratio(
    point: float, a: Sequence[Any], b: Sequence[Any], statistic: Callable[[np.ndarray], np.ndarray], resamples: int, seed: int, confidence: float
) -> RatioInterval:
    """``point`` (statistic(b) / statistic(a)) with the interval of the ratio of the two
    runs' bootstrapped statistics; no interval with fewer than MIN_READINGS in either."""
    import numpy as np

    if len(a) < MIN_READINGS or len(b) < MIN_READINGS:
        return RatioInterval(point, None, None)
    rng = np.random.default_rng(seed)
    boot_a = _bootstrap(np.asarray(a, dtype=float), statistic, resamples, rng)
    boot_b = _bootstrap(np.asarray(b, dtype=float), statistic, resamples, rng)
    valid = boot_a > 0
    low, high = _percentiles(boot_b[valid] / boot_a[valid], confidence)
    return RatioInterval(point, low, high)


def _percentiles(values: np.ndarray, confidence: float) -> tuple[float, float]:
    import numpy as np

    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(values, [tail, 100.0 - tail])
    return float(low), float(high)


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
    return _ratio(median_b / median_a, a, b, _medians, resamples, seed, confidence)


# --- Rates over windows -------------------------------------------------------------
# A run measured in windows of (samples, seconds) is known by its samples over its time,
# not by a median of window rates: the windows an epoch's start slows count as the bill
# counts them.  Its bootstrap resamples whole windows and takes sum(samples) / sum(seconds).

Window = tuple[float, float]  # (samples, seconds)


def _rates(picked: np.ndarray) -> np.ndarray:
    return picked[..., 0].sum(axis=1) / picked[..., 1].sum(axis=1)


def rate_of(windows: Sequence[Window]) -> float | None:
    """Samples over seconds across ``windows``; None without time."""
    seconds = sum(w[1] for w in windows)
    return sum(w[0] for w in windows) / seconds if seconds > 0 else None


def rate_interval(
    windows: Sequence[Window], *, resamples: int = RESAMPLES, seed: int = SEED, confidence: float = CONFIDENCE
) -> tuple[float, float | None, float | None] | None:
    """(rate, low, high): the windows' rate with its bootstrap interval (None, None with
    fewer than MIN_READINGS windows); None without time."""
    import numpy as np

    rate = rate_of(windows)
    if rate is None:
        return None
    if len(windows) < MIN_READINGS:
        return rate, None, None
    boot = _bootstrap(np.asarray(windows, dtype=float), _rates, resamples, np.random.default_rng(seed))
    return (rate, *_percentiles(boot, confidence))


def ratio_of_rates(
    a: Sequence[Window], b: Sequence[Window], *, resamples: int = RESAMPLES, seed: int = SEED, confidence: float = CONFIDENCE
) -> RatioInterval | None:
    """rate(b) / rate(a) with its bootstrap interval; None when either has no rate, or a
    rate of zero."""

    rate_a, rate_b = rate_of(a), rate_of(b)
    if rate_a is None or rate_b is None or rate_a <= 0:
        return None
    return _ratio(rate_b / rate_a, a, b, _rates, resamples, seed, confidence)
