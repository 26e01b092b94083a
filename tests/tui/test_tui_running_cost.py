"""Issue 25, "a run in progress": what the throughput chart and the CPU panel write
while a run goes (on a 16-core H200 box with a dozen data-loader workers they were
most of the dashboard's bytes).

The dashboard runs headless (Textual's run_test) over the NVML test double; what it
writes is replayed on the terminal emulator of tests/tui/test_tui_updates.py:

- each throughput reading used to land in a half-second column of a plot whose span
  changed at 5, 10, 20 and 30 s, each change rewriting every column; now a reading
  writes its own column (columns of a second or more), without gaps;
- busy cores and workers wander by tens of points a second: a bar or a worker's figure
  moves once its mean moved by a step (10 points, or into another colour and 5 past
  its line), and shows the mean since it was drawn; the main process stays live; a
  core or a worker drawn as one cell moves by two of its eight heights (25 points);
- workers near each other swapped lines at every redraw: while all fit they keep
  their lines, and when they do not the busiest come first within a margin;
- the cost table lacked nvitop's CPU.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import types

import pytest

from gputui.model import ProcessSample
from gputui.record import events as ev
from gputui.record.events import make_event
from gputui.tui.widgets import cpu as cpu_widgets
from gputui.tui.widgets import gpu_panel as gpu_panel_widgets
from gputui.tui.widgets import state_view as base_widgets
from gputui.tui.widgets.cpu import CpuPanel
from gputui.tui.widgets.gpu_panel import GpuPanel
from gputui.tui.widgets.header import RunStatus
from gputui.tui.widgets.state_view import StateView
from gputui.tui.widgets.throughput_chart import GUTTER, ThroughputChart
from gputui.view.session_news import EventArrived
from tests.support.process import REPO
from tests.support.redraw import IDLE_CORES, SIZE, in_region, one_gpu_app, sample, started, written_cells
from tests.support.terminal import Recorder, assert_same, composed
from tests.support.tui import run_async, shown


def reading(t: float, rate: float) -> EventArrived:
    payload = {"samples_per_sec": rate, "source": "gputui", "phase": "measure", "samples": 256, "seconds": 256 / rate}
    return EventArrived(make_event(t, ev.THROUGHPUT, payload))


def plot_region(chart: ThroughputChart):
    """The chart's plot and time axis: its content under the figures (one or two lines)."""
    content = chart.content_region
    lines = str(chart.render()).splitlines()
    top = next(i for i, line in enumerate(lines) if line[GUTTER - 1 : GUTTER] in ("┤", "│"))
    return content._replace(y=content.y + top, height=content.height - top)


def background(cell: tuple[str, str]) -> str:
    """A terminal cell's background colour (its SGR's 48 group): a bar's full cell is a
    space on the bar's colour."""
    params = cell[1].split(";")
    if "48" not in params:
        return ""
    i = params.index("48")
    return ";".join(params[i : i + (3 if params[i + 1 : i + 2] == ["5"] else 5)])


def test_a_reading_a_second_writes_its_own_column_and_leaves_no_gaps(tmp_path):
    """The first minute of a run, a reading every 1.1 s (so a column now and then holds
    none of its own): each redraw writes the new columns and none drawn before; the
    bars run unbroken from the first reading to the last."""
    app = one_gpu_app(tmp_path)

    async def scenario():
        recorder = Recorder(app, *SIZE)
        async with app.run_test(size=SIZE) as pilot:
            await started(app, pilot)
            chart = app.dashboard.query_one(ThroughputChart)
            plot = plot_region(chart)
            await shown(pilot)
            recorder.take()
            rewritten: dict[float, list[int]] = {}
            newest = plot.x
            for i in range(45):
                t = round(5.0 + 1.1 * i, 2)
                app.state.apply(app.state.run.ticket, [reading(t, 2750.0 + 40 * (i % 3))])
                app.refresh_dashboard(force=True)
                await pilot.pause()
                columns = sorted({x for x, _ in in_region(written_cells("".join(d for _, d in recorder.take())), plot)})
                if columns and (columns[0] < newest or len(columns) > 2):  # the last one drawn may be again
                    rewritten[t] = columns
                newest = max([newest, *columns])
            assert not rewritten, f"readings that rewrote columns drawn before: {rewritten}"

            bottom = recorder.term.cells[plot.bottom - 2]  # the plot's last row, above the time axis
            empty = background(bottom[plot.right - 1])  # right of the last reading: nothing drawn there
            bars = bottom[plot.x + GUTTER : newest + 1]
            gaps = [x for x, (char, sgr) in enumerate(bars) if char == " " and background((char, sgr)) == empty]
            assert bars and not gaps, f"gaps in the bars at {gaps}: {''.join(char for char, _ in bars)!r}"
            assert_same(recorder.term, composed(app, recorder.console), "after the readings")

    run_async(scenario())


class FakeClock:
    """time.monotonic for the panels, moved by the test (the app's loop keeps the real one)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def with_clock(monkeypatch) -> FakeClock:
    clock = FakeClock()
    fake_time = types.SimpleNamespace(monotonic=clock.monotonic)
    monkeypatch.setattr(base_widgets, "time", fake_time)
    monkeypatch.setattr(cpu_widgets, "time", fake_time, raising=False)
    return clock


def core_cells(cpu: CpuPanel):
    """The rows of the per-core bars (below the CPU and memory lines): two cores a row."""
    content = cpu.content_region
    return content._replace(y=content.y + 2, height=8)


def core_figure(text: str, core: int) -> int:
    """The percentage a core's bar shows: " 0 ██████▌    45%" (a 9-cell bar)."""
    match = re.search(rf"(?:^|\s){core} .{{9}} +(\d+)%", text, re.MULTILINE)
    assert match, f"no bar for core {core} in:\n{text}"
    return int(match.group(1))


