"""Issue 25: what the dashboard shows while a pop-up is open, kept checks in the Runs
list, the replay's keys, and the narrow (80x24) layout.  The comparison view:
tests/tui/test_tui_compare.py."""

from __future__ import annotations

from gputui.check.check_run import CheckRun
from gputui.check.result import OK, PREFLIGHT, WARN, CheckResult
from gputui.check.stage_context import CheckOptions
from gputui.record.history import RunHistory
from gputui.telemetry.gpu import GpuTelemetry
from gputui.tui.screens.check import CheckScreen
from gputui.tui.screens.dashboard_screen import DashboardScreen
from gputui.tui.screens.summary_screen import SummaryScreen
from gputui.tui.screenshot import screen_text
from gputui.tui.widgets.header import RunStatus
from tests.support.dashboard import make_dashboard
from tests.support.fake_nvml import FakeGpu, FakeNvml
from tests.support.keys import quick_check
from tests.support.tui import demo_preset, run_async, scripted_factory, shown, wait_until


def scripted_app(tmp_path, **kwargs):
    preset = demo_preset()
    kwargs.setdefault("session_factory", scripted_factory(samples=4))
    return make_dashboard({preset.name: preset}, settings_file=tmp_path / "settings.toml", check_factory=quick_check, confirm_quit=False, **kwargs)


def footer_keys(app) -> set[str]:
    """The keys the dashboard's footer offers now."""
    return {key.action for key in app.dashboard.query("FooterKey")}


def test_a_run_ending_under_the_check_screen_updates_the_dashboard_and_queues_its_summary(tmp_path):
    app = scripted_app(tmp_path)

    async def scenario():
        async with app.run_test(size=(140, 40)) as pilot:
            app.start_preset("resnet50-demo")
            await wait_until(pilot, lambda: app.state.live_run is not None, what="the run")
            app.refresh_dashboard(force=True)
            await wait_until(pilot, lambda: "app.stop_run" in footer_keys(app), what="s Stop offered")
            app.action_check()
            check = await wait_until(pilot, lambda: isinstance(app.screen, CheckScreen) and app.screen, what="check screen")
            app.supervisor.stop_run()
            await wait_until(pilot, lambda: app.state.live_run is None and app.state.run.ended, what="the run ended")
            await pilot.pause(1.2)  # two redraw ticks
            assert app.screen is check, "no summary opened over the check, unseen, to take its keys"
            assert "●" not in str(app.dashboard.query_one(RunStatus).render())
            assert "app.stop_run" not in footer_keys(app)
            assert any("ended" in n.message and "summary" in n.message for n in app._notifications)
            await pilot.press("escape")
            await wait_until(pilot, lambda: isinstance(app.screen, SummaryScreen), what="the queued summary, once the check is closed")
            await pilot.press("escape")
            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen), what="back on the dashboard")

    run_async(scenario())


def keep_a_check(history: RunHistory, status: str) -> None:
    """A check kept in the run history, as ``gputui check`` keeps one: two results."""

    def preflight(ctx):
        ctx.report(CheckResult(id="host.shm", group=PREFLIGHT, name="/dev/shm", status=OK, value=16.0, unit="GiB"))
        ctx.report(CheckResult(id="host.cores", group=PREFLIGHT, name="CPU cores", status=status, value=8))

    kept = history.start_recording("check", warn=print)
    assert kept is not None
    gpu = GpuTelemetry(FakeNvml([FakeGpu()]))
    CheckRun(CheckOptions(quick=True), observers=[kept], gpu=gpu, nvml_module=FakeNvml([FakeGpu()]), stages={"preflight": preflight}).run()
    kept.close()


