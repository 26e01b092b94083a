"""Many GPUs at a glance: one row per GPU (util / SM activity, VRAM, temperature,
power, throttle flag; in a data-parallel run its rank's samples/s and a straggler
flag) and a totals row (the run's throughput, the GPUs' power, the energy each sample
costs and, given a one-GPU baseline, the scaling efficiency).  A cursor picks the GPU whose full panel shows
(gputui.tui.widgets.gpu_panel.GpuGrid lays the two out)."""

from __future__ import annotations

from collections.abc import Callable

from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.events import Click
from textual.message import Message

from gputui import fmt
from gputui.model import GpuSample
from gputui.session.ranks import header_baseline_rate
from gputui.tui.widgets.gpu_owners import ownership
from gputui.tui.widgets.state_view import LIVE_REDRAW_S, StateView
from gputui.view import state as st

HOT_LINE_C = 80.0  # GPUs above this throttle themselves: Dettmers' rule of thumb
WIDE_ROW_MIN = 84  # columns from which rows spell VRAM and power limits out

# Short names for badges on one-line rows.
SHORT_REASON = {
    "GpuIdle": "idle",
    "ApplicationsClocksSetting": "AppClk",
    "SwPowerCap": "PwrCap",
    "HwSlowdown": "HwSlow",
    "SyncBoost": "Sync",
    "SwThermalSlowdown": "SwTherm",
    "HwThermalSlowdown": "HwTherm",
    "HwPowerBrakeSlowdown": "PwrBrake",
    "DisplayClockSetting": "Disp",
}
SEVERE_REASONS = {"HwSlowdown", "HwThermalSlowdown", "HwPowerBrakeSlowdown", "SwThermalSlowdown"}


def temp_role(temp: float | None, slowdown: float | None) -> str:
    """The component class a temperature is drawn in: against the GPU's own slowdown
    threshold (read from NVML) and the 80 °C line."""
    if temp is None:
        return "gpu--dim"
    if slowdown is not None and temp >= slowdown:
        return "gpu--hot"
    return "gpu--warn" if temp >= HOT_LINE_C else "gpu--ok"


def throttle_badges(reasons: list[str], style_of: Callable[[str], Style], short: bool, limit: int | None = None) -> Text:
    """Active clock-event reasons as badges, severe ones (hardware, thermal) in the
    error colour; ``limit`` keeps the first few (the severe ones first) and adds "+N"."""
    text = Text(no_wrap=True, overflow="ellipsis")
    if limit is not None:
        reasons = sorted((r for r in reasons if r != "GpuIdle"), key=lambda r: r not in SEVERE_REASONS)
    shown = reasons if limit is None else reasons[:limit]
    for i, reason in enumerate(shown):
        if i:
            text.append(" ")
        label = SHORT_REASON.get(reason, reason) if short else reason
        if reason == "GpuIdle":
            text.append(f"[{label}]", style_of("gpu--dim"))
        else:
            padded = label if short else f" {label} "  # one-line rows have no room to spare
            text.append(padded, style_of("gpu--badge-severe" if reason in SEVERE_REASONS else "gpu--badge"))
    if limit is not None and len(reasons) > limit:
        text.append(f" +{len(reasons) - limit}", style_of("gpu--dim"))
    return text


def gpu_totals(samples: list[GpuSample], samples_per_sec: float | None) -> tuple[float | None, float | None]:
    """The GPUs' power now (W) and the energy one sample costs (J): power over throughput."""
    powers = [s.power_w for s in samples if not s.lost and s.power_w is not None]
    power = sum(powers) if powers else None
    per_sample = power / samples_per_sec if power is not None and samples_per_sec else None
    return power, per_sample


