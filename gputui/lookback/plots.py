"""The report's charts as PNG files, drawn with matplotlib's Agg backend (no display).

Each chart is one ``Plot``: the file it was written to, or why it was left out (a
recording without GPM has no SM activity, a telemetry-only run no throughput).  A
plot also carries its axes' geometry, the mapping from data to image pixels, so a
reader (the tests) can find a line where it should be in the picture.

Figures are made with ``matplotlib.figure.Figure`` rather than pyplot: no global
state, nothing left open between reports.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gputui.escape import for_plot
from gputui.fmt import GIB, per_second
from gputui.model import GpuInfo, Throughput
from gputui.protocol import MEASURE, WARMUP
from gputui.record import events as ev
from gputui.record.recording import Recording
from gputui.record.schema import Summary, ThroughputSummary
from gputui.safe_write import write_atomic_with

WIDTH_IN, HEIGHT_IN, DPI = 9.0, 3.2, 100
THERMAL_WARN_C = 80.0  # the diagnosis' default; a recording's own setting wins
# Colours the tests look for: keep them apart from the data lines' palette.
MEDIAN_COLOUR = "#d62728"
WARN_COLOUR = "#ff7f0e"
LIMIT_COLOUR = "#d62728"
WARMUP_COLOUR = "#bbbbbb"
DATA_COLOURS = ["#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"]
ROLE_COLOURS = {"main": "#1f77b4", "worker": "#2ca02c", "child": "#9467bd"}


@dataclass
class AxesGeometry:
    """Where the axes sit in the PNG: data coordinates to pixel (column, row from the top)."""

    xlim: tuple[float, float]
    ylim: tuple[float, float]
    box: tuple[float, float, float, float]  # left, bottom, right, top in pixels, origin bottom-left
    height: int  # the image's height in pixels
    x_scale: float  # seconds per x unit shown (1, 60 or 3600)

    def to_pixel(self, t: float, y: float) -> tuple[int, int]:
        """Pixel (column, row) of the point at ``t`` seconds and value ``y``."""
        left, bottom, right, top = self.box
        x = t / self.x_scale
        col = left + (x - self.xlim[0]) / (self.xlim[1] - self.xlim[0]) * (right - left)
        up = bottom + (y - self.ylim[0]) / (self.ylim[1] - self.ylim[0]) * (top - bottom)
        return int(col), int(self.height - up)

    def row_of(self, y: float) -> int:
        return self.to_pixel(self.xlim[0] * self.x_scale, y)[1]


@dataclass
class ReportPlot:
    name: str  # file stem, e.g. "throughput"
    title: str
    file: str | None = None  # file name in the output directory; None when left out
    missing: str | None = None  # why it was left out
    axes: AxesGeometry | None = None
    legend: list[str] = field(default_factory=list)  # the legend's entries, as matplotlib shows them


Series = dict[int, tuple[list[float], list[float]]]  # GPU index -> (t, values)


def gpu_series(recording: Recording, key: str, scale: float = 1.0) -> Series:
    """One GPU field over time, per GPU; absent values and lost GPUs left out."""
    out: Series = {}
    for sample in recording.samples:
        for gpu in sample.gpus:
            value = None if gpu.lost else getattr(gpu, key)
            if value is not None:
                ts, vs = out.setdefault(gpu.index, ([], []))
                ts.append(sample.t)
                vs.append(value / scale)
    return out


def role_cpu_series(recording: Recording) -> dict[str, tuple[list[float], list[float]]]:
    """The run's CPU per process role (100 = one core), summed over the role's processes."""
    out: dict[str, tuple[list[float], list[float]]] = {}
    for sample in recording.samples:
        if sample.host is None or not sample.host.processes:
            continue
        totals: dict[str, float] = {}
        for proc in sample.host.processes:
            if proc.cpu_percent is not None:
                totals[proc.role] = totals.get(proc.role, 0.0) + proc.cpu_percent
        for role, total in totals.items():
            ts, vs = out.setdefault(role, ([], []))
            ts.append(sample.t)
            vs.append(total)
    return out


def _time_unit(recording: Recording) -> tuple[float, str]:
    span = recording.samples[-1].t if recording.samples else 0.0
    events = [e.t for e in recording.events]
    span = max([span, *events]) if events else span
    if span > 3 * 3600:
        return 3600.0, "hours"
    if span > 600:
        return 60.0, "minutes"
    return 1.0, "seconds"


def _header_limits(recording: Recording, limit: Callable[[GpuInfo], float | None]) -> list[float]:
    """One limit of each GPU in the header (its slowdown temperature, its power limit)."""
    return sorted({value for value in map(limit, recording.header.gpu_list) if value is not None})


class _Canvas:
    """One figure with one axes, saved as a PNG whose geometry is known.  Every label
    goes through ``for_plot``: a recording's GPU roles and units are its writer's text."""

    def __init__(self, title: str, ylabel: str, x_scale: float, x_unit: str) -> None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        self.figure = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI, layout="constrained")
        FigureCanvasAgg(self.figure)  # Agg explicitly: no display, and no global backend switch
        self.ax = self.figure.add_subplot()
        self.ax.set_title(title)
        self.ax.set_ylabel(for_plot(ylabel))
        self.ax.set_xlabel(f"time ({x_unit})")
        self.ax.grid(True, alpha=0.3)
        self.x_scale = x_scale

    def lines(
        self, series: dict[Any, tuple[list[float], list[float]]], label: Callable[[Any], str], colours: Callable[[Any, int], str], style: str = "-"
    ) -> None:
        for n, (key, (ts, vs)) in enumerate(sorted(series.items())):
            self.ax.plot([t / self.x_scale for t in ts], vs, style, color=colours(key, n), label=for_plot(label(key)), linewidth=1.2)

    def hline(self, y: float, colour: str, label: str, style: str = "--") -> None:
        self.ax.axhline(y, color=colour, linestyle=style, linewidth=1.5, label=for_plot(label))

    def include(self, low: float | None, high: float | None, pad: float = 0.05) -> None:
        """Make sure the y range shows low..high (a limit line above the data)."""
        bottom, top = self.ax.get_ylim()
        data_low, data_high = self.ax.dataLim.y0, self.ax.dataLim.y1
        if low is not None:
            bottom = min(low, data_low)  # start at low (0 W, 0 samples/s) unless data goes below
        highest = max(data_high, high) if high is not None else data_high
        self.ax.set_ylim(bottom, max(top, highest + (highest - bottom) * pad))

    def legend(self) -> list[str]:
        """The legend's entries, as handed to matplotlib (a ``$`` written ``\\$``)."""
        return [text.get_text() for text in legend.get_texts()] if (legend := self.ax.get_legend()) is not None else []

    def save(self, path: Path) -> AxesGeometry:
        if self.ax.get_legend_handles_labels()[0]:
            self.ax.legend(loc="best", fontsize="small")
        self.figure.canvas.draw()  # fixes the layout, so the geometry is the saved one
        (left, bottom), (right, top) = self.ax.transData.transform(
            [(self.ax.get_xlim()[0], self.ax.get_ylim()[0]), (self.ax.get_xlim()[1], self.ax.get_ylim()[1])]
        )
        xlim, ylim = self.ax.get_xlim(), self.ax.get_ylim()
        geometry = AxesGeometry(
            xlim=(float(xlim[0]), float(xlim[1])),
            ylim=(float(ylim[0]), float(ylim[1])),
            box=(float(left), float(bottom), float(right), float(top)),
            height=int(round(self.figure.bbox.height)),
            x_scale=self.x_scale,
        )
        buffer = io.BytesIO()
        self.figure.savefig(buffer, format="png", dpi=DPI)
        write_atomic_with(path, lambda handle: handle.write(buffer.getvalue()), binary=True)
        return geometry


