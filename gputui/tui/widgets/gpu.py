"""One panel per GPU: utilization / SM activity, VRAM, temperature against its
slowdown threshold and the 80 °C line, power against its limit, SM clock against its
maximum, active throttle reasons as badges, and sparklines of recent history.
On small screens each GPU collapses to one line."""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.text import Text
from textual.containers import Grid
from textual.widgets import Static

from gputui import fmt
from gputui.model import GpuInfo, GpuSample
from gputui.tui import charts
from gputui.tui import state as st
from gputui.tui.widgets.base import StateView

HOT_LINE_C = 80.0  # GPUs above this throttle themselves: Dettmers' rule of thumb
LABEL = 6
VALUE = 17
# The sparklines move on slower than the numbers beside them: each redraw shifts
# every bar of a line one place per sample, so a noisy series (SM activity flickering
# between two heights) rewrites its whole line each time.
SPARK_EVERY_S = 6.0

# Short names for badges on one-line panels.
SHORT_REASON = {
    "GpuIdle": "idle", "ApplicationsClocksSetting": "AppClk", "SwPowerCap": "PwrCap",
    "HwSlowdown": "HwSlow", "SyncBoost": "Sync", "SwThermalSlowdown": "SwTherm",
    "HwThermalSlowdown": "HwTherm", "HwPowerBrakeSlowdown": "PwrBrake", "DisplayClockSetting": "Disp",
}
SEVERE_REASONS = {"HwSlowdown", "HwThermalSlowdown", "HwPowerBrakeSlowdown", "SwThermalSlowdown"}


short_name = fmt.short_gpu_name  # the name the panels and the header use


