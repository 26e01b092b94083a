"""The dashboard driven by keys through Textual's Pilot: pick a preset, run it, see
throughput arrive, stop it, run it again, switch themes, resize, quit.

Runs are real (the smoke workload in a child process group); GPU telemetry comes
from the real GpuTelemetry reading tests/support/fake_nvml.py.
"""

from __future__ import annotations

import os
import re

import psutil

from gputui.record.recording import read_recording
from gputui.tui.live_app import GpuTuiApp
from gputui.tui.screens.dashboard_screen import DashboardScreen
from gputui.tui.screens.findings_screen import FindingsScreen
from gputui.tui.screens.stop_screen import StopRunScreen
from gputui.tui.screens.summary_screen import SummaryScreen
from gputui.tui.widgets.gpu_panel import GpuGrid, GpuPanel, GpuRows
from gputui.tui.widgets.presets import PresetList
from gputui.tui.widgets.runs import RunsList
from tests.support.dashboard import app_for, fake_gpus, isolated, make_dashboard  # noqa: F401  (isolated: the fixture)
from tests.support.process import REPO
from tests.support.tui import demo_preset, run_async, scripted_factory, shown, wait_until


def group_alive(pgid: int) -> list[int]:
    alive = []
    for proc in psutil.process_iter(["pid", "status"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                alive.append(proc.pid)
        except (ProcessLookupError, psutil.Error):
            continue
    return alive


def test_pick_smoke_run_it_see_throughput_and_its_summary(isolated, tmp_path):  # noqa: F811
    async def scenario():
        app = app_for(isolated, tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: app.state.session is not None, what="watching")
            assert app.dashboard.query_one(PresetList).selected_preset.name == "smoke"
            await pilot.press("enter")
            run = await wait_until(pilot, lambda: app.state.run, what="run started")
            await wait_until(pilot, lambda: run.series.readings > 0, what="throughput")
            await wait_until(pilot, lambda: isinstance(app.screen, SummaryScreen), timeout=60, what="summary")
            assert "throughput median" in await shown(pilot)
            await pilot.press("escape")
            text = await shown(pilot)
            assert re.search(r"[\d,]+ samples/s median", text), text
            assert "✓ #1 smoke" in text
            assert run.outcome_word == "ok" and run.result > 0

    run_async(scenario())


def test_stop_run_again_and_quit_leave_no_process_and_a_finished_recording(isolated, tmp_path):  # noqa: F811
    record = tmp_path / "run.jsonl"
    groups = []

    async def scenario():
        app = app_for(isolated, tmp_path, record_path=record)
        async with app.run_test(size=(120, 40)) as pilot:
            app.dashboard.query_one(PresetList).select_name("smoke-long")
            await pilot.press("enter")
            first = await wait_until(pilot, lambda: app.state.run, what="run started")
            await wait_until(pilot, lambda: first.pid and first.series.readings >= 5, what="throughput")
            groups.append(os.getpgid(first.pid))
            text = await shown(pilot)
            assert re.search(r"[\d,]+ samples/s now", text), text
            assert "REC run.jsonl" in text

            await pilot.press("s")  # asks first
            await wait_until(pilot, lambda: isinstance(app.screen, StopRunScreen), what="asked")
            assert not first.ended
            await pilot.press("y")
            await wait_until(pilot, lambda: first.ended, what="run stopped")
            assert first.outcome_word == "stopped"
            await wait_until(pilot, lambda: not group_alive(groups[0]), what="group gone")
            await wait_until(pilot, lambda: isinstance(app.screen, SummaryScreen), what="summary")

            await pilot.press("r")  # from the summary: run the same preset again
            second = await wait_until(pilot, lambda: len(app.state.runs) == 2 and app.state.runs[1], what="run again")
            await wait_until(pilot, lambda: second.pid and second.series.readings >= 3, what="second throughput")
            groups.append(os.getpgid(second.pid))
            await shown(pilot)
            rows = str(app.dashboard.query_one(RunsList).render())  # a run's outcome on its line, or the line below
            assert re.search(r"■ #1 smoke-long\s+stopped", rows) and "● #2 smoke-long" in rows, rows
            await pilot.press("q", "q")  # a run is going: the second q confirms
        assert app.return_value == 0

    run_async(scenario())
    assert groups[0] != groups[1]
    assert not group_alive(groups[1])  # quitting stopped the running benchmark's whole group
    recording = read_recording(record)  # the first run, finished with its summary
    assert recording.summary is not None and recording.summary.outcome.kind == "stopped"
    assert recording.header.preset.name == "smoke-long"


def test_theme_by_key_palette_and_option_is_remembered(isolated, tmp_path):  # noqa: F811
    settings = tmp_path / "xdg" / "gputui" / "settings.toml"

    async def first_session():
        app = app_for(isolated, tmp_path)
        async with app.run_test(size=(100, 30)) as pilot:
            assert app.theme == "gputui-dark"
            await pilot.pause()
            assert not settings.exists()  # the default needs no settings file
            await pilot.press("t")
            assert app.theme == "gputui-high-contrast"
            await pilot.press("ctrl+p")
            await pilot.pause(0.3)
            await pilot.press(*"next theme")
            await pilot.pause(0.5)
            await pilot.press("enter")
            await wait_until(pilot, lambda: app.theme == "gputui-light", what="palette switched theme")

    async def second_session(expected: str, **kwargs):
        app = app_for(isolated, tmp_path, **kwargs)
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            assert app.theme == expected

    run_async(first_session())
    assert 'theme = "gputui-light"' in settings.read_text()
    run_async(second_session("gputui-light"))
    run_async(second_session("gputui-high-contrast", theme="gputui-high-contrast"))  # --theme wins, and sticks
    run_async(second_session("gputui-high-contrast"))


def test_resize_from_200x60_to_80x24_collapses_panels_instead_of_cutting_them(isolated, tmp_path):  # noqa: F811
    async def scenario():
        app = app_for(isolated, tmp_path, gpu_factory=fake_gpus(3))
        async with app.run_test(size=(200, 60)) as pilot:
            await wait_until(pilot, lambda: len(app.dashboard.query(GpuPanel)) == 3, what="GPU panels")
            screen = app.dashboard
            assert not screen.has_class("-compact")
            assert screen.query_one(GpuGrid).styles.grid_size_columns == 3
            assert "driver 580.159.03" in await shown(pilot)
            for size in ((80, 24), (200, 60), (80, 24)):
                await pilot.resize_terminal(*size)
                await pilot.pause(0.2)
                app.refresh_dashboard(force=True)
                await pilot.pause(0.2)
            assert screen.has_class("-compact")
            width, height = app.size
            for widget_id in ("machine", "presets", "runs", "throughput", "cpu", "gpus", "findings", "log"):
                region = screen.query_one(f"#{widget_id}").region
                assert region.height >= 1 and region.right <= width and region.bottom <= height - 1, widget_id
            rows = screen.query_one(GpuRows)  # one line per GPU, and the totals
            assert rows.display and rows.region.height == 4 and not any(p.display for p in screen.query(GpuPanel))
            assert rows.region.bottom <= height - 1  # all three fit above the footer
            text = await shown(pilot)
            assert "GPUs" in text and "CPU" in text and "Throughput" in text and "Output" in text

    run_async(scenario())


def test_watching_a_job_started_elsewhere_shows_its_process_tree(isolated, tmp_path):  # noqa: F811
    import subprocess
    import sys

    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])

    async def scenario():
        app = app_for(isolated, tmp_path, attach_pid=job.pid)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: app.state.host and any(p.pid == job.pid for p in app.state.host.processes), what="the job's tree")
            text = await shown(pilot)
            assert f"watching pid {job.pid}" in text and f"{job.pid}" in text
            job.kill()
            job.wait()
            # the job ended: watching goes on, without it
            await wait_until(pilot, lambda: app.state.session and app.state.session.attach_pid is None, what="plain watch")

    try:
        run_async(scenario())
    finally:
        job.kill()
        job.wait()


