"""A new user's first hour, what fits, at 80x24 and 140x40: the throughput chart spans a
finished run and scales to its data (a 4 s run filled 4 columns, data around 2.7k ran
to 5.0k); the x dialog's intro, help's descriptions, the Runs rows and long preset
names show whole, each where it belongs (they were cut mid-sentence, wrapped back to
column 0, lost their day or figure, broke mid-word over rows)."""

from __future__ import annotations

import re

import pytest

from gputui.presets.preset import Preset
from gputui.tui.screens.command_screen import CommandScreen
from gputui.tui.screens.help import HELP, HelpScreen
from gputui.tui.screens.summary_screen import SummaryScreen
from gputui.tui.widgets.presets import PresetDetails
from gputui.tui.widgets.runs import RunsList
from gputui.tui.widgets.throughput_chart import GUTTER, ThroughputChart
from gputui.view import charts
from tests.support.dashboard import app_for, dashboard_with_history, scripted_dashboard
from tests.support.tui import demo_preset, run_async, shown, stop_the_run, wait_until

SIZES = pytest.mark.parametrize("size", [(80, 24), (140, 40)], ids=["80x24", "140x40"])


def chart_rows(app) -> list[str]:
    """The chart's plot and time axis as text, the y-axis gutter included."""
    lines = str(app.dashboard.query_one(ThroughputChart).render()).splitlines()
    top = next(i for i, line in enumerate(lines) if line[GUTTER - 1 : GUTTER] in ("┤", "│"))
    return lines[top:]


def test_the_y_axis_runs_just_past_the_data_and_a_finished_run_spans_the_chart(tmp_path):
    """The scripted run: 24 s of readings up to 2,990 samples/s, an H200 reference of
    3,000, warm-up for its first 6 s.  Live, the axis tops out at 3.5k (was 5.0k); once
    stopped, the plot spans 24 s: the median line reaches the right edge and warm-up is
    its first quarter (was: a minute or more, its data in the left part)."""
    app = scripted_dashboard(demo_preset(), tmp_path)

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(pilot, lambda: app.state.run is not None and app.state.run.series.readings == 96, what="the script played")
            await shown(pilot)
            live = chart_rows(app)
            assert live[0].split("┤")[0].strip() == "3.5k", live

            await stop_the_run(pilot)
            await wait_until(pilot, lambda: isinstance(app.screen, SummaryScreen), what="the run's summary")
            await pilot.press("escape")
            await wait_until(pilot, lambda: app.screen is app.dashboard, what="the dashboard")
            text = await shown(pilot)
            rows = chart_rows(app)
            plot, axis = [row[GUTTER:] for row in rows[:-1]], rows[-1][GUTTER:]
            width = len(axis.rstrip())
            assert axis.rstrip().endswith("24s"), text
            median_row = next(row for row in plot if "─" in row)
            assert median_row[:width].rstrip()[-1] == "─", plot  # to the last column
            warm_first, warm_last = axis.index("└"), axis.index("┘")
            assert warm_first == 0 and abs((warm_last + 1) / width - 6 / 24) < 0.05, axis
            assert rows[0].split("┤")[0].strip() == "3.5k", rows

    run_async(scenario())


def test_the_axis_top_is_within_a_third_of_the_data():
    """Data around 2.7k and 19k, with the 5 % headroom the plot keeps: 3.0k and 20k,
    not 5.0k and 50k; no step leaves the data under three quarters of the height."""
    assert charts.nice_ceiling(2700 * 1.05) == 3000 and charts.compact_number(3000) == "3.0k"
    assert charts.nice_ceiling(19_000 * 1.05) == 20_000
    for value in range(100, 100_000, 37):
        top = charts.nice_ceiling(value)
        assert value <= top <= value / 0.75, (value, top)


def boxed_text(screen_text: str, region) -> str:
    """The words inside a box at ``region`` of the screen, its lines joined: what a
    reader can read there."""
    rows = screen_text.splitlines()[region.y + 1 : region.bottom - 1]
    return " ".join(" ".join(row[region.x + 1 : region.right - 1] for row in rows).split())


@SIZES
def test_the_command_dialogs_intro_is_shown_whole(tmp_path, size):
    app = app_for({}, tmp_path)

    async def scenario():
        async with app.run_test(size=size) as pilot:
            await pilot.press("x")
            await wait_until(pilot, lambda: isinstance(app.screen, CommandScreen), what="the command dialog")
            text = boxed_text(await shown(pilot), app.screen.query_one("Vertical").region)
            intro = "Run a command (your own training script): its output is read for throughput, and Python gets the probe."
            assert intro in text, text
            assert "Enter run · ctrl+s save as a preset · Esc cancel" in text, text

    run_async(scenario())


