"""Helpers for the dashboard tests (no tests here): deterministic sessions and waits.

:class:`ScriptedSession` stands in for :class:`gputui.session.session.Session` where the
output must not depend on timing (snapshots): it emits a fixed script, with GPU
samples from the real GpuTelemetry reading tests/support/fake_nvml.py, a fixed host sample
and fixed times, then waits to be stopped, as a live run would.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from pathlib import Path
from typing import Any

from gputui.model import HostInfo, HostSample, ProcessSample, Sample
from gputui.presets.preset import Preset, Reference
from gputui.record import events as ev
from gputui.record.events import make_event
from gputui.record.observer import Observer
from gputui.record.schema import Header, PresetRecord, Summary
from gputui.session.session import SessionConfig
from gputui.session.summary import SummaryBuilder
from gputui.telemetry.gpu import GpuTelemetry
from tests.support.fake_nvml import SM_UTIL, FakeGpu, FakeNvml

GIB = 1024**3
MIB = 1024**2


def fixed_header(gpu: GpuTelemetry, preset: Preset | None) -> Header:
    return Header(
        schema=1,
        gputui="test",
        started_at="2025-01-01T00:00:00+00:00",
        interval=1.0,
        host=HostInfo(hostname="gpu-box-01", os="Linux", cpu_logical=16, memory_total=256 * GIB),
        driver_version=gpu.driver_version,
        cuda_version=gpu.cuda_version,
        gpus=list(gpu.infos),
        gpu_unavailable_reason=gpu.unavailable_reason,
        preset=PresetRecord(name=preset.name) if preset else None,
        command=["python", "train.py"] if preset else None,
    )


def fixed_host(with_run: bool) -> HostSample:
    cores = [12.0, 95.0, 88.0, 91.0, 97.0, 35.0, 8.0, 5.0, 64.0, 72.0, 3.0, 2.0, 1.0, 0.0, 45.0, 99.0]
    processes = []
    if with_run:
        processes = [ProcessSample(pid=4242, name="python", role="main", cpu_percent=104.0, rss=3 * GIB)]
        processes += [
            ProcessSample(pid=4250 + i, ppid=4242, name="pt_data_worker", role="worker", cpu_percent=[97.0, 92.5, 88.0, 61.0][i], rss=(410 + 10 * i) * MIB)
            for i in range(4)
        ]
    return HostSample(cpu_percent=51.0, per_core=cores, load_avg=[5.1, 4.8, 3.9], memory_used=61 * GIB, memory_total=251 * GIB, processes=processes)


def demo_gpus() -> list[FakeGpu]:
    """Two H200s: one healthy and power-capped, one hot and thermally throttled."""
    return [FakeGpu(), FakeGpu(uuid="GPU-1", temp_c=84, util_gpu=99, power_mw=688_000, sm_clock=1755, throttle_mask=0x20 | 0x40, memory_used=97 * GIB)]


def demo_preset() -> Preset:
    return Preset(
        name="resnet50-demo",
        source=Path("demo.toml"),
        description="ResNet-50 training, synthetic data",
        framework="torch",
        model="resnet50",
        batch_size=256,
        reference=(Reference(gpu="A100", samples_per_sec=2600.0, source="NVIDIA DLE"), Reference(gpu="H200", samples_per_sec=3000.0, source="demo")),
    )


class ScriptedSession:
    """The parts of Session the dashboard uses, playing a fixed script."""

    def __init__(self, config: SessionConfig, nvml: FakeNvml, samples: int = 24, findings: list[dict] | None = None) -> None:
        self.config = config
        self.gpu = GpuTelemetry(nvml, clock=lambda: 0.0)
        self.nvml = nvml
        self.samples = samples
        self.findings = findings or []
        self.summary_builder = SummaryBuilder()
        self._observers: list[Observer] = []
        self._stop = threading.Event()
        self._reason: str | None = None
        self.delivered = threading.Event()  # the script is out; it waits to be stopped

    def add_observer(self, observer: Observer) -> None:
        self._observers.append(observer)

    def stop(self, reason: str = "stopped") -> None:
        self._reason = self._reason or reason
        self._stop.set()

    def _all(self) -> list[Observer]:
        return [self.summary_builder, *self._observers]

    def _event(self, t: float, what: str, **data: Any) -> None:
        event = self.summary_builder.counted(make_event(t, what, data))  # as Session: the builder first
        for observer in self._observers:
            observer.on_event(event)

    def run(self) -> Summary:
        preset = self.config.preset
        self.gpu.open()
        try:
            header = dataclasses.replace(fixed_header(self.gpu, preset), baseline=self.config.baseline)  # as Session writes it
            for observer in self._all():
                observer.on_header(header)
            if preset is not None:
                self._event(0.0, ev.STARTED, pid=4242, command=["python", "train.py", "--model", "resnet50"])
                self._event(0.5, ev.WORKLOAD, framework="torch", model="resnet50", batch_size=256)
            for i in range(self.samples):
                self._tick(i, running=preset is not None)
                if preset is not None:
                    self._readings(i)
            for finding in self.findings:
                self._event(float(self.samples), ev.FINDING, **finding)
            self.delivered.set()
            self._stop.wait()
            if preset is not None:
                self._event(float(self.samples), ev.STOPPING, reason=self._reason)
                self._event(float(self.samples), ev.OUTCOME, kind="stopped", ok=False, message="stopped")
            summary = self.summary_builder.build()
            for observer in self._observers:
                observer.on_summary(summary)
            return summary
        finally:
            self.gpu.close()

    def _tick(self, i: int, running: bool) -> None:
        for n, gpu in enumerate(self.nvml.gpus):  # a little movement for the sparklines
            gpu.util_gpu = [97, 99, 62, 100][(i + n) % 4] if running else 0
            gpu.power_mw = (300_000 + 9_000 * ((i * 7 + n) % 11)) if running else 70_000
            gpu.temp_c = min(88, 60 + i + 10 * n) if running else 33
            if gpu.gpm is not None:
                gpu.gpm[SM_UTIL] = [44.0, 41.0, 18.0, 47.0][(i + n) % 4] if running else 0.0
        sample = Sample(t=float(i), gpus=self.gpu.sample(), host=fixed_host(running))
        for observer in self._all():
            observer.on_sample(sample)

    def _readings(self, i: int) -> None:
        for k in range(4):  # four readings a second; the first 6 s are warm-up
            t = i + k * 0.25
            phase = "warmup" if t < 6 else "measure"
            if t == 6:
                self._event(t, ev.PHASE, phase="measure")
            elif t == 0:
                self._event(t, ev.PHASE, phase="warmup")
            rate = 1200 + 180 * t if phase == "warmup" else 2750 + 60 * ((i * 4 + k) % 5) - 40 * (k % 2)
            self._event(t, ev.THROUGHPUT, samples_per_sec=float(rate), source="gputui", phase=phase, samples=256, seconds=256 / rate)


def scripted_factory(gpus: list[FakeGpu] | None = None, samples: int = 24, findings: list[dict] | None = None):
    def make(config: SessionConfig) -> ScriptedSession:
        return ScriptedSession(config, FakeNvml(gpus if gpus is not None else demo_gpus()), samples, findings)

    return make


def script_delivered(app) -> bool:
    """Whether the scripted session the app runs now has sent all its news.  The app
    folds routine news in at its tick (gputui.view.bridge), so a test that sets the state
    by hand waits for this first, or news still on its way lands over what it set."""
    current = getattr(app.supervisor, "_current", None)
    return current is not None and isinstance(current[1], ScriptedSession) and current[1].delivered.is_set()


async def wait_until(pilot, predicate, timeout: float = 20.0, what: str = "condition") -> Any:
    """Let the app run until ``predicate()`` is true; its value is returned."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        await pilot.pause(0.05)
    raise AssertionError(f"{what}: not met within {timeout} s")


