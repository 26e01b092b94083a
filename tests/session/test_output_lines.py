"""The session's reading of its run's output lines (Session._handle_line): only a
well-formed protocol line makes a run speak gputui's protocol, and a user's script's own
protocol ``result`` is its claim, and says so in the summary."""

from __future__ import annotations

import json
import sys

import pytest

from gputui.presets.preset import load_file
from gputui.record import events as ev
from gputui.record.events import Event
from gputui.record.observer import Observer
from gputui.run.output_stream import OutputLine
from gputui.session.progress import summary_table
from gputui.session.session import Session, SessionConfig
from gputui.telemetry.gpu import GpuTelemetry
from tests.support.fake_nvml import FakeNvml

# MXNet's Speedometer, rendered from its format string (as in tests/run/test_throughput.py):
# 'Epoch[%d] Batch [%d]\tSpeed: %.2f samples/sec\t%s=%f'
SPEEDOMETER = "INFO:root:Epoch[0] Batch [{}]\tSpeed: 250.00 samples/sec\taccuracy=0.001116"


class Keep(Observer):
    def __init__(self) -> None:
        self.events: list[Event] = []

    def on_event(self, event: Event) -> None:
        self.events.append(event)


def session_of(tmp_path, preset: str) -> tuple[Session, Keep]:
    """A session of ``preset`` (TOML keys), not started: its lines are handed in by the test."""
    (tmp_path / "p.toml").write_text(f"[presets.job]\n{preset}\n")
    session = Session(SessionConfig(preset=load_file(tmp_path / "p.toml")["job"]), gpu=GpuTelemetry(FakeNvml()))
    kept = Keep()
    session.add_observer(kept)
    return session, kept


def command(tmp_path) -> tuple[Session, Keep]:
    return session_of(tmp_path, f"command = [{json.dumps(sys.executable)}, 'train.py']")


def test_a_line_naming_gputui_does_not_switch_the_run_to_the_protocol(tmp_path):
    """A chat log's "ask @gputui x" before the run's own "250 samples/sec" lines: an
    ordinary line, recorded as output, and the run's rates are read."""
    session, kept = command(tmp_path)
    session._handle_line(OutputLine("ask @gputui x", "stdout", False))
    for batch in (20, 40, 60):
        session._handle_line(OutputLine(SPEEDOMETER.format(batch), "stdout", False))
    assert [e.payload.text for e in kept.events if e.kind == ev.OUTPUT][0] == "ask @gputui x"
    readings = [e.payload for e in kept.events if e.kind == ev.THROUGHPUT]
    assert readings and {r.samples_per_sec for r in readings} == {250.0}  # redraws closer than MIN_READING_GAP_S are one


def test_a_malformed_protocol_line_is_output(tmp_path):
    session, kept = command(tmp_path)
    session._handle_line(OutputLine('@gputui {"event": "step", "samples": 32}', "stdout", False))
    session._handle_line(OutputLine(SPEEDOMETER.format(20), "stdout", False))
    assert [e.kind for e in kept.events].count(ev.OUTPUT) == 2
    assert [e.payload.samples_per_sec for e in kept.events if e.kind == ev.THROUGHPUT] == [250.0]


def test_a_well_formed_protocol_line_makes_the_run_speak_it(tmp_path):
    """From a well-formed line on, the protocol alone measures the run."""
    session, kept = command(tmp_path)
    session._handle_line(OutputLine('@gputui {"event": "start", "v": 1, "batch_size": 32}', "stdout", False))
    session._handle_line(OutputLine(SPEEDOMETER.format(20), "stdout", False))
    session._handle_line(OutputLine('@gputui {"event": "step", "phase": "measure", "step": 3, "samples": 32, "seconds": 0.02}', "stdout", False))
    assert [e.payload.samples_per_sec for e in kept.events if e.kind == ev.THROUGHPUT] == [32 / 0.02]


def test_a_scripts_own_result_is_its_claim_in_the_summary(tmp_path):
    session, _ = command(tmp_path)
    session._handle_line(OutputLine('{"event":"result"} @gputui {"event": "result", "samples_per_sec": 1234.5}', "stdout", False))
    tp = session.summary_builder.build().throughput
    assert (tp.reported.samples_per_sec, tp.reported.source) == (1234.5, "script")
    row = next(line for line in summary_table(session.summary_builder.build()) if "reported by the run" in line)
    assert "1,234" in row and "the script's own claim" in row


