"""The Check screen: reached by key and by the command palette, its table filling in as
the check reports, the verdict shown at the end, Esc stopping a running check."""

from __future__ import annotations

import os
import threading

import pytest

from gputui.check.check_run import CheckRun
from gputui.check.result import FAIL, OK, PREFLIGHT, CheckResult
from gputui.presets.preset import load_presets
from gputui.telemetry.gpu import GpuTelemetry
from gputui.tui.screens.check import CheckScreen
from tests.support.dashboard import make_dashboard
from tests.support.fake_nvml import FakeGpu, FakeNvml
from tests.support.keys import quick_check
from tests.support.tui import run_async, wait_until

# Read before tests/conftest.py clears GPUTUI_* for each test: scripts/gpu-check.sh
# passes the folder where the GPU run's screenshots should come back.
SCREENSHOT_OUT = os.environ.get("GPUTUI_SCREENSHOT_DIR")


def _factory(stages):
    def make(options, listener):
        return CheckRun(options, listener=listener, gpu=GpuTelemetry(FakeNvml([FakeGpu()])), nvml_module=FakeNvml([FakeGpu()]), stages=stages)

    return make


def _app(tmp_path, stages):
    return make_dashboard(
        load_presets(cwd=tmp_path),
        settings_file=tmp_path / "settings.toml",
        interval=0.25,
        gpu_factory=lambda: GpuTelemetry(FakeNvml([FakeGpu()])),
        check_factory=_factory(stages),
    )


def test_k_opens_the_check_and_enter_runs_it_to_a_verdict(tmp_path):
    def preflight(ctx):
        ctx.report(
            CheckResult(
                id="gpu0.power_limit", group=PREFLIGHT, name="Power limit", status=FAIL, gpu=0, value=420.0, unit="W", expected=700.0, cause="power-limited"
            )
        )
        ctx.report(CheckResult(id="host.shm", group=PREFLIGHT, name="/dev/shm", status=OK, value=16.0, unit="GiB"))

    app = _app(tmp_path, {"preflight": preflight})

    async def scenario():
        async with app.run_test(size=(140, 40)) as pilot:
            await pilot.press("k")
            screen = await wait_until(pilot, lambda: isinstance(app.screen, CheckScreen) and app.screen, what="check screen")
            await pilot.press("enter")
            await wait_until(pilot, lambda: screen.verdict is not None, what="verdict")
            table = screen.query_one("#check-table")
            assert table.row_count >= 3  # two results, the under-load and cost rows follow
            status = str(screen.query_one("#check-status").render())
            assert "verdict: FAIL" in status
            first_row = [str(c) for c in table.get_row_at(0)]
            assert first_row[:4] == ["FAIL", "gpu0", "Power limit", "420 W"]
            await pilot.press("escape")
            await wait_until(pilot, lambda: not isinstance(app.screen, CheckScreen), what="closed")

    run_async(scenario())


def test_enter_after_a_check_asks_before_the_five_minute_full_check(tmp_path):
    asked: list[bool] = []  # each check started: quick or not

    def counted(options, listener):
        asked.append(options.quick)
        return quick_check(options, listener)  # finishes at once, whatever was asked

    app = make_dashboard(load_presets(cwd=tmp_path), settings_file=tmp_path / "settings.toml", interval=0.25,
                   gpu_factory=lambda: GpuTelemetry(FakeNvml([FakeGpu()])), check_factory=counted)  # fmt: skip

    async def scenario():
        async with app.run_test(size=(140, 40)) as pilot:
            await pilot.press("k")
            screen = await wait_until(pilot, lambda: isinstance(app.screen, CheckScreen) and app.screen, what="check screen")
            await pilot.press("u")
            await wait_until(pilot, lambda: screen.verdict is not None, what="quick verdict")
            await pilot.press("enter")  # on the results: reading a row, not asking for 5 minutes
            await pilot.pause(0.2)
            assert asked == [True]
            assert "Enter again" in str(screen.query_one("#check-status").render())
            await pilot.press("enter")
            await wait_until(pilot, lambda: asked == [True, False], what="full check after the second Enter")
            await pilot.press("escape")

    run_async(scenario())


def test_the_highlighted_rows_whole_note_is_shown_below_the_table(tmp_path):
    cause = "the power limit was lowered to 420 W by the provider's default profile " * 3
    advice = "ask the provider to restore the 700 W limit (nvidia-smi -pl 700 needs root)"

    def preflight(ctx):
        ctx.report(CheckResult(id="host.shm", group=PREFLIGHT, name="/dev/shm", status=OK, value=16.0, unit="GiB"))
        ctx.report(
            CheckResult(id="gpu0.power_limit", group=PREFLIGHT, name="Power limit", status=FAIL, gpu=0, value=420.0, unit="W", cause=cause, advice=advice)
        )

    app = _app(tmp_path, {"preflight": preflight})

    async def scenario():
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("k")
            screen = await wait_until(pilot, lambda: isinstance(app.screen, CheckScreen) and app.screen, what="check screen")
            await pilot.press("u")
            await wait_until(pilot, lambda: screen.verdict is not None, what="verdict")
            await pilot.press("down")  # the power-limit row
            await pilot.pause(0.1)
            detail = str(screen.query_one("#check-detail").render())
            assert "Power limit" in detail and cause.strip() in detail and advice in detail
            await pilot.press("escape")

    run_async(scenario())


def test_escape_stops_a_running_check(tmp_path):
    release = threading.Event()

    def slow(ctx):
        ctx.report(CheckResult(id="host.cores", group=PREFLIGHT, name="Cores", status=OK, value=8))
        ctx.stopped.wait(30)  # a stage that ends when the check is stopped
        release.set()

    app = _app(tmp_path, {"preflight": slow})

    async def scenario():
        async with app.run_test(size=(120, 30)) as pilot:
            app.action_check()
            screen = await wait_until(pilot, lambda: isinstance(app.screen, CheckScreen) and app.screen, what="screen")
            await pilot.press("u")
            await wait_until(pilot, lambda: len(screen.results) == 1, what="first result")
            await pilot.press("escape")
            await wait_until(pilot, release.is_set, what="the stage saw the stop")

    run_async(scenario())


@pytest.mark.gpu
def test_quick_check_in_the_app_on_a_real_gpu(tmp_path):
    """The Check screen with the real check behind it: real NVML, the real micro child."""
    app = make_dashboard(load_presets(cwd=tmp_path), settings_file=tmp_path / "settings.toml", interval=0.5)

    async def scenario():
        async with app.run_test(size=(160, 50)) as pilot:
            await pilot.press("k")
            screen = await wait_until(pilot, lambda: isinstance(app.screen, CheckScreen) and app.screen, what="screen")
            await pilot.press("u")
            await wait_until(pilot, lambda: screen.verdict is not None, timeout=240, what="verdict")
            ids = {r.id for r in screen.results}
            assert "gpu0.power_limit" in ids and "micro.gpu0.matmul_bf16" in ids
            matmul = next(r for r in screen.results if r.id == "micro.gpu0.matmul_bf16")
            assert matmul.value and matmul.value > 0
            app.save_screenshot(str(tmp_path / "check.svg"))
            if SCREENSHOT_OUT:
                app.save_screenshot("check-screen.svg", SCREENSHOT_OUT)

    run_async(scenario())