@SIZES
def test_a_help_description_that_wraps_goes_on_under_itself(tmp_path, size):
    """No line of help starts at the left edge but a section's title: a description's
    next line starts under the description, not under the keys."""
    app = app_for({}, tmp_path)
    titles = {context for context, _rows in HELP}

    async def scenario():
        async with app.run_test(size=size) as pilot:
            await pilot.press("question_mark")
            await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
            await shown(pilot)
            lines = str(app.screen.query_one("#help-text").render()).splitlines()
            width = app.screen.query_one("#help-text").content_size.width
            indent = next(line.index("choose a preset") for line in lines if "choose a preset" in line)  # where descriptions start
            for line in lines:
                assert len(line) <= width, line
                if line and not line.startswith("  "):
                    assert line in titles, f"a line back at the left edge: {line!r}"
                elif line.startswith("   ") and not line.startswith(" " * indent):
                    raise AssertionError(f"a line that is neither a key nor under a description: {line!r}")
            assert any(line.startswith(" " * indent) and line.strip() for line in lines), "nothing wrapped: a narrower help?"
            # every description whole: its words in order, across its lines
            words = " ".join(line.strip() for line in lines)
            assert "every GPU's processes: the run's and others' (user, command, memory, SM share)" in " ".join(words.split())

    run_async(scenario())


@SIZES
def test_runs_rows_keep_their_day_and_their_figure(tmp_path, size):
    """The two kept runs (torch-resnet50, 1,790/s, and torch-resnet50-input-bound,
    133/s, both of 11-21): each row shows its day and its figure, whatever the width."""
    app = dashboard_with_history(tmp_path)

    async def scenario():
        async with app.run_test(size=size) as pilot:
            await wait_until(pilot, lambda: len(app.state.history) == 2, what="the kept runs listed")
            await shown(pilot)
            runs = app.dashboard.query_one(RunsList)
            rows = str(runs.render()).splitlines()
            text = "\n".join(rows)
            assert text.count("11-21") == 2 and "1,790/s" in text and "133/s" in text, rows
            assert text.index("torch-resnet50") < text.index("1,790/s") < text.index("torch-resnet50-in") < text.index("133/s"), rows
            assert all(len(row) <= runs.content_size.width for row in rows), rows

    run_async(scenario())


LONG_NAME = "torch-resnet50-channels-last-bf16-compiled-dataloader-eight-workers"


@SIZES
def test_a_long_preset_name_is_one_row_in_the_list_and_breaks_after_its_hyphens_below(tmp_path, size):
    long = Preset(name=LONG_NAME, source=tmp_path / "p.toml", description="ResNet-50 with every speed-up", framework="torch", model="resnet50")
    short = Preset(name="smoke", source=tmp_path / "p.toml", framework="smoke")
    app = app_for({long.name: long, short.name: short}, tmp_path)

    async def scenario():
        async with app.run_test(size=size) as pilot:
            await pilot.pause(0.3)
            await pilot.press("down")  # the long one, below smoke
            await pilot.pause(0.3)
            text = await shown(pilot)
            listed = [line for line in text.splitlines() if re.search(r"torch-resnet50-ch[\w-]*…", line)]
            assert len(listed) == 1, text  # one row in the list, cut
            assert not any(line.lstrip(" │").startswith(("ls-", "f16", "kers")) for line in text.splitlines()), text  # no row of its rest
            details = app.dashboard.query_one(PresetDetails)
            lines = str(details.render()).splitlines()
            name_lines = lines[: next(i for i, line in enumerate(lines) if line.endswith("workers")) + 1]
            assert "".join(name_lines) == LONG_NAME, lines
            assert all(line.endswith("-") for line in name_lines[:-1]), name_lines  # broken after a hyphen, never mid-word
            assert all(len(line) <= details.content_size.width for line in name_lines), name_lines

    run_async(scenario())


@SIZES
def test_the_docs_screenshots_show_todays_screen_and_cut_no_text(tmp_path, size):
    """docs/screens/ (the README's and docs/dashboard.md's pictures) hold the screen as
    the dashboard draws it now, at 80x24 and 140x40 (python scripts/dashboard-screens.py
    makes them), with nothing cut short with "…"."""
    from tests.support.process import REPO
    from tests.support.snapshots import render

    text, _svg = render(size, tmp_path, "gputui-dark")
    kept = REPO / "docs" / "screens" / f"dashboard-gputui-dark-{size[0]}x{size[1]}.txt"
    assert kept.exists(), f"{kept}: run python scripts/dashboard-screens.py"
    assert kept.read_text(encoding="utf-8") == text, f"{kept} is not today's screen: run python scripts/dashboard-screens.py"
    assert "…" not in text, text
