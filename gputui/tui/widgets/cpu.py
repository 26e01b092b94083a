"""The host side: per-core load (one cell per core when space is short) and the
run's process tree, the main process and each data-loader worker with CPU% and RSS.

The main process's CPU follows every redraw.  The machine's and the run's CPU, the
per-core bars and the other processes' figures show each one's mean over the last
few seconds and move only by a visible step (see SteadyFigures), and memory figures
(each process's, the run's sum of them) only by RSS_STEP: busy cores and data-loader
workers wander by tens of points a second, and redrawing each wander was most of the
dashboard's bytes (docs/performance.md#figures-behind-the-codes-choices).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from rich.text import Text

from gputui import fmt
from gputui.model import HostSample, ProcessSample
from gputui.tui.widgets.state_view import LIVE_REDRAW_S, StateView, step_of
from gputui.view import charts
from gputui.view import state as st

CORE_BAR_CELL = 18  # " 0 ██████▌    45%" per core when they fit as bars
# A steady figure moves once its mean has moved about a cell of a core's bar (9 cells
# for 100 %) from what is shown, or into another colour and half that past its line.
STEP = 10.0
# A figure drawn as one cell (a core in the strip of a narrow panel or a many-core box,
# a data-loader worker among many) moves by two of the cell's eight heights: a busy
# core's four-second mean wanders by a height, and each cell redrawn for it costs a
# cursor move and a colour (the row with the cores' strip was a fifth of a running
# dashboard's bytes: docs/performance.md#figures-behind-the-codes-choices).  Into another colour it moves as any figure.
CELL_STEP = 25.0
STEADY_EVERY_S = 2 * LIVE_REDRAW_S  # the steady figures move on every other step, each the mean since the last
RSS_STEP = 0.02  # a process's memory moves once it changed by this share (a leak climbs in steps)
# More processes than lines: the busiest are listed, and one goes above the one before
# it only once busier by this many points (workers near each other swapped places at
# every redraw, rewriting both lines).
ORDER_MARGIN = 10.0
MIB = 1024 * 1024
NARROW_PROCESS_LINE = 44  # below this many columns a process line leaves out the pid
# More data-loader workers than this: one cell each on one line, not a line each.  A
# dozen lines of workers wandering by tens of points were two thirds of a running
# dashboard's bytes (docs/performance.md#figures-behind-the-codes-choices); which worker idles shows as well in a cell.
WORKER_LINES = 4


def rss(num_bytes: int | None) -> str:
    if num_bytes is None:
        return "-"
    return f"{num_bytes / MIB:.0f}M" if num_bytes < 1024 * MIB else f"{num_bytes / (1024 * MIB):.1f}G"


def _total_cpu(processes: list[ProcessSample]) -> float:
    return sum(p.cpu_percent or 0 for p in processes)


def _total_rss(shown: list[ProcessSample]) -> int:
    """The run's memory as the sum of what its processes' lines show (each held until
    it moved by RSS_STEP): the sum of a dozen workers' raw figures changed at every
    redraw."""
    return sum(p.rss or 0 for p in shown)


class SteadyFigures:
    """Figures by key (a core, a process) as the panel shows them: the mean of each
    over the samples added since the last ``update``, kept as shown until it moved
    by a visible step (``moved(old, new, key)``).  What was not seen since is dropped."""

    def __init__(self, moved: Callable[[float, float, int], bool]) -> None:
        self._moved = moved
        self._sums: dict[int, list[float]] = {}  # key -> [sum, count]
        self._latest: dict[int, float] = {}
        self.shown: dict[int, float] = {}

    def add(self, values: dict[int, float]) -> None:
        for key, value in values.items():
            total = self._sums.setdefault(key, [0.0, 0])
            total[0] += value
            total[1] += 1
        self._latest = values

    def update(self) -> dict[int, float]:
        means = {key: total / count for key, (total, count) in self._sums.items()} or self._latest
        self._sums = {}
        shown = self.shown
        self.shown = {key: new if key not in shown or self._moved(shown[key], new, key) else shown[key] for key, new in means.items()}
        return self.shown


class CpuPanel(StateView):
    MIN_REDRAW_S = LIVE_REDRAW_S
    PACED = True
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
        self._core_loads = SteadyFigures(lambda old, new, _core: self._moved(old, new, CELL_STEP if self._cores_as_cells else STEP))
        # the run's processes but main, by pid; workers drawn as cells by the cell's step
        self._other_loads = SteadyFigures(lambda old, new, pid: self._moved(old, new, CELL_STEP if pid in self._cell_pids else STEP))
        self._cores_as_cells = False  # as last drawn: a cell per core, or bars
        self._cell_pids: frozenset[int] = frozenset()  # the workers last drawn as cells
        # The machine's CPU % (key 0) and the run's total (by its root's pid: the next run
        # starts afresh): these two figures, new at every redraw, were over a quarter of
        # the CPU panel's bytes (docs/performance.md#figures-behind-the-codes-choices).
        self._machine_load = SteadyFigures(lambda old, new, _key: self._moved(old, new))
        self._run_load = SteadyFigures(lambda old, new, _pid: self._total_moved(old, new))
        self._rss_shown: dict[int, int] = {}
        self._folded: HostSample | None = None
        self._steadied_step: int | None = None  # the step of STEADY_EVERY_S's clock they last moved in
        self._order_shown: list[int] = []  # the pids of the run's processes, in the order last listed

    def sync(self, force: bool = False) -> None:
        self._fold(self.state.host)  # every sample counts in the means, drawn or not
        if force:
            self._steadied_step = None
        super().sync(force)

    def _fold(self, host: HostSample | None) -> None:
        """Add ``host``'s figures to the means, once (the panel sees a sample many times)."""
        if host is None or host is self._folded:
            return
        self._folded = host
        self._core_loads.add(dict(enumerate(host.per_core or [])))
        self._other_loads.add({p.pid: p.cpu_percent for p in host.processes if p.role != "main" and p.cpu_percent is not None})
        self._machine_load.add({} if host.cpu_percent is None else {0: host.cpu_percent})
        self._run_load.add({host.processes[0].pid: _total_cpu(host.processes)} if host.processes else {})

    def _steady(self, host: HostSample) -> None:
        """Move the steady figures on at the first redraw in each step of STEADY_EVERY_S."""
        self._fold(host)
        step = step_of(time.monotonic(), STEADY_EVERY_S)
        if step != self._steadied_step:
            self._steadied_step = step
            for figures in (self._core_loads, self._other_loads, self._machine_load, self._run_load):
                figures.update()

    def _moved(self, old: float, new: float, step: float = STEP) -> bool:
        """A figure left what is shown by ``step``, or went into another colour and half a
        STEP past its line (a worker settling at 95 % turns red; one wandering over 86-94 % does not)."""
        if abs(new - old) >= step:
            return True
        well_inside = self._level(new - STEP / 2) == self._level(new + STEP / 2)
        return well_inside and self._level(new) != self._level(old)

    def _total_moved(self, old: float, new: float) -> bool:
        """The run's total (up to 100 % a process) moves by a step or a twentieth of itself."""
        return abs(new - old) >= max(STEP, old / 20)

    def _machine_cpu(self, host: HostSample) -> float | None:
        return self._machine_load.shown.get(0, host.cpu_percent)

    def _run_cpu(self, processes: list[ProcessSample]) -> float:
        return self._run_load.shown.get(processes[0].pid, _total_cpu(processes))

    def _shown_processes(self, processes: list[ProcessSample]) -> list[ProcessSample]:
        """The run's processes with the figures their lines show (see _as_shown)."""
        shown = [self._as_shown(p) for p in processes]
        self._rss_shown = {p.pid: p.rss for p in shown if p.rss is not None}
        return shown

    def _as_shown(self, proc: ProcessSample) -> ProcessSample:
        """``proc`` with the figures its line shows: the main process's CPU as sampled,
        the others' steady; everyone's memory as shown until it moved by RSS_STEP."""
        cpu = proc.cpu_percent if proc.role == "main" else self._other_loads.shown.get(proc.pid, proc.cpu_percent)
        memory, shown = proc.rss, self._rss_shown.get(proc.pid)
        if memory is not None and shown is not None and abs(memory - shown) < RSS_STEP * shown:
            memory = shown
        return dataclasses.replace(proc, cpu_percent=cpu, rss=memory)

    def _steady_order(self, processes: list[ProcessSample]) -> list[ProcessSample]:
        """``processes`` busiest first, within ORDER_MARGIN points: in the order listed
        before, except that one busier than the one above it by the margin moves up
        (new ones come in by their CPU)."""
        listed_at = {pid: i for i, pid in enumerate(self._order_shown)}
        order = sorted(processes, key=lambda p: (listed_at.get(p.pid, len(listed_at)), -(p.cpu_percent or 0)))
        for i in range(1, len(order)):  # an insertion sort whose comparison has the margin
            j = i
            while j and (order[j].cpu_percent or 0) > (order[j - 1].cpu_percent or 0) + ORDER_MARGIN:
                order[j - 1], order[j] = order[j], order[j - 1]
                j -= 1
        self._order_shown = [p.pid for p in order]
        return order

    def build_lines(self) -> list[Text]:
        host = self.state.host
        if host is None:
            return [Text("waiting for the first sample…", self.style_of("cpu--dim"))]
        width = self.content_size.width or 40
        height = self.content_size.height or 10
        self._steady(host)  # by the steps of the cells and bars drawn last time
        self._cell_pids = frozenset()  # set again where workers are drawn as cells
        cores = [load for _, load in sorted(self._core_loads.shown.items())]
        if self.compact:  # two or three lines: machine and cores in one, then the run
            lines = [self._machine_and_cores(host, cores, width), self._run_line(host.processes)]
        else:
            lines = self._machine(host, width)
            # bars per core where the rows the process tree leaves allow them
            spare = height - len(lines) - (len(host.processes) + 1 if host.processes else 1)
            lines += self._cores(cores, width, spare)
            lines += self._processes(host.processes, width, max(1, height - len(lines)))
        return lines

    def _level(self, percent: float | None) -> str:
        if percent is None:
            return "cpu--dim"
        return "cpu--high" if percent >= 90 else "cpu--mid" if percent >= 60 else "cpu--low"

    def _machine(self, host: HostSample, width: int) -> list[Text]:
        """One line, or two (memory on its own) when the panel is narrow."""
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append("CPU ", self.style_of("cpu--label"))
        machine = self._machine_cpu(host)
        text.append(fmt.pct(machine), self.style_of(self._level(machine)))
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

    def _machine_and_cores(self, host: HostSample, cores: list[float], width: int) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append("CPU ", self.style_of("cpu--label"))
        machine = self._machine_cpu(host)
        text.append(f"{fmt.pct(machine):>4} ", self.style_of(self._level(machine)))
        memory = f" mem {fmt.gib(host.memory_used)}/{fmt.gib(host.memory_total)}G" if host.memory_used is not None else ""
        room = max(0, width - text.cell_len - len(memory))
        self._cores_as_cells = True
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
        self._cores_as_cells = not (per_row and len(cores) <= per_row * max(4, spare_rows))
        if not self._cores_as_cells:
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
        total_cpu = self._run_cpu(processes)
        listed = self._shown_processes(processes)
        workers = [p for p in processes if p.role == "worker"]
        head = Text(no_wrap=True, overflow="ellipsis")
        head.append("run ", self.style_of("cpu--label"))
        head.append(f"{total_cpu:.0f}%", self.style_of(self._level(total_cpu / max(1, len(processes)))))
        head.append(f" {rss(_total_rss(listed))}  ")
        head.append(f"{len(workers)} worker{'s' if len(workers) != 1 else ''}", self.style_of("cpu--label"))
        lines = [head]
        main = [p for p in listed if p.role == "main"]
        others = [p for p in listed if p.role != "main"]
        if len(workers) > WORKER_LINES:  # a cell each, on one line (the recording keeps each one's figures)
            lines += [self._process_line(proc, width) for proc in main[: max(0, room - 2)]]
            lines.append(self._workers_line([p for p in others if p.role == "worker"], width))
            others = [p for p in others if p.role != "worker"]
            shown_others = others[: max(0, room - len(lines))]
            lines += [self._process_line(proc, width) for proc in shown_others]
            if len(others) > len(shown_others) and len(lines) > 2:
                lines[-1] = Text(f"  … {len(others) - len(shown_others) + 1} more", self.style_of("cpu--dim"))
            return lines
        if len(main) + len(others) > room - 1:  # not all fit: the busiest are listed, the rest counted
            others = self._steady_order(others)
        else:  # all fit: in the order they started, so that a line stays with its process
            others.sort(key=lambda p: p.pid)
        shown = (main + others)[: max(0, room - 1)]
        for proc in shown:
            lines.append(self._process_line(proc, width))
        hidden = len(processes) - len(shown)
        if hidden > 0 and len(lines) > 1:
            lines[-1] = Text(f"  … {hidden + 1} more", self.style_of("cpu--dim"))
        return lines

    def _run_line(self, processes: list[ProcessSample]) -> Text:
        """The whole tree in one line: main, then each worker's CPU%, busiest first (see _steady_order)."""
        text = Text(no_wrap=True, overflow="ellipsis")
        if not processes:
            text.append("no run: nothing to trace", self.style_of("cpu--dim"))
            return text
        total_cpu = self._run_cpu(processes)
        listed = self._shown_processes(processes)
        text.append("run ", self.style_of("cpu--label"))
        text.append(f"{total_cpu:.0f}% {rss(_total_rss(listed))}")
        for proc in listed:
            if proc.role == "main":
                text.append(" │ main ", self.style_of("cpu--label"))
                text.append(fmt.num(proc.cpu_percent, "%"), self.style_of(self._level(proc.cpu_percent)))
        workers = self._steady_order([p for p in listed if p.role == "worker"])
        if len(workers) > WORKER_LINES:  # a cell each, as in the full panel
            text.append(f" │ {len(workers)} workers ", self.style_of("cpu--label"))
            for chars, role in charts.runs_of(self._worker_cells(workers)):
                text.append(chars, self.style_of(role))
        elif workers:
            text.append(f" │ {len(workers)} worker{'s' if len(workers) > 1 else ''}", self.style_of("cpu--label"))
            for proc in workers:
                text.append(" ")
                text.append(fmt.num(proc.cpu_percent), self.style_of(self._level(proc.cpu_percent)))
            text.append("%")
        return text

    def _worker_cells(self, workers: list[ProcessSample]) -> list[tuple[str, str]]:
        """Each worker's steady CPU as a cell and its colour, in the order they started.
        The workers are remembered as drawn in cells: their figures move by CELL_STEP."""
        self._cell_pids = frozenset(p.pid for p in workers)
        return [(charts.level_char((p.cpu_percent or 0) / 100), self._level(p.cpu_percent)) for p in sorted(workers, key=lambda p: p.pid)]

    def _workers_line(self, workers: list[ProcessSample], width: int) -> Text:
        """``├ 12 workers 4.2G ▇▇▆▇▅▇▇▆▇▇▇▆``: their memory together, then each worker's
        steady CPU as a cell, in the order they started (a cell stays with its worker)."""
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append("├ ", self.style_of("cpu--dim"))
        text.append(f"{len(workers)} workers ", self.style_of("cpu--worker"))
        text.append(f"{rss(sum(p.rss or 0 for p in workers))} ")
        cells = self._worker_cells(workers)
        room = max(1, width - text.cell_len)
        for chars, role in charts.runs_of(cells[: room if len(cells) <= room else room - 1]):
            text.append(chars, self.style_of(role))
        if len(cells) > room:
            text.append("…", self.style_of("cpu--dim"))
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
