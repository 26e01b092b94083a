"""samples/sec over time: bars (warm-up in its own colour), the running median and
the preset's reference result as lines, with the figures in one line above."""

from __future__ import annotations

import textwrap
import time

from rich.style import Style
from rich.text import Text

from gputui import fmt
from gputui.tui.widgets.state_view import LIVE_REDRAW_S, StateView, step_of
from gputui.view import charts
from gputui.view import state as st

GUTTER = 6  # y-axis labels


PLOT_EVERY_S = 2 * LIVE_REDRAW_S  # every other step of the panels' pace
# No column narrower than a second (the pace most runs report at, and the sampler's):
# a 60-column plot spans at least a minute.  Half-second columns cost a new column
# every half second, and a span changing at 5, 10, 20 and 30 s, each rewriting every
# column: most of the chart's bytes in a run's first minute.
MIN_COLUMN_S = 1.0
LEGEND_SEPARATOR = " · "
# A bar's full cell is drawn as a space on the bar's colour: one byte where a block is
# three, and the same cell on screen.  A new column of a plot 13 rows high at 140x40
# sent 13 blocks, and a longer span every column's.  Under NO_COLOR Textual
# may drop colours, so the bars keep their blocks there.
SOLID = "+solid"  # role suffix: a full cell drawn as its colour's background


