"""SessionParts: the one way the CLI, the dashboard and check assemble a session."""

from __future__ import annotations

import subprocess
import sys

from gputui.diagnosis_settings import Settings
from gputui.session.assemble import SessionParts
from gputui.session.session import SessionConfig
from gputui.telemetry.gpu import GpuTelemetry
from gputui.telemetry.host import HostTelemetry
from tests.support.fake_nvml import FakeGpu, FakeNvml
from tests.support.process import REPO


def test_each_session_gets_fresh_injected_telemetry_the_clock_and_its_diagnosis_table():
    made: list[GpuTelemetry] = []

    def fake_gpu() -> GpuTelemetry:
        made.append(GpuTelemetry(FakeNvml([FakeGpu()])))
        return made[-1]

    parts = SessionParts(gpu=fake_gpu, clock=lambda: 42.0)
    first = parts.build(SessionConfig(interval=0.5, diagnosis=Settings(thermal_warn_c=50.0)))
    second = parts.build(SessionConfig(interval=0.5))
    assert [first.gpu, second.gpu] == made and first.gpu is not second.gpu  # NVML opened per session
    assert isinstance(first.host, HostTelemetry)  # the real one where none is injected
    assert first.elapsed == 42.0  # the injected clock (the run has not started: t0 is 0)
    assert first.diagnoser.settings.thermal_warn_c == 50.0
    assert second.diagnoser.settings.thermal_warn_c != 50.0


def test_importing_the_factory_loads_no_sampler():
    code = "import sys, gputui.session.assemble; print(sorted(m for m in sys.modules if m.startswith('gputui.telemetry')))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
