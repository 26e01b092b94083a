"""`gputui --record` end to end, as a user runs it: real processes, real files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import psutil
import pytest

from gputui.record import events as ev
from gputui.record.recording import read_recording
from tests.support.leftovers import no_leftovers  # noqa: F401  (the fixture)
from tests.support.presets import slow_presets
from tests.support.process import REPO, gone, run_gputui, start_gputui, try_read, wait_for
from tests.support.records import outcome_of

pytestmark = pytest.mark.usefixtures("no_leftovers")  # every test: nothing it started survives it


def test_smoke_preset_records_header_samples_events_and_a_matching_summary(tmp_path):
    out = tmp_path / "r.jsonl"
    result = run_gputui(["--record", str(out), "--preset", "smoke", "--interval", "0.1"], tmp_path)
    assert result.returncode == 0, result.stderr

    rec = read_recording(out)
    assert rec.cut is None
    header = rec.header
    assert header.schema == 1 and header.preset is not None and header.preset.name == "smoke"
    assert header.command is not None and header.command[1:3] == ["-m", "gputui.workloads"]
    assert header.host is not None and header.host.cpu_logical is not None and header.host.cpu_logical >= 1
    if not header.gpus:  # CPU-only machines: the header says why there is no GPU
        assert header.gpu_unavailable_reason
    assert len(rec.samples) >= 2
    kinds = [e.kind for e in rec.events]
    for kind in (ev.STARTED, ev.WORKLOAD, ev.PHASE, ev.THROUGHPUT, ev.RESULT, ev.OUTCOME):
        assert kind in kinds, kind
    assert rec.events_of(ev.OUTCOME)[0].data["kind"] == "exited"

    # The summary's median is the workload's own: same steps, same statistic.
    reported = rec.events_of(ev.RESULT)[0].data["samples_per_sec"]
    summary = rec.summary
    assert summary is not None and summary.throughput is not None and summary.outcome is not None
    assert summary.throughput.median == pytest.approx(reported, rel=1e-9)
    assert summary.throughput.readings == 40  # the preset's measured steps, warm-up excluded
    assert summary.outcome.ok is True
    # The progress line and the summary table went to stderr.
    assert "gputui summary" in result.stderr
    assert "throughput median" in result.stderr


@pytest.mark.parametrize(
    "body, expected",
    [
        ('[presets.bad]\nframework = "smoke"\nsteps = = 2\n', ":3:9: TOML syntax error"),
        ('[presets.bad]\nframework = "smoke"\nstepz = 2\n', ": [presets.bad].stepz: unknown key"),
        ('[presets.bad]\nframework = "smoke"\nsteps = "two"\n', ": [presets.bad].steps: expected a whole number"),
    ],
)
def test_malformed_presets_give_one_line_exit_2_and_change_no_file(tmp_path, body, expected):
    presets = tmp_path / "bad.toml"
    presets.write_bytes(body.encode())
    out = tmp_path / "r.jsonl"
    result = run_gputui(["--presets", str(presets), "--record", str(out), "--preset", "smoke"], tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"gputui: error: {presets}")
    assert expected in lines[0]
    assert "Traceback" not in result.stderr
    assert presets.read_bytes() == body.encode()
    assert not out.exists()


def test_unknown_preset_and_bad_interval_are_one_line_errors(tmp_path):
    result = run_gputui(["--record", str(tmp_path / "r.jsonl"), "--preset", "nope"], tmp_path)
    assert result.returncode == 2 and "no preset named 'nope'" in result.stderr
    result = run_gputui(["--record", str(tmp_path / "r.jsonl"), "--interval", "0.01"], tmp_path)
    assert result.returncode == 2 and "--interval: expected 0.1 s or more" in result.stderr


@pytest.mark.parametrize("name", ["r.jsonl", "r.jsonl.gz"])  # a .gz stream: readable to its last sync flush
def test_sigkill_of_the_recorder_leaves_no_child_and_a_readable_file(tmp_path, name):
    out = tmp_path / name
    proc = start_gputui(["--presets", str(slow_presets(tmp_path)), "--record", str(out), "--preset", "slow", "--interval", "0.1"], tmp_path)
    try:

        def started_and_sampling():
            rec = try_read(out)
            if rec is None:
                return None
            started = rec.events_of(ev.STARTED)
            return started[0].data["pid"] if started and len(rec.samples) >= 3 else None

        child = wait_for(started_and_sampling)
        tree = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
        assert child in tree
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        wait_for(lambda: gone(tree), timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    rec = read_recording(out)
    assert rec.summary is None and rec.cut
    assert len(rec.samples) >= 3


def test_sigterm_stops_the_run_and_finishes_the_recording(tmp_path):
    out = tmp_path / "r.jsonl"
    proc = start_gputui(["--presets", str(slow_presets(tmp_path)), "--record", str(out), "--preset", "slow", "--interval", "0.1"], tmp_path)
    try:
        wait_for(lambda: (rec := try_read(out)) is not None and rec.events_of(ev.THROUGHPUT))
        tree = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 143  # 128 + SIGTERM
        assert gone(tree)
    finally:
        if proc.poll() is None:
            proc.kill()
    rec = read_recording(out)
    assert rec.cut is None
    assert rec.summary is not None and rec.summary.outcome is not None and rec.summary.throughput is not None
    assert rec.summary.outcome.kind == "stopped"
    assert rec.summary.throughput.median == pytest.approx(80.0)
    assert rec.events_of(ev.STOPPING)[0].data["reason"] == "received SIGTERM"


def test_watch_mode_records_for_a_duration_and_attaches_to_a_pid(tmp_path):
    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        out = tmp_path / "w.jsonl"
        result = run_gputui(["--record", str(out), "--duration", "1.5", "--interval", "0.2", "--pid", str(job.pid)], tmp_path)
        assert result.returncode == 0, result.stderr
        rec = read_recording(out)
        assert rec.header.attach_pid == job.pid
        assert 3 <= len(rec.samples) <= 8
        roles = {p.pid: p.role for s in rec.samples for p in (s.host.processes if s.host else [])}
        assert roles.get(job.pid) == "main"
        assert rec.events_of(ev.STOPPING)[0].data["reason"] == "duration reached"
        assert rec.summary is not None and rec.summary.outcome is None
    finally:
        job.kill()
        job.wait()


@pytest.mark.parametrize("preset_args", [[], ["--preset", "smoke"]], ids=["watch", "preset"])
def test_the_users_diagnosis_table_reaches_headless_watch_and_run(tmp_path, preset_args):
    # One config, read once: watching (no preset) must apply the files' [diagnosis]
    # table just as a preset run does (watch mode used to record the default 80).
    user_file = tmp_path / "xdg" / "gputui" / "presets.toml"  # gputui_env's XDG_CONFIG_HOME
    user_file.parent.mkdir(parents=True)
    user_file.write_text("[diagnosis]\nthermal_warn_c = 50\n")
    out = tmp_path / "w.jsonl"
    result = run_gputui(["--headless", "--record", str(out), "--duration", "1.5", "--interval", "0.5", *preset_args], tmp_path)
    assert result.returncode in (0, 130), result.stderr  # 130: the duration stopped the preset's run
    assert (read_recording(out).header.diagnosis or {})["thermal_warn_c"] == 50.0


def test_failing_command_exits_1_with_its_outcome(tmp_path):
    presets = tmp_path / "p.toml"
    presets.write_text(f'[presets.fail]\ncommand = [{json.dumps(sys.executable)}, "-c", "import sys; sys.exit(3)"]\n')
    out = tmp_path / "r.jsonl"
    result = run_gputui(["--presets", str(presets), "--record", str(out), "--preset", "fail"], tmp_path)
    assert result.returncode == 1
    outcome = outcome_of(read_recording(out))
    assert outcome.kind == "exited" and outcome.exit_code == 3


def test_presets_list_and_show(tmp_path):
    listed = run_gputui(["presets", "list"], tmp_path)
    assert listed.returncode == 0 and listed.stdout.startswith("smoke")
    shown = run_gputui(["presets", "show", "smoke"], tmp_path)
    data = json.loads(shown.stdout)
    assert data["framework"] == "smoke" and data["argv"][1:3] == ["-m", "gputui.workloads"]
    assert os.path.samefile(data["source"], REPO / "presets.toml")