class ThroughputChart(StateView):
    """The figures line follows at the panels' pace; the plot below it every other step.
    The plot spans the whole run and fills from the left, a column per MIN_COLUMN_S or
    more: a new reading writes the newest column's cells (one per row, see
    gputui.tui.compositor), and only a longer span (the run outgrowing it, 1 min, 2, 3,
    5, 10...) or a higher y scale redraws every column.  Once the run has ended, its
    plot spans the run's own length: a 4 s run fills the chart, not 4 columns of it."""

    SECTIONS = (st.THROUGHPUT, st.HEADER)
    MIN_REDRAW_S = LIVE_REDRAW_S
    PACED = True
    COMPONENT_CLASSES = {"chart--bar", "chart--warmup", "chart--median", "chart--reference", "chart--axis", "chart--value", "chart--dim"}
    DEFAULT_CSS = """
    ThroughputChart .chart--bar { color: $primary; }
    ThroughputChart .chart--warmup { color: $secondary; }
    ThroughputChart .chart--median { color: $accent; text-style: bold; }
    ThroughputChart .chart--reference { color: $success; }
    ThroughputChart .chart--axis { color: $text-muted; }
    ThroughputChart .chart--value { text-style: bold; }
    ThroughputChart .chart--dim { color: $text-muted; }
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._plot: list[Text] = []
        self._plot_key: tuple | None = None
        self._plotted_step: int | None = None  # the step of PLOT_EVERY_S's clock the plot was drawn in

    def sync(self, force: bool = False) -> None:
        if force:
            self._plotted_step = None
        super().sync(force)

    def invalidate(self) -> None:
        self._plot_key = None  # the theme may have changed: the plot's colours too
        super().invalidate()

    def build_lines(self) -> list[Text]:
        run = self.state.run
        width, height = self.content_size.width or 40, self.content_size.height or 8
        if run is None:
            # wrapped here: panels crop their lines, and this one is longer than the chart
            return [Text(textwrap.fill(self.state.idle_note(), max(20, width)), self.style_of("chart--dim"))]
        reference = st.pick_reference(run.preset, self.state.gpu_names())
        legend = self._fit_legend(self._legend(run, reference), width)
        height -= len(legend) - 1  # a legend on two lines leaves the plot a row less
        key = (run.ticket.serial, run.ended, width, height, reference)
        step = step_of(time.monotonic(), PLOT_EVERY_S)
        if key != self._plot_key or step != self._plotted_step:
            self._plot, self._plot_key, self._plotted_step = self._draw_plot(run, reference, width, height), key, step
        return [*legend, *self._plot]

    def _draw_plot(self, run: st.RunView, reference, width: int, height: int) -> list[Text]:
        plot_height = height - 1 - (1 if height >= 5 else 0)
        if plot_height < 1:
            return []
        reference_rate = reference[0].samples_per_sec if reference else None
        # an ended run draws no more columns: it spans its own length and fills the width
        plot = charts.plot_throughput(run.series.bins(), max(1, width - GUTTER), plot_height, reference_rate, min_column_s=MIN_COLUMN_S, fit=run.ended)
        styles = self._role_styles()
        lines = []
        for r, row in enumerate(plot.rows):
            text = Text()
            label = ""
            if r == 0:
                label = charts.compact_number(plot.y_max)
            elif r == len(plot.rows) - 1 and plot_height > 2:
                label = "0"
            text.append(f"{label:>{GUTTER - 1}}┤" if label else " " * (GUTTER - 1) + "│", self.style_of("chart--axis"))
            for chars, role in charts.runs_of(self._solid(row)):  # one span per run of a role: fewer escapes
                text.append(chars, styles.get(role))
            lines.append(text)
        if height >= 5:
            axis = Text(" " * GUTTER)
            axis.append(charts.time_axis(width - GUTTER, plot.x_span, plot.warmup_columns), self.style_of("chart--axis"))
            lines.append(axis)
        return lines

    def _solid(self, row: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The row with its bars' full cells as spaces on their colour (see SOLID)."""
        if self.app.no_color:
            return row
        full = charts.BLOCKS[-1]
        return [(" ", role + SOLID) if char == full and role in (charts.BAR, charts.WARMUP) else (char, role) for char, role in row]

    def _fit_legend(self, legend: Text, width: int) -> list[Text]:
        """The figures on as many lines as they need (at most two), broken between
        figures rather than cut: a narrow chart keeps its key."""
        if legend.cell_len <= width:
            return [legend]
        lines: list[Text] = []
        for part in legend.split(LEGEND_SEPARATOR):
            if lines and lines[-1].cell_len + len(LEGEND_SEPARATOR) + part.cell_len <= width:
                lines[-1].append(LEGEND_SEPARATOR, self.style_of("chart--dim"))
                lines[-1].append_text(part)
            else:
                lines.append(part)
        if len(lines) > 2:  # the rest on the second line, cut with an ellipsis
            rest = lines[1]
            for more in lines[2:]:
                rest.append(LEGEND_SEPARATOR, self.style_of("chart--dim"))
                rest.append_text(more)
            lines = lines[:2]
        return lines

    def _legend(self, run: st.RunView, reference) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        if run.current is None and run.result is None:
            text.append("waiting for the first reading…" if not run.ended else "no throughput was read", self.style_of("chart--dim"))
            return text
        now = run.current if not run.ended else run.result
        text.append(fmt.rate_in(now, run.unit or run.summary_unit), self.style_of("chart--value"))
        text.append(" now" if not run.ended else " median", self.style_of("chart--dim"))
        if run.median is not None and not run.ended:
            text.append(LEGEND_SEPARATOR, self.style_of("chart--dim"))
            text.append("─ median ", self.style_of("chart--median"))
            text.append(fmt.rate(run.median))
        efficiency = self.state.scaling_efficiency()  # a data-parallel run with a one-GPU baseline
        if efficiency is not None and not run.ended:
            text.append(LEGEND_SEPARATOR, self.style_of("chart--dim"))
            text.append("scaling ", self.style_of("chart--dim"))
            text.append(fmt.pct(100.0 * efficiency), self.style_of("chart--value"))
        if reference is not None:
            ref, matched = reference
            text.append(LEGEND_SEPARATOR, self.style_of("chart--dim"))
            text.append(f"╌ {ref.gpu} ", self.style_of("chart--reference"))
            text.append(fmt.rate(ref.samples_per_sec))
            best = run.result or run.median
            if best and matched:
                text.append(f" ({best / ref.samples_per_sec:.0%})", self.style_of("chart--value"))
        if run.phase and not run.ended:
            text.append(f"{LEGEND_SEPARATOR}{run.phase}", self.style_of("chart--dim"))
        return text

    def _role_styles(self) -> dict[str, Style]:
        bar = self.style_of("chart--bar")
        warm = self.style_of("chart--warmup")
        median = self.style_of("chart--median")
        reference = self.style_of("chart--reference")
        styles = {charts.BAR: bar, charts.WARMUP: warm, charts.MEDIAN: median, charts.REFERENCE: reference}
        styles[charts.BAR + SOLID], styles[charts.WARMUP + SOLID] = Style(bgcolor=bar.color), Style(bgcolor=warm.color)
        for name, line in ((charts.MEDIAN, median), (charts.REFERENCE, reference)):
            # a line over a full bar cell: the bar's colour becomes the background
            styles[name + charts.ON_BAR] = line + Style(bgcolor=bar.color)
            styles[name + charts.ON_BAR + "w"] = line + Style(bgcolor=warm.color)
        return styles