def _gpu_label(index: int) -> str:
    return f"GPU{index}"


def _gpu_colour(_index: int, n: int) -> str:
    return DATA_COLOURS[n % len(DATA_COLOURS)]


def _warmup_span(recording: Recording) -> tuple[float, float] | None:
    """From the warm-up's start to the measured phase's start, when the workload said so."""
    phases = recording.events_of(ev.PHASE)
    start = next((e.t for e in phases if isinstance(e.payload, ev.PhaseChange) and e.payload.phase == WARMUP), None)
    end = next((e.t for e in phases if isinstance(e.payload, ev.PhaseChange) and e.payload.phase == MEASURE), None)
    if start is None or end is None:
        return None
    return start, end


# --- the charts ---------------------------------------------------------------------
# Each returns a canvas to save, or a string saying why there is nothing to draw.


def _throughput(recording: Recording, summary: Summary, unit: tuple[float, str]) -> _Canvas | str:
    throughput = summary.throughput or ThroughputSummary()
    unit_name = throughput.unit_name
    # one unit on one axis: steps read before the batch size was known are left out
    readings = [
        (e.t, e.payload)
        for e in recording.events_of(ev.THROUGHPUT)
        if isinstance(e.payload, Throughput) and not e.payload.final and e.payload.unit == unit_name
    ]
    if not readings:
        if recording.events_of(ev.THROUGHPUT):
            return "the recording holds only the tool's final figure, no readings over time"
        return "no throughput readings in the recording"
    canvas = _Canvas("Throughput", per_second(unit_name), *unit)
    span = _warmup_span(recording)
    if span:
        canvas.ax.axvspan(span[0] / canvas.x_scale, span[1] / canvas.x_scale, color=WARMUP_COLOUR, alpha=0.4, label="warm-up")
    canvas.ax.plot(
        [t / canvas.x_scale for t, _ in readings],
        [reading.samples_per_sec for _, reading in readings],
        ".-",
        color=DATA_COLOURS[0],
        markersize=3,
        linewidth=1.0,
        label="readings",
    )
    median = throughput.median
    if median is not None:
        canvas.hline(median, MEDIAN_COLOUR, f"median {median:,.1f}", style="-")
        canvas.include(0.0, median)
    figure = throughput.run_figure
    if figure is not None and figure != median:  # a job of the user's: its mean is its figure
        what = "mean" if throughput.mean_is_figure else "figure"
        why = "stalls between bursts" if throughput.is_bursty else "the run's figure"  # only the summary knows it stalls
        canvas.hline(figure, MEDIAN_COLOUR, f"{what} {figure:,.1f} ({why})", style="--")
    return canvas