def test_busy_cores_jittering_within_a_cell_of_their_bars_are_not_redrawn(tmp_path):
    """Cores at 30-75 % moving by up to 8 points, and one at 88-91 % crossing the red
    line back and forth: no bar is rewritten.  One settling 7 points higher and into
    red is, alone."""
    app = one_gpu_app(tmp_path)
    busy = [70.0, 40.0, 88.0, 75.0, 72.0, 20.0] + IDLE_CORES[6:]  # none 8 points from a colour's line but core 2

    async def scenario():
        recorder = Recorder(app, *SIZE)
        async with app.run_test(size=SIZE) as pilot:
            await started(app, pilot)
            app.state.apply(app.state.run.ticket, [sample(app, 99.0, cores=busy)])
            await shown(pilot)
            cpu = app.dashboard.query_one(CpuPanel)
            bars = core_cells(cpu)
            recorder.take()
            written = set()
            for i in range(6):
                wander = list(busy)
                for k in range(6):
                    wander[k] = busy[k] + (8.0 if (i + k) % 2 else -7.0)
                wander[2] = 91.0 if i % 2 else 88.5  # across 90 %, the red line, by a point or two
                app.state.apply(app.state.run.ticket, [sample(app, 100.0 + i, cores=wander)])
                app.refresh_dashboard(force=True)
                await pilot.pause()
                written |= written_cells("".join(d for _, d in recorder.take()))
            assert not in_region(written, bars), f"{len(in_region(written, bars))} cells of the bars rewritten"

            settled = list(busy)
            settled[2] = 95.0  # 7 points up, and red
            app.state.apply(app.state.run.ticket, [sample(app, 110.0, cores=settled)])
            app.refresh_dashboard(force=True)
            await pilot.pause()
            changed = in_region(written_cells("".join(d for _, d in recorder.take())), bars)
            assert changed and {y for _, y in changed} == {bars.y + 1}, "core 2's row, and only it"
            assert core_figure(str(cpu.render()), 2) == 95
            assert_same(recorder.term, composed(app, recorder.console), "after the move")

    run_async(scenario())


def host_with(
    app, t: float, *, cores: list[float] | None = None, main_cpu: float | None = None, workers: list[float] | None = None, worker_mib: list[int] | None = None
):
    """A sample of the fixed host (main pid 4242, workers 4250-4253) with these figures."""
    event = sample(app, t, cores=cores)

    def figures(proc: ProcessSample) -> ProcessSample:
        if proc.role == "main":
            return dataclasses.replace(proc, cpu_percent=main_cpu if main_cpu is not None else proc.cpu_percent)
        i = proc.pid - 4250
        cpu = workers[i] if workers is not None else proc.cpu_percent
        return dataclasses.replace(proc, cpu_percent=cpu, rss=worker_mib[i] * 1024 * 1024 if worker_mib is not None else proc.rss)

    host = dataclasses.replace(event.sample.host, processes=[figures(p) for p in event.sample.host.processes])
    return dataclasses.replace(event, sample=dataclasses.replace(event.sample, host=host))


def worker_lines(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.split()[1:2] == ["worker"]]


def test_bars_and_workers_show_their_mean_since_they_were_drawn_and_the_main_process_stays_live(tmp_path, monkeypatch):
    """Two samples a step of the panels' pace: the run's main process follows each
    redraw; the bars and the workers' figures move on every other step, showing the
    mean over them (a core at 80, 40, 80, 40 % shows 60 %, not the last 40 %)."""
    clock = with_clock(monkeypatch)
    app = one_gpu_app(tmp_path)
    workers = [97.0, 92.0, 88.0, 61.0]

    async def scenario():
        async with app.run_test(size=SIZE) as pilot:
            await started(app, pilot)
            app.state.apply(app.state.run.ticket, [host_with(app, 99.0, cores=[0.0] + IDLE_CORES[1:], main_cpu=100.0, workers=workers)])
            await shown(pilot)  # drawn now: core 0 at 0 %, worker 4253 at 61 %
            cpu = app.dashboard.query_one(CpuPanel)
            seen = {}
            for second, (load, main_cpu, worker) in enumerate([(80.0, 150.0, 90.0), (40.0, 170.0, 10.0), (80.0, 190.0, 90.0), (40.0, 210.0, 10.0)], 1):
                clock.now += base_widgets.LIVE_REDRAW_S / 2  # from the start of a step of both clocks (1000 s)
                sample_now = host_with(app, 99.0 + second, cores=[load] + IDLE_CORES[1:], main_cpu=main_cpu, workers=workers[:3] + [worker])
                app.state.apply(app.state.run.ticket, [sample_now])
                app.refresh_dashboard()
                await pilot.pause()
                seen[second] = str(cpu.render())
            assert "150%" not in seen[1] and "170%" in seen[2], "a step on: the main process's CPU is new"
            assert core_figure(seen[2], 0) == 0 and worker_lines(seen[2])[-1][2] == "61%", "... the bars and the workers' as drawn"
            assert "210%" in seen[4], "two steps on: the main process's CPU"
            assert core_figure(seen[4], 0) == 60 and worker_lines(seen[4])[-1][2] == "50%", "... and the means since they were drawn"

    run_async(scenario())


