"""The GPU panel from 1 to 8 GPUs: a row per GPU and a totals row where panels do
not fit side by side, the selected GPU's full panel under them (on a small screen
once enter asks for it), and one panel per GPU where they fit."""

from __future__ import annotations

from pathlib import Path

from gputui.model import GpuSample
from gputui.tui.app import make_app
from gputui.tui.widgets.gpu import GpuPanel, GpuRows
from gputui.tui.widgets.gpu_rows import gpu_totals
from tests.support.fake_nvml import FakeGpu
from tests.support.tui import (
    demo_preset,
    run_async,
    scripted_factory,
    shown,
    wait_until,
)
from tests.test_tui_snapshots import eight_gpus


def dashboard(size: tuple[int, int], gpus: list[FakeGpu], tmp_path: Path, keys: tuple[str, ...] = (), click_row: int | None = None):
    """The screen's text after the script played and ``keys`` were pressed on the rows,
    with the GPU panels shown then."""
    preset = demo_preset()

    async def scenario():
        app = make_app(
            {preset.name: preset},
            session_factory=scripted_factory(gpus=gpus),
            start_preset=preset.name,
            clock=lambda: 1000.0,
            settings_file=tmp_path / "settings.toml",
            user_themes_dir=tmp_path / "none",
        )
        async with app.run_test(size=size) as pilot:
            await wait_until(
                pilot, lambda: app.state.run is not None and app.state.run.series.readings == 96 and len(app.state.gpus[0].util) == 24, what="script played"
            )
            await shown(pilot)
            rows = app.dashboard.query_one(GpuRows)
            if keys:
                rows.focus()
                for key in keys:
                    await pilot.press(key)
            if click_row is not None:
                await pilot.click(GpuRows, offset=(3, click_row))
            text = await shown(pilot)
            shown_panels = [p.index for p in app.dashboard.query(GpuPanel) if p.display]
            heights = {p.index: p.region.height for p in app.dashboard.query(GpuPanel) if p.display}
            return text, shown_panels, heights, rows.display, rows.region.bottom, app.size

    return run_async(scenario())


def test_eight_gpus_at_80x24_fit_as_rows_with_a_totals_row(tmp_path):
    text, panels, _, rows_shown, rows_bottom, size = dashboard((80, 24), eight_gpus(), tmp_path)
    lines = text.splitlines()
    assert rows_shown and panels == []  # no detail until asked for: the screen is small
    assert rows_bottom <= size.height - 1  # all rows above the footer
    for i in range(8):
        assert any(line[24:].lstrip("▸ ").startswith(f"{i} ") for line in lines), f"row for GPU{i}"
    gpu3 = next(line for line in lines if line[24:].lstrip("▸ ").startswith("3 "))
    assert "SwTherm +1" in gpu3 and "36/141G" in gpu3  # throttle flag, severe first; VRAM
    assert "PwrCap" in next(line for line in lines if line[24:].lstrip("▸ ").startswith("5 "))
    totals = next(line for line in lines if " Σ " in line)
    assert "/s" in totals and "J/sample" in totals and "W" in totals


def test_drill_down_on_a_small_screen_opens_and_closes_the_full_panel(tmp_path):
    text, panels, heights, *_ = dashboard((80, 24), eight_gpus(), tmp_path, keys=("down", "down", "down", "enter"))
    assert panels == [3] and heights[3] == 7
    assert "GPU3 H200 (enter closes)" in text and "SwThermalSlowdown" in text and "clock 1755/1980 MHz" in text
    _, panels, *_ = dashboard((80, 24), eight_gpus(), tmp_path, keys=("down", "enter", "enter"))
    assert panels == []


def test_eight_gpus_at_200x60_show_rows_and_the_selected_gpus_panel(tmp_path):
    text, panels, heights, rows_shown, *_ = dashboard((200, 60), eight_gpus(), tmp_path, keys=("down", "down"))
    assert rows_shown and panels == [2] and heights[2] == 8
    assert "GPU             util     SM  VRAM GiB" in text
    assert "Σ8 GPUs" in text and "╭─ GPU2 H200" in text
    assert "SwTherm HwTherm" in text  # GPU3's flags in its row, while GPU2's panel shows


def test_a_click_selects_a_row(tmp_path):
    _, panels, *_ = dashboard((200, 60), eight_gpus(), tmp_path, click_row=1 + 1 + 5)  # border, header, GPU5
    assert panels == [5]


def test_gpus_that_fit_side_by_side_keep_their_panels(tmp_path):
    two = eight_gpus()[:2]
    _, panels, _, rows_shown, *_ = dashboard((160, 48), two, tmp_path)
    assert panels == [0, 1] and not rows_shown
    _, panels, _, rows_shown, *_ = dashboard((80, 24), eight_gpus()[:1], tmp_path)
    assert panels == [0] and not rows_shown  # one GPU: its one-line panel, no totals needed


def test_totals_are_power_and_energy_per_sample():
    samples = [GpuSample(index=0, power_w=300.0), GpuSample(index=1, power_w=500.0), GpuSample(index=2, lost=True, power_w=900.0), GpuSample(index=3)]
    assert gpu_totals(samples, 400.0) == (800.0, 2.0)
    assert gpu_totals(samples, None) == (800.0, None)
    assert gpu_totals([GpuSample(index=0)], 400.0) == (None, None)