def _utilization(recording: Recording, summary: Summary, unit: tuple[float, str]) -> _Canvas | str:
    util = gpu_series(recording, "util_gpu")
    active = gpu_series(recording, "sm_active")
    if not util and not active:
        return "no GPU utilization in the recording (no GPU, or NVML did not report it)"
    canvas = _Canvas("GPU utilization and SM activity", "%", *unit)
    canvas.lines(util, lambda i: f"GPU{i} utilization", _gpu_colour)
    canvas.lines(active, lambda i: f"GPU{i} SM activity", _gpu_colour, style=":")
    canvas.ax.set_ylim(0, 105)
    return canvas


def thermal_warn_c(recording: Recording) -> float:
    value = (recording.header.diagnosis or {}).get("thermal_warn_c")
    return float(value) if isinstance(value, (int, float)) else THERMAL_WARN_C


def _temperature(recording: Recording, summary: Summary, unit: tuple[float, str]) -> _Canvas | str:
    temps = gpu_series(recording, "temp_c")
    if not temps:
        return "no GPU temperature in the recording"
    canvas = _Canvas("Temperature", "°C", *unit)
    canvas.lines(temps, _gpu_label, _gpu_colour)
    warn = thermal_warn_c(recording)
    canvas.hline(warn, WARN_COLOUR, f"{warn:.0f} °C")
    slowdowns = _header_limits(recording, lambda g: g.temp_slowdown_c)
    for slowdown in slowdowns:
        canvas.hline(slowdown, LIMIT_COLOUR, f"slowdown {slowdown:.0f} °C")
    canvas.include(None, max([warn, *slowdowns]))
    return canvas