def test_a_kept_passing_check_is_marked_ok_and_opens_to_its_verdict_and_results(tmp_path):
    from gputui.tui.widgets.runs import RunsList

    history = RunHistory(tmp_path / "runs")
    keep_a_check(history, WARN)
    app = scripted_app(tmp_path, history=history)

    async def scenario():
        async with app.run_test(size=(140, 40)) as pilot:
            runs = app.dashboard.query_one(RunsList)
            await wait_until(pilot, lambda: app.state.history, what="the kept check listed")
            line = " ".join(part.plain for part in runs._row_lines(app.state.history[0], 40, runs.lines_per_entry()))
            assert line.startswith("✓ ") and "check" in line and "warn" in line, line
            runs.focus()
            await pilot.press("enter")
            report = await wait_until(pilot, lambda: "Check" in type(app.screen).__name__ and app.screen, what="the check's report")
            text = await shown(pilot)
            assert "verdict: WARN" in text and "CPU cores" in text and "/dev/shm" in text
            assert "run again" not in text.lower()
            await pilot.press("r")  # nothing to run again: the report stays
            await pilot.pause(0.2)
            assert app.screen is report and app.state.live_run is None

    run_async(scenario())


def test_live_panels_paused_under_a_pop_up_is_said_on_the_top_line(tmp_path):
    app = scripted_app(tmp_path)

    async def scenario():
        async with app.run_test(size=(140, 40)) as pilot:
            app.start_preset("resnet50-demo")
            await wait_until(pilot, lambda: app.state.live_run is not None, what="the run")
            assert "paused" not in (await shown(pilot)).splitlines()[0]
            await pilot.press("question_mark")
            await wait_until(pilot, lambda: not isinstance(app.screen, DashboardScreen), what="help open")
            assert "panels paused" in (await shown(pilot)).splitlines()[0]
            await pilot.press("escape")
            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen), what="help closed")
            assert "paused" not in (await shown(pilot)).splitlines()[0]

    run_async(scenario())


def test_f_with_no_findings_says_so(tmp_path):
    app = scripted_app(tmp_path)

    async def scenario():
        async with app.run_test(size=(140, 40)) as pilot:
            await pilot.press("f")
            await wait_until(pilot, lambda: any(n.message == "No findings yet." for n in app._notifications), what="the notice")
            assert isinstance(app.screen, DashboardScreen)

    run_async(scenario())


def test_the_theme_search_offers_gputuis_themes_not_textuals(tmp_path):
    app = scripted_app(tmp_path)

    async def scenario():
        async with app.run_test(size=(140, 40)) as pilot:
            app.search_themes()
            await pilot.pause(0.3)
            await pilot.press(*"gputui")
            await wait_until(pilot, lambda: "gputui-dark" in screen_text(app), what="gputui's theme offered")
            await pilot.press(*["backspace"] * 6, *"tokyo")
            await pilot.pause(0.6)
            assert "tokyo-night" not in screen_text(app)

    run_async(scenario())


def test_the_replay_neither_offers_nor_runs_run_edit_and_new(tmp_path):
    from gputui.record.recording import read_recording
    from gputui.tui.replay_app import make_replay_app
    from tests.support.replay import INPUT_BOUND

    app = make_replay_app(read_recording(INPUT_BOUND), start_paused=True, settings_file=tmp_path / "s.toml")

    async def scenario():
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause(0.3)
            offered = footer_keys(app)
            assert not offered & {"select", "edit_preset", "new_preset"}, offered
            await pilot.press("e", "n", "enter")
            await pilot.pause(0.2)
            assert isinstance(app.screen, DashboardScreen)
            assert not any("runs nothing" in n.message for n in app._notifications)

    run_async(scenario())


def test_at_80x24_runs_rows_keep_the_preset_name_and_no_footer_key_is_cut(tmp_path):
    from textual.widgets._footer import FooterKey

    from tests.support.dashboard import dashboard_with_history

    app = dashboard_with_history(tmp_path)

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(pilot, lambda: len(app.state.history) == 2, what="history listed")
            app.start_preset("resnet50-demo")
            await wait_until(pilot, lambda: app.state.live_run is not None, what="the run")
            text = await shown(pilot)
            assert "torch-resnet50 " in text or "torch-resnet50\n" in text, text
            keys = list(app.dashboard.query(FooterKey))
            palette = [key for key in keys if key.has_class("-command-palette")]
            right = palette[0].region.x if palette else 80
            assert all(key.region.right <= right for key in keys if key not in palette), [(k.action, k.region) for k in keys]
            assert {"app.stop_run", "quit", "help"} <= {key.action for key in keys}

    run_async(scenario())
