"""The host side: per-core load (one cell per core when space is short) and the
run's process tree, the main process and each data-loader worker with CPU% and RSS."""

from __future__ import annotations

from rich.text import Text

from gputui import fmt
from gputui.model import HostSample, ProcessSample
from gputui.tui import charts
from gputui.tui import state as st
from gputui.tui.widgets.base import StateView

CORE_BAR_CELL = 18  # " 0 ██████▌    45%" per core when they fit as bars
# A core's bar and figure move once its load has moved this many points from what they
# show (or crossed a colour's threshold): an idle core wanders between 0 and 6 %, and on
# a 16-core box redrawing each wander was about half of the idle dashboard's bytes.
CORE_STEP = 5.0
MIB = 1024 * 1024
NARROW_PROCESS_LINE = 44  # below this many columns a process line leaves out the pid


def rss(num_bytes: int | None) -> str:
    if num_bytes is None:
        return "-"
    return f"{num_bytes / MIB:.0f}M" if num_bytes < 1024 * MIB else f"{num_bytes / (1024 * MIB):.1f}G"


class CpuPanel(StateView):
    MIN_REDRAW_S = 2.0  # every other sample at 1 s: numbers stay fresh, the link stays quiet
    SECTIONS = (st.HOST,)
    COMPONENT_CLASSES = {"cpu--label", "cpu--low", "cpu--mid", "cpu--high", "cpu--dim", "cpu--main", "cpu--worker"}
    DEFAULT_CSS = """
    CpuPanel .cpu--label { color: $text-muted; }
    CpuPanel .cpu--low { color: $success; }
    CpuPanel .cpu--mid { color: $warning; }
    CpuPanel .cpu--high { color: $error; }
    CpuPanel .cpu--dim { color: $text-muted; }
    CpuPanel .cpu--main { text-style: bold; }
    CpuPanel .cpu--worker { color: $foreground; }
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._cores_shown: list[float] = []  # each core's load as last drawn

    def steady_cores(self, cores: list[float]) -> list[float]:
        """The per-core loads to draw: each as drawn before unless it moved by a visible
        step (CORE_STEP points, or into another colour); all anew when the count changed."""
        shown = self._cores_shown
        if len(shown) != len(cores):
            shown = list(cores)
        else:
            shown = [new if abs(new - old) >= CORE_STEP or self._level(new) != self._level(old) else old for old, new in zip(shown, cores)]
        self._cores_shown = shown
        return shown

    def build(self) -> Text:
        host = self.state.host
        if host is None:
            return Text("waiting for the first sample…", self.style_of("cpu--dim"))
        width = self.content_size.width or 40
        height = self.content_size.height or 10
        if self.compact:  # two or three lines: machine and cores in one, then the run
            lines = [self._machine_and_cores(host, width), self._run_line(host.processes)]
        else:
            lines = self._machine(host, width)
            # bars per core where the rows the process tree leaves allow them
            spare = height - len(lines) - (len(host.processes) + 1 if host.processes else 1)
            lines += self._cores(self.steady_cores(host.per_core or []), width, spare)
            lines += self._processes(host.processes, width, max(1, height - len(lines)))
        return Text("\n").join(lines)

    def _level(self, percent: float | None) -> str:
        if percent is None:
            return "cpu--dim"
        return "cpu--high" if percent >= 90 else "cpu--mid" if percent >= 60 else "cpu--low"

    def _machine(self, host: HostSample, width: int) -> list[Text]:
        """One line, or two (memory on its own) when the panel is narrow."""
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append("CPU ", self.style_of("cpu--label"))
        text.append(fmt.pct(host.cpu_percent), self.style_of(self._level(host.cpu_percent)))
        if host.load_avg:
            text.append("  load ", self.style_of("cpu--label"))
            text.append(" ".join(f"{x:.1f}" for x in host.load_avg))
        if host.memory_used is None:
            return [text]
        memory = Text(no_wrap=True, overflow="ellipsis")
        memory.append("mem ", self.style_of("cpu--label"))
        memory.append(f"{fmt.gib(host.memory_used)}/{fmt.gib(host.memory_total)} GiB")
        if text.cell_len + 2 + memory.cell_len > width:
            return [text, memory]
        text.append("  ")
        text.append_text(memory)
        return [text]

    def _machine_and_cores(self, host: HostSample, width: int) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append("CPU ", self.style_of("cpu--label"))
        text.append(f"{fmt.pct(host.cpu_percent):>4} ", self.style_of(self._level(host.cpu_percent)))
        memory = f" mem {fmt.gib(host.memory_used)}/{fmt.gib(host.memory_total)}G" if host.memory_used is not None else ""
        room = max(0, width - text.cell_len - len(memory))
        cores = self.steady_cores(host.per_core or [])
        cells = [(charts.level_char(p / 100), self._level(p)) for p in cores[:room]]
        for chars, role in charts.runs_of(cells):
            text.append(chars, self.style_of(role))
        if len(cores) > room and room:
            text.right_crop(1)
            text.append("…", self.style_of("cpu--dim"))
        text.append(memory, self.style_of("cpu--label"))
        return text

    def _cores(self, cores: list[float], width: int, spare_rows: int = 4) -> list[Text]:
        if not cores:
            return []
        per_row = width // CORE_BAR_CELL
        if per_row and len(cores) <= per_row * max(4, spare_rows):
            return self._core_bars(cores, per_row)
        # One cell per core, wrapped: 128 cores fit in two lines of a wide panel.
        lines = []
        cells = max(8, width - 6)
        for start in range(0, len(cores), cells):
            text = Text(no_wrap=True)
            text.append("cores " if start == 0 else "      ", self.style_of("cpu--label"))
            chunk = [(charts.level_char(p / 100), self._level(p)) for p in cores[start : start + cells]]
            for chars, role in charts.runs_of(chunk):
                text.append(chars, self.style_of(role))
            lines.append(text)
        return lines

    def _core_bars(self, cores: list[float], per_row: int) -> list[Text]:
        lines = []
        for start in range(0, len(cores), per_row):
            text = Text(no_wrap=True)
            for i, percent in enumerate(cores[start : start + per_row], start):
                text.append(f"{i:>2} ", self.style_of("cpu--label"))
                text.append(charts.gauge(percent / 100, CORE_BAR_CELL - 9), self.style_of(self._level(percent)))
                text.append(f" {percent:>3.0f}% ")
            lines.append(text)
        return lines

    def _processes(self, processes: list[ProcessSample], width: int, room: int) -> list[Text]:
        if not processes:
            return [Text("no run: nothing to trace", self.style_of("cpu--dim"))]
        total_cpu = sum(p.cpu_percent or 0 for p in processes)
        total_rss = sum(p.rss or 0 for p in processes)
        workers = [p for p in processes if p.role == "worker"]
        head = Text(no_wrap=True, overflow="ellipsis")
        head.append("run ", self.style_of("cpu--label"))
        head.append(f"{total_cpu:.0f}%", self.style_of(self._level(total_cpu / max(1, len(processes)))))
        head.append(f" {rss(total_rss)}  ")
        head.append(f"{len(workers)} worker{'s' if len(workers) != 1 else ''}", self.style_of("cpu--label"))
        lines = [head]
        main = [p for p in processes if p.role == "main"]
        others = sorted((p for p in processes if p.role != "main"), key=lambda p: -(p.cpu_percent or 0))
        shown = (main + others)[: max(0, room - 1)]
        for proc in shown:
            lines.append(self._process_line(proc, width))
        hidden = len(processes) - len(shown)
        if hidden > 0 and len(lines) > 1:
            lines[-1] = Text(f"  … {hidden + 1} more", self.style_of("cpu--dim"))
        return lines

    def _run_line(self, processes: list[ProcessSample]) -> Text:
        """The whole tree in one line: main, then each worker's CPU%, busiest first."""
        text = Text(no_wrap=True, overflow="ellipsis")
        if not processes:
            text.append("no run: nothing to trace", self.style_of("cpu--dim"))
            return text
        total_cpu = sum(p.cpu_percent or 0 for p in processes)
        text.append("run ", self.style_of("cpu--label"))
        text.append(f"{total_cpu:.0f}% {rss(sum(p.rss or 0 for p in processes))}")
        for proc in processes:
            if proc.role == "main":
                text.append(" │ main ", self.style_of("cpu--label"))
                text.append(fmt.num(proc.cpu_percent, "%"), self.style_of(self._level(proc.cpu_percent)))
        workers = sorted((p for p in processes if p.role == "worker"), key=lambda p: -(p.cpu_percent or 0))
        if workers:
            text.append(f" │ {len(workers)} worker{'s' if len(workers) > 1 else ''}", self.style_of("cpu--label"))
            for proc in workers:
                text.append(" ")
                text.append(fmt.num(proc.cpu_percent), self.style_of(self._level(proc.cpu_percent)))
            text.append("%")
        return text

    def _process_line(self, proc: ProcessSample, width: int) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        is_main = proc.role == "main"
        text.append("├ " if not is_main else "", self.style_of("cpu--dim"))
        label = f"{proc.role:<10}" if is_main else f"{proc.role:<8}"  # the tree mark takes two cells
        text.append(label, self.style_of("cpu--main" if is_main else "cpu--worker"))
        if width >= NARROW_PROCESS_LINE:  # narrow: the pid gives way to the name
            text.append(f"{proc.pid:>7} ", self.style_of("cpu--dim"))
        else:
            text.append(" ")
        text.append(f"{fmt.num(proc.cpu_percent, '%'):>5}", self.style_of(self._level(proc.cpu_percent)))
        text.append(f" {rss(proc.rss):>6} ")
        text.append(proc.name or "", self.style_of("cpu--dim"))
        return text
