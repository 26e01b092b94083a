"""The dashboard as tests build it: one call with the keywords a test cares about, sorted
into the RunOptions, DashboardParts and DashboardLook that :func:`gputui.tui.live_app.make_app`
takes (a test names only what it changes).  Also the dashboard most key-driven tests use
(``app_for``: fake GPUs, its own settings file), the ``isolated`` fixture's presets, and a
dashboard with kept runs to open and compare (``dashboard_with_history``)."""

from __future__ import annotations

import shutil
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from gputui.live.wiring import RunWiring
from gputui.presets.preset import Config, Preset, load_presets
from gputui.session.assemble import SessionParts
from gputui.session.options import RunOptions
from gputui.telemetry.gpu import GpuTelemetry
from gputui.tui.live_app import DashboardLook, DashboardParts, GpuTuiApp, make_app
from tests.support.fake_nvml import FakeGpu, FakeNvml
from tests.support.process import REPO
from tests.support.replay import INPUT_BOUND
from tests.support.tui import scripted_factory

# make_app's parts under the names the tests give them
_SESSION_PARTS = {"gpu_factory": "gpu", "host_factory": "host", "clock": "clock"}
_PARTS = {"session_factory", "check_factory"}
_WIRING = {f.name for f in fields(RunWiring)} - {"metrics_address", "price_per_hour"}
_LOOK = {f.name for f in fields(DashboardLook)}
_OPTIONS = {f.name for f in fields(RunOptions)} - {"config", "preset"}


def make_dashboard(presets: dict[str, Preset], *, start_preset: str | None = None, diagnosis: dict[str, Any] | None = None, **given: Any) -> GpuTuiApp:
    """The dashboard over ``presets``, starting ``start_preset`` (a name) if given."""
    unknown = set(given) - set(_SESSION_PARTS) - _PARTS - _WIRING - _LOOK - _OPTIONS
    if unknown:
        raise TypeError(f"make_dashboard: unknown keywords {sorted(unknown)}")
    options = RunOptions(
        config=Config(presets=presets, diagnosis=dict(diagnosis or {})),
        preset=presets[start_preset] if start_preset else None,
        **{k: v for k, v in given.items() if k in _OPTIONS},
    )
    parts = DashboardParts(
        session=SessionParts(**{_SESSION_PARTS[k]: v for k, v in given.items() if k in _SESSION_PARTS}),
        wiring=RunWiring(**{k: v for k, v in given.items() if k in _WIRING}),
        **{k: v for k, v in given.items() if k in _PARTS},
    )
    look = DashboardLook(**{k: v for k, v in given.items() if k in _LOOK})
    return make_app(options, parts, look)


LONG_SMOKE = """
[presets.smoke-long]
description = "the smoke workload, long enough to stop by hand"
framework = "smoke"
batch_size = 64
steps = 1000000
warmup_steps = 3
"""


@pytest.fixture
def isolated(tmp_path):
    """No user presets, themes or settings leak in; the built-in smoke preset and a long one."""
    extra = tmp_path / "long.toml"
    extra.write_text(LONG_SMOKE)
    return load_presets(extra=extra, cwd=tmp_path)


def fake_gpus(count: int = 2):
    return lambda: GpuTelemetry(FakeNvml([FakeGpu(uuid=f"GPU-{i}") for i in range(count)]))


def scripted_dashboard(preset: Preset, tmp_path: Path) -> GpuTuiApp:
    """The dashboard playing ``preset``'s scripted run (tests.support.tui) at a fixed clock,
    with its own settings file and no user themes: what the drawing tests look at."""
    return make_dashboard(
        {preset.name: preset},
        session_factory=scripted_factory(),
        start_preset=preset.name,
        clock=lambda: 1000.0,
        settings_file=tmp_path / "settings.toml",
        user_themes_dir=tmp_path / "no-themes",
    )


def app_for(presets, tmp_path: Path, **kwargs) -> GpuTuiApp:
    kwargs.setdefault("gpu_factory", fake_gpus())
    return make_dashboard(presets, settings_file=tmp_path / "xdg" / "gputui" / "settings.toml", interval=0.25, **kwargs)


def dashboard_with_history(tmp_path):
    from gputui.record.history import RunHistory
    from tests.support.tui import demo_preset, scripted_factory

    folder = tmp_path / "runs"
    folder.mkdir()
    shutil.copy(INPUT_BOUND, folder / "20261121-072940-torch-resnet50-input-bound.jsonl")
    shutil.copy(REPO / "docs" / "recordings" / "torch-resnet50.jsonl", folder / "20261121-080000-torch-resnet50.jsonl")
    preset = demo_preset()
    return make_dashboard({preset.name: preset}, session_factory=scripted_factory(samples=2), settings_file=tmp_path / "s.toml", history=RunHistory(folder))
