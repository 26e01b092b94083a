"""Runs apart from any terminal, as a user drives them: ``--detach``, ``gputui runs``,
``gputui stop``, a foreground run that outlives its terminal, and the look-back commands
on a run that is still going.  Real processes, real files; the command is a loop that
prints a throughput line five times a second until it is stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from gputui.record import events as ev
from gputui.record.recording import read_recording
from tests.support.live import live_runs, run_processes, wait_live, wait_readings, write_loop
from tests.support.process import gone, gputui_env, run_gputui, wait_for

STATE = "state"  # the tests' XDG_STATE_HOME under tmp_path (tests/support/isolation.py)


def detach(tmp_path, *extra: str) -> subprocess.CompletedProcess:
    write_loop(tmp_path)
    return run_gputui(["--record", "r.jsonl", "--detach", *extra, "--", sys.executable, "loop.py"], tmp_path, timeout=120)


def test_detach_returns_at_once_saying_how_to_attach_and_stop_and_the_run_goes_on(tmp_path):
    began = time.monotonic()
    result = detach(tmp_path)
    took = time.monotonic() - began
    assert result.returncode == 0, result.stderr
    live = wait_live(tmp_path / STATE)
    line = result.stdout.strip()
    assert line.count("\n") == 0  # one line
    assert f"{live.name} runs detached (pid {live.pid})" in line
    assert f"gputui attach {live.name}" in line and f"gputui stop {live.name}" in line
    assert took < 30, took  # it returned while the loop runs on
    assert live.detached and live.record_path == tmp_path / "r.jsonl" and live.kept_path is not None
    assert os.getsid(live.pid) != os.getsid(0)  # a session of its own: no terminal's hangup reaches it
    first = wait_readings(tmp_path / "r.jsonl", 3)
    wait_readings(tmp_path / "r.jsonl", first + 3)  # still growing: nobody is attached, the run goes on

    processes = run_processes(live)
    stopped = run_gputui(["stop", live.name], tmp_path)
    assert stopped.returncode == 0, stopped.stderr
    assert f"{live.name}: ended (stopped): stopped: by gputui stop (pid " in stopped.stdout
    wait_for(lambda: gone(processes), timeout=30)
    assert live_runs(tmp_path / STATE) == []
    recording = read_recording(tmp_path / "r.jsonl")
    assert recording.cut is None and recording.summary is not None
    outcome = recording.summary.outcome
    assert outcome is not None and outcome.kind == "stopped" and outcome.message.startswith("stopped: by gputui stop (pid ")
    assert read_recording(live.kept_path).summary == recording.summary  # the history copy is the same run


def test_gputui_runs_marks_a_live_run_with_its_pid_and_time(tmp_path):
    assert detach(tmp_path).returncode == 0
    live = wait_live(tmp_path / STATE)
    listed = run_gputui(["runs"], tmp_path)
    assert listed.returncode == 0, listed.stderr
    (row,) = [line for line in listed.stdout.splitlines() if live.name in line]
    assert f"live, pid {live.pid}, 0:" in row
    (entry,) = json.loads(run_gputui(["runs", "--json"], tmp_path).stdout)
    assert entry["live"]["pid"] == live.pid and entry["live"]["name"] == live.name and entry["outcome"] == "running"
    attached = run_gputui(["attach"], tmp_path)  # no terminal here: one line, and the run is left alone
    assert attached.returncode == 2 and f"needs a terminal; {live.name} goes on" in attached.stderr, attached.stderr
    assert live.alive()
    assert run_gputui(["stop", live.name], tmp_path).returncode == 0


def test_report_compare_and_export_read_a_live_run_so_far_and_say_it_is_live(tmp_path):
    assert detach(tmp_path, "--no-history").returncode == 0
    live = wait_live(tmp_path / STATE)
    assert live.kept_path is None and live.recording.parent == tmp_path / STATE / "gputui" / "live"  # a private copy, gone with the run
    wait_readings(live.recording, 3)
    report = run_gputui(["report", live.name], tmp_path)
    assert report.returncode == 0, report.stderr
    assert "**This run is live**: it is still going. Figures cover what it has recorded so far." in report.stdout
    assert "still running (live: figures so far)" in report.stdout
    exported = run_gputui(["export", "r.jsonl", "--csv", "rows.csv"], tmp_path)
    assert exported.returncode == 0 and "(the run is live: the rows so far)" in exported.stdout, exported.stderr
    compared = run_gputui(["compare", "r.jsonl", live.name], tmp_path)
    assert compared.returncode == 0 and "still running (live: figures so far)" in compared.stdout, compared.stderr
    assert run_gputui(["stop", live.name], tmp_path).returncode == 0
    assert not live.recording.exists()


def test_a_run_that_cannot_start_says_why_before_detaching_and_leaves_nothing(tmp_path):
    write_loop(tmp_path)
    result = run_gputui(["--record", "missing/r.jsonl", "--detach", "--", sys.executable, "loop.py"], tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("gputui: error: missing/r.jsonl: cannot write the recording")
    assert "Traceback" not in result.stderr
    assert live_runs(tmp_path / STATE) == []


def test_stop_and_attach_name_what_is_live_when_nothing_matches(tmp_path):
    stopped = run_gputui(["stop", "resnet"], tmp_path)
    assert stopped.returncode == 2 and "gputui: error: resnet: no run is live" in stopped.stderr
    attached = run_gputui(["attach"], tmp_path)
    assert attached.returncode == 1 and "no run is live to attach to" in attached.stderr


def start_foreground(tmp_path) -> subprocess.Popen:
    """A headless run in the foreground, as from a shell (its own session here, so a
    signal to its group reaches no one else)."""
    write_loop(tmp_path)
    return subprocess.Popen(
        [sys.executable, "-m", "gputui", "--record", "r.jsonl", "--", sys.executable, "loop.py"],
        cwd=tmp_path,
        env=gputui_env(tmp_path),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def test_a_foreground_run_outlives_a_hangup_and_stops_when_asked(tmp_path):
    process = start_foreground(tmp_path)
    try:
        live = wait_live(tmp_path / STATE)
        assert live.pid == process.pid and not live.detached  # listed, so attachable, though in the foreground
        seen = wait_readings(tmp_path / "r.jsonl", 3)
        os.killpg(process.pid, signal.SIGHUP)  # the terminal closed: not a request to stop
        wait_readings(tmp_path / "r.jsonl", seen + 5)
        assert process.poll() is None
        stopped = run_gputui(["stop", live.name], tmp_path)
        assert stopped.returncode == 0, stopped.stderr
        code = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert code == 130  # stopped, as a run stopped from its dashboard exits
    recording = read_recording(tmp_path / "r.jsonl")
    assert recording.events_of(ev.STOPPING)[0].data["reason"].startswith("by gputui stop (pid ")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: signal.Signals(s).name)
def test_sigterm_and_sigint_to_the_run_itself_stop_it(tmp_path, sig):
    assert detach(tmp_path).returncode == 0
    live = wait_live(tmp_path / STATE)
    wait_readings(tmp_path / "r.jsonl", 2)
    processes = run_processes(live)
    os.kill(live.pid, sig)
    wait_for(lambda: gone(processes), timeout=30)
    recording = read_recording(tmp_path / "r.jsonl")
    assert recording.summary is not None and recording.summary.outcome.kind == "stopped"
    assert recording.events_of(ev.STOPPING)[0].data["reason"] == f"received {signal.Signals(sig).name}"


def test_a_run_whose_process_was_killed_reads_as_ended_never_as_live(tmp_path):
    assert detach(tmp_path).returncode == 0
    live = wait_live(tmp_path / STATE)
    wait_readings(tmp_path / "r.jsonl", 2)
    processes = run_processes(live)
    os.kill(live.pid, signal.SIGKILL)  # no summary, no clean-up: its entry is left behind
    wait_for(lambda: gone(processes), timeout=30)  # its command dies with it (the guard's parent-death signal)
    entry = tmp_path / STATE / "gputui" / "live" / f"{live.name}.json"
    assert entry.exists()
    listed = run_gputui(["runs"], tmp_path)
    (row,) = [line for line in listed.stdout.splitlines() if live.kept_path.name in line]
    assert " cut " in row and "live" not in row
    assert not entry.exists()  # the stale entry was cleaned up by the listing
    attached = run_gputui(["attach"], tmp_path)
    assert attached.returncode == 1 and "no run is live" in attached.stderr
