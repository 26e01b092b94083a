"""`gputui replay`: a recording played back through the live dashboard's bridge, state
and widgets.  The CLI's errors come before any screen; the Pilot tests seek in a real
H200 recording and read the widgets back."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from gputui import fmt
from gputui.record import events as ev
from gputui.record.recording import read_recording
from gputui.tui.replay_app import make_replay_app
from gputui.tui.screens.summary_screen import SummaryScreen
from gputui.tui.widgets.gpu_panel import GpuPanel
from gputui.tui.widgets.throughput_chart import ThroughputChart
from gputui.view.replay_player import ReplayPlayer
from tests.support.dashboard import dashboard_with_history
from tests.support.process import run_gputui
from tests.support.replay import INPUT_BOUND, cut_copy
from tests.support.tui import run_async, shown, wait_until


def as_recorded_at(recording, t: float):
    """What the recording says at ``t``: the last sample, and the last live reading."""
    sample = [s for s in recording.samples if s.t <= t][-1]
    readings = [e for e in recording.events_of(ev.THROUGHPUT) if e.t <= t and not e.data.get("final")]
    return sample, readings[-1].data["samples_per_sec"]


# -- The command line --------------------------------------------------------------------


def test_replay_errors_are_one_line_before_any_screen(tmp_path):
    newer = tmp_path / "newer.jsonl"
    lines = INPUT_BOUND.read_text(encoding="utf-8").splitlines(keepends=True)
    header = json.loads(lines[0])
    header["schema"] = 99
    newer.write_text(json.dumps(header) + "\n" + "".join(lines[1:]), encoding="utf-8")
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n")
    cases = [
        ([str(newer)], f"{newer}:1: recording format 99 is newer than this gputui reads (up to 1): upgrade gputui"),
        ([str(notes)], f"{notes}:1: not a gputui recording line"),
        ([str(tmp_path / "absent.jsonl")], f"{tmp_path / 'absent.jsonl'}: no such file"),
        ([str(INPUT_BOUND), "--speed", "fast"], "--speed: expected a factor greater than 0"),
        ([str(INPUT_BOUND), "--speed", "0"], "--speed: expected a factor greater than 0"),
        ([str(INPUT_BOUND)], "replay needs a terminal"),  # a good file, but no terminal here
    ]
    for args, expected in cases:
        result = run_gputui(["replay", *args], tmp_path, timeout=60)
        assert result.returncode == 2, (args, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0], (args, result.stderr)
        assert "Traceback" not in result.stderr


def test_speed_is_a_factor_or_max():
    from gputui.cli.replay_cli import parse_speed

    assert parse_speed("max") is None and parse_speed("MAX") is None
    assert parse_speed("10x") == 10.0 and parse_speed("60") == 60.0 and parse_speed("0.5") == 0.5


def test_read_recording_refuses_a_newer_format_for_every_reader(tmp_path):
    path = tmp_path / "newer.jsonl"
    path.write_text('{"type":"header","schema":2}\n')
    from gputui.errors import UserError

    with pytest.raises(UserError, match="recording format 2 is newer"):
        read_recording(path)


# -- The player ---------------------------------------------------------------------------


def test_the_player_folds_the_recording_as_the_live_app_does_and_seeks_both_ways():
    recording = read_recording(INPUT_BOUND)
    player = ReplayPlayer(recording)
    finding_t = player.next_finding()
    assert finding_t == recording.events_of(ev.FINDING)[0].t
    player.seek(finding_t)
    state = player.state
    sample, rate = as_recorded_at(recording, finding_t)
    assert state.gpus[0].latest == sample.gpus[0]
    assert state.run.current == rate and state.run.phase == "measure" and not state.run.ended
    assert [f.kind for f in state.open_findings()] == ["input_bound"]

    player.seek(player.end_t)  # the end: the recorded summary and outcome, as a live run's
    run = player.state.run
    assert run.ended and run.outcome_word == "ok" and run.summary == recording.summary
    assert run.result == pytest.approx(132.92, abs=0.01)

    player.seek(player.measure_t())  # back: a fresh fold, up to the measured phase
    assert player.state is not state
    assert player.state.run.phase == "measure" and not player.state.run.ended
    assert not player.state.open_findings()
    assert player.state.versions["gpus"] > state.versions["gpus"]  # widgets see the change


def test_a_cut_recording_replays_to_where_it_ends_and_says_so(tmp_path):
    recording = read_recording(cut_copy(tmp_path))
    assert recording.cut
    player = ReplayPlayer(recording, speed=None)
    while not player.at_end:
        player.advance(0.1)
    assert player.position == recording.samples[-1].t or player.position == recording.events[-1].t
    run = player.state.run
    assert run.ended and run.outcome_word == "cut" and run.summary is None
    assert player.state.replay.text().endswith("cut here")
    assert any("the recording ends here" in line for _, line in player.state.log)


# -- The dashboard --------------------------------------------------------------------------


def test_replay_seeks_to_the_finding_and_the_widgets_show_that_moment(tmp_path):
    recording = read_recording(INPUT_BOUND)
    finding_t = recording.events_of(ev.FINDING)[0].t
    sample, rate = as_recorded_at(recording, finding_t)
    gpu = sample.gpus[0]

    async def scenario():
        app = make_replay_app(recording, start_paused=True, settings_file=tmp_path / "s.toml", user_themes_dir=tmp_path / "no-themes")
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_until(pilot, lambda: app.dashboard.query(GpuPanel), what="GPU panel")
            assert "REPLAY ❚❚ 1x 0:00/0:45" in await shown(pilot)
            await pilot.press("right_square_bracket")
            await wait_until(pilot, lambda: app.state.open_findings(), what="the finding")
            text = await shown(pilot)
            panel = app.dashboard.query_one(GpuPanel)
            panel_text = panel.render().plain
            assert f"util  {fmt.pct(gpu.util_gpu):>4}  SM {fmt.pct(gpu.sm_active):>4}" in panel_text
            assert f"{fmt.gib(gpu.memory_used)}/{fmt.gib(gpu.memory_total)} GiB" in panel_text
            assert f"{fmt.num(gpu.power_w)}/{fmt.num(gpu.power_limit_w, ' W')}" in panel_text
            chart = app.dashboard.query_one(ThroughputChart).render().plain
            assert chart.startswith(f"{fmt.rate(rate)} samples/s now")
            assert f"REPLAY ❚❚ 1x {fmt.duration(finding_t)}/0:45" in text
            assert "Input-bound: GPU SM activity 12%" in text

            await pilot.press("m")  # back to where measuring began: no finding yet
            await wait_until(pilot, lambda: not app.state.open_findings(), what="seek back")
            await pilot.press("end")
            await wait_until(pilot, lambda: app.state.run.ended, what="the end")
            text = await shown(pilot)
            assert "133 samples/s median" in text and "REPLAY ❚❚ 1x 0:45/0:45 end" in text
            assert not isinstance(app.screen, SummaryScreen)  # a replay never pops up on its own
            await pilot.press("u")
            await wait_until(pilot, lambda: isinstance(app.screen, SummaryScreen), what="summary")
            assert "throughput median" in await shown(pilot)

    run_async(scenario())


def test_replay_plays_at_the_chosen_speed_and_never_runs_or_opens_nvml(tmp_path, monkeypatch):
    import pynvml

    from gputui.run.runner import Runner

    def forbidden(*args, **kwargs):
        raise AssertionError("a replay must not open NVML or start a run")

    monkeypatch.setattr(pynvml, "nvmlInit", forbidden)
    monkeypatch.setattr(Runner, "start", forbidden)
    recording = read_recording(INPUT_BOUND)

    async def scenario():
        app = make_replay_app(recording, speed=None, settings_file=tmp_path / "s.toml")
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: app.player.at_end, what="played to the end at max speed")
            assert app.state.run.outcome_word == "ok"
            await pilot.press("enter")  # the preset list: a replay runs nothing
            await pilot.press("r")
            await pilot.press("home")
            assert app.player.position == 0.0 and not app.state.run.ended
            await pilot.press("3", "space")
            assert app.player.speed == 60.0 and app.player.playing
            await wait_until(pilot, lambda: app.player.position > 1.0, what="playing at 60x")
            assert "REPLAY ▶ 60x" in await shown(pilot)

    run_async(scenario())


def test_a_kept_runs_name_finds_its_file_for_replay_report_compare_and_export(tmp_path, monkeypatch):
    from gputui.lookback.load import find_recording as resolve  # what each of them reads through

    runs = tmp_path / "state" / "gputui" / "runs"
    runs.mkdir(parents=True)
    shutil.copy(INPUT_BOUND, runs / "20261121-072940-torch-resnet50-input-bound.jsonl")
    monkeypatch.chdir(tmp_path)
    assert resolve(Path("20261121-072940-torch-resnet50-input-bound")) == runs / "20261121-072940-torch-resnet50-input-bound.jsonl"
    assert resolve(Path("elsewhere.jsonl")) == Path("elsewhere.jsonl")


# -- The Runs list: past runs open, two marked compare ------------------------------------------


def test_enter_on_a_kept_run_opens_its_summary_from_the_recording(tmp_path):
    from gputui.tui.widgets.runs import RunsList

    async def scenario():
        app = dashboard_with_history(tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: len(app.state.history) == 2, what="history listed")
            text = await shown(pilot)
            day = app.state.history[0].local_time()[5:10]  # MM-DD, in this machine's time zone
            # the preset names stay whole (issue 25), and so do the day and the figure, on a line of their own
            assert "✓ torch-resnet50 " in text and "✓ torch-resnet50-input-bound " in text
            assert re.search(rf"  {day} \d\d:\d\d +1,790/s", text) and re.search(rf"  {day} \d\d:\d\d +133/s", text), text
            await pilot.press("tab")
            runs = app.dashboard.query_one(RunsList)
            assert runs.has_focus
            await pilot.press("down")  # the second entry: the older, input-bound run
            assert runs.selected.path.name.endswith("input-bound.jsonl")
            await pilot.press("enter")
            await wait_until(pilot, lambda: isinstance(app.screen, SummaryScreen), what="its summary")
            text = await shown(pilot)
            assert "torch-resnet50-input-bound — ok" in text and "throughput median" in text and "133" in text
            await pilot.press("r")  # run again: that run's own preset, which this machine does not have
            await wait_until(pilot, lambda: any("No preset named 'torch-resnet50-input-bound'" in n.message for n in app._notifications), what="the note")
            assert not any(run.ticket.is_run for run in app.state.runs)

    run_async(scenario())


def test_two_marked_runs_open_the_comparison_or_say_it_is_missing(tmp_path, monkeypatch):
    import sys
    import types

    from gputui.tui.screens.compare_screen import CompareScreen

    async def mark_two(app, pilot):
        await wait_until(pilot, lambda: len(app.state.history) == 2, what="history listed")
        await pilot.press("tab", "c", "down", "c")

    async def missing():
        app = dashboard_with_history(tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await mark_two(app, pilot)
            await wait_until(pilot, lambda: any("needs gputui.lookback.compare" in n.message for n in app._notifications), what="the note")
            assert not isinstance(app.screen, CompareScreen)

    monkeypatch.setitem(sys.modules, "gputui.lookback.compare", None)  # not merged yet: ImportError
    run_async(missing())

    seen = []
    fake = types.ModuleType("gputui.lookback.compare")

    def compare_rows(recordings, labels=None):
        seen.extend(r.header.preset_name for r in recordings)
        return ["", "A", "B"], [["median samples/s", "1,771", "133"]]

    fake.compare_rows = compare_rows

    async def present():
        app = dashboard_with_history(tmp_path / "again")
        async with app.run_test(size=(120, 40)) as pilot:
            await mark_two(app, pilot)
            await wait_until(pilot, lambda: isinstance(app.screen, CompareScreen), what="the comparison")
            text = await shown(pilot)
            assert "median samples/s" in text and "1,771" in text

    (tmp_path / "again").mkdir()
    monkeypatch.setitem(sys.modules, "gputui.lookback.compare", fake)
    run_async(present())
    assert sorted(seen) == ["torch-resnet50", "torch-resnet50-input-bound"]
