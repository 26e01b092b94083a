"""Text charts drawn with Unicode blocks: sparklines, gauges and the throughput plot.

Pure functions over numbers, no Textual: they return characters and *roles* (what a
cell shows), and the widgets map roles to the theme's styles.  Block elements
(U+2581..U+2588) render in every terminal font that draws box lines, under tmux and
screen too; braille would give finer lines but is missing from many console fonts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

BLOCKS = " ▁▂▃▄▅▆▇█"  # index = eighths of a cell filled from the bottom
EIGHTHS = " ▏▎▍▌▋▊▉█"  # index = eighths of a cell filled from the left

# Nice time spans (seconds) for the plot's x-axis: the scale stays put for a while
# instead of stretching every second, which is calmer to read and cheaper to redraw.
_SPANS = (5, 10, 20, 30, 60, 120, 180, 300, 600, 900, 1200, 1800, 3600, 7200, 10800, 21600, 43200, 86400)


def sparkline(values: Iterable[float | None], width: int, lo: float = 0.0, hi: float | None = None) -> str:
    """The last ``width`` values as block heights; gaps (None) stay blank."""
    if width <= 0:
        return ""
    recent = list(values)[-width:]
    known = [v for v in recent if v is not None]
    top = hi if hi is not None else (max(known) if known else 1.0)
    span = (top - lo) or 1.0
    chars = []
    for value in recent:
        if value is None:
            chars.append(" ")
            continue
        level = round((min(max(value, lo), top) - lo) / span * 8)
        chars.append(BLOCKS[max(1, level)])  # a floor of one eighth keeps zero visible
    return " " * (width - len(chars)) + "".join(chars)


def page_of(values: Sequence[float | None], count: int, width: int) -> list[float | None]:
    """The values a paged line ``width`` cells wide shows once ``count`` have come
    (``values`` holds the newest of them): it fills from the left and, once full, moves
    back by half its width at once.  Between those moves a redraw only adds cells at
    the line's end, so the terminal is sent the new cells and not the whole line (a
    line scrolled by a cell per value changes nearly every cell when the values are
    noisy)."""
    if width <= 0:
        return []
    page = max(1, width // 2)
    pages_on = max(0, -(-(count - width) // page))  # pages moved so that at most ``width`` are shown
    shown = min(count - pages_on * page, len(values))
    return list(values)[len(values) - shown :] if shown > 0 else []


def gauge(fraction: float | None, width: int) -> str:
    """A horizontal bar ``width`` cells wide, filled to ``fraction`` (0..1)."""
    if width <= 0:
        return ""
    if fraction is None:
        return " " * width
    eighths = round(min(max(fraction, 0.0), 1.0) * width * 8)
    full, part = divmod(eighths, 8)
    bar = "█" * full + (EIGHTHS[part] if part else "")
    return bar + " " * (width - len(bar))


def level_char(fraction: float | None) -> str:
    """One cell showing a 0..1 level: the per-core heat strip."""
    if fraction is None:
        return " "
    return BLOCKS[max(1, round(min(max(fraction, 0.0), 1.0) * 8))]


def compact_number(value: float | None) -> str:
    """Axis labels: 950, 1.2k, 12k, 1.5M."""
    if value is None:
        return "-"
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            scaled = value / limit
            return f"{scaled:.1f}{suffix}" if abs(scaled) < 10 else f"{scaled:.0f}{suffix}"
    return f"{value:.0f}" if abs(value) >= 10 or value == 0 else f"{value:.1f}"


# Steps of the throughput axis's top: close enough that data fills three quarters of the
# height or more (with 1, 2, 2.5, 5, data around 2.7k ran to 5.0k and 19k to 50k).
_CEILING_STEPS = (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 7.0, 8.0, 10.0)


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 1.2, 1.5, 2, 2.5, 3, 3.5, 4, 5, 6, 7, 8 x 10^k at or above ``value``."""
    if value <= 0:
        return 1.0
    exponent = math.floor(math.log10(value))
    for step in _CEILING_STEPS:
        candidate = step * 10**exponent
        if candidate >= value * 0.999999:
            return candidate
    return 10 ** (exponent + 1)


def nice_span(seconds: float) -> float:
    for span in _SPANS:
        if seconds <= span:
            return float(span)
    return float(math.ceil(seconds / 86400) * 86400)