def test_gputuis_own_workload_result_is_no_claim(tmp_path):
    session, _ = session_of(tmp_path, 'framework = "smoke"\nbatch_size = 8')
    session._handle_line(OutputLine('@gputui {"event": "result", "samples_per_sec": 1234.5}', "stdout", False))
    tp = session.summary_builder.build().throughput
    assert tp.reported.source == "gputui"
    assert not any("claim" in line for line in summary_table(session.summary_builder.build()))


def test_a_bars_redraws_are_recorded_once_a_second_and_a_viewer_shows_its_current_state(tmp_path):
    """tqdm's '\\r' redraws (gputui.run.output_stream marks them progress): the recording
    keeps one a second for a viewer's output pane, where each replaces the one before,
    and the bar's closing line replaces the last."""
    from gputui.view.state import DashboardState

    session, kept = command(tmp_path)
    bar = "train:  {}%|#    | {}/100 [00:0{}<00:09, 10.00it/s]"
    for t, done in [(0.0, 1), (0.3, 4), (0.6, 7), (1.1, 12), (1.5, 16)]:
        session._news_t = t  # when the line came
        session._handle_line(OutputLine(bar.format(done, done, int(t)), "stdout", True))
    session._news_t = 1.6
    session._handle_line(OutputLine("train: 100%|#####| 100/100 [00:10<00:00, 10.00it/s]", "stdout", False))
    outputs = [e.payload for e in kept.events if e.kind == ev.OUTPUT]
    assert [(o.progress, o.text.split("|")[1]) for o in outputs] == [(True, "#    "), (True, "#    "), (None, "#####")]
    assert [o.text.split("| ")[1].split(" ")[0] for o in outputs[:2]] == ["1/100", "12/100"]

    state = DashboardState()
    state.log_line("note", "── job ──")
    state.log_line("stdout", outputs[0].text, redraw=True)
    assert list(state.log)[-1] == ("stdout", outputs[0].text) and state.log_count == 2  # shown at once, before its line ends
    state.log_line("stdout", outputs[1].text, redraw=True)
    state.log_line("stdout", outputs[2].text, redraw=bool(outputs[2].progress))
    state.log_line("stdout", "epoch 1 done")
    assert list(state.log) == [("note", "── job ──"), ("stdout", outputs[2].text), ("stdout", "epoch 1 done")]


def test_through_the_command_line_a_chat_line_naming_gputui_leaves_the_rates_read(tmp_path):
    from tests.support.process import run_gputui

    script = "print('ask @gputui x', flush=True)\nimport time\nfor i in range(6):\n    print(f'step {i}: 250 samples/sec', flush=True)\n    time.sleep(0.3)\n"
    (tmp_path / "chat.py").write_text(script)
    done = run_gputui(["--headless", "--no-probe", "--record", "r.jsonl", "--", sys.executable, "chat.py"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "ask @gputui x" in done.stdout
    assert "250 samples/s" in done.stderr  # the summary's figure: the run was read, not switched to the protocol


def test_a_smoothed_bars_closing_line_counts_once_the_run_has_ended(tmp_path):
    """A run whose tqdm bar slowed after a pause (tests/data/progress/tqdm_full_bar_smoothed.log,
    real tqdm 4.70.1 output): the closing line's exact time, which no later line confirms
    until the run ends, is in the summary's figure (300 steps over 10.18 s)."""
    from tests.support.process import REPO, run_gputui

    log = REPO / "tests" / "data" / "progress" / "tqdm_full_bar_smoothed.log"
    (tmp_path / "bar.py").write_text(f"import sys\nsys.stdout.write(open({str(log)!r}, encoding='utf-8').read())\n")
    done = run_gputui(["--headless", "--no-probe", "--record", "r.jsonl", "--", sys.executable, "bar.py"], tmp_path)
    assert done.returncode == 0, done.stderr
    summary = next(json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines() if '"type":"summary"' in line.replace(" ", ""))
    assert summary["throughput"]["unit"] == "steps"
    assert summary["throughput"]["figure"] == pytest.approx(300 / 10.18, rel=0.01)