def test_findings_show_in_the_strip_and_in_detail(tmp_path):
    finding = {
        "id": "input-1",
        "kind": "input_bound",
        "state": "open",
        "severity": "warning",
        "title": "Input pipeline is CPU-bound",
        "since": 8.0,
        "evidence": {"gpu_sm_active": 41.0, "busiest_worker_cpu": 97.0},
        "advice": ["Raise DataLoader num_workers", "Cache decoded images"],
    }
    preset = demo_preset()

    async def scenario():
        app = make_dashboard(
            {preset.name: preset}, session_factory=scripted_factory(findings=[finding]), start_preset=preset.name, settings_file=tmp_path / "s.toml"
        )
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: app.state.open_findings(), what="finding")
            assert "▲ Input pipeline is CPU-bound" in await shown(pilot)
            await pilot.press("f")
            await wait_until(pilot, lambda: isinstance(app.screen, FindingsScreen), what="findings view")
            text = await shown(pilot)
            assert "busiest_worker_cpu" in text and "Raise DataLoader num_workers" in text
            await pilot.press("escape")
            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen), what="back")

    run_async(scenario())


def test_keys_are_remapped_by_binding_id_from_settings(tmp_path):
    settings = tmp_path / "settings.toml"
    settings.write_text('[keys]\nshow_findings = "g"\n')
    preset = demo_preset()
    from tests.support.snapshots import FINDING  # f applies (and g, remapped) once there is a finding

    async def scenario():
        app = make_dashboard({preset.name: preset}, session_factory=scripted_factory(findings=[FINDING]), settings_file=settings)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: app.state.findings(), what="a finding")
            await pilot.press("f")
            await pilot.pause()
            assert not isinstance(app.screen, FindingsScreen)  # f is no longer bound
            await pilot.press("g")
            await wait_until(pilot, lambda: isinstance(app.screen, FindingsScreen), what="remapped key")

    run_async(scenario())


