"""The GPU panel from 1 to 8 GPUs: a row per GPU and a totals row where panels do
not fit side by side, the selected GPU's full panel under them (on a small screen
once enter asks for it), and one panel per GPU where they fit."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gputui.model import GpuSample
from gputui.record import events as ev
from gputui.record.events import make_event
from gputui.record.recording import read_recording
from gputui.record.schema import Baseline
from gputui.tui.widgets.gpu_panel import GpuPanel, GpuRows
from gputui.tui.widgets.gpu_rows import gpu_totals
from gputui.view.session_news import EventArrived, HeaderArrived
from gputui.view.state import DashboardState
from gputui.view.supervisor import SessionTicket
from tests.support.dashboard import make_dashboard
from tests.support.ddp import ddp_factory, straggler_finding
from tests.support.fake_nvml import FakeGpu
from tests.support.records import make_header, make_summary
from tests.support.snapshots import eight_gpus
from tests.support.tui import (
    demo_preset,
    run_async,
    scripted_factory,
    shown,
    stop_the_run,
    wait_until,
)


def dashboard(
    size: tuple[int, int],
    gpus: list[FakeGpu],
    tmp_path: Path,
    keys: tuple[str, ...] = (),
    click_row: int | None = None,
    factory=None,
    baseline: Baseline | None = None,
):
    """The screen's text after the script played and ``keys`` were pressed on the rows,
    with the GPU panels shown then."""
    preset = demo_preset()

    async def scenario():
        app = make_dashboard(
            {preset.name: preset},
            session_factory=factory or scripted_factory(gpus=gpus),
            baseline=baseline,
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


# -- A data-parallel run: each GPU's rank and its samples/s, the scaling, a straggler --


def gpu_row(lines: list[str], index: int) -> str:
    """GPU ``index``'s row at 80×24, its runs of spaces made one (rates are right-aligned)."""
    return " ".join(next(line for line in lines if line[24:].lstrip("▸ ").startswith(f"{index} ")).split())


def test_two_ranks_show_their_rates_in_their_gpus_rows_and_the_scaling_in_the_totals(tmp_path):
    two = eight_gpus()[:2]
    baseline = Baseline(samples_per_sec=1500.0, source="one.jsonl")
    text, *_ = dashboard((80, 24), two, tmp_path, factory=ddp_factory(two, world=2), baseline=baseline)
    lines = text.splitlines()
    assert "r0 1,355" in gpu_row(lines, 0) and "r1 1,355" in gpu_row(lines, 1)  # 2,710/s split in two
    totals = next(line for line in lines if " Σ " in line)
    assert "2,710/s" in totals and "scaling 90%" in totals  # 2,710 / (2 × 1,500)
    assert max(len(line.rstrip()) for line in lines) <= 80


def test_without_a_baseline_the_totals_give_no_scaling_and_a_plain_run_no_ranks(tmp_path):
    two = eight_gpus()[:2]
    text, *_ = dashboard((80, 24), two, tmp_path, factory=ddp_factory(two, world=2))
    assert "r0 1,355" in gpu_row(text.splitlines(), 0) and "scaling" not in text
    text, *_ = dashboard((80, 24), two, tmp_path, baseline=Baseline(samples_per_sec=1500.0, source="one.jsonl"))
    assert "r0" not in text and "scaling" not in text  # not data-parallel: no ranks, nothing to scale


def test_eight_ranks_at_200x60_name_the_straggler_in_its_gpus_row(tmp_path):
    eight = eight_gpus()
    factory = ddp_factory(eight, world=8, slow_rank=5, findings=[straggler_finding(5)])
    baseline = Baseline(samples_per_sec=400.0, source="one.jsonl")
    text, *_ = dashboard((200, 60), eight, tmp_path, factory=factory, baseline=baseline)
    lines = text.splitlines()
    assert "rank samples/s" in text
    row5 = " ".join(next(line for line in lines if " 5 H200" in line).split())
    assert "r5 271" in row5 and "straggler" in row5  # 80% of 2,710 / 8
    others = [line for line in lines if "H200" in line and " 5 H200" not in line and "╭" not in line]
    assert others and all("straggler" not in line for line in others)
    assert "r0 339" in " ".join(next(line for line in lines if " 0 H200" in line).split())
    assert "scaling 85% of 8× 400/s on one" in text  # 2,710 / (8 × 400)


