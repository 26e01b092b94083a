"""`gputui` in a real terminal: tmux at 80×24, keys alone, the screen read back with
``capture-pane``; and the ways a dashboard session ends (q, SIGTERM, a dropped
terminal) leave no process of the benchmark behind."""

from __future__ import annotations

import os
import shutil

import psutil
import pytest

from gputui.record.recording import read_recording
from tests.support.process import run_gputui
from tests.support.tmux import needs_tmux, tmux, wait_gone  # noqa: F401  (tmux: the fixture)

# Real terminals waited on by the screenful, and keys sent without delay: run after the
# parallel pass, alone (a test elsewhere that uses the tmux fixture is marked serial too).
pytestmark = pytest.mark.serial


def descendants(pid: int) -> list[int]:
    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


@needs_tmux
def test_run_smoke_by_keys_at_80x24_see_throughput_quit_and_leave_no_child(tmux):  # noqa: F811
    gputui = tmux.start(["--presets", "long.toml"], term="screen")  # screen: 16 colours
    tmux.wait_for(r"Presets")
    tmux.wait_for(r"○ watching")
    tmux.keys("Enter")  # smoke: the first preset
    match = tmux.wait_for(r"throughput median\s+([\d,]+) samples/s", timeout=60)
    assert float(match.group(1).replace(",", "")) > 0
    tmux.keys("Escape")
    # Keys typed faster than a terminal app reads them may merge with an Escape into
    # one sequence, as on a real slow link: wait for each key's effect.
    tmux.wait_until_gone(r"Enter/Esc close")
    tmux.wait_for(r"✓ #1 smoke")
    tmux.keys("Down")
    tmux.wait_for(r"(?m)^smoke-long")  # the details show the highlighted preset
    tmux.keys("Enter")  # smoke-long: runs until stopped
    tmux.wait_for(r"● #2 smoke-long")
    tmux.wait_for(r"[\d,]+ samples/s now")
    children = descendants(gputui)
    assert children, "the benchmark runs under gputui"
    screen = tmux.screen()
    assert len(screen.splitlines()) <= 24 and max(len(line) for line in screen.splitlines()) <= 80
    for title in ("Throughput", "CPU", "GPUs", "Output", "Runs"):
        assert title in screen, f"{title} panel missing at 80x24:\n{screen}"
    # TERM=screen offers 16 colours: the app must keep to them (no 256-colour or RGB escapes).
    coloured = tmux.screen_with_colours()
    assert "\x1b[" in coloured and "38;5;" not in coloured and "38;2;" not in coloured
    tmux.keys("q")  # a run is going: gputui asks for a second q
    tmux.wait_for(r"press q again")
    assert descendants(gputui), "one q stopped the run"
    tmux.keys("q")
    wait_gone([gputui, *children])


@needs_tmux
def test_ctrl_c_quits_and_stops_the_benchmark_group(tmux):  # noqa: F811
    gputui = tmux.start(["--presets", "long.toml", "--preset", "smoke-long"])  # tmux-256color
    tmux.wait_for(r"[\d,]+ samples/s now")
    children = descendants(gputui)
    assert children
    coloured = tmux.screen_with_colours()
    assert "38;5;" in coloured and "38;2;" not in coloured  # 256 colours, as the terminal offers
    tmux.keys("C-c")  # a run is going: gputui asks for a second press
    tmux.wait_for(r"press q again")
    tmux.keys("C-c")
    wait_gone([gputui, *children])


@needs_tmux
def test_a_dropped_terminal_stops_the_benchmark_group(tmux):  # noqa: F811
    gputui = tmux.start(["--presets", "long.toml", "--preset", "smoke-long"])
    tmux.wait_for(r"[\d,]+ samples/s now")
    children = descendants(gputui)
    assert children
    tmux.kill_server()  # what a dropped SSH connection does: SIGHUP, and the terminal is gone
    wait_gone([gputui, *children])


@needs_tmux
def test_sigterm_stops_the_benchmark_group_and_finishes_the_recording(tmux, tmp_path):  # noqa: F811
    record = tmp_path / "run.jsonl"
    gputui = tmux.start(["--presets", "long.toml", "--preset", "smoke-long", "--record", str(record)])
    tmux.wait_for(r"REC run.jsonl")
    tmux.wait_for(r"[\d,]+ samples/s now")
    children = descendants(gputui)
    os.kill(gputui, 15)
    wait_gone([gputui, *children])
    recording = read_recording(record)
    assert recording.summary is not None and recording.summary.outcome.kind == "stopped"


@needs_tmux
def test_record_on_a_terminal_shows_the_dashboard(tmux, tmp_path):  # noqa: F811
    record = tmp_path / "smoke.jsonl"
    gputui = tmux.start(["--record", str(record), "--preset", "smoke"])
    tmux.wait_for(r"throughput median", timeout=60)
    tmux.wait_for(r"✓ saved smoke.jsonl")  # the header: the file is finished
    tmux.keys("q")
    wait_gone([gputui])
    recording = read_recording(record)
    assert recording.summary.outcome.ok is True and recording.summary.throughput.median > 0


def test_without_a_terminal_the_dashboard_says_how_to_record(tmp_path):
    result = run_gputui([], tmp_path, timeout=60)
    assert result.returncode == 2 and "needs a terminal: use --record FILE" in result.stderr
    result = run_gputui(["--headless"], tmp_path, timeout=60)
    assert result.returncode == 2 and "--headless needs --record FILE" in result.stderr


KEPT_RUN = "torch-resnet50-input-bound.jsonl"


@needs_tmux
def test_open_a_past_run_from_the_runs_list_by_keys(tmux, tmp_path):  # noqa: F811
    from tests.support.process import REPO

    runs = tmp_path / "state" / "gputui" / "runs"  # XDG_STATE_HOME of gputui_env
    runs.mkdir(parents=True)
    shutil.copy(REPO / "docs" / "recordings" / KEPT_RUN, runs / KEPT_RUN)
    gputui = tmux.start([])
    tmux.wait_for(r"○ watching")
    tmux.wait_for(r"✓ torch-resnet50-inpu…")  # the kept run, in the Runs list: its name before its date and figure
    tmux.keys("Tab")  # from the presets to the runs
    tmux.wait_for(r"⏎ Open .*q Quit")  # the footer: the Runs list has the focus
    tmux.keys("Enter")
    tmux.wait_for(r"torch-resnet50-input-bound — ok")
    screen = tmux.wait_for(r"throughput median\s+133 samples/s").string
    assert "Input-bound" in screen or "input_bound" in screen, screen
    tmux.keys("Escape")
    tmux.wait_until_gone(r"Enter/Esc close")
    tmux.keys("q")
    wait_gone([gputui])


@needs_tmux
def test_replay_plays_a_recording_to_its_end(tmux, tmp_path):  # noqa: F811
    from tests.support.process import REPO

    gputui = tmux.start(["replay", str(REPO / "docs" / "recordings" / KEPT_RUN), "--speed", "max"])
    tmux.wait_for(r"REPLAY ❚❚ max 0:44/0:44 end")
    tmux.wait_for(r"133 samples/s median")
    tmux.keys("m")  # back to the measured phase: the run is live again
    tmux.wait_for(r"REPLAY ❚❚ max 0:14/0:44")
    tmux.keys("q")
    wait_gone([gputui])
