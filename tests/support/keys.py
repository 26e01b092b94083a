"""Keys sent to the dashboard as a terminal delivers a burst (a test helper, no tests): the
keys a storm draws from, the dashboard it is sent to (scripted, with a finding, quitting at
once) and the one-result check that dashboard's Check screen runs."""

from __future__ import annotations

from textual import events

from gputui.check.check_run import CheckRun
from gputui.check.result import OK, PREFLIGHT, CheckResult
from gputui.telemetry.gpu import GpuTelemetry
from gputui.tui.live_app import GpuTuiApp
from tests.support.dashboard import make_dashboard
from tests.support.fake_nvml import FakeGpu, FakeNvml
from tests.support.snapshots import FINDING
from tests.support.tui import demo_preset, scripted_factory

# Everything but the quit keys (q, Ctrl-Q, Ctrl-C): they end the storm.
STORM_KEYS = [
    "up",
    "down",
    "left",
    "right",
    "pageup",
    "pagedown",
    "home",
    "end",
    "ctrl+home",
    "ctrl+end",
    "shift+home",
    "shift+end",
    "enter",
    "escape",
    "tab",
    "shift+tab",
    "backspace",
    "delete",
    "space",
    "ctrl+p",
    "f",
    "u",
    "k",
    "t",
    "s",
    "r",
    "a",
    "x",
    "1",
]


def send_keys(app, *keys: str) -> None:
    """Queue keys at once, as a terminal delivers a burst: none waits for the last one's effect."""
    for key in keys:
        event = events.Key(key, key if len(key) == 1 else None)
        event.set_sender(app)
        app._driver.send_message(event)


def quick_check(options, listener) -> CheckRun:
    """A check of one result, so Enter on the Check screen finishes at once."""

    def preflight(ctx):
        ctx.report(CheckResult(id="host.shm", group=PREFLIGHT, name="/dev/shm", status=OK, value=16.0, unit="GiB"))

    return CheckRun(options, listener=listener, gpu=GpuTelemetry(FakeNvml([FakeGpu()])), nvml_module=FakeNvml([FakeGpu()]), stages={"preflight": preflight})


def scripted_app(tmp_path, monkeypatch) -> GpuTuiApp:
    monkeypatch.chdir(tmp_path)  # the palette's "Save screenshot" writes to the working directory
    preset = demo_preset()
    # confirm_quit=False: the storms start runs, and their last q must quit at once
    # a finding: f opens the findings view only when there is something to show
    return make_dashboard(
        {preset.name: preset},
        session_factory=scripted_factory(samples=4, findings=[FINDING]),
        settings_file=tmp_path / "settings.toml",
        check_factory=quick_check,
        confirm_quit=False,
    )