def test_workers_jittering_within_a_step_are_not_redrawn_while_main_is(tmp_path):
    """Four workers moving by up to 8 points and 1 % of their memory at every sample:
    their lines are not rewritten; the main process's is, at each new figure.  One
    becoming the busiest is rewritten in its place."""
    app = one_gpu_app(tmp_path)
    workers, memory = [97.0, 75.0, 70.0, 30.0], [410, 420, 430, 440]

    async def scenario():
        recorder = Recorder(app, *SIZE)
        async with app.run_test(size=SIZE) as pilot:
            await started(app, pilot)
            app.state.apply(app.state.run.ticket, [host_with(app, 99.0, main_cpu=100.0, workers=workers, worker_mib=memory)])
            await shown(pilot)
            cpu = app.dashboard.query_one(CpuPanel)
            content = cpu.content_region
            lines = str(cpu.render()).splitlines()
            first_worker = content.y + next(i for i, line in enumerate(lines) if line.split()[1:2] == ["worker"])
            main_row, rows = first_worker - 1, content._replace(y=first_worker, height=len(workers))
            recorder.take()
            written = set()
            for i in range(6):
                wander = [max(0.0, cpu_ + (8.0 if (i + k) % 2 else -7.0)) for k, cpu_ in enumerate(workers)]
                wander[0] = 100.0 if i % 2 else 93.0  # pegged: red all along
                mib = [m + (4 if (i + k) % 2 else -4) for k, m in enumerate(memory)]
                app.state.apply(app.state.run.ticket, [host_with(app, 100.0 + i, main_cpu=100.0 + 10 * i, workers=wander, worker_mib=mib)])
                app.refresh_dashboard(force=True)
                await pilot.pause()
                written |= written_cells("".join(d for _, d in recorder.take()))
            assert not in_region(written, rows), f"{len(in_region(written, rows))} cells of the workers' lines rewritten"
            assert main_row in {y for x, y in written if content.contains(x, y)}, "the main process's line follows its CPU"
            assert "150%" in str(cpu.render())

            busiest_now = [97.0, 75.0, 70.0, 100.0]  # the last worker busier than all: it keeps its line
            app.state.apply(app.state.run.ticket, [host_with(app, 110.0, main_cpu=150.0, workers=busiest_now, worker_mib=memory)])
            app.refresh_dashboard(force=True)
            await pilot.pause()
            changed = in_region(written_cells("".join(d for _, d in recorder.take())), rows)
            assert {y for _, y in changed} == {rows.bottom - 1}, "the last worker's line, alone"
            assert_same(recorder.term, composed(app, recorder.console), "after the samples")

    run_async(scenario())


def with_workers(app, t: float, cpus: list[float]):
    """A sample of the fixed host with as many workers as ``cpus``: worker i has pid
    5000 + i and 400 + i MiB (the panel is too narrow at 140x40 for pids)."""
    event = sample(app, t)
    host = event.sample.host
    main = [p for p in host.processes if p.role == "main"]
    workers = [
        ProcessSample(pid=5000 + i, ppid=4242, name="pt_data_worker", role="worker", cpu_percent=cpu, rss=(400 + i) * 1024 * 1024) for i, cpu in enumerate(cpus)
    ]
    return dataclasses.replace(event, sample=dataclasses.replace(event.sample, host=dataclasses.replace(host, processes=main + workers)))


def listed_workers(cpu: CpuPanel) -> list[int]:
    """The workers listed, in order, by their number (see with_workers)."""
    return [int(words[3].rstrip("M")) - 400 for words in worker_lines(str(cpu.render()))]


def workers_cells(cpu: CpuPanel) -> str:
    """The cells of the workers' line (``├ 20 workers 8.0G ▅▅▆…``), to the width it has."""
    line = next(line for line in str(cpu.render()).splitlines() if " workers " in line and line.startswith("├"))
    return line.split()[4].rstrip("…")


def test_workers_that_all_fit_keep_their_lines_and_many_share_one_line_a_cell_each(tmp_path):
    """Four workers trading places by CPU stay on their lines (the order they started
    in).  Twenty, more than WORKER_LINES: one line, a cell a worker in the order they
    started, moving only by a step: jitter within 10 points leaves it as it was, and a
    worker falling idle shows in its own cell alone."""
    app = one_gpu_app(tmp_path)
    many = [30.0 + 3 * i for i in range(20)]  # the later a worker started, the busier

    async def scenario():
        async with app.run_test(size=SIZE) as pilot:
            await started(app, pilot)
            cpu = app.dashboard.query_one(CpuPanel)
            for t, cpus in ((100.0, [97.0, 92.0, 88.0, 61.0]), (101.0, [20.0, 40.0, 99.0, 70.0])):
                app.state.apply(app.state.run.ticket, [with_workers(app, t, cpus)])
                await shown(pilot)
                assert listed_workers(cpu) == [0, 1, 2, 3], f"at {t}"

            app.state.apply(app.state.run.ticket, [with_workers(app, 102.0, many)])
            await shown(pilot)
            assert listed_workers(cpu) == [], "no line a worker"
            cells = workers_cells(cpu)
            assert len(cells) >= 12 and list(cells) == sorted(cells), cells  # in the order they started: the busiest last
            jitter = [c + (6.0 if i % 2 else -3.0) for i, c in enumerate(many)]
            app.state.apply(app.state.run.ticket, [with_workers(app, 103.0, jitter)])
            await shown(pilot)
            assert workers_cells(cpu) == cells, "within 10 points: as they were"
            fallen = list(many)
            last = len(cells) - 1
            fallen[last] = 5.0
            app.state.apply(app.state.run.ticket, [with_workers(app, 104.0, fallen)])
            await shown(pilot)
            now = workers_cells(cpu)
            assert now[:last] == cells[:last] and now[last] < cells[last], f"worker {last} fell idle: {cells} -> {now}"

    run_async(scenario())


