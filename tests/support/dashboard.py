"""The dashboard as tests build it: one call with the keywords a test cares about, sorted
into the RunOptions, DashboardParts and DashboardLook that :func:`gputui.tui.app.make_app`
takes (a test names only what it changes)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from gputui.presets.preset import Config, Preset
from gputui.session.options import RunOptions
from gputui.tui.app import DashboardLook, DashboardParts, GpuTuiApp, make_app

# make_app's parts under the names the tests give them
_PARTS = {
    "gpu_factory": "gpu",
    "host_factory": "host",
    "clock": "clock",
    "session_factory": "session_factory",
    "check_factory": "check_factory",
    "history": "history",
}
_LOOK = {f.name for f in fields(DashboardLook)}
_OPTIONS = {f.name for f in fields(RunOptions)} - {"config", "preset"}


def make_dashboard(presets: dict[str, Preset], *, start_preset: str | None = None, diagnosis: dict[str, Any] | None = None, **given: Any) -> GpuTuiApp:
    """The dashboard over ``presets``, starting ``start_preset`` (a name) if given."""
    unknown = set(given) - set(_PARTS) - _LOOK - _OPTIONS
    if unknown:
        raise TypeError(f"make_dashboard: unknown keywords {sorted(unknown)}")
    options = RunOptions(
        config=Config(presets=presets, diagnosis=dict(diagnosis or {})),
        preset=presets[start_preset] if start_preset else None,
        **{k: v for k, v in given.items() if k in _OPTIONS},
    )
    parts = DashboardParts(**{_PARTS[k]: v for k, v in given.items() if k in _PARTS})
    look = DashboardLook(**{k: v for k, v in given.items() if k in _LOOK})
    return make_app(options, parts, look)
