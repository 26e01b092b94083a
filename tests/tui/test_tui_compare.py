"""Issue 25, item 10: the dashboard's comparison (c on two runs of the Runs list).

Its columns are headed as the Runs list names the runs, its cells never wrap (long
ones are cut, and read whole below the table), and the "Marked for comparison"
notice does not stay over it."""

from __future__ import annotations

import pytest
from textual.app import App
from textual.widget import Widget

from gputui.tui.screens.compare_screen import CompareScreen
from gputui.tui.screens.dashboard_screen import DashboardScreen
from gputui.tui.screens.summary_screen import SummaryScreen
from gputui.tui.screenshot import screen_text
from tests.support.dashboard import dashboard_with_history
from tests.support.tui import run_async, shown, wait_until

LONG_MACHINE = "vm; Intel(R) Xeon(R) Processor, 16 cores; 125.9 GiB RAM"  # docs/recordings/torch-resnet50.jsonl's


async def run_and_stop(app, pilot, number: int) -> None:
    """Run #number of the demo preset, stop it, and close its summary."""
    app.start_preset("resnet50-demo")
    await wait_until(pilot, lambda: app.state.live_run is not None and app.state.live_run.number == number, what=f"run #{number}")
    app.supervisor.stop_run()
    await wait_until(pilot, lambda: isinstance(app.screen, SummaryScreen), what=f"run #{number}'s summary")
    await pilot.press("escape")
    await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen), what="back on the dashboard")


async def compare_first_two(app, pilot) -> CompareScreen:
    """c on the Runs list's first two entries; the comparison once it is up."""
    await pilot.press("tab", "c", "down", "c")
    return await wait_until(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen, what="the comparison")


def lines_of(app, widget: Widget) -> list[str]:
    """A widget's lines as the terminal shows them."""
    region = widget.region
    return [line[region.x : region.right] for line in screen_text(app).splitlines()[region.y : region.bottom]]


def test_the_comparison_heads_its_columns_as_the_runs_list_names_the_runs(tmp_path):
    app = dashboard_with_history(tmp_path)

    async def scenario():
        async with app.run_test(size=(140, 40)) as pilot:
            await wait_until(pilot, lambda: len(app.state.history) == 2, what="history listed")
            await run_and_stop(app, pilot, 1)
            await run_and_stop(app, pilot, 2)
            await wait_until(pilot, lambda: all(run.kept_path for run in app.state.runs), what="both runs kept")
            screen = await compare_first_two(app, pilot)  # the Runs list: #2, then #1 (newest first)
            await shown(pilot)
            heads = lines_of(app, screen.query_one("#compare-table"))[0].split()
            assert heads == ["#2", "resnet50-demo", "#1", "resnet50-demo"], heads

    run_async(scenario())


def test_a_kept_run_is_headed_by_its_start_time_and_preset_as_the_runs_list_shows_it(tmp_path):
    app = dashboard_with_history(tmp_path)

    async def scenario():
        async with app.run_test(size=(140, 40)) as pilot:
            await wait_until(pilot, lambda: len(app.state.history) == 2, what="history listed")
            screen = await compare_first_two(app, pilot)
            await shown(pilot)
            heads = " ".join(lines_of(app, screen.query_one("#compare-table"))[0].split())
            newer, older = app.state.history
            # grouped by preset, as gputui compare does: the input-bound run's column stays second
            assert heads == f"{newer.local_time()[5:]} torch-resnet50 {older.local_time()[5:]} torch-resnet50-input-bound", heads

    run_async(scenario())


@pytest.mark.parametrize("size", [(80, 24), (140, 40)])
def test_no_comparison_cell_wraps_and_a_cut_one_reads_whole_below_the_table(tmp_path, size):
    app = dashboard_with_history(tmp_path)

    async def scenario():
        async with app.run_test(size=size) as pilot:
            await wait_until(pilot, lambda: len(app.state.history) == 2, what="history listed")
            screen = await compare_first_two(app, pilot)
            await shown(pilot)
            table = screen.query_one("#compare-table")
            lines = lines_of(app, table)
            assert table.region.right <= size[0], "the table fits the terminal"
            # one line per row: a wrapped cell would leave a line with no row name
            assert len([line for line in lines if line.strip()]) == len(screen.rows) + 1, "\n".join(lines)
            for line, row in zip(lines[1:], screen.rows):
                assert line[1:].startswith(row[0]), (line, row[0])
            machine = next(line for line in lines if line[1:].startswith("machine"))
            assert "…" in machine and LONG_MACHINE not in machine  # cut, not wrapped
            # the cursor starts on the first run's machine (torch-resnet50.jsonl's): read whole below
            detail = " ".join(line.strip() for line in lines_of(app, screen.query_one("#compare-detail")))
            assert LONG_MACHINE in detail, detail

    run_async(scenario())


def test_the_marked_for_comparison_notice_is_not_shown_over_the_comparison(tmp_path):
    app = dashboard_with_history(tmp_path)

    async def scenario():
        async with app.run_test(size=(80, 24), notifications=True) as pilot:  # toasts drawn, as in a terminal
            await wait_until(pilot, lambda: len(app.state.history) == 2, what="history listed")
            await pilot.press("tab", "c")
            await wait_until(pilot, lambda: "Marked for comparison" in screen_text(app), what="the notice shown")
            await pilot.press("down", "c")
            await wait_until(pilot, lambda: isinstance(app.screen, CompareScreen), what="the comparison")
            assert "Marked for comparison" not in await shown(pilot)

    run_async(scenario())


class CompareOnly(App):
    """The comparison on its own: more runs than the dashboard compares (it marks two)."""

    def __init__(self, header: list[str], rows: list[list[str]]) -> None:
        super().__init__()
        self.header, self.rows = header, rows

    def on_mount(self) -> None:
        self.push_screen(CompareScreen(self.header, self.rows, self.header[1:]))


def test_a_comparison_too_wide_for_the_terminal_scrolls_sideways_keeping_the_row_names():
    header = ["", *[f"#{n} resnet50-demo" for n in range(1, 7)]]
    rows = [["machine", *[LONG_MACHINE] * 6], ["throughput (samples/s)", *[f"{n},000" for n in range(1, 7)]]]
    app = CompareOnly(header, rows)

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            table = await wait_until(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.query_one("#compare-table"), what="the comparison")
            await pilot.pause()
            assert "#6 resnet50-demo" not in lines_of(app, table)[0]
            await pilot.press(*["right"] * 6)
            await pilot.pause(0.3)
            lines = lines_of(app, table)
            assert "#6 resnet50-demo" in lines[0] and "6,000" in lines[2]
            assert lines[1][1:].startswith("machine") and lines[2][1:].startswith("throughput")

    run_async(scenario())
