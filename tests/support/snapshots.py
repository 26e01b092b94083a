"""The dashboard's snapshot scene (a test helper, no tests): a finding, eight GPUs, and the screen rendered once the script has played."""

from __future__ import annotations

from pathlib import Path

from gputui.record.schema import Baseline
from tests.support.dashboard import make_dashboard
from tests.support.fake_nvml import GIB, FakeGpu
from tests.support.tui import demo_preset, run_async, scripted_factory, shown, wait_until

FINDING = {
    "id": "input-1",
    "kind": "input_bound",
    "state": "open",
    "severity": "warning",
    "title": "Input pipeline is CPU-bound",
    "since": 8.0,
    "evidence": {"busiest_worker_cpu": 97.0},
    "advice": ["Raise num_workers"],
}


def eight_gpus() -> list[FakeGpu]:
    """An 8-GPU box: VRAM filling up across the GPUs, GPU3 thermally throttled, GPU5 power-capped."""
    return [
        FakeGpu(
            uuid=f"GPU-{i}",
            pci=(0, 0x19 + i, 0),
            memory_used=(3 + 11 * i) * GIB,
            throttle_mask={3: 0x20 | 0x40, 5: 0x4}.get(i, 0),
            sm_clock=1755 if i == 3 else 1980,
        )
        for i in range(8)
    ]


def render(
    size: tuple[int, int], tmp_path: Path, theme: str | None, gpus: list[FakeGpu] | None = None, factory=None, baseline: Baseline | None = None
) -> tuple[str, str]:
    preset = demo_preset()

    async def scenario():
        app = make_dashboard(
            {preset.name: preset},
            session_factory=factory or scripted_factory(gpus=gpus, findings=[FINDING]),
            baseline=baseline,
            start_preset=preset.name,
            theme=theme,
            clock=lambda: 1000.0,
            settings_file=tmp_path / "settings.toml",
            user_themes_dir=tmp_path / "no-themes",
        )
        async with app.run_test(size=size) as pilot:
            await wait_until(
                pilot,
                lambda: app.state.run is not None and app.state.run.series.readings == 96 and app.state.open_findings() and len(app.state.gpus[1].util) == 24,
                what="script played",
            )
            text = await shown(pilot)
            for _ in range(10):  # panels mounted by one pass draw in the next (a busy CI machine takes more): until it holds still
                again = await shown(pilot)
                if again == text:
                    break
                text = again
            return text, app.export_screenshot(title="gputui")

    return run_async(scenario())