def test_two_ranks_side_by_side_name_rank_rate_and_straggler_in_their_panels_and_the_scaling_above(tmp_path):
    two = eight_gpus()[:2]
    factory = ddp_factory(two, world=2, slow_rank=1, findings=[straggler_finding(1)])
    text, panels, _, rows_shown, *_ = dashboard((160, 48), two, tmp_path, factory=factory, baseline=Baseline(samples_per_sec=1500.0, source="one.jsonl"))
    assert panels == [0, 1] and not rows_shown  # full panels, no rows: the titles carry the ranks
    assert "GPU0 H200 · rank 0 1,355/s ─" in text
    assert "GPU1 H200 · rank 1 1,084/s · straggler ─" in text  # 80% of an even split
    assert "scaling 90%" in text  # 2,710 / (2 × 1,500), in the throughput figures
    assert text.count("· straggler") == 1  # its title only; GPU0's, above, names none

    plain, *_ = dashboard((160, 48), two, tmp_path, baseline=Baseline(samples_per_sec=1500.0, source="one.jsonl"))
    assert "rank 0" not in plain and "scaling" not in plain  # not data-parallel


def test_eight_ranks_at_80x24_stay_readable(tmp_path):
    eight = eight_gpus()
    factory = ddp_factory(eight, world=8, slow_rank=5, findings=[straggler_finding(5)])
    text, *_ = dashboard((80, 24), eight, tmp_path, factory=factory, baseline=Baseline(samples_per_sec=400.0, source="one.jsonl"))
    lines = text.splitlines()
    assert "r5 271" in gpu_row(lines, 5) and "strag" in gpu_row(lines, 5)
    assert "SwTherm" in gpu_row(lines, 3) and "r3 339" in gpu_row(lines, 3)  # the throttle flag still shows
    assert "scaling 85%" in next(line for line in lines if " Σ " in line)


def test_ranks_map_to_the_gpus_in_the_headers_order_the_pinned_order():
    state = DashboardState()
    ticket = SessionTicket(serial=1, preset=demo_preset(), run=1)
    state.session_started(ticket)
    header = make_header({"gpus": [{"index": 2, "name": "H200"}, {"index": 0, "name": "H200"}], "baseline": {"samples_per_sec": 100.0, "source": "x"}})
    state.apply(ticket, [HeaderArrived(header)])
    for rank, rate in ((0, 90.0), (1, 60.0)):
        state.apply(ticket, [EventArrived(make_event(1.0, ev.RANK_THROUGHPUT, {"rank": rank, "ranks": 2, "samples_per_sec": rate, "source": "gputui"}))])
    state.apply(ticket, [EventArrived(make_event(1.0, ev.THROUGHPUT, {"samples_per_sec": 150.0, "source": "gputui"}))])
    assert state.rank_of_gpu() == {2: 0, 0: 1}  # gpus = "2,0": rank 0 drives GPU2
    assert state.scaling_efficiency() == 0.75  # 150 / (2 × 100)
    state.apply(ticket, [EventArrived(make_event(2.0, ev.FINDING, straggler_finding(1)))])
    assert state.straggler_gpus() == {0}