def test_a_bar_s_full_cells_are_spaces_on_its_colour_and_blocks_under_no_color(tmp_path):
    """A full block is three bytes, a space one: a plot 13 rows high sent a block a row
    for each new column.  The cell looks the same.  Under NO_COLOR, where Textual may
    drop colours, the bars keep their blocks."""
    app = one_gpu_app(tmp_path)

    async def scenario():
        recorder = Recorder(app, *SIZE)
        async with app.run_test(size=SIZE) as pilot:
            await started(app, pilot)
            chart = app.dashboard.query_one(ThroughputChart)
            app.state.apply(app.state.run.ticket, [reading(5.0 + i, 2750.0) for i in range(20)])
            app.refresh_dashboard(force=True)
            await pilot.pause()
            plot = plot_region(chart)
            bottom = chart._lines[plot.y - chart.content_region.y + plot.height - 2]  # the plot's last row
            colours = {chart.style_of(role).color for role in ("chart--bar", "chart--warmup")}
            cells = [(bottom.plain[x], bottom.get_style_at_offset(app.console, x)) for x in range(GUTTER, GUTTER + 20)]
            assert all(char == " " and style.bgcolor in colours for char, style in cells), cells
            recorder.take()
            assert_same(recorder.term, composed(app, recorder.console), "the bars")

            app.no_color = True
            chart.invalidate()
            app.refresh_dashboard(force=True)
            await pilot.pause()
            bottom = chart._lines[plot.y - chart.content_region.y + plot.height - 2]
            assert bottom.plain[GUTTER : GUTTER + 20] == "█" * 20, bottom.plain

    run_async(scenario())


COMPACT = (80, 24)  # the CPU panel in two lines: the machine and a cell a core, then the run


def compact_cells(cpu: CpuPanel) -> tuple[str, str]:
    """The cores' strip (``CPU  70% ▃█▅▇ mem …``) and the workers' cells (``│ 20 workers ▅▅▆…``) of a narrow panel."""
    machine, run = str(cpu.render()).splitlines()[:2]
    return machine.split("%", 1)[1].split(" mem")[0].strip(), run.split(" workers ", 1)[1].rstrip("…")


def test_cells_of_a_narrow_panel_move_by_two_of_their_heights_or_into_another_colour(tmp_path):
    """At 80x24 a core and each of many workers are a cell of eight heights.  A busy
    core's mean wandering by 12 points moved its cell by a height at most redraws (a
    cursor move and a colour for each); within two heights and its colour it stays,
    and one moving 30 points, or into another colour, moves alone."""
    app = one_gpu_app(tmp_path)
    cores = [20.0, 75.0, 30.0, 70.0] + IDLE_CORES[4:]  # green and yellow, 12 points from their colours' lines
    workers = [20.0 if i % 2 else 75.0 for i in range(20)]

    def at(t: float, core_loads: list[float], worker_loads: list[float]):
        event = with_workers(app, t, worker_loads)
        host = dataclasses.replace(event.sample.host, per_core=core_loads)
        return dataclasses.replace(event, sample=dataclasses.replace(event.sample, host=host))

    async def scenario():
        async with app.run_test(size=COMPACT) as pilot:
            await started(app, pilot)
            cpu = app.dashboard.query_one(CpuPanel)
            app.state.apply(app.state.run.ticket, [at(100.0, cores, workers)])
            await shown(pilot)
            strip, cells = compact_cells(cpu)
            assert len(strip) >= 4 and len(cells) >= 12, (strip, cells)
            for i in range(6):
                sign = 1 if i % 2 else -1
                app.state.apply(app.state.run.ticket, [at(101.0 + i, [c + sign * 12.0 for c in cores], [w - sign * 12.0 for w in workers])])
                await shown(pilot)
                assert compact_cells(cpu) == (strip, cells), f"sample {i}: moved within two heights and their colours"
            moved_cores, moved_workers = list(cores), list(workers)
            moved_cores[0], moved_workers[2] = 50.0, 40.0  # 30 points up; 35 down, into green
            app.state.apply(app.state.run.ticket, [at(110.0, moved_cores, moved_workers)])
            await shown(pilot)
            now_strip, now_cells = compact_cells(cpu)
            assert now_strip[0] > strip[0] and now_strip[1:] == strip[1:], (strip, now_strip)
            assert now_cells[2] < cells[2] and now_cells[:2] + now_cells[3:] == cells[:2] + cells[3:], (cells, now_cells)

    run_async(scenario())