def _power(recording: Recording, summary: Summary, unit: tuple[float, str]) -> _Canvas | str:
    power = gpu_series(recording, "power_w")
    if not power:
        return "no GPU power draw in the recording"
    canvas = _Canvas("Power", "W", *unit)
    canvas.lines(power, _gpu_label, _gpu_colour)
    limits = sorted({v for _ts, vs in gpu_series(recording, "power_limit_w").values() for v in vs}) or _header_limits(recording, lambda g: g.power_limit_w)
    for limit in limits:
        canvas.hline(limit, LIMIT_COLOUR, f"limit {limit:.0f} W")
    canvas.include(0.0, max(limits) if limits else None)
    return canvas


def _sm_clock(recording: Recording, summary: Summary, unit: tuple[float, str]) -> _Canvas | str:
    clocks = gpu_series(recording, "sm_clock_mhz")
    if not clocks:
        return "no SM clock in the recording"
    canvas = _Canvas("SM clock", "MHz", *unit)
    canvas.lines(clocks, _gpu_label, _gpu_colour)
    maxima = _header_limits(recording, lambda g: g.sm_clock_max_mhz)
    for maximum in maxima:
        canvas.hline(maximum, LIMIT_COLOUR, f"max {maximum:.0f} MHz")
    canvas.include(0.0, max(maxima) if maxima else None)
    return canvas


def _vram(recording: Recording, summary: Summary, unit: tuple[float, str]) -> _Canvas | str:
    used = gpu_series(recording, "memory_used", scale=GIB)
    if not used:
        return "no GPU memory use in the recording"
    canvas = _Canvas("GPU memory (VRAM)", "GiB", *unit)
    canvas.lines(used, _gpu_label, _gpu_colour)
    totals = [t / GIB for t in _header_limits(recording, lambda g: g.memory_total)]
    for total in totals:
        canvas.hline(total, LIMIT_COLOUR, f"total {total:.1f} GiB")
    canvas.include(0.0, max(totals) if totals else None)
    return canvas


def _cpu_roles(recording: Recording, summary: Summary, unit: tuple[float, str]) -> _Canvas | str:
    roles = role_cpu_series(recording)
    if not roles:
        return "no process of the run was sampled (telemetry only, or the run ended at once)"
    canvas = _Canvas("The run's CPU by process role", "% of one core", *unit)
    order = {"main": 0, "worker": 1, "child": 2}
    for role in sorted(roles, key=lambda r: order.get(r, 9)):
        ts, vs = roles[role]
        canvas.ax.plot([t / canvas.x_scale for t in ts], vs, color=ROLE_COLOURS.get(role, "#7f7f7f"), label=for_plot(role), linewidth=1.2)
    canvas.include(0.0, None)
    return canvas


CHARTS: list[tuple[str, str, Callable[[Recording, Summary, tuple[float, str]], _Canvas | str]]] = [
    ("throughput", "Throughput over time", _throughput),
    ("utilization", "GPU utilization and SM activity", _utilization),
    ("temperature", "Temperature", _temperature),
    ("power", "Power against its limit", _power),
    ("sm_clock", "SM clock against its maximum", _sm_clock),
    ("vram", "GPU memory", _vram),
    ("cpu_roles", "The run's CPU by process role", _cpu_roles),
]


def make_plots(recording: Recording, summary: Summary, out_dir: Path) -> list[ReportPlot]:
    """Draw every chart into ``out_dir`` (``NAME.png``); raises OSError when it cannot write."""
    unit = _time_unit(recording)
    plots = []
    for name, title, draw in CHARTS:
        canvas = draw(recording, summary, unit)
        if isinstance(canvas, str):
            plots.append(ReportPlot(name=name, title=title, missing=canvas))
            continue
        file = f"{name}.png"
        axes = canvas.save(out_dir / file)
        plots.append(ReportPlot(name=name, title=title, file=file, axes=axes, legend=canvas.legend()))
    return plots
