"""Which settings ``gputui tune`` tries next, from the box and the trials so far.

By hand (``--workers 2,4,8`` and the other flags): every combination of what was given,
the rest as the script writes it, cheapest first.

Chosen from the box otherwise, in two stages:

1. Workers.  From the script's own count upwards (two from none), doubling, with cores/GPU/2 and
   cores/GPU among them, never above cores/GPU (more workers than cores only take turns).
   Climbing stops once the loop no longer waits for data, or once a step up is no
   faster than the best so far: past the knee, more workers cost cores and memory for
   nothing.
2. At the cheapest setting within noise of the best, the settings that only help once
   workers exist, each kept only if it beats the best so far beyond noise: pinned memory (with a GPU), then, while
   the loop still waits, workers kept between epochs and a deeper prefetch.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from gputui.tune.settings import LoaderSettings
from gputui.tune.trial import Trial
from gputui.tune.verdict import beats, best_of, waits_for_data, within_noise_of

DEEP_PREFETCH = 4


@dataclass(frozen=True)
class Grid:
    """What the user fixed by hand (None: chosen from the box) and the box's facts."""

    workers: tuple[int, ...] | None = None
    pin_memory: tuple[bool, ...] | None = None
    persistent_workers: tuple[bool, ...] | None = None
    prefetch_factor: tuple[int, ...] | None = None
    max_trials: int = 8
    cores: float = 1.0  # cores the job may use
    gpus: int = 1  # GPUs it trains on, each fed by its own loader
    cuda: bool = True  # pinned memory only helps copies to a GPU
    data_wait_pct: float = 30.0  # the input-bound rule's threshold

    @property
    def by_hand(self) -> bool:
        return any(v is not None for v in (self.workers, self.pin_memory, self.persistent_workers, self.prefetch_factor))

    def per_gpu(self) -> int:
        return max(1, int(self.cores // max(1, self.gpus)))


def by_hand(grid: Grid) -> list[LoaderSettings]:
    """Every combination of the values given by hand, cheapest first."""
    combos = itertools.product(grid.workers or (None,), grid.pin_memory or (None,), grid.persistent_workers or (None,), grid.prefetch_factor or (None,))
    settings = [LoaderSettings(w, p, k, f) for w, p, k, f in combos]
    return sorted(dict.fromkeys(settings), key=lambda s: s.over(LoaderSettings(num_workers=0)).cost())


def worker_ladder(written: int, grid: Grid) -> list[int]:
    """Worker counts above the script's own, ascending, up to cores/GPU."""
    top = grid.per_gpu()
    ladder = {top, max(1, top // 2)}
    count = max(2, written * 2)  # from none, two at once: one worker only moves the loading off the loop
    while count < top:
        ladder.add(count)
        count *= 2
    return sorted(w for w in ladder if written < w <= top)


def next_settings(trials: Sequence[Trial], grid: Grid) -> LoaderSettings | None:
    """The next trial's settings; None when tuning is done.  ``trials[0]`` ran the
    script as written."""
    if len(trials) >= grid.max_trials:
        return None
    if grid.by_hand:
        tried = {t.asked for t in trials}
        return next((s for s in by_hand(grid) if s not in tried), None)
    written = trials[0].settings
    best = best_of(trials)
    if best is None:
        return None
    climbing = _next_worker_count(trials, written, grid)
    if climbing is not None:
        return LoaderSettings(num_workers=climbing)
    return _next_extra(trials, best, grid)


def _next_worker_count(trials: Sequence[Trial], written: LoaderSettings, grid: Grid) -> int | None:
    """The next rung of the worker ladder, or None once climbing is over."""
    ladder = worker_ladder(written.num_workers or 0, grid)
    climbed = [t for t in trials[1:] if t.asked.num_workers in ladder and t.asked == LoaderSettings(num_workers=t.asked.num_workers)]
    if climbed:
        last = climbed[-1]
        if not last.ok or not waits_for_data(last, grid.data_wait_pct):
            return None  # a failure (open files, shared memory) or a fed loop: higher only costs more
        before = [t for t in trials if t.ok and t is not last]
        if before and not beats(last, best_of(before)):
            return None  # past the knee
    remaining = [w for w in ladder if w > max((t.asked.num_workers or 0 for t in climbed), default=-1)]
    return remaining[0] if remaining else None


def _next_extra(trials: Sequence[Trial], best: Trial, grid: Grid) -> LoaderSettings | None:
    """Pinned memory, persistent workers, a deeper prefetch: each once, on top of the
    cheapest trial within noise of the best so far."""
    best = min((t for t in trials if t.ok and within_noise_of(t, best)), key=lambda t: t.settings.cost())
    base = best.asked.over(LoaderSettings(num_workers=best.settings.num_workers))
    if not base.num_workers:
        return None
    tried = {t.asked for t in trials}
    extras = []
    if grid.cuda and not best.settings.pin_memory:
        extras.append(dataclasses.replace(base, pin_memory=True))
    if waits_for_data(best, grid.data_wait_pct):
        if not best.settings.persistent_workers:
            extras.append(dataclasses.replace(base, persistent_workers=True))
        if (best.settings.effective_prefetch() or 0) < DEEP_PREFETCH:
            extras.append(dataclasses.replace(base, prefetch_factor=DEEP_PREFETCH))
    tried_kinds = {_extra_kind(t.asked) for t in trials}
    return next((e for e in extras if e not in tried and _extra_kind(e) not in tried_kinds), None)


def _extra_kind(settings: LoaderSettings) -> str | None:
    """Which of the second stage's settings a trial tried (None: a worker count only)."""
    if settings.prefetch_factor is not None:
        return "prefetch"
    if settings.persistent_workers is not None:
        return "persistent"
    if settings.pin_memory is not None:
        return "pinned"
    return None