def test_the_session_header_carries_the_baseline_and_the_dashboard_takes_one_with_its_preset(tmp_path):
    import argparse

    from gputui.cli.dashboard_cli import check_dashboard_options
    from gputui.cli.run_options import run_options
    from gputui.errors import UserError
    from gputui.record.recorder import Recorder
    from gputui.session.session import Session, SessionConfig
    from gputui.telemetry.gpu import GpuTelemetry
    from tests.support.fake_nvml import FakeNvml

    baseline = Baseline(samples_per_sec=1500.0, source="one.jsonl")
    gpu = GpuTelemetry(FakeNvml(eight_gpus()[:2]))
    assert Session(SessionConfig(baseline=baseline), gpu=gpu).build_header().baseline == baseline
    assert "baseline" not in Session(SessionConfig(), gpu=gpu).build_header().to_dict()

    one = tmp_path / "one.jsonl"
    recorder = Recorder(one)
    recorder.on_header(make_header({"schema": 1, "preset": {"name": "torch-resnet50-tuned"}}))
    recorder.on_summary(make_summary({"throughput": {"median": 4678.0, "readings": 40}}))
    recorder.close()
    args = argparse.Namespace(baseline=one, baseline_run=False, preset="torch-resnet50-tuned-ddp", presets=None, run_command=None, pid=None)
    args.__dict__.update(interval=1.0, duration=None, batch_size=None, no_probe=False, run_price=None, record=None, force=False)
    options = run_options(args)
    assert options.baseline == Baseline(samples_per_sec=4678.0, source=str(one), preset="torch-resnet50-tuned")
    assert options.session_config(options.preset).baseline == options.baseline  # its runs scale against it
    check_dashboard_options(options)
    with pytest.raises(UserError, match=r"^--baseline: expected --preset NAME too"):
        check_dashboard_options(dataclasses.replace(options, preset=None))


def test_the_dashboard_measures_the_one_gpu_twin_first_then_runs_the_ddp_preset_against_it(tmp_path):
    """--preset NAME --baseline-run: the twin runs (and ends) first, no summary over it;
    its median becomes the baseline in the DDP run's header, and the scaling shows."""
    from gputui.tui.screens.summary_screen import SummaryScreen
    from tests.support.ddp import DataParallelSession
    from tests.support.fake_nvml import FakeNvml
    from tests.support.tui import ScriptedSession

    two = eight_gpus()[:2]
    ddp = dataclasses.replace(demo_preset(), name="resnet50-ddp", data_parallel=2)
    configs = []

    def make(config):
        configs.append(config)
        if config.preset is not None and config.preset.data_parallel is None:  # the twin: plays its script and ends
            twin = ScriptedSession(config, FakeNvml(two))
            twin.stop("duration reached")
            return twin
        return DataParallelSession(config, FakeNvml(two), world=2, slow_rank=None, findings=None)

    async def scenario():
        app = make_dashboard({ddp.name: ddp}, session_factory=make, start_preset=ddp.name, baseline_run=True, clock=lambda: 1000.0,
                       record_path=tmp_path / "ddp.jsonl", settings_file=tmp_path / "settings.toml", user_themes_dir=tmp_path / "none")  # fmt: skip
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_until(
                pilot, lambda: app.state.run is not None and app.state.run.preset.name == ddp.name and app.state.run.series.readings == 96, what="the DDP run"
            )
            text = await shown(pilot)
            assert not isinstance(app.screen, SummaryScreen)  # the twin's summary did not cover the run
            return text, [run.preset.name for run in app.state.runs], app.state.header.baseline if app.state.header else None

    text, runs, baseline = run_async(scenario())
    assert runs == ["resnet50-ddp (one GPU)", "resnet50-ddp"]
    run_configs = [c for c in configs if c.preset is not None]
    assert [c.preset.data_parallel for c in run_configs] == [None, 2] and run_configs[0].baseline is None
    assert baseline is not None and baseline == run_configs[1].baseline and baseline.source == "this session, one GPU"
    assert baseline.samples_per_sec == pytest.approx(2850.0, abs=60)  # the script's measured median
    assert "one-GPU baseline: 2," in text and "starting resnet50-ddp" in text
    assert "scaling 4" in text  # 2,710 / (2 × ~2,850)
    header = read_recording(tmp_path / "ddp.jsonl").header  # --record keeps the DDP run, as headless does, not the twin
    assert header.preset.name == "resnet50-ddp" and header.baseline == baseline