def load_tui_cost():
    """benchmarks/tui_cost.py, which is no package's module."""
    spec = importlib.util.spec_from_file_location("tui_cost", REPO / "benchmarks" / "tui_cost.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_breakdown_names_frames_that_redraw_the_whole_plot_and_the_bytes_without_them():
    """A window 50-80 s into a run held the plot's change to a two-minute span at 80x24 (a
    644-byte frame, 21 B/s of 30 s) that a window from 65 s did not: the breakdown says
    which frames redrew the plot and what the window cost without them."""
    import types

    tui_cost = load_tui_cost()
    cols, rows = 80, 24
    chart = ["ThroughputChart#throughput", 24, 2, 56, 8]  # label, x, y, width, height
    new_column = "".join(f"\x1b[{y + 1};61H\x1b[48;5;75m " for y in range(4, 10))
    whole_plot = "".join(f"\x1b[{y + 1};56H\x1b[48;5;16m" + " " * 25 for y in range(4, 10))  # a longer span clears the right half
    frames = [(1.0, new_column), (5.0, whole_plot), (9.0, "\x1b[1;79H7")]  # a column, the plot, the clock
    stream, reads = bytearray(), []
    for t, data in frames:
        reads.append((t, len(stream), len(data)))
        stream += data.encode()
    term = tui_cost.Terminal(cols, rows)
    term.counting = True
    term.feed(bytes(stream))
    session = types.SimpleNamespace(window_t=(0.0, 10.0), window=(0, len(stream)), term=term, reads=reads, stream=stream, cols=cols, rows=rows)
    layouts = [{"t": 0.0, "screen": "DashboardScreen", "key": 1, "current": True, "widgets": [chart, ["RunStatus#run-status", 50, 0, 30, 1]]}]
    result = tui_cost.breakdown(session, layouts)
    assert [r["at_s"] for r in result["plot_rewrites"]] == [5.0]
    rewrite = result["plot_rewrites"][0]["bytes"]
    assert rewrite == len(whole_plot.encode())
    assert result["bytes_per_s_without_plot_rewrites"] == round((len(stream) - rewrite) / 10.0, 1)


def test_the_cost_table_shows_nvitop_s_cpu_beside_gputui_s_and_its_target():
    """The H200 table of the running state lacked nvitop's CPU: the comparison the issue
    asks for (gputui's CPU no more than nvitop's) could not be read off it."""
    tui_cost = load_tui_cost()
    result = {
        "name": "running-140x40",
        "state": "running",
        "size": "140x40",
        "bytes_per_s": 200.0,
        "cpu_percent_of_one_core": 2.5,
        "nvitop": {"bytes_per_s": 440.0, "cpu_percent_of_one_core": 2.0},
    }
    limit, rule = tui_cost.target_of(result)
    result["bytes_target"] = {"bytes_per_s": limit, "rule": rule, "met": result["bytes_per_s"] <= limit}
    result["cpu_target"] = tui_cost.cpu_target_of(result)
    head, _, row = tui_cost.table([result]).splitlines()
    cells = dict(zip([c.strip() for c in head.split("|")], [c.strip() for c in row.split("|")]))
    assert cells["nvitop CPU %"] == "2.0" and cells["gputui CPU %"] == "2.5"
    assert cells["met"] == "NO (CPU)", "bytes met, CPU above nvitop's"
    argv = tui_cost.nvitop_argv(1.0)  # None where nvitop is not installed
    assert argv is None or argv[-4:] == ["-m", "full", "--interval", "1"], "nvitop as the issue measured it"


def test_a_redraw_makes_only_the_lines_that_changed_and_they_keep_their_place_for_the_mouse(tmp_path, monkeypatch):
    """Textual turns a panel's whole text into cells whenever any of it changed (over
    half of a running dashboard's CPU on the H200); the panels make only the lines that
    changed, each carrying its own row for selecting text with the mouse, and the
    terminal still shows exactly the composed screen."""
    app = one_gpu_app(tmp_path)
    made: list[str] = []
    line_strip = StateView._line_strip

    def counting(view, *args, **kwargs):
        made.append(type(view).__name__)  # a line made
        return line_strip(view, *args, **kwargs)

    async def scenario():
        recorder = Recorder(app, *SIZE)
        async with app.run_test(size=SIZE) as pilot:
            await started(app, pilot)
            cpu = app.dashboard.query_one(CpuPanel)
            lines = len(str(cpu.render()).splitlines())
            monkeypatch.setattr(StateView, "_line_strip", counting)
            made.clear()
            before = base_widgets.cells_of(cpu.render())
            cores = list(IDLE_CORES)
            cores[3] = 80.0  # one core's bar moves: one line of the CPU panel
            app.state.apply(app.state.run.ticket, [sample(app, 200.0, cores=cores)])
            app.refresh_dashboard(force=True)
            await shown(pilot)
            after = base_widgets.cells_of(cpu.render())
            changed = sum(1 for old, new in zip(before, after) if old != new)
            assert 0 < changed < lines // 2
            assert made.count("CpuPanel") == changed, f"{made.count('CpuPanel')} of the CPU panel's {lines} lines made again, {changed} changed"
            assert_same(recorder.term, composed(app, recorder.console), "after one core moved")
            for y in (0, 3, lines - 1):
                offsets = {style.meta.get("offset", (0, -1))[1] for _, style, _ in cpu.render_line(y) if style and style.meta}
                assert offsets == {y}, f"line {y} says it is at rows {offsets}"

    run_async(scenario())


def test_the_chart_cpu_and_gpu_panels_hand_over_their_lines_without_joining_and_splitting_them(tmp_path, monkeypatch):
    """They make their lines one by one: joining them into one text for the panel and
    splitting it again cost the chart 0.6 ms a redraw on this repo's VM (StateView.build_lines)."""
    from rich.text import Text

    app = one_gpu_app(tmp_path)
    split, sync = Text.split, StateView.sync
    splits: list[str] = []
    syncing: list[StateView] = []

    def counting(text, *args, **kwargs):
        if syncing and isinstance(syncing[-1], (ThroughputChart, CpuPanel, GpuPanel)):
            splits.append(f"{type(syncing[-1]).__name__}: {text.plain[:30]}")
        return split(text, *args, **kwargs)

    drawn: set[str] = set()

    def watched_sync(view, *args, **kwargs):
        syncing.append(view)
        cells = view._cells
        try:
            return sync(view, *args, **kwargs)
        finally:
            syncing.pop()
            if view._cells is not cells:
                drawn.add(type(view).__name__)

    async def scenario():
        async with app.run_test(size=SIZE) as pilot:
            await started(app, pilot)
            panels = [app.dashboard.query_one(kind) for kind in (ThroughputChart, CpuPanel, GpuPanel)]
            monkeypatch.setattr(Text, "split", counting)
            monkeypatch.setattr(StateView, "sync", watched_sync)
            for panel in panels:
                lines = panel.build_lines()
                assert len(lines) > 3 and all("\n" not in line.plain for line in lines), type(panel).__name__
            app.state.apply(app.state.run.ticket, [sample(app, 200.0, power_w=420.0, cores=[90.0] * 16)])
            app.refresh_dashboard(force=True)
            await shown(pilot)
            assert {type(view).__name__ for view in panels} <= drawn, drawn
            assert splits == [], splits

    run_async(scenario())


def test_the_live_panels_step_at_their_pace_and_a_run_starting_or_ending_is_drawn_at_once(tmp_path, monkeypatch):
    """A sample a second is drawn a step of LIVE_REDRAW_S apart: at 140x40 a redraw each
    second was more bytes than nvitop's.  A milestone (a run starting
    or ending) does not wait for the step."""
    app = one_gpu_app(tmp_path)
    clock = [1000.0]
    monkeypatch.setattr(base_widgets, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))  # the panels' clock alone

    async def scenario():
        recorder = Recorder(app, *SIZE)
        async with app.run_test(size=SIZE) as pilot:
            await started(app, pilot)
            recorder.take()
            clock[0] += 0.5
            app.state.apply(app.state.run.ticket, [sample(app, 300.0, power_w=437.0)])
            app.refresh_dashboard()
            await pilot.pause()
            assert not "".join(d for _, d in recorder.take()), "drawn half a second after the last redraw"
            assert "437" not in "\n".join(recorder.term.lines())

            clock[0] += base_widgets.LIVE_REDRAW_S
            app.refresh_dashboard()
            await pilot.pause()
            assert recorder.take() and "437" in "\n".join(recorder.term.lines()), "the new power, once the step has passed"

            clock[0] += 0.5
            app.state.apply(app.state.run.ticket, [sample(app, 301.0, power_w=383.0)])
            monkeypatch.setattr(app, "milestone", lambda: ("a run ended",))
            app.refresh_dashboard()
            await pilot.pause()
            assert recorder.take() and "383" in "\n".join(recorder.term.lines()), "a milestone draws the panels at once"
            assert_same(recorder.term, composed(app, recorder.console), "after the milestone")

    run_async(scenario())


