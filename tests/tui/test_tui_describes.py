"""The screen describes the right thing: the preset given with --preset, and in --pid
mode the watched process (and that it has exited)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

from gputui.tui.widgets.log import LogPane
from gputui.tui.widgets.presets import PresetDetails, PresetList
from gputui.tui.widgets.throughput_chart import ThroughputChart
from tests.support.dashboard import app_for, fake_gpus, make_dashboard
from tests.support.tui import demo_preset, run_async, scripted_factory, shown, wait_until


def test_with_preset_x_the_sidebar_describes_x_not_the_first_preset(tmp_path):
    first = dataclasses.replace(demo_preset(), name="aaa-first", description="the first in the list")
    chosen = dataclasses.replace(demo_preset(), name="zzz-chosen", description="the one asked for")
    presets = {p.name: p for p in (first, chosen)}

    async def scenario():
        app = make_dashboard(
            presets,
            session_factory=scripted_factory(),
            start_preset="zzz-chosen",
            settings_file=tmp_path / "settings.toml",
            user_themes_dir=tmp_path / "no-themes",
        )
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: app.state.run is not None, what="the run")
            await shown(pilot)
            details = str(app.dashboard.query_one(PresetDetails).render())
            assert "the one asked for" in details and "the first in the list" not in details
            assert app.dashboard.query_one(PresetList).selected_preset is chosen

    run_async(scenario())


def test_in_pid_mode_the_empty_panels_say_the_process_is_watched_and_when_it_exits(tmp_path):
    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])

    async def scenario():
        app = app_for({}, tmp_path, attach_pid=job.pid, gpu_factory=fake_gpus(1))
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: app.state.session and app.state.session.attach_pid == job.pid, what="watching the job")
            text = await shown(pilot)
            assert "No run yet" not in text and "The run's output appears here" not in text
            chart = app.dashboard.query_one(ThroughputChart).build().plain
            assert f"Watching pid {job.pid}" in chart
            assert f"Watching pid {job.pid}" in app.dashboard.query_one(LogPane).build().plain
            job.kill()
            job.wait()
            await wait_until(pilot, lambda: app.state.watched_exit, what="the job's exit noticed")
            text = await shown(pilot)
            assert f"process {job.pid} ended" in app.dashboard.query_one(ThroughputChart).build().plain
            assert f"process {job.pid} ended: watching the machine only" in text

    try:
        run_async(scenario())
    finally:
        job.kill()
        job.wait()