async def stop_the_run(pilot) -> None:
    """``s``, then ``y`` once the dashboard has asked: a run is never stopped by one key."""
    from gputui.tui.screens.stop_screen import StopRunScreen

    await pilot.press("s")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, StopRunScreen), what="asked to confirm the stop")
    await pilot.press("y")


async def shown(pilot) -> str:
    """The screen's text once pending redraws are done (panels redraw on a timer)."""
    from gputui.tui.screenshot import screen_text

    app = pilot.app
    await pilot.pause()
    app.refresh_dashboard(force=True)
    await pilot.pause()
    return screen_text(app)


async def close_all_and_quit(app, pilot, attempts: int = 40) -> None:
    """Close what is open, leave any text field, then q on the dashboard.

    After a storm, keys may still be queued and open a view after the dashboard was
    seen (q on a modal view does nothing: Textual's modal screens hold back the app's
    keys); so settle first, and go round again until the app has ended.
    """
    from textual.widgets import Input

    from gputui.tui.screens.dashboard_screen import DashboardScreen

    for _ in range(attempts):
        if not app.is_running:
            return
        await pilot.pause(0.1)
        on_dashboard = isinstance(app.screen, DashboardScreen) and not isinstance(app.focused, Input)
        await pilot.press("q" if on_dashboard else "escape")  # the preset filter (`/`) takes q as text
    raise AssertionError(f"the app did not quit: {app.screen_stack}")


def run_async(coro) -> Any:
    """Pilot tests are plain sync tests: no pytest-asyncio needed."""
    return asyncio.run(coro)


def shown_field(label: str, text: str) -> str:
    """A pattern for an editor form row on screen (tmux): the field's edges around exactly ``text``."""
    return rf"(?m)^ {label}\s+▊{text}\s*▎$"