def test_news_of_a_run_starting_or_ending_redraws_at_once_and_other_news_waits_for_the_tick(tmp_path, monkeypatch):
    """The redraw timer ticks once a second; news that changes a milestone (a run
    starting or ending, its recording saved) redraws as it is applied."""
    app = one_gpu_app(tmp_path)

    async def scenario():
        async with app.run_test(size=SIZE) as pilot:
            await started(app, pilot)
            redraws: list[bool] = []
            monkeypatch.setattr(app, "refresh_dashboard", lambda force=False: redraws.append(force))
            app.state.apply(app.state.run.ticket, [sample(app, 500.0)])
            app.news_arrived()
            assert redraws == [], "a sample waits for the tick"
            monkeypatch.setattr(app, "milestone", lambda: ("run #2 started",))
            app.news_arrived()
            assert redraws == [False], "a milestone is drawn now"

    run_async(scenario())


def test_panels_of_one_pace_step_together_whenever_each_last_drew(tmp_path, monkeypatch):
    """Each panel kept a clock of its own against the app's one-second tick, and stepped
    after two seconds or three as the tick's jitter fell: the clock, the GPU panel and
    the chart went out in frames of their own (27 frames in 40 s at 80x24 on the H200,
    for panels stepping 16 times each).  On one clock, a panel drawn out of step (here
    the GPU panel, a tick after the others) steps with them at the next step, and all
    step two ticks and three in turn."""
    clock = with_clock(monkeypatch)
    app = one_gpu_app(tmp_path)

    async def scenario():
        async with app.run_test(size=SIZE) as pilot:
            await started(app, pilot)
            dashboard = app.dashboard
            views = [dashboard.query_one(RunStatus), dashboard.query_one(GpuPanel), dashboard.query_one(CpuPanel), dashboard.query_one(ThroughputChart)]
            drawn: dict[object, list[float]] = {view: [] for view in views}
            for view in views:

                def counted(view=view, original=view.build_lines):
                    drawn[view].append(clock.now)
                    return original()

                view.build_lines = counted
            app.refresh_dashboard(force=True)  # at 1000 s: a step of 2.5 s begins
            clock.now += 1.0
            dashboard.query_one(GpuPanel).sync(force=True)  # out of step
            for second in range(2, 12):
                clock.now = 1000.0 + second
                app.state.apply(app.state.run.ticket, [sample(app, 100.0 + second), reading(100.0 + second, 2750.0 + second)])
                app.refresh_dashboard()
                await pilot.pause()
            steps = {type(view).__name__: [t - 1000.0 for t in drawn[view] if t >= 1002.0] for view in views}
            assert all(ticks == [3.0, 5.0, 8.0, 10.0] for ticks in steps.values()), steps

    run_async(scenario())


