"""What a redraw of the dashboard writes (a test helper, no tests): the cells an update
writes to, a one-GPU scripted dashboard with a scrolling preset list, and samples for it."""

from __future__ import annotations

import dataclasses
import re

from gputui.model import Sample
from gputui.view.session_news import SampleArrived
from tests.support.dashboard import make_dashboard
from tests.support.fake_nvml import FakeGpu
from tests.support.tui import demo_preset, fixed_host, script_delivered, scripted_factory, shown, wait_until

SIZE = (140, 40)
CSI = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])")
IDLE_CORES = [2.0, 1.0, 3.0, 0.0, 4.0, 1.0, 2.0, 0.0, 1.0, 3.0, 2.0, 1.0, 0.0, 2.0, 1.0, 3.0]


def written_cells(data: str) -> set[tuple[int, int]]:
    """The cells (x, y) an update writes characters to."""
    cells: set[tuple[int, int]] = set()
    x = y = 0
    pos = 0
    for match in [*CSI.finditer(data), None]:
        text = data[pos : match.start() if match else len(data)]
        for char in text:
            if char in "\r\n":
                continue
            cells.add((x, y))
            x += 1
        if match is None:
            break
        params, command = match.groups()
        if command == "H":
            row, col = (params.split(";") + ["1", "1"])[:2]
            y, x = int(row or 1) - 1, int(col or 1) - 1
        elif command == "G":  # to a column of this row
            x = int(params or 1) - 1
        elif command == "C":  # forward along the row
            x += int(params or 1)
        pos = match.end()
    return cells


def in_region(cells: set[tuple[int, int]], region) -> set[tuple[int, int]]:
    return {(x, y) for x, y in cells if region.contains(x, y)}


def many_presets(count: int = 30) -> dict:
    """More presets than the list shows at 140x40: it has a scrollbar."""
    preset = demo_preset()
    presets = {preset.name: preset}
    presets.update({f"bench-{i:02d}": dataclasses.replace(preset, name=f"bench-{i:02d}") for i in range(count)})
    return presets


def one_gpu_app(tmp_path, presets=None, **kwargs):
    presets = presets or many_presets()
    return make_dashboard(
        presets,
        session_factory=scripted_factory([FakeGpu()], samples=4),
        start_preset="resnet50-demo",
        clock=lambda: 1000.0,
        settings_file=tmp_path / "settings.toml",
        user_themes_dir=tmp_path / "no-themes",
        confirm_quit=False,
        **kwargs,
    )


def sample(app, t: float, *, power_w: float = 300.0, cores: list[float] | None = None) -> SampleArrived:
    gpus = [dataclasses.replace(g.latest, power_w=power_w) for _, g in sorted(app.state.gpus.items())]
    host = dataclasses.replace(fixed_host(True), per_core=list(cores if cores is not None else IDLE_CORES))
    return SampleArrived(Sample(t=t, gpus=gpus, host=host))


async def started(app, pilot) -> None:
    await wait_until(pilot, lambda: app.state.run is not None and app.state.run.series.readings > 0 and app.state.gpus, what="the scripted run")
    await wait_until(pilot, lambda: script_delivered(app), what="the scripted run's news")
    await shown(pilot)
    await shown(pilot)
