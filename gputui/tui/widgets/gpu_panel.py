"""One panel per GPU: utilization / SM activity, VRAM, temperature against its
slowdown threshold and the 80 °C line, power against its limit, SM clock against its
maximum, active throttle reasons as badges, and sparklines of recent history (paged:
they fill from the left and move back by half their width when full).

With more GPUs than panels fit side by side (or on a small screen) the grid shows a
row per GPU and a totals row instead (gputui.tui.widgets.gpu_rows), and the full
panel of the GPU under the cursor beneath them."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from rich.text import Text
from textual.containers import Grid
from textual.widgets import Static

from gputui import fmt
from gputui.escape import for_widget
from gputui.model import GpuInfo, GpuSample
from gputui.tui.widgets.gpu_owners import ownership
from gputui.tui.widgets.gpu_rows import HOT_LINE_C, SHORT_REASON, GpuRows, temp_role, throttle_badges
from gputui.tui.widgets.state_view import LIVE_REDRAW_S, StateSource, StateView, step_of
from gputui.view import charts
from gputui.view import state as st

__all__ = ["GpuGrid", "GpuPanel", "GpuRows", "SHORT_REASON"]

LABEL = 6
VALUE = 17
# The sparklines take their new samples slower than the numbers beside them take
# theirs, and they are paged (charts.page_of): a line fills from the left and, once
# full, moves back by half its width at once.  Scrolled a cell per sample, a noisy
# series (SM activity flickering between two heights) rewrote its whole line at each
# step: the three lines were the largest part of the bytes sent
# (docs/performance.md#figures-behind-the-codes-choices).
SPARK_EVERY_S = 3 * LIVE_REDRAW_S  # a multiple of the panels' pace: the sparklines step with them
DETAIL_ROWS = 7  # a drilled-down panel on a small screen: its title and six rows


short_name = fmt.short_gpu_name  # the name the panels and the header use


class GpuPanel(StateView):
    MIN_REDRAW_S = LIVE_REDRAW_S
    PACED = True
    SECTIONS = (st.GPUS, st.HEADER, st.FINDINGS)  # findings: a straggler is named in its GPU's title
    COMPONENT_CLASSES = {"gpu--label", "gpu--spark", "gpu--ok", "gpu--warn", "gpu--hot", "gpu--dim", "gpu--badge", "gpu--badge-severe", "gpu--gauge"}
    DEFAULT_CSS = """
    GpuPanel .gpu--label { color: $text-muted; }
    GpuPanel .gpu--spark { color: $primary; }
    GpuPanel .gpu--gauge { color: $secondary; }
    GpuPanel .gpu--ok { color: $success; }
    GpuPanel .gpu--warn { color: $warning; }
    GpuPanel .gpu--hot { color: $error; text-style: bold; }
    GpuPanel .gpu--dim { color: $text-muted; }
    /* reversed, not "color: $background": an ANSI theme's background is the terminal's
       default, which as a text colour is the terminal's foreground (light on yellow) */
    GpuPanel .gpu--badge { color: $warning; text-style: reverse; }
    GpuPanel .gpu--badge-severe { color: $error; text-style: reverse bold; }
    """

    def __init__(self, index: int, *, source: StateSource) -> None:
        super().__init__(id=f"gpu-{index}", classes="gpu-panel", source=source)
        self.index = index
        self._sparks: dict[tuple[str, int], Text] = {}  # the sparklines last drawn, by row and width
        self._sparks_key: tuple | None = None
        self._sparks_step: int | None = None  # the step of SPARK_EVERY_S's clock the sparklines were drawn in
        self._title = ""
        self._spark_at = LABEL + VALUE  # the column the sparklines start at (see _spark_column)

    def sync(self, force: bool = False) -> None:
        if not self.display:
            return  # hidden behind the rows: drawn again when shown (GpuGrid invalidates it)
        if force:
            self._sparks_step = None
        super().sync(force)

    def invalidate(self) -> None:
        self._sparks_key = None  # the theme may have changed: the sparklines' colours too
        super().invalidate()

    @property
    def history(self) -> st.GpuHistory:
        return self.state.gpus[self.index]

    def build_lines(self) -> list[Text]:
        history = self.history
        info = history.info or GpuInfo(index=self.index, name=f"GPU {self.index}")
        title = f"GPU{self.index} {short_name(info.name)}{self._rank_note()}"
        if title != self._title:
            self._title, self.border_title = title, for_widget(title)  # a GPU's name, as NVML or a recording gives it
        sample = history.latest
        if sample is None:
            return [Text("waiting for the first sample…", self.style_of("gpu--dim"))]
        if sample.lost:
            return [Text(f"GPU{self.index} LOST: NVML no longer reaches it", self.style_of("gpu--hot"))]
        detail = self.has_class("-detail")  # drilled into from the rows on a small screen
        if self.compact and not detail:
            return [self._one_line(info, sample)]
        width = self.content_size.width or 48
        key = (width, history.info)
        step = step_of(time.monotonic(), SPARK_EVERY_S)
        if key != self._sparks_key or step != self._sparks_step:
            self._sparks, self._sparks_key, self._sparks_step = {}, key, step
        self._spark_at = self._spark_column(info, width)
        rows = [
            self._util(sample, history, width),
            self._memory(sample, history, width),
            self._temperature(info, sample, history, width),
            self._power(sample, history, width),
            self._clock(info, sample, width),
            self._badges(sample, width),
        ]
        if detail and self.compact:
            rows.insert(0, Text(f"{title} (enter closes)", self.style_of("gpu--label"), no_wrap=True))
        return rows

    def _rank_note(self) -> str:
        """In a data-parallel run, the rank driving this GPU and its samples/s, and
        whether it is the straggler: the rows say the same where panels do not fit."""
        rank = self.state.rank_of_gpu().get(self.index)
        run = self.state.live_run
        if rank is None or run is None:
            return ""
        note = f" · rank {rank} {fmt.rate(run.rank_rates.get(rank))}/s"
        return note + " · straggler" if self.index in self.state.straggler_gpus() else note

    # -- rows ---------------------------------------------------------------------
    def _start(self, label: str, value: str) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(f"{label:<{LABEL}}", self.style_of("gpu--label"))
        text.append(f"{value:<{VALUE}}")
        return text

    def _util(self, s: GpuSample, h: st.GpuHistory, width: int) -> Text:
        value = f"{fmt.pct(s.util_gpu):>4}"
        if s.sm_active is not None:
            value += f"  SM {fmt.pct(s.sm_active):>4}"
        text = self._start("util", value)
        return self._with_spark(text, "util", width, lambda room: Text(self._paged_cells(h.util, room, 100)[0], self.style_of("gpu--spark")))

    def _memory(self, s: GpuSample, h: st.GpuHistory, width: int) -> Text:
        text = self._start("VRAM", f"{fmt.gib(s.memory_used)}/{fmt.gib(s.memory_total)} GiB")
        owners = ownership(h.processes)
        if owners is not None:  # whose it is says more than a gauge of how full: the gauge gives way
            room = width - text.cell_len
            text.append(owners if len(owners) <= room else ownership(h.processes, short=True) or "", self.style_of("gpu--dim"))
            return text
        share = s.memory_used / s.memory_total if s.memory_used is not None and s.memory_total else None
        bar = width - text.cell_len - 5
        text.append(charts.gauge(share, bar), self.style_of("gpu--gauge"))
        text.append(f" {fmt.pct(None if share is None else share * 100):>4}")
        return text

    def _temp_style(self, temp: float | None, slowdown: float | None) -> str:
        return temp_role(temp, slowdown)

    def _temperature(self, info: GpuInfo, s: GpuSample, h: st.GpuHistory, width: int) -> Text:
        slowdown = info.temp_slowdown_c
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(f"{'temp':<{LABEL}}", self.style_of("gpu--label"))
        text.append(f"{fmt.num(s.temp_c, '°C'):<6}", self.style_of(self._temp_style(s.temp_c, slowdown)))
        text.append(self._limits(slowdown, width), self.style_of("gpu--dim"))
        top = max(slowdown or 0.0, HOT_LINE_C + 10.0)

        def spark(room: int) -> Text:
            line, values = self._paged_cells(h.temp, room, top)
            out = Text()
            for chars, role in charts.runs_of([(c, self._temp_style(v, slowdown)) for c, v in zip(line, values)]):
                out.append(chars, self.style_of(role))
            return out

        return self._with_spark(text, "temp", width, spark)

    @staticmethod
    def _limits(slowdown: float | None, width: int) -> str:
        """The 80 °C line and this GPU's own slowdown threshold, in words where there is
        room, as the temperature row shows them after its figure (6 cells)."""
        limits = f"hot 80 slow {fmt.num(slowdown)}" if width >= 64 else f"80|{fmt.num(slowdown)}"
        return f"{limits:<{VALUE - 6}} "

    def _spark_column(self, info: GpuInfo, width: int) -> int:
        """Where the three sparklines start: one column, so that a sample's cells line up
        (the temperature's limits are longer than the other rows' figures where in words)."""
        return max(LABEL + VALUE, LABEL + 6 + len(self._limits(info.temp_slowdown_c, width)))

    def _power(self, s: GpuSample, h: st.GpuHistory, width: int) -> Text:
        limit = s.power_limit_w
        text = self._start("power", f"{fmt.num(s.power_w)}/{fmt.num(limit, ' W')}")
        return self._with_spark(text, "power", width, lambda room: Text(self._paged_cells(h.power, room, limit)[0], self.style_of("gpu--spark")))

    def _with_spark(self, text: Text, row: str, width: int, draw: Callable[[int], Text]) -> Text:
        """``text`` and its row's sparkline, from the column the sparklines share."""
        text.append(" " * max(0, self._spark_at - text.cell_len))
        room = width - text.cell_len
        text.append_text(self._spark(row, room, lambda: draw(room)))
        return text

    def _paged_cells(self, series: Sequence[float | None], room: int, top: float | None) -> tuple[str, list[float | None]]:
        """A paged sparkline's cells (see SPARK_EVERY_S) and the values they show."""
        shown = charts.page_of(series, self.history.samples, room)
        return charts.sparkline(shown, len(shown), 0, top), shown

    def _spark(self, row: str, room: int, draw: Callable[[], Text]) -> Text:
        """A row's sparkline as last drawn, drawn again every SPARK_EVERY_S (see
        build) or when the room for it changed (a longer value beside it)."""
        key = (row, room)
        spark = self._sparks.get(key)
        if spark is None:
            spark = self._sparks[key] = draw()
        return spark

    def _clock(self, info: GpuInfo, s: GpuSample, width: int) -> Text:
        top = info.sm_clock_max_mhz
        text = self._start("clock", f"{fmt.num(s.sm_clock_mhz)}/{fmt.num(top, ' MHz')}")
        share = s.sm_clock_mhz / top if s.sm_clock_mhz is not None and top else None
        extra = f" P{s.pstate}" if s.pstate is not None else ""
        text.append(charts.gauge(share, width - text.cell_len - len(extra)), self.style_of("gpu--gauge"))
        text.append(extra, self.style_of("gpu--dim"))
        return text

    def _badges(self, s: GpuSample, width: int, short: bool = False) -> Text:
        reasons = s.throttle_reasons or []
        if not reasons:
            return Text("" if short else "no clock throttling", self.style_of("gpu--dim"), no_wrap=True)
        return throttle_badges(reasons, self.style_of, short)

    def _one_line(self, info: GpuInfo, s: GpuSample) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(f"{self.index} ", self.style_of("gpu--label"))
        text.append(f"{fmt.pct(s.util_gpu):>4}")
        if s.sm_active is not None:
            text.append(" SM", self.style_of("gpu--label"))
            text.append(f"{fmt.pct(s.sm_active):>4}")
        text.append(f" {fmt.num(s.temp_c, '°C'):>5}", self.style_of(self._temp_style(s.temp_c, info.temp_slowdown_c)))
        text.append(f" {fmt.num(s.power_w, 'W'):>5}")
        text.append(f" {fmt.gib(s.memory_used)}/{fmt.gib(s.memory_total)}G ")
        owners = ownership(self.history.processes, short=True)
        if owners is not None:
            text.append(f"{owners} ", self.style_of("gpu--dim"))
        text.append_text(self._badges(s, 0, short=True))
        return text