def test_a_forced_redraw_draws_the_sparklines_as_they_are_now(tmp_path, monkeypatch):
    """Sparklines step every SPARK_EVERY_S, slower than the panel's figures; a forced
    redraw (a run starting or ending, a test's snapshot) shows them as they are now,
    even when no sample came since the panel last drew (they were stale in snapshots
    taken on a busy machine)."""
    app = one_gpu_app(tmp_path)
    clock = with_clock(monkeypatch)
    monkeypatch.setattr(gpu_panel_widgets, "time", types.SimpleNamespace(monotonic=clock.monotonic))
    clock.now = 200 * gpu_panel_widgets.SPARK_EVERY_S  # a sparklines' step begins: the two samples below fall in it

    async def scenario():
        async with app.run_test(size=SIZE) as pilot:
            await started(app, pilot)
            panel = app.dashboard.query_one(GpuPanel)
            for i, util in enumerate((95.0, 3.0)):  # SM active: the sparkline of a GPU with GPM
                clock.now += base_widgets.LIVE_REDRAW_S
                news = sample(app, 300.0 + i)
                news.sample.gpus[0] = dataclasses.replace(news.sample.gpus[0], util_gpu=util, sm_active=util)
                app.state.apply(app.state.run.ticket, [news])
                app.refresh_dashboard()
                await pilot.pause()
            drawn = str(panel.render())
            assert "SM   3%" in drawn  # the figures are drawn every step ...
            panel._sparks_step = None
            now = str(panel.build())
            assert drawn != now  # ... the sparklines only every SPARK_EVERY_S
            app.refresh_dashboard(force=True)
            await pilot.pause()
            assert str(panel.render()) == now

    run_async(scenario())