def test_stopping_the_one_gpu_twin_starts_nothing(tmp_path):
    ddp = dataclasses.replace(demo_preset(), name="resnet50-ddp", data_parallel=2)

    async def scenario():
        app = make_dashboard({ddp.name: ddp}, session_factory=scripted_factory(gpus=eight_gpus()[:2]), start_preset=ddp.name, baseline_run=True,
                       settings_file=tmp_path / "settings.toml", user_themes_dir=tmp_path / "none")  # fmt: skip
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: app.state.live_run is not None and app.state.live_run.series.readings == 96, what="the twin")
            await stop_the_run(pilot)
            await wait_until(pilot, lambda: app.state.run is not None and app.state.run.ended, what="the twin stopped")
            await pilot.pause(0.3)
            return [run.preset.name for run in app.state.runs], [text for _, text in app.state.log]

    runs, log = run_async(scenario())
    assert runs == ["resnet50-ddp (one GPU)"]
    assert "--baseline-run: the one-GPU run was stopped; resnet50-ddp was not started" in log


def test_the_baseline_options_are_checked_before_anything_starts():
    from gputui.errors import UserError
    from gputui.session.baseline import check_baseline_options

    ddp = dataclasses.replace(demo_preset(), data_parallel=2)
    check_baseline_options(None, True, ddp)  # fine
    check_baseline_options(Path("one.jsonl"), False, None)  # the dashboard's own check asks for --preset
    with pytest.raises(UserError, match=r"^--baseline and --baseline-run: give one"):
        check_baseline_options(Path("one.jsonl"), True, ddp)
    with pytest.raises(UserError, match=r"^--baseline-run: expected --preset NAME"):
        check_baseline_options(None, True, None)
    with pytest.raises(UserError, match=r"^--baseline-run: preset 'resnet50-demo' is not data-parallel"):
        check_baseline_options(None, True, demo_preset())


@pytest.mark.parametrize("size, gpu_count", [((160, 48), 2), ((200, 60), 8)], ids=["2-panels", "8-rows-and-a-panel"])
def test_panels_laid_out_before_the_first_sample_grow_to_their_rows_when_it_comes(tmp_path, size, gpu_count):
    """#gpus is a grid of auto rows, which Textual sizes by the panels' lines, not their
    CSS height: a panel laid out while it said "waiting for the first sample…" kept one
    row (the snapshots caught it about one run in four on this repo's VM)."""
    import threading

    from tests.support.fake_nvml import FakeNvml
    from tests.support.tui import ScriptedSession

    gate = threading.Event()

    class FirstSampleLate(ScriptedSession):
        def _tick(self, i: int, running: bool) -> None:
            if i == 0:
                gate.wait(20)
            super()._tick(i, running)

    gpus = eight_gpus()[:gpu_count]
    app = make_dashboard(
        {demo_preset().name: demo_preset()},
        session_factory=lambda config: FirstSampleLate(config, FakeNvml(gpus), samples=4),
        start_preset=demo_preset().name,
        clock=lambda: 1000.0,
        settings_file=tmp_path / "settings.toml",
        user_themes_dir=tmp_path / "no-themes",
    )

    async def scenario():
        async with app.run_test(size=size) as pilot:
            await wait_until(pilot, lambda: app.state.gpus and app.dashboard.query(GpuPanel), what="the panels")
            first = app.dashboard.query_one("#gpu-0", GpuPanel)
            await wait_until(pilot, lambda: "waiting for the first sample" in panel_text(first), what="a waiting panel")
            await shown(pilot)  # laid out while waiting
            gate.set()
            await wait_until(pilot, lambda: app.state.gpus[0].latest is not None, what="the first sample")
            await shown(pilot)
            await shown(pilot)
            assert first.region.height == 8 and first.size.height == 6, (first.region, first.size)
            assert "VRAM" in panel_text(first)

    run_async(scenario())


def panel_text(panel: GpuPanel) -> str:
    return "\n".join(strip.text for strip in (panel.render_line(y) for y in range(panel.size.height)))
