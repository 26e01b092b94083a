"""`gputui` in a real terminal: tmux at 80×24, keys alone, the screen read back with
``capture-pane``; and the ways a dashboard session ends (q, Ctrl-C, SIGTERM, a dropped
terminal, SIGKILL) leave the run it started going, in a process of its own, until it is
stopped (``s`` in a dashboard, or ``gputui stop``), which leaves no process of it behind."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys

import psutil
import pytest

from gputui.record.recording import read_recording
from tests.support.live import run_processes, wait_live, wait_readings, write_loop
from tests.support.process import gone, run_gputui, wait_for
from tests.support.tmux import Tmux, needs_tmux, tmux, wait_gone  # noqa: F401  (tmux: the fixture)

# Real terminals waited on by the screenful, and keys sent without delay: run after the
# parallel pass, alone (a test elsewhere that uses the tmux fixture is marked serial too).
pytestmark = pytest.mark.serial


def descendants(pid: int) -> list[int]:
    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def stop_and_see_it_gone(tmp_path, live) -> None:
    """``gputui stop`` from anywhere; nothing of the run is left."""
    processes = run_processes(live)
    assert processes, "the run was not going"
    stopped = run_gputui(["stop", live.name], tmp_path)
    assert stopped.returncode == 0, stopped.stderr
    wait_for(lambda: gone(processes), timeout=30)


@needs_tmux
def test_run_smoke_by_keys_at_80x24_see_throughput_quit_and_the_run_goes_on(tmux, tmp_path):  # noqa: F811
    gputui = tmux.start(["--presets", "long.toml"], term="screen")  # screen: 16 colours
    tmux.wait_for(r"Presets")
    tmux.wait_for(r"○ watching")
    tmux.keys("Enter")  # smoke: the first preset
    match = tmux.wait_for(r"throughput median\s+([\d,]+) samples/s", timeout=60)
    assert float(match.group(1).replace(",", "")) > 0
    # Keys typed faster than a terminal app reads them may merge with an Escape into
    # one sequence, as on a real slow link: wait for each key's effect.
    tmux.escape_from(r"Enter/Esc close")
    tmux.wait_for(r"✓ #1 smoke")
    tmux.keys("Down")
    tmux.wait_for(r"(?m)^smoke-long")  # the details show the highlighted preset
    tmux.keys("Enter")  # smoke-long: runs until stopped
    tmux.wait_for(r"● #2 smoke-long")
    tmux.wait_for(r"[\d,]+ samples/s now")
    live = wait_live(tmp_path / "state")
    assert live.label == "smoke-long" and live.pid not in descendants(gputui)  # a process of its own, not the dashboard's child
    screen = tmux.screen()
    assert len(screen.splitlines()) <= 24 and max(len(line) for line in screen.splitlines()) <= 80
    for title in ("Throughput", "CPU", "GPUs", "Output", "Runs"):
        assert title in screen, f"{title} panel missing at 80x24:\n{screen}"
    # TERM=screen offers 16 colours: the app must keep to them (no 256-colour or RGB escapes).
    coloured = tmux.screen_with_colours()
    assert "\x1b[" in coloured and "38;5;" not in coloured and "38;2;" not in coloured
    tmux.keys("q")  # nothing to lose: the dashboard closes at once, the run goes on
    wait_gone([gputui])
    assert live.alive()
    stop_and_see_it_gone(tmp_path, live)


@needs_tmux
def test_ctrl_c_quits_the_dashboard_and_leaves_the_run_going(tmux, tmp_path):  # noqa: F811
    gputui = tmux.start(["--presets", "long.toml", "--preset", "smoke-long"])  # tmux-256color
    tmux.wait_for(r"[\d,]+ samples/s now")
    live = wait_live(tmp_path / "state")
    coloured = tmux.screen_with_colours()
    assert "38;5;" in coloured and "38;2;" not in coloured  # 256 colours, as the terminal offers
    tmux.keys("C-c")
    wait_gone([gputui])
    assert live.alive()
    stop_and_see_it_gone(tmp_path, live)


@needs_tmux
def test_a_dropped_terminal_leaves_the_run_going_and_another_terminal_attaches_and_stops_it(tmux, tmp_path):  # noqa: F811
    gputui = tmux.start(["--presets", "long.toml", "--preset", "smoke-long"])
    tmux.wait_for(r"[\d,]+ samples/s now")
    live = wait_live(tmp_path / "state")
    processes = run_processes(live)
    tmux.kill_server()  # what a dropped SSH connection does: SIGHUP, and the terminal is gone
    wait_gone([gputui])
    seen = wait_readings(live.kept_path, 1)
    wait_readings(live.kept_path, seen + 3)  # no one watches; it goes on
    other = Tmux(tmp_path)
    try:
        viewer = other.start(["attach"])  # the one live run
        other.wait_for(r"● #1 smoke-long")
        other.wait_for(r"[\d,]+ samples/s now")
        other.keys("s")
        other.wait_for(r"Stop #1 smoke-long\?")
        other.keys("y")
        other.wait_for(r"stopped: by the dashboard \(pid \d+ on /dev/pts/\d+\)")  # the summary says who stopped it
        wait_for(lambda: gone(processes), timeout=30)
        other.escape_from(r"Enter/Esc close")  # the summary: it may open after the outcome shows
        other.keys("q")
        wait_gone([viewer])
    finally:
        other.kill_server()
    outcome = read_recording(live.kept_path).summary.outcome
    assert outcome.kind == "stopped" and outcome.message.startswith("stopped: by the dashboard (pid ")


@needs_tmux
def test_sigterm_and_sigkill_to_the_dashboard_leave_the_run_and_its_recording_going(tmux, tmp_path):  # noqa: F811
    record = tmp_path / "run.jsonl"
    gputui = tmux.start(["--presets", "long.toml", "--preset", "smoke-long", "--record", str(record)])
    tmux.wait_for(r"REC run.jsonl")
    tmux.wait_for(r"[\d,]+ samples/s now")
    live = wait_live(tmp_path / "state")
    os.kill(gputui, signal.SIGTERM)
    wait_gone([gputui])
    seen = wait_readings(record, 1)
    wait_readings(record, seen + 3)
    viewer = tmux.start(["attach", live.name], session="u")  # another dashboard on it, then killed outright
    tmux.wait_for(r"● #1 smoke-long", session="u")
    os.kill(viewer, signal.SIGKILL)
    wait_gone([viewer])
    seen = wait_readings(record, seen + 1)
    wait_readings(record, seen + 3)
    stop_and_see_it_gone(tmp_path, live)
    recording = read_recording(record)
    assert recording.summary is not None and recording.summary.outcome.kind == "stopped"


@needs_tmux
def test_a_run_started_elsewhere_shows_in_the_runs_list_and_enter_attaches_to_it(tmux, tmp_path):  # noqa: F811
    gputui = tmux.start([], size=(120, 40))
    tmux.wait_for(r"○ watching")
    write_loop(tmp_path)
    assert run_gputui(["--detach", "--", sys.executable, "loop.py"], tmp_path).returncode == 0  # another terminal's
    live = wait_live(tmp_path / "state")
    # found by the dashboard's look for live runs: its name, then (on its line or the next) its day and "live"
    tmux.wait_for(r"● [\d-]+ .*loop\.py\s+live|● .*loop\.py[^\n]*\n[ │]*[\d-]+ [\d:]+ live", timeout=20)
    tmux.keys("Tab")  # from the presets to the runs
    tmux.wait_for(r"⏎ Open .*q Quit")
    tmux.keys("Enter")
    tmux.wait_for(r"● #1 loop\.py")
    tmux.wait_for(r"160 samples/s now")
    tmux.keys("q")
    wait_gone([gputui])
    stop_and_see_it_gone(tmp_path, live)


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
    # --headless alone records telemetry into the run history (here for a second)
    result = run_gputui(["--headless", "--duration", "1"], tmp_path, timeout=60)
    assert result.returncode == 0 and "gputui summary" in result.stderr, result.stderr
    assert len(json.loads(run_gputui(["runs", "--json"], tmp_path).stdout)) == 1


KEPT_RUN = "torch-resnet50-input-bound.jsonl"


@needs_tmux
def test_open_a_past_run_from_the_runs_list_by_keys(tmux, tmp_path):  # noqa: F811
    from tests.support.process import REPO

    runs = tmp_path / "state" / "gputui" / "runs"  # XDG_STATE_HOME of gputui_env
    runs.mkdir(parents=True)
    shutil.copy(REPO / "docs" / "recordings" / KEPT_RUN, runs / KEPT_RUN)
    gputui = tmux.start([])
    tmux.wait_for(r"○ watching")
    tmux.wait_for(r"✓ torch-resnet50-input…")  # the kept run, in the Runs list: its name, cut to the line
    tmux.wait_for(r"\n  \d\d-\d\d \d\d:\d\d +133/s")  # and below it, its day and its figure
    tmux.keys("Tab")  # from the presets to the runs
    tmux.wait_for(r"⏎ Open .*q Quit")  # the footer: the Runs list has the focus
    tmux.keys("Enter")
    tmux.wait_for(r"torch-resnet50-input-bound — ok")
    screen = tmux.wait_for(r"throughput median\s+133 samples/s").string
    assert "Input-bound" in screen or "input_bound" in screen, screen
    tmux.escape_from(r"Enter/Esc close")
    tmux.keys("q")
    wait_gone([gputui])


@needs_tmux
def test_replay_plays_a_recording_to_its_end(tmux, tmp_path):  # noqa: F811
    from tests.support.process import REPO

    gputui = tmux.start(["replay", str(REPO / "docs" / "recordings" / KEPT_RUN), "--speed", "max"])
    tmux.wait_for(r"REPLAY ❚❚ max 0:45/0:45 end")
    tmux.wait_for(r"133 samples/s median")
    tmux.keys("m")  # back to the measured phase: the run is live again
    tmux.wait_for(r"REPLAY ❚❚ max 0:15/0:45")
    tmux.keys("q")
    wait_gone([gputui])