def test_a_noisy_sparkline_keeps_its_cells_in_place_and_pages_back_half_its_width_when_full(tmp_path, monkeypatch):
    """SM activity flickering between 95 % and 3 % at every sample: each sparkline step
    adds the step's samples at the line's end and leaves the cells drawn before where
    they were (scrolled a cell per sample, such a line changed nearly every cell at each
    step: the largest part of the bytes at 140x40 on the H200).  A full line moves back
    by half its width, its newer half kept."""
    app = one_gpu_app(tmp_path)
    clock = with_clock(monkeypatch)
    monkeypatch.setattr(gpu_panel_widgets, "time", types.SimpleNamespace(monotonic=clock.monotonic))

    async def scenario():
        async with app.run_test(size=SIZE) as pilot:
            await started(app, pilot)
            panel = app.dashboard.query_one(GpuPanel)
            room = panel.content_size.width - panel._spark_at
            drawn = [util_sparkline(panel)]
            i = 0
            while panel.history.samples < room + room // 2:  # a full line and half of another: one page
                i += 1
                clock.now += 1.0
                news = sample(app, 300.0 + i)
                util = 95.0 if i % 2 else 3.0
                news.sample.gpus[0] = dataclasses.replace(news.sample.gpus[0], util_gpu=util, sm_active=util)
                app.state.apply(app.state.run.ticket, [news])
                app.refresh_dashboard()
                await pilot.pause()
                if util_sparkline(panel) != drawn[-1]:
                    drawn.append(util_sparkline(panel))
            grew = paged = 0
            for before, after in zip(drawn, drawn[1:]):
                assert len(after) <= room
                if after.startswith(before):
                    grew += 1
                else:
                    assert after.startswith(before[room // 2 :]), f"{before!r} -> {after!r}"
                    paged += 1
            assert paged == 1 and grew > 10 and len(set(drawn[-1])) == 2

    run_async(scenario())


def util_sparkline(panel: GpuPanel) -> str:
    """The cells of a GPU panel's utilization sparkline, as drawn."""
    row = next(line for line in str(panel.render()).splitlines() if line.startswith("util"))
    return row[panel._spark_at :].rstrip()


def test_the_machine_s_cpu_and_the_run_s_total_move_by_a_step_not_at_every_redraw(tmp_path, monkeypatch):
    """At 80x24 the CPU panel is two lines, and the machine's CPU % and the run's total
    were new at every redraw (a third of the panel's bytes on the H200).  They show their
    mean since they were drawn, moved on once it left what is shown by a step; the main
    process's own figure stays live."""
    clock = with_clock(monkeypatch)
    app = one_gpu_app(tmp_path)

    def with_load(t: float, machine: float, main_cpu: float):
        event = host_with(app, t, main_cpu=main_cpu)
        host = dataclasses.replace(event.sample.host, cpu_percent=machine)
        return dataclasses.replace(event, sample=dataclasses.replace(event.sample, host=host))

    def figures(text: str) -> tuple[str, str, str]:
        machine = re.search(r"CPU +(\d+)%", text)
        total = re.search(r"run (\d+)%", text)
        main = re.search(r"main (\d+)%", text)
        assert machine and total and main, text
        return machine.group(1), total.group(1), main.group(1)

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await started(app, pilot)
            app.state.apply(app.state.run.ticket, [with_load(99.0, 40.0, 100.0)])
            app.refresh_dashboard(force=True)
            await pilot.pause()
            cpu = app.dashboard.query_one(CpuPanel)
            machine, total, _ = figures(str(cpu.render()))
            seen = []
            for second in range(1, 9):  # the machine within 6 points, main within 3: the total within its step
                clock.now += 1.0  # steps of 2.5 s from 1000 s: redrawn at 3, 5 and 8 s
                app.state.apply(app.state.run.ticket, [with_load(99.0 + second, 40.0 + (6.0 if second % 2 else -4.0), 100.0 + (3.0 if second % 2 else 0.0))])
                app.refresh_dashboard()
                await pilot.pause()
                seen.append(figures(str(cpu.render())))
            assert {(m, t) for m, t, _ in seen} == {(machine, total)}, f"moved within a step: {seen}"
            assert {main for _, _, main in seen} == {"100", "103"}, "the main process follows each redraw"
            for second in range(9, 17):  # the machine settles 30 points up: shown at the second step of 5 s after
                clock.now += 1.0
                app.state.apply(app.state.run.ticket, [with_load(99.0 + second, 70.0, 100.0)])
                app.refresh_dashboard()
                await pilot.pause()
            assert figures(str(cpu.render()))[0] == "70"

    run_async(scenario())


def test_the_next_run_s_total_is_its_own_not_the_last_run_s_figure(tmp_path, monkeypatch):
    """The run's total is steady per run (by its root's pid): a new run within a step of
    the last one's figure shows its own total, not the figure kept from before."""
    clock = with_clock(monkeypatch)
    app = one_gpu_app(tmp_path)

    def with_root(event, pid: int):
        host = event.sample.host
        processes = [dataclasses.replace(p, pid=pid) if p.role == "main" else dataclasses.replace(p, ppid=pid) for p in host.processes]
        return dataclasses.replace(event, sample=dataclasses.replace(event.sample, host=dataclasses.replace(host, processes=processes)))

    def total(text: str) -> str:
        match = re.search(r"run (\d+)%", text)
        assert match, text
        return match.group(1)

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await started(app, pilot)
            cpu = app.dashboard.query_one(CpuPanel)
            for second in range(6):  # the first run, its total steady at main 100 % and its workers
                clock.now += 1.0
                app.state.apply(app.state.run.ticket, [host_with(app, 99.0 + second, main_cpu=100.0)])
                app.refresh_dashboard(force=second == 0)
                await pilot.pause()
            first = total(str(cpu.render()))
            clock.now += 1.0
            news = with_root(host_with(app, 110.0, main_cpu=105.0), 9999)
            live = round(sum(p.cpu_percent or 0 for p in news.sample.host.processes))
            assert live != int(first) and abs(live - int(first)) < 10, "the new run is within a step of the last one"
            app.state.apply(app.state.run.ticket, [news])
            app.refresh_dashboard(force=True)
            await pilot.pause()
            assert total(str(cpu.render())) == str(live), f"the new run's own total, not the last run's {first}"

    run_async(scenario())


def run_memory(text: str) -> str:
    """The run's memory on its head line: ``run 150% 2.1G ...``."""
    match = re.search(r"(?m)^run \d+% (\S+)", text)
    assert match, f"no run line in:\n{text}"
    return match.group(1)


@pytest.mark.parametrize("size", [SIZE, (80, 24)])
def test_the_run_s_memory_is_the_sum_its_lines_show_and_moves_with_them(tmp_path, size):
    """Workers' memory wandering within RSS_STEP keeps each line's figure, and the run's
    total with them (the sum of a dozen raw figures changed at every redraw, at 80x24
    too); one worker growing past the step moves its line and the total."""
    app = one_gpu_app(tmp_path)
    workers, memory = [97.0, 75.0, 70.0, 30.0], [1010, 1020, 1030, 1040]

    async def scenario():
        async with app.run_test(size=size) as pilot:
            await started(app, pilot)
            app.state.apply(app.state.run.ticket, [host_with(app, 99.0, main_cpu=100.0, workers=workers, worker_mib=memory)])
            await shown(pilot)
            cpu = app.dashboard.query_one(CpuPanel)
            first = run_memory(str(cpu.render()))
            for i in range(6):
                mib = [m + (19 if i % 2 else -19) for m in memory]  # all up, then all down: under 2 % each
                app.state.apply(app.state.run.ticket, [host_with(app, 100.0 + i, main_cpu=100.0, workers=workers, worker_mib=mib)])
                app.refresh_dashboard(force=True)
                await pilot.pause()
                assert run_memory(str(cpu.render())) == first, f"sample {i}: the total moved while no line did"
            grown = memory[:3] + [memory[3] + 400]  # one worker 38 % bigger
            app.state.apply(app.state.run.ticket, [host_with(app, 110.0, main_cpu=100.0, workers=workers, worker_mib=grown)])
            app.refresh_dashboard(force=True)
            await pilot.pause()
            assert run_memory(str(cpu.render())) != first, "a line that moved moves the total"

    run_async(scenario())