def _all_bindings():
    from gputui.tui.replay_app import ReplayApp
    from gputui.tui.screens.check_report import CheckReportScreen
    from gputui.tui.screens.compare_screen import CompareScreen
    from gputui.tui.screens.delete_preset import DeletePresetScreen
    from gputui.tui.screens.editor import ConflictScreen, NameScreen, PresetEditorScreen
    from gputui.tui.screens.findings_screen import FindingsScreen as F
    from gputui.tui.screens.summary_screen import SummaryScreen as S
    from gputui.tui.widgets.log import LogPane
    from gputui.tui.widgets.presets import PresetFilter
    from gputui.tui.widgets.runs import RunsList

    for owner in (
        GpuTuiApp,
        DashboardScreen,
        PresetList,
        S,
        F,
        PresetEditorScreen,
        NameScreen,
        ConflictScreen,
        DeletePresetScreen,
        RunsList,
        CompareScreen,
        CheckReportScreen,
        ReplayApp,
        LogPane,
        PresetFilter,
    ):
        for binding in owner.BINDINGS:
            yield owner.__name__, binding


def test_every_binding_has_an_id_a_description_and_a_line_in_the_user_guide():
    guide = (REPO / "docs" / "dashboard.md").read_text(encoding="utf-8")
    ids = set()
    for owner, binding in _all_bindings():
        assert binding.id, f"{owner}: {binding.key} has no id"
        assert binding.description, f"{owner}: {binding.key} has no description"
        assert binding.id not in ids, f"duplicate binding id {binding.id}"
        ids.add(binding.id)
        assert f"`{binding.id}`" in guide, f"docs/dashboard.md does not list binding {binding.id}"