def time_label(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m" if seconds % 60 == 0 else f"{seconds // 60}:{seconds % 60:02d}"
    return f"{seconds / 3600:.0f}h" if seconds % 3600 == 0 else f"{seconds / 3600:.1f}h"


# --- The throughput plot ---------------------------------------------------------


@dataclass(frozen=True)
class Bin:
    """Readings that fell in [t0, t1): their mean rate, whether any was warm-up, and
    the running median at the end of the bin."""

    t0: float
    t1: float
    rate: float
    warmup: bool
    median: float | None


@dataclass
class Plot:
    """Rows of (character, role) cells, top row first, plus the axis labels."""

    rows: list[list[tuple[str, str]]]
    y_max: float
    x_span: float
    warmup_columns: tuple[int, int] | None  # first and last column showing warm-up


# Roles the widget styles: a bar in the measured phase or in warm-up, the running
# median line, the reference line, and a line cell drawn over a full bar cell.
BAR, WARMUP, MEDIAN, REFERENCE, EMPTY = "bar", "warmup", "median", "reference", "empty"
ON_BAR = "+bar"  # suffix: a line over a filled cell, drawn with the bar as background


def _columns(bins: Sequence[Bin], width: int, x_span: float) -> list[tuple[float, bool, float | None] | None]:
    """Each column's overlap-weighted mean rate, warm-up flag and latest median.

    A column between two readings that holds none of its own (readings once a second,
    columns half a second wide) holds the last reading: a gap would read as a drop to
    zero.  Columns past the last reading stay empty: nothing was measured there yet."""
    col_s = x_span / width
    data_end = bins[-1].t1 if bins else 0.0
    out: list[tuple[float, bool, float | None] | None] = []
    j = 0
    for c in range(width):
        c0, c1 = c * col_s, (c + 1) * col_s
        while j < len(bins) and bins[j].t1 <= c0:
            j += 1
        weight = total = 0.0
        warm = False
        median = None
        k = j
        while k < len(bins) and bins[k].t0 < c1:
            b = bins[k]
            overlap = min(b.t1, c1) - max(b.t0, c0)
            if overlap > 0:
                weight += overlap
                total += b.rate * overlap
                warm = warm or b.warmup
                median = b.median if b.median is not None else median
            k += 1
        held = out[-1] if out and c0 < data_end else None
        out.append((total / weight, warm, median) if weight > 0 else held)
    return out


def plot_throughput(bins: Sequence[Bin], width: int, height: int, reference: float | None = None, min_column_s: float = 0.0, fit: bool = False) -> Plot:
    """Bars of samples/sec over time with the running median and a reference line.

    The time axis spans the whole run, from 0 to a nice span past its end, with columns
    of at least ``min_column_s``: the plot fills from the left, and only a longer span
    (the run outgrowing this one) or a higher scale moves the columns already drawn.
    ``fit`` (a run that has ended): the span is the run's own length, whole seconds, so
    a short run fills the width instead of its first columns."""
    width, height = max(1, width), max(1, height)
    t_end = bins[-1].t1 if bins else 0.0
    x_span = float(max(1, math.ceil(t_end - 1e-9))) if fit else nice_span(max(t_end, min_column_s * width, 1.0))
    columns = _columns(bins, width, x_span) if bins else [None] * width
    peak = max([c[0] for c in columns if c] + [c[2] or 0.0 for c in columns if c] + [reference or 0.0, 0.0])
    y_max = nice_ceiling(peak * 1.05) if peak > 0 else 1.0
    levels = height * 8
    rows: list[list[tuple[str, str]]] = [[(" ", EMPTY)] * width for _ in range(height)]

    def line_row(value: float) -> int:
        level = min(levels - 1, max(0, int(value / y_max * levels)))
        return height - 1 - level // 8

    warm_cols = [c for c, col in enumerate(columns) if col and col[1]]
    for c, col in enumerate(columns):
        if col is None:
            continue
        rate, warm, _ = col
        fill = max(1, round(rate / y_max * levels))
        role = WARMUP if warm else BAR
        for r in range(height):
            in_cell = min(8, max(0, fill - (height - 1 - r) * 8))
            if in_cell:
                rows[r][c] = (BLOCKS[in_cell], role)

    def draw_line(c: int, value: float, char: str, role: str) -> None:
        r = line_row(value)
        under_char, under_role = rows[r][c]
        if under_char == "█":
            rows[r][c] = (char, role + ON_BAR + ("w" if under_role == WARMUP else ""))
        else:
            rows[r][c] = (char, role)

    if reference:
        for c in range(width):
            draw_line(c, reference, "╌", REFERENCE)
    for c, col in enumerate(columns):
        if col and col[2] is not None:
            draw_line(c, col[2], "─", MEDIAN)
    warmup = (warm_cols[0], warm_cols[-1]) if warm_cols else None
    return Plot(rows=rows, y_max=y_max, x_span=x_span, warmup_columns=warmup)


def runs_of(row: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """Consecutive cells of one role joined: (characters, role)."""
    out: list[tuple[str, str]] = []
    for char, role in row:
        if out and out[-1][1] == role:
            out[-1] = (out[-1][0] + char, role)
        else:
            out.append((char, role))
    return out


def time_axis(width: int, x_span: float, warmup: tuple[int, int] | None = None) -> str:
    """The bottom axis: 0 at the left, the span at the right, warm-up bracketed."""
    if width <= 0:
        return ""
    cells = [" "] * width
    if warmup is not None:
        first, last = warmup
        label = "warm-up"
        if last - first + 1 >= len(label) + 2:
            cells[first] = "└"
            cells[last] = "┘"
            for i, ch in enumerate(label):
                cells[first + 1 + i] = ch
            for i in range(first + 1 + len(label), last):
                cells[i] = "─"
        else:
            for i in range(first, last + 1):
                cells[i] = "^"
    end = time_label(x_span)
    if width > len(end) + 4:
        start = 0 if warmup is None or warmup[0] > 1 else None
        if start is not None:
            cells[0] = "0"
        for i, ch in enumerate(end):
            cells[width - len(end) + i] = ch
    return "".join(cells)