class GpuPanel(StateView):
    MIN_REDRAW_S = 2.0  # every other sample at 1 s: numbers stay fresh, the link stays quiet
    SECTIONS = (st.GPUS, st.HEADER)
    COMPONENT_CLASSES = {"gpu--label", "gpu--spark", "gpu--ok", "gpu--warn", "gpu--hot", "gpu--dim",
                         "gpu--badge", "gpu--badge-severe", "gpu--gauge"}
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

    def __init__(self, index: int) -> None:
        super().__init__(id=f"gpu-{index}", classes="gpu-panel")
        self.index = index
        self._sparks: dict[tuple[str, int], Text] = {}  # the sparklines last drawn, by row and width
        self._sparks_key: tuple | None = None
        self._sparks_at = float("-inf")

    def sync(self, force: bool = False) -> None:
        if force:
            self._sparks_at = float("-inf")
        super().sync(force)

    def invalidate(self) -> None:
        self._sparks_key = None  # the theme may have changed: the sparklines' colours too
        super().invalidate()

    @property
    def history(self) -> st.GpuHistory:
        return self.state.gpus[self.index]

    def build(self) -> Text:
        history = self.history
        info = history.info or GpuInfo(index=self.index, name=f"GPU {self.index}")
        title = f"GPU{self.index} {short_name(info.name)}"
        if self.border_title != title:
            self.border_title = title
        sample = history.latest
        if sample is None:
            return Text("waiting for the first sample…", self.style_of("gpu--dim"))
        if sample.lost:
            return Text(f"GPU{self.index} LOST: NVML no longer reaches it", self.style_of("gpu--hot"))
        if self.compact:
            return self._one_line(info, sample)
        width = self.content_size.width or 48
        key = (width, history.info)
        now = time.monotonic()
        if key != self._sparks_key or now - self._sparks_at >= SPARK_EVERY_S:
            self._sparks, self._sparks_key, self._sparks_at = {}, key, now
        rows = [self._util(sample, history, width), self._memory(sample, width), self._temperature(info, sample, history, width),
                self._power(sample, history, width), self._clock(info, sample, width), self._badges(sample, width)]
        return Text("\n").join(rows)

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
        room = width - text.cell_len
        text.append_text(self._spark("util", room, lambda: Text(charts.sparkline(h.util, room, 0, 100),
                                                                  self.style_of("gpu--spark"))))
        return text

    def _memory(self, s: GpuSample, width: int) -> Text:
        text = self._start("VRAM", f"{fmt.gib(s.memory_used)}/{fmt.gib(s.memory_total)} GiB")
        share = s.memory_used / s.memory_total if s.memory_used is not None and s.memory_total else None
        bar = width - text.cell_len - 5
        text.append(charts.gauge(share, bar), self.style_of("gpu--gauge"))
        text.append(f" {fmt.pct(None if share is None else share * 100):>4}")
        return text

    def _temp_style(self, temp: float | None, slowdown: float | None) -> str:
        if temp is None:
            return "gpu--dim"
        if slowdown is not None and temp >= slowdown:
            return "gpu--hot"
        return "gpu--warn" if temp >= HOT_LINE_C else "gpu--ok"

    def _temperature(self, info: GpuInfo, s: GpuSample, h: st.GpuHistory, width: int) -> Text:
        slowdown = info.temp_slowdown_c
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(f"{'temp':<{LABEL}}", self.style_of("gpu--label"))
        text.append(f"{fmt.num(s.temp_c, '°C'):<6}", self.style_of(self._temp_style(s.temp_c, slowdown)))
        # the 80 °C line and this GPU's own slowdown threshold, in words where there is room
        limits = f"hot 80 slow {fmt.num(slowdown)}" if width >= 64 else f"80|{fmt.num(slowdown)}"
        text.append(f"{limits:<{VALUE - 6}} ", self.style_of("gpu--dim"))
        top = max(slowdown or 0.0, HOT_LINE_C + 10.0)
        room = width - text.cell_len

        def spark() -> Text:
            line = charts.sparkline(h.temp, room, 0, top)
            recent = list(h.temp)[-len(line):]
            values: list[float | None] = [None] * (len(line) - len(recent))
            values += recent
            out = Text()
            for chars, role in charts.runs_of([(c, self._temp_style(v, slowdown)) for c, v in zip(line, values)]):
                out.append(chars, self.style_of(role))
            return out

        text.append_text(self._spark("temp", room, spark))
        return text

    def _power(self, s: GpuSample, h: st.GpuHistory, width: int) -> Text:
        limit = s.power_limit_w
        text = self._start("power", f"{fmt.num(s.power_w)}/{fmt.num(limit, ' W')}")
        room = width - text.cell_len
        text.append_text(self._spark("power", room, lambda: Text(charts.sparkline(h.power, room, 0, limit),
                                                                   self.style_of("gpu--spark"))))
        return text

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
        text = Text(no_wrap=True, overflow="ellipsis")
        reasons = s.throttle_reasons or []
        if not reasons:
            text.append("no clock throttling" if not short else "", self.style_of("gpu--dim"))
            return text
        for i, reason in enumerate(reasons):
            if i:
                text.append(" ")
            label = SHORT_REASON.get(reason, reason) if short else reason
            if reason == "GpuIdle":
                text.append(f"[{label}]", self.style_of("gpu--dim"))
            else:
                severe = reason in SEVERE_REASONS
                padded = label if short else f" {label} "  # one-line panels have no room to spare
                text.append(padded, self.style_of("gpu--badge-severe" if severe else "gpu--badge"))
        return text

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
        text.append_text(self._badges(s, 0, short=True))
        return text


class GpuGrid(Grid):
    """The GPU panels, as many columns as fit; one column of one-liners when compact."""

    PANEL_WIDTH = 52

    def sync_panels(self, state: st.DashboardState, reason: str | None) -> None:
        indices = sorted(state.gpus)
        existing = {panel.index for panel in self.query(GpuPanel)}
        note = self.query("#no-gpu")
        if not indices:
            message = f"No GPU: {reason or 'waiting for NVML…'}"
            if not note:
                self.mount(Static(message, id="no-gpu"))
            elif str(note.first(Static).content) != message:
                note.first(Static).update(message)
            return
        note.remove()
        new = [GpuPanel(i) for i in indices if i not in existing]
        if new:
            self.mount_all(new)
        self.fit_columns()

    def fit_columns(self) -> None:
        count = len(self.query(GpuPanel)) or 1
        compact = self.screen.has_class("-compact")
        columns = 1 if compact else max(1, min(count, (self.size.width or 120) // self.PANEL_WIDTH))
        if self.styles.grid_size_columns != columns:
            self.styles.grid_size_columns = columns