class GpuRows(StateView):
    """A row per GPU and a totals row.  Up/down or a click move the cursor; enter (or
    a click on the selected row) opens or closes the selected GPU's full panel."""

    can_focus = True
    SECTIONS = (st.GPUS, st.HEADER, st.THROUGHPUT, st.RUNS, st.FINDINGS)
    MIN_REDRAW_S = LIVE_REDRAW_S
    BINDINGS = [
        Binding("up", "move(-1)", "Previous GPU", id="gpu_previous", show=False),
        Binding("down", "move(1)", "Next GPU", id="gpu_next", show=False),
        Binding("enter", "drill", "GPU detail", id="gpu_detail"),
    ]
    COMPONENT_CLASSES = {"gpu--label", "gpu--ok", "gpu--warn", "gpu--hot", "gpu--dim", "gpu--badge", "gpu--badge-severe", "gpu--cursor", "gpu--total"}
    SCOPED_CSS = False  # the small-screen rule below starts at the screen
    DEFAULT_CSS = """
    GpuRows { height: auto; border: round $secondary; padding: 0 1; }
    DashboardScreen.-compact GpuRows { border: none; padding: 0; }
    GpuRows .gpu--label { color: $text-muted; }
    GpuRows .gpu--ok { color: $success; }
    GpuRows .gpu--warn { color: $warning; }
    GpuRows .gpu--hot { color: $error; text-style: bold; }
    GpuRows .gpu--dim { color: $text-muted; }
    /* reversed, as GpuPanel's badges: an ANSI theme's background is the terminal's default */
    GpuRows .gpu--badge { color: $warning; text-style: reverse; }
    GpuRows .gpu--badge-severe { color: $error; text-style: reverse bold; }
    GpuRows .gpu--cursor { background: $primary 40%; }
    GpuRows .gpu--total { text-style: bold; }
    """

    class Changed(Message):
        """The cursor moved, or the detail was opened or closed."""

    def __init__(self, **kwargs) -> None:
        super().__init__(id="gpu-rows", **kwargs)
        self.selected: int | None = None  # the NVML index under the cursor
        self.drilled = False  # the selected GPU's full panel is asked for (small screens)

    def on_mount(self) -> None:
        self.border_title = "GPUs (↑↓ select, enter: detail)"

    # -- Keys and clicks -------------------------------------------------------------
    def indices(self) -> list[int]:
        return sorted(self.state.gpus)

    def select(self, index: int) -> None:
        if index != self.selected:
            self.selected = index
            self.invalidate()
            self.post_message(self.Changed())

    def action_move(self, step: int) -> None:
        indices = self.indices()
        if not indices:
            return
        at = indices.index(self.selected) if self.selected in indices else 0
        self.select(indices[max(0, min(len(indices) - 1, at + step))])

    def action_drill(self) -> None:
        self.drilled = not self.drilled
        self.invalidate()
        self.post_message(self.Changed())

    def on_click(self, event: Click) -> None:
        offset = event.get_content_offset(self)  # None: on the border
        if offset is None:
            return
        indices = self.indices()
        line = offset.y - (1 if self._header_shown() else 0)
        if 0 <= line < len(indices):
            if indices[line] == self.selected:
                self.action_drill()
            else:
                self.select(indices[line])

    def on_focus(self) -> None:
        self.invalidate()  # the cursor shows only while focused

    def on_blur(self) -> None:
        self.invalidate()

    # -- Drawing ---------------------------------------------------------------------
    def _wide(self) -> bool:
        return (self.content_size.width or 0) >= WIDE_ROW_MIN

    def _header_shown(self) -> bool:
        return self._wide()

    def build_lines(self) -> list[Text]:
        indices = self.indices()
        if self.selected not in indices and indices:
            self.selected = indices[0]
        wide = self._wide()
        ranks = self.state.rank_of_gpu()
        stragglers = self.state.straggler_gpus()
        lines = [self._header(bool(ranks))] if wide else []
        for index in indices:
            line = self._row(self.state.gpus[index], wide, ranks, index in stragglers)
            if index == self.selected and self.has_focus:
                line.stylize(self.style_of("gpu--cursor"))
            lines.append(line)
        lines.append(self._totals(wide))
        return lines

    def _header(self, data_parallel: bool) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        rank = f"{'rank samples/s':<16}" if data_parallel else ""
        text.append(f" {'GPU':<15}{'util':>5}{'SM':>7}  {'VRAM GiB':<15}{'temp':>6}  {'power W':<10}{rank}throttle", self.style_of("gpu--label"))
        return text

    def _rank_cell(self, index: int, ranks: dict[int, int], wide: bool) -> Text:
        """The rank driving this GPU and its latest samples/s; blank for a GPU no rank uses."""
        text = Text(no_wrap=True)
        run = self.state.live_run
        rank = ranks.get(index)
        # rates right-aligned to the widest, so the ranks compare down the column
        digits = max((len(fmt.rate(r)) for r in run.rank_rates.values()), default=1) if run is not None else 1
        label_width = len(f"r{max(ranks.values())}")
        if rank is None or run is None:
            return text.append(" " * (16 if wide else label_width + digits + 2))
        label, rate = f"r{rank}", fmt.rate(run.rank_rates.get(rank))
        text.append(f"{label:<{label_width}}", self.style_of("gpu--label"))
        return text.append(f" {rate:>{digits}}" + (" " * (15 - label_width - digits) if wide else " "), self.style_of("gpu--total"))

    def _row(self, h: st.GpuHistory, wide: bool, ranks: dict[int, int] | None = None, straggler: bool = False) -> Text:
        s, info = h.latest, h.info
        text = Text(no_wrap=True, overflow="ellipsis")
        mark = "▸" if h.index == self.selected else " "
        name = fmt.short_gpu_name(info.name) if info is not None else ""
        text.append(f"{mark}{h.index:>2} {name[:11]:<12}" if wide else f"{mark}{h.index}", self.style_of("gpu--label"))
        if s is None:
            return text.append(" waiting for the first sample…", self.style_of("gpu--dim"))
        if s.lost:
            return text.append(" LOST: NVML no longer reaches it", self.style_of("gpu--hot"))
        text.append(f"{fmt.pct(s.util_gpu):>5}")
        text.append(f"{'SM':>3}" if not wide else "   ", self.style_of("gpu--label"))
        text.append(f"{fmt.pct(s.sm_active):>4}" if wide or s.sm_active is not None else "   -")
        slowdown = info.temp_slowdown_c if info is not None else None
        if wide:
            text.append(f"  {fmt.gib(s.memory_used) + '/' + fmt.gib(s.memory_total):<15}")
            text.append(f"{fmt.num(s.temp_c, '°C'):>6}", self.style_of(temp_role(s.temp_c, slowdown)))
            text.append(f"  {fmt.num(s.power_w) + '/' + fmt.num(s.power_limit_w):<10}")
            if ranks:
                text.append_text(self._rank_cell(h.index, ranks, wide))
            self._straggler_badge(text, straggler, wide)
            text.append_text(throttle_badges(s.throttle_reasons or [], self.style_of, short=True, limit=2))
        else:
            used = "-" if s.memory_used is None else f"{s.memory_used / fmt.GIB:.0f}"
            total = "-" if s.memory_total is None else f"{s.memory_total / fmt.GIB:.0f}G"
            text.append(f" {used + '/' + total:>8}")
            text.append(f" {fmt.num(s.temp_c, '°C'):>5}", self.style_of(temp_role(s.temp_c, slowdown)))
            text.append(f" {fmt.num(s.power_w, 'W'):>5} ")
            if ranks:
                text.append_text(self._rank_cell(h.index, ranks, wide))
            self._straggler_badge(text, straggler, wide)
            text.append_text(throttle_badges(s.throttle_reasons or [], self.style_of, short=True, limit=1))
        owners = ownership(h.processes, short=True, narrow=not wide)
        if owners is not None:
            text.append(f" {owners}", self.style_of("gpu--dim"))
        return text

    def _straggler_badge(self, text: Text, straggler: bool, wide: bool) -> None:
        """An open straggler finding names this GPU (or its rank): every step waits for it."""
        if straggler:
            text.append("straggler" if wide else "strag", self.style_of("gpu--badge-severe"))
            text.append(" ")

    def _totals(self, wide: bool) -> Text:
        samples = [h.latest for h in self.state.gpus.values() if h.latest is not None]
        run = self.state.live_run
        rate = run.current if run is not None else None
        power, per_sample = gpu_totals(samples, rate)
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(f" Σ{len(self.state.gpus)} GPUs " if wide else " Σ ", self.style_of("gpu--label"))
        text.append(f"{fmt.rate(rate)} samples/s" if wide else f"{fmt.rate(rate)}/s", self.style_of("gpu--total"))
        text.append("  " if wide else " ")
        text.append(f"{fmt.num(power, ' W')}" if wide else fmt.num(power, "W"), self.style_of("gpu--total"))
        text.append("  " if wide else " ")
        text.append(fmt.num(per_sample, " J/sample", 2), self.style_of("gpu--total"))
        efficiency = self.state.scaling_efficiency()
        if efficiency is not None:
            text.append("  scaling " if wide else " scaling ", self.style_of("gpu--label"))
            text.append(fmt.pct(100.0 * efficiency), self.style_of("gpu--total"))
            if wide and run is not None:
                baseline = header_baseline_rate(self.state.header)
                text.append(f" of {run.world_size}× {fmt.rate(baseline)}/s on one", self.style_of("gpu--label"))
        return text
