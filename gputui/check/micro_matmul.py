"""What a GPU's tensor cores really deliver: a short sweep of matmul shapes, as public
"maximal achievable matmul" finders do, each timed in short windows after the clocks
have settled.  Part of the micro-benchmark child (:mod:`gputui.check.micro`).

One square size is not enough: cuBLAS picks a different kernel per shape, and the size
that suits one card or dtype leaves another 10-15 % short
(docs/performance.md#figures-behind-the-codes-choices).  So each dtype runs:

1. a warm-up on the largest shape that fits, long enough for the clocks to settle where
   a sustained load keeps them (a cold card boosts, then meets its power cap);
2. every shape of the sweep in windows of about ``WINDOW_S``, each timed with CUDA events;
   a shape's figure is the **median** of its windows: sustained, not one lucky window;
3. the best shape's figure as the result, with every shape's figure beside it.

This module imports nothing of gputui but the lines' shapes (:mod:`gputui.check.micro_lines`):
the child stays light.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gputui.check.micro_lines import MatmulFields, SweepShape

Shape = tuple[int, int, int]  # (m, n, k): an (m, k) by (k, n) product

# Squares from the size every tensor-core GPU saturates at to the largest, and the
# rectangles maximal-matmul searches found best on Hopper (6144 x 17920 x 2816 for
# bf16 on H100 SXM), largest first so that the warm-up runs the biggest that fits.
SWEEP_FULL: tuple[Shape, ...] = (
    (16384, 16384, 16384),
    (6144, 17920, 2816),
    (12288, 12288, 12288),
    (8192, 8192, 16384),
    (8192, 8192, 8192),
    (4096, 4096, 4096),
)
SWEEP_QUICK: tuple[Shape, ...] = ((16384, 16384, 16384), (6144, 17920, 2816), (8192, 8192, 8192))
SMALL_SHAPES: tuple[Shape, ...] = ((4096, 4096, 4096), (2048, 2048, 2048))  # when memory is short

WINDOW_S = 0.1  # one timed window: a co-running job's duty cycle shows in every one
MIN_WINDOW_ITERATIONS = 3


@dataclass
class ShapeResult:
    shape: Shape
    tflops: float  # median of the windows
    best_window: float
    windows: int


@dataclass
class SweepResult:
    best: ShapeResult
    shapes: list[ShapeResult] = field(default_factory=list)

    def fields(self, digits: int = 1) -> MatmulFields:
        """The ``micro`` line's fields: the best shape's sustained figure, and the sweep."""
        m, n, k = self.best.shape
        out = MatmulFields(value=round(self.best.tflops, digits), unit="TFLOP/s")
        if m == n == k:
            out["size"] = m
        out["shape"] = [m, n, k]
        out["best_window"] = round(self.best.best_window, digits)
        out["windows"] = self.best.windows
        out["sweep"] = [SweepShape(shape=list(s.shape), value=round(s.tflops, digits), windows=s.windows) for s in self.shapes]
        return out


def flops(shape: Shape) -> float:
    m, n, k = shape
    return 2.0 * m * n * k


def bytes_needed(shape: Shape, element: int) -> int:
    m, n, k = shape
    return (m * k + k * n + m * n) * element


def fitting_shapes(shapes: Sequence[Shape], element: int, free_bytes: int) -> list[Shape]:
    """The shapes whose three matrices take at most half the free memory (the rest is
    cuBLAS's workspace and whatever else runs); the small fallbacks when none fits."""
    fitting = [s for s in shapes if bytes_needed(s, element) <= free_bytes // 2]
    return fitting or [s for s in SMALL_SHAPES if bytes_needed(s, element) <= free_bytes // 2]


def window_figures(elapsed: Callable[[int], float], iterations_per_window: int, windows: int, shape: Shape) -> list[float]:
    """TFLOP/s of each of ``windows`` timed windows; ``elapsed(n)`` times n matmuls."""
    work = flops(shape) * iterations_per_window / 1e12
    return [work / max(elapsed(iterations_per_window), 1e-9) for _ in range(windows)]


def sweep(
    torch: Any,
    device: Any,
    dtype: Any,
    shapes: Sequence[Shape],
    *,
    seconds_per_shape: float,
    warmup_s: float,
    timer: Any,
    sync: Callable[[], None],
) -> SweepResult:
    """Run the sweep on one device and dtype (``timer.elapsed(run_once, n)`` times n calls)."""
    results: list[ShapeResult] = []
    for index, shape in enumerate(shapes):
        m, n, k = shape
        a = torch.randn(m, k, device=device, dtype=dtype)
        b = torch.randn(k, n, device=device, dtype=dtype)
        c = torch.empty(m, n, device=device, dtype=dtype)

        def run_once(a: Any = a, b: Any = b, c: Any = c) -> None:
            torch.matmul(a, b, out=c)

        run_once()
        sync()
        one = max(timer.elapsed(run_once, 1), 1e-7)
        if index == 0:  # the clocks settle under the largest shape, before anything counts
            timer.elapsed(run_once, max(1, int(warmup_s / one)))
            one = max(timer.elapsed(run_once, 1), 1e-7)
        per_window = max(MIN_WINDOW_ITERATIONS, int(WINDOW_S / one))
        windows = max(3, round(seconds_per_shape / (per_window * one)))
        figures = window_figures(lambda count: timer.elapsed(run_once, count), per_window, windows, shape)
        results.append(ShapeResult(shape, statistics.median(figures), max(figures), windows))
        del a, b, c
    best = max(results, key=lambda r: r.tflops)
    return SweepResult(best, results)
