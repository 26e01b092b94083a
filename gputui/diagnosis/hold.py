"""Hold and clear on time: the machinery that keeps verdicts from flapping.

A rule says, for each sample, how bad things are: a *level* (0 clear, 1 info,
2 warning, 3 critical) or ``None`` when it cannot tell (data absent, or the condition
does not apply now, e.g. a PCIe link judged only while the GPU is busy).  A
:class:`Hold` turns that stream into few, stable transitions:

- **open** when the windows of the last ``open_after_s`` seconds is covered by data
  and at least ``hold_share`` of its samples are at level 1 or more;
- **raise** (severity up, never down within one finding) when ``hold_share`` of the
  same window is at a higher level;
- **close** once the finding has been open for ``close_after_s`` seconds and at most
  ``clear_share`` of the samples of the last ``close_after_s`` seconds were active.

Between ``hold_share`` and ``clear_share`` nothing changes: a signal that is active
half the time keeps an open finding open and a closed one closed (a Schmitt trigger
on the share of time).  Counts are prefix sums, so each update costs O(log n) however
fast the sampling.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Final, Literal

from gputui.diagnosis.context import Obs

Change = Literal["open", "raise", "close"]  # what one update did
OPEN: Final = "open"
RAISE: Final = "raise"
CLOSE: Final = "close"
LEVELS = 3
_EPS = 1e-6
# Sample times jitter by a few milliseconds (a 1 s sampler ticks at 1.0629, 2.0628,
# 3.0630 s): a window edge exact to the microsecond would hold one sample or two by
# chance, so an edge takes in samples this close to it.
_JITTER_S = 0.01


class Hold:
    def __init__(self, open_after_s: float, close_after_s: float, hold_share: float, clear_share: float) -> None:
        self.open_after_s = open_after_s
        self.close_after_s = close_after_s
        self.hold_share = hold_share
        self.clear_share = clear_share
        self._keep_s = max(open_after_s, close_after_s) + 1.0
        self._t: list[float] = []
        self._obs: list[Obs | None] = []
        self._levels: list[int] = []
        self._cum: list[tuple[int, ...]] = []  # samples at level >= 1, 2, 3 up to and including i
        self._base: tuple[int, ...] = (0,) * LEVELS  # _cum of the last entry dropped
        self.is_open = False
        self.level = 0
        self.opened_t: float | None = None
        self.since: float | None = None
        self.last_active_t: float | None = None

    # --- the window ----------------------------------------------------------------
    def _start(self, t: float, window: float) -> int:
        return bisect_left(self._t, t - window - _JITTER_S)

    def _counts(self, start: int) -> tuple[int, tuple[int, ...]]:
        n = len(self._t) - start
        before = self._cum[start - 1] if start > 0 else self._base
        last = self._cum[-1]
        return n, tuple(last[i] - before[i] for i in range(LEVELS))

    def _covered(self, t: float, window: float) -> bool:
        return bool(self._t) and self._t[0] <= t - window + _JITTER_S

    def _held_level(self, t: float) -> int:
        """The highest level held for hold_share of the open window (0: none)."""
        if not self._covered(t, self.open_after_s):
            return 0
        n, counts = self._counts(self._start(t, self.open_after_s))
        if n < (1 if self.open_after_s <= 0 else 2):
            return 0
        for level in range(LEVELS, 0, -1):
            if counts[level - 1] >= self.hold_share * n - _EPS:
                return level
        return 0

    def _trim(self, t: float) -> None:
        drop = self._start(t, self._keep_s)
        if drop > 256 and drop > len(self._t) // 2:
            self._base = self._cum[drop - 1]
            del self._t[:drop], self._obs[:drop], self._levels[:drop], self._cum[:drop]

    def window(self, since: float) -> list[tuple[float, int, Obs | None]]:
        """(t, level, obs) of the retained samples from ``since`` on."""
        start = bisect_left(self._t, since - _EPS)
        return list(zip(self._t[start:], self._levels[start:], self._obs[start:]))

    # --- updates -----------------------------------------------------------------------
    def update(self, t: float, level: int | None, obs: Obs | None = None) -> Change | None:
        """Feed one sample; returns OPEN, RAISE, CLOSE or None."""
        if level is None:
            return None
        if self._t and t < self._t[-1]:
            return None  # out of order: ignore rather than corrupt the window
        last = self._cum[-1] if self._cum else self._base
        self._t.append(t)
        self._obs.append(obs)
        self._levels.append(level)
        self._cum.append(tuple(last[i] + (level > i) for i in range(LEVELS)))
        if level >= 1:
            self.last_active_t = t
        self._trim(t)

        if not self.is_open:
            held = self._held_level(t)
            if held == 0:
                return None
            self.is_open, self.level, self.opened_t = True, held, t
            start = self._start(t, self.open_after_s)
            self.since = next(self._t[i] for i in range(start, len(self._t)) if self._levels[i] >= 1)
            return OPEN

        assert self.opened_t is not None
        if t - self.opened_t >= self.close_after_s - _JITTER_S:
            n, counts = self._counts(self._start(t, self.close_after_s))
            if n and counts[0] <= self.clear_share * n + _EPS:
                self.is_open = False
                return CLOSE
        held = self._held_level(t)
        if held > self.level:
            self.level = held
            return RAISE
        return None