class GpuGrid(Grid):
    """The GPU panels, as many columns as fit.  More GPUs than fit in one row of
    panels, or two and more on a small screen: a row per GPU with a totals row, and
    the selected GPU's full panel (on a small screen only once enter asks for it)."""

    PANEL_WIDTH = 52

    def __init__(self, *, source: StateSource, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.source = source  # handed to the panels it mounts

    def sync_panels(self, state: st.DashboardState, reason: str | None) -> None:
        indices = sorted(state.gpus)
        existing = {panel.index for panel in self.query(GpuPanel)}
        note = self.query("#no-gpu")
        if not indices:
            message = for_widget(f"No GPU: {reason or 'waiting for NVML…'}")
            if not note:
                self.mount(Static(message, id="no-gpu"))
            elif str(note.first(Static).content) != message.plain:
                note.first(Static).update(message)
            return
        note.remove()
        if not self.query(GpuRows):
            self.mount(GpuRows(source=self.source))
        new = [GpuPanel(i, source=self.source) for i in indices if i not in existing]
        if new:
            self.mount_all(new)
        self.fit_columns()

    def on_gpu_rows_changed(self, event: GpuRows.Changed) -> None:
        event.stop()
        self.fit_columns()

    def table_mode(self) -> bool:
        """Rows instead of side-by-side panels?"""
        count = len(self.query(GpuPanel))
        if count < 2:
            return False
        return self.screen.has_class("-compact") or count > self._columns_that_fit()

    def _columns_that_fit(self) -> int:
        return max(1, (self.size.width or 120) // self.PANEL_WIDTH)

    def fit_columns(self) -> None:
        panels = list(self.query(GpuPanel))
        compact = self.screen.has_class("-compact")
        table = self.table_mode()
        rows = self.query(GpuRows)
        selected = rows.first(GpuRows).selected if rows else None
        drilled = rows.first(GpuRows).drilled if rows else False
        for row_view in rows:
            row_view.display = table
        for panel in panels:
            shown = not table or (panel.index == (selected if selected is not None else panels[0].index) and (drilled or not compact))
            detail = table and compact and shown
            if shown != panel.display or detail != panel.has_class("-detail"):
                panel.display = shown
                panel.set_class(detail, "-detail")
                # app.tcss makes compact panels one line high; a drilled-down one needs its rows
                panel.styles.height = DETAIL_ROWS if detail else None
                panel.invalidate()
        columns = 1 if compact or table else max(1, min(len(panels) or 1, self._columns_that_fit()))
        if self.styles.grid_size_columns != columns:
            self.styles.grid_size_columns = columns
