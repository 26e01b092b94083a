"""The chart and the panels share space by what they hold, at 80×24, 120×40 and
200×60; at 80 columns what does not fit is cut with an ellipsis, never silently."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gputui.tui.widgets.cpu import CpuPanel
from gputui.tui.widgets.gpu_panel import GpuGrid
from gputui.tui.widgets.runs import RunsList
from gputui.tui.widgets.throughput_chart import ThroughputChart
from tests.support.dashboard import make_dashboard
from tests.support.tui import demo_preset, run_async, scripted_factory, shown, stop_the_run, wait_until


def dashboard(size: tuple[int, int], tmp_path: Path, check, name: str = "resnet50-demo", gpus=None, stop=False):
    preset = dataclasses.replace(demo_preset(), name=name)

    async def scenario():
        app = make_dashboard(
            {preset.name: preset},
            session_factory=scripted_factory(gpus=gpus),
            start_preset=preset.name,
            clock=lambda: 1000.0,
            settings_file=tmp_path / "settings.toml",
            user_themes_dir=tmp_path / "no-themes",
        )
        async with app.run_test(size=size) as pilot:
            await wait_until(pilot, lambda: app.state.run is not None and app.state.run.series.readings == 96, what="script played")
            if stop:
                await stop_the_run(pilot)
                await wait_until(pilot, lambda: app.state.run.ended, what="the stop")
                await wait_until(pilot, lambda: app.screen is not app.dashboard, what="the summary")
                await pilot.press("escape")
                await wait_until(pilot, lambda: app.screen is app.dashboard, what="the dashboard")
            await shown(pilot)
            await check(pilot, app, await shown(pilot))

    run_async(scenario())


@pytest.mark.parametrize("size", [(120, 40), (200, 60)])
def test_the_chart_is_wide_enough_for_its_key_and_boxes_are_as_tall_as_what_they_hold(size, tmp_path):
    async def check(pilot, app, text):
        chart = app.dashboard.query_one(ThroughputChart)
        assert chart.content_size.width >= 45  # was 26 at 120×40
        legend = chart.build().plain
        for figure in ("2,850", "H200 3,000", "(95%)"):  # the key line is whole, on one or two lines
            assert figure in legend
        assert "…" not in legend.split("\n5.0k")[0]
        runs = app.dashboard.query_one(RunsList)
        assert runs.region.height <= runs.lines_per_entry() + 2  # one entry and its box, not the sidebar's height
        cpu = app.dashboard.query_one(CpuPanel)
        shown_lines = [line for line in cpu.build().plain.split("\n") if line.strip()]
        assert cpu.content_size.height - len(shown_lines) <= 8  # not mostly empty
        assert all("…" not in line for line in shown_lines[:2])  # the machine's figures are whole

    dashboard(size, tmp_path, check)


def test_at_80_columns_runs_and_the_no_gpu_reason_are_cut_with_an_ellipsis(tmp_path):
    reason = "NVML library not found (libnvidia-ml.so.1): this machine has no NVIDIA driver installed"

    async def check(pilot, app, text):
        lines = text.splitlines()
        row = next((i for i, line in enumerate(lines) if line.startswith("■ #1")), 0)
        assert "…" in lines[row][:24]  # the name gives way, marked
        assert lines[row + 1][:24].split()[:1] == ["stopped"] and "/s" in lines[row + 1][:24]  # the outcome and the figure below it
        app.dashboard.query_one(GpuGrid).sync_panels(app.state, reason)
        await pilot.pause()
        text = await shown(pilot)
        line = next(line for line in text.splitlines() if "No GPU: NVML library" in line)
        assert line.rstrip().endswith("…")

    dashboard((80, 24), tmp_path, check, name="resnet50-synthetic-long-name", gpus=[], stop=True)
